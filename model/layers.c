// model/layers.c — the layer helpers every part of the DiT shares: linear layers from the
// tensor table, and LayerNorm + adaLN modulation (both block sites and the final layer).
#include "model/dit_internal.h"

tsr_status dit_linear_fwd(dit_model *m, dit_linear l, void *out, const void *inp, int M) {
  const dit_tensor *w = &m->table[l.w];
  return m->kb->linear_forward(m->kb, out, inp, dit_w(m, l.w), dit_p(m, l.w + 1), M,
                               (int)w->shape[0], (int)w->shape[1]);
}

tsr_status dit_linear_bwd(dit_model *m, dit_linear l, void *dinp, int accumulate,
                          const void *dout, const void *inp, int M) {
  const kernels_backend *kb = m->kb;
  const dit_tensor *w = &m->table[l.w];
  int K = (int)w->shape[0], N = (int)w->shape[1];
  if (!accumulate || !dinp)
    return kb->linear_backward(kb, dinp, dit_g(m, l.w), dit_g(m, l.w + 1), dout, inp,
                               dit_w(m, l.w), M, K, N);
  DIT_TRY(kb->linear_backward(kb, NULL, dit_g(m, l.w), dit_g(m, l.w + 1), dout, inp, NULL, M, K, N));
  // dinp += dout (M, N) * W^T (N, K)
  return kb->gemm(kb, 0, 1, M, K, N, 1.0f, dout, dit_w(m, l.w), 1.0f, dinp);
}

tsr_status dit_ln_mod_fwd(dit_model *m, const dit_batch *b, void *out, void *ln, float *mean,
                          float *rstd, const void *inp, const void *shift, const void *scale,
                          int mstride) {
  const kernels_backend *kb = m->kb;
  DIT_TRY(kb->layernorm_forward(kb, ln, mean, rstd, inp, b->L, m->D, m->cfg.ln_eps));
  return kb->modulate_forward(kb, out, ln, shift, scale, mstride, b->cu_seqlens, b->n_clips, b->L,
                              m->D);
}

tsr_status dit_ln_mod_bwd(dit_model *m, const dit_batch *b, void *dinp, void *dshift,
                          void *dscale, const void *dout, const void *inp, const void *ln,
                          const float *mean, const float *rstd, const void *scale, int mstride,
                          void *tmp1, void *tmp2) {
  const kernels_backend *kb = m->kb;
  int L = b->L, D = m->D;
  DIT_TRY(kb->modulate_backward(kb, tmp1, dshift, dscale, dout, ln, scale, mstride, b->cu_seqlens,
                                b->n_clips, L, D));
  DIT_TRY(kb->layernorm_backward(kb, tmp2, tmp1, inp, mean, rstd, L, D));
  return kb->axpy_act(kb, dinp, 1.0f, tmp2, (size_t)L * D);
}
