// model/mask.c — the DiT's masked self-attention through the backend's masked entries.
#include "model/mask.h"

#include "model/dit_internal.h"

tsr_status dit_mask_check_backend(const dit_config *c, const kernels_backend *kb) {
  if (c->attn_mask == KERNELS_MASK_FULL) return TSR_OK;
  const char *missing = !kernels_has(kb, attention_masked_forward)    ? "attention_masked_forward"
                        : !kernels_has(kb, attention_masked_backward) ? "attention_masked_backward"
                                                                      : NULL;
  if (!missing) return TSR_OK;
  return err_set(TSR_EINVAL, "model.attn_mask = %s: backend %s has no %s (choose a backend "
                 "that has it, such as cpu or cuda, or set model.attn_mask = full)",
                 config_mask_name(c->attn_mask), kb->name, missing);
}

tsr_status dit_mask_forward(const dit_config *c, const kernels_backend *kb, const dit_batch *b,
                            void *out, float *lse, const void *q, const void *k, const void *v,
                            int H, int Dh, float scale) {
  tsr_status st = dit_mask_check_backend(c, kb);
  if (st) return st;
  int mx = dit_attn_max_len(b);
  const int32_t *cu = dit_attn_cu(b);
  return kb->attention_masked_forward(kb, out, lse, q, k, v, cu, cu, b->pos, b->pos,
                                      config_mask(c), dit_attn_clips(b), mx, mx, b->L, b->L, H,
                                      Dh, scale);
}

tsr_status dit_mask_backward(const dit_config *c, const kernels_backend *kb, const dit_batch *b,
                             void *dq, void *dk, void *dv, const void *dout, const void *q,
                             const void *k, const void *v, const void *out, const float *lse,
                             int H, int Dh, float scale) {
  tsr_status st = dit_mask_check_backend(c, kb);
  if (st) return st;
  return kb->attention_masked_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, dit_attn_cu(b),
                                       b->pos, config_mask(c), dit_attn_clips(b),
                                       dit_attn_max_len(b), b->L, H, Dh, scale);
}
