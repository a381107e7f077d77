// kernels/cpu/layernorm.c — LayerNorm without affine parameters, one token per row
// (row arithmetic: kernels/cpu/rows.h).
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/rows.h"

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
  KCPU_DIM("layernorm_backward", L);
  KCPU_DIM("layernorm_backward", D);
  if (L == 0 || D == 0 || !dinp) return TSR_OK;
  KCPU_NEED("layernorm_backward", dout);
  KCPU_NEED("layernorm_backward", inp);
  KCPU_NEED("layernorm_backward", mean);
  KCPU_NEED("layernorm_backward", rstd);
#pragma omp parallel for schedule(static) if ((size_t)L * D > KCPU_PAR_MIN)
  for (int i = 0; i < L; i++) {
    size_t o = (size_t)i * D;
    kcpu_ln_bwd_row(dinp + o, dout + o, inp + o, mean[i], rstd[i], D);
  }
  return TSR_OK;
}
