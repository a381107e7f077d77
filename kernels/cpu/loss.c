// kernels/cpu/loss.c — per-clip weighted squared error (rectified-flow objective).
#include "kernels/check.h"
#include "kernels/cpu/cpu.h"

// loss: (1), sse: (C) or NULL, pred/target: (L, D), weight: (C), cu: (C + 1)
tsr_status kcpu_mse_forward(kb_t *kb, float *loss, float *sse, const float *pred,
                            const float *target, const float *weight, const int32_t *cu,
                            int n_clips, int L, int D) {
  tsr_status st = kernels_check_mse_forward(loss, pred, target, weight, cu, n_clips, L, D);
  if (!st) st = kcpu_check_cu("mse_forward", "cu_seqlens", cu, n_clips, L);
  if (st) return st;
  double total = 0.0;
  for (int c = 0; c < n_clips; c++) {
    size_t o = (size_t)cu[c] * D, n = (size_t)(cu[c + 1] - cu[c]) * D;
    double s;
    if ((st = kcpu_sumsq_diff(&s, n ? pred + o : NULL, n ? target + o : NULL, n))) return st;
    if (sse) sse[c] = (float)s;
    total += (double)weight[c] * s;
  }
  loss[0] = (float)total;
  return TSR_OK;
}

// dpred: (L, D) = 2 weight[c] (pred - target)
tsr_status kcpu_mse_backward(kb_t *kb, float *dpred, const float *pred, const float *target,
                             const float *weight, const int32_t *cu, int n_clips, int L, int D) {
  tsr_status st = kernels_check_mse_backward(dpred, pred, target, weight, cu, n_clips, L, D);
  if (!st) st = kcpu_check_cu("mse_backward", "cu_seqlens", cu, n_clips, L);
  if (st || L == 0 || D == 0) return st;
#pragma omp parallel for schedule(static) if ((size_t)L * D > KCPU_PAR_MIN)
  for (int i = 0; i < L; i++) {
    float w2 = 2.0f * weight[kcpu_clip_of(cu, n_clips, i)];
    size_t o = (size_t)i * D;
    for (int j = 0; j < D; j++) dpred[o + j] = w2 * (pred[o + j] - target[o + j]);
  }
  return TSR_OK;
}

float kernels_mse_weight(int n_batch_clips, int64_t clip_tokens, int D) {
  if (n_batch_clips <= 0 || clip_tokens <= 0 || D <= 0) return 0.0f;
  return (float)(1.0 / ((double)n_batch_clips * (double)clip_tokens * (double)D));
}
