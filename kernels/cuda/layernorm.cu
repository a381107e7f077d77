// kernels/cuda/layernorm.cu — LayerNorm (no affine), the adaLN entries (modulate, gate +
// residual) and their fusion (layernorm_modulate_*), forward and backward (mirrors
// kernels/cpu/layernorm.c, modulate.c and the LayerNorm half of fused.c).
//
// One pass over memory each: a warp per row, rows moved as 16-byte vectors of 8 bf16 when
// aligned (kcu_ldv; scalars otherwise), a row re-read from L1 for a second sweep, never
// from memory. Forward: a block holds FWD_ROWS consecutive rows and finds the clip of its
// first row once (the per-clip vectors of later rows by walking cu). Backward: a block
// holds up to KCU_TILE rows of one clip (kcu_tile_rows), each warp adds its rows' column
// products into its own shared row, the block sums its warps in warp order into a partial
// of that tile, and kcu_tile_colsum adds a clip's partials in tile order. Statistics and
// sums are fp32 in orders fixed by the shapes and cu alone (lane order, a butterfly, warp
// order, tile order), so results are bitwise the same run to run.
#include <math.h>

#include "kernels/check.h"
#include "kernels/cuda/kcu.h"

// ---- the row kernels --------------------------------------------------------------------
enum { ROW_THREADS = 256, ROW_WARPS = ROW_THREADS / 32, FWD_ROWS = 32 };

// LayerNorm of FWD_ROWS rows, then (MOD) the modulation of the normalised value in
// registers (LN's output is never stored): out = xhat (1 + scale[c]) + shift[c]. Mean and
// variance: fp32 sums over the lane's elements in order, then the butterfly (every lane
// gets the same bits); the variance from the row's second sweep (two-pass).
template <int VW, int MOD>
__device__ __forceinline__ void ln_fwd_rows(act_t *out, float *mean, float *rstd, const act_t *inp,
                                            const act_t *shift, const act_t *scale, int mstride,
                                            const int32_t *cu, int n_clips, int L, int D,
                                            float eps) {
  int r0 = blockIdx.x * FWD_ROWS, r1 = r0 + FWD_ROWS < L ? r0 + FWD_ROWS : L;
  int lane = threadIdx.x & 31, c = MOD ? kcu_block_first_clip(cu, n_clips, r0) : 0;
  for (int r = r0 + threadIdx.x / 32; r < r1; r += ROW_WARPS) {
    const act_t *x = inp + (size_t)r * D;
    float v[VW], s = 0.0f, ss = 0.0f;
    for (int j = lane * VW; j < D; j += 32 * VW) {
      kcu_ldv<VW>(x, j, v);
      for (int e = 0; e < VW; e++) s += v[e];
    }
    float mu = kcu_warp_sumf(s) / (float)D;
    for (int j = lane * VW; j < D; j += 32 * VW) {
      kcu_ldv<VW>(x, j, v);
      for (int e = 0; e < VW; e++) ss += (v[e] - mu) * (v[e] - mu);
    }
    float rs = 1.0f / sqrtf(kcu_warp_sumf(ss) / (float)D + eps);
    const act_t *sh = shift, *sc = scale;
    if (MOD) {
      c = kcu_clip_walk(cu, n_clips, c, r);
      sh += (size_t)c * mstride, sc += (size_t)c * mstride;
    }
    for (int j = lane * VW; j < D; j += 32 * VW) {
      float o[VW], a[VW], b[VW];
      kcu_ldv<VW>(x, j, v);
      if (MOD) kcu_ldv<VW>(sc, j, a), kcu_ldv<VW>(sh, j, b);
      for (int e = 0; e < VW; e++) {
        float xh = (v[e] - mu) * rs;
        o[e] = MOD ? xh * (1.0f + a[e]) + b[e] : xh;
      }
      kcu_stv<VW>(out, (size_t)r * D + j, o);
    }
    if (lane == 0) {
      if (mean) mean[r] = mu;
      if (rstd) rstd[r] = rs;
    }
  }
}
__global__ void __launch_bounds__(ROW_THREADS)
    k_ln_fwd_v8(act_t *out, float *mean, float *rstd, const act_t *inp, const act_t *shift,
                const act_t *scale, int mstride, const int32_t *cu, int n_clips, int L, int D,
                float eps) {
  if (shift)
    ln_fwd_rows<KCU_VEC, 1>(out, mean, rstd, inp, shift, scale, mstride, cu, n_clips, L, D, eps);
  else
    ln_fwd_rows<KCU_VEC, 0>(out, mean, rstd, inp, shift, scale, mstride, cu, n_clips, L, D, eps);
}
__global__ void __launch_bounds__(ROW_THREADS)
    k_ln_fwd_v1(act_t *out, float *mean, float *rstd, const act_t *inp, const act_t *shift,
                const act_t *scale, int mstride, const int32_t *cu, int n_clips, int L, int D,
                float eps) {
  if (shift) ln_fwd_rows<1, 1>(out, mean, rstd, inp, shift, scale, mstride, cu, n_clips, L, D, eps);
  else ln_fwd_rows<1, 0>(out, mean, rstd, inp, shift, scale, mstride, cu, n_clips, L, D, eps);
}

// Launches the LayerNorm (shift NULL) or LayerNorm + modulate forward over L rows.
static tsr_status ln_fwd_launch(kb_t *kb, const char *op, act_t *out, float *mean, float *rstd,
                                const act_t *inp, const act_t *shift, const act_t *scale,
                                int mstride, const int32_t *cu, int n_clips, int L, int D,
                                float eps) {
  const void *ptrs[] = {out, inp, shift, scale};
  int vec = kcu_vec_ok(D, shift ? mstride : 0, ptrs, 4);
  unsigned grid = (unsigned)(((long long)L + FWD_ROWS - 1) / FWD_ROWS);
  void (*fn)(act_t *, float *, float *, const act_t *, const act_t *, const act_t *, int,
             const int32_t *, int, int, int, float) = vec ? k_ln_fwd_v8 : k_ln_fwd_v1;
  fn<<<grid, ROW_THREADS, 0, kcu(kb)->stream>>>(
      out, mean, rstd, inp, shift, scale, mstride, cu, n_clips, L, D, eps);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

__global__ void k_layernorm_bwd(act_t *dinp, const act_t *dout, const act_t *inp, const float *mean,
                                const float *rstd, int L, int D) {
  KCU_WARP_ROW(i, L);
  const act_t *x = inp + (size_t)i * D, *g = dout + (size_t)i * D;
  float mu = mean[i], r = rstd[i];
  double sg = 0.0, sgx = 0.0;
  for (int j = lane; j < D; j += 32) {
    float gj = kcu_ld(g, j);
    sg += gj;
    sgx += (double)gj * ((kcu_ld(x, j) - mu) * r);
  }
  float mg = (float)(kcu_warp_sum(sg) / D), mgx = (float)(kcu_warp_sum(sgx) / D);
  for (int j = lane; j < D; j += 32)
    kcu_st(dinp, (size_t)i * D + j, r * (kcu_ld(g, j) - mg - (kcu_ld(x, j) - mu) * r * mgx));
  KCU_WARP_ROW_END
}

tsr_status kcu_layernorm_forward(kb_t *kb, void *out, float *mean, float *rstd, const void *inp,
                                       int L, int D, float eps) {
  const char *op = "layernorm_forward";
  tsr_status st = kernels_check_layernorm_forward(out, inp, L, D);
  if (st || L == 0) return st;
  return ln_fwd_launch(kb, op, (act_t *)out, mean, rstd, (const act_t *)inp, NULL, NULL, 0, NULL,
                       0, L, D, eps);
}

tsr_status kcu_layernorm_backward(kb_t *kb, void *dinp, const void *dout, const void *inp,
                                        const float *mean, const float *rstd, int L, int D) {
  const char *op = "layernorm_backward";
  tsr_status st = kernels_check_layernorm_backward(dinp, dout, inp, mean, rstd, L, D);
  if (st || L == 0 || D == 0 || !dinp) return st;
  k_layernorm_bwd<<<kcu_warp_blocks(L), 256, 0, kcu(kb)->stream>>>(
      (act_t *)dinp, (const act_t *)dout, (const act_t *)inp, mean, rstd, L, D);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

// ---- adaLN forward: modulate, gate + residual ---------------------------------------------
// FWD_ROWS rows a block, a warp per row: out = x (1 + v2[c]) + v1[c] (modulate: v1 shift,
// v2 scale) or out = res + v1[c] x (gate). out may be x or res (each element is read
// before the same thread stores it).
template <int VW, int GATE>
__device__ __forceinline__ void adaln_fwd_rows(act_t *out, const act_t *x, const act_t *res,
                                               const act_t *v1, const act_t *v2, int mstride,
                                               const int32_t *cu, int n_clips, int L, int D) {
  int r0 = blockIdx.x * FWD_ROWS, r1 = r0 + FWD_ROWS < L ? r0 + FWD_ROWS : L;
  int lane = threadIdx.x & 31, c = kcu_block_first_clip(cu, n_clips, r0);
  for (int r = r0 + threadIdx.x / 32; r < r1; r += ROW_WARPS) {
    c = kcu_clip_walk(cu, n_clips, c, r);
    const act_t *a1 = v1 + (size_t)c * mstride, *a2 = v2 + (size_t)c * mstride;
    size_t o = (size_t)r * D;
    for (int j = lane * VW; j < D; j += 32 * VW) {
      float xv[VW], p[VW], q[VW], y[VW];
      kcu_ldv<VW>(x, o + j, xv);
      kcu_ldv<VW>(a1, j, p);
      if (GATE) kcu_ldv<VW>(res, o + j, q);
      else kcu_ldv<VW>(a2, j, q);
      for (int e = 0; e < VW; e++) y[e] = GATE ? q[e] + p[e] * xv[e] : xv[e] * (1.0f + q[e]) + p[e];
      kcu_stv<VW>(out, o + j, y);
    }
  }
}
#define ADALN_FWD_ARGS                                                                      \
  act_t *out, const act_t *x, const act_t *res, const act_t *v1, const act_t *v2, int mstride, \
      const int32_t *cu, int n_clips, int L, int D
__global__ void __launch_bounds__(ROW_THREADS) k_modulate_fwd_v8(ADALN_FWD_ARGS) {
  adaln_fwd_rows<KCU_VEC, 0>(out, x, res, v1, v2, mstride, cu, n_clips, L, D);
}
__global__ void __launch_bounds__(ROW_THREADS) k_modulate_fwd_v1(ADALN_FWD_ARGS) {
  adaln_fwd_rows<1, 0>(out, x, res, v1, v2, mstride, cu, n_clips, L, D);
}
__global__ void __launch_bounds__(ROW_THREADS) k_gate_fwd_v8(ADALN_FWD_ARGS) {
  adaln_fwd_rows<KCU_VEC, 1>(out, x, res, v1, v2, mstride, cu, n_clips, L, D);
}
__global__ void __launch_bounds__(ROW_THREADS) k_gate_fwd_v1(ADALN_FWD_ARGS) {
  adaln_fwd_rows<1, 1>(out, x, res, v1, v2, mstride, cu, n_clips, L, D);
}

static tsr_status adaln_fwd_launch(kb_t *kb, const char *op, int gate, act_t *out, const act_t *x,
                                   const act_t *res, const act_t *v1, const act_t *v2, int mstride,
                                   const int32_t *cu, int n_clips, int L, int D) {
  const void *ptrs[] = {out, x, res, v1, v2};
  int vec = kcu_vec_ok(D, mstride, ptrs, 5);
  void (*fn)(ADALN_FWD_ARGS) = gate ? (vec ? k_gate_fwd_v8 : k_gate_fwd_v1)
                                    : (vec ? k_modulate_fwd_v8 : k_modulate_fwd_v1);
  unsigned grid = (unsigned)(((long long)L + FWD_ROWS - 1) / FWD_ROWS);
  fn<<<grid, ROW_THREADS, 0, kcu(kb)->stream>>>(out, x, res, v1, v2, mstride, cu, n_clips, L, D);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

// ---- adaLN backward: one pass, per-clip gradients as tile partials ---------------------------
// The three backward entries in one kernel body, on a tile of rows of one clip c:
//   BW_LN_MOD  g = dout (1 + scale[c]); dinp += LayerNorm'(g) (xhat from inp, mean, rstd);
//              A = sum dout (dshift), B = sum dout xhat (dscale)
//   BW_MOD     dinp = dout (1 + scale[c]);  A = sum dout, B = sum dout inp
//   BW_GATE    dinp = gate[c] dout;         B = sum dout inp (dgate)
// vec is scale (or gate). part (when not NULL): (tiles, 2D) fp32, row b = [A | B] of tile b.
// Each warp adds into its own rows of the dynamic shared (2, warps, D) fp32 array, every
// lane into its own columns, column j = s VW + e (vector slot s, element e) kept at
// e D/VW + s so that the 32 lanes' stores of one e are consecutive words (no bank
// conflicts); then the block sums its warps in warp order.
enum { BW_LN_MOD, BW_MOD, BW_GATE };
template <int VW, int KIND>
__device__ __forceinline__ void adaln_bwd_tile(act_t *dinp, float *part, const act_t *dout,
                                               const act_t *inp, const float *mean,
                                               const float *rstd, const act_t *vec, int mstride,
                                               const int *tiles, const int32_t *cu, int n_clips,
                                               int L, int D) {
  extern __shared__ float bw_acc[];
  __shared__ int tile[3];
  if (threadIdx.x == 0) {
    int c = 0, r0 = 0, r1 = 0;
    if (!kcu_tile_rows(tiles, cu, n_clips, L, blockIdx.x, &c, &r0, &r1)) r0 = r1 = 0;
    tile[0] = c, tile[1] = r0, tile[2] = r1;
  }
  __syncthreads();
  int c = tile[0], r0 = tile[1], r1 = tile[2];
  if (r0 >= r1) return;  // the whole block: past the last tile
  int W = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const act_t *v = vec ? vec + (size_t)c * mstride : NULL;  // NULL when dinp is
  float *accA = bw_acc + (size_t)warp * D, *accB = bw_acc + (size_t)(W + warp) * D;
  const int ns = D / VW;  // vector slots of a row (D is a multiple of VW)
  if (part)
    for (int j = lane * VW; j < D; j += 32 * VW)
      for (int e = 0; e < VW; e++) accA[e * ns + j / VW] = 0.0f, accB[e * ns + j / VW] = 0.0f;
  for (int r = r0 + warp; r < r1; r += W) {
    size_t o = (size_t)r * D;
    float mu = 0.0f, rs = 0.0f, mg = 0.0f, mgx = 0.0f;
    float d[VW], x[VW], a[VW], y[VW];
    if (KIND == BW_LN_MOD && inp) {  // inp, mean, rstd: NULL when only dshift is asked
      mu = mean[r], rs = rstd[r];
      if (dinp) {  // the row sums of LayerNorm's backward: the row's first sweep
        float sg = 0.0f, sgx = 0.0f;
        for (int j = lane * VW; j < D; j += 32 * VW) {
          kcu_ldv<VW>(dout, o + j, d);
          kcu_ldv<VW>(inp, o + j, x);
          kcu_ldv<VW>(v, j, a);
          for (int e = 0; e < VW; e++) {
            float g = d[e] * (1.0f + a[e]);
            sg += g;
            sgx += g * ((x[e] - mu) * rs);
          }
        }
        mg = kcu_warp_sumf(sg) / (float)D, mgx = kcu_warp_sumf(sgx) / (float)D;
      }
    }
    for (int j = lane * VW; j < D; j += 32 * VW) {
      kcu_ldv<VW>(dout, o + j, d);
      if (inp) kcu_ldv<VW>(inp, o + j, x);
      else
        for (int e = 0; e < VW; e++) x[e] = 0.0f;
      if (dinp) kcu_ldv<VW>(v, j, a);
      if (KIND == BW_LN_MOD && dinp) kcu_ldv<VW>(dinp, o + j, y);
      for (int e = 0; e < VW; e++) {
        float xh = KIND == BW_LN_MOD ? (x[e] - mu) * rs : x[e];
        if (dinp) {
          if (KIND == BW_LN_MOD) {
            float g = d[e] * (1.0f + a[e]);
            y[e] = y[e] + rs * (g - mg - xh * mgx);
          } else {
            y[e] = KIND == BW_GATE ? a[e] * d[e] : d[e] * (1.0f + a[e]);
          }
        }
        if (part) {
          if (KIND != BW_GATE) accA[e * ns + j / VW] += d[e];
          accB[e * ns + j / VW] += d[e] * xh;
        }
      }
      if (dinp) kcu_stv<VW>(dinp, o + j, y);
    }
  }
  if (!part) return;
  __syncthreads();
  float *p = part + (size_t)blockIdx.x * 2 * D;
  for (int j = threadIdx.x; j < D; j += blockDim.x) {
    int k = (j % VW) * ns + j / VW;  // where column j is kept
    float sa = 0.0f, sb = 0.0f;
    for (int w = 0; w < W; w++)
      sa += bw_acc[(size_t)w * D + k], sb += bw_acc[(size_t)(W + w) * D + k];
    p[j] = sa, p[D + j] = sb;
  }
}
#define ADALN_BWD_ARGS                                                                       \
  act_t *dinp, float *part, const act_t *dout, const act_t *inp, const float *mean,          \
      const float *rstd, const act_t *vec, int mstride, const int *tiles, const int32_t *cu, \
      int n_clips, int L, int D
#define ADALN_BWD_PASS dinp, part, dout, inp, mean, rstd, vec, mstride, tiles, cu, n_clips, L, D
__global__ void __launch_bounds__(ROW_THREADS) k_ln_mod_bwd_v8(ADALN_BWD_ARGS) {
  adaln_bwd_tile<KCU_VEC, BW_LN_MOD>(ADALN_BWD_PASS);
}
__global__ void __launch_bounds__(ROW_THREADS) k_ln_mod_bwd_v1(ADALN_BWD_ARGS) {
  adaln_bwd_tile<1, BW_LN_MOD>(ADALN_BWD_PASS);
}
__global__ void __launch_bounds__(ROW_THREADS) k_modulate_bwd_v8(ADALN_BWD_ARGS) {
  adaln_bwd_tile<KCU_VEC, BW_MOD>(ADALN_BWD_PASS);
}
__global__ void __launch_bounds__(ROW_THREADS) k_modulate_bwd_v1(ADALN_BWD_ARGS) {
  adaln_bwd_tile<1, BW_MOD>(ADALN_BWD_PASS);
}
__global__ void __launch_bounds__(ROW_THREADS) k_gate_bwd_v8(ADALN_BWD_ARGS) {
  adaln_bwd_tile<KCU_VEC, BW_GATE>(ADALN_BWD_PASS);
}
__global__ void __launch_bounds__(ROW_THREADS) k_gate_bwd_v1(ADALN_BWD_ARGS) {
  adaln_bwd_tile<1, BW_GATE>(ADALN_BWD_PASS);
}

// Shared memory of the backward's column sums: 2 W D fp32 for W warps; W is 8 while that
// fits 48 KiB (D <= 768), else as many as fit BW_SMEM (at least 1).
enum { BW_SMEM = 96 * 1024, BW_SMEM_MAX = 227 * 1024 };

// The backward of kind (BW_*) over L rows: the tile table, one pass, then the per-clip sums
// of the partials (dA: A, dB: B; either may be NULL; stride mstride).
static tsr_status adaln_bwd_launch(kb_t *kb, const char *op, int kind, act_t *dinp, act_t *dA,
                                   act_t *dB, const act_t *dout, const act_t *inp,
                                   const float *mean, const float *rstd, const act_t *vec,
                                   int mstride, const int32_t *cu, int n_clips, int L, int D) {
  if (n_clips == 0) return TSR_OK;  // no clip: no per-clip vector (cu's check reports L > 0)
  int sums = dA || dB;
  long long n_tiles = kcu_tiles_max(L, n_clips);
  if (n_tiles > 0x7fffffffLL) return err_set(TSR_EINVAL, "%s: L = %d rows are too many", op, L);
  int W = ROW_WARPS;
  size_t smem = 0;
  if (sums) {
    size_t row = 2 * (size_t)D * sizeof(float);
    if (W * row > 48 * 1024) W = (int)(BW_SMEM / row) < 1 ? 1 : (int)(BW_SMEM / row);
    if (W > ROW_WARPS) W = ROW_WARPS;
    smem = W * row;
    if (smem > BW_SMEM_MAX)
      return err_set(TSR_EINVAL, "%s: D = %d is too wide for the column sums' shared memory",
                     op, D);
  }
  size_t tiles_bytes = ((size_t)n_clips + 1) * sizeof(int);
  tiles_bytes = (tiles_bytes + 255) / 256 * 256;
  void *ws;
  tsr_status st = kcu_scratch(
      kb, op, tiles_bytes + (sums ? (size_t)n_tiles * 2 * D * sizeof(float) : 0), &ws);
  if (st) return st;
  int *tiles = (int *)ws;
  float *part = sums ? (float *)((char *)ws + tiles_bytes) : NULL;
  if ((st = kcu_tile_table(kb, op, tiles, cu, n_clips, L))) return st;
  if (L > 0) {
    const void *ptrs[] = {dinp, dout, inp, vec};
    int v8 = kcu_vec_ok(D, mstride, ptrs, 4);
    void (*fn)(ADALN_BWD_ARGS) =
        kind == BW_LN_MOD ? (v8 ? k_ln_mod_bwd_v8 : k_ln_mod_bwd_v1)
        : kind == BW_MOD  ? (v8 ? k_modulate_bwd_v8 : k_modulate_bwd_v1)
                          : (v8 ? k_gate_bwd_v8 : k_gate_bwd_v1);
    if (smem > 48 * 1024)
      KCU_CUDA(op,
               cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    fn<<<(unsigned)n_tiles, 32 * W, smem, kcu(kb)->stream>>>(dinp, part, dout, inp, mean, rstd, vec,
                                                            mstride, tiles, cu, n_clips, L, D);
    KCU_LAUNCHED(op);
  }  // no rows: no tile, and every clip's sum below is 0
  if (dA && (st = kcu_tile_colsum(kb, op, dA, mstride, part, 2 * D, tiles, n_tiles, n_clips, D)))
    return st;
  if (dB &&
      (st = kcu_tile_colsum(kb, op, dB, mstride, part + D, 2 * D, tiles, n_tiles, n_clips, D)))
    return st;
  return TSR_OK;
}

// After the entry's shared check (kernels/check.h): the values of cu, on the device.
static tsr_status check_cu(kb_t *kb, const char *op, tsr_status st, int entry, const int32_t *cu,
                           int n_clips, int L) {
  return st ? st : kcu_check_cu(kb, op, entry, cu, n_clips, L);
}

tsr_status kcu_modulate_forward(kb_t *kb, void *out, const void *inp, const void *shift,
                                      const void *scale, int mstride, const int32_t *cu,
                                      int n_clips, int L, int D) {
  const char *op = "modulate_forward";
  tsr_status st = check_cu(kb, op,
                           kernels_check_modulate_forward(out, inp, shift, scale, mstride, cu,
                                                          n_clips, L, D),
                           KCU_E_MODULATE_F, cu, n_clips, L);
  if (st || L == 0 || D == 0 || n_clips == 0) return st;
  return adaln_fwd_launch(kb, op, 0, (act_t *)out, (const act_t *)inp, NULL, (const act_t *)shift,
                          (const act_t *)scale, mstride, cu, n_clips, L, D);
}

tsr_status kcu_modulate_backward(kb_t *kb, void *dinp, void *dshift, void *dscale,
                                       const void *dout, const void *inp, const void *scale,
                                       int mstride, const int32_t *cu, int n_clips, int L, int D) {
  const char *op = "modulate_backward";
  tsr_status st = check_cu(kb, op,
                           kernels_check_modulate_backward(dinp, dshift, dscale, dout, inp, scale,
                                                           mstride, cu, n_clips, L, D),
                           KCU_E_MODULATE_B, cu, n_clips, L);
  if (st || D == 0) return st;
  return adaln_bwd_launch(kb, op, BW_MOD, (act_t *)dinp, (act_t *)dshift, (act_t *)dscale,
                          (const act_t *)dout, (const act_t *)inp, NULL, NULL, (const act_t *)scale,
                          mstride, cu, n_clips, L, D);
}

tsr_status kcu_gate_residual_forward(kb_t *kb, void *out, const void *res, const void *inp,
                                           const void *gate, int mstride, const int32_t *cu,
                                           int n_clips, int L, int D) {
  const char *op = "gate_residual_forward";
  tsr_status st = check_cu(kb, op,
                           kernels_check_gate_residual_forward(out, res, inp, gate, mstride, cu,
                                                               n_clips, L, D),
                           KCU_E_GATE_F, cu, n_clips, L);
  if (st || L == 0 || D == 0 || n_clips == 0) return st;
  return adaln_fwd_launch(kb, op, 1, (act_t *)out, (const act_t *)inp, (const act_t *)res,
                          (const act_t *)gate, NULL, mstride, cu, n_clips, L, D);
}

tsr_status kcu_gate_residual_backward(kb_t *kb, void *dinp, void *dgate, const void *dout,
                                            const void *inp, const void *gate, int mstride,
                                            const int32_t *cu, int n_clips, int L, int D) {
  const char *op = "gate_residual_backward";
  tsr_status st = check_cu(kb, op,
                           kernels_check_gate_residual_backward(dinp, dgate, dout, inp, gate,
                                                                mstride, cu, n_clips, L, D),
                           KCU_E_GATE_B, cu, n_clips, L);
  if (st || D == 0) return st;
  return adaln_bwd_launch(kb, op, BW_GATE, (act_t *)dinp, NULL, (act_t *)dgate,
                          (const act_t *)dout, (const act_t *)inp, NULL, NULL, (const act_t *)gate,
                          mstride, cu, n_clips, L, D);
}

// ---- fused: LayerNorm + modulate ---------------------------------------------------------
tsr_status kcu_layernorm_modulate_forward(kb_t *kb, void *out, float *mean, float *rstd,
                                                const void *inp, const void *shift,
                                                const void *scale, int mstride, const int32_t *cu,
                                                int n_clips, int L, int D, float eps) {
  const char *op = "layernorm_modulate_forward";
  tsr_status st = check_cu(kb, op,
                           kernels_check_layernorm_modulate_forward(out, mean, rstd, inp, shift,
                                                                    scale, mstride, cu, n_clips,
                                                                    L, D),
                           KCU_E_LN_MOD_F, cu, n_clips, L);
  if (st || L == 0) return st;
  if (n_clips == 0) return TSR_OK;
  return ln_fwd_launch(kb, op, (act_t *)out, mean, rstd, (const act_t *)inp, (const act_t *)shift,
                       (const act_t *)scale, mstride, cu, n_clips, L, D, eps);
}

tsr_status kcu_layernorm_modulate_backward(kb_t *kb, void *dinp, void *dshift, void *dscale,
                                                 const void *dout, const void *inp,
                                                 const float *mean, const float *rstd,
                                                 const void *scale, int mstride, const int32_t *cu,
                                                 int n_clips, int L, int D) {
  const char *op = "layernorm_modulate_backward";
  tsr_status st = check_cu(kb, op,
                           kernels_check_layernorm_modulate_backward(dinp, dscale, dout,
                                                                     inp, mean, rstd, scale,
                                                                     mstride, cu, n_clips, L, D),
                           KCU_E_LN_MOD_B, cu, n_clips, L);
  if (st || D == 0) return st;
  return adaln_bwd_launch(kb, op, BW_LN_MOD, (act_t *)dinp, (act_t *)dshift, (act_t *)dscale,
                          (const act_t *)dout, (const act_t *)inp, mean, rstd, (const act_t *)scale,
                          mstride, cu, n_clips, L, D);
}
