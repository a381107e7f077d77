// model/sample/unipc.h — the update of diffusers' UniPCMultistepScheduler as Wan's pipeline
// configures it (prediction_type "flow_prediction", use_flow_sigmas, predict_x0, solver_order
// 2, solver_type "bh2", lower_order_final, no disabled corrector, final sigma 0), on host
// fp32 arrays; the noise levels are model/sample/sample.h's sample_sigmas.
//
// With flow sigmas, alpha = 1 - sigma and lambda = log(alpha) - log(sigma). Step i (levels
// s_0 > ... > s_n = 0, model output v_i at x_i, the sample the model saw):
//   m_i = x_i - s_i v_i                                   (x0 prediction)
//   corrector (i > 0): x_i <- UniC(x_{i-1}^c, m_i; m_{i-1}, m_{i-2}) of the order the
//       previous predictor used (x_{i-1}^c: the sample the previous predictor started from)
//   predictor: x_{i+1} = UniP(x_i, m_i; m_{i-1}) of order min(2, n - i, i + 1)
// Both as diffusers' multistep_uni_{p,c}_bh_update: h = lambda_t - lambda_s0, hh = -h,
// h_phi_1 = expm1(hh), B_h = expm1(hh), x_t = (sigma_t / sigma_s0) x - alpha_t h_phi_1 m0
// - alpha_t B_h (rho . D) with D_k = (m_k - m0) / r_k, r_k = (lambda_k - lambda_s0) / h; the
// predictor's rho = 1/2 at order 2, the corrector's solves the order's 2 x 2 (or 1 x 1: 1/2)
// system of b_k = h_phi_k k! / B_h. The coefficients are computed in double (diffusers: fp32
// scalars), the arrays in fp32.
#ifndef TESSERA_MODEL_SAMPLE_UNIPC_H
#define TESSERA_MODEL_SAMPLE_UNIPC_H

#include <stddef.h>
#include "core/err.h"

typedef struct {
  size_t n;             // values per array
  int steps;            // n_steps of the schedule
  const double *sigma;  // (steps + 1) the noise levels, sigma[steps] = 0
  float *m[3];          // (n) each: m_i, m_{i-1}, m_{i-2} (rotated by unipc_step)
  float *last;          // (n) the sample the previous predictor started from
  int last_order;       // the previous predictor's order (0: none yet)
} unipc_state;

tsr_status unipc_init(unipc_state *u, size_t n, int steps, const double *sigma);
void unipc_free(unipc_state *u);
// Step i (0-based, in order): x (n) is the sample the model saw at sigma[i] and m0 (n) its
// x0 prediction x - sigma[i] v; x becomes the sample of sigma[i + 1]. m0 is copied.
void unipc_step(unipc_state *u, int i, float *x, const float *m0);

#endif
