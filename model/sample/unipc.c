// model/sample/unipc.c — UniPC's bh2 predictor-corrector on flow sigmas (unipc.h).
#include "model/sample/unipc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

tsr_status unipc_init(unipc_state *u, size_t n, int steps, const double *sigma) {
  memset(u, 0, sizeof *u);
  u->n = n, u->steps = steps, u->sigma = sigma;
  for (int k = 0; k < 3; k++) u->m[k] = malloc(n * sizeof(float));
  u->last = malloc(n * sizeof(float));
  if (!u->m[0] || !u->m[1] || !u->m[2] || !u->last) {
    unipc_free(u);
    return err_set(TSR_ENOMEM, "sample: no memory for UniPC's state of %zu values", n);
  }
  return TSR_OK;
}

void unipc_free(unipc_state *u) {
  for (int k = 0; k < 3; k++) free(u->m[k]);
  free(u->last);
  memset(u, 0, sizeof *u);
}

// lambda = log(alpha) - log(sigma) with alpha = 1 - sigma (flow sigmas)
static double lambda_of(double s) { return log(1.0 - s) - log(s); }

// From level s0 to level t (> 0) with the x0 predictions m0 (at s0) and, for order 2, mk
// (at sk): the shared part of diffusers' multistep_uni_{p,c}_bh_update.
typedef struct {
  double ratio, a_phi, a_bh;  // sigma_t / sigma_s0, alpha_t h_phi_1, alpha_t B_h
  double h, hh, b1, b2;       // h = lambda_t - lambda_s0, hh = -h, the b of orders 1, 2
} unipc_coef;

static unipc_coef coef_of(double t, double s0) {
  unipc_coef c;
  double alpha_t = 1.0 - t;
  c.h = lambda_of(t) - lambda_of(s0);
  c.hh = -c.h;
  double h_phi_1 = expm1(c.hh), B_h = expm1(c.hh);  // bh2
  double h_phi_k = h_phi_1 / c.hh - 1.0;
  c.b1 = h_phi_k / B_h;
  h_phi_k = h_phi_k / c.hh - 0.5;
  c.b2 = h_phi_k * 2.0 / B_h;
  c.ratio = t / s0, c.a_phi = alpha_t * h_phi_1, c.a_bh = alpha_t * B_h;
  return c;
}

// The corrector of step i: x (the sample the model saw at sigma[i]) from the previous
// predictor's start u->last, with m_i = u->m[0], m0 = m_{i-1} = u->m[1], m_{i-2} = u->m[2].
static void correct(unipc_state *u, int i, float *x) {
  const double *s = u->sigma;
  unipc_coef c = coef_of(s[i], s[i - 1]);
  double rho0 = 0, rho1 = 0.5, rk = 1;  // order 1: rhos_c = [0.5]
  if (u->last_order == 2) {             // solve [[1, 1], [rk, 1]] rho = [b1, b2]
    rk = (lambda_of(s[i - 2]) - lambda_of(s[i - 1])) / c.h;
    rho0 = (c.b1 - c.b2) / (1.0 - rk);
    rho1 = c.b1 - rho0;
  }
  const float *mt = u->m[0], *m0 = u->m[1], *m2 = u->m[2], *last = u->last;
  for (size_t k = 0; k < u->n; k++) {
    double corr = u->last_order == 2 ? rho0 * ((double)m2[k] - m0[k]) / rk : 0.0;
    x[k] = (float)(c.ratio * last[k] - c.a_phi * m0[k] -
                   c.a_bh * (corr + rho1 * ((double)mt[k] - m0[k])));
  }
}

// The predictor of step i of `order`: x from sigma[i] to sigma[i + 1], m0 = m_i = u->m[0],
// m_{i-1} = u->m[1].
static void predict(unipc_state *u, int i, int order, float *x) {
  const double *s = u->sigma;
  const float *m0 = u->m[0], *m1 = u->m[1];
  if (s[i + 1] == 0.0) {  // lambda_t = inf: h_phi_1 = B_h = -1, the ratio 0: x = m0
    memcpy(x, m0, u->n * sizeof *x);
    return;
  }
  unipc_coef c = coef_of(s[i + 1], s[i]);
  double rk = order == 2 ? (lambda_of(s[i - 1]) - lambda_of(s[i])) / c.h : 1.0;
  for (size_t k = 0; k < u->n; k++) {
    double pred = order == 2 ? 0.5 * ((double)m1[k] - m0[k]) / rk : 0.0;  // rhos_p = [0.5]
    x[k] = (float)(c.ratio * x[k] - c.a_phi * m0[k] - c.a_bh * pred);
  }
}

void unipc_step(unipc_state *u, int i, float *x, const float *m0) {
  float *oldest = u->m[2];  // the outputs move down: m_i, m_{i-1}, m_{i-2}
  u->m[2] = u->m[1], u->m[1] = u->m[0], u->m[0] = oldest;
  memcpy(u->m[0], m0, u->n * sizeof(float));
  if (i > 0 && u->last_order > 0) correct(u, i, x);
  // lower_order_final and the warm-up of the multistep: min(solver_order, steps - i, i + 1)
  int order = u->steps - i < 2 ? u->steps - i : 2;
  if (order > i + 1) order = i + 1;
  memcpy(u->last, x, u->n * sizeof(float));
  predict(u, i, order, x);
  u->last_order = order;
}
