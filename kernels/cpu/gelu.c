// kernels/cpu/gelu.c — GELU, tanh approximation (PyTorch approximate='tanh'; kcpu_gelu in
// kernels/cpu/rows.h).
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/rows.h"

// out, inp: (n)
tsr_status kcpu_gelu_forward(kb_t *kb, float *out, const float *inp, size_t n) {
  if (n == 0) return TSR_OK;
  KCPU_NEED("gelu_forward", out);
  KCPU_NEED("gelu_forward", inp);
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) out[i] = kcpu_gelu(inp[i]);
  return TSR_OK;
}

// dinp, dout, inp: (n); dinp may equal dout
tsr_status kcpu_gelu_backward(kb_t *kb, float *dinp, const float *dout, const float *inp, size_t n) {
  if (n == 0) return TSR_OK;
  KCPU_NEED("gelu_backward", dinp);
  KCPU_NEED("gelu_backward", dout);
  KCPU_NEED("gelu_backward", inp);
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) dinp[i] = kcpu_dgelu(inp[i]) * dout[i];
  return TSR_OK;
}
