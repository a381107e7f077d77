// kernels/cuda/kcu.h — private to the CUDA backend: the context, error helpers, the device
// helpers every .cu file shares (bf16 loads and stores, 16-byte vectors of them, warp sums,
// grid-stride loops and their launch configuration, a row's clip, row tiles of one clip),
// and what one file of the backend provides to another: the op families' table fillers,
// the column sums and tile sums, the GEMM, attention and graph entries.
//
// Conventions of every entry (kernels.h): arguments are checked on the host (NULL pointers,
// negative sizes; first the checks both backends share, kernels/check.h kernels_check_*)
// and return TSR_EINVAL with "entry: what"; CUDA/cuBLASLt failures return
// TSR_EIO (TSR_ENOMEM for out-of-memory) with "entry: call: CUDA error string". Index
// arrays live on the device and are not read by the host; the kernels clamp every index
// they read so a bad array cannot make them access memory out of bounds, and they record
// the first bad value in a device error word that `sync` (and `sumsq`, which syncs)
// reports (see kcu_check_error): errors from index arrays therefore surface at the next
// sync, not at the entry's return.
#ifndef TESSERA_KERNELS_CUDA_KCU_H
#define TESSERA_KERNELS_CUDA_KCU_H

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

extern "C" {
#include "core/err.h"
#include "kernels/arena.h"
#include "kernels/kernels.h"
}

typedef const kernels_backend kb_t;
typedef __nv_bfloat16 act_t;  // the act dtype of this backend

// Device error word: the first kernel that finds a bad index writes its code here
// (atomicCAS from 0, so the first one wins), with the offending value.
enum {
  KCU_BAD_NONE = 0,
  KCU_BAD_CU = 1,       // cu_seqlens (or cu_q/cu_k) not 0-based, decreasing or not ending at L
  KCU_BAD_IDS = 2,      // embedding id outside [0, V)
  KCU_BAD_SEGS = 3,     // adamw_update_multi's segment table: out of order, overlapping,
                        // outside [0, n) or a decay flag other than 0/1
  KCU_BAD_LEN = 4,      // an attention clip longer than the entry's max_len / max_q / max_k
                        // (value: its length, where: the clip)
};
struct kcu_dev_error {
  int code;   // KCU_BAD_*
  int entry;  // index into kcu_entry_names
  long long value, where;
};

struct kcu_plan_cache;  // gemm.cu: cuBLASLt plans by shape

// The backend state (kb->ctx). Memory: ONE device allocation per run, the arena (made by
// kcu_arena_ready at the first alloc/reserve; kernels.h says how it is sized); alloc/free
// suballocate from it (kernels/arena.h keeps the books), and so do the backend's own
// buffers: the cuBLASLt workspace (carved when the arena is made) and the scratch of
// kcu_scratch. After the arena exists nothing calls cudaMalloc. The device error word (a
// few bytes) is allocated when the backend is created, before any arena.
struct kcu_ctx {
  int device;
  cudaStream_t stream;
  cublasLtHandle_t lt;
  void *lt_ws;         // cuBLASLt workspace (in the arena)
  size_t lt_ws_bytes;
  void *scratch;       // reduction partials etc. (kcu_scratch; in the arena)
  size_t scratch_bytes;
  kcu_dev_error *err;  // device error word (device memory)
  int sms;             // multiprocessors
  size_t smem_optin;   // largest dynamic shared memory per block
  void *sdpa;          // cuDNN attention state (attention_cudnn.cu), created on first use
  char *arena_base;    // the run's one device allocation (NULL until kcu_arena_ready)
  kernels_arena *arena;
  int per_alloc;       // TESSERA_CUDA_ARENA=none: cudaMalloc per allocation, for
                       // compute-sanitizer (it sees overruns only at allocation edges)
  size_t pa_in_use, pa_peak;  // per_alloc: bytes held (sizes in pa_sizes), peak
  struct kcu_sizes *pa_sizes;
  kcu_plan_cache *plans;  // cuBLASLt plans (gemm.cu), made on first use
  int lt_gelu;         // 1: GELU/DGELU as cuBLASLt epilogues (TESSERA_CUDA_LT_GELU=0: kernels)
  int lt_log;          // TESSERA_CUDA_LT_LOG=1: log every cuBLASLt plan built (and whether
                       // cuBLASLt had an algorithm for it)
  char *stage;         // pinned staging of uploads (memory.cu stage_upload): 2 halves
  int stage_state;     // 0 not made yet, 1 in use, -1 off (TESSERA_CUDA_STAGING=0 or no memory)
  int stage_cur;       // the half being filled
  size_t stage_off;    // bytes of it used
  cudaEvent_t stage_ev[2];  // recorded after the last copy out of each half
  int stage_pending[2];     // 1: that event has been recorded since the half was last reused
  kernels_path_stats paths;  // calls per implementation (kernels.h path_stats): GEMMs
                             // counted in gemm.cu, attention in attention.cu
  int capturing;       // 1 between graph_begin and graph_end (graph.cu): the stream records
  void *cap_scratch;   // the scratch buffer when recording began (it must not move)
  void *qk_cs;         // the fused QK-norm + RoPE's cos/sin table (rmsnorm.cu), of head
  int qk_dh;           // dimension qk_dh and theta qk_theta; NULL until first used
  float qk_theta;
};

static inline kcu_ctx *kcu(kb_t *kb) { return (kcu_ctx *)kb->ctx; }

// ---- host-side checks and error returns ------------------------------------------------
#define KCU_NEED(op, p) \
  do { if (!(p)) return err_set(TSR_EINVAL, "%s: %s is NULL", (op), #p); } while (0)
#define KCU_DIM(op, x) \
  do { if ((x) < 0) return err_set(TSR_EINVAL, "%s: %s = %lld is negative", (op), #x, (long long)(x)); } while (0)

tsr_status kcu_cuda_fail(const char *op, const char *call, cudaError_t e);
tsr_status kcu_lt_fail(const char *op, const char *call, cublasStatus_t s);
// Reads and clears the device error word after everything queued before it (waits for the
// stream): TSR_OK, or TSR_EINVAL naming the entry that found a bad index (backend.cu).
tsr_status kcu_check_error(kb_t *kb, const char *op);
// Returns from the enclosing function on a CUDA error.
#define KCU_CUDA(op, call)                                               \
  do {                                                                   \
    cudaError_t kcu_e_ = (call);                                         \
    if (kcu_e_ != cudaSuccess) return kcu_cuda_fail((op), #call, kcu_e_); \
  } while (0)
// After a kernel launch: launch-configuration errors (and earlier asynchronous ones).
#define KCU_LAUNCHED(op) KCU_CUDA(op, cudaGetLastError())
// Entries that wait for the device, read back or allocate refuse while a graph is recorded
// (kernels.h graph_begin): the recording would fail inside CUDA with a vaguer error.
#define KCU_NOT_RECORDING(kb, op)                                                          \
  do {                                                                                     \
    if (kcu(kb)->capturing)                                                                \
      return err_set(TSR_EINVAL, "%s: not allowed while a graph is recorded (it waits for " \
                     "the device or allocates; kernels.h graph_begin)", (op));             \
  } while (0)
#define KCU_LT(op, call)                                                   \
  do {                                                                     \
    cublasStatus_t kcu_s_ = (call);                                        \
    if (kcu_s_ != CUBLAS_STATUS_SUCCESS) return kcu_lt_fail((op), #call, kcu_s_); \
  } while (0)

// A device buffer of at least `bytes` owned by the context, valid until the next call of
// kcu_scratch (entries use it within one call; the stream orders reuse). Grows (while
// shapes still grow, i.e. in the first step) by a new range of the arena, the old one
// freed at once: the one stream orders every use of either. TSR_ENOMEM naming op when
// the arena has no room.
tsr_status kcu_scratch(kb_t *kb, const char *op, size_t bytes, void **out);
// A range of the arena the backend keeps for itself (outside `alloc`'s books, as the scratch:
// a wrapper counting the table's allocations does not see it) holding a copy of `bytes` of
// host memory; waits for the copy. Not while a graph is recorded. Freed by kcu_own_free.
tsr_status kcu_own_upload(kb_t *kb, const char *op, const void *host, size_t bytes, void **out);
void kcu_own_free(kb_t *kb, void *p);
// Makes the arena (and the cuBLASLt workspace in it) with the default size if it does not
// exist yet; entries that need the workspace call it (their operands came from alloc, so
// it exists, but a call with no allocation before must not crash).
tsr_status kcu_arena_ready(kb_t *kb, const char *op);
// Entry ids for the device error word (kcu_entry_names in backend.cu).
enum {
  KCU_E_UNKNOWN = 0, KCU_E_MODULATE_F, KCU_E_MODULATE_B, KCU_E_GATE_F, KCU_E_GATE_B,
  KCU_E_EMBED_F, KCU_E_EMBED_B, KCU_E_ATTN_F, KCU_E_ATTN_B, KCU_E_OBJECTIVE, KCU_E_MSE_F,
  KCU_E_MSE_B, KCU_E_ADAMW_MULTI, KCU_E_LN_MOD_F, KCU_E_LN_MOD_B, KCU_E_QK_F, KCU_E_QK_B,
  KCU_E_COUNT
};
// Queues a check of cu (n_clips + 1 offsets, device memory): 0-based, non-decreasing,
// cu[n_clips] == L. A failure is recorded in the device error word.
tsr_status kcu_check_cu(kb_t *kb, const char *op, int entry, const int32_t *cu, int n_clips, int L);

// Grid size for n work items of `per_block` each, capped (grid-stride loops do the rest).
static inline unsigned kcu_blocks(size_t n, unsigned per_block) {
  size_t b = (n + per_block - 1) / per_block;
  if (b == 0) b = 1;
  return (unsigned)(b > 1048576 ? 1048576 : b);
}

// ---- device helpers ------------------------------------------------------------------
__device__ __forceinline__ float kcu_ld(const act_t *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void kcu_st(act_t *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

// Records a bad index (first one wins).
__device__ __forceinline__ void kcu_report(kcu_dev_error *e, int code, int entry, long long value,
                                           long long where) {
  if (atomicCAS(&e->code, 0, code) == 0) {
    e->entry = entry;
    e->value = value;
    e->where = where;
  }
}

// The clip c of row i: cu[c] <= i < cu[c+1] (cu of n_clips + 1 entries; clamped to
// [0, n_clips - 1] whatever cu holds).
__device__ __forceinline__ int kcu_clip_of(const int32_t *cu, int n_clips, int i) {
  int lo = 0, hi = n_clips - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (cu[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// The clip of row r from clip c, the clip of an earlier row of the block (cu walked forward;
// stays within [0, n_clips - 1] whatever cu holds).
__device__ __forceinline__ int kcu_clip_walk(const int32_t *cu, int n_clips, int c, int r) {
  while (c < n_clips - 1 && cu[c + 1] <= r) c++;
  return c;
}

// The clip of the block's first row, found once by thread 0 (n_clips > 0).
__device__ __forceinline__ int kcu_block_first_clip(const int32_t *cu, int n_clips, int r0) {
  __shared__ int c_first;
  if (threadIdx.x == 0) c_first = kcu_clip_of(cu, n_clips, r0);
  __syncthreads();
  return c_first;
}

// Warp sums in a fixed butterfly order (deterministic).
__device__ __forceinline__ double kcu_warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float kcu_warp_sumf(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float kcu_warp_maxf(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// ---- 16-byte vectors of bf16 -------------------------------------------------------------
// The token-local kernels move rows as vectors of VW elements: VW = KCU_VEC (8 bf16, one
// 16-byte load or store) when every row start is 16-byte aligned (kcu_vec_ok), else VW = 1
// (scalar, e.g. D = 33). The kernels are templates on VW instantiated for both.
enum { KCU_VEC = 8 };
union kcu_v8 {
  uint4 u;
  act_t h[KCU_VEC];
};
// v[0..VW) = p[i..i+VW) as float (i a multiple of VW).
template <int VW>
__device__ __forceinline__ void kcu_ldv(const act_t *p, size_t i, float *v) {
  if (VW == KCU_VEC) {
    kcu_v8 t;
    t.u = *(const uint4 *)(p + i);
    for (int e = 0; e < KCU_VEC; e++) v[e] = __bfloat162float(t.h[e]);
  } else {
    for (int e = 0; e < VW; e++) v[e] = kcu_ld(p, i + e);
  }
}
// p[i..i+VW) = v rounded to bf16 (nearest even).
template <int VW>
__device__ __forceinline__ void kcu_stv(act_t *p, size_t i, const float *v) {
  if (VW == KCU_VEC) {
    kcu_v8 t;
    for (int e = 0; e < KCU_VEC; e++) t.h[e] = __float2bfloat16_rn(v[e]);
    *(uint4 *)(p + i) = t.u;
  } else {
    for (int e = 0; e < VW; e++) kcu_st(p, i + e, v[e]);
  }
}
// 1 when rows of D elements (and per-clip vectors of stride mstride) starting at each of
// ptrs (NULL allowed) are all 16-byte aligned, so kcu_ldv<KCU_VEC> may read them.
static inline int kcu_vec_ok(int D, int mstride, const void *const *ptrs, int n) {
  if (D % KCU_VEC || mstride % KCU_VEC) return 0;
  for (int i = 0; i < n; i++)
    if ((uintptr_t)ptrs[i] & 15) return 0;
  return 1;
}

// ---- row tiles of one clip -------------------------------------------------------------------
// The backward adaLN kernels give each block KCU_TILE rows of ONE clip, so the block's
// column sums (the per-clip vector gradients) are partials of that clip alone: clip c's
// rows [cu[c], cu[c+1]) are tiles tiles[c] .. tiles[c+1]-1 (chunks of KCU_TILE rows in row
// order), and block b finds its clip by one binary search of tiles (kcu_tile_rows).
// Their count is at most kcu_tiles_max (each clip adds at most one partial tile).
enum { KCU_TILE = 64 };
static inline long long kcu_tiles_max(int L, int n_clips) {
  return ((long long)L + KCU_TILE - 1) / KCU_TILE + n_clips;
}
// Block b's clip *c and rows [*r0, *r1) from the tile table (tiles: n_clips + 1 prefix
// offsets, cu clamped to [0, L] as the table was made); 0 when b is past the last tile.
// Called by one thread.
__device__ __forceinline__ int kcu_tile_rows(const int *tiles, const int32_t *cu, int n_clips,
                                             int L, int b, int *c, int *r0, int *r1) {
  if (n_clips <= 0 || b >= tiles[n_clips]) return 0;
  int lo = 0, hi = n_clips - 1;
  while (lo < hi) {  // the last clip whose first tile is <= b (empty clips share offsets)
    int mid = (lo + hi + 1) / 2;
    if (tiles[mid] <= b) lo = mid;
    else hi = mid - 1;
  }
  int a = cu[lo] < 0 ? 0 : (cu[lo] > L ? L : cu[lo]);
  int e = cu[lo + 1] < a ? a : (cu[lo + 1] > L ? L : cu[lo + 1]);
  *c = lo;
  *r0 = a + (b - tiles[lo]) * KCU_TILE;
  *r1 = *r0 + KCU_TILE < e ? *r0 + KCU_TILE : e;
  return *r0 < *r1;
}

// ---- loops and launches ------------------------------------------------------------------
// One thread per item: a grid-stride loop over i in [0, n) (the grid is capped by
// kcu_blocks, so the loop does the rest).
#define KCU_GRID_STRIDE(i, n) \
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)
// The launch configuration of such a kernel over n items on the backend's stream:
//   k_fill<<<KCU_GRID(kb, n)>>>(x, value, n);
//   KCU_LAUNCHED(op);
// The <<< >>> itself stays in the .cu files: kernels/cuda/emu/translate.py rewrites the
// launches of a .cu file for the emulated device, not those of the headers it includes.
#define KCU_GRID(kb, n) kcu_blocks((n), 256), 256, 0, kcu(kb)->stream
// One warp per row: a grid-stride loop over rows (every lane of a warp has the same row, so
// the shuffles inside see the whole warp), with `lane` declared. Opens a loop: the kernel
// body ends with KCU_WARP_ROW_END. Launch with kcu_warp_blocks(rows) blocks of 256.
#define KCU_WARP_ROW(row, R)                                                          \
  int lane = threadIdx.x & 31;                                                        \
  for (int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32); row < (R); \
       row += (int)((size_t)gridDim.x * blockDim.x / 32)) {
#define KCU_WARP_ROW_END }
static inline unsigned kcu_warp_blocks(int rows) { return kcu_blocks((size_t)rows * 32, 256); }

// ---- column sums (reduce.cu) -------------------------------------------------------------
// Deterministic column sums of the (rows, cols) [act] matrix a, times b (same shape) and
// rs[r] where given: out[j] += sum_r a[r][j] (b[r][j]) (rs[r]), in fp32 over fixed row
// slices added in slice order (bias and norm-weight gradients, accumulated). 16-byte vector
// loads when cols is a multiple of 8 and a, b are aligned.
tsr_status kcu_colsum(kb_t *kb, const char *op, float *out, const act_t *a, const act_t *b,
                      const float *rs, int rows, int cols);
// The tile table of cu (n_clips + 1 offsets, device) into tiles (n_clips + 1 ints, device
// scratch of the caller): one block, queued on the stream (kcu_tile_rows reads it).
tsr_status kcu_tile_table(kb_t *kb, const char *op, int *tiles, const int32_t *cu, int n_clips,
                          int L);
// The per-clip vector gradient from per-tile partials: out[c * ostride + j] = the sum over
// clip c's tiles t, in tile order, of part[t * pstride + j] (fp32), rounded to bf16; 0 for
// an empty clip. part: (n_tiles, pstride) fp32 with n_tiles = kcu_tiles_max; j < D.
tsr_status kcu_tile_colsum(kb_t *kb, const char *op, act_t *out, int ostride, const float *part,
                           int pstride, const int *tiles, long long n_tiles, int n_clips, int D);

// ---- the families' entries -----------------------------------------------------------------
// Each op family's file sets its entries into the table that backend.cu makes (and nothing
// else): a new entry of that family is added in its file alone.
void kcu_memory_entries(kernels_backend *b);       // memory.cu: alloc ... mem_info
void kcu_elementwise_entries(kernels_backend *b);  // elementwise.cu: cast ... silu_backward
void kcu_layernorm_entries(kernels_backend *b);    // layernorm.cu: LayerNorm, adaLN, fused
void kcu_rmsnorm_entries(kernels_backend *b);      // rmsnorm.cu: RMSNorm, RoPE, fused QK
void kcu_objective_entries(kernels_backend *b);    // objective.cu: embeddings, objective, Euler
void kcu_reduce_entries(kernels_backend *b);       // reduce.cu: mse_*, sumsq
void kcu_adamw_entries(kernels_backend *b);        // adamw.cu: adamw_update(_multi), ema_update

// ---- entries defined in gemm.cu, attention.cu and graph.cu -----------------------------
extern "C" {
// Recorded graphs (graph.cu; kernels.h graph_*): stream capture into a CUDA graph.
tsr_status kcu_graph_begin(kb_t *kb);
tsr_status kcu_graph_end(kb_t *kb, void **graph);
tsr_status kcu_graph_launch(kb_t *kb, void *graph, int *stale);
void kcu_graph_free(kb_t *kb, void *graph);
tsr_status kcu_gemm(kb_t *kb, int trans_a, int trans_b, int m, int n, int k, float alpha,
                    const void *a, const void *b, float beta, void *c);
tsr_status kcu_gemm_strided(kb_t *kb, int trans_a, int trans_b, int m, int n, int k,
                            float alpha, const void *a, int lda, const void *b, int ldb,
                            float beta, void *c, int ldc, kernels_dtype c_dtype);
tsr_status kcu_gemm_batched(kb_t *kb, int trans_a, int trans_b, int m, int n, int k,
                            float alpha, const void *a, int64_t stride_a, const void *b,
                            int64_t stride_b, float beta, void *c, int64_t stride_c,
                            kernels_dtype c_dtype, const float *bias, int64_t stride_bias,
                            int batch);
tsr_status kcu_linear_forward(kb_t *kb, void *out, const void *inp, const void *w,
                              const float *bias, int M, int K, int N);
tsr_status kcu_linear_backward(kb_t *kb, void *dinp, float *dw, float *dbias, const void *dout,
                               const void *inp, const void *w, int M, int K, int N);
tsr_status kcu_linear_gelu_forward(kb_t *kb, void *out, void *pre, const void *inp, const void *w,
                                   const float *bias, int M, int K, int N);
tsr_status kcu_linear_backward_dgelu(kb_t *kb, void *dpre, float *dw, float *dbias,
                                     const void *dout, const void *inp, const void *w,
                                     const void *pre, int M, int K, int N);
// Drops every cached cuBLASLt plan (gemm.cu).
void kcu_plans_free(kcu_ctx *x);
// [act] pieces (elementwise.cu) for gemm.cu's paths without an epilogue, n elements:
// y *= alpha (alpha == 0: zeroed), errors naming "gemm" (gemm with k == 0);
// out = GELU(pre); dinp = GELU'(pre) dout (dinp may equal dout), errors naming op.
tsr_status kcu_scale_act(kb_t *kb, void *y, float alpha, size_t n);
tsr_status kcu_gelu_act(kb_t *kb, const char *op, void *out, const void *pre, size_t n);
tsr_status kcu_dgelu_act(kb_t *kb, const char *op, void *dinp, const void *dout, const void *pre,
                         size_t n);

tsr_status kcu_attention_forward(kb_t *kb, void *out, float *lse, const void *q, const void *k,
                                 const void *v, const int32_t *cu, int n_clips, int max_len, int L,
                                 int H, int Dh, float scale);
tsr_status kcu_attention_backward(kb_t *kb, void *dq, void *dk, void *dv, const void *dout,
                                  const void *q, const void *k, const void *v, const void *out,
                                  const float *lse, const int32_t *cu, int n_clips, int max_len,
                                  int L, int H, int Dh, float scale);
tsr_status kcu_attention_partial_forward(kb_t *kb, void *out, float *lse, const void *q,
                                         const void *k, const void *v, const int32_t *cu_q,
                                         const int32_t *cu_k, int n_clips, int max_q, int max_k,
                                         int Lq, int Lk, int H, int Dh, float scale);
tsr_status kcu_attention_merge(kb_t *kb, void *out_a, float *lse_a, const void *out_b,
                               const float *lse_b, int L, int H, int Dh);
tsr_status kcu_attention_delta(kb_t *kb, float *delta, const void *dout, const void *out, int L,
                               int H, int Dh);
tsr_status kcu_attention_partial_backward(kb_t *kb, void *dq, void *dk, void *dv,
                                          const void *dout, const void *q, const void *k,
                                          const void *v, const void *out, const float *lse,
                                          const float *delta, const int32_t *cu_q,
                                          const int32_t *cu_k, int n_clips, int max_q, int max_k,
                                          int Lq, int Lk, int H, int Dh, float scale);
tsr_status kcu_attention_masked_forward(kb_t *kb, void *out, float *lse, const void *q,
                                        const void *k, const void *v, const int32_t *cu_q,
                                        const int32_t *cu_k, const int32_t *pos_q,
                                        const int32_t *pos_k, kernels_mask mask, int n_clips,
                                        int max_q, int max_k, int Lq, int Lk, int H, int Dh,
                                        float scale);
tsr_status kcu_attention_masked_backward(kb_t *kb, void *dq, void *dk, void *dv, const void *dout,
                                         const void *q, const void *k, const void *v,
                                         const void *out, const float *lse, const int32_t *cu,
                                         const int32_t *pos, kernels_mask mask, int n_clips,
                                         int max_len, int L, int H, int Dh, float scale);
tsr_status kcu_attention_masked_partial_backward(
    kb_t *kb, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
    const void *v, const void *out, const float *lse, const float *delta, const int32_t *cu_q,
    const int32_t *cu_k, const int32_t *pos_q, const int32_t *pos_k, kernels_mask mask,
    int n_clips, int max_q, int max_k, int Lq, int Lk, int H, int Dh, float scale);
}

#endif
