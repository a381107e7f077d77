// kernels/cpu/gelu.c — GELU, tanh approximation (PyTorch approximate='tanh'; kcpu_gelu in
// kernels/cpu/rows.h).
#include "kernels/check.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/rows.h"

// out, inp: (n)
tsr_status kcpu_gelu_forward(kb_t *kb, float *out, const float *inp, size_t n) {
  tsr_status st = kernels_check_activation_forward("gelu_forward", out, inp, n);
  if (st || n == 0) return st;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) out[i] = kcpu_gelu(inp[i]);
  return TSR_OK;
}

// dinp, dout, inp: (n); dinp may equal dout
tsr_status kcpu_gelu_backward(kb_t *kb, float *dinp, const float *dout, const float *inp, size_t n) {
  tsr_status st = kernels_check_activation_backward("gelu_backward", dinp, dout, inp, n);
  if (st || n == 0) return st;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) dinp[i] = kcpu_dgelu(inp[i]) * dout[i];
  return TSR_OK;
}
