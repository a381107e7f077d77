// model/dit.c — forward and backward of the whole DiT over a packed microbatch:
// conditioning, patch embedding, the blocks (kept or recomputed), final layer, loss.
#include "model/dit_internal.h"

static tsr_status check_batch(const dit_model *m, const dit_batch *b, const char *op) {
  if (!b || !b->cu_seqlens || !b->pos || !b->t || !b->x)
    return err_set(TSR_EINVAL, "%s: batch lacks cu_seqlens, pos, t or x", op);
  if (b->L < 0 || b->L > m->max_tokens)
    return err_set(TSR_EINVAL, "%s: %d tokens, the model was created for at most %d", op, b->L,
                   m->max_tokens);
  if (b->n_clips < 1 || b->n_clips > m->max_clips)
    return err_set(TSR_EINVAL, "%s: %d clips, the model was created for 1 to %d", op, b->n_clips,
                   m->max_clips);
  if (b->target && !b->loss_weight)
    return err_set(TSR_EINVAL, "%s: batch has a target but no loss_weight", op);
  return TSR_OK;
}

// Activations of block i (the one scratch set when recomputing).
static dit_block_acts *acts_of(dit_model *m, int i) { return &m->blk[m->cfg.recompute ? 0 : i]; }
static float *h_at(dit_model *m, int i) { return m->h + (size_t)i * m->max_tokens * m->D; }

tsr_status dit_forward(dit_model *m, const dit_batch *b, float *pred, double *loss) {
  const kernels_backend *kb = m->kb;
  DIT_TRY(check_batch(m, b, "dit_forward"));
  m->have_fwd = 0;
  DIT_TRY(dit_cond_fwd(m, b));
  DIT_TRY(dit_linear_fwd(m, m->x_embed, h_at(m, 0), b->x, b->L));
  for (int i = 0; i < m->cfg.depth; i++)
    DIT_TRY(dit_block_fwd(m, i, acts_of(m, i), h_at(m, i), h_at(m, i + 1), b));
  DIT_TRY(dit_final_fwd(m, h_at(m, m->cfg.depth), b));
  if (pred) DIT_TRY(kb->copy(kb, pred, m->pred, sizeof(float) * (size_t)b->L * m->P));
  if (b->target) {
    DIT_TRY(kb->mse_forward(kb, m->loss, m->sse, m->pred, b->target, b->loss_weight,
                            b->cu_seqlens, b->n_clips, b->L, m->P));
    float l;
    DIT_TRY(kb->to_host(kb, &l, m->loss, sizeof l));
    if (loss) *loss = l;
  } else if (loss) {
    *loss = 0;
  }
  m->fwd_L = b->L, m->fwd_C = b->n_clips, m->have_fwd = 1;
  return TSR_OK;
}

tsr_status dit_backward(dit_model *m, const dit_batch *b) {
  const kernels_backend *kb = m->kb;
  DIT_TRY(check_batch(m, b, "dit_backward"));
  if (!m->have_fwd || m->fwd_L != b->L || m->fwd_C != b->n_clips)
    return err_set(TSR_EINVAL, "dit_backward: no dit_forward of this batch before it");
  if (!b->target) return err_set(TSR_EINVAL, "dit_backward: the batch has no target");
  DIT_TRY(kb->mse_backward(kb, m->dpred, m->pred, b->target, b->loss_weight, b->cu_seqlens,
                           b->n_clips, b->L, m->P));
  DIT_TRY(dit_final_bwd(m, h_at(m, m->cfg.depth), b));
  for (int i = m->cfg.depth - 1; i >= 0; i--) {
    if (m->cfg.recompute)  // rewrites h[i + 1] with the same bits
      DIT_TRY(dit_block_fwd(m, i, acts_of(m, i), h_at(m, i), h_at(m, i + 1), b));
    DIT_TRY(dit_block_bwd(m, i, acts_of(m, i), h_at(m, i), b));
  }
  DIT_TRY(dit_linear_bwd(m, m->x_embed, m->dx, 0, m->dh, b->x, b->L));
  DIT_TRY(dit_cond_bwd(m, b));
  m->have_fwd = 0;  // the scratch activations of the last block are now stale
  return TSR_OK;
}
