// kernels/check.c — the backend-independent argument checks of kernels.h's entries
// (kernels/check.h). The messages are the ones both backends gave before the checks moved
// here, word for word, so a caller sees the same error whichever backend it runs.
#include "kernels/check.h"

// "op: name is NULL" and "op: name = v is negative", named after the entry's argument.
#define NEED(op, p) \
  do { if (!(p)) return err_set(TSR_EINVAL, "%s: %s is NULL", (op), #p); } while (0)
#define DIM(op, x) \
  do { if ((x) < 0) return err_set(TSR_EINVAL, "%s: %s = %lld is negative", (op), #x, (long long)(x)); } while (0)

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

// The host-side half of every packed-clips check: n_clips and the pointer. The values of
// cu_seqlens live in backend memory: each backend checks them its own way.
static tsr_status check_cu_args(const char *op, const int32_t *cu_seqlens, int n_clips) {
  if (n_clips < 0) return err_set(TSR_EINVAL, "%s: n_clips = %d is negative", op, n_clips);
  NEED(op, cu_seqlens);
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
  tsr_status st = check_cu_args(op, cu_seqlens, n_clips);
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
  tsr_status st = check_cu_args(op, cu_seqlens, n_clips);
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

tsr_status kernels_check_attention_merge(const void *out_a, const float *lse_a,
                                         const void *out_b, const float *lse_b, int L, int H,
                                         int Dh) {
  const char *op = "attention_merge";
  DIM(op, L);
  DIM(op, H);
  DIM(op, Dh);
  if ((size_t)L * H == 0) return TSR_OK;
  NEED(op, out_a);
  NEED(op, lse_a);
  NEED(op, out_b);
  NEED(op, lse_b);
  return TSR_OK;
}

tsr_status kernels_check_attention_delta(const float *delta, const void *dout, const void *out,
                                         int L, int H, int Dh) {
  const char *op = "attention_delta";
  DIM(op, L);
  DIM(op, H);
  DIM(op, Dh);
  if ((size_t)L * H == 0) return TSR_OK;
  NEED(op, delta);
  NEED(op, dout);
  NEED(op, out);
  return TSR_OK;
}

tsr_status kernels_check_mask(const char *op, const kernels_mask *m, const int32_t *pos_q,
                              int Lq, const int32_t *pos_k, int Lk) {
  if (m->kind < KERNELS_MASK_FULL || m->kind > KERNELS_MASK_WINDOW)
    return err_set(TSR_EINVAL, "%s: unknown mask kind %d", op, m->kind);
  if (m->kind == KERNELS_MASK_BLOCK_CAUSAL && (m->chunk < 1 || m->window < 0))
    return err_set(TSR_EINVAL, "%s: block-causal mask with chunk %d (>= 1) and window %d (>= 0)",
                   op, m->chunk, m->window);
  if (m->kind == KERNELS_MASK_WINDOW &&
      (m->tile_t < 1 || m->tile_h < 1 || m->tile_w < 1 || m->wt < 0 || m->wh < 0 || m->ww < 0))
    return err_set(TSR_EINVAL, "%s: window mask with tiles %dx%dx%d (>= 1) and radii %d, %d, %d "
                   "(>= 0)", op, m->tile_t, m->tile_h, m->tile_w, m->wt, m->wh, m->ww);
  if (m->kind != KERNELS_MASK_FULL && ((Lq > 0 && !pos_q) || (Lk > 0 && !pos_k)))
    return err_set(TSR_EINVAL, "%s: a mask needs the positions of the queries and keys", op);
  return TSR_OK;
}
