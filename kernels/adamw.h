// kernels/adamw.h — the AdamW update of one element, stated once: kernels.h's contract of
// adamw_update with kernels_adamw_prepare's scalars. The CPU backend (kernels/cpu/adamw.c)
// runs it as the reference, and the CUDA kernels (kernels/cuda/adamw.cu) run the same
// definition on the device, so tests/kernels/test_backend_ops.c compares one statement
// compiled twice. A change of the update is made to the contract and here.
#ifndef TESSERA_KERNELS_ADAMW_H
#define TESSERA_KERNELS_ADAMW_H

#include <math.h>
#include <stddef.h>

#ifdef __CUDACC__
#define KERNELS_HD __host__ __device__
#else
#define KERNELS_HD
#endif

// param, grad, m, v: (n), element i updated in place; returns the new param[i] (for the
// working copy). decay = 1 - lr wd (1 where a tensor takes no decay), w1 = 1 - beta1,
// w2 = 1 - beta2, step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 - beta2^t).
static inline KERNELS_HD float kernels_adamw_elem(float *param, const float *grad, float *m,
                                                  float *v, size_t i, float decay, float w1,
                                                  float beta2, float w2, float eps,
                                                  float step_size, float bc2_sqrt,
                                                  float grad_scale) {
  float g = grad[i] * grad_scale;
  float p = param[i] * decay;
  float mi = m[i] + w1 * (g - m[i]);
  float vi = v[i] * beta2 + w2 * g * g;
  float denom = sqrtf(vi) / bc2_sqrt + eps;
  float pn = p + (-step_size) * (mi / denom);
  param[i] = pn;
  m[i] = mi;
  v[i] = vi;
  return pn;
}

#endif
