// kernels/cuda/layernorm.cu — LayerNorm (no affine), the adaLN entries (modulate, gate +
// residual) and their fusion (layernorm_modulate_*), forward and backward (mirrors
// kernels/cpu/layernorm.c, modulate.c and the LayerNorm half of fused.c). One warp per
// row for the norms (statistics in double, a fixed shuffle tree: kcu_ln_row_stats), one
// thread per element for the modulation; the per-clip vector gradients are kcu_colsum's
// deterministic column sums (reduce.cu).
#include <math.h>

#include "kernels/check.h"
#include "kernels/cuda/kcu.h"

// ---- LayerNorm ---------------------------------------------------------------------------
__global__ void k_layernorm_fwd(act_t *out, float *mean, float *rstd, const act_t *inp, int L, int D,
                                float eps) {
  KCU_WARP_ROW(i, L);
  const act_t *x = inp + (size_t)i * D;
  float muf, rf;
  kcu_ln_row_stats(x, D, lane, eps, &muf, &rf);
  for (int j = lane; j < D; j += 32) kcu_st(out, (size_t)i * D + j, (kcu_ld(x, j) - muf) * rf);
  if (lane == 0) {
    if (mean) mean[i] = muf;
    if (rstd) rstd[i] = rf;
  }
  KCU_WARP_ROW_END
}

__global__ void k_layernorm_bwd(act_t *dinp, const act_t *dout, const act_t *inp, const float *mean,
                                const float *rstd, int L, int D) {
  KCU_WARP_ROW(i, L);
  const act_t *x = inp + (size_t)i * D, *g = dout + (size_t)i * D;
  float mu = mean[i], r = rstd[i];
  double sg = 0.0, sgx = 0.0;
  for (int j = lane; j < D; j += 32) {
    float gj = kcu_ld(g, j);
    sg += gj;
    sgx += (double)gj * ((kcu_ld(x, j) - mu) * r);
  }
  float mg = (float)(kcu_warp_sum(sg) / D), mgx = (float)(kcu_warp_sum(sgx) / D);
  for (int j = lane; j < D; j += 32)
    kcu_st(dinp, (size_t)i * D + j, r * (kcu_ld(g, j) - mg - (kcu_ld(x, j) - mu) * r * mgx));
  KCU_WARP_ROW_END
}

static tsr_status cu_layernorm_forward(kb_t *kb, void *out, float *mean, float *rstd, const void *inp,
                                       int L, int D, float eps) {
  const char *op = "layernorm_forward";
  tsr_status st = kernels_check_layernorm_forward(out, inp, L, D);
  if (st || L == 0) return st;
  k_layernorm_fwd<<<kcu_warp_blocks(L), 256, 0, kcu(kb)->stream>>>(
      (act_t *)out, mean, rstd, (const act_t *)inp, L, D, eps);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

static tsr_status cu_layernorm_backward(kb_t *kb, void *dinp, const void *dout, const void *inp,
                                        const float *mean, const float *rstd, int L, int D) {
  const char *op = "layernorm_backward";
  tsr_status st = kernels_check_layernorm_backward(dinp, dout, inp, mean, rstd, L, D);
  if (st || L == 0 || D == 0 || !dinp) return st;
  k_layernorm_bwd<<<kcu_warp_blocks(L), 256, 0, kcu(kb)->stream>>>(
      (act_t *)dinp, (const act_t *)dout, (const act_t *)inp, mean, rstd, L, D);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

// ---- adaLN: modulate, gate + residual ----------------------------------------------------
__global__ void k_modulate_fwd(act_t *out, const act_t *inp, const act_t *shift, const act_t *scale,
                               int mstride, const int32_t *cu, int n_clips, int L, int D) {
  KCU_GRID_STRIDE(e, (size_t)L * D) {
    int i = (int)(e / D), j = (int)(e % D);
    size_t c = (size_t)kcu_clip_of(cu, n_clips, i) * mstride + j;
    kcu_st(out, e, kcu_ld(inp, e) * (1.0f + kcu_ld(scale, c)) + kcu_ld(shift, c));
  }
}
__global__ void k_scale_rows(act_t *dinp, const act_t *dout, const act_t *vec, float one, int mstride,
                             const int32_t *cu, int n_clips, int L, int D) {
  // dinp = dout * (one + vec[c]): modulate (one = 1) and gate (one = 0) backward
  KCU_GRID_STRIDE(e, (size_t)L * D) {
    int i = (int)(e / D), j = (int)(e % D);
    size_t c = (size_t)kcu_clip_of(cu, n_clips, i) * mstride + j;
    float f = one == 0.0f ? kcu_ld(vec, c) : one + kcu_ld(vec, c);
    kcu_st(dinp, e, one == 0.0f ? f * kcu_ld(dout, e) : kcu_ld(dout, e) * f);
  }
}
__global__ void k_gate_fwd(act_t *out, const act_t *res, const act_t *inp, const act_t *gate,
                           int mstride, const int32_t *cu, int n_clips, int L, int D) {
  KCU_GRID_STRIDE(e, (size_t)L * D) {
    int i = (int)(e / D), j = (int)(e % D);
    size_t c = (size_t)kcu_clip_of(cu, n_clips, i) * mstride + j;
    kcu_st(out, e, kcu_ld(res, e) + kcu_ld(gate, c) * kcu_ld(inp, e));
  }
}

static tsr_status check_adaln(kb_t *kb, const char *op, int entry, const int32_t *cu, int n_clips,
                              int L, int D, int mstride) {
  if (L < 0 || D < 0) return err_set(TSR_EINVAL, "%s: L = %d, D = %d must be >= 0", op, L, D);
  if (mstride < D) return err_set(TSR_EINVAL, "%s: mstride = %d is smaller than D = %d", op, mstride, D);
  return kcu_check_cu(kb, op, entry, cu, n_clips, L);
}

static tsr_status cu_modulate_forward(kb_t *kb, void *out, const void *inp, const void *shift,
                                      const void *scale, int mstride, const int32_t *cu,
                                      int n_clips, int L, int D) {
  const char *op = "modulate_forward";
  tsr_status st = check_adaln(kb, op, KCU_E_MODULATE_F, cu, n_clips, L, D, mstride);
  if (st || L == 0 || D == 0) return st;
  KCU_NEED(op, out);
  KCU_NEED(op, inp);
  KCU_NEED(op, shift);
  KCU_NEED(op, scale);
  size_t n = (size_t)L * D;
  k_modulate_fwd<<<KCU_GRID(kb, n)>>>((act_t *)out, (const act_t *)inp, (const act_t *)shift,
                                      (const act_t *)scale, mstride, cu, n_clips, L, D);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

static tsr_status cu_modulate_backward(kb_t *kb, void *dinp, void *dshift, void *dscale,
                                       const void *dout, const void *inp, const void *scale,
                                       int mstride, const int32_t *cu, int n_clips, int L, int D) {
  const char *op = "modulate_backward";
  tsr_status st = check_adaln(kb, op, KCU_E_MODULATE_B, cu, n_clips, L, D, mstride);
  if (st || D == 0) return st;
  if (L > 0) KCU_NEED(op, dout);
  if (dinp && L > 0) {
    KCU_NEED(op, scale);
    size_t n = (size_t)L * D;
    k_scale_rows<<<KCU_GRID(kb, n)>>>((act_t *)dinp, (const act_t *)dout, (const act_t *)scale,
                                      1.0f, mstride, cu, n_clips, L, D);
    KCU_LAUNCHED(op);
  }
  if (dshift && (st = kcu_colsum(kb, op, NULL, (act_t *)dshift, 0, mstride, (const act_t *)dout,
                                 NULL, NULL, NULL, cu, n_clips, L, D, D)))
    return st;
  if (dscale) {
    if (L > 0) KCU_NEED(op, inp);
    if ((st = kcu_colsum(kb, op, NULL, (act_t *)dscale, 0, mstride, (const act_t *)dout,
                         (const act_t *)inp, NULL, NULL, cu, n_clips, L, D, D)))
      return st;
  }
  return TSR_OK;
}

static tsr_status cu_gate_residual_forward(kb_t *kb, void *out, const void *res, const void *inp,
                                           const void *gate, int mstride, const int32_t *cu,
                                           int n_clips, int L, int D) {
  const char *op = "gate_residual_forward";
  tsr_status st = check_adaln(kb, op, KCU_E_GATE_F, cu, n_clips, L, D, mstride);
  if (st || L == 0 || D == 0) return st;
  KCU_NEED(op, out);
  KCU_NEED(op, res);
  KCU_NEED(op, inp);
  KCU_NEED(op, gate);
  size_t n = (size_t)L * D;
  k_gate_fwd<<<KCU_GRID(kb, n)>>>((act_t *)out, (const act_t *)res, (const act_t *)inp,
                                  (const act_t *)gate, mstride, cu, n_clips, L, D);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

static tsr_status cu_gate_residual_backward(kb_t *kb, void *dinp, void *dgate, const void *dout,
                                            const void *inp, const void *gate, int mstride,
                                            const int32_t *cu, int n_clips, int L, int D) {
  const char *op = "gate_residual_backward";
  tsr_status st = check_adaln(kb, op, KCU_E_GATE_B, cu, n_clips, L, D, mstride);
  if (st || D == 0) return st;
  if (L > 0) KCU_NEED(op, dout);
  if (dinp && L > 0) {
    KCU_NEED(op, gate);
    size_t n = (size_t)L * D;
    k_scale_rows<<<KCU_GRID(kb, n)>>>((act_t *)dinp, (const act_t *)dout, (const act_t *)gate, 0.0f,
                                      mstride, cu, n_clips, L, D);
    KCU_LAUNCHED(op);
  }
  if (dgate) {
    if (L > 0) KCU_NEED(op, inp);
    if ((st = kcu_colsum(kb, op, NULL, (act_t *)dgate, 0, mstride, (const act_t *)dout,
                         (const act_t *)inp, NULL, NULL, cu, n_clips, L, D, D)))
      return st;
  }
  return TSR_OK;
}

// ---- fused: LayerNorm + modulate ---------------------------------------------------------
// One warp per row: statistics as k_layernorm_fwd, then the modulation of the normalised
// value in registers (LN's output is never stored).
__global__ void k_ln_mod_fwd(act_t *out, float *mean, float *rstd, const act_t *inp,
                             const act_t *shift, const act_t *scale, int mstride, const int32_t *cu,
                             int n_clips, int L, int D, float eps) {
  KCU_WARP_ROW(i, L);
  const act_t *x = inp + (size_t)i * D;
  float muf, rf;
  kcu_ln_row_stats(x, D, lane, eps, &muf, &rf);
  size_t c = (size_t)kcu_clip_of(cu, n_clips, i) * mstride;
  for (int j = lane; j < D; j += 32) {
    float xh = (kcu_ld(x, j) - muf) * rf;
    kcu_st(out, (size_t)i * D + j, xh * (1.0f + kcu_ld(scale, c + j)) + kcu_ld(shift, c + j));
  }
  if (lane == 0) {
    mean[i] = muf;
    rstd[i] = rf;
  }
  KCU_WARP_ROW_END
}

// One warp per row: g = dout (1 + scale[c]) (modulate's input gradient), then LayerNorm's
// backward of it, ADDED to dinp; xhat recomputed from inp, mean, rstd.
__global__ void k_ln_mod_bwd(act_t *dinp, const act_t *dout, const act_t *inp, const float *mean,
                             const float *rstd, const act_t *scale, int mstride, const int32_t *cu,
                             int n_clips, int L, int D) {
  KCU_WARP_ROW(i, L);
  const act_t *x = inp + (size_t)i * D, *g = dout + (size_t)i * D;
  float mu = mean[i], r = rstd[i];
  size_t c = (size_t)kcu_clip_of(cu, n_clips, i) * mstride;
  double sg = 0.0, sgx = 0.0;
  for (int j = lane; j < D; j += 32) {
    float gj = kcu_ld(g, j) * (1.0f + kcu_ld(scale, c + j));
    sg += gj;
    sgx += (double)gj * ((kcu_ld(x, j) - mu) * r);
  }
  float mg = (float)(kcu_warp_sum(sg) / D), mgx = (float)(kcu_warp_sum(sgx) / D);
  for (int j = lane; j < D; j += 32) {
    float gj = kcu_ld(g, j) * (1.0f + kcu_ld(scale, c + j));
    size_t o = (size_t)i * D + j;
    kcu_st(dinp, o, kcu_ld(dinp, o) + r * (gj - mg - (kcu_ld(x, j) - mu) * r * mgx));
  }
  KCU_WARP_ROW_END
}

static tsr_status cu_layernorm_modulate_forward(kb_t *kb, void *out, float *mean, float *rstd,
                                                const void *inp, const void *shift,
                                                const void *scale, int mstride, const int32_t *cu,
                                                int n_clips, int L, int D, float eps) {
  const char *op = "layernorm_modulate_forward";
  tsr_status st = check_adaln(kb, op, KCU_E_LN_MOD_F, cu, n_clips, L, D, mstride);
  if (st || L == 0) return st;
  if (D == 0) return err_set(TSR_EINVAL, "%s: D = 0", op);
  KCU_NEED(op, out);
  KCU_NEED(op, mean);
  KCU_NEED(op, rstd);
  KCU_NEED(op, inp);
  KCU_NEED(op, shift);
  KCU_NEED(op, scale);
  k_ln_mod_fwd<<<kcu_warp_blocks(L), 256, 0, kcu(kb)->stream>>>(
      (act_t *)out, mean, rstd, (const act_t *)inp, (const act_t *)shift, (const act_t *)scale,
      mstride, cu, n_clips, L, D, eps);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

static tsr_status cu_layernorm_modulate_backward(kb_t *kb, void *dinp, void *dshift, void *dscale,
                                                 const void *dout, const void *inp,
                                                 const float *mean, const float *rstd,
                                                 const void *scale, int mstride, const int32_t *cu,
                                                 int n_clips, int L, int D) {
  const char *op = "layernorm_modulate_backward";
  tsr_status st = check_adaln(kb, op, KCU_E_LN_MOD_B, cu, n_clips, L, D, mstride);
  if (st || D == 0) return st;
  if (L > 0) {
    KCU_NEED(op, dout);
    if (dinp || dscale) {
      KCU_NEED(op, inp);
      KCU_NEED(op, mean);
      KCU_NEED(op, rstd);
    }
  }
  if (dinp && L > 0) {
    KCU_NEED(op, scale);
    k_ln_mod_bwd<<<kcu_warp_blocks(L), 256, 0, kcu(kb)->stream>>>(
        (act_t *)dinp, (const act_t *)dout, (const act_t *)inp, mean, rstd, (const act_t *)scale,
        mstride, cu, n_clips, L, D);
    KCU_LAUNCHED(op);
  }
  if (dshift && (st = kcu_colsum(kb, op, NULL, (act_t *)dshift, 0, mstride, (const act_t *)dout,
                                 NULL, NULL, NULL, cu, n_clips, L, D, D)))
    return st;
  if (dscale && (st = kcu_colsum(kb, op, NULL, (act_t *)dscale, 0, mstride, (const act_t *)dout,
                                 (const act_t *)inp, rstd, mean, cu, n_clips, L, D, D)))
    return st;
  return TSR_OK;
}

// ---- this file's entries of the table (backend.cu) --------------------------------
void kcu_layernorm_entries(kernels_backend *b) {
  b->layernorm_forward = cu_layernorm_forward;
  b->layernorm_backward = cu_layernorm_backward;
  b->modulate_forward = cu_modulate_forward;
  b->modulate_backward = cu_modulate_backward;
  b->gate_residual_forward = cu_gate_residual_forward;
  b->gate_residual_backward = cu_gate_residual_backward;
  b->layernorm_modulate_forward = cu_layernorm_modulate_forward;
  b->layernorm_modulate_backward = cu_layernorm_modulate_backward;
}
