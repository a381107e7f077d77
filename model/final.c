// model/final.c — the final layer: (shift, scale) = cs final.adaln + b,
// pred = (LN(h)(1 + scale) + shift) final.linear + b.
// With head_temb (Wan): (shift, scale) = (c + row0, c + row1), rows of final.modulation (2D)
// and c the time embedding itself (no SiLU, no linear); the shift rows (C, D) and then the
// scale rows (C, D) fill m->fmod (mstride D).
#include "model/dit_internal.h"

// m->fmod = (c + row0 | c + row1) for every clip. (C, D) twice.
static tsr_status head_rows_fwd(dit_model *m, int C) {
  const kernels_backend *kb = m->kb;
  int D = m->D;
  size_t CD = (size_t)C * D;
  const float *row = dit_p(m, m->final_row);
  void *shift = m->fmod, *scale = dit_act(m, m->fmod, CD);
  TSR_TRY(kb->embedding_forward(kb, shift, row, m->zero_ids, C, 1, D));
  TSR_TRY(kb->add_act(kb, shift, shift, m->c, CD));
  TSR_TRY(kb->embedding_forward(kb, scale, row + D, m->zero_ids, C, 1, D));
  return kb->add_act(kb, scale, scale, m->c, CD);
}

tsr_status dit_final_fwd(dit_model *m, const void *h, const dit_batch *b) {
  int D = m->D, C = b->n_clips;
  if (m->sw.head_temb) {
    TSR_TRY(head_rows_fwd(m, C));
    TSR_TRY(dit_ln_mod_fwd(m, b, m->of, m->meanf, m->rstdf, h, m->fmod,
                           dit_act(m, m->fmod, (size_t)C * D), D));
  } else {
    TSR_TRY(dit_linear_fwd(m, m->final_adaln, m->fmod, m->cs, C));
    TSR_TRY(dit_ln_mod_fwd(m, b, m->of, m->meanf, m->rstdf, h, m->fmod, dit_act(m, m->fmod, D),
                           2 * D));
  }
  return dit_linear_fwd(m, m->final_linear, m->pred, m->of, b->L);
}

// head_temb's backward: dshift, dscale (C, D) in m->dmod -> the row's gradient and m->dchead =
// dL/dc (both halves read c).
static tsr_status head_rows_bwd(dit_model *m, int C) {
  const kernels_backend *kb = m->kb;
  int D = m->D;
  size_t CD = (size_t)C * D;
  float *drow = dit_g(m, m->final_row);
  const void *dshift = m->dmod, *dscale = dit_act(m, m->dmod, CD);
  TSR_TRY(kb->embedding_backward(kb, drow, dshift, m->zero_ids, C, 1, D));
  TSR_TRY(kb->embedding_backward(kb, drow ? drow + D : NULL, dscale, m->zero_ids, C, 1, D));
  return kb->add_act(kb, m->dchead, dshift, dscale, CD);
}

tsr_status dit_final_bwd(dit_model *m, const void *h, const dit_batch *b) {
  const kernels_backend *kb = m->kb;
  int D = m->D, C = b->n_clips;
  TSR_TRY(dit_linear_bwd(m, m->final_linear, m->dt1, 0, m->dpred, m->of, b->L));
  TSR_TRY(kb->memset_zero(kb, m->dh, kernels_act_bytes(kb, (size_t)b->L * D)));
  if (m->sw.head_temb) {
    size_t CD = (size_t)C * D;
    TSR_TRY(dit_ln_mod_bwd(m, b, m->dh, m->dmod, dit_act(m, m->dmod, CD), m->dt1, h, m->meanf,
                           m->rstdf, dit_act(m, m->fmod, CD), D));
    return head_rows_bwd(m, C);
  }
  TSR_TRY(dit_ln_mod_bwd(m, b, m->dh, m->dmod, dit_act(m, m->dmod, D), m->dt1, h, m->meanf,
                         m->rstdf, dit_act(m, m->fmod, D), 2 * D));
  return dit_linear_bwd(m, m->final_adaln, m->dcs, 0, m->dmod, m->cs, C);
}
