// kernels/cpu/rmsnorm.c — RMSNorm with a learned weight (QK-norm: rows of one head).
#include <math.h>

#include "kernels/cpu/cpu.h"

// out: (R, C), rstd: (R) or NULL, inp: (R, C), weight: (C)
tsr_status kcpu_rmsnorm_forward(kb_t *kb, float *out, float *rstd, const float *inp,
                                const float *weight, int R, int C, float eps) {
  KCPU_DIM("rmsnorm_forward", R);
  KCPU_DIM("rmsnorm_forward", C);
  if (R == 0) return TSR_OK;
  if (C == 0) return err_set(TSR_EINVAL, "rmsnorm_forward: C = 0");
  KCPU_NEED("rmsnorm_forward", out);
  KCPU_NEED("rmsnorm_forward", inp);
  KCPU_NEED("rmsnorm_forward", weight);
#pragma omp parallel for schedule(static) if ((size_t)R * C > KCPU_PAR_MIN)
  for (int i = 0; i < R; i++) {
    const float *x = inp + (size_t)i * C;
    float *y = out + (size_t)i * C;
    double ss = 0.0;
    for (int j = 0; j < C; j++) ss += (double)x[j] * x[j];
    float r = (float)(1.0 / sqrt(ss / C + (double)eps));
    for (int j = 0; j < C; j++) y[j] = x[j] * r * weight[j];
    if (rstd) rstd[i] = r;
  }
  return TSR_OK;
}

// dinp: (R, C), dweight: (C) accumulated, dout: (R, C), inp: (R, C), weight: (C), rstd: (R)
// With xhat = x * r: dx = r * (w*g - xhat * mean(w*g*xhat)).
tsr_status kcpu_rmsnorm_backward(kb_t *kb, float *dinp, float *dweight, const float *dout,
                                 const float *inp, const float *weight, const float *rstd, int R,
                                 int C) {
  KCPU_DIM("rmsnorm_backward", R);
  KCPU_DIM("rmsnorm_backward", C);
  if (R == 0 || C == 0) return TSR_OK;
  KCPU_NEED("rmsnorm_backward", dout);
  KCPU_NEED("rmsnorm_backward", inp);
  KCPU_NEED("rmsnorm_backward", rstd);
  if (dinp) {
    KCPU_NEED("rmsnorm_backward", weight);
#pragma omp parallel for schedule(static) if ((size_t)R * C > KCPU_PAR_MIN)
    for (int i = 0; i < R; i++) {
      const float *x = inp + (size_t)i * C, *g = dout + (size_t)i * C;
      float *dx = dinp + (size_t)i * C;
      float r = rstd[i];
      double s = 0.0;
      for (int j = 0; j < C; j++) s += (double)(weight[j] * g[j]) * (x[j] * r);
      float m = (float)(s / C);
      for (int j = 0; j < C; j++) dx[j] = r * (weight[j] * g[j] - x[j] * r * m);
    }
  }
  if (dweight) return kcpu_colsum(dweight, 1, dout, inp, rstd, (size_t)R, C, (size_t)C);
  return TSR_OK;
}
