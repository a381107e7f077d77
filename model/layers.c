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

// Whether the n pointers p[i] lie one stride apart, a positive multiple of `unit` bytes:
// *stride in units. uintptr_t arithmetic: they may point into different buffers.
static int at_stride(const void *const *p, int n, size_t unit, int64_t *stride) {
  uintptr_t d = 0;
  for (int i = 1; i < n; i++) {
    uintptr_t a = (uintptr_t)p[i - 1], b = (uintptr_t)p[i];
    if (!p[i - 1] || b <= a || (i > 1 && b - a != d)) return 0;
    d = b - a;
  }
  if (n < 2 || d % unit) return 0;
  *stride = (int64_t)(d / unit);
  return 1;
}

// The batch strides of dit_linears_fwd's gemm_batched (weights, biases, outputs), or 0 when
// the n linears do not form one: fewer than 2 or more than DIT_LINEARS_MAX, shapes that
// differ, an adapter, a backend without the entry, operands not at one stride.
static int batchable(const dit_model *m, const dit_linear *ls, int n, void *const *outs, int M,
                     int64_t *sw, int64_t *sb, int64_t *so) {
  if (n < 2 || n > DIT_LINEARS_MAX || !kernels_has(m->kb, gemm_batched)) return 0;
  const void *w[DIT_LINEARS_MAX], *b[DIT_LINEARS_MAX];
  const dit_tensor *t0 = &m->table[ls[0].w];
  for (int i = 0; i < n; i++) {
    const dit_tensor *t = &m->table[ls[i].w];
    if (t->shape[0] != t0->shape[0] || t->shape[1] != t0->shape[1] || dit_lora_has(m, ls[i]))
      return 0;
    w[i] = dit_w(m, ls[i].w);
    b[i] = dit_p(m, ls[i].w + 1);
  }
  const size_t asz = kernels_dtype_size(m->kb->act_dtype);
  return at_stride(w, n, asz, sw) && at_stride(b, n, sizeof(float), sb) &&
         at_stride((const void *const *)outs, n, asz, so) &&
         *so >= (int64_t)M * t0->shape[1];
}

tsr_status dit_linears_fwd(dit_model *m, const dit_linear *ls, int n, void *const *outs,
                           const void *inp, int M) {
  int64_t sw, sb, so;
  if (!batchable(m, ls, n, outs, M, &sw, &sb, &so)) {
    for (int i = 0; i < n; i++) TSR_TRY(dit_linear_fwd(m, ls[i], outs[i], inp, M));
    return TSR_OK;
  }
  const kernels_backend *kb = m->kb;
  const dit_tensor *w = &m->table[ls[0].w];
  int K = (int)w->shape[0], N = (int)w->shape[1];
  return kb->gemm_batched(kb, 0, 0, M, N, K, 1.0f, inp, 0, dit_w(m, ls[0].w), sw, 0.0f, outs[0],
                          so, kb->act_dtype, dit_p(m, ls[0].w + 1), sb, n);
}

tsr_status dit_linears_bwd(dit_model *m, const dit_linear *ls, int n, void *dinp,
                           const void *const *douts, const void *inp, int M) {
  const kernels_backend *kb = m->kb;
  int64_t sw, sb, sd, sg, sgb;
  void *const *d = (void *const *)douts;
  if (!batchable(m, ls, n, d, M, &sw, &sb, &sd)) {
    for (int i = 0; i < n; i++) TSR_TRY(dit_linear_bwd(m, ls[i], dinp, i > 0, douts[i], inp, M));
    return TSR_OK;
  }
  const dit_tensor *w = &m->table[ls[0].w];
  int K = (int)w->shape[0], N = (int)w->shape[1];
  const void *g[DIT_LINEARS_MAX] = {0}, *gb[DIT_LINEARS_MAX] = {0};
  for (int i = 0; i < n; i++) g[i] = dit_g(m, ls[i].w), gb[i] = dit_g(m, ls[i].w + 1);
  if (g[0]) {  // not frozen: dW_i += inp^T douts[i], one batch where the grads allow
    if (at_stride(g, n, sizeof(float), &sg) && at_stride(gb, n, sizeof(float), &sgb)) {
      TSR_TRY(kb->gemm_batched(kb, 1, 0, K, N, M, 1.0f, inp, 0, douts[0], sd, 1.0f, (void *)g[0],
                               sg, KERNELS_F32, NULL, 0, n));
      for (int i = 0; i < n; i++)
        TSR_TRY(kb->linear_backward(kb, NULL, NULL, (float *)gb[i], douts[i], NULL, NULL, M, K, N));
    } else {
      for (int i = 0; i < n; i++)
        TSR_TRY(kb->linear_backward(kb, NULL, (float *)g[i], (float *)gb[i], douts[i], inp, NULL,
                                    M, K, N));
    }
  }
  for (int i = 0; dinp && i < n; i++)  // dinp (M, K) (+)= douts[i] (M, N) W_i^T (N, K)
    TSR_TRY(kb->gemm(kb, 0, 1, M, K, N, 1.0f, douts[i], dit_w(m, ls[i].w), i ? 1.0f : 0.0f, dinp));
  return TSR_OK;
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
