// kernels/cpu/adamw.c — AdamW step, gradient sum of squares and clipping, weight EMA.
#include <math.h>
#include <string.h>

#include "kernels/adamw.h"
#include "kernels/check.h"
#include "kernels/cpu/cpu.h"

// *result_host = sum x^2, x: (n)
tsr_status kcpu_sumsq(kb_t *kb, double *result_host, const float *x, size_t n) {
  tsr_status st = kernels_check_sumsq(result_host, x, n);
  return st ? st : kcpu_sumsq_diff(result_host, x, NULL, n);
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

// param, grad, m, v: (n). Scalars: kernels_adamw_prepare. The update of each element is
// kernels/adamw.h's, the reference the other backends are tested against.
tsr_status kcpu_adamw_update(kb_t *kb, float *param, const float *grad, float *m, float *v,
                             size_t n, float lr, float beta1, float beta2, float eps,
                             float weight_decay, int64_t step, float grad_scale) {
  kernels_adamw_scalars c = {0};
  tsr_status st = kernels_adamw_prepare(lr, beta1, beta2, weight_decay, step, &c);
  if (!st) st = kernels_check_adamw_update(param, grad, m, v, n);
  if (st || n == 0) return st;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++)
    kernels_adamw_elem(param, grad, m, v, i, c.decay, c.w1, beta2, c.w2, eps, c.step_size,
                       c.bc2_sqrt, grad_scale);
  return TSR_OK;
}

tsr_status kcpu_check_segments(const char *op, const kernels_param_segment *segs, int n_segs,
                               size_t n) {
  if (n_segs < 0) return err_set(TSR_EINVAL, "%s: n_segs = %d is negative", op, n_segs);
  if (n_segs > 0 && !segs) return err_set(TSR_EINVAL, "%s: segs is NULL", op);
  int64_t end = 0;
  for (int s = 0; s < n_segs; s++) {
    const kernels_param_segment *g = &segs[s];
    if (g->offset < end || g->numel < 0 || (uint64_t)g->offset + (uint64_t)g->numel > (uint64_t)n ||
        (g->decay != 0 && g->decay != 1))
      return err_set(TSR_EINVAL, "%s: segment %d (offset %lld, numel %lld, decay %d) is not in "
                     "order, overlaps the one before, leaves [0, %zu) or has a decay flag "
                     "other than 0/1", op, s, (long long)g->offset, (long long)g->numel,
                     (int)g->decay, n);
    end = g->offset + g->numel;
  }
  return TSR_OK;
}

enum { MULTI_BLOCK = 4096 };  // elements per work item of adamw_update_multi

// work[a..e) = param[a..e) in the act dtype act, rounded as kcpu's cast rounds
// (kernels_f32_to_bf16); work: (n) [act], param: (n) [f32].
static void store_work(void *work, kernels_dtype act, const float *param, size_t a, size_t e) {
  if (act == KERNELS_BF16) {
    kernels_bf16 *w = work;
    for (size_t i = a; i < e; i++) w[i] = kernels_f32_to_bf16(param[i]);
  } else {
    memcpy((float *)work + a, param + a, (e - a) * sizeof *param);
  }
}

// The segments of flat buffers (kernels.h): fixed blocks of the flat range in one OpenMP
// region, each element updated by kernels_adamw_elem with its segment's scalars, and the block's
// part of the segment stored to the working copy while it is still in cache.
tsr_status kcpu_adamw_update_multi(kb_t *kb, float *param, const float *grad, float *m, float *v,
                                   void *work, size_t n, const kernels_param_segment *segs, int n_segs,
                                   float lr, float beta1, float beta2, float eps,
                                   float weight_decay, int64_t step, float grad_scale) {
  const char *op = "adamw_update_multi";
  kernels_adamw_scalars cd = {0}, c0 = {0};
  tsr_status st = kernels_adamw_prepare(lr, beta1, beta2, weight_decay, step, &cd);
  if (!st) st = kernels_adamw_prepare(lr, beta1, beta2, 0.0f, step, &c0);
  if (!st) st = kernels_check_adamw_update_multi(param, grad, m, v, work, n, segs, n_segs);
  if (!st) st = kcpu_check_segments(op, segs, n_segs, n);
  if (st || n_segs == 0) return st;
  size_t nb = (n + MULTI_BLOCK - 1) / MULTI_BLOCK;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t b = 0; b < nb; b++) {
    size_t i0 = b * MULTI_BLOCK, i1 = i0 + MULTI_BLOCK < n ? i0 + MULTI_BLOCK : n;
    int lo = 0, hi = n_segs;  // the first segment that ends after i0
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if ((size_t)(segs[mid].offset + segs[mid].numel) <= i0) lo = mid + 1;
      else hi = mid;
    }
    for (int s = lo; s < n_segs && (size_t)segs[s].offset < i1; s++) {
      const kernels_adamw_scalars *c = segs[s].decay ? &cd : &c0;
      size_t a = (size_t)segs[s].offset > i0 ? (size_t)segs[s].offset : i0;
      size_t e = (size_t)(segs[s].offset + segs[s].numel) < i1 ? (size_t)(segs[s].offset + segs[s].numel) : i1;
      for (size_t i = a; i < e; i++)
        kernels_adamw_elem(param, grad, m, v, i, c->decay, c->w1, beta2, c->w2, eps,
                           c->step_size, c->bc2_sqrt, grad_scale);
      if (work) store_work(work, kb->act_dtype, param, a, e);
    }
  }
  return TSR_OK;
}

// ema, param: (n)
tsr_status kcpu_ema_update(kb_t *kb, float *ema, const float *param, size_t n, float decay) {
  tsr_status st = kernels_check_ema_update(ema, param, n, decay);
  if (st || n == 0) return st;
  float w = (float)(1.0 - (double)decay);
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) ema[i] = ema[i] * decay + param[i] * w;
  return TSR_OK;
}
