// kernels/cpu/cpu.h — private to the CPU backend: the per-op functions that backend.c
// puts into the kernels_backend struct, and the helpers they share (argument checks,
// deterministic reductions). Semantics of each op: kernels/kernels.h.
#ifndef TESSERA_KERNELS_CPU_CPU_H
#define TESSERA_KERNELS_CPU_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "kernels/kernels.h"

typedef const kernels_backend kb_t;

// ---- argument checks: return TSR_EINVAL with "op: what" messages ------------------
// For what only the CPU checks (index values) and the entries without a shared check; an
// entry's shared checks are kernels/check.h's kernels_check_<entry>, called first.
#define KCPU_NEED(op, p) \
  do { if (!(p)) return err_set(TSR_EINVAL, "%s: %s is NULL", (op), #p); } while (0)
#define KCPU_DIM(op, x) \
  do { if ((x) < 0) return err_set(TSR_EINVAL, "%s: %s = %lld is negative", (op), #x, (long long)(x)); } while (0)

// cu: (n_clips + 1) offsets: cu[0] == 0, non-decreasing, cu[n_clips] == L.
tsr_status kcpu_check_cu(const char *op, const char *name, const int32_t *cu, int n_clips, int L);

// The clip of token i (0 <= i < cu[n_clips]): the c with cu[c] <= i < cu[c+1].
// exp(x) for the softmax loops, written so the compiler can vectorise it (libm's expf is a
// scalar call): x = k ln2 + r with |r| <= ln2/2 (two-part ln2), exp(r) by its degree-6
// Taylor polynomial (truncation < 1.3e-7 relative), times 2^k through the exponent bits.
// x < -87 gives 0 (as expf underflows there, and exp(-inf) = 0); NaN stays NaN (the
// clamp sends it to -87 first: converting a NaN to int, as the exponent step would, is
// undefined). Relative error about 2e-7 against expf; deterministic.
static inline float kcpu_expf(float x) {
  float xc = x > -87.0f ? (x < 88.0f ? x : 88.0f) : -87.0f;
  float kf = __builtin_rintf(xc * 1.44269504088896341f);
  float r = xc - kf * 0.693359375f;        // ln2, high part (exact in float)
  r = r - kf * -2.12194440e-4f;            // ln2, low part
  float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.66666672e-1f + r * (4.16666679e-2f +
                   r * (8.33333377e-3f + r * 1.38888892e-3f)))));
  int32_t bits;
  __builtin_memcpy(&bits, &p, sizeof bits);
  bits += (int32_t)kf * (1 << 23);
  float y;
  __builtin_memcpy(&y, &bits, sizeof y);
  return x < -87.0f ? 0.0f : (x == x ? y : x);
}

static inline int kcpu_clip_of(const int32_t *cu, int n_clips, int i) {
  int lo = 0, hi = n_clips - 1;  // invariant: cu[lo] <= i < cu[hi + 1]
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (cu[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Elementwise loops run in parallel above this many elements (OpenMP `if`).
#define KCPU_PAR_MIN 32768

// ---- deterministic reductions (results independent of the thread count) -----------
// out[j] (+)= sum over r < rows of a[r*ld + j] * (b ? b[r*ld + j] : 1) * (rs ? rs[r] : 1),
// j < cols. With bmean (b and rs then required) the b term is LayerNorm's output
// (b[r*ld + j] - bmean[r]) * rs[r], formed in float, and the row factor is 1. Rows are
// summed in fixed blocks (double), blocks in order. accumulate: add to out instead of
// overwriting.
tsr_status kcpu_colsum(float *out, int accumulate, const float *a, const float *b,
                       const float *rs, const float *bmean, size_t rows, int cols, size_t ld);
// Per-clip column sums (kcpu_colsum over clip c's rows of a, b, rs, bmean, all (L, D) or
// (L)), written to out + c*mstride (overwritten): the adaLN vector gradients. out: (C, mstride)
tsr_status kcpu_clip_colsum(float *out, const float *a, const float *b, const float *rs,
                            const float *bmean, int mstride, const int32_t *cu, int n_clips, int D);
// Scratch of *per_thread floats for each OpenMP thread (omp_get_max_threads() of them),
// 64-byte aligned: *per_thread is rounded up to whole 64-byte lines and thread t uses
// p + t * *per_thread. Free with free(); NULL with the error set (naming op). Aligned
// because vector loads that straddle cache lines would make the speed of a kernel depend
// on where the heap happened to put its scratch.
float *kcpu_thread_scratch(const char *op, size_t *per_thread);
// *result = sum of (a[i] - (b ? b[i] : 0))^2 in double over fixed blocks.
tsr_status kcpu_sumsq_diff(double *result, const float *a, const float *b, size_t n);

// ---- ops (one file each) -------------------------------------------------------------
// The fp32 definitions of the math, with float pointers. The tables take [act] tensors as
// void *: backend.c puts these into the fp32 table through one-line adapters (the same
// arithmetic, bitwise), bf16.c wraps them with conversion to fp32 scratch and back.
tsr_status kcpu_fill(kb_t *kb, float *x, float value, size_t n);
tsr_status kcpu_scale(kb_t *kb, float *x, float alpha, size_t n);
tsr_status kcpu_add(kb_t *kb, float *out, const float *a, const float *b, size_t n);
tsr_status kcpu_axpy(kb_t *kb, float *y, float alpha, const float *x, size_t n);
tsr_status kcpu_u8_affine(kb_t *kb, float *out, const uint8_t *in, float a, float b, size_t n);

tsr_status kcpu_gemm(kb_t *kb, int trans_a, int trans_b, int m, int n, int k, float alpha,
                     const float *a, const float *b, float beta, float *c);
tsr_status kcpu_gemm_strided(kb_t *kb, int trans_a, int trans_b, int m, int n, int k,
                             float alpha, const float *a, int lda, const float *b, int ldb,
                             float beta, float *c, int ldc);
tsr_status kcpu_gemm_batched(kb_t *kb, int trans_a, int trans_b, int m, int n, int k,
                             float alpha, const float *a, int64_t stride_a, const float *b,
                             int64_t stride_b, float beta, float *c, int64_t stride_c,
                             const float *bias, int64_t stride_bias, int batch);
tsr_status kcpu_linear_forward(kb_t *kb, float *out, const float *inp, const float *w,
                               const float *bias, int M, int K, int N);
tsr_status kcpu_linear_backward(kb_t *kb, float *dinp, float *dw, float *dbias, const float *dout,
                                const float *inp, const float *w, int M, int K, int N);

tsr_status kcpu_layernorm_forward(kb_t *kb, float *out, float *mean, float *rstd, const float *inp,
                                  int L, int D, float eps);
tsr_status kcpu_layernorm_backward(kb_t *kb, float *dinp, const float *dout, const float *inp,
                                   const float *mean, const float *rstd, int L, int D);
tsr_status kcpu_rmsnorm_forward(kb_t *kb, float *out, float *rstd, const float *inp,
                                const float *weight, int R, int C, float eps);
tsr_status kcpu_rmsnorm_backward(kb_t *kb, float *dinp, float *dweight, const float *dout,
                                 const float *inp, const float *weight, const float *rstd, int R,
                                 int C);

tsr_status kcpu_modulate_forward(kb_t *kb, float *out, const float *inp, const float *shift,
                                 const float *scale, int mstride, const int32_t *cu, int n_clips,
                                 int L, int D);
tsr_status kcpu_modulate_backward(kb_t *kb, float *dinp, float *dshift, float *dscale,
                                  const float *dout, const float *inp, const float *scale,
                                  int mstride, const int32_t *cu, int n_clips, int L, int D);
tsr_status kcpu_gate_residual_forward(kb_t *kb, float *out, const float *res, const float *inp,
                                      const float *gate, int mstride, const int32_t *cu,
                                      int n_clips, int L, int D);
tsr_status kcpu_gate_residual_backward(kb_t *kb, float *dinp, float *dgate, const float *dout,
                                       const float *inp, const float *gate, int mstride,
                                       const int32_t *cu, int n_clips, int L, int D);

tsr_status kcpu_rope_forward(kb_t *kb, float *out, const float *inp, const int32_t *pos, int L,
                             int H, int Dh, float theta);
tsr_status kcpu_rope_backward(kb_t *kb, float *dinp, const float *dout, const int32_t *pos, int L,
                              int H, int Dh, float theta);

tsr_status kcpu_gelu_forward(kb_t *kb, float *out, const float *inp, size_t n);
tsr_status kcpu_gelu_backward(kb_t *kb, float *dinp, const float *dout, const float *inp, size_t n);
tsr_status kcpu_silu_forward(kb_t *kb, float *out, const float *inp, size_t n);
tsr_status kcpu_silu_backward(kb_t *kb, float *dinp, const float *dout, const float *inp, size_t n);

tsr_status kcpu_timestep_embedding(kb_t *kb, float *out, const float *t, int n, int dim,
                                   float max_period);
tsr_status kcpu_embedding_forward(kb_t *kb, float *out, const float *table, const int32_t *ids,
                                  int n, int V, int D);
tsr_status kcpu_embedding_backward(kb_t *kb, float *dtable, const float *dout, const int32_t *ids,
                                   int n, int V, int D);

tsr_status kcpu_attention_forward(kb_t *kb, float *out, float *lse, const float *q, const float *k,
                                  const float *v, const int32_t *cu, int n_clips, int max_len,
                                  int L, int H, int Dh, float scale);
tsr_status kcpu_attention_backward(kb_t *kb, float *dq, float *dk, float *dv, const float *dout,
                                   const float *q, const float *k, const float *v,
                                   const float *out, const float *lse, const int32_t *cu,
                                   int n_clips, int max_len, int L, int H, int Dh, float scale);
tsr_status kcpu_attention_partial_forward(kb_t *kb, float *out, float *lse, const float *q,
                                          const float *k, const float *v, const int32_t *cu_q,
                                          const int32_t *cu_k, int n_clips, int max_q, int max_k,
                                          int Lq, int Lk, int H, int Dh, float scale);
tsr_status kcpu_attention_merge(kb_t *kb, float *out_a, float *lse_a, const float *out_b,
                                const float *lse_b, int L, int H, int Dh);
tsr_status kcpu_attention_delta(kb_t *kb, float *delta, const float *dout, const float *out, int L,
                                int H, int Dh);
tsr_status kcpu_attention_partial_backward(kb_t *kb, float *dq, float *dk, float *dv,
                                           const float *dout, const float *q, const float *k,
                                           const float *v, const void *out, const float *lse,
                                           const float *delta, const int32_t *cu_q,
                                           const int32_t *cu_k, int n_clips, int max_q, int max_k,
                                           int Lq, int Lk, int H, int Dh, float scale);
tsr_status kcpu_attention_masked_forward(kb_t *kb, float *out, float *lse, const float *q,
                                         const float *k, const float *v, const int32_t *cu_q,
                                         const int32_t *cu_k, const int32_t *pos_q,
                                         const int32_t *pos_k, kernels_mask mask, int n_clips,
                                         int max_q, int max_k, int Lq, int Lk, int H, int Dh,
                                         float scale);
tsr_status kcpu_attention_masked_backward(kb_t *kb, float *dq, float *dk, float *dv,
                                          const float *dout, const float *q, const float *k,
                                          const float *v, const float *out, const float *lse,
                                          const int32_t *cu, const int32_t *pos, kernels_mask mask,
                                          int n_clips, int max_len, int L, int H, int Dh,
                                          float scale);
tsr_status kcpu_attention_masked_partial_backward(kb_t *kb, float *dq, float *dk, float *dv,
                                                  const float *dout, const float *q,
                                                  const float *k, const float *v,
                                                  const void *out, const float *lse,
                                                  const float *delta, const int32_t *cu_q,
                                                  const int32_t *cu_k, const int32_t *pos_q,
                                                  const int32_t *pos_k, kernels_mask mask,
                                                  int n_clips, int max_q, int max_k, int Lq,
                                                  int Lk, int H, int Dh, float scale);

tsr_status kcpu_mse_forward(kb_t *kb, float *loss, float *sse, const float *pred,
                            const float *target, const float *weight, const int32_t *cu,
                            int n_clips, int L, int D);
tsr_status kcpu_mse_backward(kb_t *kb, float *dpred, const float *pred, const float *target,
                             const float *weight, const int32_t *cu, int n_clips, int L, int D);

// objective.c. t: (C), x_t, target: (L, P), tokens: (L, P) of tokens_dtype, clips: (C),
// cu: (C + 1)
tsr_status kcpu_objective_inputs(kb_t *kb, float *t, float *x_t, float *target,
                                 const void *tokens, kernels_tokens tokens_dtype,
                                 const kernels_clip_key *clips,
                                 const int32_t *cu, int n_clips, int L, int P, uint64_t seed,
                                 uint64_t step, kernels_t_dist td);
tsr_status kcpu_euler_update(kb_t *kb, float *x, const float *v_cond, const float *v_uncond,
                             float cfg, float dt, size_t n);
tsr_status kcpu_cast(kb_t *kb, void *dst, kernels_dtype dst_dtype, const void *src,
                     kernels_dtype src_dtype, size_t n);

tsr_status kcpu_sumsq(kb_t *kb, double *result_host, const float *x, size_t n);
tsr_status kcpu_adamw_update(kb_t *kb, float *param, const float *grad, float *m, float *v,
                             size_t n, float lr, float beta1, float beta2, float eps,
                             float weight_decay, int64_t step, float grad_scale);
tsr_status kcpu_ema_update(kb_t *kb, float *ema, const float *param, size_t n, float decay);
tsr_status kcpu_adamw_update_multi(kb_t *kb, float *param, const float *grad, float *m, float *v,
                                   void *work, size_t n, const kernels_param_segment *segs, int n_segs,
                                   float lr, float beta1, float beta2, float eps,
                                   float weight_decay, int64_t step, float grad_scale);
// segs (n_segs) in order, not overlapping, inside [0, n), decay 0 or 1.
tsr_status kcpu_check_segments(const char *op, const kernels_param_segment *segs, int n_segs,
                               size_t n);

// rope.c: the frequency and position axis (0 = t, 1 = y, 2 = x) of every rotation pair
// (kernels.h's split), malloc'd, for Dh and theta the entry's check passed (an error names
// op: no memory). freq, axis: (Dh/2)
tsr_status kcpu_rope_table(const char *op, int Dh, float theta, double **freq, int **axis);

// ---- fused entries (fused.c): kernels.h's definitions as compositions -------------------
tsr_status kcpu_layernorm_modulate_forward(kb_t *kb, float *out, float *mean, float *rstd,
                                           const float *inp, const float *shift,
                                           const float *scale, int mstride, const int32_t *cu,
                                           int n_clips, int L, int D, float eps);
tsr_status kcpu_layernorm_modulate_backward(kb_t *kb, float *dinp, float *dshift, float *dscale,
                                            const float *dout, const float *inp,
                                            const float *mean, const float *rstd,
                                            const float *scale, int mstride, const int32_t *cu,
                                            int n_clips, int L, int D);
tsr_status kcpu_qk_norm_rope_forward(kb_t *kb, float *q_out, float *k_out, float *q_rstd,
                                     float *k_rstd, const float *q_in, const float *k_in,
                                     const float *q_weight, const float *k_weight,
                                     const int32_t *pos, int L, int H, int Dh, float eps,
                                     float theta);
tsr_status kcpu_qk_norm_rope_backward(kb_t *kb, float *dq_in, float *dk_in, float *dq_weight,
                                      float *dk_weight, const float *dq, const float *dk,
                                      const float *q_in, const float *k_in, const float *q_weight,
                                      const float *k_weight, const float *q_rstd,
                                      const float *k_rstd, const int32_t *pos, int L, int H,
                                      int Dh, float theta);
tsr_status kcpu_linear_gelu_forward(kb_t *kb, float *out, float *pre, const float *inp,
                                    const float *w, const float *bias, int M, int K, int N);
tsr_status kcpu_linear_backward_dgelu(kb_t *kb, float *dpre, float *dw, float *dbias,
                                      const float *dout, const float *inp, const float *w,
                                      const float *pre, int M, int K, int N);

// ---- the bf16 entries (bf16.c): kbf_NAME for every ACT row of kernels/entries.h, with
// the table's signature (backend.c's cpu-bf16 table is made from the same rows) -----------
#define KBF_DECLARE_ACT(RET, NAME, PARAMS) RET kbf_##NAME PARAMS;
#define KBF_DECLARE_ANY(RET, NAME, PARAMS)
#define KERNELS_ENTRY(RET, NAME, CLASS, ACT, PARAMS, ARGS, BYTES, FLOPS) \
  KBF_DECLARE_##ACT(RET, NAME, PARAMS)
#include "kernels/entries.h"
#undef KERNELS_ENTRY
#undef KBF_DECLARE_ACT
#undef KBF_DECLARE_ANY

#endif
