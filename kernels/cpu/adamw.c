// kernels/cpu/adamw.c — AdamW step, gradient sum of squares and clipping, weight EMA.
#include <math.h>

#include "kernels/cpu/cpu.h"

// *result_host = sum x^2, x: (n)
tsr_status kcpu_sumsq(kb_t *kb, double *result_host, const float *x, size_t n) {
  KCPU_NEED("sumsq", result_host);
  if (n) KCPU_NEED("sumsq", x);
  return kcpu_sumsq_diff(result_host, x, NULL, n);
}

float kernels_clip_scale(double total_sumsq, float max_norm) {
  if (!(max_norm > 0.0f) || !(total_sumsq >= 0.0)) return 1.0f;
  double norm = sqrt(total_sumsq);
  float coef = (float)((double)max_norm / (norm + 1e-6));
  return coef < 1.0f ? coef : 1.0f;
}

tsr_status kernels_adamw_prepare(float lr, float beta1, float beta2, float weight_decay,
                                 int64_t step, kernels_adamw_scalars *out) {
  if (step < 1) return err_set(TSR_EINVAL, "adamw_update: step = %lld, must be >= 1", (long long)step);
  if (!(beta1 >= 0.0f && beta1 < 1.0f) || !(beta2 >= 0.0f && beta2 < 1.0f))
    return err_set(TSR_EINVAL, "adamw_update: betas (%g, %g) must be in [0, 1)", (double)beta1,
                   (double)beta2);
  double bc1 = 1.0 - pow((double)beta1, (double)step);
  double bc2 = 1.0 - pow((double)beta2, (double)step);
  *out = (kernels_adamw_scalars){.decay = (float)(1.0 - (double)lr * (double)weight_decay),
                                 .w1 = (float)(1.0 - (double)beta1),
                                 .w2 = (float)(1.0 - (double)beta2),
                                 .step_size = (float)((double)lr / bc1),
                                 .bc2_sqrt = (float)sqrt(bc2)};
  return TSR_OK;
}

// param, grad, m, v: (n). Scalars: kernels_adamw_prepare.
tsr_status kcpu_adamw_update(kb_t *kb, float *param, const float *grad, float *m, float *v,
                             size_t n, float lr, float beta1, float beta2, float eps,
                             float weight_decay, int64_t step, float grad_scale) {
  kernels_adamw_scalars c = {0};
  tsr_status st = kernels_adamw_prepare(lr, beta1, beta2, weight_decay, step, &c);
  if (st || n == 0) return st;
  KCPU_NEED("adamw_update", param);
  KCPU_NEED("adamw_update", grad);
  KCPU_NEED("adamw_update", m);
  KCPU_NEED("adamw_update", v);
  const float decay = c.decay, w1 = c.w1, w2 = c.w2, step_size = c.step_size,
              bc2_sqrt = c.bc2_sqrt;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) {
    float g = grad[i] * grad_scale;
    float p = param[i] * decay;
    float mi = m[i] + w1 * (g - m[i]);
    float vi = v[i] * beta2 + w2 * g * g;
    float denom = sqrtf(vi) / bc2_sqrt + eps;
    param[i] = p + (-step_size) * (mi / denom);
    m[i] = mi;
    v[i] = vi;
  }
  return TSR_OK;
}

// ema, param: (n)
tsr_status kcpu_ema_update(kb_t *kb, float *ema, const float *param, size_t n, float decay) {
  if (!(decay >= 0.0f && decay <= 1.0f))
    return err_set(TSR_EINVAL, "ema_update: decay = %g must be in [0, 1]", (double)decay);
  if (n == 0) return TSR_OK;
  KCPU_NEED("ema_update", ema);
  KCPU_NEED("ema_update", param);
  float w = (float)(1.0 - (double)decay);
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) ema[i] = ema[i] * decay + param[i] * w;
  return TSR_OK;
}
