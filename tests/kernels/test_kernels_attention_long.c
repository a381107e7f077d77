// CPU attention on one long clip (16384 tokens): memory stays linear in L (an L x L fp32
// matrix would be 1 GiB; the peak resident set may grow by at most 64 MiB over the
// inputs), sampled rows match a naive double softmax (1e-5, fp32 over 16k keys with a
// max-norm reference), and the backward obeys two closed forms that hold for any P:
// sum_j dv_j = sum_i dout_i (softmax rows sum to 1) and sum_j dk_j = 0 (each dS row sums
// to 0), checked to 1e-3 of the summed magnitudes (fp32 sums over 16k rows).
#include <sys/resource.h>

#include "kt.h"

static long peak_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

int main(void) {
  const kernels_backend *kb = kernels_cpu();
  kt_seed(16);
  int L = 16384, H = 1, Dh = 8;
  size_t n = (size_t)L * H * Dh;
  int32_t cu[2] = {0, L};
  float scale = 1.0f / sqrtf((float)Dh);
  float *q = kt_rand(n, -2, 2), *k = kt_rand(n, -2, 2), *v = kt_rand(n, -1, 1), *dout = kt_rand(n, -1, 1);
  float *out = kt_zeros(n), *lse = kt_zeros(L), *dq = kt_zeros(n), *dk = kt_zeros(n), *dv = kt_zeros(n);
  memset(out, 0, n * sizeof(float)), memset(dq, 0, n * sizeof(float));  // touch everything
  memset(dk, 0, n * sizeof(float)), memset(dv, 0, n * sizeof(float));
  long before = peak_kib();
  CHECK_OK(kb->attention_forward(kb, out, lse, q, k, v, cu, 1, L, L, H, Dh, scale));
  CHECK_OK(kb->attention_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, cu, 1, L, L, H, Dh, scale));
  long grown = peak_kib() - before;
  CHECK(grown < 64 * 1024, "peak memory grew by %ld KiB for L = %d", grown, L);
  int rows[3] = {0, L / 2 + 7, L - 1};
  double err = 0, lerr = 0, omax = 1e-6;
  double *s = malloc((size_t)L * sizeof(double));
  for (int r = 0; r < 3; r++) {
    int i = rows[r];
    double mx = -INFINITY, sum = 0, o[16] = {0};
    for (int j = 0; j < L; j++) {
      double d = 0;
      for (int e = 0; e < Dh; e++) d += (double)q[(size_t)i * Dh + e] * k[(size_t)j * Dh + e];
      s[j] = d * scale;
      mx = fmax(mx, s[j]);
    }
    for (int j = 0; j < L; j++) sum += (s[j] = exp(s[j] - mx));
    for (int j = 0; j < L; j++)
      for (int e = 0; e < Dh; e++) o[e] += s[j] / sum * v[(size_t)j * Dh + e];
    for (int e = 0; e < Dh; e++) {
      err = fmax(err, fabs(out[(size_t)i * Dh + e] - o[e]));
      omax = fmax(omax, fabs(o[e]));
    }
    lerr = fmax(lerr, fabs(lse[i] - (mx + log(sum))));
  }
  free(s);
  CHECK(err / omax < 1e-5 && lerr < 1e-5, "sampled rows: out err %.3g, lse err %.3g", err / omax, lerr);
  double sv_err = 0, sk_err = 0;
  for (int e = 0; e < Dh; e++) {
    double sv = 0, sg = 0, sk = 0, mag_v = 0, mag_k = 0;
    for (int j = 0; j < L; j++) {
      sv += dv[(size_t)j * Dh + e], sk += dk[(size_t)j * Dh + e], sg += dout[(size_t)j * Dh + e];
      mag_v += fabs(dv[(size_t)j * Dh + e]), mag_k += fabs(dk[(size_t)j * Dh + e]);
    }
    sv_err = fmax(sv_err, fabs(sv - sg) / mag_v);
    sk_err = fmax(sk_err, fabs(sk) / mag_k);
  }
  CHECK(sv_err < 1e-3 && sk_err < 1e-3, "closed forms: sum dv = sum dout (%.3g), sum dk = 0 (%.3g)", sv_err, sk_err);
  free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
  return check_done();
}
