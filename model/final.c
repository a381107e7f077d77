// model/final.c — the final layer: (shift, scale) = cs final.adaln + b,
// pred = (LN(h)(1 + scale) + shift) final.linear + b.
#include "model/dit_internal.h"

tsr_status dit_final_fwd(dit_model *m, const void *h, const dit_batch *b) {
  int D = m->D;
  DIT_TRY(dit_linear_fwd(m, m->final_adaln, m->fmod, m->cs, b->n_clips));
  DIT_TRY(dit_ln_mod_fwd(m, b, m->of, m->meanf, m->rstdf, h, m->fmod, dit_act(m, m->fmod, D), 2 * D));
  return dit_linear_fwd(m, m->final_linear, m->pred, m->of, b->L);
}

tsr_status dit_final_bwd(dit_model *m, const void *h, const dit_batch *b) {
  const kernels_backend *kb = m->kb;
  int D = m->D;
  DIT_TRY(dit_linear_bwd(m, m->final_linear, m->dt1, 0, m->dpred, m->of, b->L));
  DIT_TRY(kb->memset_zero(kb, m->dh, kernels_act_bytes(kb, (size_t)b->L * D)));
  DIT_TRY(dit_ln_mod_bwd(m, b, m->dh, m->dmod, dit_act(m, m->dmod, D), m->dt1, h, m->meanf,
                         m->rstdf, dit_act(m, m->fmod, D), 2 * D));
  return dit_linear_bwd(m, m->final_adaln, m->dcs, 0, m->dmod, m->cs, b->n_clips);
}
