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
  int32_t *seq_q, *seq_kv;
  int64_t *off_q, *off_k, *off_s;
  char *next;  // the rest, handed out by sdpa_take
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

// Claims `extra` bytes after the ragged tensors plus the workspace, fills the ragged
// tensors from cu_q / cu_k (lengths clamped to max_q / max_k).
static tsr_status sdpa_prepare(kb_t *kb, const char *op, const kcu_sdpa_key *key, size_t extra,
                               int64_t workspace, const int32_t *cu_q, const int32_t *cu_k,
                               int n_clips, int max_q, int max_k, int Lq, int Lk, int H, int Dh,
                               sdpa_mem *m) {
  const int b = key->b;
  void *base;
  tsr_status st = kcu_scratch(kb, op, sdpa_ragged_bytes(b) + extra + sdpa_round((size_t)workspace), &base);
  if (st) return st;
  m->next = (char *)base;
  m->seq_q = (int32_t *)sdpa_take(m, sizeof(int32_t) * b);
  m->seq_kv = (int32_t *)sdpa_take(m, sizeof(int32_t) * b);
  m->off_q = (int64_t *)sdpa_take(m, sizeof(int64_t) * (b + 1));
  m->off_k = (int64_t *)sdpa_take(m, sizeof(int64_t) * (b + 1));
  m->off_s = (int64_t *)sdpa_take(m, sizeof(int64_t) * (b + 1));
  k_sdpa_ragged<<<kcu_blocks((size_t)b + 1, 256), 256, 0, kcu(kb)->stream>>>(
      m->seq_q, m->seq_kv, m->off_q, m->off_k, m->off_s, cu_q, cu_k, n_clips, b, max_q, max_k, Lq,
      Lk, H, Dh);
  KCU_LAUNCHED(op);
  return TSR_OK;
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
  if (p) {
    float neg_inf = -INFINITY;
    int64_t uids[] = {U_Q, U_K, U_V, U_O, U_STATS, U_SCALE, U_NEG_INF, U_SEQ_Q, U_SEQ_KV,
                      U_OFF_Q, U_OFF_K, U_OFF_V, U_OFF_O, U_OFF_S};
    void *ptrs[] = {(void *)q, (void *)k, (void *)v, out, lse, &scale, &neg_inf, m.seq_q, m.seq_kv,
                    m.off_q, m.off_k, m.off_k, m.off_q, m.off_s};
    if ((st = sdpa_execute(op, S, p, uids, ptrs, (int)(sizeof uids / sizeof uids[0]), m.next))) return st;
  }
  if (partial) {
    size_t rows = (size_t)Lq * H;
    k_sdpa_no_keys<<<kcu_blocks(rows * 32, 256), 256, 0, kcu(kb)->stream>>>(
        (act_t *)out, lse, m.seq_kv, cu_q, n_clips, Lq, H, Dh);
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
  float neg_inf = -INFINITY, one = 1.0f;
  int64_t uids[] = {U_Q, U_K, U_V, U_O, U_STATS, U_DO, U_DQ, U_DK, U_DV, U_SCALE, U_NEG_INF, U_ONE,
                    U_SEQ_Q, U_SEQ_KV, U_OFF_Q, U_OFF_K, U_OFF_V, U_OFF_O, U_OFF_S, U_DELTA, U_DQ_ACC};
  void *ptrs[] = {(void *)q, (void *)k, (void *)v, (void *)out, (void *)lse, (void *)dout, gq, gk, gv,
                  &scale, &neg_inf, &one, m.seq_q, m.seq_kv, m.off_q, m.off_k, m.off_k, m.off_q,
                  m.off_s, delta, acc};
  int nt = (int)(sizeof uids / sizeof uids[0]) - (acc ? 0 : 1);
  if ((st = sdpa_execute(op, S, p, uids, ptrs, nt, m.next))) return st;
  if (partial && dq) {
    k_sdpa_accumulate<<<kcu_warp_blocks(Lq), 256, 0, stream>>>((act_t *)dq, (const act_t *)gq, cu_q,
                                                               m.seq_kv, n_clips, Lq, H * Dh);
    KCU_LAUNCHED(op);
  }
  if (partial && dk) {
    k_sdpa_accumulate<<<kcu_warp_blocks(Lk), 256, 0, stream>>>((act_t *)dk, (const act_t *)gk, cu_k,
                                                               m.seq_q, n_clips, Lk, H * Dh);
    KCU_LAUNCHED(op);
    k_sdpa_accumulate<<<kcu_warp_blocks(Lk), 256, 0, stream>>>((act_t *)dv, (const act_t *)gv, cu_k,
                                                               m.seq_q, n_clips, Lk, H * Dh);
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
