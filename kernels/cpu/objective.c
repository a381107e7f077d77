// kernels/cpu/objective.c — the rectified-flow inputs from uint8 tokens, the sampler's
// Euler step, and dtype conversion. Formulas: kernels/kernels.h (objective_inputs,
// euler_update, cast).
//
// Compiled with -ffp-contract=off (kernels/CMakeLists.txt): objective_inputs and
// euler_update must equal the host code of model/ bit for bit, and -march=native would
// otherwise let the compiler fuse (1 - t) x0 + t e into an FMA that the host build
// (baseline x86-64) does not have.
#include <math.h>
#include <string.h>

#include "core/rng.h"
#include "kernels/check.h"
#include "kernels/cpu/cpu.h"

double kernels_objective_timestep(uint64_t seed, uint64_t step, int64_t clip_id,
                                  int64_t t_index, int64_t total_tokens,
                                  const kernels_t_dist *td) {
  rng_key k = {seed, step, (uint64_t)clip_id, RNG_STREAM_TIMESTEP};
  double z = rng_normal(&k, (uint64_t)t_index);
  double t = 1.0 / (1.0 + exp(-(td->logit_mean + td->logit_std * z)));
  t = kernels_time_shift(t, total_tokens, td->shift_tokens);
  t = fmin(1.0 - 1e-5, fmax(1e-5, t));
  return td->t_min + (td->t_max - td->t_min) * t;  // exact for [0, 1] (no FMA: CMakeLists)
}

double kernels_time_shift(double t, int64_t total_tokens, int64_t shift_tokens) {
  if (shift_tokens <= 0) return t;
  double s = fmax(1.0, sqrt((double)total_tokens / (double)shift_tokens));
  return s * t / (1.0 + (s - 1.0) * t);
}

// The clean value x0 of stored token value q of `tokens` (kernels.h objective_inputs).
static inline float token_x0(const void *tokens, kernels_tokens dt, size_t q) {
  switch (dt) {
  case KERNELS_TOKENS_U8: return (float)((const uint8_t *)tokens)[q] * (2.0f / 255.0f) - 1.0f;
  case KERNELS_TOKENS_BF16: return kernels_bf16_to_f32(((const kernels_bf16 *)tokens)[q]);
  default: return ((const float *)tokens)[q];
  }
}

// t: (C), x_t, target: (L, P), tokens: (L, P) of tokens_dtype, clips: (C), cu: (C + 1)
tsr_status kcpu_objective_inputs(kb_t *kb, float *t, float *x_t, float *target,
                                 const void *tokens, kernels_tokens tokens_dtype,
                                 const kernels_clip_key *clips,
                                 const int32_t *cu, int n_clips, int L, int P, uint64_t seed,
                                 uint64_t step, kernels_t_dist td) {
  const char *op = "objective_inputs";
  tsr_status st = kernels_check_objective_inputs(t, x_t, target, tokens, tokens_dtype, clips, cu,
                                                 n_clips, L, P);
  if (!st) st = kcpu_check_cu(op, "cu_seqlens", cu, n_clips, L);
  if (st) return st;
  for (int c = 0; c < n_clips; c++) {
    const kernels_clip_key *k = &clips[c];
    if (k->first_token < 0 || k->first_token + (cu[c + 1] - cu[c]) > k->total_tokens)
      return err_set(TSR_EINVAL, "%s: clips[%d] (clip %lld): rows [%lld, %lld) are outside its "
                     "%lld tokens", op, c, (long long)k->clip_id, (long long)k->first_token,
                     (long long)(k->first_token + (cu[c + 1] - cu[c])),
                     (long long)k->total_tokens);
    t[c] = (float)kernels_objective_timestep(seed, step, k->clip_id, k->t_index, k->total_tokens,
                                              &td);
  }
  if (L == 0 || P == 0) return TSR_OK;
#pragma omp parallel for schedule(static) if ((size_t)L * P > KCPU_PAR_MIN / 16)
  for (int i = 0; i < L; i++) {
    int c = kcpu_clip_of(cu, n_clips, i);
    const kernels_clip_key *k = &clips[c];
    rng_key nk = {seed, step, (uint64_t)k->clip_id, RNG_STREAM_NOISE};
    uint64_t j = (uint64_t)(k->first_token + (i - cu[c]));  // token index in the clip
    float tc = t[c];
    float *x = x_t + (size_t)i * P, *v = target + (size_t)i * P;
    for (int q = 0; q < P; q++) {
      float x0 = token_x0(tokens, tokens_dtype, (size_t)i * P + (size_t)q);
      float e = (float)rng_normal(&nk, j * (uint64_t)P + (uint64_t)q);
      x[q] = (1.0f - tc) * x0 + tc * e;
      v[q] = e - x0;
    }
  }
  return TSR_OK;
}

// x: (n) updated, v_cond, v_uncond: (n)
tsr_status kcpu_euler_update(kb_t *kb, float *x, const float *v_cond, const float *v_uncond,
                             float cfg, float dt, size_t n) {
  tsr_status st = kernels_check_euler_update(x, v_cond, n);
  if (st || n == 0) return st;
  if (v_uncond) {
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) x[i] += dt * (v_uncond[i] + cfg * (v_cond[i] - v_uncond[i]));
  } else {
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) x[i] += dt * v_cond[i];
  }
  return TSR_OK;
}

// dst: (n) [dst_dtype], src: (n) [src_dtype]
tsr_status kcpu_cast(kb_t *kb, void *dst, kernels_dtype dst_dtype, const void *src,
                     kernels_dtype src_dtype, size_t n) {
  tsr_status st = kernels_check_cast(dst, dst_dtype, src, src_dtype, n);
  if (st || n == 0) return st;
  if (dst_dtype == src_dtype) {
    memcpy(dst, src, n * kernels_dtype_size(dst_dtype));
  } else if (dst_dtype == KERNELS_BF16) {  // from f32
    kernels_bf16 *d = dst;
    const float *s = src;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) d[i] = kernels_f32_to_bf16(s[i]);
  } else {  // bf16 -> f32
    float *d = dst;
    const kernels_bf16 *s = src;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) d[i] = kernels_bf16_to_f32(s[i]);
  }
  return TSR_OK;
}
