// kernels/cpu/layernorm.c — LayerNorm without affine parameters, one token per row.
#include <math.h>

#include "kernels/cpu/cpu.h"

// out: (L, D), mean: (L) or NULL, rstd: (L) or NULL, inp: (L, D)
tsr_status kcpu_layernorm_forward(kb_t *kb, float *out, float *mean, float *rstd, const float *inp,
                                  int L, int D, float eps) {
  KCPU_DIM("layernorm_forward", L);
  KCPU_DIM("layernorm_forward", D);
  if (L == 0) return TSR_OK;
  if (D == 0) return err_set(TSR_EINVAL, "layernorm_forward: D = 0");
  KCPU_NEED("layernorm_forward", out);
  KCPU_NEED("layernorm_forward", inp);
#pragma omp parallel for schedule(static) if ((size_t)L * D > KCPU_PAR_MIN)
  for (int i = 0; i < L; i++) {
    const float *x = inp + (size_t)i * D;
    float *y = out + (size_t)i * D;
    double s = 0.0;
    for (int j = 0; j < D; j++) s += x[j];
    double mu = s / D, ss = 0.0;
    for (int j = 0; j < D; j++) {
      double d = x[j] - mu;
      ss += d * d;
    }
    double r = 1.0 / sqrt(ss / D + (double)eps);
    float muf = (float)mu, rf = (float)r;
    for (int j = 0; j < D; j++) y[j] = (x[j] - muf) * rf;
    if (mean) mean[i] = muf;
    if (rstd) rstd[i] = rf;
  }
  return TSR_OK;
}

// dinp: (L, D), dout: (L, D), inp: (L, D), mean: (L), rstd: (L)
tsr_status kcpu_layernorm_backward(kb_t *kb, float *dinp, const float *dout, const float *inp,
                                   const float *mean, const float *rstd, int L, int D) {
  KCPU_DIM("layernorm_backward", L);
  KCPU_DIM("layernorm_backward", D);
  if (L == 0 || D == 0 || !dinp) return TSR_OK;
  KCPU_NEED("layernorm_backward", dout);
  KCPU_NEED("layernorm_backward", inp);
  KCPU_NEED("layernorm_backward", mean);
  KCPU_NEED("layernorm_backward", rstd);
#pragma omp parallel for schedule(static) if ((size_t)L * D > KCPU_PAR_MIN)
  for (int i = 0; i < L; i++) {
    const float *x = inp + (size_t)i * D, *g = dout + (size_t)i * D;
    float *dx = dinp + (size_t)i * D;
    float mu = mean[i], r = rstd[i];
    double sg = 0.0, sgx = 0.0;
    for (int j = 0; j < D; j++) {
      sg += g[j];
      sgx += (double)g[j] * ((x[j] - mu) * r);
    }
    float mg = (float)(sg / D), mgx = (float)(sgx / D);
    for (int j = 0; j < D; j++) dx[j] = r * (g[j] - mg - (x[j] - mu) * r * mgx);
  }
  return TSR_OK;
}
