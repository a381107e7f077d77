// kernels/cpu/layernorm.c — LayerNorm without affine parameters, one token per row
// (row arithmetic: kernels/cpu/rows.h).
#include "kernels/check.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/rows.h"

// out: (L, D), mean: (L) or NULL, rstd: (L) or NULL, inp: (L, D)
tsr_status kcpu_layernorm_forward(kb_t *kb, float *out, float *mean, float *rstd, const float *inp,
                                  int L, int D, float eps) {
  tsr_status st = kernels_check_layernorm_forward(out, inp, L, D);
  if (st || L == 0) return st;
#pragma omp parallel for schedule(static) if ((size_t)L * D > KCPU_PAR_MIN)
  for (int i = 0; i < L; i++) {
    float mu, r;
    kcpu_ln_row(out + (size_t)i * D, &mu, &r, inp + (size_t)i * D, D, eps);
    if (mean) mean[i] = mu;
    if (rstd) rstd[i] = r;
  }
  return TSR_OK;
}

// dinp: (L, D), dout: (L, D), inp: (L, D), mean: (L), rstd: (L)
tsr_status kcpu_layernorm_backward(kb_t *kb, float *dinp, const float *dout, const float *inp,
                                   const float *mean, const float *rstd, int L, int D) {
  tsr_status st = kernels_check_layernorm_backward(dinp, dout, inp, mean, rstd, L, D);
  if (st || L == 0 || D == 0 || !dinp) return st;
#pragma omp parallel for schedule(static) if ((size_t)L * D > KCPU_PAR_MIN)
  for (int i = 0; i < L; i++) {
    size_t o = (size_t)i * D;
    kcpu_ln_bwd_row(dinp + o, dout + o, inp + o, mean[i], rstd[i], D);
  }
  return TSR_OK;
}
