// kernels/cuda/objective.cu — what the model's inputs are made of: the sinusoidal timestep
// embedding, the label embedding (forward and backward), the rectified-flow objective's
// inputs with a device Philox-4x32-10 equal to core/rng.c, and the sampler's Euler step
// (mirrors kernels/cpu/embed.c and objective.c). The float arithmetic of the objective
// and the Euler step is written with _rn intrinsics, so nvcc contracts nothing into an FMA
// that the host build of model/ does not have.
#include <math.h>

#include "kernels/check.h"
#include "kernels/cuda/kcu.h"

// ---- conditioning: timestep and label embeddings ------------------------------------------
__global__ void k_timestep(act_t *out, const float *t, int n, int dim, double log_mp) {
  int half = dim / 2, w = half + (dim & 1);
  KCU_GRID_STRIDE(e, (size_t)n * w) {
    int i = (int)(e / w), j = (int)(e % w);
    act_t *o = out + (size_t)i * dim;
    if (j == half) {
      kcu_st(o, dim - 1, 0.0f);
    } else {
      double arg = (double)t[i] * exp(-log_mp * j / half);
      kcu_st(o, j, (float)cos(arg));
      kcu_st(o, half + j, (float)sin(arg));
    }
  }
}

tsr_status kcu_timestep_embedding(kb_t *kb, void *out, const float *t, int n, int dim,
                                        float max_period) {
  const char *op = "timestep_embedding";
  tsr_status st = kernels_check_timestep_embedding(out, t, n, dim, max_period);
  if (st || n == 0 || dim == 0) return st;
  size_t items = (size_t)n * (dim / 2 + (dim & 1));
  k_timestep<<<KCU_GRID(kb, items)>>>((act_t *)out, t, n, dim, log((double)max_period));
  KCU_LAUNCHED(op);
  return TSR_OK;
}

__global__ void k_embed_fwd(act_t *out, const float *table, const int32_t *ids, int n, int V, int D,
                            kcu_dev_error *err) {
  KCU_GRID_STRIDE(e, (size_t)n * D) {
    int i = (int)(e / D), j = (int)(e % D), id = ids[i];
    if (id < 0 || id >= V) {
      if (j == 0) kcu_report(err, KCU_BAD_IDS, KCU_E_EMBED_F, id, i);
      kcu_st(out, e, 0.0f);
    } else {
      kcu_st(out, e, table[(size_t)id * D + j]);
    }
  }
}

// One owner per table element (row v, column j): scans the ids in order and adds dout rows
// in fp32 in the order of i, exactly the CPU loop; no atomics. O(n V D) work: fine for the
// label table (n = clips of a microbatch).
__global__ void k_embed_bwd(float *dtable, const act_t *dout, const int32_t *ids, int n, int V, int D,
                            kcu_dev_error *err) {
  KCU_GRID_STRIDE(e, (size_t)V * D) {
    int v = (int)(e / D), j = (int)(e % D);
    float acc = dtable[e];
    int touched = 0;
    for (int i = 0; i < n; i++) {
      int id = ids[i];
      if (e == 0 && (id < 0 || id >= V)) kcu_report(err, KCU_BAD_IDS, KCU_E_EMBED_B, id, i);
      if (id == v) {
        acc += kcu_ld(dout, (size_t)i * D + j);
        touched = 1;
      }
    }
    if (touched) dtable[e] = acc;
  }
}

tsr_status kcu_embedding_forward(kb_t *kb, void *out, const float *table, const int32_t *ids,
                                       int n, int V, int D) {
  const char *op = "embedding_forward";
  tsr_status st = kernels_check_embedding_forward(out, table, ids, n, V, D);
  if (st || n == 0 || D == 0) return st;
  size_t items = (size_t)n * D;
  k_embed_fwd<<<KCU_GRID(kb, items)>>>((act_t *)out, table, ids, n, V, D, kcu(kb)->err);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

tsr_status kcu_embedding_backward(kb_t *kb, float *dtable, const void *dout, const int32_t *ids,
                                        int n, int V, int D) {
  const char *op = "embedding_backward";
  tsr_status st = kernels_check_embedding_backward(dtable, dout, ids, n, V, D);
  if (st || n == 0 || !dtable || V == 0 || D == 0) return st;
  size_t items = (size_t)V * D;
  k_embed_bwd<<<KCU_GRID(kb, items)>>>(dtable, (const act_t *)dout, ids, n, V, D, kcu(kb)->err);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

// ---- objective: Philox-4x32-10 as core/rng.c, on the device ----------------------------
// Bitwise the host generator for the 32-bit words. The normals go through the device's
// double log/cos/sqrt (sqrt correctly rounded; log and cos within 1-2 ulp of glibc's), so
// a double may differ from the host's by an ulp; after rounding to float that changes a
// value only when it sits on a rounding boundary (about 1 in 2^28). The float arithmetic
// after it is written with _rn intrinsics: no FMA contraction, as the host build.
struct kcu_rng_key {
  unsigned long long seed, step, clip;
  unsigned stream;
};

__device__ __forceinline__ unsigned long long kcu_mix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__device__ void kcu_philox(const kcu_rng_key &key, unsigned long long ctr, unsigned out[4]) {
  unsigned hs = (unsigned)(key.seed >> 32), ht = (unsigned)(key.step >> 32), hc = (unsigned)(key.clip >> 32);
  unsigned high = 0;
  if (hs | ht | hc) {
    unsigned long long h = kcu_mix64(((unsigned long long)hs << 32 | ht) ^ kcu_mix64(hc + 0x9E3779B97F4A7C15ull));
    high = (unsigned)(h & 0xFFFFFFu);
    if (high == 0) high = 1;
  }
  unsigned c0 = (unsigned)ctr, c1 = (unsigned)(ctr >> 32), c2 = (unsigned)key.clip, c3 = (unsigned)key.step;
  unsigned k0 = (unsigned)key.seed, k1 = (key.stream & 0xFFu) | high << 8;
#pragma unroll
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

__device__ __forceinline__ double kcu_unit52(unsigned hi, unsigned lo) {
  unsigned long long n = ((unsigned long long)hi << 20) ^ (lo >> 12);
  return __dmul_rn((double)n + 0.5, 0x1p-52);
}

__device__ double kcu_rng_normal(const kcu_rng_key &key, unsigned long long ctr) {
  unsigned w[4];
  kcu_philox(key, ctr, w);
  double u1 = kcu_unit52(w[0], w[1]), u2 = kcu_unit52(w[2], w[3]);
  return __dmul_rn(sqrt(__dmul_rn(-2.0, log(u1))), cos(__dmul_rn(__dmul_rn(2.0, M_PI), u2)));
}

enum { RNG_TIMESTEP = 1, RNG_NOISE = 2 };  // core/rng.h's RNG_STREAM_TIMESTEP, _NOISE

__global__ void k_objective_t(float *t, const kernels_clip_key *clips, const int32_t *cu, int n_clips,
                              unsigned long long seed, unsigned long long step, kernels_t_dist td,
                              kcu_dev_error *err) {
  double mean = td.logit_mean, std = td.logit_std;
  long long shift_tokens = (long long)td.shift_tokens;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < n_clips; c += gridDim.x * blockDim.x) {
    kernels_clip_key k = clips[c];
    long long rows = (long long)cu[c + 1] - cu[c];
    if (k.first_token < 0 || k.first_token + rows > k.total_tokens)
      kcu_report(err, KCU_BAD_IDS, KCU_E_OBJECTIVE, k.first_token, c);
    kcu_rng_key key = {seed, step, (unsigned long long)k.clip_id, RNG_TIMESTEP};
    double z = kcu_rng_normal(key, (unsigned long long)k.t_index);
    double tt = 1.0 / __dadd_rn(1.0, exp(-__dadd_rn(mean, __dmul_rn(std, z))));
    if (shift_tokens > 0) {
      double s = fmax(1.0, sqrt((double)k.total_tokens / (double)shift_tokens));
      tt = __dmul_rn(s, tt) / __dadd_rn(1.0, __dmul_rn(s - 1.0, tt));
    }
    tt = fmin(1.0 - 1e-5, fmax(1e-5, tt));
    t[c] = (float)__dadd_rn(td.t_min, __dmul_rn(td.t_max - td.t_min, tt));
  }
}

// The clean value x0 of stored token value e (kernels.h objective_inputs): uint8 pixels
// mapped to [-1, 1], bf16 or f32 latents as they are.
__device__ __forceinline__ float kcu_token_x0(const void *tokens, int dtype, size_t e) {
  if (dtype == KERNELS_TOKENS_U8)
    return __fsub_rn(__fmul_rn((float)((const uint8_t *)tokens)[e], 2.0f / 255.0f), 1.0f);
  if (dtype == KERNELS_TOKENS_BF16)
    return __uint_as_float((unsigned)((const unsigned short *)tokens)[e] << 16);
  return ((const float *)tokens)[e];
}

__global__ void k_objective_x(act_t *x_t, act_t *target, const float *t, const void *tokens,
                              int tokens_dtype, const kernels_clip_key *clips, const int32_t *cu,
                              int n_clips, int L, int P, unsigned long long seed,
                              unsigned long long step) {
  KCU_GRID_STRIDE(e, (size_t)L * P) {
    int i = (int)(e / P), q = (int)(e % P);
    int c = kcu_clip_of(cu, n_clips, i);
    kcu_rng_key key = {seed, step, (unsigned long long)clips[c].clip_id, RNG_NOISE};
    unsigned long long j = (unsigned long long)(clips[c].first_token + (i - cu[c]));
    float tc = t[c];
    float x0 = kcu_token_x0(tokens, tokens_dtype, e);
    float ev = (float)kcu_rng_normal(key, j * (unsigned long long)P + (unsigned long long)q);
    kcu_st(x_t, e, __fadd_rn(__fmul_rn(__fsub_rn(1.0f, tc), x0), __fmul_rn(tc, ev)));
    kcu_st(target, e, __fsub_rn(ev, x0));
  }
}

tsr_status kcu_objective_inputs(kb_t *kb, float *t, void *x_t, void *target,
                                      const void *tokens, kernels_tokens tokens_dtype,
                                      const kernels_clip_key *clips,
                                      const int32_t *cu, int n_clips, int L, int P, uint64_t seed,
                                      uint64_t step, kernels_t_dist td) {
  const char *op = "objective_inputs";
  tsr_status st = kernels_check_objective_inputs(t, x_t, target, tokens, tokens_dtype, clips, cu,
                                                 n_clips, L, P);
  if (!st) st = kcu_check_cu(kb, op, KCU_E_OBJECTIVE, cu, n_clips, L);
  if (st || n_clips == 0) return st;
  k_objective_t<<<kcu_blocks((size_t)n_clips, 128), 128, 0, kcu(kb)->stream>>>(
      t, clips, cu, n_clips, seed, step, td, kcu(kb)->err);
  KCU_LAUNCHED(op);
  if (L == 0 || P == 0) return TSR_OK;
  size_t n = (size_t)L * P;
  k_objective_x<<<KCU_GRID(kb, n)>>>((act_t *)x_t, (act_t *)target, t, tokens, (int)tokens_dtype,
                                     clips, cu, n_clips, L, P, (unsigned long long)seed,
                                     (unsigned long long)step);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

__global__ void k_euler(float *x, const act_t *vc, const act_t *vu, float cfg, float dt, size_t n) {
  KCU_GRID_STRIDE(i, n) {
    float c = kcu_ld(vc, i);
    float v = vu ? __fadd_rn(kcu_ld(vu, i), __fmul_rn(cfg, __fsub_rn(c, kcu_ld(vu, i)))) : c;
    x[i] = __fadd_rn(x[i], __fmul_rn(dt, v));
  }
}

tsr_status kcu_euler_update(kb_t *kb, float *x, const void *v_cond, const void *v_uncond,
                                  float cfg, float dt, size_t n) {
  tsr_status st = kernels_check_euler_update(x, v_cond, n);
  if (st || n == 0) return st;
  k_euler<<<KCU_GRID(kb, n)>>>(x, (const act_t *)v_cond, (const act_t *)v_uncond, cfg, dt, n);
  KCU_LAUNCHED("euler_update");
  return TSR_OK;
}
