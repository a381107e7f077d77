// kernels/cpu/gelu.c — GELU, tanh approximation (PyTorch approximate='tanh').
#include <math.h>

#include "kernels/cpu/cpu.h"

#define GELU_K 0.7978845608028654f  // sqrt(2 / pi)
#define GELU_C 0.044715f

// out, inp: (n)
tsr_status kcpu_gelu_forward(kb_t *kb, float *out, const float *inp, size_t n) {
  if (n == 0) return TSR_OK;
  KCPU_NEED("gelu_forward", out);
  KCPU_NEED("gelu_forward", inp);
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) {
    float x = inp[i];
    out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_C * x * x * x)));
  }
  return TSR_OK;
}

// dinp, dout, inp: (n)
tsr_status kcpu_gelu_backward(kb_t *kb, float *dinp, const float *dout, const float *inp, size_t n) {
  if (n == 0) return TSR_OK;
  KCPU_NEED("gelu_backward", dinp);
  KCPU_NEED("gelu_backward", dout);
  KCPU_NEED("gelu_backward", inp);
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) {
    float x = inp[i];
    float th = tanhf(GELU_K * (x + GELU_C * x * x * x));
    float d = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_C * x * x);
    dinp[i] = d * dout[i];
  }
  return TSR_OK;
}
