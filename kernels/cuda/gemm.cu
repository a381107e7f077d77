// kernels/cuda/gemm.cu — gemm, linear_forward and linear_backward through cuBLASLt:
// bf16 A/B, fp32 compute and scaling (CUBLAS_COMPUTE_32F), C/D bf16 for [act] outputs and
// fp32 for dw (which accumulates: beta = 1, so the sum is formed in fp32 and stored fp32).
//
// Row-major to column-major: a row-major (m, n) matrix is the column-major (n, m) matrix
// of its transpose, so c = op(a) op(b) (row-major) is computed as
// c^T = op(b)^T op(a)^T (column-major): cuBLASLt's A is our b, its B is our a, and its D
// has n rows, m columns, leading dimension n.
//
// linear_forward fuses the bias as cuBLASLt's BIAS epilogue (bias fp32, per row of the
// column-major D = per column of our out). linear_backward: dinp = dout w^T (bf16 out,
// overwritten), dw += inp^T dout (fp32, beta = 1), dbias by kcu_colsum (deterministic fixed
// slices in double; cuBLASLt's BGRADB epilogue would overwrite, not accumulate, so it
// would need a scratch vector and an add — a later fusion).
//
// Shapes cuBLASLt has no algorithm for (e.g. odd leading dimensions with bf16, which its
// 16-byte alignment rules exclude) go to a plain tiled fp32-accumulating kernel here, so an
// odd shape is slow, never wrong. Plans (descriptors + heuristic) are built per call for
// now; caching them by shape is a later speed step.
#include <string.h>

#include "kernels/cuda/kcu.h"

extern "C" tsr_status kcu_scale_act(kb_t *kb, void *y, float alpha, size_t n);

// ---- fallback kernel: 32x32 tiles, fp32 accumulation -----------------------------------
enum { FB_T = 32 };

// c (m, n) row-major = alpha op(a) op(b) + beta c, c either bf16 (c_act) or fp32 (c_f32);
// bias (n) fp32 added when given.
__global__ void k_gemm_fallback(int ta, int tb, int m, int n, int k, float alpha, const act_t *a,
                                const act_t *b, float beta, act_t *c_act, float *c_f32,
                                const float *bias) {
  __shared__ float As[FB_T][FB_T + 1], Bs[FB_T][FB_T + 1];
  int row = blockIdx.y * FB_T + threadIdx.y, col = blockIdx.x * FB_T + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += FB_T) {
    int ka = k0 + threadIdx.x, r = blockIdx.y * FB_T + threadIdx.y;  // As[y][x] = op(a)[r][ka]
    As[threadIdx.y][threadIdx.x] =
        (r < m && ka < k) ? kcu_ld(a, ta ? (size_t)ka * m + r : (size_t)r * k + ka) : 0.0f;
    int kb_ = k0 + threadIdx.y, cc = blockIdx.x * FB_T + threadIdx.x;  // Bs[y][x] = op(b)[kb_][cc]
    Bs[threadIdx.y][threadIdx.x] =
        (kb_ < k && cc < n) ? kcu_ld(b, tb ? (size_t)cc * k + kb_ : (size_t)kb_ * n + cc) : 0.0f;
    __syncthreads();
#pragma unroll 8
    for (int t = 0; t < FB_T; t++) acc += As[threadIdx.y][t] * Bs[t][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) {
    size_t o = (size_t)row * n + col;
    float v = alpha * acc;
    if (bias) v += bias[col];
    if (c_f32) {
      if (beta != 0.0f) v += beta * c_f32[o];
      c_f32[o] = v;
    } else {
      if (beta != 0.0f) v += beta * kcu_ld(c_act, o);
      kcu_st(c_act, o, v);
    }
  }
}

// ---- cuBLASLt --------------------------------------------------------------------------
// Descriptors freed on every path.
struct lt_plan {
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  ~lt_plan() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// The largest power of two (<= 256) that divides the address.
static uint32_t ptr_align(const void *p) {
  uintptr_t u = (uintptr_t)p;
  uint32_t a = 256;
  while (a > 1 && (u % a)) a /= 2;
  return a;
}

// Row-major c (m, n) = alpha op(a) op(b) + beta c (+ bias per column), c bf16 or fp32
// (c_f32). Falls back to k_gemm_fallback when cuBLASLt offers no algorithm.
static tsr_status gemm_rm(kb_t *kb, const char *op, int ta, int tb, int m, int n, int k, float alpha,
                          const act_t *a, const act_t *b, float beta, void *c, int c_f32,
                          const float *bias) {
  kcu_ctx *x = kcu(kb);
  if (m == 0 || n == 0) return TSR_OK;
  if (k == 0) {  // c = beta c (+ bias): no product
    if (bias || c_f32) {
      k_gemm_fallback<<<dim3((n + FB_T - 1) / FB_T, (m + FB_T - 1) / FB_T), dim3(FB_T, FB_T), 0,
                        x->stream>>>(ta, tb, m, n, 0, alpha, a, b, beta, c_f32 ? NULL : (act_t *)c,
                                     c_f32 ? (float *)c : NULL, bias);
      KCU_LAUNCHED(op);
      return TSR_OK;
    }
    return kcu_scale_act(kb, c, beta, (size_t)m * n);
  }
  // The BIAS epilogue reads the bias with vector loads: an fp32 bias that is not 16-byte
  // aligned (a pointer into a flat parameter buffer) takes the plain kernel, which adds it
  // before the one rounding. TODO(speed): a per-run aligned copy of such biases.
  int force_fallback = bias && ptr_align(bias) < 16;
  lt_plan p;
  cudaDataType_t ct = c_f32 ? CUDA_R_32F : CUDA_R_16BF;
  KCU_LT(op, cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t opA = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opB = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  KCU_LT(op, cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA));
  KCU_LT(op, cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB));
  if (bias) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    cudaDataType_t bt = CUDA_R_32F;
    KCU_LT(op, cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    KCU_LT(op, cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    KCU_LT(op, cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
  }
  // Lt A = our b: stored column-major as (tb ? k : n) rows x (tb ? n : k) columns.
  KCU_LT(op, cublasLtMatrixLayoutCreate(&p.la, CUDA_R_16BF, tb ? k : n, tb ? n : k, tb ? k : n));
  // Lt B = our a: (ta ? m : k) x (ta ? k : m).
  KCU_LT(op, cublasLtMatrixLayoutCreate(&p.lb, CUDA_R_16BF, ta ? m : k, ta ? k : m, ta ? m : k));
  KCU_LT(op, cublasLtMatrixLayoutCreate(&p.lc, ct, n, m, n));
  KCU_LT(op, cublasLtMatmulPreferenceCreate(&p.pref));
  KCU_LT(op, cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &x->lt_ws_bytes, sizeof x->lt_ws_bytes));
  // cuBLASLt assumes 256-byte aligned buffers unless told: the model passes pointers into
  // larger buffers (kernels_act_at), so state each buffer's real alignment.
  uint32_t al_a = ptr_align(b), al_b = ptr_align(a), al_c = ptr_align(c);
  KCU_LT(op, cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                  &al_a, sizeof al_a));
  KCU_LT(op, cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                  &al_b, sizeof al_b));
  KCU_LT(op, cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                  &al_c, sizeof al_c));
  KCU_LT(op, cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                  &al_c, sizeof al_c));
  cublasLtMatmulHeuristicResult_t h;
  int found = 0;
  cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(x->lt, p.op, p.la, p.lb, p.lc, p.lc, p.pref, 1, &h, &found);
  if (force_fallback || s != CUBLAS_STATUS_SUCCESS || found == 0) {
    // No cuBLASLt algorithm for this shape/alignment: the plain kernel (slow, correct).
    k_gemm_fallback<<<dim3((n + FB_T - 1) / FB_T, (m + FB_T - 1) / FB_T), dim3(FB_T, FB_T), 0,
                      x->stream>>>(ta, tb, m, n, k, alpha, a, b, beta, c_f32 ? NULL : (act_t *)c,
                                   c_f32 ? (float *)c : NULL, bias);
    KCU_LAUNCHED(op);
    return TSR_OK;
  }
  // beta == 0: cuBLASLt does not read C, so NaN in c is overwritten (kernels.h).
  KCU_LT(op, cublasLtMatmul(x->lt, p.op, &alpha, b, p.la, a, p.lb, &beta, c, p.lc, c, p.lc, &h.algo,
                            x->lt_ws, x->lt_ws_bytes, x->stream));
  return TSR_OK;
}

extern "C" tsr_status kcu_gemm(kb_t *kb, int trans_a, int trans_b, int m, int n, int k, float alpha,
                               const void *a, const void *b, float beta, void *c) {
  const char *op = "gemm";
  KCU_DIM(op, m);
  KCU_DIM(op, n);
  KCU_DIM(op, k);
  if (m == 0 || n == 0) return TSR_OK;
  KCU_NEED(op, c);
  if (k > 0) {
    KCU_NEED(op, a);
    KCU_NEED(op, b);
  }
  return gemm_rm(kb, op, trans_a != 0, trans_b != 0, m, n, k, alpha, (const act_t *)a,
                 (const act_t *)b, beta, c, 0, NULL);
}

extern "C" tsr_status kcu_linear_forward(kb_t *kb, void *out, const void *inp, const void *w,
                                         const float *bias, int M, int K, int N) {
  const char *op = "linear_forward";
  KCU_DIM(op, M);
  KCU_DIM(op, K);
  KCU_DIM(op, N);
  if (M == 0 || N == 0) return TSR_OK;
  KCU_NEED(op, out);
  if (K > 0) {
    KCU_NEED(op, inp);
    KCU_NEED(op, w);
  }
  return gemm_rm(kb, op, 0, 0, M, N, K, 1.0f, (const act_t *)inp, (const act_t *)w, 0.0f, out, 0, bias);
}

extern "C" tsr_status kcu_linear_backward(kb_t *kb, void *dinp, float *dw, float *dbias,
                                          const void *dout, const void *inp, const void *w, int M,
                                          int K, int N) {
  const char *op = "linear_backward";
  KCU_DIM(op, M);
  KCU_DIM(op, K);
  KCU_DIM(op, N);
  if (M > 0 && N > 0) KCU_NEED(op, dout);
  tsr_status st;
  if (dinp) {
    if (N > 0 && K > 0) KCU_NEED(op, w);
    if ((st = gemm_rm(kb, op, 0, 1, M, K, N, 1.0f, (const act_t *)dout, (const act_t *)w, 0.0f, dinp, 0,
                      NULL)))
      return st;
  }
  if (dw) {
    if (M > 0 && K > 0) KCU_NEED(op, inp);
    if ((st = gemm_rm(kb, op, 1, 0, K, N, M, 1.0f, (const act_t *)inp, (const act_t *)dout, 1.0f, dw, 1,
                      NULL)))
      return st;
  }
  if (dbias && N > 0)
    return kcu_colsum(kb, op, dbias, NULL, 1, 0, (const act_t *)dout, NULL, NULL, NULL, 1, M, N, N);
  return TSR_OK;
}
