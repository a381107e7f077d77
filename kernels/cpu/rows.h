// kernels/cpu/rows.h — private to the CPU backend: the per-row (per-element) arithmetic of
// the token-local entries, written once and used by both the plain entries and the fused
// ones (fused.c). A fused entry runs these in sequence on one row held in a thread's
// scratch, where the plain entries run each over the whole tensor; each row function
// stores its result before the next reads it, exactly as the plain entries do through
// memory, so the same statements give the same bits (tests/kernels/test_backend_ops.c
// checks fused == composition bitwise). Keep every expression here as it is: with FMA
// contraction (GNU C on FMA hardware) even a reordering of the same terms changes bits.
#ifndef TESSERA_KERNELS_CPU_ROWS_H
#define TESSERA_KERNELS_CPU_ROWS_H

#include <math.h>
#include <stdint.h>

#include "kernels/cpu/cpu.h"  // kcpu_expf

// LayerNorm of one row (no affine): y = (x - mean) rstd, statistics in double, stored as
// float. y, x: (D)
static inline void kcpu_ln_row(float *y, float *mean, float *rstd, const float *x, int D,
                               float eps) {
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
  *mean = muf;
  *rstd = rf;
}

// LayerNorm backward of one row: dx = r (g - mean(g) - xhat mean(g xhat)), xhat = (x - mu) r.
// dx, g, x: (D)
static inline void kcpu_ln_bwd_row(float *dx, const float *g, const float *x, float mu, float r,
                                   int D) {
  double sg = 0.0, sgx = 0.0;
  for (int j = 0; j < D; j++) {
    sg += g[j];
    sgx += (double)g[j] * ((x[j] - mu) * r);
  }
  float mg = (float)(sg / D), mgx = (float)(sgx / D);
  for (int j = 0; j < D; j++) dx[j] = r * (g[j] - mg - (x[j] - mu) * r * mgx);
}

// adaLN modulation of one row: y = x (1 + scale) + shift. y, x, shift, scale: (D)
static inline void kcpu_mod_row(float *y, const float *x, const float *shift, const float *scale,
                                int D) {
  for (int j = 0; j < D; j++) y[j] = x[j] * (1.0f + scale[j]) + shift[j];
}

// Its backward to the input: dx = g (1 + scale). dx, g, scale: (D)
static inline void kcpu_mod_bwd_row(float *dx, const float *g, const float *scale, int D) {
  for (int j = 0; j < D; j++) dx[j] = g[j] * (1.0f + scale[j]);
}

// RMSNorm of one row: y = x rstd w, rstd = 1 / sqrt(mean(x^2) + eps) (sum in double);
// returns rstd. y, x, w: (C)
static inline float kcpu_rms_row(float *y, const float *x, const float *w, int C, float eps) {
  double ss = 0.0;
  for (int j = 0; j < C; j++) ss += (double)x[j] * x[j];
  float r = (float)(1.0 / sqrt(ss / C + (double)eps));
  for (int j = 0; j < C; j++) y[j] = x[j] * r * w[j];
  return r;
}

// RMSNorm backward of one row: dx = r (w g - xhat mean(w g xhat)), xhat = x r. dx may equal
// g (each dx[j] is written after every g has been read for the mean, from g[j] only).
// dx, g, x, w: (C)
static inline void kcpu_rms_bwd_row(float *dx, const float *g, const float *x, const float *w,
                                    float r, int C) {
  double s = 0.0;
  for (int j = 0; j < C; j++) s += (double)(w[j] * g[j]) * (x[j] * r);
  float m = (float)(s / C);
  for (int j = 0; j < C; j++) dx[j] = r * (w[j] * g[j] - x[j] * r * m);
}

// The rotation of every pair p of one token: c[p] = cos, s[p] = sign sin of
// angle = pos[axis[p]] freq[p] (double, rounded to float). c, s: (P), pos: (3)
static inline void kcpu_rope_trig(float *c, float *s, const int32_t *pos, const double *freq,
                                  const int *axis, int P, double sign) {
  for (int p = 0; p < P; p++) {
    double ang = (double)pos[axis[p]] * freq[p];
    c[p] = (float)cos(ang);
    s[p] = (float)(sign * sin(ang));
  }
}

// Rotates the pairs (2p, 2p+1) of the H heads of one token: (a, b) -> (a c - b s, a s + b c).
// out may equal inp. out, inp: (H, Dh), c, s: (Dh / 2)
static inline void kcpu_rope_row(float *out, const float *inp, const float *c, const float *s,
                                 int H, int Dh) {
  for (int p = 0; p < Dh / 2; p++)
    for (int h = 0; h < H; h++) {
      int o = h * Dh + 2 * p;
      float a = inp[o], b = inp[o + 1];
      out[o] = a * c[p] - b * s[p];
      out[o + 1] = a * s[p] + b * c[p];
    }
}

// GELU, tanh approximation, and its derivative (kernels.h): with u = K (x + C x^3),
// 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + exp(-2u)), so
//   gelu(x)  = x / (1 + exp(-2u))
//   gelu'(x) = s + 2 x s (1 - s) K (1 + 3 C x^2),  s = sigmoid(2u), 1 - s = exp(-2u) s.
// Written with kcpu_expf (vectorisable, relative error ~2e-7) instead of libm's tanhf (a
// scalar call, which made GELU a fifth of the tiny model's step): the same function to
// float rounding, accurate in relative terms where 1 + tanh(u) underflows (large negative
// x), where 0.5 (1 + tanh(u)) would cancel.
#define KCPU_GELU_K 0.7978845608028654f  // sqrt(2 / pi)
#define KCPU_GELU_C 0.044715f
static inline float kcpu_gelu(float x) {
  float u = KCPU_GELU_K * (x + KCPU_GELU_C * x * x * x);
  return x / (1.0f + kcpu_expf(-2.0f * u));
}
static inline float kcpu_dgelu(float x) {
  float u = KCPU_GELU_K * (x + KCPU_GELU_C * x * x * x);
  float e = kcpu_expf(-2.0f * u), s = 1.0f / (1.0f + e);
  return s + 2.0f * x * s * (e * s) * KCPU_GELU_K * (1.0f + 3.0f * KCPU_GELU_C * x * x);
}

#endif
