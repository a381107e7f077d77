// model/cross.c — cross-attention of a block to its clips' captions (model.text_dim > 0),
// after self-attention and before the MLP, as in Wan and PixArt (docs/model.md):
//   n    = LN(hmid)                                  no affine (the q projection absorbs it)
//   q    = RMSNorm(n Wq + bq) q_norm                 per head, no RoPE          (L, D)
//   k    = RMSNorm(ctx Wk + bk) k_norm, v = ctx Wv + bv    caption tokens       (Lt, D)
//   k0   = RMSNorm(null Wk + bk) k_norm, v0 = null Wv + bv the null token       (C, D)
//   h    = hmid + (softmax over {clip c's caption keys} U {k0}) Wproj + bproj
// Clip c's queries attend to its own caption rows [cu_text[c], cu_text[c+1]) and to the
// learned null token: a clip without a caption (or whose caption was dropped for
// classifier-free guidance) sees the null token alone. Both parts go through the backend's
// varlen entries: attention_partial_forward over the captions (cu_q = cu_seqlens,
// cu_k = cu_text) and over the null rows (cu_k = 0, 1, .., C), merged exactly by their
// log-sum-exp (attention_merge); the backward runs attention_partial_backward on each with
// the merged lse and delta. The caption is local to every rank of a CP group (each holds all
// of it), so no ring is needed: a rank's key/value gradients are partial sums over its
// queries, completed by the gradient all-reduce as every parameter gradient is.
// The Wan family (dit_switches): no null token (a clip attends to its caption alone; one
// without caption rows gets a zero attention output), the LayerNorm has a weight and a bias
// (cross_affine), and the q/k RMSNorm runs over all heads (qk_norm_full).
#include <math.h>

#include "model/dit_internal.h"

static float cross_scale(const dit_model *m) { return (float)(1.0 / sqrt((double)m->Dh)); }

// Bounds of the clips' lengths for the attention entries: queries (the batch's clips),
// caption keys (model.text_len tokens a clip at most) and the null token (one a clip).
static void cross_bounds(const dit_model *m, const dit_batch *b, int *max_q, int *max_t,
                         int *max_n) {
  *max_q = dit_attn_max_len(b);
  *max_t = kernels_attention_max_len(m->cfg.text_len, m->text_Lt);
  *max_n = kernels_attention_max_len(1, b->n_clips);
}

// The RMSNorm of R tokens' q or k as (rows, width): per head, or over all heads.
static int norm_rows(const dit_model *m, int R) { return m->sw.qk_norm_full ? R : R * m->H; }
static int norm_width(const dit_model *m) { return m->sw.qk_norm_full ? m->D : m->Dh; }

// Keys or values of R rows of context `in` (R, D): lin = in W + b, and for keys the
// RMSNorm into out (norm >= 0; rstd (R * H) kept).
static tsr_status kv_fwd(dit_model *m, dit_linear l, int norm, void *lin, void *out, float *rstd,
                         const void *in, int R) {
  TSR_TRY(dit_linear_fwd(m, l, lin, in, R));
  if (norm < 0 || R == 0) return TSR_OK;
  return m->kb->rmsnorm_forward(m->kb, out, rstd, lin, dit_p(m, norm), norm_rows(m, R),
                                norm_width(m), m->cfg.rms_eps);
}

// cross_affine: the LayerNorm's weight and bias as modulation rows of every clip, m->xaff =
// (bias | weight - 1) (C, D) each, so that the fused LN + modulation entry computes
// LN(h) (1 + (w - 1)) + b = LN(h) w + b on every backend without an entry of its own
// (1 + (w - 1) is w exactly for w in [0.5, 2], within an ulp elsewhere).
static tsr_status affine_rows(dit_model *m, const dit_cross_params *x, int C) {
  const kernels_backend *kb = m->kb;
  int D = m->D;
  TSR_TRY(kb->fill(kb, m->xw1, -1.0f, (size_t)D));
  TSR_TRY(kb->add(kb, m->xw1, m->xw1, dit_p(m, x->norm_w), (size_t)D));
  TSR_TRY(kb->embedding_forward(kb, m->xaff, dit_p(m, x->norm_b), m->zero_ids, C, 1, D));
  return kb->embedding_forward(kb, dit_act(m, m->xaff, (size_t)C * D), m->xw1, m->zero_ids, C,
                               1, D);
}

// a->ln = LN(hin), or LN(hin) weight + bias (cross_affine); mean and rstd kept.
static tsr_status ln_fwd(dit_model *m, const dit_cross_params *x, dit_cross_acts *a,
                         const void *hin, const dit_batch *b) {
  const kernels_backend *kb = m->kb;
  int L = b->L, C = b->n_clips, D = m->D;
  if (!m->sw.cross_affine)
    return kb->layernorm_forward(kb, a->ln, a->mean, a->rstd, hin, L, D, m->cfg.ln_eps);
  TSR_TRY(affine_rows(m, x, C));
  return kb->layernorm_modulate_forward(kb, a->ln, a->mean, a->rstd, hin, m->xaff,
                                        dit_act(m, m->xaff, (size_t)C * D), D, b->cu_seqlens, C,
                                        L, D, m->cfg.ln_eps);
}

// ln_fwd's backward from m->dt3 = dL/da->ln: m->dh += dL/dhin; the affine's gradients are
// the rows' sums over the clips.
static tsr_status ln_bwd(dit_model *m, const dit_cross_params *x, const dit_cross_acts *a,
                         const void *hin, const dit_batch *b) {
  const kernels_backend *kb = m->kb;
  int L = b->L, C = b->n_clips, D = m->D;
  size_t CD = (size_t)C * D;
  if (!m->sw.cross_affine) {
    TSR_TRY(kb->layernorm_backward(kb, m->dt1, m->dt3, hin, a->mean, a->rstd, L, D));
    return kb->axpy_act(kb, m->dh, 1.0f, m->dt1, (size_t)L * D);
  }
  TSR_TRY(affine_rows(m, x, C));
  void *dbias = m->dxaff, *dw = dit_act(m, m->dxaff, CD);
  TSR_TRY(kb->layernorm_modulate_backward(kb, m->dh, dbias, dw, m->dt3, hin, a->mean, a->rstd,
                                          dit_act(m, m->xaff, CD), D, b->cu_seqlens, C, L, D));
  TSR_TRY(kb->embedding_backward(kb, dit_g(m, x->norm_b), dbias, m->zero_ids, C, 1, D));
  return kb->embedding_backward(kb, dit_g(m, x->norm_w), dw, m->zero_ids, C, 1, D);
}

tsr_status dit_cross_fwd(dit_model *m, int i, dit_cross_acts *a, const void *hin,
                         const dit_batch *b) {
  const kernels_backend *kb = m->kb;
  const dit_cross_params *x = &m->bp[i].x;
  int L = b->L, C = b->n_clips, D = m->D, H = m->H, Dh = m->Dh, Lt = m->text_Lt;
  TSR_TRY(ln_fwd(m, x, a, hin, b));
  TSR_TRY(kv_fwd(m, x->q, x->q_norm, a->qlin, a->q, a->qrstd, a->ln, L));
  TSR_TRY(kv_fwd(m, x->k, x->k_norm, a->klin, a->k, a->krstd, m->ctx, Lt));
  TSR_TRY(kv_fwd(m, x->v, -1, a->v, NULL, NULL, m->ctx, Lt));
  float s = cross_scale(m);
  int mq, mt, mn;
  cross_bounds(m, b, &mq, &mt, &mn);
  TSR_TRY(kb->attention_partial_forward(kb, a->att, a->lse, a->q, a->k, a->v, b->cu_seqlens,
                                        dit_cu_text(m, b), C, mq, mt, L, Lt, H, Dh, s));
  if (m->sw.null_token) {
    TSR_TRY(kv_fwd(m, x->k, x->k_norm, a->nklin, a->nk, a->nkrstd, m->nullctx, C));
    TSR_TRY(kv_fwd(m, x->v, -1, a->nv, NULL, NULL, m->nullctx, C));
    TSR_TRY(kb->attention_partial_forward(kb, m->xatt_n, m->xlse_n, a->q, a->nk, a->nv,
                                          b->cu_seqlens, m->cu_null, C, mq, mn, L, C, H, Dh, s));
    TSR_TRY(kb->attention_merge(kb, a->att, a->lse, m->xatt_n, m->xlse_n, L, H, Dh));
  }
  TSR_TRY(dit_linear_fwd(m, x->proj, a->h, a->att, L));
  return kb->add_act(kb, a->h, a->h, hin, (size_t)L * D);
}

// Backward of kv_fwd's RMSNorm: dlin (R, D) from dout (R, D).
static tsr_status norm_bwd(dit_model *m, int norm, void *dlin, const void *dout, const void *lin,
                           const float *rstd, int R) {
  return m->kb->rmsnorm_backward(m->kb, dlin, dit_g(m, norm), dout, lin, dit_p(m, norm), rstd,
                                 norm_rows(m, R), norm_width(m));
}

// The null token's keys and values (one row a clip) in the backward: their attention
// gradients, dq += theirs (before dq is used).
static tsr_status null_attn_bwd(dit_model *m, const dit_cross_acts *a, const dit_batch *b,
                                int mq, int mn) {
  const kernels_backend *kb = m->kb;
  int L = b->L, C = b->n_clips;
  size_t CD = (size_t)C * m->D;
  TSR_TRY(kb->memset_zero(kb, m->dnk, kernels_act_bytes(kb, CD)));
  TSR_TRY(kb->memset_zero(kb, m->dnv, kernels_act_bytes(kb, CD)));
  return kb->attention_partial_backward(kb, m->dq, m->dnk, m->dnv, m->dt1, a->q, a->nk, a->nv,
                                        a->att, a->lse, m->xdelta, b->cu_seqlens, m->cu_null, C,
                                        mq, mn, L, C, m->H, m->Dh, cross_scale(m));
}

tsr_status dit_cross_bwd(dit_model *m, int i, const dit_cross_acts *a, const void *hin,
                         const dit_batch *b) {
  const kernels_backend *kb = m->kb;
  const dit_cross_params *x = &m->bp[i].x;
  int L = b->L, C = b->n_clips, D = m->D, H = m->H, Dh = m->Dh, Lt = m->text_Lt;
  size_t LD = (size_t)L * D, TD = (size_t)Lt * D;
  // h = hin + proj(att): dL/dhin gets m->dh itself (kept in m->dh) plus the LN path below
  TSR_TRY(dit_linear_bwd(m, x->proj, m->dt1, 0, m->dh, a->att, L));  // dt1 = dL/datt
  TSR_TRY(kb->attention_delta(kb, m->xdelta, m->dt1, a->att, L, H, Dh));
  TSR_TRY(kb->memset_zero(kb, m->dq, kernels_act_bytes(kb, LD)));
  TSR_TRY(kb->memset_zero(kb, m->dxk, kernels_act_bytes(kb, TD)));
  TSR_TRY(kb->memset_zero(kb, m->dxv, kernels_act_bytes(kb, TD)));
  int mq, mt, mn;
  cross_bounds(m, b, &mq, &mt, &mn);
  TSR_TRY(kb->attention_partial_backward(kb, m->dq, m->dxk, m->dxv, m->dt1, a->q, a->k, a->v,
                                         a->att, a->lse, m->xdelta, b->cu_seqlens,
                                         dit_cu_text(m, b), C, mq, mt, L, Lt, H, Dh,
                                         cross_scale(m)));
  if (m->sw.null_token) TSR_TRY(null_attn_bwd(m, a, b, mq, mn));
  // queries: dq -> dqlin -> d(ln) -> dh (accumulated: the residual's second path)
  TSR_TRY(norm_bwd(m, x->q_norm, m->dt2, m->dq, a->qlin, a->qrstd, L));
  TSR_TRY(dit_linear_bwd(m, x->q, m->dt3, 0, m->dt2, a->ln, L));
  TSR_TRY(ln_bwd(m, x, a, hin, b));
  // caption keys and values -> the context's gradient (every block adds to it)
  if (Lt > 0) {
    TSR_TRY(norm_bwd(m, x->k_norm, m->dtx, m->dxk, a->klin, a->krstd, Lt));
    TSR_TRY(dit_linear_bwd(m, x->k, m->dctx, 1, m->dtx, m->ctx, Lt));
    TSR_TRY(dit_linear_bwd(m, x->v, m->dctx, 1, m->dxv, m->ctx, Lt));
  }
  if (!m->sw.null_token) return TSR_OK;
  // the null token's key and value -> its gradient (after the caption's: the order in which
  // the k/v parameter gradients accumulate)
  TSR_TRY(norm_bwd(m, x->k_norm, m->dtx, m->dnk, a->nklin, a->nkrstd, C));  // dtx: >= C rows
  TSR_TRY(dit_linear_bwd(m, x->k, m->dnull, 1, m->dtx, m->nullctx, C));
  return dit_linear_bwd(m, x->v, m->dnull, 1, m->dnv, m->nullctx, C);
}
