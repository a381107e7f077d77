// kernels/cuda/attention_cudnn.cu — attention_forward, attention_backward,
// attention_partial_forward and attention_partial_backward through cuDNN's fused
// scaled-dot-product attention (attention_cudnn.h): per call, the path (kcu_sdpa_choose,
// sdpa.h, with the environment switch TESSERA_CUDA_ATTENTION; attention.cu's own kernels
// take the rest), the ragged description filled on the device, the plan
// (attention_cudnn_plan.h) run on it. The graphs are attention_cudnn_graph.cu's.
//
// Numerics: cuDNN rounds P (forward) and P, dS (backward) to bf16 for the tensor-core
// products, unlike the own kernels (P in fp32): tests/kernels/test_backend_ops.c gives the
// cuDNN entries their own tolerance. stats/lse stay fp32. The partial backward's share is
// stored in bf16 before it is added (one more rounding of the share than the own kernels'
// load-add-round).
// Memory: the ragged tensors, the backward's fp32 delta and cuDNN's workspace come from
// kcu_scratch (one request per call).
#include <cudnn.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/attention_cudnn_plan.h"
#include "kernels/cuda/kcu.h"

extern "C" {
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/sdpa.h"
}

// ---- device side: ragged description, rows without keys --------------------------------
// The ragged description of one cuDNN batch (sdpa.h): b sequence lengths on each side and
// b + 1 offsets in elements of the (L, H, Dh) tensors (Q and O: off_q; K and V: off_k) and
// of the (L, H) lse (off_s).
struct sdpa_desc {
  int32_t *seq_q, *seq_kv;
  int64_t *off_q, *off_k, *off_s;
};

// Sequence c < b of the plan (kcu_sdpa_ragged): lengths, at most max_q / max_k (the plan's
// sq / skv are no smaller), and offsets in elements of the (L, H, Dh) tensors and of the
// (L, H) lse; offsets[b] = the end.
__global__ void k_sdpa_ragged(int32_t *seq_q, int32_t *seq_kv, int64_t *off_q, int64_t *off_k,
                              int64_t *off_s, const int32_t *cu_q, const int32_t *cu_k,
                              int n_clips, int b, int max_q, int max_k, int Lq, int Lk, int H,
                              int Dh) {
  const int64_t row = (int64_t)H * Dh;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c <= b; c += gridDim.x * blockDim.x) {
    if (c == b) {
      off_q[b] = Lq * row;
      off_k[b] = Lk * row;
      off_s[b] = (int64_t)Lq * H;
      continue;
    }
    int32_t sq, lq, sk, lk;
    kcu_sdpa_ragged(cu_q, n_clips, Lq, max_q, c, &sq, &lq);
    kcu_sdpa_ragged(cu_k, n_clips, Lk, max_k, c, &sk, &lk);
    seq_q[c] = lq;
    seq_kv[c] = lk;
    off_q[c] = sq * row;
    off_k[c] = sk * row;
    off_s[c] = (int64_t)sq * H;
  }
}

// Partial forward: a query whose clip has no key in the block gets out = 0, lse = -inf (the
// contract; cuDNN's fully masked rows are not that). One warp per (token, head) row.
__global__ void k_sdpa_no_keys(act_t *out, float *lse, const int32_t *seq_kv, const int32_t *cu_q,
                               int n_clips, int Lq, int H, int Dh) {
  const int lane = threadIdx.x & 31;
  const size_t rows = (size_t)Lq * H;
  for (size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32; r < rows;
       r += (size_t)gridDim.x * blockDim.x / 32) {
    int c = kcu_clip_of(cu_q, n_clips, (int)(r / H));
    if (seq_kv[c] != 0) continue;
    for (int d = lane; d < Dh; d += 32) kcu_st(out, r * Dh + d, 0.0f);
    if (lane == 0) lse[r] = -INFINITY;
  }
}

// ---- the entries ------------------------------------------------------------------------
// The ragged tensors of a call, then its own buffers, then cuDNN's workspace: one
// kcu_scratch request, 256-byte aligned pieces.
struct sdpa_mem {
  sdpa_desc d;  // the batch's ragged description
  char *next;   // the rest, handed out by sdpa_take
};

static size_t sdpa_round(size_t n) { return (n + 255) / 256 * 256; }
static size_t sdpa_ragged_bytes(int b) {
  return 2 * sdpa_round(sizeof(int32_t) * b) + 3 * sdpa_round(sizeof(int64_t) * (b + 1));
}
static void *sdpa_take(sdpa_mem *m, size_t bytes) {
  void *p = m->next;
  m->next += sdpa_round(bytes);
  return p;
}
static sdpa_desc sdpa_take_desc(sdpa_mem *m, int b) {
  sdpa_desc d;
  d.seq_q = (int32_t *)sdpa_take(m, sizeof(int32_t) * b);
  d.seq_kv = (int32_t *)sdpa_take(m, sizeof(int32_t) * b);
  d.off_q = (int64_t *)sdpa_take(m, sizeof(int64_t) * (b + 1));
  d.off_k = (int64_t *)sdpa_take(m, sizeof(int64_t) * (b + 1));
  d.off_s = (int64_t *)sdpa_take(m, sizeof(int64_t) * (b + 1));
  return d;
}

// Claims `extra` bytes after the ragged tensors plus the workspace, fills the ragged
// tensors from cu_q / cu_k (lengths clamped to max_q / max_k; cu_q NULL: the caller fills
// them).
static tsr_status sdpa_prepare(kb_t *kb, const char *op, const kcu_sdpa_key *key, size_t extra,
                               int64_t workspace, const int32_t *cu_q, const int32_t *cu_k,
                               int n_clips, int max_q, int max_k, int Lq, int Lk, int H, int Dh,
                               sdpa_mem *m) {
  const int b = key->b;
  void *base;
  tsr_status st = kcu_scratch(kb, op, sdpa_ragged_bytes(b) + extra + sdpa_round((size_t)workspace), &base);
  if (st) return st;
  m->next = (char *)base;
  m->d = sdpa_take_desc(m, b);
  if (!cu_q) return TSR_OK;
  k_sdpa_ragged<<<kcu_blocks((size_t)b + 1, 256), 256, 0, kcu(kb)->stream>>>(
      m->d.seq_q, m->d.seq_kv, m->d.off_q, m->d.off_k, m->d.off_s, cu_q, cu_k, n_clips, b, max_q,
      max_k, Lq, Lk, H, Dh);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

// The forward graph's variant pack on description d (V and O share K's and Q's offsets).
static tsr_status sdpa_run_forward(const char *op, sdpa_state *S, sdpa_plan *p, const sdpa_desc *d,
                                   void *out, float *lse, const void *q, const void *k, const void *v,
                                   float scale, void *ws) {
  float neg_inf = -INFINITY;
  int64_t uids[] = {U_Q, U_K, U_V, U_O, U_STATS, U_SCALE, U_NEG_INF, U_SEQ_Q, U_SEQ_KV,
                    U_OFF_Q, U_OFF_K, U_OFF_V, U_OFF_O, U_OFF_S};
  void *ptrs[] = {(void *)q, (void *)k, (void *)v, out, lse, &scale, &neg_inf, d->seq_q, d->seq_kv,
                  d->off_q, d->off_k, d->off_k, d->off_q, d->off_s};
  return sdpa_execute(op, S, p, uids, ptrs, (int)(sizeof uids / sizeof uids[0]), ws);
}

// The backward graph's: gq, gk, gv the gradients it writes, delta its fp32 rowsum(dO * O)
// (lse's layout), acc the zeroed fp32 dQ accumulator (NULL: the deterministic graph),
// off_dkv dK's and dV's own offsets (the masked backward's graph; else NULL).
static tsr_status sdpa_run_backward(const char *op, sdpa_state *S, sdpa_plan *p, const sdpa_desc *d,
                                    void *gq, void *gk, void *gv, const void *dout, const void *q,
                                    const void *k, const void *v, const void *out, const float *lse,
                                    void *delta, void *acc, const int64_t *off_dkv, float scale,
                                    void *ws) {
  float neg_inf = -INFINITY, one = 1.0f;
  int64_t uids[22] = {U_Q, U_K, U_V, U_O, U_STATS, U_DO, U_DQ, U_DK, U_DV, U_SCALE, U_NEG_INF, U_ONE,
                      U_SEQ_Q, U_SEQ_KV, U_OFF_Q, U_OFF_K, U_OFF_V, U_OFF_O, U_OFF_S, U_DELTA};
  void *ptrs[22] = {(void *)q, (void *)k, (void *)v, (void *)out, (void *)lse, (void *)dout, gq, gk, gv,
                    &scale, &neg_inf, &one, d->seq_q, d->seq_kv, d->off_q, d->off_k, d->off_k, d->off_q,
                    d->off_s, delta};
  int nt = 20;
  if (acc) uids[nt] = U_DQ_ACC, ptrs[nt++] = acc;
  if (off_dkv) uids[nt] = U_OFF_DKV, ptrs[nt++] = (void *)off_dkv;
  return sdpa_execute(op, S, p, uids, ptrs, nt, ws);
}

// 1 when every given pointer (NULL passes) has the 16-byte alignment the graphs declare
// (slices of a larger tensor at an odd token may not).
static int sdpa_aligned(const void *const *ptrs, int n) {
  for (int i = 0; i < n; i++)
    if ((uintptr_t)ptrs[i] % 16 != 0) return 0;
  return 1;
}

// The shared start of every entry: state, choice, plan. *plan = NULL: own kernels.
static tsr_status sdpa_begin(kb_t *kb, const char *op, const kcu_sdpa_shape *sh, int aligned,
                             int need_plan, sdpa_state **S_out, kcu_sdpa_key *key, sdpa_plan **plan,
                             int *use) {
  *plan = NULL;
  *use = 0;
  sdpa_state *S;
  tsr_status st = sdpa_state_of(kb, &S);
  if (st) return st;
  if (S->mode == KCU_ATTN_OWN || (S->setup && S->mode == KCU_ATTN_AUTO)) {
    S->own_calls[sh->kind]++;
    return TSR_OK;
  }
  if (S->setup)
    return err_set(S->setup, "%s: TESSERA_CUDA_ATTENTION=cudnn but cuDNN is not usable: %s", op, S->err);
  if ((st = kcu_sdpa_choose(S->mode, op, sh, &S->dev, use))) return st;
  if (*use && !aligned) {
    *use = 0;
    if (S->mode == KCU_ATTN_CUDNN)
      return err_set(TSR_EINVAL, "%s: TESSERA_CUDA_ATTENTION=cudnn but a tensor is not 16-byte aligned "
                     "(cuDNN's requirement; a slice at an odd token?)", op);
  }
  if (!*use) {
    S->own_calls[sh->kind]++;
    return TSR_OK;
  }
  *key = kcu_sdpa_key_of(sh, S->deterministic);
  *S_out = S;
  if (!need_plan) return TSR_OK;
  if ((st = sdpa_plan_of(S, op, key, plan))) return st;
  if (!*plan) *use = 0;  // auto mode, the build failed: own kernels
  return TSR_OK;
}

tsr_status kcu_sdpa_forward(kb_t *kb, const char *op, int partial, int *done, void *out,
                            float *lse, const void *q, const void *k, const void *v,
                            const int32_t *cu_q, const int32_t *cu_k, int n_clips, int max_q,
                            int max_k, int Lq, int Lk, int H, int Dh, float scale) {
  *done = 0;
  kcu_sdpa_shape sh = {partial ? KCU_SDPA_PARTIAL_FWD : KCU_SDPA_FWD, n_clips, max_q, max_k, Lq,
                       Lk, H, Dh};
  sdpa_state *S = NULL;
  kcu_sdpa_key key;
  sdpa_plan *p;
  int use;
  const void *args[] = {out, lse, q, Lk > 0 ? k : NULL, Lk > 0 ? v : NULL};
  // An empty block needs no plan: every row is "no key" below.
  tsr_status st = sdpa_begin(kb, op, &sh, sdpa_aligned(args, 5), Lk > 0, &S, &key, &p, &use);
  if (st || !use) return st;
  sdpa_mem m;
  if ((st = sdpa_prepare(kb, op, &key, 0, p ? p->workspace : 0, cu_q, cu_k, n_clips, max_q, max_k, Lq,
                         Lk, H, Dh, &m)))
    return st;
  if (p && (st = sdpa_run_forward(op, S, p, &m.d, out, lse, q, k, v, scale, m.next))) return st;
  if (partial) {
    size_t rows = (size_t)Lq * H;
    k_sdpa_no_keys<<<kcu_blocks(rows * 32, 256), 256, 0, kcu(kb)->stream>>>(
        (act_t *)out, lse, m.d.seq_kv, cu_q, n_clips, Lq, H, Dh);
    KCU_LAUNCHED(op);
  }
  *done = 1;
  return TSR_OK;
}

// Partial backward: dst += src (fp32 sum, rounded once) on the token rows of the clips whose
// partners in the call are not empty (seq_other[c] > 0, the ragged lengths of the other
// side); the other rows' share is zero by definition, and cuDNN leaves them unwritten. One
// warp per token row of E = H * Dh elements.
__global__ void k_sdpa_accumulate(act_t *dst, const act_t *src, const int32_t *cu,
                                  const int32_t *seq_other, int n_clips, int L, int E) {
  KCU_WARP_ROW(t, L)
    if (seq_other[kcu_clip_of(cu, n_clips, t)] == 0) continue;
    const size_t base = (size_t)t * E;
    for (int e = lane; e < E; e += 32) kcu_st(dst, base + e, kcu_ld(dst, base + e) + kcu_ld(src, base + e));
  KCU_WARP_ROW_END
}

// The backward graph's calls. attention_backward (kind BWD, cu_q == cu_k, Lq == Lk): cuDNN
// writes dq, dk, dv (a NULL one into scratch, dropped). attention_partial_backward (kind
// PARTIAL_BWD; out, lse the queries' final ones): cuDNN writes the call's share into scratch
// and k_sdpa_accumulate adds it to dq, dk, dv (those given). A partial call without queries
// or keys has no share: done without a plan.
static tsr_status sdpa_backward(kb_t *kb, const char *op, kcu_sdpa_kind kind, int *done, void *dq,
                                void *dk, void *dv, const void *dout, const void *q, const void *k,
                                const void *v, const void *out, const float *lse,
                                const int32_t *cu_q, const int32_t *cu_k, int n_clips, int max_q,
                                int max_k, int Lq, int Lk, int H, int Dh, float scale) {
  *done = 0;
  const int partial = kind == KCU_SDPA_PARTIAL_BWD, work = Lq > 0 && Lk > 0;
  kcu_sdpa_shape sh = {kind, n_clips, max_q, max_k, Lq, Lk, H, Dh};
  sdpa_state *S = NULL;
  kcu_sdpa_key key;
  sdpa_plan *p;
  int use;
  // the gradients cuDNN writes itself (not the partial call's: those are scratch)
  const void *args[] = {dout, q, k, v, out, lse, partial ? NULL : dq, partial ? NULL : dk,
                        partial ? NULL : dv};
  tsr_status st = sdpa_begin(kb, op, &sh, sdpa_aligned(args, 9), work, &S, &key, &p, &use);
  if (st || !use) return st;
  if (!work) {
    *done = 1;
    return TSR_OK;
  }
  const size_t nq = (size_t)Lq * H * Dh, nk = (size_t)Lk * H * Dh, rows = (size_t)Lq * H;
  // Scratch gradients: the partial call's share, or a gradient the caller does not want
  // (cuDNN writes all three).
  const int own_q = partial || !dq, own_kv = partial || !dk;
  // delta (fp32, like the lse), the fp32 dQ accumulator without determinism, the scratch
  // gradients.
  size_t extra = sdpa_round(rows * sizeof(float)) + (key.deterministic ? 0 : sdpa_round(nq * sizeof(float))) +
                 (own_q ? sdpa_round(nq * sizeof(act_t)) : 0) + (own_kv ? 2 * sdpa_round(nk * sizeof(act_t)) : 0);
  sdpa_mem m;
  if ((st = sdpa_prepare(kb, op, &key, extra, p->workspace, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk,
                         H, Dh, &m)))
    return st;
  void *delta = sdpa_take(&m, rows * sizeof(float));
  void *acc = key.deterministic ? NULL : sdpa_take(&m, nq * sizeof(float));
  void *gq = own_q ? sdpa_take(&m, nq * sizeof(act_t)) : dq;
  void *gk = own_kv ? sdpa_take(&m, nk * sizeof(act_t)) : dk;
  void *gv = own_kv ? sdpa_take(&m, nk * sizeof(act_t)) : dv;
  cudaStream_t stream = kcu(kb)->stream;
  if (acc) KCU_CUDA(op, cudaMemsetAsync(acc, 0, nq * sizeof(float), stream));
  if ((st = sdpa_run_backward(op, S, p, &m.d, gq, gk, gv, dout, q, k, v, out, lse, delta, acc, NULL,
                              scale, m.next)))
    return st;
  if (partial && dq) {
    k_sdpa_accumulate<<<kcu_warp_blocks(Lq), 256, 0, stream>>>((act_t *)dq, (const act_t *)gq, cu_q,
                                                               m.d.seq_kv, n_clips, Lq, H * Dh);
    KCU_LAUNCHED(op);
  }
  if (partial && dk) {
    k_sdpa_accumulate<<<kcu_warp_blocks(Lk), 256, 0, stream>>>((act_t *)dk, (const act_t *)gk, cu_k,
                                                               m.d.seq_q, n_clips, Lk, H * Dh);
    KCU_LAUNCHED(op);
    k_sdpa_accumulate<<<kcu_warp_blocks(Lk), 256, 0, stream>>>((act_t *)dv, (const act_t *)gv, cu_k,
                                                               m.d.seq_q, n_clips, Lk, H * Dh);
    KCU_LAUNCHED(op);
  }
  *done = 1;
  return TSR_OK;
}

tsr_status kcu_sdpa_backward(kb_t *kb, const char *op, int *done, void *dq, void *dk, void *dv,
                             const void *dout, const void *q, const void *k, const void *v,
                             const void *out, const float *lse, const int32_t *cu, int n_clips,
                             int max_len, int L, int H, int Dh, float scale) {
  return sdpa_backward(kb, op, KCU_SDPA_BWD, done, dq, dk, dv, dout, q, k, v, out, lse, cu, cu,
                       n_clips, max_len, max_len, L, L, H, Dh, scale);
}

tsr_status kcu_sdpa_partial_backward(kb_t *kb, const char *op, int *done, void *dq, void *dk,
                                     void *dv, const void *dout, const void *q, const void *k,
                                     const void *v, const void *out, const float *lse,
                                     const int32_t *cu_q, const int32_t *cu_k, int n_clips,
                                     int max_q, int max_k, int Lq, int Lk, int H, int Dh,
                                     float scale) {
  return sdpa_backward(kb, op, KCU_SDPA_PARTIAL_BWD, done, dq, dk, dv, dout, q, k, v, out, lse,
                       cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
}


// ---- masked entries under block_causal and a frame-wide window: the pair list ----------------
// (attention_cudnn.h). Both are bands of chunks in t: a row's chunk is t / chunk, and the
// rows of query chunk g see the keys of chunks [g - back, g + fwd] of its clip (back < 0:
// from the clip's start). block_causal: chunk, back W (W = 0: -1), fwd 0; window: chunk
// tile_t, back = fwd = wt, once the device found the spatial window covers every pair's
// tiles.
struct pl_band {
  int chunk, back, fwd;
};

static pl_band pl_band_of(const kernels_mask *m) {
  if (m->kind == KERNELS_MASK_WINDOW) return pl_band{m->tile_t, m->wt, m->wt};
  return pl_band{m->chunk, m->window > 0 ? m->window : -1, 0};
}

// Rows [*a, *e) of clip c in cu (clamped into [0, L]).
__device__ __forceinline__ void pl_clip_rows(const int32_t *cu, int c, int L, int *a, int *e) {
  int x = cu[c], y = cu[c + 1];
  x = x < 0 ? 0 : (x > L ? L : x);
  y = y < x ? x : (y > L ? L : y);
  *a = x;
  *e = y;
}

__device__ __forceinline__ int pl_chunk(const int32_t *pos, int r, int chunk) {
  return pos[3 * (size_t)r] / chunk;
}

// The first row of [a, e) whose chunk is after g (rows in order of t: a binary search).
__device__ int pl_after(const int32_t *pos, int a, int e, int g, int chunk) {
  while (a < e) {
    int m = a + (e - a) / 2;
    if (pl_chunk(pos, m, chunk) > g) e = m;
    else a = m + 1;
  }
  return a;
}

// Every sequence of d empty, the end offsets set; the gate (when given) cleared and the
// spatial extent after it (gate[1..4], k_pl_fill) reset.
__global__ void k_pl_init(sdpa_desc d, int32_t *gate, int b, int Lq, int Lk, int H, int Dh) {
  const int64_t row = (int64_t)H * Dh;
  for (int s = blockIdx.x * blockDim.x + threadIdx.x; s <= b; s += gridDim.x * blockDim.x) {
    if (s < b) {
      d.seq_q[s] = d.seq_kv[s] = 0;
      d.off_q[s] = d.off_k[s] = d.off_s[s] = 0;
      continue;
    }
    d.off_q[b] = Lq * row;
    d.off_k[b] = Lk * row;
    d.off_s[b] = (int64_t)Lq * H;
    if (gate) {
      gate[0] = 0;
      for (int i = 1; i < 5; i++) gate[i] = INT_MIN;
    }
  }
}

// The window mask: the rows' tile extent in y and x into span (max ty, max -ty, max tx,
// max -tx), which k_pl_gate compares with the radii.
__device__ __forceinline__ void pl_span(int32_t *span, const int32_t *pos, int r, int tile_h,
                                        int tile_w) {
  const int ty = pos[3 * (size_t)r + 1] / tile_h, tx = pos[3 * (size_t)r + 2] / tile_w;
  atomicMax(span, ty);
  atomicMax(span + 1, -ty);
  atomicMax(span + 2, tx);
  atomicMax(span + 3, -tx);
}

// The groups of one side into d. keys_side 0: groups of query rows (g = q, p = k), each with
// its visible key chunks [g - back, g + fwd] (back < 0: from 0); 1: groups of key rows with
// their visible query chunks [g - fwd, g + back] (back < 0: to the end). span (the window
// mask's query side, else NULL): every row's tiles in y, x into span (pl_span). A group is
// the rows of one chunk of one clip: sequence c * groups + (its chunk - the clip's first
// chunk in the call). covered[r]: 1 when row r's group sees a partner row. Sets *gate = 1
// where the layout does not fit: rows of a clip (either side) out of order of t, a group
// past `groups`, a group or partner range longer than the plan's max_g / max_p.
__global__ void k_pl_fill(sdpa_desc d, int32_t *gate, uint8_t *covered, const int32_t *cu_g,
                          const int32_t *cu_p, const int32_t *pos_g, const int32_t *pos_p,
                          int keys_side, pl_band band, int32_t *span, int tile_h, int tile_w,
                          int groups, int n_clips, int Lg, int Lp, int max_g, int max_p, int H,
                          int Dh) {
  const int chunk = band.chunk;
  const int64_t row = (int64_t)H * Dh;
  const int tid = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
  for (int j = tid; j < Lp; j += stride) {
    int a, e;
    pl_clip_rows(cu_p, kcu_clip_of(cu_p, n_clips, j), Lp, &a, &e);
    if (j > a && j < e && pos_p[3 * (size_t)(j - 1)] > pos_p[3 * (size_t)j]) *gate = 1;
    if (span) pl_span(span, pos_p, j, tile_h, tile_w);
  }
  for (int r = tid; r < Lg; r += stride) {
    covered[r] = 0;
    const int c = kcu_clip_of(cu_g, n_clips, r);
    int a, e, pa, pe;
    pl_clip_rows(cu_g, c, Lg, &a, &e);
    if (r < a || r >= e) continue;  // in no clip (a bad cu: the entry's check reports it)
    if (span) pl_span(span, pos_g, r, tile_h, tile_w);
    const int t = pos_g[3 * (size_t)r];
    if (r > a && pos_g[3 * (size_t)(r - 1)] > t) {
      *gate = 1;
      continue;
    }
    const int g = t / chunk, slot = g - pl_chunk(pos_g, a, chunk);
    pl_clip_rows(cu_p, c, Lp, &pa, &pe);
    int p0, p1;
    if (!keys_side) {
      p0 = band.back < 0 ? pa : pl_after(pos_p, pa, pe, g - band.back - 1, chunk);
      p1 = pl_after(pos_p, pa, pe, g + band.fwd, chunk);
    } else {
      p0 = pl_after(pos_p, pa, pe, g - band.fwd - 1, chunk);
      p1 = band.back < 0 ? pe : pl_after(pos_p, pa, pe, g + band.back, chunk);
    }
    covered[r] = p1 > p0;
    if (slot >= groups) {
      *gate = 1;
      continue;
    }
    if (r > a && pl_chunk(pos_g, r - 1, chunk) == g) continue;  // not its group's first row
    const int r1 = pl_after(pos_g, r, e, g, chunk);
    if (r1 - r > max_g || p1 - p0 > max_p) {
      *gate = 1;
      continue;
    }
    const int s = c * groups + slot;
    (keys_side ? d.seq_kv : d.seq_q)[s] = r1 - r;
    (keys_side ? d.seq_q : d.seq_kv)[s] = p1 - p0;
    (keys_side ? d.off_k : d.off_q)[s] = r * row;
    (keys_side ? d.off_q : d.off_k)[s] = p0 * row;
    d.off_s[s] = (int64_t)(keys_side ? p0 : r) * H;
  }
}

// A layout that does not fit: every sequence of d emptied, so cuDNN computes nothing and
// the gated own kernels take the call. The window mask (wh >= 0): also a spatial extent
// (gate[1..4], pl_span) past the radii wh, ww, where a key's tile can be out of a query's
// box in y or x, so its band in t is not the visible set; that sets the gate.
__global__ void k_pl_gate(sdpa_desc d, int32_t *gate, int b, int wh, int ww) {
  const int wide = wh >= 0 && ((int64_t)gate[1] + gate[2] > wh || (int64_t)gate[3] + gate[4] > ww);
  if (gate[0] == 0 && !wide) return;
  const int first = blockIdx.x * blockDim.x + threadIdx.x;
  if (wide && first == 0) gate[0] = 1;
  for (int s = first; s < b; s += gridDim.x * blockDim.x) d.seq_q[s] = d.seq_kv[s] = 0;
}

// Forward, gate clear: a query row that sees no key gets out = 0, lse = -inf (the contract).
// One warp per (token, head) row.
__global__ void k_pl_no_keys(act_t *out, float *lse, const uint8_t *covered, const int32_t *gate,
                             int Lq, int H, int Dh) {
  if (*gate) return;
  const int lane = threadIdx.x & 31;
  const size_t rows = (size_t)Lq * H;
  for (size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32; r < rows;
       r += (size_t)gridDim.x * blockDim.x / 32) {
    if (covered[r / H]) continue;
    for (int d = lane; d < Dh; d += 32) kcu_st(out, r * Dh + d, 0.0f);
    if (lane == 0) lse[r] = -INFINITY;
  }
}

// Backward, gate clear: dst += src (fp32 sum, rounded once) on the covered token rows (the
// others' share is zero and cuDNN's scratch there is not). One warp per row of E elements.
__global__ void k_pl_accumulate(act_t *dst, const act_t *src, const uint8_t *covered,
                                const int32_t *gate, int L, int E) {
  if (*gate) return;
  KCU_WARP_ROW(t, L)
    if (!covered[t]) continue;
    const size_t base = (size_t)t * E;
    for (int e = lane; e < E; e += 32) kcu_st(dst, base + e, kcu_ld(dst, base + e) + kcu_ld(src, base + e));
  KCU_WARP_ROW_END
}

// The pair list's shape: clips x KCU_SDPA_MASK_GROUPS sequences of at most the clips'
// bounds. *use = 0 (own kernels, no gate) for a full mask, an empty side, or what
// sdpa_begin refuses.
static tsr_status pl_begin(kb_t *kb, const char *op, kcu_sdpa_kind kind, const kernels_mask *mask,
                           const void *const *args, int n_args, int n_clips, int max_q, int max_k,
                           int Lq, int Lk, int H, int Dh, sdpa_state **S, kcu_sdpa_key *key,
                           sdpa_plan **p, int *use) {
  *use = 0;
  if (mask->kind == KERNELS_MASK_FULL || Lq == 0 || Lk == 0) return TSR_OK;
  if ((int64_t)n_clips * KCU_SDPA_MASK_GROUPS > INT32_MAX) return TSR_OK;
  kcu_sdpa_shape sh = {kind, n_clips * KCU_SDPA_MASK_GROUPS, max_q, max_k, Lq, Lk, H, Dh};
  tsr_status st = sdpa_begin(kb, op, &sh, sdpa_aligned(args, n_args), 1, S, key, p, use);
  if (!st && *use) (*S)->mask_calls[mask->kind == KERNELS_MASK_WINDOW][kind]++;
  return st;
}

// Fills the groups of one side (after k_pl_init) into d; the query side of the window mask
// also the rows' spatial extent after the gate.
static tsr_status pl_fill(kb_t *kb, const char *op, const sdpa_desc *d, int32_t *gate, uint8_t *covered,
                          int keys_side, const kernels_mask *mask, const kcu_sdpa_key *key,
                          const int32_t *cu_q, const int32_t *cu_k, const int32_t *pos_q,
                          const int32_t *pos_k, int n_clips, int Lq, int Lk, int H, int Dh) {
  cudaStream_t s = kcu(kb)->stream;
  k_pl_init<<<kcu_blocks((size_t)key->b + 1, 256), 256, 0, s>>>(*d, keys_side ? NULL : gate, key->b, Lq,
                                                               Lk, H, Dh);
  KCU_LAUNCHED(op);
  const int Lg = keys_side ? Lk : Lq, Lp = keys_side ? Lq : Lk;
  k_pl_fill<<<kcu_blocks((size_t)(Lg > Lp ? Lg : Lp), 256), 256, 0, s>>>(
      *d, gate, covered, keys_side ? cu_k : cu_q, keys_side ? cu_q : cu_k, keys_side ? pos_k : pos_q,
      keys_side ? pos_q : pos_k, keys_side, pl_band_of(mask),
      !keys_side && mask->kind == KERNELS_MASK_WINDOW ? gate + 1 : NULL, mask->tile_h, mask->tile_w,
      KCU_SDPA_MASK_GROUPS, n_clips, Lg, Lp, keys_side ? key->skv : key->sq,
      keys_side ? key->sq : key->skv, H, Dh);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

static tsr_status pl_gate(kb_t *kb, const char *op, const sdpa_desc *d, int32_t *gate, int b,
                          const kernels_mask *mask) {
  const int window = mask->kind == KERNELS_MASK_WINDOW;
  k_pl_gate<<<kcu_blocks((size_t)b, 256), 256, 0, kcu(kb)->stream>>>(*d, gate, b, window ? mask->wh : -1,
                                                                     window ? mask->ww : -1);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

tsr_status kcu_sdpa_masked_forward(kb_t *kb, const char *op, int *done, const int32_t **gate, void *out,
                                   float *lse, const void *q, const void *k, const void *v,
                                   const int32_t *cu_q, const int32_t *cu_k, const int32_t *pos_q,
                                   const int32_t *pos_k, kernels_mask mask, int n_clips, int max_q,
                                   int max_k, int Lq, int Lk, int H, int Dh, float scale) {
  *done = 0;
  *gate = NULL;
  sdpa_state *S = NULL;
  kcu_sdpa_key key;
  sdpa_plan *p = NULL;
  int use;
  const void *args[] = {out, lse, q, k, v};
  tsr_status st = pl_begin(kb, op, KCU_SDPA_PARTIAL_FWD, &mask, args, 5, n_clips, max_q, max_k, Lq, Lk,
                           H, Dh, &S, &key, &p, &use);
  if (st || !use) return st;
  sdpa_mem m;
  if ((st = sdpa_prepare(kb, op, &key, sdpa_round(5 * sizeof(int32_t)) + sdpa_round((size_t)Lq), p->workspace,
                         NULL, NULL, n_clips, max_q, max_k, Lq, Lk, H, Dh, &m)))
    return st;
  int32_t *g = (int32_t *)sdpa_take(&m, 5 * sizeof(int32_t));  // the gate, the spatial extent
  uint8_t *covered = (uint8_t *)sdpa_take(&m, (size_t)Lq);
  if ((st = pl_fill(kb, op, &m.d, g, covered, 0, &mask, &key, cu_q, cu_k, pos_q, pos_k, n_clips, Lq, Lk,
                    H, Dh)) ||
      (st = pl_gate(kb, op, &m.d, g, key.b, &mask)) ||
      (st = sdpa_run_forward(op, S, p, &m.d, out, lse, q, k, v, scale, m.next)))
    return st;
  k_pl_no_keys<<<kcu_blocks((size_t)Lq * H * 32, 256), 256, 0, kcu(kb)->stream>>>((act_t *)out, lse,
                                                                                  covered, g, Lq, H, Dh);
  KCU_LAUNCHED(op);
  *gate = g;
  *done = 1;
  return TSR_OK;
}

// The one-batch backward (windows of 1 to PL_ONE_BATCH_MAX_W chunks): the sequences' dK, dV
// shares at their own offsets off_dkv[s] (the exclusive sum of the key ranges' rows, in
// elements; off_dkv[b] the total), for scratch of at most cap rows: more sets the gate.
// One block.
__global__ void k_pl_scan(const int32_t *len, int64_t *off_dkv, int32_t *gate, int b, int64_t cap,
                          int64_t row) {
  __shared__ int64_t part[1024];
  const int T = blockDim.x, t = threadIdx.x, per = (b + T - 1) / T;
  const int s0 = min(b, t * per), s1 = min(b, s0 + per);
  int64_t sum = 0;
  for (int s = s0; s < s1; s++) sum += len[s];
  part[t] = sum;
  __syncthreads();
  if (t == 0) {
    int64_t acc = 0;
    for (int i = 0; i < T; i++) {
      int64_t x = part[i];
      part[i] = acc;
      acc += x;
    }
    if (acc > cap) *gate = 1;
    off_dkv[b] = acc * row;
  }
  __syncthreads();
  int64_t acc = part[t];
  for (int s = s0; s < s1; s++) {
    off_dkv[s] = acc * row;
    acc += len[s];
  }
}

// Gate clear: dk, dv += the shares of every query-chunk sequence whose key range holds the
// key row (the chunks [gk - fwd, gk + back] of its clip that the call has), summed in fp32
// in chunk order and rounded once. One warp per key row of E = H * Dh elements.
__global__ void k_pl_sum_kv(act_t *dk, act_t *dv, const act_t *sk, const act_t *sv, sdpa_desc d,
                            const int64_t *off_dkv, const int32_t *gate, const int32_t *cu_q,
                            const int32_t *cu_k, const int32_t *pos_q, const int32_t *pos_k, pl_band band,
                            int groups, int n_clips, int Lq, int Lk, int E) {
  const int chunk = band.chunk;
  if (*gate) return;
  KCU_WARP_ROW(j, Lk)
    const int c = kcu_clip_of(cu_k, n_clips, j);
    int a, e, qa, qe;
    pl_clip_rows(cu_k, c, Lk, &a, &e);
    pl_clip_rows(cu_q, c, Lq, &qa, &qe);
    if (j < a || j >= e || qa == qe) continue;
    const int gk = pl_chunk(pos_k, j, chunk), g0 = pl_chunk(pos_q, qa, chunk);
    const int lo = max(gk - band.fwd, g0), hi = min(gk + band.back, g0 + groups - 1);
    for (int x = lane; x < E; x += 32) {
      const size_t dst = (size_t)j * E + x;
      float ak = kcu_ld(dk, dst), av = kcu_ld(dv, dst);
      for (int g = lo; g <= hi; g++) {
        const int s = c * groups + (g - g0);
        const int64_t k0 = d.off_k[s] / E;
        if (d.seq_q[s] == 0 || j < k0 || j >= k0 + d.seq_kv[s]) continue;
        const size_t src = (size_t)(off_dkv[s] + (j - k0) * (int64_t)E) + x;
        ak += kcu_ld(sk, src);
        av += kcu_ld(sv, src);
      }
      kcu_st(dk, dst, ak);
      kcu_st(dv, dst, av);
    }
  KCU_WARP_ROW_END
}

// Bands of back + fwd + 1 <= this + 1 chunks take the one-batch backward: each key row lies
// in at most back + fwd + 1 query chunks' key ranges, so the dK, dV scratch is at most that
// many Lk rows each (block_causal W of 1 to 3, window wt 0 or 1). Wider bands (and
// block_causal W = 0, every earlier chunk) take two batches instead.
enum { PL_ONE_BATCH_MAX_W = 3 };

// The backward on one plan. A band of at most PL_ONE_BATCH_MAX_W + 1 chunks: ONE batch,
// the query-chunk groups with dK, dV at their own offsets (the masked backward's graph),
// the dq share added per query row, the dk, dv shares summed per key row (k_pl_sum_kv):
// every visible chunk pair computed once. Otherwise two batches: the query-chunk groups (dq) and the key-chunk groups
// (dk, dv), each writing all three gradients into scratch (the other two dropped): every
// visible pair twice. The kept shares are added to the zeroed (partial: the accumulated)
// gradients. The batches' dQ accumulator and delta are shared; the stream orders them.
tsr_status kcu_sdpa_masked_backward(kb_t *kb, const char *op, int partial, int *done,
                                    const int32_t **gate, float **delta_ws, void *dq, void *dk,
                                    void *dv, const void *dout, const void *q, const void *k,
                                    const void *v, const void *out, const float *lse,
                                    const int32_t *cu_q, const int32_t *cu_k, const int32_t *pos_q,
                                    const int32_t *pos_k, kernels_mask mask, int n_clips, int max_q,
                                    int max_k, int Lq, int Lk, int H, int Dh, float scale) {
  *done = 0;
  *gate = NULL;
  *delta_ws = NULL;
  sdpa_state *S = NULL;
  kcu_sdpa_key key;
  sdpa_plan *p = NULL;
  int use;
  const pl_band band = pl_band_of(&mask);
  const int one_batch = band.back >= 0 && band.back + band.fwd <= PL_ONE_BATCH_MAX_W;
  const void *args[] = {dout, q, k, v, out, lse};
  tsr_status st = pl_begin(kb, op, one_batch ? KCU_SDPA_MASKED_BWD : KCU_SDPA_PARTIAL_BWD, &mask, args, 6,
                           n_clips, max_q, max_k, Lq, Lk, H, Dh, &S, &key, &p, &use);
  if (st || !use) return st;
  const size_t nq = (size_t)Lq * H * Dh, nk = (size_t)Lk * H * Dh, rows = (size_t)Lq * H;
  // one batch: dK's and dV's offsets and their (back + fwd + 1) x Lk rows; two: the key side's
  // description and one Lk each. Then the gate, covered rows of each side, delta, the fp32
  // dQ accumulator without determinism, the dq share.
  const int64_t cap = one_batch ? (int64_t)(band.back + band.fwd + 1) * Lk : Lk;
  size_t extra = (one_batch ? sdpa_round(sizeof(int64_t) * (key.b + 1)) : sdpa_ragged_bytes(key.b)) +
                 2 * sdpa_round((size_t)cap * H * Dh * sizeof(act_t)) + sdpa_round(5 * sizeof(int32_t)) +
                 sdpa_round((size_t)Lq) + sdpa_round((size_t)Lk) + sdpa_round(rows * sizeof(float)) +
                 (key.deterministic ? 0 : sdpa_round(nq * sizeof(float))) + sdpa_round(nq * sizeof(act_t));
  sdpa_mem m;
  if ((st = sdpa_prepare(kb, op, &key, extra, p->workspace, NULL, NULL, n_clips, max_q, max_k, Lq, Lk, H,
                         Dh, &m)))
    return st;
  sdpa_desc dkv = {};
  int64_t *off_dkv = NULL;
  if (one_batch) off_dkv = (int64_t *)sdpa_take(&m, sizeof(int64_t) * (key.b + 1));
  else dkv = sdpa_take_desc(&m, key.b);
  void *gk = sdpa_take(&m, (size_t)cap * H * Dh * sizeof(act_t));
  void *gv = sdpa_take(&m, (size_t)cap * H * Dh * sizeof(act_t));
  int32_t *g = (int32_t *)sdpa_take(&m, 5 * sizeof(int32_t));  // the gate, the spatial extent
  uint8_t *cov_q = (uint8_t *)sdpa_take(&m, (size_t)Lq), *cov_k = (uint8_t *)sdpa_take(&m, (size_t)Lk);
  float *delta = (float *)sdpa_take(&m, rows * sizeof(float));
  void *acc = key.deterministic ? NULL : sdpa_take(&m, nq * sizeof(float));
  void *gq = sdpa_take(&m, nq * sizeof(act_t));
  cudaStream_t stream = kcu(kb)->stream;
  if ((st = pl_fill(kb, op, &m.d, g, cov_q, 0, &mask, &key, cu_q, cu_k, pos_q, pos_k, n_clips, Lq, Lk, H,
                    Dh)))
    return st;
  if (one_batch) {
    k_pl_scan<<<1, 1024, 0, stream>>>(m.d.seq_kv, off_dkv, g, key.b, cap, (int64_t)H * Dh);
    KCU_LAUNCHED(op);
  } else if ((st = pl_fill(kb, op, &dkv, g, cov_k, 1, &mask, &key, cu_q, cu_k, pos_q, pos_k, n_clips, Lq,
                           Lk, H, Dh)) ||
             (st = pl_gate(kb, op, &dkv, g, key.b, &mask))) {
    return st;
  }
  if ((st = pl_gate(kb, op, &m.d, g, key.b, &mask))) return st;
  if (!partial) {
    if (dq) KCU_CUDA(op, cudaMemsetAsync(dq, 0, nq * sizeof(act_t), stream));
    if (dk) KCU_CUDA(op, cudaMemsetAsync(dk, 0, nk * sizeof(act_t), stream));
    if (dv) KCU_CUDA(op, cudaMemsetAsync(dv, 0, nk * sizeof(act_t), stream));
  }
  if (dq || one_batch) {
    if (acc) KCU_CUDA(op, cudaMemsetAsync(acc, 0, nq * sizeof(float), stream));
    if ((st = sdpa_run_backward(op, S, p, &m.d, gq, gk, gv, dout, q, k, v, out, lse, delta, acc, off_dkv,
                                scale, m.next)))
      return st;
  }
  if (dq) {
    k_pl_accumulate<<<kcu_warp_blocks(Lq), 256, 0, stream>>>((act_t *)dq, (const act_t *)gq, cov_q, g, Lq,
                                                             H * Dh);
    KCU_LAUNCHED(op);
  }
  if (dk && one_batch) {
    k_pl_sum_kv<<<kcu_warp_blocks(Lk), 256, 0, stream>>>(
        (act_t *)dk, (act_t *)dv, (const act_t *)gk, (const act_t *)gv, m.d, off_dkv, g, cu_q, cu_k, pos_q,
        pos_k, band, KCU_SDPA_MASK_GROUPS, n_clips, Lq, Lk, H * Dh);
    KCU_LAUNCHED(op);
  } else if (dk) {
    // dq of this batch is dropped: its accumulator needs no zeroing
    if ((st = sdpa_run_backward(op, S, p, &dkv, gq, gk, gv, dout, q, k, v, out, lse, delta, acc, NULL, scale,
                                m.next)))
      return st;
    k_pl_accumulate<<<kcu_warp_blocks(Lk), 256, 0, stream>>>((act_t *)dk, (const act_t *)gk, cov_k, g, Lk,
                                                             H * Dh);
    KCU_LAUNCHED(op);
    k_pl_accumulate<<<kcu_warp_blocks(Lk), 256, 0, stream>>>((act_t *)dv, (const act_t *)gv, cov_k, g, Lk,
                                                             H * Dh);
    KCU_LAUNCHED(op);
  }
  *gate = g;
  *delta_ws = delta;
  *done = 1;
  return TSR_OK;
}
