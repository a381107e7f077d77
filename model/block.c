// model/block.c — one DiT block (adaLN-Zero), forward and backward:
//   mod = cs adaln + b  -> (shift1, scale1, gate1, shift2, scale2, gate2), each (C, D)
//   a = LN(h)(1 + scale1) + shift1
//   q = RoPE(RMSNorm(a Wq + bq) q_norm), k = RoPE(RMSNorm(a Wk + bk) k_norm), v = a Wv + bv
//   hmid = h + gate1 * (attention(q, k, v) Wproj + bproj)
//   hx = hmid + cross-attention to the captions (model/cross.c; hx = hmid without text)
//   m = LN(hx)(1 + scale2) + shift2
//   hout = hx + gate2 * (GELU_tanh(m Wfc1 + b) Wfc2 + b)
// Token-local steps that follow each other are one fused backend entry each (kernels.h):
// LN + modulation (dit_ln_mod_*), QK-norm + RoPE of q and k, fc1 + GELU (and fc2's
// backward through GELU), gate + residual.
// model.recompute = 2 keeps mod, qlin, klin, v, att, lse, proj, f1, f2 per block and
// recomputes a, q, k, hmid, m, g (dit_block_recompute_cheap) before the block's backward.
// The Wan family (dit_switches): mod = time_proj(cs) + the block's learned row, and the
// QK-norm runs over all heads (rmsnorm over rows of D, then RoPE per head).
#include <math.h>

#include "model/dit_internal.h"

// Slices of a (C, 6D) modulation array.
enum { MOD_SHIFT1, MOD_SCALE1, MOD_GATE1, MOD_SHIFT2, MOD_SCALE2, MOD_GATE2 };
#define MOD(p, which) dit_act(m, (p), (size_t)(which) * (size_t)m->D)

static float attn_scale(const dit_model *m) { return (float)(1.0 / sqrt((double)m->Dh)); }

// a->mod (C, 6D) = cs adaln + b, or (mod_table) the block's row + m->tp (time_proj(cs)).
static tsr_status mod_fwd(dit_model *m, const dit_block_params *bp, dit_block_acts *a, int C) {
  const kernels_backend *kb = m->kb;
  if (!m->sw.mod_table) return dit_linear_fwd(m, bp->adaln, a->mod, m->cs, C);
  TSR_TRY(kb->embedding_forward(kb, a->mod, dit_p(m, bp->mod_row), m->zero_ids, C, 1, 6 * m->D));
  return kb->add_act(kb, a->mod, a->mod, m->tp, (size_t)C * 6 * m->D);
}

// Its backward from m->dmod: the row's gradient is the sum over clips, and m->dtp (the shared
// projection's) gathers every block's; tessera's adaln adds to m->dcs.
static tsr_status mod_bwd(dit_model *m, const dit_block_params *bp, int C) {
  const kernels_backend *kb = m->kb;
  if (!m->sw.mod_table) return dit_linear_bwd(m, bp->adaln, m->dcs, 1, m->dmod, m->cs, C);
  TSR_TRY(kb->embedding_backward(kb, dit_g(m, bp->mod_row), m->dmod, m->zero_ids, C, 1, 6 * m->D));
  return kb->add_act(kb, m->dtp, m->dtp, m->dmod, (size_t)C * 6 * m->D);
}

// a->q, a->k = RoPE(RMSNorm(qlin)), RoPE(RMSNorm(klin)): the norm per head (one fused entry),
// or over all heads (qk_norm_full: rows of D, then RoPE).
static tsr_status qk_fwd(dit_model *m, const dit_block_params *bp, const dit_block_acts *a,
                         const dit_batch *b) {
  const kernels_backend *kb = m->kb;
  int L = b->L, H = m->H, Dh = m->Dh, D = m->D;
  float eps = m->cfg.rms_eps, theta = m->cfg.rope_theta;
  if (!m->sw.qk_norm_full)
    return kb->qk_norm_rope_forward(kb, a->q, a->k, a->qrstd, a->krstd, a->qlin, a->klin,
                                    dit_p(m, bp->q_norm), dit_p(m, bp->k_norm), b->pos, L, H, Dh,
                                    eps, theta);
  TSR_TRY(kb->rmsnorm_forward(kb, a->q, a->qrstd, a->qlin, dit_p(m, bp->q_norm), L, D, eps));
  TSR_TRY(kb->rmsnorm_forward(kb, a->k, a->krstd, a->klin, dit_p(m, bp->k_norm), L, D, eps));
  TSR_TRY(kb->rope_forward(kb, a->q, a->q, b->pos, L, H, Dh, theta));
  return kb->rope_forward(kb, a->k, a->k, b->pos, L, H, Dh, theta);
}

// Its backward: m->dt1 = dL/dqlin, m->dt2 = dL/dklin from m->dq, m->dk (which qk_norm_full
// rotates back in place).
static tsr_status qk_bwd(dit_model *m, const dit_block_params *bp, const dit_block_acts *a,
                         const dit_batch *b) {
  const kernels_backend *kb = m->kb;
  int L = b->L, H = m->H, Dh = m->Dh, D = m->D;
  float theta = m->cfg.rope_theta;
  const float *wq = dit_p(m, bp->q_norm), *wk = dit_p(m, bp->k_norm);
  if (!m->sw.qk_norm_full)
    return kb->qk_norm_rope_backward(kb, m->dt1, m->dt2, dit_g(m, bp->q_norm),
                                     dit_g(m, bp->k_norm), m->dq, m->dk, a->qlin, a->klin, wq, wk,
                                     a->qrstd, a->krstd, b->pos, L, H, Dh, theta);
  TSR_TRY(kb->rope_backward(kb, m->dq, m->dq, b->pos, L, H, Dh, theta));
  TSR_TRY(kb->rope_backward(kb, m->dk, m->dk, b->pos, L, H, Dh, theta));
  TSR_TRY(kb->rmsnorm_backward(kb, m->dt1, dit_g(m, bp->q_norm), m->dq, a->qlin, wq, a->qrstd, L,
                               D));
  return kb->rmsnorm_backward(kb, m->dt2, dit_g(m, bp->k_norm), m->dk, a->klin, wk, a->krstd, L,
                              D);
}

tsr_status dit_block_fwd(dit_model *m, int i, dit_block_acts *a, const void *hin, void *hout,
                         const dit_batch *b) {
  const kernels_backend *kb = m->kb;
  const dit_block_params *bp = &m->bp[i];
  int L = b->L, C = b->n_clips, D = m->D, ms = 6 * D;
  const int32_t *cu = b->cu_seqlens;
  TSR_TRY(mod_fwd(m, bp, a, C));
  // attention branch
  TSR_TRY(dit_ln_mod_fwd(m, b, a->a, a->mean1, a->rstd1, hin, MOD(a->mod, MOD_SHIFT1),
                         MOD(a->mod, MOD_SCALE1), ms));
  const dit_linear qkv[3] = {bp->q, bp->k, bp->v};
  void *const qkv_out[3] = {a->qlin, a->klin, a->v};
  TSR_TRY(dit_linears_fwd(m, qkv, 3, qkv_out, a->a, L));  // one batched GEMM where it can
  TSR_TRY(qk_fwd(m, bp, a, b));
  if (b->kv)  // chunk by chunk: the cached context's keys and the chunk's own
    TSR_TRY(dit_kv_attention(m, i, b, a->att, a->lse, a->q, a->k, a->v, attn_scale(m)));
  else
    TSR_TRY(m->attn.forward(m->attn.ctx, kb, b, a->att, a->lse, a->q, a->k, a->v, m->H, m->Dh,
                            attn_scale(m)));
  TSR_TRY(dit_linear_fwd(m, bp->proj, a->proj, a->att, L));
  TSR_TRY(kb->gate_residual_forward(kb, a->hmid, hin, a->proj, MOD(a->mod, MOD_GATE1), ms, cu, C,
                                    L, D));
  // cross-attention to the captions (model/cross.c), when the model has text
  const void *hx = a->hmid;
  if (m->cfg.text_dim > 0) {
    TSR_TRY(dit_cross_fwd(m, i, &a->x, a->hmid, b));
    hx = a->x.h;
  }
  // MLP branch
  TSR_TRY(dit_ln_mod_fwd(m, b, a->m, a->mean2, a->rstd2, hx, MOD(a->mod, MOD_SHIFT2),
                         MOD(a->mod, MOD_SCALE2), ms));
  if (m->cfg.recompute == DIT_RECOMPUTE_CHEAP) {  // g by the entry that recomputes it: same bits
    TSR_TRY(dit_linear_fwd(m, bp->fc1, a->f1, a->m, L));  // f1 = m Wfc1 + b
    TSR_TRY(kb->gelu_forward(kb, a->g, a->f1, (size_t)L * m->F));  // g = GELU(f1)
  } else
    TSR_TRY(dit_linear_gelu_fwd(m, bp->fc1, a->g, a->f1, a->m, L));  // g = GELU(f1 = m Wfc1 + b)
  TSR_TRY(dit_linear_fwd(m, bp->fc2, a->f2, a->g, L));
  return kb->gate_residual_forward(kb, hout, hx, a->f2, MOD(a->mod, MOD_GATE2), ms, cu, C, L, D);
}

tsr_status dit_block_recompute_cheap(dit_model *m, int i, const dit_block_acts *a,
                                     const void *hin, const dit_batch *b) {
  const kernels_backend *kb = m->kb;
  const dit_block_params *bp = &m->bp[i];
  int L = b->L, C = b->n_clips, D = m->D, ms = 6 * D;
  TSR_TRY(dit_ln_mod_fwd(m, b, a->a, a->mean1, a->rstd1, hin, MOD(a->mod, MOD_SHIFT1),
                         MOD(a->mod, MOD_SCALE1), ms));
  TSR_TRY(qk_fwd(m, bp, a, b));
  TSR_TRY(kb->gate_residual_forward(kb, a->hmid, hin, a->proj, MOD(a->mod, MOD_GATE1), ms,
                                    b->cu_seqlens, C, L, D));
  const void *hx = m->cfg.text_dim > 0 ? a->x.h : a->hmid;  // cross-attention's are kept
  TSR_TRY(dit_ln_mod_fwd(m, b, a->m, a->mean2, a->rstd2, hx, MOD(a->mod, MOD_SHIFT2),
                         MOD(a->mod, MOD_SCALE2), ms));
  return kb->gelu_forward(kb, a->g, a->f1, (size_t)L * m->F);
}

tsr_status dit_block_bwd(dit_model *m, int i, const dit_block_acts *a, const void *hin,
                         const dit_batch *b) {
  const kernels_backend *kb = m->kb;
  const dit_block_params *bp = &m->bp[i];
  int L = b->L, C = b->n_clips, D = m->D, ms = 6 * D;
  const int32_t *cu = b->cu_seqlens;
  void *dmod = m->dmod;
  const void *hx = m->cfg.text_dim > 0 ? a->x.h : a->hmid;  // the MLP's input
  // MLP branch: hout = hx + gate2 * f2; dh is dL/dhout and becomes dL/dhx.
  TSR_TRY(kb->gate_residual_backward(kb, m->dt1, MOD(dmod, MOD_GATE2), m->dh, a->f2,
                                     MOD(a->mod, MOD_GATE2), ms, cu, C, L, D));
  TSR_TRY(dit_linear_dgelu_bwd(m, bp->fc2, m->dF, m->dt1, a->g, a->f1, L));  // dF = dL/df1
  TSR_TRY(dit_linear_bwd(m, bp->fc1, m->dt1, 0, m->dF, a->m, L));
  TSR_TRY(dit_ln_mod_bwd(m, b, m->dh, MOD(dmod, MOD_SHIFT2), MOD(dmod, MOD_SCALE2), m->dt1,
                         hx, a->mean2, a->rstd2, MOD(a->mod, MOD_SCALE2), ms));
  // cross-attention: hx = hmid + cross(hmid); dh becomes dL/dhmid
  if (m->cfg.text_dim > 0) TSR_TRY(dit_cross_bwd(m, i, &a->x, a->hmid, b));
  // attention branch: hmid = hin + gate1 * proj; dh becomes dL/dhin.
  TSR_TRY(kb->gate_residual_backward(kb, m->dt1, MOD(dmod, MOD_GATE1), m->dh, a->proj,
                                     MOD(a->mod, MOD_GATE1), ms, cu, C, L, D));
  TSR_TRY(dit_linear_bwd(m, bp->proj, m->dt2, 0, m->dt1, a->att, L));  // dt2 = dL/datt
  TSR_TRY(m->attn.backward(m->attn.ctx, kb, b, m->dq, m->dk, m->dv, m->dt2, a->q, a->k, a->v,
                           a->att, a->lse, m->H, m->Dh, attn_scale(m)));
  // dt1 = dL/dqlin, dt2 = dL/dklin (dt2, dL/datt, is dead after the attention backward)
  TSR_TRY(qk_bwd(m, bp, a, b));
  // dt3 = dL/da = dqlin Wq^T + dklin Wk^T + dv Wv^T (dt1, dt2, dv: adjacent buffers, so the
  // three dW are one batched GEMM where the weights allow)
  const dit_linear qkv[3] = {bp->q, bp->k, bp->v};
  const void *const dqkv[3] = {m->dt1, m->dt2, m->dv};
  TSR_TRY(dit_linears_bwd(m, qkv, 3, m->dt3, dqkv, a->a, L));
  TSR_TRY(dit_ln_mod_bwd(m, b, m->dh, MOD(dmod, MOD_SHIFT1), MOD(dmod, MOD_SCALE1), m->dt3, hin,
                         a->mean1, a->rstd1, MOD(a->mod, MOD_SCALE1), ms));
  // conditioning: dcs += dmod adaln^T (mod_table: the row's gradient, dtp += dmod)
  return mod_bwd(m, bp, C);
}
