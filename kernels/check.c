// kernels/check.c — the backend-independent argument checks of kernels.h's entries
// (kernels/check.h), one message per error naming the entry and the argument, so a caller
// sees the same error whichever backend it runs.
#include "kernels/check.h"

#include "kernels/check_need.h"

tsr_status kernels_check_alloc(void *const *ptr, size_t bytes) {
  NEED("alloc", ptr);
  return TSR_OK;
}

// The copies between host and backend memory, and within it: both ends for a non-empty one.
static tsr_status check_copy(const char *op, const void *dst, const char *dst_name,
                             const void *src, const char *src_name, size_t bytes) {
  if (bytes == 0) return TSR_OK;
  if (!dst) return err_set(TSR_EINVAL, "%s: %s is NULL", op, dst_name);
  if (!src) return err_set(TSR_EINVAL, "%s: %s is NULL", op, src_name);
  return TSR_OK;
}

tsr_status kernels_check_to_device(const void *dst, const void *src_host, size_t bytes) {
  return check_copy("to_device", dst, "dst", src_host, "src_host", bytes);
}

tsr_status kernels_check_to_host(const void *dst_host, const void *src, size_t bytes) {
  return check_copy("to_host", dst_host, "dst_host", src, "src", bytes);
}

tsr_status kernels_check_copy(const void *dst, const void *src, size_t bytes) {
  return check_copy("copy", dst, "dst", src, "src", bytes);
}

tsr_status kernels_check_mem_info(const size_t *free_bytes, const size_t *total_bytes) {
  NEED("mem_info", free_bytes);
  NEED("mem_info", total_bytes);
  return TSR_OK;
}

tsr_status kernels_check_memset_zero(const void *ptr, size_t bytes) {
  if (bytes) NEED("memset_zero", ptr);
  return TSR_OK;
}

tsr_status kernels_check_fill(const float *x, size_t n) {
  if (n) NEED("fill", x);
  return TSR_OK;
}

tsr_status kernels_check_scale(const float *x, size_t n) {
  if (n) NEED("scale", x);
  return TSR_OK;
}

// add and add_act: out = a + b.
static tsr_status check_add(const char *op, const void *out, const void *a, const void *b,
                            size_t n) {
  if (n == 0) return TSR_OK;
  NEED(op, out);
  NEED(op, a);
  NEED(op, b);
  return TSR_OK;
}

// axpy and axpy_act: y += alpha x.
static tsr_status check_axpy(const char *op, const void *y, const void *x, size_t n) {
  if (n == 0) return TSR_OK;
  NEED(op, y);
  NEED(op, x);
  return TSR_OK;
}

tsr_status kernels_check_add(const float *out, const float *a, const float *b, size_t n) {
  return check_add("add", out, a, b, n);
}

tsr_status kernels_check_axpy(const float *y, const float *x, size_t n) {
  return check_axpy("axpy", y, x, n);
}

tsr_status kernels_check_add_act(const void *out, const void *a, const void *b, size_t n) {
  return check_add("add_act", out, a, b, n);
}

tsr_status kernels_check_axpy_act(const void *y, const void *x, size_t n) {
  return check_axpy("axpy_act", y, x, n);
}

tsr_status kernels_check_u8_affine(const void *out, const uint8_t *in, size_t n) {
  if (n == 0) return TSR_OK;
  NEED("u8_affine", out);
  NEED("u8_affine", in);
  return TSR_OK;
}

tsr_status kernels_check_cast(const void *dst, kernels_dtype dst_dtype, const void *src,
                              kernels_dtype src_dtype, size_t n) {
  if (!kernels_dtype_size(dst_dtype) || !kernels_dtype_size(src_dtype))
    return err_set(TSR_EINVAL, "cast: unknown dtype (dst %d, src %d)", (int)dst_dtype,
                   (int)src_dtype);
  if (n == 0) return TSR_OK;
  NEED("cast", dst);
  NEED("cast", src);
  return TSR_OK;
}

tsr_status kernels_check_layernorm_forward(const void *out, const void *inp, int L, int D) {
  const char *op = "layernorm_forward";
  DIM(op, L);
  DIM(op, D);
  if (L == 0) return TSR_OK;
  if (D == 0) return err_set(TSR_EINVAL, "%s: D = 0", op);
  NEED(op, out);
  NEED(op, inp);
  return TSR_OK;
}

tsr_status kernels_check_layernorm_backward(const void *dinp, const void *dout, const void *inp,
                                            const float *mean, const float *rstd, int L, int D) {
  const char *op = "layernorm_backward";
  DIM(op, L);
  DIM(op, D);
  if (L == 0 || D == 0 || !dinp) return TSR_OK;  // nothing to compute
  NEED(op, dout);
  NEED(op, inp);
  NEED(op, mean);
  NEED(op, rstd);
  return TSR_OK;
}

tsr_status kernels_check_rmsnorm_forward(const void *out, const void *inp, const float *weight,
                                         int R, int C) {
  const char *op = "rmsnorm_forward";
  DIM(op, R);
  DIM(op, C);
  if (R == 0) return TSR_OK;
  if (C == 0) return err_set(TSR_EINVAL, "%s: C = 0", op);
  NEED(op, out);
  NEED(op, inp);
  NEED(op, weight);
  return TSR_OK;
}

tsr_status kernels_check_rmsnorm_backward(const void *dinp, const void *dout, const void *inp,
                                          const float *weight, const float *rstd, int R, int C) {
  const char *op = "rmsnorm_backward";
  DIM(op, R);
  DIM(op, C);
  if (R == 0 || C == 0) return TSR_OK;
  NEED(op, dout);
  NEED(op, inp);
  NEED(op, rstd);
  if (dinp) NEED(op, weight);  // only dinp reads the weight (dweight is a column sum)
  return TSR_OK;
}

// What the rotary entries share: the sizes and the rotation's table parameters.
static tsr_status check_rope(const char *op, int L, int H, int Dh, float theta) {
  DIM(op, L);
  DIM(op, H);
  if (Dh <= 0 || Dh % 2)
    return err_set(TSR_EINVAL, "%s: head dimension %d must be even and > 0", op, Dh);
  if (!(theta > 0.0f)) return err_set(TSR_EINVAL, "%s: theta = %g must be > 0", op, (double)theta);
  return TSR_OK;
}

tsr_status kernels_check_rope_forward(const void *out, const void *inp, const int32_t *pos, int L,
                                      int H, int Dh, float theta) {
  const char *op = "rope_forward";
  tsr_status st = check_rope(op, L, H, Dh, theta);
  if (st || L == 0 || H == 0) return st;
  NEED(op, out);
  NEED(op, inp);
  NEED(op, pos);
  return TSR_OK;
}

tsr_status kernels_check_rope_backward(const void *dinp, const void *dout, const int32_t *pos,
                                       int L, int H, int Dh, float theta) {
  const char *op = "rope_backward";
  tsr_status st = check_rope(op, L, H, Dh, theta);
  if (st || L == 0 || H == 0) return st;
  NEED(op, dinp);
  NEED(op, dout);
  NEED(op, pos);
  return TSR_OK;
}

tsr_status kernels_check_qk_norm_rope_forward(const void *q_out, const void *k_out,
                                              const float *q_rstd, const float *k_rstd,
                                              const void *q_in, const void *k_in,
                                              const float *q_weight, const float *k_weight,
                                              const int32_t *pos, int L, int H, int Dh,
                                              float theta) {
  const char *op = "qk_norm_rope_forward";
  tsr_status st = check_rope(op, L, H, Dh, theta);
  if (st || L == 0 || H == 0) return st;
  NEED(op, q_out);
  NEED(op, k_out);
  NEED(op, q_rstd);
  NEED(op, k_rstd);
  NEED(op, q_in);
  NEED(op, k_in);
  NEED(op, q_weight);
  NEED(op, k_weight);
  NEED(op, pos);
  return TSR_OK;
}

tsr_status kernels_check_qk_norm_rope_backward(const void *dq_in, const void *dk_in,
                                               const void *dq, const void *dk, const void *q_in,
                                               const void *k_in, const float *q_weight,
                                               const float *k_weight, const float *q_rstd,
                                               const float *k_rstd, const int32_t *pos, int L,
                                               int H, int Dh, float theta) {
  const char *op = "qk_norm_rope_backward";
  tsr_status st = check_rope(op, L, H, Dh, theta);
  if (st || L == 0 || H == 0) return st;
  NEED(op, dq_in);
  NEED(op, dk_in);
  NEED(op, dq);
  NEED(op, dk);
  NEED(op, q_in);
  NEED(op, k_in);
  NEED(op, q_weight);
  NEED(op, k_weight);
  NEED(op, q_rstd);
  NEED(op, k_rstd);
  NEED(op, pos);
  return TSR_OK;
}

tsr_status kernels_check_timestep_embedding(const void *out, const float *t, int n, int dim,
                                            float max_period) {
  const char *op = "timestep_embedding";
  DIM(op, n);
  DIM(op, dim);
  if (!(max_period > 0.0f))
    return err_set(TSR_EINVAL, "%s: max_period = %g must be > 0", op, (double)max_period);
  if (n == 0 || dim == 0) return TSR_OK;
  NEED(op, out);
  NEED(op, t);
  return TSR_OK;
}

// What the four adaLN entries share: sizes, the per-clip vectors' stride, the clips.
static tsr_status check_adaln(const char *op, int mstride, const int32_t *cu_seqlens,
                              int n_clips, int L, int D) {
  if (L < 0 || D < 0) return err_set(TSR_EINVAL, "%s: L = %d, D = %d must be >= 0", op, L, D);
  if (mstride < D)
    return err_set(TSR_EINVAL, "%s: mstride = %d is smaller than D = %d", op, mstride, D);
  return check_offsets(op, "cu_seqlens", cu_seqlens, n_clips);
}

tsr_status kernels_check_modulate_forward(const void *out, const void *inp, const void *shift,
                                          const void *scale, int mstride,
                                          const int32_t *cu_seqlens, int n_clips, int L, int D) {
  const char *op = "modulate_forward";
  tsr_status st = check_adaln(op, mstride, cu_seqlens, n_clips, L, D);
  if (st || L == 0 || D == 0) return st;
  NEED(op, out);
  NEED(op, inp);
  NEED(op, shift);
  NEED(op, scale);
  return TSR_OK;
}

tsr_status kernels_check_modulate_backward(const void *dinp, const void *dshift,
                                           const void *dscale, const void *dout, const void *inp,
                                           const void *scale, int mstride,
                                           const int32_t *cu_seqlens, int n_clips, int L, int D) {
  const char *op = "modulate_backward";
  tsr_status st = check_adaln(op, mstride, cu_seqlens, n_clips, L, D);
  if (st || L == 0 || D == 0) return st;
  NEED(op, dout);
  if (dinp) NEED(op, scale);
  if (dshift || dscale) NEED(op, inp);
  return TSR_OK;
}

tsr_status kernels_check_gate_residual_forward(const void *out, const void *res, const void *inp,
                                               const void *gate, int mstride,
                                               const int32_t *cu_seqlens, int n_clips, int L,
                                               int D) {
  const char *op = "gate_residual_forward";
  tsr_status st = check_adaln(op, mstride, cu_seqlens, n_clips, L, D);
  if (st || L == 0 || D == 0) return st;
  NEED(op, out);
  NEED(op, res);
  NEED(op, inp);
  NEED(op, gate);
  return TSR_OK;
}

tsr_status kernels_check_gate_residual_backward(const void *dinp, const void *dgate,
                                                const void *dout, const void *inp,
                                                const void *gate, int mstride,
                                                const int32_t *cu_seqlens, int n_clips, int L,
                                                int D) {
  const char *op = "gate_residual_backward";
  tsr_status st = check_adaln(op, mstride, cu_seqlens, n_clips, L, D);
  if (st || L == 0 || D == 0) return st;
  NEED(op, dout);
  if (dinp) NEED(op, gate);
  if (dgate) NEED(op, inp);
  return TSR_OK;
}

tsr_status kernels_check_layernorm_modulate_forward(const void *out, const float *mean,
                                                    const float *rstd, const void *inp,
                                                    const void *shift, const void *scale,
                                                    int mstride, const int32_t *cu_seqlens,
                                                    int n_clips, int L, int D) {
  const char *op = "layernorm_modulate_forward";
  tsr_status st = check_adaln(op, mstride, cu_seqlens, n_clips, L, D);
  if (st || L == 0) return st;
  if (D == 0) return err_set(TSR_EINVAL, "%s: D = 0", op);
  NEED(op, out);
  NEED(op, mean);
  NEED(op, rstd);
  NEED(op, inp);
  NEED(op, shift);
  NEED(op, scale);
  return TSR_OK;
}

tsr_status kernels_check_layernorm_modulate_backward(const void *dinp, const void *dscale,
                                                     const void *dout, const void *inp,
                                                     const float *mean, const float *rstd,
                                                     const void *scale, int mstride,
                                                     const int32_t *cu_seqlens, int n_clips,
                                                     int L, int D) {
  const char *op = "layernorm_modulate_backward";
  tsr_status st = check_adaln(op, mstride, cu_seqlens, n_clips, L, D);
  if (st || L == 0 || D == 0) return st;
  NEED(op, dout);
  if (dinp || dscale) {
    NEED(op, inp);
    NEED(op, mean);
    NEED(op, rstd);
  }
  if (dinp) NEED(op, scale);
  return TSR_OK;
}

tsr_status kernels_check_objective_inputs(const float *t, const void *x_t, const void *target,
                                          const void *tokens, kernels_tokens tokens_dtype,
                                          const kernels_clip_key *clips,
                                          const int32_t *cu_seqlens, int n_clips, int L, int P) {
  const char *op = "objective_inputs";
  DIM(op, L);
  DIM(op, P);
  if (!kernels_tokens_size(tokens_dtype))
    return err_set(TSR_EINVAL, "%s: unknown token dtype %d", op, (int)tokens_dtype);
  tsr_status st = check_offsets(op, "cu_seqlens", cu_seqlens, n_clips);
  if (st) return st;
  if (n_clips > 0) {
    NEED(op, t);
    NEED(op, clips);
  }
  if (L > 0 && P > 0) {
    NEED(op, x_t);
    NEED(op, target);
    NEED(op, tokens);
  }
  return TSR_OK;
}

tsr_status kernels_check_embedding_forward(const void *out, const float *table,
                                           const int32_t *ids, int n, int V, int D) {
  const char *op = "embedding_forward";
  DIM(op, n);
  DIM(op, V);
  DIM(op, D);
  if (n == 0) return TSR_OK;
  NEED(op, out);
  NEED(op, table);
  NEED(op, ids);
  return TSR_OK;
}

tsr_status kernels_check_embedding_backward(const float *dtable, const void *dout,
                                            const int32_t *ids, int n, int V, int D) {
  const char *op = "embedding_backward";
  DIM(op, n);
  DIM(op, V);
  DIM(op, D);
  if (n == 0 || !dtable) return TSR_OK;  // nothing to accumulate
  NEED(op, dout);
  NEED(op, ids);
  return TSR_OK;
}

tsr_status kernels_check_euler_update(const float *x, const void *v_cond, size_t n) {
  if (n == 0) return TSR_OK;
  NEED("euler_update", x);
  NEED("euler_update", v_cond);
  return TSR_OK;
}

// What mse_forward and mse_backward share: sizes, the clips, their weights, the operands.
static tsr_status check_loss(const char *op, const void *pred, const void *target,
                             const float *weight, const int32_t *cu_seqlens, int n_clips, int L,
                             int D) {
  DIM(op, L);
  DIM(op, D);
  tsr_status st = check_offsets(op, "cu_seqlens", cu_seqlens, n_clips);
  if (st) return st;
  if (n_clips > 0) NEED(op, weight);
  if (L > 0 && D > 0) {
    NEED(op, pred);
    NEED(op, target);
  }
  return TSR_OK;
}

tsr_status kernels_check_mse_forward(const float *loss, const void *pred, const void *target,
                                     const float *weight, const int32_t *cu_seqlens, int n_clips,
                                     int L, int D) {
  tsr_status st = check_loss("mse_forward", pred, target, weight, cu_seqlens, n_clips, L, D);
  if (st) return st;
  NEED("mse_forward", loss);
  return TSR_OK;
}

tsr_status kernels_check_mse_backward(const void *dpred, const void *pred, const void *target,
                                      const float *weight, const int32_t *cu_seqlens, int n_clips,
                                      int L, int D) {
  tsr_status st = check_loss("mse_backward", pred, target, weight, cu_seqlens, n_clips, L, D);
  if (st) return st;
  if (L > 0 && D > 0) NEED("mse_backward", dpred);
  return TSR_OK;
}

tsr_status kernels_check_adamw_update(const float *param, const float *grad, const float *m,
                                      const float *v, size_t n) {
  if (n == 0) return TSR_OK;
  NEED("adamw_update", param);
  NEED("adamw_update", grad);
  NEED("adamw_update", m);
  NEED("adamw_update", v);
  return TSR_OK;
}

tsr_status kernels_check_adamw_update_multi(const float *param, const float *grad,
                                            const float *m, const float *v, const void *work,
                                            size_t n, const kernels_param_segment *segs,
                                            int n_segs) {
  const char *op = "adamw_update_multi";
  if (n_segs < 0) return err_set(TSR_EINVAL, "%s: n_segs = %d is negative", op, n_segs);
  if (work && work == (const void *)param)
    return err_set(TSR_EINVAL, "%s: work is param itself (pass NULL when the working copy is "
                   "the fp32 weights)", op);
  if (n == 0 || n_segs == 0) return TSR_OK;
  NEED(op, segs);
  NEED(op, param);
  NEED(op, grad);
  NEED(op, m);
  NEED(op, v);
  return TSR_OK;
}

tsr_status kernels_check_sumsq(const double *result_host, const float *x, size_t n) {
  NEED("sumsq", result_host);
  if (n) NEED("sumsq", x);
  return TSR_OK;
}

tsr_status kernels_check_ema_update(const float *ema, const float *param, size_t n, float decay) {
  if (!(decay >= 0.0f && decay <= 1.0f))
    return err_set(TSR_EINVAL, "ema_update: decay = %g must be in [0, 1]", (double)decay);
  if (n == 0) return TSR_OK;
  NEED("ema_update", ema);
  NEED("ema_update", param);
  return TSR_OK;
}

tsr_status kernels_check_gemm(int m, int n, int k, const void *a, const void *b, const void *c) {
  const char *op = "gemm";
  DIM(op, m);
  DIM(op, n);
  DIM(op, k);
  if (m == 0 || n == 0) return TSR_OK;
  NEED(op, c);
  if (k > 0) {
    NEED(op, a);
    NEED(op, b);
  }
  return TSR_OK;
}

// linear_forward and linear_gelu_forward: out (M, N) = inp (M, K) w (K, N).
static tsr_status check_linear(const char *op, const void *out, const void *inp, const void *w,
                               int M, int K, int N) {
  DIM(op, M);
  DIM(op, K);
  DIM(op, N);
  if (M == 0 || N == 0) return TSR_OK;
  NEED(op, out);
  if (K > 0) {
    NEED(op, inp);
    NEED(op, w);
  }
  return TSR_OK;
}

// linear_backward and linear_backward_dgelu (dinp: its dpre).
static tsr_status check_linear_bwd(const char *op, const void *dinp, const float *dw,
                                   const void *dout, const void *inp, const void *w, int M, int K,
                                   int N) {
  DIM(op, M);
  DIM(op, K);
  DIM(op, N);
  if (M > 0 && N > 0) NEED(op, dout);
  if (dinp && N > 0 && K > 0) NEED(op, w);
  if (dw && M > 0 && K > 0) NEED(op, inp);
  return TSR_OK;
}

tsr_status kernels_check_linear_forward(const void *out, const void *inp, const void *w, int M,
                                        int K, int N) {
  return check_linear("linear_forward", out, inp, w, M, K, N);
}

tsr_status kernels_check_linear_backward(const void *dinp, const float *dw, const void *dout,
                                         const void *inp, const void *w, int M, int K, int N) {
  return check_linear_bwd("linear_backward", dinp, dw, dout, inp, w, M, K, N);
}

tsr_status kernels_check_linear_gelu_forward(const void *out, const void *pre, const void *inp,
                                             const void *w, int M, int K, int N) {
  const char *op = "linear_gelu_forward";
  tsr_status st = check_linear(op, out, inp, w, M, K, N);
  if (!st && M > 0 && N > 0) NEED(op, pre);
  return st;
}

tsr_status kernels_check_linear_backward_dgelu(const void *dpre, const float *dw,
                                               const void *dout, const void *inp, const void *w,
                                               const void *pre, int M, int K, int N) {
  const char *op = "linear_backward_dgelu";
  tsr_status st = check_linear_bwd(op, dpre, dw, dout, inp, w, M, K, N);
  if (!st && dpre && M > 0 && K > 0) NEED(op, pre);
  return st;
}

tsr_status kernels_check_gemm_strided(int trans_a, int trans_b, int m, int n, int k,
                                      const void *a, int lda, const void *b, int ldb,
                                      const void *c, int ldc) {
  const char *op = "gemm_strided";
  DIM(op, m);
  DIM(op, n);
  DIM(op, k);
  if (lda < (trans_a ? m : k) || ldb < (trans_b ? k : n) || ldc < n || lda < 1 || ldb < 1 ||
      ldc < 1)
    return err_set(TSR_EINVAL, "%s: a row stride below its row's length (m %d n %d k %d, "
                   "lda %d ldb %d ldc %d, trans_a %d trans_b %d)", op, m, n, k, lda, ldb, ldc,
                   trans_a, trans_b);
  if (m == 0 || n == 0) return TSR_OK;
  NEED(op, c);
  if (k > 0) {
    NEED(op, a);
    NEED(op, b);
  }
  return TSR_OK;
}

tsr_status kernels_check_gemm_batched(int trans_a, int trans_b, int m, int n, int k,
                                      const void *a, int64_t stride_a, const void *b,
                                      int64_t stride_b, const void *c, int64_t stride_c,
                                      int64_t stride_bias, int batch) {
  const char *op = "gemm_batched";
  DIM(op, m);
  DIM(op, n);
  DIM(op, k);
  DIM(op, batch);
  if (stride_a < 0 || stride_b < 0 || stride_c < 0 || stride_bias < 0)
    return err_set(TSR_EINVAL, "%s: a negative batch stride (a %lld b %lld c %lld bias %lld)", op,
                   (long long)stride_a, (long long)stride_b, (long long)stride_c,
                   (long long)stride_bias);
  if (batch > 1 && stride_c < (int64_t)m * n)
    return err_set(TSR_EINVAL, "%s: stride_c %lld below m n = %lld: the %d outputs would overlap "
                   "(trans_a %d trans_b %d)", op, (long long)stride_c, (long long)m * n, batch,
                   trans_a, trans_b);
  if (m == 0 || n == 0 || batch == 0) return TSR_OK;
  NEED(op, c);
  if (k > 0) {
    NEED(op, a);
    NEED(op, b);
  }
  return TSR_OK;
}

tsr_status kernels_check_copy_2d(const void *dst, size_t dst_pitch, const void *src,
                                 size_t src_pitch, size_t row_bytes, size_t rows) {
  if (row_bytes == 0 || rows == 0) return TSR_OK;
  NEED("copy_2d", dst);
  NEED("copy_2d", src);
  if (dst_pitch < row_bytes || src_pitch < row_bytes)
    return err_set(TSR_EINVAL, "copy_2d: pitches %zu, %zu below the row's %zu bytes", dst_pitch,
                   src_pitch, row_bytes);
  return TSR_OK;
}

tsr_status kernels_check_activation_forward(const char *op, const void *out, const void *inp,
                                            size_t n) {
  if (n == 0) return TSR_OK;
  NEED(op, out);
  NEED(op, inp);
  return TSR_OK;
}

tsr_status kernels_check_activation_backward(const char *op, const void *dinp, const void *dout,
                                             const void *inp, size_t n) {
  if (n == 0) return TSR_OK;
  NEED(op, dinp);
  NEED(op, dout);
  NEED(op, inp);
  return TSR_OK;
}
