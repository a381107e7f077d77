// kernels/cpu/silu.c — SiLU (x * sigmoid(x)) for the timestep MLP.
#include <math.h>

#include "kernels/check.h"
#include "kernels/cpu/cpu.h"

// out, inp: (n)
tsr_status kcpu_silu_forward(kb_t *kb, float *out, const float *inp, size_t n) {
  tsr_status st = kernels_check_activation_forward("silu_forward", out, inp, n);
  if (st || n == 0) return st;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) out[i] = inp[i] / (1.0f + expf(-inp[i]));
  return TSR_OK;
}

// dinp, dout, inp: (n); silu'(x) = s (1 + x (1 - s)), s = sigmoid(x)
tsr_status kcpu_silu_backward(kb_t *kb, float *dinp, const float *dout, const float *inp, size_t n) {
  tsr_status st = kernels_check_activation_backward("silu_backward", dinp, dout, inp, n);
  if (st || n == 0) return st;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) {
    float x = inp[i], s = 1.0f / (1.0f + expf(-x));
    dinp[i] = dout[i] * s * (1.0f + x * (1.0f - s));
  }
  return TSR_OK;
}
