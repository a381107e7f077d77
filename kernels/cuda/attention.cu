// kernels/cuda/attention.cu — attention over packed variable-length clips: forward with
// log-sum-exp, backward from (dout, out, lse), and the ring forms (partial forward against
// one K/V block, exact LSE merge, delta, block backward from the final lse and delta).
//
// These are the backend's own straightforward kernels (fp32 CUDA cores, no tensor cores):
// correct for every shape the contract allows with Dh <= 256. The entries first offer the
// call to cuDNN's fused SDPA (attention_cudnn.cu: forward, backward, partial forward and
// partial backward, chosen per call by TESSERA_CUDA_ATTENTION and the shape, sdpa.h); what
// cuDNN does not take runs here, and attention_merge and attention_delta always do. The
// masked entries (block_causal, window) offer the call to cuDNN's pair list
// (attention_cudnn.h kcu_sdpa_masked_*) and launch their kernels gated behind it.
//
// Work items: a block takes 16 consecutive rows of the packed sequence (queries for the
// forward and dq, keys for dk/dv) of one head; a warp owns 4 of those rows. Rows of one
// block may belong to several clips: the block walks the union of their partners' range
// (keys of those clips for the forward; queries for dk/dv) in tiles of 32 staged in shared
// memory as fp32, and each row masks the partners of other clips. So these kernels need no
// per-clip bound (the entries' max_len sizes cuDNN's plans; here it is only checked) and
// no block is idle.
//
// Numerics: scores and the online softmax in fp32 (expf), lse = m + log(l) in fp32 as the
// CPU backend; P stays fp32 (not rounded to bf16), so the only bf16 roundings are the
// stores of out/dq/dk/dv — the test's standard bf16 tolerance applies.
// Masks (kernels.h kernels_mask; the masked entries): the same kernels with a per-score
// test of the query's and key's grid positions (pos_q, pos_k, read from global memory), the
// denied scores at -inf and their P and dS at 0 as on the CPU: exact for every mask kind, but
// a denied tile still costs its loads (no tile is skipped whole). They take the masked calls
// cuDNN's pair list does not (a window narrower than the frame, a layout out of order of
// t): then with a gate, a device int they read first (0: the pair list took the call, the
// kernel returns at once).
// Determinism: every output row has one owner (a warp) that sums its tiles in order: no
// atomics. The backward is two passes like the CPU's: dk/dv per key row, then dq per query
// row, each recomputing P from q, k and lse.
#include <math.h>

#include "kernels/check_attention.h"
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/kcu.h"

enum { AT_ROWS = 16, AT_WARPS = 4, AT_RPW = AT_ROWS / AT_WARPS, AT_TILE = 32, AT_NV = 8, AT_MAX_DH = 256 };

// Rows [r0, r1) of a block and the union [p0, p1) of their partners' ranges.
__device__ __forceinline__ void at_block_range(const int32_t *cu_rows, const int32_t *cu_part,
                                               int n_clips, int Lrows, int Lpart, int r0, int r1,
                                               int *p0, int *p1) {
  int c0 = kcu_clip_of(cu_rows, n_clips, r0), c1 = kcu_clip_of(cu_rows, n_clips, r1 - 1);
  int a = cu_part[c0], b = cu_part[c1 + 1];
  a = a < 0 ? 0 : (a > Lpart ? Lpart : a);
  b = b < a ? a : (b > Lpart ? Lpart : b);
  *p0 = a;
  *p1 = b;
}

// Partner range of row r (clamped).
__device__ __forceinline__ void at_row_range(const int32_t *cu_rows, const int32_t *cu_part,
                                             int n_clips, int Lpart, int r, int *p0, int *p1) {
  int c = kcu_clip_of(cu_rows, n_clips, r);
  int a = cu_part[c], b = cu_part[c + 1];
  a = a < 0 ? 0 : (a > Lpart ? Lpart : a);
  b = b < a ? a : (b > Lpart ? Lpart : b);
  *p0 = a;
  *p1 = b;
}

// Whether the mask lets query row i (positions pos_q) attend to key row j (pos_k): kernels.h
// kernels_mask, compared in the mask's coordinates (chunks, or tiles) as the CPU backend does.
__device__ __forceinline__ bool at_allow(const kernels_mask &m, const int32_t *pos_q, int i,
                                         const int32_t *pos_k, int j) {
  if (m.kind == KERNELS_MASK_FULL) return true;
  const int32_t *a = pos_q + 3 * (size_t)i, *b = pos_k + 3 * (size_t)j;
  if (m.kind == KERNELS_MASK_BLOCK_CAUSAL) {
    int cq = a[0] / m.chunk, ck = b[0] / m.chunk;
    return ck <= cq && (m.window == 0 || cq - ck <= m.window);
  }
  return abs(a[0] / m.tile_t - b[0] / m.tile_t) <= m.wt &&
         abs(a[1] / m.tile_h - b[1] / m.tile_h) <= m.wh &&
         abs(a[2] / m.tile_w - b[2] / m.tile_w) <= m.ww;
}

// Loads rows [t0, t0 + n) of head h of x (rows of H*Dh) into dst (AT_TILE rows of ld floats),
// zeros beyond n.
__device__ __forceinline__ void at_load_tile(float *dst, int ld, const act_t *x, int t0, int n, int h,
                                             int H, int Dh) {
  for (int e = threadIdx.x; e < AT_TILE * Dh; e += blockDim.x) {
    int r = e / Dh, d = e % Dh;
    dst[r * ld + d] = r < n ? kcu_ld(x, ((size_t)(t0 + r) * H + h) * Dh + d) : 0.0f;
  }
}

// ---- forward ------------------------------------------------------------------------------
// grid (ceil(Lq / 16), H), block 128. smem: Ks, Vs (32 x (Dh+1)), Qs (16 x Dh).
__global__ void __launch_bounds__(128) k_attn_fwd(act_t *out, float *lse, const act_t *q, const act_t *k,
                                                  const act_t *v, const int32_t *cu_q, const int32_t *cu_k,
                                                  const int32_t *pos_q, const int32_t *pos_k, kernels_mask mask,
                                                  int n_clips, int Lq, int Lk, int H, int Dh, float scale,
                                                  const int32_t *gate) {
  if (gate && *gate == 0) return;  // the cuDNN pair list took the call (attention_cudnn.h)
  extern __shared__ float sm[];
  const int ld = Dh + 1;
  float *Ks = sm, *Vs = Ks + AT_TILE * ld, *Qs = Vs + AT_TILE * ld;
  const int h = blockIdx.y, r0 = blockIdx.x * AT_ROWS, r1 = min(r0 + AT_ROWS, Lq);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  int k0, k1;
  at_block_range(cu_q, cu_k, n_clips, Lq, Lk, r0, r1, &k0, &k1);
  for (int e = threadIdx.x; e < AT_ROWS * Dh; e += blockDim.x) {
    int r = e / Dh, d = e % Dh;
    Qs[e] = r0 + r < r1 ? kcu_ld(q, ((size_t)(r0 + r) * H + h) * Dh + d) : 0.0f;
  }
  float m[AT_RPW], l[AT_RPW], o[AT_RPW][AT_NV];
  int kb[AT_RPW], ke[AT_RPW];
#pragma unroll
  for (int t = 0; t < AT_RPW; t++) {
    m[t] = -INFINITY;
    l[t] = 0.0f;
#pragma unroll
    for (int u = 0; u < AT_NV; u++) o[t][u] = 0.0f;
    int r = r0 + warp * AT_RPW + t;
    kb[t] = ke[t] = 0;
    if (r < r1) at_row_range(cu_q, cu_k, n_clips, Lk, r, &kb[t], &ke[t]);
  }
  for (int t0 = k0; t0 < k1; t0 += AT_TILE) {
    int n = min(AT_TILE, k1 - t0);
    __syncthreads();  // previous tile consumed
    at_load_tile(Ks, ld, k, t0, n, h, H, Dh);
    at_load_tile(Vs, ld, v, t0, n, h, H, Dh);
    __syncthreads();
#pragma unroll
    for (int t = 0; t < AT_RPW; t++) {
      if (ke[t] <= t0 || kb[t] >= t0 + n) continue;  // no key of this row's clip in the tile
      const float *qr = Qs + (warp * AT_RPW + t) * Dh;
      int j = t0 + lane;
      float s = -INFINITY;
      if (lane < n && j >= kb[t] && j < ke[t] && at_allow(mask, pos_q, r0 + warp * AT_RPW + t, pos_k, j)) {
        float acc = 0.0f;
        for (int d = 0; d < Dh; d++) acc += qr[d] * Ks[lane * ld + d];
        s = acc * scale;
      }
      float mx = fmaxf(m[t], kcu_warp_maxf(s));
      if (mx == -INFINITY) continue;  // masked: no key of the row allowed yet (warp-uniform)
      float corr = expf(m[t] - mx);  // m = -inf at first: 0
      float p = s == -INFINITY ? 0.0f : expf(s - mx);
      l[t] = l[t] * corr + kcu_warp_sumf(p);
      m[t] = mx;
#pragma unroll
      for (int u = 0; u < AT_NV; u++) o[t][u] *= corr;
      for (int jj = 0; jj < n; jj++) {
        float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
        for (int u = 0; u < AT_NV; u++) {
          int d = lane + 32 * u;
          if (d < Dh) o[t][u] += pj * Vs[jj * ld + d];
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < AT_RPW; t++) {
    int r = r0 + warp * AT_RPW + t;
    if (r >= r1) continue;
    float inv = l[t] > 0.0f ? 1.0f / l[t] : 0.0f;
    size_t base = ((size_t)r * H + h) * Dh;
#pragma unroll
    for (int u = 0; u < AT_NV; u++) {
      int d = lane + 32 * u;
      if (d < Dh) kcu_st(out, base + d, o[t][u] * inv);
    }
    if (lane == 0) lse[(size_t)r * H + h] = l[t] > 0.0f ? m[t] + logf(l[t]) : -INFINITY;
  }
}

// ---- backward, pass 1: dk, dv per key row --------------------------------------------------
// grid (ceil(Lk / 16), H), block 128. smem: Qt, dOt (32 x (Dh+1)), Kr, Vr (16 x Dh), lse, delta (32).
__global__ void __launch_bounds__(128) k_attn_bwd_kv(act_t *dk, act_t *dv, int accum, const act_t *dout,
                                                     const act_t *q, const act_t *k, const act_t *v,
                                                     const float *lse, const float *delta,
                                                     const int32_t *cu_q, const int32_t *cu_k,
                                                     const int32_t *pos_q, const int32_t *pos_k,
                                                     kernels_mask mask, int n_clips, int Lq, int Lk, int H,
                                                     int Dh, float scale, const int32_t *gate) {
  if (gate && *gate == 0) return;
  extern __shared__ float sm[];
  const int ld = Dh + 1;
  float *Qt = sm, *dOt = Qt + AT_TILE * ld, *Kr = dOt + AT_TILE * ld, *Vr = Kr + AT_ROWS * Dh;
  float *lse_t = Vr + AT_ROWS * Dh, *del_t = lse_t + AT_TILE;
  const int h = blockIdx.y, r0 = blockIdx.x * AT_ROWS, r1 = min(r0 + AT_ROWS, Lk);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  int q0, q1;
  at_block_range(cu_k, cu_q, n_clips, Lk, Lq, r0, r1, &q0, &q1);
  for (int e = threadIdx.x; e < AT_ROWS * Dh; e += blockDim.x) {
    int r = e / Dh, d = e % Dh;
    size_t o = ((size_t)(r0 + r) * H + h) * Dh + d;
    Kr[e] = r0 + r < r1 ? kcu_ld(k, o) : 0.0f;
    Vr[e] = r0 + r < r1 ? kcu_ld(v, o) : 0.0f;
  }
  float gk[AT_RPW][AT_NV], gv[AT_RPW][AT_NV];
  int qb[AT_RPW], qe[AT_RPW];
#pragma unroll
  for (int t = 0; t < AT_RPW; t++) {
#pragma unroll
    for (int u = 0; u < AT_NV; u++) gk[t][u] = gv[t][u] = 0.0f;
    int r = r0 + warp * AT_RPW + t;
    qb[t] = qe[t] = 0;
    if (r < r1) at_row_range(cu_k, cu_q, n_clips, Lq, r, &qb[t], &qe[t]);
  }
  for (int t0 = q0; t0 < q1; t0 += AT_TILE) {
    int n = min(AT_TILE, q1 - t0);
    __syncthreads();
    at_load_tile(Qt, ld, q, t0, n, h, H, Dh);
    at_load_tile(dOt, ld, dout, t0, n, h, H, Dh);
    if (threadIdx.x < AT_TILE) {
      int i = threadIdx.x;
      lse_t[i] = i < n ? lse[(size_t)(t0 + i) * H + h] : -INFINITY;
      del_t[i] = i < n ? delta[(size_t)(t0 + i) * H + h] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int t = 0; t < AT_RPW; t++) {
      if (qe[t] <= t0 || qb[t] >= t0 + n) continue;
      const float *kr = Kr + (warp * AT_RPW + t) * Dh, *vr = Vr + (warp * AT_RPW + t) * Dh;
      int i = t0 + lane;
      float p = 0.0f, ds = 0.0f;
      float li = lse_t[lane];
      if (lane < n && i >= qb[t] && i < qe[t] && isfinite(li) &&
          at_allow(mask, pos_q, i, pos_k, r0 + warp * AT_RPW + t)) {
        float s = 0.0f, dp = 0.0f;
        for (int d = 0; d < Dh; d++) {
          s += Qt[lane * ld + d] * kr[d];
          dp += dOt[lane * ld + d] * vr[d];
        }
        p = expf(s * scale - li);
        ds = p * (dp - del_t[lane]);
      }
      for (int ii = 0; ii < n; ii++) {
        float pi = __shfl_sync(0xffffffffu, p, ii), dsi = __shfl_sync(0xffffffffu, ds, ii);
#pragma unroll
        for (int u = 0; u < AT_NV; u++) {
          int d = lane + 32 * u;
          if (d < Dh) {
            gv[t][u] += pi * dOt[ii * ld + d];
            gk[t][u] += dsi * Qt[ii * ld + d];
          }
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < AT_RPW; t++) {
    int r = r0 + warp * AT_RPW + t;
    if (r >= r1) continue;
    size_t base = ((size_t)r * H + h) * Dh;
#pragma unroll
    for (int u = 0; u < AT_NV; u++) {
      int d = lane + 32 * u;
      if (d < Dh) {
        float ok = accum ? kcu_ld(dk, base + d) : 0.0f, ov = accum ? kcu_ld(dv, base + d) : 0.0f;
        kcu_st(dk, base + d, ok + scale * gk[t][u]);
        kcu_st(dv, base + d, ov + gv[t][u]);
      }
    }
  }
}

// ---- backward, pass 2: dq per query row ----------------------------------------------------
// grid (ceil(Lq / 16), H), block 128. smem: Ks, Vs (32 x (Dh+1)), Qs, dOs (16 x Dh).
__global__ void __launch_bounds__(128) k_attn_bwd_q(act_t *dq, int accum, const act_t *dout, const act_t *q,
                                                    const act_t *k, const act_t *v, const float *lse,
                                                    const float *delta, const int32_t *cu_q,
                                                    const int32_t *cu_k, const int32_t *pos_q,
                                                    const int32_t *pos_k, kernels_mask mask, int n_clips,
                                                    int Lq, int Lk, int H, int Dh, float scale,
                                                    const int32_t *gate) {
  if (gate && *gate == 0) return;
  extern __shared__ float sm[];
  const int ld = Dh + 1;
  float *Ks = sm, *Vs = Ks + AT_TILE * ld, *Qs = Vs + AT_TILE * ld, *dOs = Qs + AT_ROWS * Dh;
  const int h = blockIdx.y, r0 = blockIdx.x * AT_ROWS, r1 = min(r0 + AT_ROWS, Lq);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  int k0, k1;
  at_block_range(cu_q, cu_k, n_clips, Lq, Lk, r0, r1, &k0, &k1);
  for (int e = threadIdx.x; e < AT_ROWS * Dh; e += blockDim.x) {
    int r = e / Dh, d = e % Dh;
    size_t o = ((size_t)(r0 + r) * H + h) * Dh + d;
    Qs[e] = r0 + r < r1 ? kcu_ld(q, o) : 0.0f;
    dOs[e] = r0 + r < r1 ? kcu_ld(dout, o) : 0.0f;
  }
  float g[AT_RPW][AT_NV], li[AT_RPW], di[AT_RPW];
  int kb[AT_RPW], ke[AT_RPW];
#pragma unroll
  for (int t = 0; t < AT_RPW; t++) {
#pragma unroll
    for (int u = 0; u < AT_NV; u++) g[t][u] = 0.0f;
    int r = r0 + warp * AT_RPW + t;
    kb[t] = ke[t] = 0;
    li[t] = -INFINITY;
    di[t] = 0.0f;
    if (r < r1) {
      at_row_range(cu_q, cu_k, n_clips, Lk, r, &kb[t], &ke[t]);
      li[t] = lse[(size_t)r * H + h];
      di[t] = delta[(size_t)r * H + h];
      if (!isfinite(li[t])) ke[t] = kb[t];  // no key anywhere: contributes nothing
    }
  }
  for (int t0 = k0; t0 < k1; t0 += AT_TILE) {
    int n = min(AT_TILE, k1 - t0);
    __syncthreads();
    at_load_tile(Ks, ld, k, t0, n, h, H, Dh);
    at_load_tile(Vs, ld, v, t0, n, h, H, Dh);
    __syncthreads();
#pragma unroll
    for (int t = 0; t < AT_RPW; t++) {
      if (ke[t] <= t0 || kb[t] >= t0 + n) continue;
      const float *qr = Qs + (warp * AT_RPW + t) * Dh, *gr = dOs + (warp * AT_RPW + t) * Dh;
      int j = t0 + lane;
      float ds = 0.0f;
      if (lane < n && j >= kb[t] && j < ke[t] && at_allow(mask, pos_q, r0 + warp * AT_RPW + t, pos_k, j)) {
        float s = 0.0f, dp = 0.0f;
        for (int d = 0; d < Dh; d++) {
          s += qr[d] * Ks[lane * ld + d];
          dp += gr[d] * Vs[lane * ld + d];
        }
        float p = expf(s * scale - li[t]);
        ds = p * (dp - di[t]);
      }
      for (int jj = 0; jj < n; jj++) {
        float dsj = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
        for (int u = 0; u < AT_NV; u++) {
          int d = lane + 32 * u;
          if (d < Dh) g[t][u] += dsj * Ks[jj * ld + d];
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < AT_RPW; t++) {
    int r = r0 + warp * AT_RPW + t;
    if (r >= r1) continue;
    size_t base = ((size_t)r * H + h) * Dh;
#pragma unroll
    for (int u = 0; u < AT_NV; u++) {
      int d = lane + 32 * u;
      if (d < Dh) kcu_st(dq, base + d, (accum ? kcu_ld(dq, base + d) : 0.0f) + scale * g[t][u]);
    }
  }
}

// ---- merge, delta (one warp per (token, head) row) --------------------------------------------
__global__ void k_attn_merge(act_t *out_a, float *lse_a, const act_t *out_b, const float *lse_b,
                             size_t rows, int Dh) {
  int lane = threadIdx.x & 31;
  for (size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32; r < rows;
       r += (size_t)gridDim.x * blockDim.x / 32) {
  double la = lse_a[r], lb = lse_b[r];
  if (lb == -INFINITY) continue;
  act_t *oa = out_a + r * Dh;
  const act_t *ob = out_b + r * Dh;
  if (la == -INFINITY) {
    for (int d = lane; d < Dh; d += 32) oa[d] = ob[d];
    __syncwarp();
    if (lane == 0) lse_a[r] = lse_b[r];
    continue;
  }
  double mx = la > lb ? la : lb;
  double l = mx + log(exp(la - mx) + exp(lb - mx));
  float wa = (float)exp(la - l), wb = (float)exp(lb - l);
  for (int d = lane; d < Dh; d += 32) kcu_st(oa, d, wa * kcu_ld(oa, d) + wb * kcu_ld(ob, d));
  __syncwarp();
  if (lane == 0) lse_a[r] = (float)l;
  }
}

__global__ void k_attn_delta(float *delta, const act_t *dout, const act_t *out, size_t rows, int Dh) {
  int lane = threadIdx.x & 31;
  for (size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32; r < rows;
       r += (size_t)gridDim.x * blockDim.x / 32) {
    double s = 0.0;
    for (int d = lane; d < Dh; d += 32) s += (double)kcu_ld(dout, r * Dh + d) * (double)kcu_ld(out, r * Dh + d);
    s = kcu_warp_sum(s);
    if (lane == 0) delta[r] = (float)s;
  }
}

// ---- the clips' bound (kernels.h max_len) ------------------------------------------------
// Records KCU_BAD_LEN for a clip of cu_q longer than max_q or of cu_k (NULL: the same
// array as cu_q) longer than max_k. Lengths in 64 bits: a bad cu may hold any values.
__global__ void k_attn_check_len(kcu_dev_error *err, int entry, const int32_t *cu_q, int max_q,
                                 const int32_t *cu_k, int max_k, int n_clips) {
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < n_clips; c += gridDim.x * blockDim.x) {
    long long lq = (long long)cu_q[c + 1] - cu_q[c];
    if (lq > max_q) kcu_report(err, KCU_BAD_LEN, entry, lq, c);
    if (cu_k) {
      long long lk = (long long)cu_k[c + 1] - cu_k[c];
      if (lk > max_k) kcu_report(err, KCU_BAD_LEN, entry, lk, c);
    }
  }
}

// ---- host side ---------------------------------------------------------------------------
// What is the backend's own of an attention entry's checks, after those of
// kernels/check_attention.h: its limits, and the offsets and clip lengths, checked on the
// device (reported by the next sync).
static tsr_status check_attn(kb_t *kb, const char *op, int entry, const int32_t *cu_q,
                             const int32_t *cu_k, int n_clips, int max_q, int max_k, int Lq,
                             int Lk, int H, int Dh) {
  if (Dh > AT_MAX_DH)
    return err_set(TSR_EINVAL, "%s: head dimension %d: the CUDA attention kernels take Dh <= %d", op,
                   Dh, AT_MAX_DH);
  if (H > 65535) return err_set(TSR_EINVAL, "%s: %d heads exceed the grid limit 65535", op, H);
  tsr_status st = kcu_check_cu(kb, op, entry, cu_q, n_clips, Lq);
  if (!st && cu_k != cu_q) st = kcu_check_cu(kb, op, entry, cu_k, n_clips, Lk);
  if (st || n_clips == 0) return st;
  k_attn_check_len<<<kcu_blocks((size_t)n_clips, 256), 256, 0, kcu(kb)->stream>>>(
      kcu(kb)->err, entry, cu_q, max_q, cu_k != cu_q ? cu_k : NULL, max_k, n_clips);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

// Raises the kernel's dynamic shared-memory limit when it needs more than the default 48 KB.
static tsr_status set_smem(kb_t *kb, const char *op, const void *fn, size_t bytes) {
  if (bytes > kcu(kb)->smem_optin)
    return err_set(TSR_EINVAL, "%s: needs %zu bytes of shared memory, the device has %zu", op, bytes,
                   kcu(kb)->smem_optin);
  if (bytes > 48 * 1024)
    KCU_CUDA(op, cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  return TSR_OK;
}

// No mask: the unmasked entries' launches.
static const kernels_mask at_no_mask = {KERNELS_MASK_FULL, 0, 0, 0, 0, 0, 0, 0, 0};

static tsr_status launch_fwd(kb_t *kb, const char *op, void *out, float *lse, const void *q,
                             const void *k, const void *v, const int32_t *cu_q, const int32_t *cu_k,
                             const int32_t *pos_q, const int32_t *pos_k, kernels_mask mask,
                             int n_clips, int Lq, int Lk, int H, int Dh, float scale,
                             const int32_t *gate) {
  size_t smem = (2 * (size_t)AT_TILE * (Dh + 1) + (size_t)AT_ROWS * Dh) * sizeof(float);
  tsr_status st = set_smem(kb, op, (const void *)k_attn_fwd, smem);
  if (st) return st;
  dim3 grid((unsigned)((Lq + AT_ROWS - 1) / AT_ROWS), (unsigned)H);
  k_attn_fwd<<<grid, 32 * AT_WARPS, smem, kcu(kb)->stream>>>((act_t *)out, lse, (const act_t *)q,
                                                             (const act_t *)k, (const act_t *)v, cu_q,
                                                             cu_k, pos_q, pos_k, mask, n_clips, Lq, Lk,
                                                             H, Dh, scale, gate);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

// kernels.h path_stats: the call went to cuDNN (done) or to the own kernels.
static void count_path(kb_t *kb, int done) {
  kernels_path_stats *p = &kcu(kb)->paths;
  if (done) p->attention_library++;
  else p->attention_own++;
}

extern "C" tsr_status kcu_attention_partial_forward(kb_t *kb, void *out, float *lse, const void *q,
                                                    const void *k, const void *v, const int32_t *cu_q,
                                                    const int32_t *cu_k, int n_clips, int max_q,
                                                    int max_k, int Lq, int Lk, int H, int Dh,
                                                    float scale) {
  const char *op = "attention_partial_forward";
  tsr_status st = kernels_check_attention_partial_forward(out, lse, q, k, v, cu_q, cu_k, n_clips,
                                                          max_q, max_k, Lq, Lk, H, Dh, scale);
  if (!st) st = check_attn(kb, op, KCU_E_ATTN_F, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk, H, Dh);
  if (st || Lq == 0 || H == 0) return st;
  int done;
  st = kcu_sdpa_forward(kb, op, 1, &done, out, lse, q, k, v, cu_q, cu_k, n_clips, max_q, max_k, Lq,
                        Lk, H, Dh, scale);
  if (!st) count_path(kb, done);
  if (st || done) return st;
  return launch_fwd(kb, op, out, lse, q, k, v, cu_q, cu_k, NULL, NULL, at_no_mask, n_clips, Lq, Lk,
                    H, Dh, scale, NULL);
}

extern "C" tsr_status kcu_attention_forward(kb_t *kb, void *out, float *lse, const void *q, const void *k,
                                            const void *v, const int32_t *cu, int n_clips, int max_len,
                                            int L, int H, int Dh, float scale) {
  const char *op = "attention_forward";
  tsr_status st = kernels_check_attention_forward(out, lse, q, k, v, cu, n_clips, max_len, L, H, Dh,
                                                  scale);
  if (!st) st = check_attn(kb, op, KCU_E_ATTN_F, cu, cu, n_clips, max_len, max_len, L, L, H, Dh);
  if (st || L == 0 || H == 0) return st;
  int done;
  st = kcu_sdpa_forward(kb, op, 0, &done, out, lse, q, k, v, cu, cu, n_clips, max_len, max_len, L, L,
                        H, Dh, scale);
  if (!st) count_path(kb, done);
  if (st || done) return st;
  return launch_fwd(kb, op, out, lse, q, k, v, cu, cu, NULL, NULL, at_no_mask, n_clips, L, L, H, Dh,
                    scale, NULL);
}

extern "C" tsr_status kcu_attention_merge(kb_t *kb, void *out_a, float *lse_a, const void *out_b,
                                          const float *lse_b, int L, int H, int Dh) {
  const char *op = "attention_merge";
  tsr_status st = kernels_check_attention_merge(out_a, lse_a, out_b, lse_b, L, H, Dh);
  size_t rows = (size_t)L * H;
  if (st || rows == 0) return st;
  k_attn_merge<<<kcu_blocks(rows * 32, 256), 256, 0, kcu(kb)->stream>>>(
      (act_t *)out_a, lse_a, (const act_t *)out_b, lse_b, rows, Dh);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

static tsr_status launch_delta(kb_t *kb, const char *op, float *delta, const void *dout, const void *out,
                               size_t rows, int Dh) {
  k_attn_delta<<<kcu_blocks(rows * 32, 256), 256, 0, kcu(kb)->stream>>>(delta, (const act_t *)dout,
                                                                        (const act_t *)out, rows, Dh);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

extern "C" tsr_status kcu_attention_delta(kb_t *kb, float *delta, const void *dout, const void *out,
                                          int L, int H, int Dh) {
  const char *op = "attention_delta";
  tsr_status st = kernels_check_attention_delta(delta, dout, out, L, H, Dh);
  size_t rows = (size_t)L * H;
  if (st || rows == 0) return st;
  return launch_delta(kb, op, delta, dout, out, rows, Dh);
}

static tsr_status launch_bwd(kb_t *kb, const char *op, void *dq, void *dk, void *dv, int accum,
                             const void *dout, const void *q, const void *k, const void *v,
                             const float *lse, const float *delta, const int32_t *cu_q,
                             const int32_t *cu_k, const int32_t *pos_q, const int32_t *pos_k,
                             kernels_mask mask, int n_clips, int Lq, int Lk, int H, int Dh,
                             float scale, const int32_t *gate) {
  cudaStream_t s = kcu(kb)->stream;
  tsr_status st;
  if (dk && Lk > 0) {
    size_t smem = (2 * (size_t)AT_TILE * (Dh + 1) + 2 * (size_t)AT_ROWS * Dh + 2 * AT_TILE) * sizeof(float);
    if ((st = set_smem(kb, op, (const void *)k_attn_bwd_kv, smem))) return st;
    dim3 grid((unsigned)((Lk + AT_ROWS - 1) / AT_ROWS), (unsigned)H);
    k_attn_bwd_kv<<<grid, 32 * AT_WARPS, smem, s>>>(
        (act_t *)dk, (act_t *)dv, accum, (const act_t *)dout, (const act_t *)q, (const act_t *)k,
        (const act_t *)v, lse, delta, cu_q, cu_k, pos_q, pos_k, mask, n_clips, Lq, Lk, H, Dh, scale, gate);
    KCU_LAUNCHED(op);
  }
  if (dq && Lq > 0) {
    size_t smem = (2 * (size_t)AT_TILE * (Dh + 1) + 2 * (size_t)AT_ROWS * Dh) * sizeof(float);
    if ((st = set_smem(kb, op, (const void *)k_attn_bwd_q, smem))) return st;
    dim3 grid((unsigned)((Lq + AT_ROWS - 1) / AT_ROWS), (unsigned)H);
    k_attn_bwd_q<<<grid, 32 * AT_WARPS, smem, s>>>(
        (act_t *)dq, accum, (const act_t *)dout, (const act_t *)q, (const act_t *)k, (const act_t *)v,
        lse, delta, cu_q, cu_k, pos_q, pos_k, mask, n_clips, Lq, Lk, H, Dh, scale, gate);
    KCU_LAUNCHED(op);
  }
  return TSR_OK;
}

// A backward's own checks (check_attn; kernels/check_attention.h's are made first, by the
// entry) and *run = 0 where there is nothing to compute (the partial backward accumulates:
// nothing to add without queries or keys; the whole one has L = Lq = Lk).
static tsr_status backward_args(kb_t *kb, const char *op, int *run, const void *dq,
                                const void *dk, const int32_t *cu_q, const int32_t *cu_k,
                                int n_clips, int max_q, int max_k, int Lq, int Lk, int H, int Dh) {
  *run = 0;
  tsr_status st = check_attn(kb, op, KCU_E_ATTN_B, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk, H, Dh);
  if (st) return st;
  *run = H > 0 && Lq > 0 && Lk > 0 && (dq || dk);
  return TSR_OK;
}

// cuDNN's backward graph takes the final out (it derives delta itself), the own kernels take
// delta (entries.h: the two agree).
extern "C" tsr_status kcu_attention_partial_backward(kb_t *kb, void *dq, void *dk, void *dv,
                                                     const void *dout, const void *q, const void *k,
                                                     const void *v, const void *out, const float *lse,
                                                     const float *delta, const int32_t *cu_q,
                                                     const int32_t *cu_k, int n_clips, int max_q,
                                                     int max_k, int Lq, int Lk, int H, int Dh,
                                                     float scale) {
  const char *op = "attention_partial_backward";
  int run;
  tsr_status st = kernels_check_attention_partial_backward(dq, dk, dv, dout, q, k, v, out, lse,
                                                           delta, cu_q, cu_k, n_clips, max_q,
                                                           max_k, Lq, Lk, H, Dh, scale);
  if (!st) st = backward_args(kb, op, &run, dq, dk, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk, H, Dh);
  if (st || !run) return st;
  int done;
  st = kcu_sdpa_partial_backward(kb, op, &done, dq, dk, dv, dout, q, k, v, out, lse, cu_q, cu_k,
                                 n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
  if (!st) count_path(kb, done);
  if (st || done) return st;
  return launch_bwd(kb, op, dq, dk, dv, 1, dout, q, k, v, lse, delta, cu_q, cu_k, NULL, NULL,
                    at_no_mask, n_clips, Lq, Lk, H, Dh, scale, NULL);
}

// The whole-clip backward on the backend's own kernels: delta = rowsum(dout * out) into
// scratch, then dq, dk, dv overwritten (positions and mask as launch_bwd takes them).
static tsr_status own_backward(kb_t *kb, const char *op, void *dq, void *dk, void *dv,
                               const void *dout, const void *q, const void *k, const void *v,
                               const void *out, const float *lse, const int32_t *cu,
                               const int32_t *pos, kernels_mask mask, int n_clips, int L, int H,
                               int Dh, float scale) {
  size_t rows = (size_t)L * H;
  void *ws;
  tsr_status st;
  if ((st = kcu_scratch(kb, op, rows * sizeof(float), &ws))) return st;
  float *delta = (float *)ws;
  if ((st = launch_delta(kb, op, delta, dout, out, rows, Dh))) return st;
  return launch_bwd(kb, op, dq, dk, dv, 0, dout, q, k, v, lse, delta, cu, cu, pos, pos, mask,
                    n_clips, L, L, H, Dh, scale, NULL);
}

extern "C" tsr_status kcu_attention_backward(kb_t *kb, void *dq, void *dk, void *dv, const void *dout,
                                             const void *q, const void *k, const void *v, const void *out,
                                             const float *lse, const int32_t *cu, int n_clips,
                                             int max_len, int L, int H, int Dh, float scale) {
  const char *op = "attention_backward";
  int run;
  tsr_status st = kernels_check_attention_backward(dq, dk, dv, dout, q, k, v, out, lse, cu, n_clips,
                                                   max_len, L, H, Dh, scale);
  if (!st) st = backward_args(kb, op, &run, dq, dk, cu, cu, n_clips, max_len, max_len, L, L, H, Dh);
  if (st || !run) return st;
  int done;
  st = kcu_sdpa_backward(kb, op, &done, dq, dk, dv, dout, q, k, v, out, lse, cu, n_clips, max_len, L, H,
                         Dh, scale);
  if (!st) count_path(kb, done);
  if (st || done) return st;
  return own_backward(kb, op, dq, dk, dv, dout, q, k, v, out, lse, cu, NULL, at_no_mask,
                      n_clips, L, H, Dh, scale);
}

// ---- masked entries (kernels.h: the unmasked entries' results under FULL) ------------------
// Their mask's positions are the model's RoPE positions, not checked on the device (a
// negative one would only give another mask): kernels/check_attention.h checks the rest.
// Under FULL they are the unmasked entries, called after their own checks (so errors name
// them).

extern "C" tsr_status kcu_attention_masked_forward(kb_t *kb, void *out, float *lse, const void *q,
                                                   const void *k, const void *v, const int32_t *cu_q,
                                                   const int32_t *cu_k, const int32_t *pos_q,
                                                   const int32_t *pos_k, kernels_mask mask,
                                                   int n_clips, int max_q, int max_k, int Lq, int Lk,
                                                   int H, int Dh, float scale) {
  const char *op = "attention_masked_forward";
  tsr_status st = kernels_check_attention_masked_forward(out, lse, q, k, v, cu_q, cu_k, pos_q, pos_k,
                                                         &mask, n_clips, max_q, max_k, Lq, Lk, H,
                                                         Dh, scale);
  if (st) return st;
  if (mask.kind == KERNELS_MASK_FULL)
    return kcu_attention_partial_forward(kb, out, lse, q, k, v, cu_q, cu_k, n_clips, max_q, max_k,
                                         Lq, Lk, H, Dh, scale);
  st = check_attn(kb, op, KCU_E_ATTN_F, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk, H, Dh);
  if (st || Lq == 0 || H == 0) return st;
  // cuDNN on the pair list where it can take the call, the own kernels gated behind it
  // (they run only where the device found the layout or the window does not fit the list).
  int done;
  const int32_t *gate = NULL;
  st = kcu_sdpa_masked_forward(kb, op, &done, &gate, out, lse, q, k, v, cu_q, cu_k, pos_q, pos_k, mask,
                               n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
  if (st) return st;
  count_path(kb, done);
  return launch_fwd(kb, op, out, lse, q, k, v, cu_q, cu_k, pos_q, pos_k, mask, n_clips, Lq, Lk, H,
                    Dh, scale, gate);
}

extern "C" tsr_status kcu_attention_masked_backward(kb_t *kb, void *dq, void *dk, void *dv,
                                                    const void *dout, const void *q, const void *k,
                                                    const void *v, const void *out, const float *lse,
                                                    const int32_t *cu, const int32_t *pos,
                                                    kernels_mask mask, int n_clips, int max_len,
                                                    int L, int H, int Dh, float scale) {
  const char *op = "attention_masked_backward";
  tsr_status st = kernels_check_attention_masked_backward(dq, dk, dv, dout, q, k, v, out, lse, cu,
                                                          pos, &mask, n_clips, max_len, L, H, Dh,
                                                          scale);
  if (st) return st;
  if (mask.kind == KERNELS_MASK_FULL)
    return kcu_attention_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, cu, n_clips, max_len, L,
                                  H, Dh, scale);
  int run;
  st = backward_args(kb, op, &run, dq, dk, cu, cu, n_clips, max_len, max_len, L, L, H, Dh);
  if (st || !run) return st;
  int done;
  const int32_t *gate = NULL;
  float *delta_ws = NULL;
  st = kcu_sdpa_masked_backward(kb, op, 0, &done, &gate, &delta_ws, dq, dk, dv, dout, q, k, v, out, lse,
                                cu, cu, pos, pos, mask, n_clips, max_len, max_len, L, L, H, Dh, scale);
  if (st) return st;
  count_path(kb, done);
  if (!done) return own_backward(kb, op, dq, dk, dv, dout, q, k, v, out, lse, cu, pos, mask, n_clips, L,
                                 H, Dh, scale);
  // the gated fallback's delta lives in the pair list's scratch (own_backward's would reuse it)
  if ((st = launch_delta(kb, op, delta_ws, dout, out, (size_t)L * H, Dh))) return st;
  return launch_bwd(kb, op, dq, dk, dv, 0, dout, q, k, v, lse, delta_ws, cu, cu, pos, pos, mask,
                    n_clips, L, L, H, Dh, scale, gate);
}

extern "C" tsr_status kcu_attention_masked_partial_backward(
    kb_t *kb, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
    const void *v, const void *out, const float *lse, const float *delta, const int32_t *cu_q,
    const int32_t *cu_k, const int32_t *pos_q, const int32_t *pos_k, kernels_mask mask,
    int n_clips, int max_q, int max_k, int Lq, int Lk, int H, int Dh, float scale) {
  const char *op = "attention_masked_partial_backward";
  tsr_status st = kernels_check_attention_masked_partial_backward(
      dq, dk, dv, dout, q, k, v, out, lse, delta, cu_q, cu_k, pos_q, pos_k, &mask, n_clips, max_q,
      max_k, Lq, Lk, H, Dh, scale);
  if (st) return st;
  if (mask.kind == KERNELS_MASK_FULL)
    return kcu_attention_partial_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, delta, cu_q,
                                          cu_k, n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
  int run;
  st = backward_args(kb, op, &run, dq, dk, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk, H, Dh);
  if (st || !run) return st;
  int done;
  const int32_t *gate = NULL;
  float *delta_ws = NULL;
  st = kcu_sdpa_masked_backward(kb, op, 1, &done, &gate, &delta_ws, dq, dk, dv, dout, q, k, v, out, lse,
                                cu_q, cu_k, pos_q, pos_k, mask, n_clips, max_q, max_k, Lq, Lk, H, Dh,
                                scale);
  if (st) return st;
  count_path(kb, done);
  return launch_bwd(kb, op, dq, dk, dv, 1, dout, q, k, v, lse, delta, cu_q, cu_k, pos_q, pos_k, mask,
                    n_clips, Lq, Lk, H, Dh, scale, gate);
}
