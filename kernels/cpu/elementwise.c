// kernels/cpu/elementwise.c — fill, scale, add, axpy, uint8 -> float.
#include "kernels/cpu/cpu.h"

tsr_status kcpu_fill(kb_t *kb, float *x, float value, size_t n) {
  if (n) KCPU_NEED("fill", x);
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) x[i] = value;
  return TSR_OK;
}

tsr_status kcpu_scale(kb_t *kb, float *x, float alpha, size_t n) {
  if (n) KCPU_NEED("scale", x);
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) x[i] *= alpha;
  return TSR_OK;
}

tsr_status kcpu_add(kb_t *kb, float *out, const float *a, const float *b, size_t n) {
  if (n) {
    KCPU_NEED("add", out);
    KCPU_NEED("add", a);
    KCPU_NEED("add", b);
  }
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
  return TSR_OK;
}

tsr_status kcpu_axpy(kb_t *kb, float *y, float alpha, const float *x, size_t n) {
  if (n) {
    KCPU_NEED("axpy", y);
    KCPU_NEED("axpy", x);
  }
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) y[i] += alpha * x[i];
  return TSR_OK;
}

tsr_status kcpu_u8_affine(kb_t *kb, float *out, const uint8_t *in, float a, float b, size_t n) {
  if (n) {
    KCPU_NEED("u8_affine", out);
    KCPU_NEED("u8_affine", in);
  }
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) out[i] = a * (float)in[i] + b;
  return TSR_OK;
}
