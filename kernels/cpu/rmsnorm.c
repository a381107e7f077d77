// kernels/cpu/rmsnorm.c — RMSNorm with a learned weight (QK-norm: rows of one head; row
// arithmetic: kernels/cpu/rows.h).
#include "kernels/check.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/rows.h"

// out: (R, C), rstd: (R) or NULL, inp: (R, C), weight: (C)
tsr_status kcpu_rmsnorm_forward(kb_t *kb, float *out, float *rstd, const float *inp,
                                const float *weight, int R, int C, float eps) {
  tsr_status st = kernels_check_rmsnorm_forward(out, inp, weight, R, C);
  if (st || R == 0) return st;
#pragma omp parallel for schedule(static) if ((size_t)R * C > KCPU_PAR_MIN)
  for (int i = 0; i < R; i++) {
    float r = kcpu_rms_row(out + (size_t)i * C, inp + (size_t)i * C, weight, C, eps);
    if (rstd) rstd[i] = r;
  }
  return TSR_OK;
}

// dinp: (R, C), dweight: (C) accumulated, dout: (R, C), inp: (R, C), weight: (C), rstd: (R)
// With xhat = x * r: dx = r * (w*g - xhat * mean(w*g*xhat)).
tsr_status kcpu_rmsnorm_backward(kb_t *kb, float *dinp, float *dweight, const float *dout,
                                 const float *inp, const float *weight, const float *rstd, int R,
                                 int C) {
  tsr_status st = kernels_check_rmsnorm_backward(dinp, dout, inp, weight, rstd, R, C);
  if (st || R == 0 || C == 0) return st;
  if (dinp) {
#pragma omp parallel for schedule(static) if ((size_t)R * C > KCPU_PAR_MIN)
    for (int i = 0; i < R; i++) {
      size_t o = (size_t)i * C;
      kcpu_rms_bwd_row(dinp + o, dout + o, inp + o, weight, rstd[i], C);
    }
  }
  if (dweight) return kcpu_colsum(dweight, 1, dout, inp, rstd, NULL, (size_t)R, C, (size_t)C);
  return TSR_OK;
}
