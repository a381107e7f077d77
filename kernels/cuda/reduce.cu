// kernels/cuda/reduce.cu — every reduction of the CUDA backend that must not depend on
// scheduling: the deterministic column sums (kcu_colsum: bias and norm-weight gradients,
// fp32 partials of fixed row slices), the tile table and tile sums of the adaLN gradients
// (kcu_tile_table, kcu_tile_colsum; layernorm.cu makes the partials), the MSE loss and its
// backward, and the gradients' sum of squares (sumsq, the one host synchronisation of a
// step). Mirrors kernels/cpu/reduce.c and loss.c (the CPU keeps sumsq beside AdamW in
// adamw.c; here it shares the block sum below).
//
// Determinism: no float atomics. Each sum covers fixed slices (a function of the shapes
// only), added in slice order with fixed shuffle or shared-memory trees, so results are
// bitwise reproducible on the same GPU model for the same inputs.
#include "kernels/check.h"
#include "kernels/cuda/kcu.h"

// ---- deterministic column sums ----------------------------------------------------------
// grid (column chunks of 32 VW, S slices of the rows), block (32, CS_LANES): thread x owns
// the VW columns from (chunk 32 + x) VW, lane y the rows y, y + CS_LANES, ... of the slice;
// the lanes are summed in order, each slice's sums go to part[slice] (fp32), and
// k_colsum_final adds the slices in order to out. 16-byte vectors when aligned.
enum { CS_LANES = 8, CS_SLICE_ROWS = 256, CS_MAX_SLICES = 1024 };

template <int VW>
__device__ __forceinline__ void colsum_slice(float *part, const act_t *a, const act_t *b,
                                             const float *rs, int rows, int cols, int S) {
  extern __shared__ float cs_sh[];  // (CS_LANES, 32 VW)
  int y = blockIdx.y, j0 = (blockIdx.x * 32 + threadIdx.x) * VW;
  long long r0 = (long long)rows * y / S, r1 = (long long)rows * (y + 1) / S;
  float acc[VW];
  for (int e = 0; e < VW; e++) acc[e] = 0.0f;
  if (j0 < cols)
    for (long long r = r0 + threadIdx.y; r < r1; r += CS_LANES) {
      float va[VW], vb[VW];
      kcu_ldv<VW>(a, (size_t)r * cols + j0, va);
      if (b) kcu_ldv<VW>(b, (size_t)r * cols + j0, vb);
      float f = rs ? rs[r] : 1.0f;
      for (int e = 0; e < VW; e++) acc[e] += b ? va[e] * vb[e] * f : (rs ? va[e] * f : va[e]);
    }
  float *mine = cs_sh + (size_t)threadIdx.y * 32 * VW + threadIdx.x * VW;
  for (int e = 0; e < VW; e++) mine[e] = acc[e];
  __syncthreads();
  if (threadIdx.y == 0 && j0 < cols)
    for (int e = 0; e < VW; e++) {
      float t = 0.0f;
      for (int l = 0; l < CS_LANES; l++) t += cs_sh[(size_t)l * 32 * VW + threadIdx.x * VW + e];
      part[(size_t)y * cols + j0 + e] = t;
    }
}
__global__ void k_colsum_v8(float *part, const act_t *a, const act_t *b, const float *rs, int rows,
                            int cols, int S) {
  colsum_slice<KCU_VEC>(part, a, b, rs, rows, cols, S);
}
__global__ void k_colsum_v1(float *part, const act_t *a, const act_t *b, const float *rs, int rows,
                            int cols, int S) {
  colsum_slice<1>(part, a, b, rs, rows, cols, S);
}

__global__ void k_colsum_final(float *out, const float *part, int cols, int S) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += gridDim.x * blockDim.x) {
    float t = 0.0f;
    for (int y = 0; y < S; y++) t += part[(size_t)y * cols + j];
    out[j] += t;
  }
}

tsr_status kcu_colsum(kb_t *kb, const char *op, float *out, const act_t *a, const act_t *b,
                      const float *rs, int rows, int cols) {
  if (cols <= 0) return TSR_OK;
  // Slices of about CS_SLICE_ROWS rows, 1..CS_MAX_SLICES: a function of the shapes only,
  // so the summation order is fixed for given shapes.
  int S = rows / CS_SLICE_ROWS;
  S = S < 1 ? 1 : (S > CS_MAX_SLICES ? CS_MAX_SLICES : S);
  void *ws;
  tsr_status st = kcu_scratch(kb, op, (size_t)S * cols * sizeof(float), &ws);
  if (st) return st;
  const void *ptrs[] = {a, b};
  int vec = kcu_vec_ok(cols, 0, ptrs, 2), vw = vec ? KCU_VEC : 1;
  void (*fn)(float *, const act_t *, const act_t *, const float *, int, int, int) =
      vec ? k_colsum_v8 : k_colsum_v1;
  dim3 grid((unsigned)((cols + 32 * vw - 1) / (32 * vw)), (unsigned)S);
  fn<<<grid, dim3(32, CS_LANES), (size_t)CS_LANES * 32 * vw * sizeof(float), kcu(kb)->stream>>>(
      (float *)ws, a, b, rs, rows, cols, S);
  KCU_LAUNCHED(op);
  k_colsum_final<<<KCU_GRID(kb, (size_t)cols)>>>(out, (const float *)ws, cols, S);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

// ---- row tiles of one clip (kcu.h kcu_tile_rows) ------------------------------------------
enum { TT_THREADS = 1024 };

// One block: thread t counts the tiles of its run of clips, a fixed scan over the threads
// gives each run's first tile (integers: exact in any order).
__global__ void k_tile_table(int *tiles, const int32_t *cu, int n_clips, int L) {
  __shared__ int sh[TT_THREADS];
  int per = (n_clips + TT_THREADS - 1) / TT_THREADS, t = threadIdx.x;
  int c0 = t * per < n_clips ? t * per : n_clips, c1 = c0 + per < n_clips ? c0 + per : n_clips;
  int n = 0;
  for (int c = c0; c < c1; c++) {
    int a = cu[c] < 0 ? 0 : (cu[c] > L ? L : cu[c]);
    int e = cu[c + 1] < a ? a : (cu[c + 1] > L ? L : cu[c + 1]);
    n += (e - a + KCU_TILE - 1) / KCU_TILE;
  }
  sh[t] = n;
  __syncthreads();
  for (int o = 1; o < TT_THREADS; o <<= 1) {  // inclusive scan
    int v = t >= o ? sh[t - o] : 0;
    __syncthreads();
    sh[t] += v;
    __syncthreads();
  }
  int first = sh[t] - n;
  for (int c = c0; c < c1; c++) {
    tiles[c] = first;
    int a = cu[c] < 0 ? 0 : (cu[c] > L ? L : cu[c]);
    int e = cu[c + 1] < a ? a : (cu[c + 1] > L ? L : cu[c + 1]);
    first += (e - a + KCU_TILE - 1) / KCU_TILE;
  }
  if (t == 0) tiles[n_clips] = sh[TT_THREADS - 1];
}

tsr_status kcu_tile_table(kb_t *kb, const char *op, int *tiles, const int32_t *cu, int n_clips,
                          int L) {
  k_tile_table<<<1, TT_THREADS, 0, kcu(kb)->stream>>>(tiles, cu, n_clips, L);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

// Thread per (clip, column): the clip's tiles in order (a tile past n_tiles, possible only
// for a cu the check reports, is skipped).
__global__ void k_tile_colsum(act_t *out, int ostride, const float *part, int pstride,
                              const int *tiles, int n_tiles, int n_clips, int D) {
  int n = n_clips * D;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    int c = i / D, j = i - c * D;
    int t0 = tiles[c], t1 = tiles[c + 1] < n_tiles ? tiles[c + 1] : n_tiles;
    float s = 0.0f;
    for (int t = t0; t < t1; t++) s += part[(size_t)t * pstride + j];
    kcu_st(out, (size_t)c * ostride + j, s);
  }
}

tsr_status kcu_tile_colsum(kb_t *kb, const char *op, act_t *out, int ostride, const float *part,
                           int pstride, const int *tiles, long long n_tiles, int n_clips, int D) {
  long long n = (long long)n_clips * D;
  if (n == 0) return TSR_OK;
  if (n > 0x3fffffffLL || n_tiles > 0x7fffffffLL)
    return err_set(TSR_EINVAL, "%s: %d clips of %d columns are too many", op, n_clips, D);
  k_tile_colsum<<<KCU_GRID(kb, (size_t)n)>>>(out, ostride, part, pstride, tiles, (int)n_tiles,
                                            n_clips, D);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

// ---- loss ------------------------------------------------------------------------------
enum { RED_THREADS = 256 };

// Fixed-tree block sum of one double per thread (RED_THREADS threads).
__device__ double kcu_block_sum(double v) {
  __shared__ double sh[RED_THREADS];
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int o = RED_THREADS / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads();
  return r;
}

// grid (S, n_clips): slice y of clip c's elements [cu[c] D, cu[c+1] D): sum of squared
// differences in double -> part[c * S + y].
__global__ void k_mse_part(double *part, const act_t *pred, const act_t *target, const int32_t *cu,
                           int L, int D, int S) {
  int c = blockIdx.y, y = blockIdx.x;
  long long r0 = cu[c], r1 = cu[c + 1];
  r0 = r0 < 0 ? 0 : (r0 > L ? L : r0);
  r1 = r1 < r0 ? r0 : (r1 > L ? L : r1);
  long long e0 = r0 * D, len = (r1 - r0) * D, a0 = e0 + len * y / S, a1 = e0 + len * (y + 1) / S;
  double s = 0.0;
  for (long long e = a0 + threadIdx.x; e < a1; e += RED_THREADS) {
    double d = (double)kcu_ld(pred, e) - (double)kcu_ld(target, e);
    s += d * d;
  }
  s = kcu_block_sum(s);
  if (threadIdx.x == 0) part[(size_t)c * S + y] = s;
}

// One block: sse[c] = sum of the clip's slices in order; loss = sum_c weight[c] sse[c] in
// order of c (double).
__global__ void k_mse_final(float *loss, float *sse, double *sse_d, const double *part,
                            const float *weight, int n_clips, int S) {
  for (int c = threadIdx.x; c < n_clips; c += blockDim.x) {
    double s = 0.0;
    for (int y = 0; y < S; y++) s += part[(size_t)c * S + y];
    sse_d[c] = s;
    if (sse) sse[c] = (float)s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int c = 0; c < n_clips; c++) total += (double)weight[c] * sse_d[c];
    loss[0] = (float)total;
  }
}

tsr_status kcu_mse_forward(kb_t *kb, float *loss, float *sse, const void *pred,
                                 const void *target, const float *weight, const int32_t *cu,
                                 int n_clips, int L, int D) {
  const char *op = "mse_forward";
  tsr_status st = kernels_check_mse_forward(loss, pred, target, weight, cu, n_clips, L, D);
  if (!st) st = kcu_check_cu(kb, op, KCU_E_MSE_F, cu, n_clips, L);
  if (st) return st;
  if (n_clips == 0) {
    KCU_CUDA(op, cudaMemsetAsync(loss, 0, sizeof(float), kcu(kb)->stream));
    return TSR_OK;
  }
  if (n_clips > 65535) return err_set(TSR_EINVAL, "%s: %d clips exceed 65535", op, n_clips);
  long long avg = (long long)L * D / n_clips;
  int S = (int)(avg / 8192);
  S = S < 1 ? 1 : (S > 64 ? 64 : S);
  void *ws;
  if ((st = kcu_scratch(kb, op, ((size_t)n_clips * S + n_clips) * sizeof(double), &ws))) return st;
  double *part = (double *)ws, *sse_d = part + (size_t)n_clips * S;
  k_mse_part<<<dim3((unsigned)S, (unsigned)n_clips), RED_THREADS, 0, kcu(kb)->stream>>>(
      part, (const act_t *)pred, (const act_t *)target, cu, L, D, S);
  KCU_LAUNCHED(op);
  k_mse_final<<<1, 256, 0, kcu(kb)->stream>>>(loss, sse, sse_d, part, weight, n_clips, S);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

// MSE_ROWS rows a block, a warp per row (16-byte vectors when aligned), the clip found once
// per block: dpred = 2 weight[c] (pred - target).
enum { MSE_ROWS = 32, MSE_THREADS = 256 };
template <int VW>
__device__ __forceinline__ void mse_bwd_rows(act_t *dpred, const act_t *pred, const act_t *target,
                                             const float *weight, const int32_t *cu, int n_clips,
                                             int L, int D) {
  int r0 = blockIdx.x * MSE_ROWS, r1 = r0 + MSE_ROWS < L ? r0 + MSE_ROWS : L;
  int lane = threadIdx.x & 31, c = kcu_block_first_clip(cu, n_clips, r0);
  for (int r = r0 + threadIdx.x / 32; r < r1; r += MSE_THREADS / 32) {
    c = kcu_clip_walk(cu, n_clips, c, r);
    float w2 = 2.0f * weight[c];
    size_t o = (size_t)r * D;
    for (int j = lane * VW; j < D; j += 32 * VW) {
      float p[VW], t[VW];
      kcu_ldv<VW>(pred, o + j, p);
      kcu_ldv<VW>(target, o + j, t);
      for (int e = 0; e < VW; e++) p[e] = w2 * (p[e] - t[e]);
      kcu_stv<VW>(dpred, o + j, p);
    }
  }
}
__global__ void __launch_bounds__(MSE_THREADS)
    k_mse_bwd_v8(act_t *dpred, const act_t *pred, const act_t *target, const float *weight,
                 const int32_t *cu, int n_clips, int L, int D) {
  mse_bwd_rows<KCU_VEC>(dpred, pred, target, weight, cu, n_clips, L, D);
}
__global__ void __launch_bounds__(MSE_THREADS)
    k_mse_bwd_v1(act_t *dpred, const act_t *pred, const act_t *target, const float *weight,
                 const int32_t *cu, int n_clips, int L, int D) {
  mse_bwd_rows<1>(dpred, pred, target, weight, cu, n_clips, L, D);
}

tsr_status kcu_mse_backward(kb_t *kb, void *dpred, const void *pred, const void *target,
                                  const float *weight, const int32_t *cu, int n_clips, int L, int D) {
  const char *op = "mse_backward";
  tsr_status st = kernels_check_mse_backward(dpred, pred, target, weight, cu, n_clips, L, D);
  if (!st) st = kcu_check_cu(kb, op, KCU_E_MSE_B, cu, n_clips, L);
  if (st || L == 0 || D == 0) return st;
  if (n_clips == 0) return TSR_OK;  // cu's check reports L > 0
  const void *ptrs[] = {dpred, pred, target};
  void (*fn)(act_t *, const act_t *, const act_t *, const float *, const int32_t *, int, int, int) =
      kcu_vec_ok(D, 0, ptrs, 3) ? k_mse_bwd_v8 : k_mse_bwd_v1;
  unsigned grid = (unsigned)(((long long)L + MSE_ROWS - 1) / MSE_ROWS);
  fn<<<grid, MSE_THREADS, 0, kcu(kb)->stream>>>((act_t *)dpred, (const act_t *)pred,
                                                (const act_t *)target, weight, cu, n_clips, L, D);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

// ---- optimizer -------------------------------------------------------------------------
enum { SUM_BLOCK = 8192 };

__global__ void k_sumsq_part(double *part, const float *x, size_t n) {
  size_t i0 = (size_t)blockIdx.x * SUM_BLOCK, i1 = i0 + SUM_BLOCK < n ? i0 + SUM_BLOCK : n;
  double s = 0.0;
  for (size_t i = i0 + threadIdx.x; i < i1; i += RED_THREADS) s += (double)x[i] * (double)x[i];
  s = kcu_block_sum(s);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}
__global__ void k_sum_parts(double *out, const double *part, size_t nb) {
  double s = 0.0;
  for (size_t i = threadIdx.x; i < nb; i += RED_THREADS) s += part[i];
  s = kcu_block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

// The one host synchronisation of a step: the trainer needs the value to clip.
tsr_status kcu_sumsq(kb_t *kb, double *result_host, const float *x, size_t n) {
  const char *op = "sumsq";
  tsr_status st = kernels_check_sumsq(result_host, x, n);
  if (st) return st;
  KCU_NOT_RECORDING(kb, op);
  *result_host = 0.0;
  if (n == 0) return TSR_OK;
  size_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
  if (nb > 0x7fffffffu) return err_set(TSR_EINVAL, "%s: %zu elements are too many", op, n);
  void *ws;
  st = kcu_scratch(kb, op, (nb + 1) * sizeof(double), &ws);
  if (st) return st;
  double *part = (double *)ws, *res = part + nb;
  cudaStream_t s = kcu(kb)->stream;
  k_sumsq_part<<<(unsigned)nb, RED_THREADS, 0, s>>>(part, x, n);
  KCU_LAUNCHED(op);
  k_sum_parts<<<1, RED_THREADS, 0, s>>>(res, part, nb);
  KCU_LAUNCHED(op);
  KCU_CUDA(op, cudaMemcpyAsync(result_host, res, sizeof(double), cudaMemcpyDeviceToHost, s));
  return kcu_check_error(kb, op);  // synchronises
}
