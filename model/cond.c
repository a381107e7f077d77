// model/cond.c — per-clip conditioning: c = t_embed(t) + y_embed[label], cs = SiLU(c);
// and the caption context that every block's cross-attention reads (text_dim > 0).
//   temb = sinusoid(1000 t, freq_dim, max_period 10000)        (C, freq_dim)
//   c1 = temb fc1 + b;  s1 = SiLU(c1);  c = s1 fc2 + b (+ y_embed[label])    (C, D)
//   ctx = GELU_tanh(text text_embed.fc1 + b) text_embed.fc2 + b           (Lt, D)
//   nullctx[c] = text_null                                               (C, D)
// With mod_table (Wan) also the shared projection of the modulation:
//   tp = cs time_proj + b                                               (C, 6D)
#include "model/dit_internal.h"

#define T_SCALE 1000.0f
#define MAX_PERIOD 10000.0f

const int32_t *dit_labels(const dit_model *m, const dit_batch *b) {
  if (m->y_embed < 0) return NULL;
  return b->labels ? b->labels : m->null_labels;
}

tsr_status dit_cond_fwd(dit_model *m, const dit_batch *b) {
  const kernels_backend *kb = m->kb;
  int C = b->n_clips, D = m->D;
  size_t CD = (size_t)C * D;
  TSR_TRY(kb->copy(kb, m->tsc, b->t, sizeof(float) * (size_t)C));
  TSR_TRY(kb->scale(kb, m->tsc, T_SCALE, (size_t)C));
  TSR_TRY(kb->timestep_embedding(kb, m->temb, m->tsc, C, m->cfg.freq_dim, MAX_PERIOD));
  TSR_TRY(dit_linear_fwd(m, m->t_fc1, m->c1, m->temb, C));
  TSR_TRY(kb->silu_forward(kb, m->s1, m->c1, CD));
  TSR_TRY(dit_linear_fwd(m, m->t_fc2, m->c, m->s1, C));
  const int32_t *labels = dit_labels(m, b);
  if (labels) {
    // y_embed rows land in cs (free until the SiLU below), then c += them.
    TSR_TRY(kb->embedding_forward(kb, m->cs, dit_p(m, m->y_embed), labels, C,
                                  m->cfg.num_classes + 1, D));
    TSR_TRY(kb->add_act(kb, m->c, m->c, m->cs, CD));
  }
  TSR_TRY(kb->silu_forward(kb, m->cs, m->c, CD));
  if (!m->sw.mod_table) return TSR_OK;
  return dit_linear_fwd(m, m->time_proj, m->tp, m->cs, C);
}

tsr_status dit_cond_bwd(dit_model *m, const dit_batch *b) {
  const kernels_backend *kb = m->kb;
  int C = b->n_clips, D = m->D;
  size_t CD = (size_t)C * D;
  if (m->sw.mod_table)  // every block's modulation gradient, summed in dtp
    TSR_TRY(dit_linear_bwd(m, m->time_proj, m->dcs, 0, m->dtp, m->cs, C));
  TSR_TRY(kb->silu_backward(kb, m->dc, m->dcs, m->c, CD));
  if (m->sw.head_temb) TSR_TRY(kb->add_act(kb, m->dc, m->dc, m->dchead, CD));  // the head reads c
  const int32_t *labels = dit_labels(m, b);
  if (labels)
    TSR_TRY(kb->embedding_backward(kb, dit_g(m, m->y_embed), m->dc, labels, C,
                                   m->cfg.num_classes + 1, D));
  TSR_TRY(dit_linear_bwd(m, m->t_fc2, m->dc1, 0, m->dc, m->s1, C));
  TSR_TRY(kb->silu_backward(kb, m->dc, m->dc1, m->c1, CD));  // dc now holds dL/dc1
  return dit_linear_bwd(m, m->t_fc1, NULL, 0, m->dc, m->temb, C);
}

const int32_t *dit_cu_text(const dit_model *m, const dit_batch *b) {
  return b->cu_text ? b->cu_text : m->cu_text0;
}

tsr_status dit_text_fwd(dit_model *m, const dit_batch *b) {
  if (m->cfg.text_dim <= 0) return TSR_OK;
  const kernels_backend *kb = m->kb;
  int Lt = b->cu_text ? b->Lt : 0, D = m->D;
  if (Lt > 0) {
    TSR_TRY(dit_linear_fwd(m, m->t_text1, m->tx1, b->text, Lt));
    TSR_TRY(kb->gelu_forward(kb, m->txg, m->tx1, (size_t)Lt * D));
    TSR_TRY(dit_linear_fwd(m, m->t_text2, m->ctx, m->txg, Lt));
  }
  m->text_Lt = Lt;
  if (!m->sw.null_token) return TSR_OK;
  // one row of the null token a clip: every clip attends to it besides its caption
  return kb->embedding_forward(kb, m->nullctx, dit_p(m, m->text_null), m->zero_ids, b->n_clips,
                               1, D);
}

tsr_status dit_text_bwd(dit_model *m, const dit_batch *b) {
  if (m->cfg.text_dim <= 0) return TSR_OK;
  const kernels_backend *kb = m->kb;
  int Lt = m->text_Lt, D = m->D;
  if (Lt > 0) {
    TSR_TRY(dit_linear_bwd(m, m->t_text2, m->dtx, 0, m->dctx, m->txg, Lt));  // dtx = dL/dtxg
    TSR_TRY(kb->gelu_backward(kb, m->dctx, m->dtx, m->tx1, (size_t)Lt * D));  // dL/dtx1
    TSR_TRY(dit_linear_bwd(m, m->t_text1, NULL, 0, m->dctx, b->text, Lt));
  }
  if (!m->sw.null_token) return TSR_OK;
  return kb->embedding_backward(kb, dit_g(m, m->text_null), m->dnull, m->zero_ids, b->n_clips, 1,
                                D);
}
