// kernels/cpu/elementwise.c — fill, scale, add, axpy, uint8 -> float.
#include "kernels/check.h"
#include "kernels/cpu/cpu.h"

tsr_status kcpu_fill(kb_t *kb, float *x, float value, size_t n) {
  tsr_status st = kernels_check_fill(x, n);
  if (st) return st;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) x[i] = value;
  return TSR_OK;
}

tsr_status kcpu_scale(kb_t *kb, float *x, float alpha, size_t n) {
  tsr_status st = kernels_check_scale(x, n);
  if (st) return st;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) x[i] *= alpha;
  return TSR_OK;
}

tsr_status kcpu_add(kb_t *kb, float *out, const float *a, const float *b, size_t n) {
  tsr_status st = kernels_check_add(out, a, b, n);
  if (st) return st;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
  return TSR_OK;
}

tsr_status kcpu_axpy(kb_t *kb, float *y, float alpha, const float *x, size_t n) {
  tsr_status st = kernels_check_axpy(y, x, n);
  if (st) return st;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) y[i] += alpha * x[i];
  return TSR_OK;
}

tsr_status kcpu_u8_affine(kb_t *kb, float *out, const uint8_t *in, float a, float b, size_t n) {
  tsr_status st = kernels_check_u8_affine(out, in, n);
  if (st) return st;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) out[i] = a * (float)in[i] + b;
  return TSR_OK;
}
