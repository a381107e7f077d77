// tests/kernels/kt.h — helpers for the kernel tests: deterministic random data, float <->
// double copies, and a central finite-difference checker on double-precision references.
//
// Gradient checks: each test writes a small naive forward in double. The kernel's backward
// (fp32) receives dout = w (random) and its gradient is compared with the central finite
// difference of J(x) = sum(w * forward(x)) computed in double (h = 1e-6: truncation and
// rounding error ~1e-9, far below the fp32 error being tested). The error is reported
// relative to the largest finite-difference component (max-norm), so it is meaningful for
// gradients with tiny entries.
#ifndef TESSERA_TESTS_KERNELS_KT_H
#define TESSERA_TESTS_KERNELS_KT_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/err.h"
#include "kernels/kernels.h"

static uint64_t kt_state = 0x9e3779b97f4a7c15ull;

static inline void kt_seed(uint64_t s) { kt_state = s * 0x9e3779b97f4a7c15ull + 1; }

// Uniform in [-1, 1).
static inline double kt_uniform(void) {
  kt_state ^= kt_state << 13;
  kt_state ^= kt_state >> 7;
  kt_state ^= kt_state << 17;
  return (double)(kt_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

// n floats uniform in [lo, hi), malloc'd (at least 1 element).
static inline float *kt_rand(size_t n, double lo, double hi) {
  float *x = malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * (kt_uniform() + 1.0) / 2.0);
  return x;
}

static inline float *kt_zeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static inline double *kt_dbl(const float *x, size_t n) {
  double *d = malloc((n ? n : 1) * sizeof(double));
  for (size_t i = 0; i < n; i++) d[i] = x[i];
  return d;
}

// max |a - b| / max(max |b|, floor): error relative to the reference's max-norm.
static inline double kt_relerr(const float *a, const double *b, size_t n, double floor) {
  double e = 0.0, m = floor;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]);
    if (d > e || isnan(d)) e = isnan(d) ? INFINITY : d;
    if (fabs(b[i]) > m) m = fabs(b[i]);
  }
  return e / m;
}

static inline double kt_relerr_ff(const float *a, const float *b, size_t n, double floor) {
  double *bd = kt_dbl(b, n);
  double e = kt_relerr(a, bd, n, floor);
  free(bd);
  return e;
}

// Forward in double: reads in[0..], writes out.
typedef void (*kt_fwd)(void *ctx, double *const *in, double *out);

// Max-norm relative error of grad (n floats, the kernel's gradient of J = sum w*out with
// respect to in[which]) against central differences of the double forward.
static inline double kt_fd_err(kt_fwd f, void *ctx, double **in, int which, size_t n,
                               size_t n_out, const double *w, const float *grad) {
  const double h = 1e-6;
  double *out = malloc(n_out * sizeof(double));
  double emax = 0.0, gmax = 1e-12;
  for (size_t i = 0; i < n; i++) {
    double save = in[which][i], jp = 0.0, jm = 0.0;
    in[which][i] = save + h;
    f(ctx, in, out);
    for (size_t o = 0; o < n_out; o++) jp += w[o] * out[o];
    in[which][i] = save - h;
    f(ctx, in, out);
    for (size_t o = 0; o < n_out; o++) jm += w[o] * out[o];
    in[which][i] = save;
    double fd = (jp - jm) / (2 * h), e = fabs(fd - (double)grad[i]);
    if (e > emax || isnan(e)) emax = isnan(e) ? INFINITY : e;
    if (fabs(fd) > gmax) gmax = fabs(fd);
  }
  free(out);
  return emax / gmax;
}

#endif
