// CPU loss and optimizer: per-clip weighted MSE against its closed form (mean over clips of
// each clip's mean) and FD; a clip split in chunks (as across CP ranks) sums to the same
// loss; AdamW one and three steps against the PyTorch formula evaluated in double; sum of
// squares, clipping factor, EMA closed forms; sum of squares independent of the thread count.
// Tolerances: 1e-6 relative (fp32 elementwise arithmetic, double reductions).
#include <omp.h>

#include "kt.h"

static const kernels_backend *kb;

#define NC 4
static const int32_t CU[NC + 1] = {0, 5, 6, 6, 14};  // clips of 5, 1, 0 and 8 tokens

typedef struct { int L, D; const float *w; } loss_ctx;
// in: pred (L, D); target fixed in in[1]; out (1) = sum_c w_c sum (pred - target)^2
static void loss_ref(void *vc, double *const *in, double *out) {
  loss_ctx *c = vc;
  double s = 0;
  for (int cl = 0; cl < NC; cl++)
    for (int i = CU[cl] * c->D; i < CU[cl + 1] * c->D; i++) s += c->w[cl] * (in[0][i] - in[1][i]) * (in[0][i] - in[1][i]);
  out[0] = s;
}

static void test_loss(void) {
  int D = 3, L = CU[NC];
  size_t n = (size_t)L * D;
  float *pred = kt_rand(n, -1, 1), *tgt = kt_rand(n, -1, 1), w[NC], sse[NC], loss, *dp = kt_zeros(n);
  for (int c = 0; c < NC; c++) w[c] = kernels_mse_weight(3, CU[c + 1] - CU[c], D);  // 3 non-empty clips
  CHECK(w[2] == 0.0f, "empty clip weight 0");
  CHECK_OK(kb->mse_forward(kb, &loss, sse, pred, tgt, w, CU, NC, L, D));
  double mean_of_means = 0;
  for (int c = 0; c < NC; c++) {
    if (CU[c + 1] == CU[c]) continue;
    double s = 0;
    for (int i = CU[c] * D; i < CU[c + 1] * D; i++) s += ((double)pred[i] - tgt[i]) * ((double)pred[i] - tgt[i]);
    CHECK(fabs(sse[c] - s) <= 1e-6 * s, "sse clip %d", c);
    mean_of_means += s / ((CU[c + 1] - CU[c]) * D) / 3;
  }
  CHECK(fabs(loss - mean_of_means) <= 1e-6 * mean_of_means, "loss %.9g == mean of clip means %.9g", loss, mean_of_means);
  CHECK_OK(kb->mse_backward(kb, dp, pred, tgt, w, CU, NC, L, D));
  loss_ctx c = {L, D, w};
  double *in[2] = {kt_dbl(pred, n), kt_dbl(tgt, n)}, one = 1.0;
  double e = kt_fd_err(loss_ref, &c, in, 0, n, 1, &one, dp);
  CHECK(e < 1e-6, "mse backward FD err %.3g", e);
  // the last clip (8 tokens) split in chunks of 3 and 5 tokens, as on two CP ranks
  int32_t cu_a[2] = {0, 3}, cu_b[2] = {0, 5};
  float wl = w[3], la, lb;
  CHECK_OK(kb->mse_forward(kb, &la, NULL, pred + 6 * D, tgt + 6 * D, &wl, cu_a, 1, 3, D));
  CHECK_OK(kb->mse_forward(kb, &lb, NULL, pred + 9 * D, tgt + 9 * D, &wl, cu_b, 1, 5, D));
  CHECK(fabs((double)la + lb - (double)wl * sse[3]) <= 1e-6 * wl * sse[3], "chunks sum to the clip's term");
  free(pred), free(tgt), free(dp), free(in[0]), free(in[1]);
}

static void test_adamw(void) {
  enum { N = 5 };
  float p[N] = {0.5f, -1.0f, 2.0f, 0.0f, 1e-3f}, g[N] = {0.1f, -0.2f, 3.0f, 0.0f, -1e-4f};
  float m[N] = {0}, v[N] = {0};
  double pd[N], md[N] = {0}, vd[N] = {0};
  for (int i = 0; i < N; i++) pd[i] = p[i];
  double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, gs = 0.5;
  for (int t = 1; t <= 3; t++) {
    CHECK_OK(kb->adamw_update(kb, p, g, m, v, N, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, t, (float)gs));
    for (int i = 0; i < N; i++) {  // torch.optim.AdamW in double
      double gi = (double)g[i] * gs;
      pd[i] *= 1 - lr * wd;
      md[i] = b1 * md[i] + (1 - b1) * gi;
      vd[i] = b2 * vd[i] + (1 - b2) * gi * gi;
      double mh = md[i] / (1 - pow(b1, t)), vh = vd[i] / (1 - pow(b2, t));
      pd[i] -= lr * mh / (sqrt(vh) + eps);
    }
    double e = 0;
    for (int i = 0; i < N; i++) e = fmax(e, fabs(p[i] - pd[i]) / (1 + fabs(pd[i])));
    CHECK(e < 1e-6, "adamw step %d err %.3g", t, e);
  }
  // step 1 closed form: mhat = g, vhat = g^2 -> update = lr * g / (|g| + eps) = lr * sign(g)
  float q[1] = {1.0f}, gq[1] = {4.0f}, mq[1] = {0}, vq[1] = {0};
  CHECK_OK(kb->adamw_update(kb, q, gq, mq, vq, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 1, 1.0f));
  CHECK(fabsf(q[0] - 0.9f) < 1e-6f, "first step moves by lr: %.9g", q[0]);
}

static void test_norms_ema(void) {
  float x[4] = {3, 0, 4, 0};
  double ss;
  CHECK_OK(kb->sumsq(kb, &ss, x, 4));
  CHECK(ss == 25.0, "sumsq %g", ss);
  CHECK(fabsf(kernels_clip_scale(25.0, 1.0f) - (float)(1.0 / (5.0 + 1e-6))) < 1e-9f, "clip scale");
  CHECK(kernels_clip_scale(0.25, 1.0f) == 1.0f && kernels_clip_scale(25.0, 0.0f) == 1.0f, "no clipping");
  float ema[2] = {1, 2}, par[2] = {3, -2};
  CHECK_OK(kb->ema_update(kb, ema, par, 2, 0.75f));
  CHECK(ema[0] == 1.5f && ema[1] == 1.0f, "ema %g %g", ema[0], ema[1]);
  size_t n = 1000003;
  float *big = kt_rand(n, -1, 1);
  double s1, s2, ref = 0;
  for (size_t i = 0; i < n; i++) ref += (double)big[i] * big[i];
  int nt = omp_get_max_threads();
  omp_set_num_threads(1);
  CHECK_OK(kb->sumsq(kb, &s1, big, n));
  omp_set_num_threads(nt > 1 ? nt : 3);
  CHECK_OK(kb->sumsq(kb, &s2, big, n));
  omp_set_num_threads(nt);
  CHECK(s1 == s2 && fabs(s1 - ref) < 1e-9 * ref, "sumsq bitwise thread-independent, accurate");
  free(big);
}

int main(void) {
  kb = kernels_cpu();
  kt_seed(5);
  test_loss();
  test_adamw();
  test_norms_ema();
  return check_done();
}
