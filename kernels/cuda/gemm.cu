// kernels/cuda/gemm.cu — gemm, linear_forward/backward and the GELU-fused linear entries
// through cuBLASLt: bf16 A/B, fp32 compute and scaling (CUBLAS_COMPUTE_32F), C/D bf16 for
// [act] outputs and fp32 for dw (which accumulates: beta = 1, so the sum is formed in fp32
// and stored fp32).
//
// Row-major to column-major: a row-major (m, n) matrix is the column-major (n, m) matrix
// of its transpose, so c = op(a) op(b) (row-major) is computed as
// c^T = op(b)^T op(a)^T (column-major): cuBLASLt's A is our b, its B is our a, and its D
// has n rows, m columns, leading dimension n.
//
// Epilogues: linear_forward's bias is cuBLASLt's BIAS epilogue (per row of the column-major
// D = per column of our out). cuBLASLt takes the bias in D's type (its documented rule, FP8
// aside; on an H200 it offers no algorithm for an fp32 bias with bf16 D), so for a bf16 D
// the fp32 bias is first rounded to bf16 into the scratch (bias_bf16): u |bias| more than
// the one rounding of out, as PyTorch's bf16 linear, which keeps its bias in bf16.
// linear_gelu_forward uses GELU_AUX_BIAS (or GELU_AUX): D = GELU(acc + bias) and the aux matrix = acc + bias (pre), both stored bf16;
// linear_backward_dgelu's dinp uses DGELU: D = GELU'(aux) * acc with aux = pre. cuBLASLt's
// GELU is the tanh approximation of kernels.h (its documented sample gives
// GELU(-1) = -0.158806, tanh form -0.158808, erf form -0.158655), evaluated on the fp32
// accumulator with its own tanh: it may differ from the CPU's tanhf by a few fp32 ulps,
// far below the one bf16 rounding of the output (2^-9 relative), which is what the
// tolerance of tests/kernels/test_backend_ops.c allows. Where cuBLASLt offers no algorithm
// (aux leading dimension not a multiple of 8, misaligned bias) or TESSERA_CUDA_LT_GELU=0,
// the same entries run the plain GEMM and the GELU kernels of elementwise.cu: the composition
// that defines them (kernels.h), which rounds pre to bf16 before GELU (the backward: the
// product before GELU' is applied), so two roundings (test_backend_ops.c's tol_of allows
// for it; measured on the emulated device, kernels/cuda/emu). linear_backward: dinp = dout w^T (bf16 out, overwritten), dw += inp^T dout
// (fp32, beta = 1), dbias by kcu_colsum (fp32 partials of fixed row slices, 16-byte
// loads; cuBLASLt's BGRADB epilogue would overwrite, not accumulate).
//
// gemm_batched: one cuBLASLt matmul over a strided batch (BATCH_COUNT and
// STRIDED_BATCH_OFFSET on the three layouts, a stride 0 where every problem reads the same
// operand; the bias's BIAS_BATCH_STRIDE), its plan keyed by the batch and strides too;
// where cuBLASLt has no algorithm for the batch, the problems run one after another as gemm.
//
// Plans: the descriptors and the heuristic's algorithm of each shape (transposes, sizes,
// row strides, output dtype, epilogue, operand alignments) are built once and cached (LRU,
// 1024 plans: the shapes of a run are those of the model times the microbatch sizes the
// planner makes); a call only sets the epilogue's pointers and launches. Shapes cuBLASLt has no
// algorithm for (e.g. odd leading dimensions with bf16, which its 16-byte alignment rules
// exclude) go to a plain tiled fp32-accumulating kernel here: slow, never wrong.
#include <stdint.h>
#include <string.h>

#include <memory>
#include <unordered_map>

#include "kernels/check.h"
#include "kernels/cuda/kcu.h"

extern "C" {
#include "core/log.h"
}

// ---- fallback kernel: 32x32 tiles, fp32 accumulation -----------------------------------
enum { FB_T = 32 };

// c (m, n) row-major = alpha op(a) op(b) + beta c, c either bf16 (c_act) or fp32 (c_f32);
// bias (n) fp32 added when given. Rows of a, b, c start lda, ldb, ldc elements apart.
__global__ void k_gemm_fallback(int ta, int tb, int m, int n, int k, float alpha, const act_t *a,
                                int lda, const act_t *b, int ldb, float beta, act_t *c_act,
                                float *c_f32, int ldc, const float *bias) {
  __shared__ float As[FB_T][FB_T + 1], Bs[FB_T][FB_T + 1];
  int row = blockIdx.y * FB_T + threadIdx.y, col = blockIdx.x * FB_T + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += FB_T) {
    int ka = k0 + threadIdx.x, r = blockIdx.y * FB_T + threadIdx.y;  // As[y][x] = op(a)[r][ka]
    As[threadIdx.y][threadIdx.x] =
        (r < m && ka < k) ? kcu_ld(a, ta ? (size_t)ka * lda + r : (size_t)r * lda + ka) : 0.0f;
    int kb_ = k0 + threadIdx.y, cc = blockIdx.x * FB_T + threadIdx.x;  // Bs[y][x] = op(b)[kb_][cc]
    Bs[threadIdx.y][threadIdx.x] =
        (kb_ < k && cc < n) ? kcu_ld(b, tb ? (size_t)cc * ldb + kb_ : (size_t)kb_ * ldb + cc) : 0.0f;
    __syncthreads();
#pragma unroll 8
    for (int t = 0; t < FB_T; t++) acc += As[threadIdx.y][t] * Bs[t][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) {
    size_t o = (size_t)row * ldc + col;
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

// ---- cuBLASLt plans ----------------------------------------------------------------------
enum lt_epi { EPI_NONE, EPI_BIAS, EPI_GELU_AUX, EPI_GELU_AUX_BIAS, EPI_DGELU };

// Everything a plan depends on: 16 32-bit fields, then the 64-bit batch strides, so the
// struct has no padding and hashes by its bytes. batch 0 (or 1): one problem, strides 0.
struct lt_key {
  int32_t ta, tb, m, n, k, lda, ldb, ldc, c_f32, epi;
  uint32_t al_a, al_b, al_c, al_bias, al_aux;
  int32_t batch;
  int64_t sa, sb, sc, sbias;  // in elements of a, b, c and the bias as cuBLASLt reads it
  bool operator==(const lt_key &o) const { return memcmp(this, &o, sizeof o) == 0; }
};
struct lt_key_hash {
  size_t operator()(const lt_key &k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    const unsigned char *p = (const unsigned char *)&k;
    for (size_t i = 0; i < sizeof k; i++) h = (h ^ p[i]) * 1099511628211ull;
    return (size_t)h;
  }
};

// Descriptors (freed with the plan), and the algorithm when cuBLASLt has one (found).
struct lt_plan {
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
  cublasLtMatmulAlgo_t algo;
  int found = 0;
  uint64_t last_use = 0;
  ~lt_plan() {
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

enum { LT_PLANS_MAX = 1024 };
struct kcu_plan_cache {
  std::unordered_map<lt_key, std::unique_ptr<lt_plan>, lt_key_hash> map;
  uint64_t clock = 0;
};

void kcu_plans_free(kcu_ctx *x) {
  delete x->plans;
  x->plans = NULL;
}

// The largest power of two (<= 256) that divides the address.
static uint32_t ptr_align(const void *p) {
  uintptr_t u = (uintptr_t)p;
  uint32_t a = 256;
  while (a > 1 && (u % a)) a /= 2;
  return a;
}

// Builds the plan of key (descriptors, the heuristic's best algorithm) for these pointers.
static tsr_status plan_build(kb_t *kb, const char *op, const lt_key &key, const void *bias,
                             const void *aux, lt_plan *p) {
  kcu_ctx *x = kcu(kb);
  int ta = key.ta, tb = key.tb, m = key.m, n = key.n, k = key.k;
  cudaDataType_t ct = key.c_f32 ? CUDA_R_32F : CUDA_R_16BF;
  KCU_LT(op, cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t opA = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opB = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  KCU_LT(op, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA));
  KCU_LT(op, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB));
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  switch (key.epi) {
    case EPI_BIAS: epi = CUBLASLT_EPILOGUE_BIAS; break;
    case EPI_GELU_AUX: epi = CUBLASLT_EPILOGUE_GELU_AUX; break;
    case EPI_GELU_AUX_BIAS: epi = CUBLASLT_EPILOGUE_GELU_AUX_BIAS; break;
    case EPI_DGELU: epi = CUBLASLT_EPILOGUE_DGELU; break;
    default: break;
  }
  if (key.epi != EPI_NONE)
    KCU_LT(op, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  if (bias) {
    cudaDataType_t bt = ct;  // D's type (bias_bf16)
    KCU_LT(op, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    KCU_LT(op, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
  }
  if (aux) {  // pre: the same shape as D (column-major n x m), bf16
    int64_t ld = n;
    KCU_LT(op, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
    KCU_LT(op, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
  }
  // Lt A = our b: stored column-major as (tb ? k : n) rows x (tb ? n : k) columns, its
  // columns ldb apart (our b's rows); Lt B = our a: (ta ? m : k) x (ta ? k : m), lda; D: n x
  // m, ldc. A row stride above the row's length is a leading dimension above the rows.
  KCU_LT(op, cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, tb ? k : n, tb ? n : k, key.ldb));
  KCU_LT(op, cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_16BF, ta ? m : k, ta ? k : m, key.lda));
  KCU_LT(op, cublasLtMatrixLayoutCreate(&p->lc, ct, n, m, key.ldc));
  if (key.batch > 1) {  // a strided batch (Lt's A is our b, its B our a); C and D share lc
    const int32_t count = key.batch;
    cublasLtMatrixLayout_t lay[3] = {p->la, p->lb, p->lc};
    const int64_t stride[3] = {key.sb, key.sa, key.sc};
    for (int i = 0; i < 3; i++) {
      KCU_LT(op, cublasLtMatrixLayoutSetAttribute(lay[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                  sizeof count));
      KCU_LT(op, cublasLtMatrixLayoutSetAttribute(lay[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                  &stride[i], sizeof stride[i]));
    }
    if (bias)
      KCU_LT(op, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &key.sbias,
                                                sizeof key.sbias));
  }
  cublasLtMatmulPreference_t pref = NULL;
  KCU_LT(op, cublasLtMatmulPreferenceCreate(&pref));
  // cuBLASLt assumes 256-byte aligned buffers unless told: the model passes pointers into
  // larger buffers (kernels_act_at), so state each buffer's real alignment.
  cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &x->lt_ws_bytes, sizeof x->lt_ws_bytes);
  const uint32_t al[4] = {key.al_a, key.al_b, key.al_c, key.al_c};
  const cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++)
    s = cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i], sizeof al[i]);
  cublasLtMatmulHeuristicResult_t h;
  int found = 0;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(x->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &h, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  // No algorithm (a status other than success included: e.g. an epilogue this shape's
  // alignment excludes) is an answer, not an error: the callers take their other path.
  p->found = s == CUBLAS_STATUS_SUCCESS && found > 0;
  if (p->found) p->algo = h.algo;
  return TSR_OK;
}

// The cached plan of key, built on a miss (the least recently used one dropped when full).
static tsr_status plan_get(kb_t *kb, const char *op, const lt_key &key, const void *bias,
                           const void *aux, lt_plan **out) {
  kcu_ctx *x = kcu(kb);
  if (!x->plans) x->plans = new kcu_plan_cache();
  kcu_plan_cache *c = x->plans;
  auto it = c->map.find(key);
  if (it == c->map.end()) {
    if (c->map.size() >= LT_PLANS_MAX) {
      auto oldest = c->map.begin();
      for (auto j = c->map.begin(); j != c->map.end(); ++j)
        if (j->second->last_use < oldest->second->last_use) oldest = j;
      c->map.erase(oldest);
    }
    std::unique_ptr<lt_plan> p(new lt_plan());
    tsr_status st = plan_build(kb, op, key, bias, aux, p.get());
    if (st) return st;
    if (x->lt_log) {
      static const char *const epi[] = {"none", "bias", "gelu_aux", "gelu_aux_bias", "dgelu"};
      log_info("cuda: cuBLASLt plan %zu for %s: m %d n %d k %d ta %d tb %d lda %d ldb %d ldc %d "
               "out %s epilogue %s alignments a %u b %u c %u bias %u aux %u batch %d (strides a "
               "%lld b %lld c %lld bias %lld): %s",
               c->map.size() + 1, op, key.m, key.n, key.k, key.ta, key.tb, key.lda, key.ldb,
               key.ldc, key.c_f32 ? "fp32" : "bf16", epi[key.epi],
               key.al_b, key.al_a, key.al_c, key.al_bias, key.al_aux, key.batch > 1 ? key.batch : 1,
               (long long)key.sa, (long long)key.sb, (long long)key.sc, (long long)key.sbias,
               p->found ? "cuBLASLt algorithm"
                        : key.batch > 1 ? "no algorithm: one problem after another"
                                        : "no algorithm: the plain kernel path");
    }
    it = c->map.emplace(key, std::move(p)).first;
  }
  it->second->last_use = ++c->clock;
  *out = it->second.get();
  return TSR_OK;
}

// d (count, n) dense = the count fp32 vectors of n at s, stride apart, rounded to bf16.
__global__ void k_bias_bf16(act_t *d, const float *s, int n, int64_t stride, int count) {
  KCU_GRID_STRIDE(e, (size_t)n * count) kcu_st(d, e, s[(e / n) * stride + e % n]);
}

// *out = the `count` fp32 biases (n each, stride elements apart) rounded to bf16, dense (n
// apart) in the scratch (stream-ordered: the matmul queued next reads it before any later
// use of the scratch).
static tsr_status bias_bf16(kb_t *kb, const char *op, const float *bias, int n, int count,
                            int64_t stride, const void **out) {
  void *p;
  const size_t total = (size_t)n * count;
  tsr_status st = kcu_scratch(kb, op, total * sizeof(act_t), &p);
  if (st) return st;
  k_bias_bf16<<<KCU_GRID(kb, total)>>>((act_t *)p, bias, n, stride, count);
  KCU_LAUNCHED(op);
  *out = p;
  return TSR_OK;
}

// A strided batch of problems (gemm_batched): count, and the strides in elements between
// consecutive problems' a, b, c and fp32 bias (0: every problem reads the same one).
struct gemm_batch {
  int count;
  int64_t a, b, c, bias;
};

// The alignment al of a batch's first pointer, lowered to what every problem's has: the
// largest power of two <= al dividing the stride in bytes too.
static uint32_t batch_align(uint32_t al, int64_t stride_bytes) {
  while (al > 1 && stride_bytes % al) al /= 2;
  return al;
}

// The row strides of dense operands: a (m, k) or (k, m), b (k, n) or (n, k), c (m, n).
struct gemm_ld {
  int a, b, c;
};
static gemm_ld dense_ld(int ta, int tb, int m, int n, int k) {
  gemm_ld ld = {ta ? m : k, tb ? k : n, n};
  return ld;
}

// Row-major c (m, n) = epilogue(alpha op(a) op(b) + beta c) through cuBLASLt with the
// cached plan, bias fp32 (rounded to bf16 for a bf16 c: bias_bf16), rows ld apart; bt: a
// strided batch of such problems (NULL: one). *ran = 0 (nothing queued) when cuBLASLt has
// no algorithm for it.
static tsr_status lt_matmul_ld(kb_t *kb, const char *op, int ta, int tb, int m, int n, int k,
                               float alpha, const act_t *a, const act_t *b, float beta, void *c,
                               gemm_ld ld, int c_f32, int epi, const float *bias, const void *aux,
                               const gemm_batch *bt, int *ran) {
  kcu_ctx *x = kcu(kb);
  *ran = 0;
  tsr_status st = kcu_arena_ready(kb, op);  // the workspace lives in the arena
  if (st) return st;
  const int count = bt ? bt->count : 1;
  const void *bias_d = bias;
  if (bias && !c_f32 && (st = bias_bf16(kb, op, bias, n, count, bt ? bt->bias : 0, &bias_d)))
    return st;
  lt_key key = {ta, tb, m, n, k, ld.a, ld.b, ld.c, c_f32, epi, ptr_align(b), ptr_align(a),
                ptr_align(c),
                bias_d ? ptr_align(bias_d) : 0, aux ? ptr_align(aux) : 0, 0, 0, 0, 0, 0};
  if (count > 1) {  // every problem's alignment, and the strides (the bf16 bias copy is dense)
    const int64_t csz = c_f32 ? 4 : 2;  // c and the bias cuBLASLt reads share the dtype
    key.batch = count;
    key.sa = bt->a, key.sb = bt->b, key.sc = bt->c, key.sbias = bias_d ? (c_f32 ? bt->bias : n) : 0;
    key.al_a = batch_align(key.al_a, key.sb * 2);
    key.al_b = batch_align(key.al_b, key.sa * 2);
    key.al_c = batch_align(key.al_c, key.sc * csz);
    if (bias_d) key.al_bias = batch_align(key.al_bias, key.sbias * csz);
  }
  lt_plan *p;
  if ((st = plan_get(kb, op, key, bias_d, aux, &p))) return st;
  if (!p->found) return TSR_OK;
  if (bias_d)
    KCU_LT(op, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_d, sizeof bias_d));
  if (aux)
    KCU_LT(op, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
  // beta == 0: cuBLASLt does not read C, so NaN in c is overwritten (kernels.h).
  KCU_LT(op, cublasLtMatmul(x->lt, p->op, &alpha, b, p->la, a, p->lb, &beta, c, p->lc, c, p->lc,
                            &p->algo, x->lt_ws, x->lt_ws_bytes, x->stream));
  x->paths.gemm_library++;
  *ran = 1;
  return TSR_OK;
}

// lt_matmul_ld on dense operands (the epilogue entries).
static tsr_status lt_matmul(kb_t *kb, const char *op, int ta, int tb, int m, int n, int k,
                            float alpha, const act_t *a, const act_t *b, float beta, void *c,
                            int c_f32, int epi, const float *bias, const void *aux, int *ran) {
  return lt_matmul_ld(kb, op, ta, tb, m, n, k, alpha, a, b, beta, c, dense_ld(ta, tb, m, n, k),
                      c_f32, epi, bias, aux, NULL, ran);
}

static void fallback(kb_t *kb, int ta, int tb, int m, int n, int k, float alpha, const act_t *a,
                     const act_t *b, float beta, void *c, gemm_ld ld, int c_f32,
                     const float *bias) {
  if (k > 0) kcu(kb)->paths.gemm_plain++;  // k == 0 is no product: c = beta c + bias
  k_gemm_fallback<<<dim3((n + FB_T - 1) / FB_T, (m + FB_T - 1) / FB_T), dim3(FB_T, FB_T), 0,
                    kcu(kb)->stream>>>(ta, tb, m, n, k, alpha, a, ld.a, b, ld.b, beta,
                                       c_f32 ? NULL : (act_t *)c, c_f32 ? (float *)c : NULL,
                                       ld.c, bias);
}

// Row-major c (m, n) = alpha op(a) op(b) + beta c (+ bias per column), c bf16 or fp32
// (c_f32), rows ld apart. Falls back to k_gemm_fallback when cuBLASLt offers no algorithm.
static tsr_status gemm_rm_ld(kb_t *kb, const char *op, int ta, int tb, int m, int n, int k,
                             float alpha, const act_t *a, const act_t *b, float beta, void *c,
                             gemm_ld ld, int c_f32, const float *bias) {
  if (m == 0 || n == 0) return TSR_OK;
  if (k == 0) {  // c = beta c (+ bias): no product
    if (bias || c_f32 || ld.c != n) {
      fallback(kb, ta, tb, m, n, 0, alpha, a, b, beta, c, ld, c_f32, bias);
      KCU_LAUNCHED(op);
      return TSR_OK;
    }
    return kcu_scale_act(kb, c, beta, (size_t)m * n);
  }
  // The BIAS epilogue reads the bias with vector loads: an fp32 bias for an fp32 c that is
  // not 16-byte aligned takes the plain kernel (a bf16 c's bias is an aligned copy).
  int ran = 0;
  if (!(bias && c_f32 && ptr_align(bias) < 16)) {
    tsr_status st = lt_matmul_ld(kb, op, ta, tb, m, n, k, alpha, a, b, beta, c, ld, c_f32,
                                 bias ? EPI_BIAS : EPI_NONE, bias, NULL, NULL, &ran);
    if (st) return st;
  }
  if (!ran) {  // no cuBLASLt algorithm for this shape/alignment: the plain kernel
    fallback(kb, ta, tb, m, n, k, alpha, a, b, beta, c, ld, c_f32, bias);
    KCU_LAUNCHED(op);
  }
  return TSR_OK;
}

// gemm_rm_ld on dense operands.
static tsr_status gemm_rm(kb_t *kb, const char *op, int ta, int tb, int m, int n, int k, float alpha,
                          const act_t *a, const act_t *b, float beta, void *c, int c_f32,
                          const float *bias) {
  return gemm_rm_ld(kb, op, ta, tb, m, n, k, alpha, a, b, beta, c, dense_ld(ta, tb, m, n, k),
                    c_f32, bias);
}

extern "C" tsr_status kcu_gemm(kb_t *kb, int trans_a, int trans_b, int m, int n, int k, float alpha,
                               const void *a, const void *b, float beta, void *c) {
  const char *op = "gemm";
  tsr_status st = kernels_check_gemm(m, n, k, a, b, c);
  if (st || m == 0 || n == 0) return st;
  return gemm_rm(kb, op, trans_a != 0, trans_b != 0, m, n, k, alpha, (const act_t *)a,
                 (const act_t *)b, beta, c, 0, NULL);
}

extern "C" tsr_status kcu_gemm_strided(kb_t *kb, int trans_a, int trans_b, int m, int n, int k,
                                       float alpha, const void *a, int lda, const void *b,
                                       int ldb, float beta, void *c, int ldc,
                                       kernels_dtype c_dtype) {
  const char *op = "gemm_strided";
  if (c_dtype != KERNELS_F32 && c_dtype != KERNELS_BF16)
    return err_set(TSR_EINVAL, "%s: c_dtype %s on backend cuda (bf16 or f32)", op,
                   kernels_dtype_name(c_dtype));
  tsr_status st = kernels_check_gemm_strided(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
  if (st || m == 0 || n == 0) return st;
  gemm_ld ld = {lda, ldb, ldc};
  return gemm_rm_ld(kb, op, trans_a != 0, trans_b != 0, m, n, k, alpha, (const act_t *)a,
                    (const act_t *)b, beta, c, ld, c_dtype == KERNELS_F32, NULL);
}

extern "C" tsr_status kcu_gemm_batched(kb_t *kb, int trans_a, int trans_b, int m, int n, int k,
                                       float alpha, const void *a, int64_t stride_a,
                                       const void *b, int64_t stride_b, float beta, void *c,
                                       int64_t stride_c, kernels_dtype c_dtype, const float *bias,
                                       int64_t stride_bias, int batch) {
  const char *op = "gemm_batched";
  if (c_dtype != KERNELS_F32 && c_dtype != KERNELS_BF16)
    return err_set(TSR_EINVAL, "%s: c_dtype %s on backend cuda (bf16 or f32)", op,
                   kernels_dtype_name(c_dtype));
  tsr_status st = kernels_check_gemm_batched(trans_a, trans_b, m, n, k, a, stride_a, b, stride_b,
                                             c, stride_c, stride_bias, batch);
  if (st || m == 0 || n == 0 || batch == 0) return st;
  const int ta = trans_a != 0, tb = trans_b != 0, c_f32 = c_dtype == KERNELS_F32;
  // One strided-batched cuBLASLt matmul where it has an algorithm (the BIAS epilogue's
  // vector loads of an fp32 bias need every problem's 16-byte aligned, as in gemm_rm_ld).
  if (batch > 1 && k > 0 && !(bias && c_f32 && batch_align(ptr_align(bias), stride_bias * 4) < 16)) {
    const gemm_batch bt = {batch, stride_a, stride_b, stride_c, stride_bias};
    int ran = 0;
    st = lt_matmul_ld(kb, op, ta, tb, m, n, k, alpha, (const act_t *)a, (const act_t *)b, beta, c,
                      dense_ld(ta, tb, m, n, k), c_f32, bias ? EPI_BIAS : EPI_NONE, bias, NULL, &bt,
                      &ran);
    if (st || ran) return st;
  }
  // Otherwise one problem after another, each as gemm_rm (cuBLASLt or the plain kernel).
  const size_t csz = c_f32 ? sizeof(float) : sizeof(act_t);
  for (int i = 0; i < batch && !st; i++)
    st = gemm_rm(kb, op, ta, tb, m, n, k, alpha, k > 0 ? (const act_t *)a + (size_t)i * stride_a : NULL,
                 k > 0 ? (const act_t *)b + (size_t)i * stride_b : NULL, beta,
                 (char *)c + (size_t)i * stride_c * csz, c_f32,
                 bias ? bias + (size_t)i * stride_bias : NULL);
  return st;
}

extern "C" tsr_status kcu_linear_forward(kb_t *kb, void *out, const void *inp, const void *w,
                                         const float *bias, int M, int K, int N) {
  const char *op = "linear_forward";
  tsr_status st = kernels_check_linear_forward(out, inp, w, M, K, N);
  if (st || M == 0 || N == 0) return st;
  return gemm_rm(kb, op, 0, 0, M, N, K, 1.0f, (const act_t *)inp, (const act_t *)w, 0.0f, out, 0, bias);
}

extern "C" tsr_status kcu_linear_backward(kb_t *kb, void *dinp, float *dw, float *dbias,
                                          const void *dout, const void *inp, const void *w, int M,
                                          int K, int N) {
  const char *op = "linear_backward";
  tsr_status st = kernels_check_linear_backward(dinp, dw, dout, inp, w, M, K, N);
  if (st) return st;
  if (dinp && (st = gemm_rm(kb, op, 0, 1, M, K, N, 1.0f, (const act_t *)dout, (const act_t *)w,
                            0.0f, dinp, 0, NULL)))
    return st;
  if (dw && (st = gemm_rm(kb, op, 1, 0, K, N, M, 1.0f, (const act_t *)inp, (const act_t *)dout,
                          1.0f, dw, 1, NULL)))
    return st;
  if (dbias && N > 0)
    return kcu_colsum(kb, op, dbias, (const act_t *)dout, NULL, NULL, M, N);
  return TSR_OK;
}

extern "C" tsr_status kcu_linear_gelu_forward(kb_t *kb, void *out, void *pre, const void *inp,
                                              const void *w, const float *bias, int M, int K,
                                              int N) {
  const char *op = "linear_gelu_forward";
  tsr_status st = kernels_check_linear_gelu_forward(out, pre, inp, w, M, K, N);
  if (st || M == 0 || N == 0) return st;
  int ran = 0;
  if (K > 0 && kcu(kb)->lt_gelu) {
    st = lt_matmul(kb, op, 0, 0, M, N, K, 1.0f, (const act_t *)inp, (const act_t *)w,
                              0.0f, out, 0, bias ? EPI_GELU_AUX_BIAS : EPI_GELU_AUX, bias, pre,
                              &ran);
    if (st) return st;
  }
  if (ran) return TSR_OK;
  st = gemm_rm(kb, op, 0, 0, M, N, K, 1.0f, (const act_t *)inp, (const act_t *)w, 0.0f, pre, 0,
               bias);
  return st ? st : kcu_gelu_act(kb, op, out, pre, (size_t)M * N);
}

extern "C" tsr_status kcu_linear_backward_dgelu(kb_t *kb, void *dpre, float *dw, float *dbias,
                                                const void *dout, const void *inp, const void *w,
                                                const void *pre, int M, int K, int N) {
  const char *op = "linear_backward_dgelu";
  tsr_status st = kernels_check_linear_backward_dgelu(dpre, dw, dout, inp, w, pre, M, K, N);
  if (st) return st;
  if (dpre && M > 0 && K > 0) {
    int ran = 0;
    if (N > 0 && kcu(kb)->lt_gelu &&
        (st = lt_matmul(kb, op, 0, 1, M, K, N, 1.0f, (const act_t *)dout, (const act_t *)w, 0.0f,
                        dpre, 0, EPI_DGELU, NULL, pre, &ran)))
      return st;
    if (!ran) {  // dpre = dout w^T, then GELU'(pre) dpre in place
      if ((st = gemm_rm(kb, op, 0, 1, M, K, N, 1.0f, (const act_t *)dout, (const act_t *)w, 0.0f,
                        dpre, 0, NULL)) ||
          (st = kcu_dgelu_act(kb, op, dpre, dpre, pre, (size_t)M * K)))
        return st;
    }
  }
  // dw and dbias exactly as linear_backward
  return kcu_linear_backward(kb, NULL, dw, dbias, dout, inp, w, M, K, N);
}
