// model/layers.c — the layer helpers every part of the DiT shares: linear layers from the
// tensor table (plain, with a GELU epilogue, and the backward through GELU), and LayerNorm
// + adaLN modulation (both block sites and the final layer), each one fused backend entry.
// A linear with a LoRA adapter (lora.c) runs on its base weight and adds the adapter's GEMMs
// after the base entry, or (dit_lora_merged) runs on the merged weight W + s A^T B^T that
// dit_lora_weight makes, the adapter then adding only what its gradients need.
#include "model/dit_internal.h"

tsr_status dit_linear_fwd(dit_model *m, dit_linear l, void *out, const void *inp, int M) {
  const dit_tensor *w = &m->table[l.w];
  const void *wt;
  TSR_TRY(dit_lora_weight(m, l, M, &wt));
  TSR_TRY(m->kb->linear_forward(m->kb, out, inp, wt, dit_p(m, l.w + 1), M, (int)w->shape[0],
                                (int)w->shape[1]));
  return dit_lora_fwd(m, l, out, inp, M);
}

tsr_status dit_linear_bwd(dit_model *m, dit_linear l, void *dinp, int accumulate,
                          const void *dout, const void *inp, int M) {
  const kernels_backend *kb = m->kb;
  const dit_tensor *w = &m->table[l.w];
  int K = (int)w->shape[0], N = (int)w->shape[1];
  const void *wt = dit_w(m, l.w);
  if (dinp) TSR_TRY(dit_lora_weight(m, l, M, &wt));
  if (!accumulate || !dinp) {
    TSR_TRY(kb->linear_backward(kb, dinp, dit_g(m, l.w), dit_g(m, l.w + 1), dout, inp, wt, M, K,
                                N));
  } else {
    TSR_TRY(kb->linear_backward(kb, NULL, dit_g(m, l.w), dit_g(m, l.w + 1), dout, inp, NULL, M, K,
                                N));
    // dinp += dout (M, N) * W^T (N, K)
    TSR_TRY(kb->gemm(kb, 0, 1, M, K, N, 1.0f, dout, wt, 1.0f, dinp));
  }
  return dit_lora_bwd(m, l, dinp, dout, inp, M);
}

tsr_status dit_linear_gelu_fwd(dit_model *m, dit_linear l, void *out, void *pre, const void *inp,
                               int M) {
  const dit_tensor *w = &m->table[l.w];
  if (dit_lora_has(m, l) && !dit_lora_merged(m, l, M)) {  // the adapter adds to pre before
    TSR_TRY(dit_linear_fwd(m, l, pre, inp, M));           // the GELU: no fused epilogue
    return m->kb->gelu_forward(m->kb, out, pre, (size_t)M * (size_t)w->shape[1]);
  }
  const void *wt;
  TSR_TRY(dit_lora_weight(m, l, M, &wt));
  TSR_TRY(m->kb->linear_gelu_forward(m->kb, out, pre, inp, wt, dit_p(m, l.w + 1), M,
                                     (int)w->shape[0], (int)w->shape[1]));
  return dit_lora_fwd(m, l, pre, inp, M);  // merged: only the u its gradients need
}

tsr_status dit_linear_dgelu_bwd(dit_model *m, dit_linear l, void *dpre, const void *dout,
                                const void *inp, const void *pre, int M) {
  const dit_tensor *w = &m->table[l.w];
  const void *wt;
  TSR_TRY(dit_lora_weight(m, l, M, &wt));
  TSR_TRY(m->kb->linear_backward_dgelu(m->kb, dpre, dit_g(m, l.w), dit_g(m, l.w + 1), dout, inp,
                                       wt, pre, M, (int)w->shape[0], (int)w->shape[1]));
  return dit_lora_bwd_dgelu(m, l, dpre, dout, inp, pre, M);
}

tsr_status dit_ln_mod_fwd(dit_model *m, const dit_batch *b, void *out, float *mean, float *rstd,
                          const void *inp, const void *shift, const void *scale, int mstride) {
  return m->kb->layernorm_modulate_forward(m->kb, out, mean, rstd, inp, shift, scale, mstride,
                                           b->cu_seqlens, b->n_clips, b->L, m->D, m->cfg.ln_eps);
}

tsr_status dit_ln_mod_bwd(dit_model *m, const dit_batch *b, void *dinp, void *dshift,
                          void *dscale, const void *dout, const void *inp, const float *mean,
                          const float *rstd, const void *scale, int mstride) {
  return m->kb->layernorm_modulate_backward(m->kb, dinp, dshift, dscale, dout, inp, mean, rstd,
                                            scale, mstride, b->cu_seqlens, b->n_clips, b->L,
                                            m->D);
}
