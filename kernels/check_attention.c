// kernels/check_attention.c — the backend-independent argument checks of the attention
// entries (kernels/check_attention.h), one message per error naming the entry and the
// argument, so a caller sees the same error whichever backend it runs.
#include "kernels/check_attention.h"

#include <math.h>

#include "kernels/check_need.h"

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

// The sizes every attention entry checks (whole clips: cu_q == cu_k = cu_seqlens and
// max_q == max_k = max_len, named so).
static tsr_status check_attn_sizes(const char *op, int whole, const int32_t *cu_q,
                                   const int32_t *cu_k, int n_clips, int max_q, int max_k,
                                   int Lq, int Lk, int H, int Dh, float scale) {
  DIM(op, Lq);
  DIM(op, Lk);
  DIM(op, H);
  if (Dh <= 0) return err_set(TSR_EINVAL, "%s: head dimension %d must be > 0", op, Dh);
  if (!isfinite(scale)) return err_set(TSR_EINVAL, "%s: softmax scale is not finite", op);
  if (max_q < 0 || max_k < 0)
    return err_set(TSR_EINVAL, "%s: %s = %d is negative", op,
                   whole ? "max_len" : max_q < 0 ? "max_q" : "max_k", max_q < 0 ? max_q : max_k);
  tsr_status st = check_offsets(op, whole ? "cu_seqlens" : "cu_q", cu_q, n_clips);
  if (!st && !whole) st = check_offsets(op, "cu_k", cu_k, n_clips);
  if (st) return st;
  if (n_clips == 0 && (Lq > 0 || Lk > 0))
    return err_set(TSR_EINVAL, "%s: %d tokens but no clips (n_clips = 0)", op, Lq > 0 ? Lq : Lk);
  return TSR_OK;
}

// The mask's kind and sizes, and the positions it needs (check_attention.h, the masked
// entries).
static tsr_status check_mask(const char *op, const kernels_mask *m, const int32_t *pos_q,
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

static tsr_status check_attn_forward(const char *op, const void *out, const float *lse,
                                     const void *q, const void *k, const void *v, int Lq, int Lk,
                                     int H) {
  if (Lq == 0 || H == 0) return TSR_OK;
  NEED(op, out);
  NEED(op, lse);
  NEED(op, q);
  if (Lk == 0) return TSR_OK;
  NEED(op, k);
  NEED(op, v);
  return TSR_OK;
}

// delta: the partial backward's (whole: not an argument, NULL and not checked).
static tsr_status check_attn_backward(const char *op, int whole, const void *dq, const void *dk,
                                      const void *dv, const void *dout, const void *q,
                                      const void *k, const void *v, const void *out,
                                      const float *lse, const float *delta, int Lq, int Lk,
                                      int H) {
  if (!dk != !dv)
    return err_set(TSR_EINVAL, "%s: dk and dv must both be given or both be NULL", op);
  if (Lq == 0 || Lk == 0 || H == 0 || (!dq && !dk)) return TSR_OK;
  NEED(op, dout);
  NEED(op, q);
  NEED(op, k);
  NEED(op, v);
  NEED(op, out);
  NEED(op, lse);
  if (!whole) NEED(op, delta);
  return TSR_OK;
}

tsr_status kernels_check_attention_forward(const void *out, const float *lse, const void *q,
                                           const void *k, const void *v,
                                           const int32_t *cu_seqlens, int n_clips, int max_len,
                                           int L, int H, int Dh, float scale) {
  const char *op = "attention_forward";
  tsr_status st = check_attn_sizes(op, 1, cu_seqlens, cu_seqlens, n_clips, max_len, max_len, L, L,
                                   H, Dh, scale);
  return st ? st : check_attn_forward(op, out, lse, q, k, v, L, L, H);
}

tsr_status kernels_check_attention_backward(const void *dq, const void *dk, const void *dv,
                                            const void *dout, const void *q, const void *k,
                                            const void *v, const void *out, const float *lse,
                                            const int32_t *cu_seqlens, int n_clips,
                                            int max_len, int L, int H, int Dh, float scale) {
  const char *op = "attention_backward";
  tsr_status st = check_attn_sizes(op, 1, cu_seqlens, cu_seqlens, n_clips, max_len, max_len, L, L,
                                   H, Dh, scale);
  return st ? st : check_attn_backward(op, 1, dq, dk, dv, dout, q, k, v, out, lse, NULL, L, L, H);
}

tsr_status kernels_check_attention_partial_forward(const void *out, const float *lse,
                                                   const void *q, const void *k, const void *v,
                                                   const int32_t *cu_q, const int32_t *cu_k,
                                                   int n_clips, int max_q, int max_k, int Lq,
                                                   int Lk, int H, int Dh, float scale) {
  const char *op = "attention_partial_forward";
  tsr_status st = check_attn_sizes(op, 0, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
  return st ? st : check_attn_forward(op, out, lse, q, k, v, Lq, Lk, H);
}

tsr_status kernels_check_attention_partial_backward(
    const void *dq, const void *dk, const void *dv, const void *dout, const void *q,
    const void *k, const void *v, const void *out, const float *lse, const float *delta,
    const int32_t *cu_q, const int32_t *cu_k, int n_clips, int max_q, int max_k, int Lq, int Lk,
    int H, int Dh, float scale) {
  const char *op = "attention_partial_backward";
  tsr_status st = check_attn_sizes(op, 0, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
  return st ? st
            : check_attn_backward(op, 0, dq, dk, dv, dout, q, k, v, out, lse, delta, Lq, Lk, H);
}

tsr_status kernels_check_attention_masked_forward(const void *out, const float *lse,
                                                  const void *q, const void *k, const void *v,
                                                  const int32_t *cu_q, const int32_t *cu_k,
                                                  const int32_t *pos_q, const int32_t *pos_k,
                                                  const kernels_mask *mask, int n_clips,
                                                  int max_q, int max_k, int Lq, int Lk, int H,
                                                  int Dh, float scale) {
  const char *op = "attention_masked_forward";
  tsr_status st = check_attn_sizes(op, 0, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
  if (!st) st = check_mask(op, mask, pos_q, Lq, pos_k, Lk);
  return st ? st : check_attn_forward(op, out, lse, q, k, v, Lq, Lk, H);
}

tsr_status kernels_check_attention_masked_backward(
    const void *dq, const void *dk, const void *dv, const void *dout, const void *q,
    const void *k, const void *v, const void *out, const float *lse, const int32_t *cu_seqlens,
    const int32_t *pos, const kernels_mask *mask, int n_clips, int max_len, int L, int H, int Dh,
    float scale) {
  const char *op = "attention_masked_backward";
  tsr_status st = check_attn_sizes(op, 1, cu_seqlens, cu_seqlens, n_clips, max_len, max_len, L, L,
                                   H, Dh, scale);
  if (!st) st = check_mask(op, mask, pos, L, pos, L);
  return st ? st : check_attn_backward(op, 1, dq, dk, dv, dout, q, k, v, out, lse, NULL, L, L, H);
}

tsr_status kernels_check_attention_masked_partial_backward(
    const void *dq, const void *dk, const void *dv, const void *dout, const void *q,
    const void *k, const void *v, const void *out, const float *lse, const float *delta,
    const int32_t *cu_q, const int32_t *cu_k, const int32_t *pos_q, const int32_t *pos_k,
    const kernels_mask *mask, int n_clips, int max_q, int max_k, int Lq, int Lk, int H, int Dh,
    float scale) {
  const char *op = "attention_masked_partial_backward";
  tsr_status st = check_attn_sizes(op, 0, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
  if (!st) st = check_mask(op, mask, pos_q, Lq, pos_k, Lk);
  return st ? st
            : check_attn_backward(op, 0, dq, dk, dv, dout, q, k, v, out, lse, delta, Lq, Lk, H);
}
