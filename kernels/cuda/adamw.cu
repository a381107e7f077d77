// kernels/cuda/adamw.cu — the optimizer entries: AdamW over one tensor and over the
// segments of the flat parameter buffer (adamw_update_multi, one launch for the whole
// model), and the weights' EMA (the gradients' sumsq, a reduction, is in reduce.cu).
// The update of an element is kernels_adamw_elem (kernels/adamw.h), the one definition the
// CPU backend runs as the reference these kernels are tested against
// (tests/kernels/test_backend_ops.c).

#include "kernels/adamw.h"
#include "kernels/check.h"
#include "kernels/cuda/kcu.h"

// One element per thread.
__global__ void k_adamw(float *param, const float *grad, float *m, float *v, size_t n, float decay,
                        float w1, float beta2, float w2, float eps, float step_size, float bc2_sqrt,
                        float grad_scale) {
  KCU_GRID_STRIDE(i, n) {
    kernels_adamw_elem(param, grad, m, v, i, decay, w1, beta2, w2, eps, step_size, bc2_sqrt,
                       grad_scale);
  }
}

tsr_status kcu_adamw_update(kb_t *kb, float *param, const float *grad, float *m, float *v,
                                  size_t n, float lr, float beta1, float beta2, float eps,
                                  float weight_decay, int64_t step, float grad_scale) {
  const char *op = "adamw_update";
  kernels_adamw_scalars c = {};
  tsr_status st = kernels_adamw_prepare(lr, beta1, beta2, weight_decay, step, &c);
  if (!st) st = kernels_check_adamw_update(param, grad, m, v, n);
  if (st || n == 0) return st;
  k_adamw<<<KCU_GRID(kb, n)>>>(param, grad, m, v, n, c.decay, c.w1, beta2, c.w2, eps, c.step_size,
                               c.bc2_sqrt, grad_scale);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

// AdamW over the segments of flat buffers: a block updates ADAM_CHUNK consecutive elements,
// finds the segment of its first one once (binary search of the table), and each thread
// walks the table forward as its elements pass a segment's end; elements in no segment are
// skipped. kernels_adamw_elem with the segment's decay factor, so bitwise one launch
// per segment. work (the bf16 working copy, or NULL) gets each new weight rounded by kcu_st,
// the store k_f32_to_bf16 (cast) makes: the same bits without a second pass over the weights.
enum { ADAM_THREADS = 256, ADAM_CHUNK = 16 * ADAM_THREADS };
__global__ void __launch_bounds__(ADAM_THREADS)
    k_adamw_multi(float *param, const float *grad, float *m, float *v, act_t *work, size_t n,
                  const kernels_param_segment *segs, int n_segs, float decay_wd, float decay_0,
                  float w1, float beta2, float w2, float eps, float step_size, float bc2_sqrt,
                  float grad_scale) {
  __shared__ int first;
  long long i0 = (long long)blockIdx.x * ADAM_CHUNK;
  long long i1 = i0 + ADAM_CHUNK < (long long)n ? i0 + ADAM_CHUNK : (long long)n;
  if (threadIdx.x == 0) {
    int lo = 0, hi = n_segs;  // the first segment that ends after i0
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (segs[mid].offset + segs[mid].numel <= i0) lo = mid + 1;
      else hi = mid;
    }
    first = lo;
  }
  __syncthreads();
  int sg = first;
  long long off = 0, end = -1;
  float decay = decay_0;
  for (long long i = i0 + threadIdx.x; i < i1; i += ADAM_THREADS) {
    while (i >= end && sg < n_segs) {  // the segment of i or the next one
      kernels_param_segment g = segs[sg];
      off = g.offset, end = g.offset + g.numel;
      decay = g.decay ? decay_wd : decay_0;
      if (i >= end) sg++;
    }
    if (i >= end || i < off) continue;  // past the table, or in a gap
    float pn = kernels_adamw_elem(param, grad, m, v, (size_t)i, decay, w1, beta2, w2, eps,
                                  step_size, bc2_sqrt, grad_scale);
    if (work) kcu_st(work, (size_t)i, pn);
  }
}

// The table's checks (kernels.h): in order, not overlapping, inside [0, n), decay 0/1.
__global__ void k_check_segs(kcu_dev_error *err, const kernels_param_segment *segs, int n_segs,
                             long long n) {
  for (int s = threadIdx.x; s < n_segs; s += blockDim.x) {
    kernels_param_segment g = segs[s];
    long long prev_end = s > 0 ? segs[s - 1].offset + segs[s - 1].numel : 0;
    if (g.offset < prev_end || g.numel < 0 || g.offset > n || g.numel > n - g.offset ||
        (g.decay != 0 && g.decay != 1))
      kcu_report(err, KCU_BAD_SEGS, KCU_E_ADAMW_MULTI, g.offset, s);
  }
}

tsr_status kcu_adamw_update_multi(kb_t *kb, float *param, const float *grad, float *m,
                                        float *v, void *work, size_t n, const kernels_param_segment *segs,
                                        int n_segs, float lr, float beta1, float beta2, float eps,
                                        float weight_decay, int64_t step, float grad_scale) {
  const char *op = "adamw_update_multi";
  kernels_adamw_scalars cd = {}, c0 = {};
  tsr_status st = kernels_adamw_prepare(lr, beta1, beta2, weight_decay, step, &cd);
  if (!st) st = kernels_adamw_prepare(lr, beta1, beta2, 0.0f, step, &c0);
  if (!st) st = kernels_check_adamw_update_multi(param, grad, m, v, work, n, segs, n_segs);
  if (st || n_segs == 0 || n == 0) return st;
  cudaStream_t s = kcu(kb)->stream;
  k_check_segs<<<1, 256, 0, s>>>(kcu(kb)->err, segs, n_segs, (long long)n);
  KCU_LAUNCHED(op);
  size_t blocks = (n + ADAM_CHUNK - 1) / ADAM_CHUNK;
  if (blocks > 0x7fffffffu) return err_set(TSR_EINVAL, "%s: %zu elements are too many", op, n);
  k_adamw_multi<<<(unsigned)blocks, ADAM_THREADS, 0, s>>>(param, grad, m, v, (act_t *)work, n,
                                                          segs, n_segs,
                                                          cd.decay, c0.decay, cd.w1, beta2, cd.w2,
                                                          eps, cd.step_size, cd.bc2_sqrt,
                                                          grad_scale);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

__global__ void k_ema(float *ema, const float *p, size_t n, float decay, float w) {
  KCU_GRID_STRIDE(i, n) ema[i] = ema[i] * decay + p[i] * w;
}

tsr_status kcu_ema_update(kb_t *kb, float *ema, const float *param, size_t n, float decay) {
  tsr_status st = kernels_check_ema_update(ema, param, n, decay);
  if (st || n == 0) return st;
  k_ema<<<KCU_GRID(kb, n)>>>(ema, param, n, decay, (float)(1.0 - (double)decay));
  KCU_LAUNCHED("ema_update");
  return TSR_OK;
}
