// kernels/cpu/modulate.c — adaLN modulation and gated residual with per-clip vectors
// (row arithmetic of the modulation: kernels/cpu/rows.h).
#include "kernels/check.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/rows.h"

// After the entry's shared check (kernels/check.h): the values of cu.
static tsr_status check_cu(const char *op, tsr_status st, const int32_t *cu, int n_clips, int L) {
  return st ? st : kcpu_check_cu(op, "cu_seqlens", cu, n_clips, L);
}

// out: (L, D), inp: (L, D), shift/scale: (C, mstride), cu: (C + 1)
tsr_status kcpu_modulate_forward(kb_t *kb, float *out, const float *inp, const float *shift,
                                 const float *scale, int mstride, const int32_t *cu, int n_clips,
                                 int L, int D) {
  tsr_status st = check_cu("modulate_forward",
                           kernels_check_modulate_forward(out, inp, shift, scale, mstride, cu,
                                                          n_clips, L, D),
                           cu, n_clips, L);
  if (st || L == 0 || D == 0) return st;
#pragma omp parallel for schedule(static) if ((size_t)L * D > KCPU_PAR_MIN)
  for (int i = 0; i < L; i++) {
    int c = kcpu_clip_of(cu, n_clips, i);
    kcpu_mod_row(out + (size_t)i * D, inp + (size_t)i * D, shift + (size_t)c * mstride,
                 scale + (size_t)c * mstride, D);
  }
  return TSR_OK;
}

// dinp: (L, D), dshift/dscale: (C, mstride), dout: (L, D), inp: (L, D), scale: (C, mstride)
tsr_status kcpu_modulate_backward(kb_t *kb, float *dinp, float *dshift, float *dscale,
                                  const float *dout, const float *inp, const float *scale,
                                  int mstride, const int32_t *cu, int n_clips, int L, int D) {
  tsr_status st = check_cu("modulate_backward",
                           kernels_check_modulate_backward(dinp, dshift, dscale, dout, inp, scale,
                                                           mstride, cu, n_clips, L, D),
                           cu, n_clips, L);
  if (st || D == 0) return st;
  if (dinp && L > 0) {
#pragma omp parallel for schedule(static) if ((size_t)L * D > KCPU_PAR_MIN)
    for (int i = 0; i < L; i++) {
      const float *sc = scale + (size_t)kcpu_clip_of(cu, n_clips, i) * mstride;
      kcpu_mod_bwd_row(dinp + (size_t)i * D, dout + (size_t)i * D, sc, D);
    }
  }
  if (dshift && (st = kcpu_clip_colsum(dshift, dout, NULL, NULL, NULL, mstride, cu, n_clips, D))) return st;
  if (dscale && (st = kcpu_clip_colsum(dscale, dout, inp, NULL, NULL, mstride, cu, n_clips, D)))
    return st;
  return TSR_OK;
}

// out: (L, D), res: (L, D), inp: (L, D), gate: (C, mstride)
tsr_status kcpu_gate_residual_forward(kb_t *kb, float *out, const float *res, const float *inp,
                                      const float *gate, int mstride, const int32_t *cu,
                                      int n_clips, int L, int D) {
  tsr_status st = check_cu("gate_residual_forward",
                           kernels_check_gate_residual_forward(out, res, inp, gate, mstride, cu,
                                                               n_clips, L, D),
                           cu, n_clips, L);
  if (st || L == 0 || D == 0) return st;
#pragma omp parallel for schedule(static) if ((size_t)L * D > KCPU_PAR_MIN)
  for (int i = 0; i < L; i++) {
    const float *gt = gate + (size_t)kcpu_clip_of(cu, n_clips, i) * mstride;
    const float *r = res + (size_t)i * D, *x = inp + (size_t)i * D;
    float *y = out + (size_t)i * D;
    for (int j = 0; j < D; j++) y[j] = r[j] + gt[j] * x[j];
  }
  return TSR_OK;
}

// dinp: (L, D), dgate: (C, mstride), dout: (L, D), inp: (L, D), gate: (C, mstride)
tsr_status kcpu_gate_residual_backward(kb_t *kb, float *dinp, float *dgate, const float *dout,
                                       const float *inp, const float *gate, int mstride,
                                       const int32_t *cu, int n_clips, int L, int D) {
  tsr_status st = check_cu("gate_residual_backward",
                           kernels_check_gate_residual_backward(dinp, dgate, dout, inp, gate,
                                                                mstride, cu, n_clips, L, D),
                           cu, n_clips, L);
  if (st || D == 0) return st;
  if (dinp && L > 0) {
#pragma omp parallel for schedule(static) if ((size_t)L * D > KCPU_PAR_MIN)
    for (int i = 0; i < L; i++) {
      const float *gt = gate + (size_t)kcpu_clip_of(cu, n_clips, i) * mstride;
      const float *g = dout + (size_t)i * D;
      float *dx = dinp + (size_t)i * D;
      for (int j = 0; j < D; j++) dx[j] = gt[j] * g[j];
    }
  }
  if (dgate && (st = kcpu_clip_colsum(dgate, dout, inp, NULL, NULL, mstride, cu, n_clips, D)))
    return st;
  return TSR_OK;
}
