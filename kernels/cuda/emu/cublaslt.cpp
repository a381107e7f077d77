// kernels/cuda/emu/cublaslt.cpp — the emulated device's cuBLASLt (cuemu.h): the part of
// the API tessera calls, computing what cuBLASLt's documentation says a matmul is:
//   D = epilogue(alpha op(A) op(B) + beta C)   (column-major; op = transpose or not)
// with op(A) m x k, op(B) k x n, C and D m x n, accumulated in fp32 (CUBLAS_COMPUTE_32F),
// and the epilogues
//   BIAS:          + bias[i] (D's type, one per row of D)
//   GELU_AUX:      aux = v, D = GELU(v)            (aux: D's type and shape, leading
//   GELU_AUX_BIAS: v += bias[i], aux = v, D = GELU(v)     dimension EPILOGUE_AUX_LD)
//   DGELU:         D = v GELU'(aux)
// GELU is the tanh form. A strided batch (the layouts' BATCH_COUNT, equal on all four, and
// STRIDED_BATCH_OFFSET, in elements, 0 allowed: every matmul reads the same matrix; the
// bias's BIAS_BATCH_STRIDE) is that matmul for each of its problems. The heuristic offers
// one algorithm, except where the documented rules exclude the epilogue (an aux leading
// dimension that is not a multiple of 8, an aux epilogue in a batch): then none, as cuBLASLt
// answers. A matmul runs in stream order like a kernel.
#include <cublasLt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/emu/cuemu.h"
#include "kernels/cuda/emu/emu_internal.h"

namespace {

struct desc_rec {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = NULL;
  cudaDataType_t bias_type = CUDA_R_32F;
  const void *aux = NULL;
  int64_t aux_ld = 0;
  int64_t bias_stride = 0;
};
struct layout_rec {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;  // elements between consecutive matrices of the batch
};
struct handle_rec {
  int unused;
};
struct pref_rec {
  size_t ws = 0;
};

float load(const void *p, cudaDataType t, size_t i) {
  if (t == CUDA_R_32F) return ((const float *)p)[i];
  return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}
void store(void *p, cudaDataType t, size_t i, float v) {
  if (t == CUDA_R_32F) ((float *)p)[i] = v;
  else ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
}

float gelu(float x) {
  const float c = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}
float dgelu(float x) {
  const float c = 0.7978845608028654f;
  float u = c * (x + 0.044715f * x * x * x), t = tanhf(u);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * c * (1.0f + 3.0f * 0.044715f * x * x);
}

int has_aux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         e == CUBLASLT_EPILOGUE_DGELU;
}
int has_bias(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
int supported(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_DEFAULT || has_aux(e) || has_bias(e);
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  *h = (cublasLtHandle_t) new handle_rec();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  delete (handle_rec *)h;
  return CUBLAS_STATUS_SUCCESS;
}
const char *cublasLtGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t c, cudaDataType_t s) {
  desc_rec *r = new desc_rec();
  r->compute = c;
  r->scale = s;
  *d = (cublasLtMatmulDesc_t)r;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete (desc_rec *)d;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                              const void *buf, size_t n) {
  desc_rec *r = (desc_rec *)d;
#define TAKE(field)                                         \
  do {                                                      \
    if (n != sizeof r->field) return CUBLAS_STATUS_INVALID_VALUE; \
    memcpy(&r->field, buf, n);                              \
  } while (0)
  switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA: TAKE(ta); break;
    case CUBLASLT_MATMUL_DESC_TRANSB: TAKE(tb); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: TAKE(epi); break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: TAKE(bias); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: TAKE(bias_type); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: TAKE(aux); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: TAKE(aux_ld); break;
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: TAKE(bias_stride); break;
    default: return CUBLAS_STATUS_NOT_SUPPORTED;  // not emulated
  }
#undef TAKE
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (t != CUDA_R_32F && t != CUDA_R_16BF) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (ld < (int64_t)rows || ld < 1) return CUBLAS_STATUS_INVALID_VALUE;
  layout_rec *r = new layout_rec();
  r->type = t, r->rows = rows, r->cols = cols, r->ld = ld;
  *l = (cublasLtMatrixLayout_t)r;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a,
                                                const void *buf, size_t n) {
  layout_rec *r = (layout_rec *)l;
  if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) {
    if (n != sizeof r->batch) return CUBLAS_STATUS_INVALID_VALUE;
    int32_t v;
    memcpy(&v, buf, n);
    if (v < 1) return CUBLAS_STATUS_INVALID_VALUE;
    r->batch = v;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (a == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET) {
    if (n != sizeof r->stride) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&r->stride, buf, n);
    return r->stride < 0 ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;  // not emulated
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete (layout_rec *)l;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = (cublasLtMatmulPreference_t) new pref_rec();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete (pref_rec *)p;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t a,
                                                    const void *buf, size_t n) {
  if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
    if (n != sizeof(size_t)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&((pref_rec *)p)->ws, buf, n);
  }
  return CUBLAS_STATUS_SUCCESS;  // the alignment minimums: every alignment is served here
}

// The shapes must agree: op(A) m x k, op(B) k x n, C and D m x n, one batch count.
static int shapes(const desc_rec *d, const layout_rec *A, const layout_rec *B, const layout_rec *C,
                  const layout_rec *D, uint64_t *m, uint64_t *n, uint64_t *k) {
  uint64_t am = d->ta == CUBLAS_OP_N ? A->rows : A->cols, ak = d->ta == CUBLAS_OP_N ? A->cols : A->rows;
  uint64_t bk = d->tb == CUBLAS_OP_N ? B->rows : B->cols, bn = d->tb == CUBLAS_OP_N ? B->cols : B->rows;
  if (ak != bk || C->rows != am || C->cols != bn || D->rows != am || D->cols != bn) return 0;
  if (A->batch != D->batch || B->batch != D->batch || C->batch != D->batch) return 0;
  *m = am, *n = bn, *k = ak;
  return 1;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                              cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                              cublasLtMatmulPreference_t pref, int want,
                                              cublasLtMatmulHeuristicResult_t res[], int *got) {
  (void)h, (void)pref;
  const desc_rec *d = (const desc_rec *)op;
  uint64_t m, n, k;
  *got = 0;
  if (want < 1) return CUBLAS_STATUS_INVALID_VALUE;
  if (!shapes(d, (layout_rec *)A, (layout_rec *)B, (layout_rec *)C, (layout_rec *)D, &m, &n, &k))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported(d->epi)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (has_aux(d->epi) && (d->aux_ld % 8 != 0 || d->aux_ld < (int64_t)m || ((layout_rec *)D)->batch > 1))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  // the bias in D's type (cuBLASLt's rule outside FP8; an H200 offers nothing else)
  if (has_bias(d->epi) && d->bias_type != ((layout_rec *)D)->type) return CUBLAS_STATUS_NOT_SUPPORTED;
  memset(&res[0], 0, sizeof res[0]);
  res[0].state = CUBLAS_STATUS_SUCCESS;
  res[0].wavesCount = 1.0f;
  *got = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Ad, const void *B,
                              cublasLtMatrixLayout_t Bd, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cd, void *D, cublasLtMatrixLayout_t Dd,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes,
                              cudaStream_t stream) {
  (void)h, (void)algo, (void)ws, (void)ws_bytes;
  desc_rec d = *(const desc_rec *)op;  // as set now: later changes do not reach this matmul
  layout_rec a = *(layout_rec *)Ad, b = *(layout_rec *)Bd, c = *(layout_rec *)Cd, dd = *(layout_rec *)Dd;
  uint64_t m, n, k;
  if (!shapes(&d, &a, &b, &c, &dd, &m, &n, &k)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported(d.epi) || d.scale != CUDA_R_32F || d.compute != CUBLAS_COMPUTE_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if ((has_bias(d.epi) && (!d.bias || d.bias_type != dd.type)) || (has_aux(d.epi) && !d.aux))
    return CUBLAS_STATUS_INVALID_VALUE;
  float al = *(const float *)alpha, be = *(const float *)beta;  // host scalars (the default mode)
  cuemu_stream_work(stream, [=]() {
    for (int32_t q = 0; q < dd.batch; q++) {  // problem q: each operand at q times its stride
      const size_t oa = (size_t)q * a.stride, ob = (size_t)q * b.stride, oc = (size_t)q * c.stride;
      const size_t od = (size_t)q * dd.stride, obias = (size_t)q * d.bias_stride;
      for (uint64_t j = 0; j < n; j++)
        for (uint64_t i = 0; i < m; i++) {
          float acc = 0.0f;
          for (uint64_t p = 0; p < k; p++) {
            size_t ia = d.ta == CUBLAS_OP_N ? i + p * a.ld : p + i * a.ld;
            size_t ib = d.tb == CUBLAS_OP_N ? p + j * b.ld : j + p * b.ld;
            acc += load(A, a.type, oa + ia) * load(B, b.type, ob + ib);
          }
          float v = al * acc;
          if (be != 0.0f) v += be * load(C, c.type, oc + i + j * c.ld);
          if (has_bias(d.epi)) v += load(d.bias, d.bias_type, obias + i);
          size_t iaux = i + j * (size_t)d.aux_ld;
          if (d.epi == CUBLASLT_EPILOGUE_GELU_AUX || d.epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
            store((void *)d.aux, dd.type, iaux, v);
            v = gelu(v);
          } else if (d.epi == CUBLASLT_EPILOGUE_DGELU) {
            v *= dgelu(load(d.aux, dd.type, iaux));
          }
          store(D, dd.type, od + i + j * dd.ld, v);
        }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
