// CPU kernels: GEMM and linear, LayerNorm, RMSNorm, adaLN modulate and gated residual,
// GELU, SiLU, embeddings, elementwise helpers, argument errors, thread-count independence.
// References: naive double loops (forward) and central differences in double (backward),
// see kt.h. Tolerances: fp32 forward vs double 1e-5 (relative to max-norm: fp32 rounding
// of sums of <= 64 terms); backward vs finite differences 1e-4 (fp32 rounding of the
// kernel's gradient, FD error ~1e-9).
#include <omp.h>

#include "kt.h"

#define FWD_TOL 1e-5
#define BWD_TOL 1e-4

static const kernels_backend *kb;

// ---- GEMM ---------------------------------------------------------------------------
static void test_gemm(void) {
  int m = 7, n = 9, k = 13;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      float *a = kt_rand((size_t)m * k, -1, 1), *b = kt_rand((size_t)k * n, -1, 1);
      float *c = kt_rand((size_t)m * n, -1, 1);
      double *ref = kt_dbl(c, (size_t)m * n);
      float alpha = 0.75f, beta = -0.5f;
      for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
          double s = 0;
          for (int p = 0; p < k; p++)
            s += (double)(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
          ref[i * n + j] = alpha * s + beta * ref[i * n + j];
        }
      CHECK_OK(kb->gemm(kb, ta, tb, m, n, k, alpha, a, b, beta, c));
      double e = kt_relerr(c, ref, (size_t)m * n, 1e-6);
      CHECK(e < FWD_TOL, "gemm ta=%d tb=%d err %.3g", ta, tb, e);
      free(a), free(b), free(c), free(ref);
    }
  // beta == 0 ignores NaN in c
  float a1[2] = {1, 2}, b1[2] = {3, 4}, c1[1] = {NAN};
  CHECK_OK(kb->gemm(kb, 0, 0, 1, 1, 2, 1.0f, a1, b1, 0.0f, c1));
  CHECK(c1[0] == 11.0f, "beta 0 overwrites NaN: %g", c1[0]);
}

typedef struct { int M, K, N; } lin_ctx;
// in: inp (M,K), w (K,N), bias (N); out (M,N)
static void lin_fwd(void *vc, double *const *in, double *out) {
  lin_ctx *c = vc;
  for (int i = 0; i < c->M; i++)
    for (int j = 0; j < c->N; j++) {
      double s = in[2][j];
      for (int p = 0; p < c->K; p++) s += in[0][i * c->K + p] * in[1][p * c->N + j];
      out[i * c->N + j] = s;
    }
}

static void test_linear(void) {
  lin_ctx c = {6, 11, 5};
  size_t nin = (size_t)c.M * c.K, nw = (size_t)c.K * c.N, nout = (size_t)c.M * c.N;
  float *inp = kt_rand(nin, -1, 1), *w = kt_rand(nw, -1, 1), *bias = kt_rand(c.N, -1, 1);
  float *out = kt_zeros(nout), *dout = kt_rand(nout, -1, 1);
  double *in[3] = {kt_dbl(inp, nin), kt_dbl(w, nw), kt_dbl(bias, c.N)};
  double *ref = malloc(nout * sizeof(double)), *wd = kt_dbl(dout, nout);
  lin_fwd(&c, in, ref);
  CHECK_OK(kb->linear_forward(kb, out, inp, w, bias, c.M, c.K, c.N));
  CHECK(kt_relerr(out, ref, nout, 1e-6) < FWD_TOL, "linear forward");
  float *dinp = kt_rand(nin, -1, 1), *dw = kt_zeros(nw), *db = kt_zeros(c.N);
  CHECK_OK(kb->linear_backward(kb, dinp, dw, db, dout, inp, w, c.M, c.K, c.N));
  double e0 = kt_fd_err(lin_fwd, &c, in, 0, nin, nout, wd, dinp);
  double e1 = kt_fd_err(lin_fwd, &c, in, 1, nw, nout, wd, dw);
  double e2 = kt_fd_err(lin_fwd, &c, in, 2, c.N, nout, wd, db);
  CHECK(e0 < BWD_TOL && e1 < BWD_TOL && e2 < BWD_TOL, "linear backward FD errors %.3g %.3g %.3g", e0, e1, e2);
  // dw, dbias accumulate: a second call doubles them; dinp is overwritten (same value)
  float *dw1 = kt_zeros(nw), *db1 = kt_zeros(c.N), *dinp1 = kt_zeros(nin);
  memcpy(dw1, dw, nw * sizeof(float));
  memcpy(db1, db, c.N * sizeof(float));
  memcpy(dinp1, dinp, nin * sizeof(float));
  CHECK_OK(kb->linear_backward(kb, dinp, dw, db, dout, inp, w, c.M, c.K, c.N));
  int acc_ok = !memcmp(dinp, dinp1, nin * sizeof(float));
  for (size_t i = 0; i < nw; i++) acc_ok &= fabsf(dw[i] - 2 * dw1[i]) <= 1e-6f * (1 + fabsf(dw1[i]));
  for (int i = 0; i < c.N; i++) acc_ok &= fabsf(db[i] - 2 * db1[i]) <= 1e-6f * (1 + fabsf(db1[i]));
  CHECK(acc_ok, "dw, dbias accumulate and dinp overwrites");
  // no bias
  CHECK_OK(kb->linear_forward(kb, out, inp, w, NULL, c.M, c.K, c.N));
  for (int j = 0; j < c.N; j++) in[2][j] = 0;
  lin_fwd(&c, in, ref);
  CHECK(kt_relerr(out, ref, nout, 1e-6) < FWD_TOL, "linear forward without bias");
  free(inp), free(w), free(bias), free(out), free(dout), free(ref), free(wd), free(dinp), free(dw);
  free(db), free(dw1), free(db1), free(dinp1);
  for (int i = 0; i < 3; i++) free(in[i]);
}

// ---- LayerNorm and RMSNorm -----------------------------------------------------------
typedef struct { int L, D; double eps; } norm_ctx;
static void ln_fwd(void *vc, double *const *in, double *out) {
  norm_ctx *c = vc;
  for (int i = 0; i < c->L; i++) {
    const double *x = in[0] + (size_t)i * c->D;
    double mu = 0, var = 0;
    for (int j = 0; j < c->D; j++) mu += x[j];
    mu /= c->D;
    for (int j = 0; j < c->D; j++) var += (x[j] - mu) * (x[j] - mu);
    double r = 1 / sqrt(var / c->D + c->eps);
    for (int j = 0; j < c->D; j++) out[(size_t)i * c->D + j] = (x[j] - mu) * r;
  }
}

static void test_layernorm(void) {
  norm_ctx c = {5, 24, 1e-6};
  size_t n = (size_t)c.L * c.D;
  float *x = kt_rand(n, -2, 3), *out = kt_zeros(n), *mean = kt_zeros(c.L), *rstd = kt_zeros(c.L);
  double *in[1] = {kt_dbl(x, n)}, *ref = malloc(n * sizeof(double));
  ln_fwd(&c, in, ref);
  CHECK_OK(kb->layernorm_forward(kb, out, mean, rstd, x, c.L, c.D, (float)c.eps));
  CHECK(kt_relerr(out, ref, n, 1e-6) < FWD_TOL, "layernorm forward");
  float *dout = kt_rand(n, -1, 1), *dx = kt_zeros(n);
  double *w = kt_dbl(dout, n);
  CHECK_OK(kb->layernorm_backward(kb, dx, dout, x, mean, rstd, c.L, c.D));
  double e = kt_fd_err(ln_fwd, &c, in, 0, n, n, w, dx);
  CHECK(e < BWD_TOL, "layernorm backward FD err %.3g", e);
  free(x), free(out), free(mean), free(rstd), free(in[0]), free(ref), free(dout), free(dx), free(w);
}

static void rms_fwd(void *vc, double *const *in, double *out) {
  norm_ctx *c = vc;  // L rows of D
  for (int i = 0; i < c->L; i++) {
    const double *x = in[0] + (size_t)i * c->D;
    double ss = 0;
    for (int j = 0; j < c->D; j++) ss += x[j] * x[j];
    double r = 1 / sqrt(ss / c->D + c->eps);
    for (int j = 0; j < c->D; j++) out[(size_t)i * c->D + j] = x[j] * r * in[1][j];
  }
}

static void test_rmsnorm(void) {
  norm_ctx c = {4 * 3, 16, 1e-6};  // 4 tokens x 3 heads, head_dim 16
  size_t n = (size_t)c.L * c.D;
  float *x = kt_rand(n, -2, 2), *wt = kt_rand(c.D, 0.5, 1.5), *out = kt_zeros(n), *rstd = kt_zeros(c.L);
  double *in[2] = {kt_dbl(x, n), kt_dbl(wt, c.D)}, *ref = malloc(n * sizeof(double));
  rms_fwd(&c, in, ref);
  CHECK_OK(kb->rmsnorm_forward(kb, out, rstd, x, wt, c.L, c.D, (float)c.eps));
  CHECK(kt_relerr(out, ref, n, 1e-6) < FWD_TOL, "rmsnorm forward");
  float *dout = kt_rand(n, -1, 1), *dx = kt_zeros(n), *dw = kt_zeros(c.D);
  double *w = kt_dbl(dout, n);
  CHECK_OK(kb->rmsnorm_backward(kb, dx, dw, dout, x, wt, rstd, c.L, c.D));
  double e0 = kt_fd_err(rms_fwd, &c, in, 0, n, n, w, dx);
  double e1 = kt_fd_err(rms_fwd, &c, in, 1, c.D, n, w, dw);
  CHECK(e0 < BWD_TOL && e1 < BWD_TOL, "rmsnorm backward FD errs %.3g %.3g", e0, e1);
  free(x), free(wt), free(out), free(rstd), free(in[0]), free(in[1]), free(ref), free(dout);
  free(dx), free(dw), free(w);
}

// ---- modulate / gated residual over packed clips ---------------------------------------
// clips of 3, 1, 0 (empty) and 4 tokens; per-clip vectors with row stride MS > D.
#define NCLIP 4
static const int32_t CU[NCLIP + 1] = {0, 3, 4, 4, 8};
typedef struct { int L, D, ms; } mod_ctx;
static int clip_of(int i) {
  int c = 0;
  while (!(CU[c] <= i && i < CU[c + 1])) c++;
  return c;
}
// in: x (L,D), shift (C,ms), scale (C,ms)
static void mod_fwd(void *vc, double *const *in, double *out) {
  mod_ctx *c = vc;
  for (int i = 0; i < c->L; i++)
    for (int j = 0; j < c->D; j++) {
      int k = clip_of(i) * c->ms + j;
      out[i * c->D + j] = in[0][i * c->D + j] * (1 + in[2][k]) + in[1][k];
    }
}
// in: res (L,D), x (L,D), gate (C,ms)
static void gate_fwd(void *vc, double *const *in, double *out) {
  mod_ctx *c = vc;
  for (int i = 0; i < c->L; i++)
    for (int j = 0; j < c->D; j++)
      out[i * c->D + j] = in[0][i * c->D + j] + in[2][clip_of(i) * c->ms + j] * in[1][i * c->D + j];
}

static void test_modulate(void) {
  mod_ctx c = {8, 6, 10};
  size_t n = (size_t)c.L * c.D, nm = (size_t)NCLIP * c.ms;
  float *x = kt_rand(n, -1, 1), *sh = kt_rand(nm, -1, 1), *sc = kt_rand(nm, -1, 1);
  float *out = kt_zeros(n);
  double *in[3] = {kt_dbl(x, n), kt_dbl(sh, nm), kt_dbl(sc, nm)}, *ref = malloc(n * sizeof(double));
  mod_fwd(&c, in, ref);
  CHECK_OK(kb->modulate_forward(kb, out, x, sh, sc, c.ms, CU, NCLIP, c.L, c.D));
  CHECK(kt_relerr(out, ref, n, 1e-6) < FWD_TOL, "modulate forward");
  float *dout = kt_rand(n, -1, 1), *dx = kt_zeros(n), *dsh = kt_rand(nm, 5, 6), *dsc = kt_rand(nm, 5, 6);
  double *w = kt_dbl(dout, n);
  CHECK_OK(kb->modulate_backward(kb, dx, dsh, dsc, dout, x, sc, c.ms, CU, NCLIP, c.L, c.D));
  // FD over the used columns only (padding columns of the stride are untouched)
  double e0 = kt_fd_err(mod_fwd, &c, in, 0, n, n, w, dx);
  double e1 = kt_fd_err(mod_fwd, &c, in, 1, nm, n, w, dsh);
  double e2 = kt_fd_err(mod_fwd, &c, in, 2, nm, n, w, dsc);
  (void)e1, (void)e2;
  // padding columns j >= D keep their old values (5..6): compare only j < D
  double em1 = 0, em2 = 0;
  {
    float *g1 = kt_zeros(nm), *g2 = kt_zeros(nm);
    for (int cc = 0; cc < NCLIP; cc++)
      for (int j = 0; j < c.D; j++) {
        g1[cc * c.ms + j] = dsh[cc * c.ms + j];
        g2[cc * c.ms + j] = dsc[cc * c.ms + j];
      }
    em1 = kt_fd_err(mod_fwd, &c, in, 1, nm, n, w, g1);
    em2 = kt_fd_err(mod_fwd, &c, in, 2, nm, n, w, g2);
    int pad_ok = 1;
    for (int cc = 0; cc < NCLIP; cc++)
      for (int j = c.D; j < c.ms; j++) pad_ok &= dsh[cc * c.ms + j] >= 5 && dsc[cc * c.ms + j] >= 5;
    CHECK(pad_ok, "modulate backward leaves stride padding alone");
    CHECK(dsh[2 * c.ms] == 0 && dsc[2 * c.ms] == 0, "empty clip gets zero gradients");
    free(g1), free(g2);
  }
  CHECK(e0 < BWD_TOL && em1 < BWD_TOL && em2 < BWD_TOL, "modulate backward FD errs %.3g %.3g %.3g", e0, em1, em2);
  // gated residual
  float *res = kt_rand(n, -1, 1), *gt = kt_rand(nm, -1, 1);
  double *gin[3] = {kt_dbl(res, n), in[0], kt_dbl(gt, nm)};
  gate_fwd(&c, gin, ref);
  CHECK_OK(kb->gate_residual_forward(kb, out, res, x, gt, c.ms, CU, NCLIP, c.L, c.D));
  CHECK(kt_relerr(out, ref, n, 1e-6) < FWD_TOL, "gate_residual forward");
  memcpy(out, res, n * sizeof(float));  // in place: out == res
  CHECK_OK(kb->gate_residual_forward(kb, out, out, x, gt, c.ms, CU, NCLIP, c.L, c.D));
  CHECK(kt_relerr(out, ref, n, 1e-6) < FWD_TOL, "gate_residual forward in place");
  float *dg = kt_zeros(nm);
  CHECK_OK(kb->gate_residual_backward(kb, dx, dg, dout, x, gt, c.ms, CU, NCLIP, c.L, c.D));
  double g0 = kt_fd_err(gate_fwd, &c, gin, 1, n, n, w, dx);
  double g2 = kt_fd_err(gate_fwd, &c, gin, 2, nm, n, w, dg);
  CHECK(g0 < BWD_TOL && g2 < BWD_TOL, "gate_residual backward FD errs %.3g %.3g", g0, g2);
  free(x), free(sh), free(sc), free(out), free(ref), free(dout), free(dx), free(dsh), free(dsc);
  free(w), free(res), free(gt), free(dg), free(gin[0]), free(gin[2]);
  for (int i = 0; i < 3; i++) free(in[i]);
}

// ---- activations -------------------------------------------------------------------------
static void gelu_ref(void *vc, double *const *in, double *out) {
  size_t n = *(size_t *)vc;
  for (size_t i = 0; i < n; i++) {
    double x = in[0][i];
    out[i] = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  }
}
static void silu_ref(void *vc, double *const *in, double *out) {
  size_t n = *(size_t *)vc;
  for (size_t i = 0; i < n; i++) out[i] = in[0][i] / (1 + exp(-in[0][i]));
}

static void test_activations(void) {
  size_t n = 200;
  float *x = kt_rand(n, -5, 5), *y = kt_zeros(n), *dout = kt_rand(n, -1, 1), *dx = kt_zeros(n);
  double *in[1] = {kt_dbl(x, n)}, *ref = malloc(n * sizeof(double)), *w = kt_dbl(dout, n);
  gelu_ref(&n, in, ref);
  CHECK_OK(kb->gelu_forward(kb, y, x, n));
  CHECK(kt_relerr(y, ref, n, 1e-6) < FWD_TOL, "gelu forward (tanh approximation)");
  CHECK_OK(kb->gelu_backward(kb, dx, dout, x, n));
  double e = kt_fd_err(gelu_ref, &n, in, 0, n, n, w, dx);
  CHECK(e < BWD_TOL, "gelu backward FD err %.3g", e);
  silu_ref(&n, in, ref);
  CHECK_OK(kb->silu_forward(kb, y, x, n));
  CHECK(kt_relerr(y, ref, n, 1e-6) < FWD_TOL, "silu forward");
  CHECK_OK(kb->silu_backward(kb, dx, dout, x, n));
  e = kt_fd_err(silu_ref, &n, in, 0, n, n, w, dx);
  CHECK(e < BWD_TOL, "silu backward FD err %.3g", e);
  memcpy(y, x, n * sizeof(float));
  CHECK_OK(kb->gelu_forward(kb, y, y, n));  // in place
  gelu_ref(&n, in, ref);
  CHECK(kt_relerr(y, ref, n, 1e-6) < FWD_TOL, "gelu in place");
  free(x), free(y), free(dout), free(dx), free(in[0]), free(ref), free(w);
}

// ---- conditioning and small helpers -------------------------------------------------------
static void test_embeddings(void) {
  float t[3] = {0.0f, 1.5f, 999.0f};
  int dim = 9;
  float *out = kt_zeros(3 * dim);
  CHECK_OK(kb->timestep_embedding(kb, out, t, 3, dim, 10000.0f));
  double err = 0;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) {
      double f = exp(-log(10000.0) * j / 4.0);
      err = fmax(err, fabs(out[i * dim + j] - cos(t[i] * f)));
      err = fmax(err, fabs(out[i * dim + 4 + j] - sin(t[i] * f)));
    }
  CHECK(err < 1e-6, "timestep embedding closed form err %.3g", err);
  CHECK(out[dim - 1] == 0 && out[2 * dim - 1] == 0, "odd dim: zero last column");
  float table[3 * 2] = {1, 2, 3, 4, 5, 6}, e[4 * 2], dt[6] = {0};
  int32_t ids[4] = {2, 0, 2, 1};
  CHECK_OK(kb->embedding_forward(kb, e, table, ids, 4, 3, 2));
  CHECK(e[0] == 5 && e[1] == 6 && e[2] == 1 && e[7] == 4, "embedding gather");
  float g[8] = {1, 1, 2, 2, 3, 3, 4, 4};
  CHECK_OK(kb->embedding_backward(kb, dt, g, ids, 4, 3, 2));
  CHECK(dt[0] == 2 && dt[2] == 4 && dt[4] == 4 && dt[5] == 4, "embedding scatter-add");
  int32_t bad[1] = {3};
  CHECK(kb->embedding_forward(kb, e, table, bad, 1, 3, 2) == TSR_EINVAL, "id out of range");
  uint8_t px[3] = {0, 128, 255};
  float pf[3];
  CHECK_OK(kb->u8_affine(kb, pf, px, 2.0f / 255.0f, -1.0f, 3));
  CHECK(pf[0] == -1.0f && fabsf(pf[1] - 1.0f / 255.0f) < 1e-6f && fabsf(pf[2] - 1.0f) < 1e-6f, "u8_affine");
  float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, o[4];
  CHECK_OK(kb->add(kb, o, a, b, 4));
  CHECK_OK(kb->axpy(kb, o, -2.0f, a, 4));
  CHECK_OK(kb->scale(kb, o, 0.5f, 4));
  CHECK(o[0] == 4.5f && o[3] == 18.0f, "add, axpy, scale: %g %g", o[0], o[3]);
  CHECK_OK(kb->fill(kb, o, 7.0f, 4));
  CHECK(o[0] == 7 && o[3] == 7, "fill");
  free(out);
}

static void test_memory(void) {
  float *d = NULL, host[5] = {1, 2, 3, 4, 5}, back[5] = {0};
  CHECK_OK(kb->alloc(kb, (void **)&d, sizeof host));
  CHECK(d && ((uintptr_t)d % 64) == 0 && d[4] == 0.0f, "alloc: aligned, zeroed");
  CHECK_OK(kb->to_device(kb, d, host, sizeof host));
  CHECK_OK(kb->to_host(kb, back, d, sizeof back));
  CHECK(!memcmp(host, back, sizeof host), "round trip");
  CHECK_OK(kb->memset_zero(kb, d, sizeof host));
  CHECK_OK(kb->sync(kb));
  CHECK(d[0] == 0 && d[4] == 0, "memset_zero");
  kb->free(kb, d);
  kb->free(kb, NULL);
}

// ---- argument errors -------------------------------------------------------------------------
static void test_errors(void) {
  float x[8] = {0}, y[8];
  int32_t bad_cu[3] = {0, 5, 3}, short_cu[2] = {0, 3};
  CHECK(kb->layernorm_forward(kb, NULL, NULL, NULL, x, 2, 4, 1e-6f) == TSR_EINVAL, "NULL out");
  CHECK(strstr(err_msg(), "layernorm_forward") != NULL, "message names the op: %s", err_msg());
  CHECK(kb->linear_forward(kb, y, x, x, NULL, -1, 2, 2) == TSR_EINVAL, "negative M");
  CHECK(kb->modulate_forward(kb, y, x, x, x, 4, bad_cu, 2, 3, 1) == TSR_EINVAL, "decreasing cu");
  CHECK(kb->modulate_forward(kb, y, x, x, x, 4, short_cu, 1, 4, 2) == TSR_EINVAL, "cu[C] != L");
  CHECK(strstr(err_msg(), "tokens") != NULL, "message says why: %s", err_msg());
  CHECK(kb->modulate_forward(kb, y, x, x, x, 1, short_cu, 1, 3, 2) == TSR_EINVAL, "mstride < D");
  int32_t pos[3] = {0, 0, 0};
  CHECK(kb->rope_forward(kb, y, x, pos, 1, 1, 3, 10000.0f) == TSR_EINVAL, "odd head dim");
  CHECK(kb->adamw_update(kb, y, x, y, y, 8, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0, 1.0f) == TSR_EINVAL, "step 0");
}

// ---- thread-count independence (bitwise) ---------------------------------------------------
static void test_threads(void) {
  int R = 3000, C = 70;
  size_t n = (size_t)R * C;
  float *x = kt_rand(n, -1, 1), *g = kt_rand(n, -1, 1), *wt = kt_rand(C, 0.5, 1.5), *rstd = kt_zeros(R);
  float *y = kt_zeros(n), *dx = kt_zeros(n), *dw1 = kt_zeros(C), *dw2 = kt_zeros(C), *db1 = kt_zeros(C),
        *db2 = kt_zeros(C);
  CHECK_OK(kb->rmsnorm_forward(kb, y, rstd, x, wt, R, C, 1e-6f));
  int nt = omp_get_max_threads();
  omp_set_num_threads(1);
  CHECK_OK(kb->rmsnorm_backward(kb, dx, dw1, g, x, wt, rstd, R, C));
  CHECK_OK(kb->linear_backward(kb, NULL, NULL, db1, g, NULL, NULL, R, 1, C));
  omp_set_num_threads(nt > 1 ? nt : 3);
  CHECK_OK(kb->rmsnorm_backward(kb, dx, dw2, g, x, wt, rstd, R, C));
  CHECK_OK(kb->linear_backward(kb, NULL, NULL, db2, g, NULL, NULL, R, 1, C));
  omp_set_num_threads(nt);
  CHECK(!memcmp(dw1, dw2, C * sizeof(float)) && !memcmp(db1, db2, C * sizeof(float)),
        "reductions bitwise equal with 1 and %d threads", nt > 1 ? nt : 3);
  free(x), free(g), free(wt), free(rstd), free(y), free(dx), free(dw1), free(dw2), free(db1), free(db2);
}

int main(void) {
  kb = kernels_cpu();
  CHECK(!strcmp(kb->name, "cpu"), "backend name");
  kt_seed(1);
  test_memory();
  test_gemm();
  test_linear();
  test_layernorm();
  test_rmsnorm();
  test_modulate();
  test_activations();
  test_embeddings();
  test_errors();
  test_threads();
  return check_done();
}
