#include "model/dist/ring_attention.h"

#include <stdlib.h>
#include <string.h>

#include "model/dist/cp_workspace.h"

struct ring_attention {
  const kernels_backend *kb;
  cp_workspace *ws;         // where the work buffers are carved from: own_ws, or a shared one
  cp_workspace *own_ws;     // the ring's own, until ring_attention_use_workspace
  int ws_region;
  const comm_backend *cb;   // its buffers are in kb's memory space
  comm_group *g;
  int k, p;                 // group size, this rank's place in it
  int n_clips;
  int64_t *blk;             // (k) tokens of each owner's block
  int *longest;             // (k) the longest chunk of each owner's block
  int64_t maxblk;           // largest block
  int32_t **cu;             // (k) backend arrays of (n_clips + 1) chunk offsets per owner
  int cu_cap;               // clips the cu arrays hold
  void *kv[2];              // double buffer: K block then V block, (2, maxblk, H, Dh) [act]
  void *grad[2];            // double buffer: dK then dV of the travelling block [act]
  void *gpart;              // (2, maxblk, H, Dh) [act]: this rank's share of a block's dK, dV
  void *pout;               // (maxblk, H, Dh) [act] partial output of one block
  float *plse, *delta;      // (maxblk, H) [f32]
  kernels_mask mask;        // ring_attention_set_mask's (FULL: none)
  int32_t *pos;             // (k, maxblk, 3) every owner's token positions, maxblk apart
  int32_t *pos_send;        // (maxblk, 3) this rank's, padded for the allgather
  int64_t pos_cap;          // blocks' tokens pos and pos_send hold
};

void ring_chunk(int64_t L, int k, int o, int64_t *first, int64_t *len) {
  int64_t base = L / k, rem = L % k;
  *len = base + (o < rem);
  *first = o * base + (o < rem ? o : rem);
}

tsr_status ring_attention_create(ring_attention **out, const kernels_backend *kb,
                                 const comm_backend *cb, comm_group *g) {
  *out = NULL;
  if (!kb || !cb || !g) return err_set(TSR_EINVAL, "ring attention: no backend or group");
  ring_attention *ra = calloc(1, sizeof *ra);
  if (!ra) return err_set(TSR_ENOMEM, "ring attention: out of memory");
  ra->kb = kb;
  ra->cb = cb;
  ra->g = g;
  ra->k = comm_group_size(g);
  ra->p = comm_group_rank(g);
  ra->blk = calloc((size_t)ra->k, sizeof *ra->blk);
  ra->longest = calloc((size_t)ra->k, sizeof *ra->longest);
  ra->cu = calloc((size_t)ra->k, sizeof *ra->cu);
  if (!ra->blk || !ra->longest || !ra->cu) {
    ring_attention_free(&ra);
    return err_set(TSR_ENOMEM, "ring attention: out of memory");
  }
  tsr_status st = cp_workspace_create(&ra->own_ws, kb);
  if (st) {
    ring_attention_free(&ra);
    return st;
  }
  ra->ws = ra->own_ws;
  *out = ra;
  return TSR_OK;
}

void ring_attention_free(ring_attention **pra) {
  ring_attention *ra = *pra;
  if (!ra) return;
  cp_workspace_free(&ra->own_ws);
  ra->kb->free(ra->kb, ra->pos);
  ra->kb->free(ra->kb, ra->pos_send);
  for (int o = 0; ra->cu && o < ra->k; o++) ra->kb->free(ra->kb, ra->cu[o]);
  free(ra->cu);
  free(ra->longest);
  free(ra->blk);
  free(ra);
  *pra = NULL;
}

tsr_status ring_attention_set_clips(ring_attention *ra, int n_clips, const int64_t *clip_tokens) {
  const kernels_backend *kb = ra->kb;
  tsr_status st = TSR_OK;
  if (n_clips > ra->cu_cap) {
    for (int o = 0; o < ra->k; o++) {
      kb->free(kb, ra->cu[o]);
      ra->cu[o] = NULL;
      if ((st = kb->alloc(kb, (void **)&ra->cu[o], (size_t)(n_clips + 1) * sizeof(int32_t))))
        return st;
    }
    ra->cu_cap = n_clips;
  }
  int32_t *host = malloc((size_t)(n_clips + 1) * sizeof *host);
  if (!host) return err_set(TSR_ENOMEM, "ring attention: out of memory");
  ra->n_clips = n_clips;
  ra->mask = (kernels_mask){.kind = KERNELS_MASK_FULL};
  ra->maxblk = 0;
  for (int o = 0; o < ra->k && !st; o++) {
    int64_t total = 0, longest = 0;
    host[0] = 0;
    for (int c = 0; c < n_clips; c++) {
      int64_t first, len;
      if (clip_tokens[c] < 0) {
        st = err_set(TSR_EINVAL, "ring attention: clip %d has %lld tokens", c,
                     (long long)clip_tokens[c]);
        break;
      }
      ring_chunk(clip_tokens[c], ra->k, o, &first, &len);
      total += len;
      if (len > longest) longest = len;
      if (total > INT32_MAX) {
        st = err_set(TSR_EINVAL, "ring attention: a rank's block exceeds 2^31 tokens");
        break;
      }
      host[c + 1] = (int32_t)total;
    }
    ra->blk[o] = total;
    ra->longest[o] = (int)longest;  // <= total <= INT32_MAX
    if (total > ra->maxblk) ra->maxblk = total;
    if (!st) st = kb->to_device(kb, ra->cu[o], host, (size_t)(n_clips + 1) * sizeof *host);
  }
  free(host);
  return st;
}

// The work buffers carved from the workspace: kv[2], grad[2], gpart (2 * maxblk * E each),
// pout (maxblk * E) [act], plse, delta (maxblk * H) [f32]; returns the bytes (base NULL:
// sizes only).
static size_t carve_buffers(ring_attention *ra, char *base, kernels_dtype act, int64_t maxblk,
                            int H, int Dh) {
  size_t E = (size_t)H * Dh, a = kernels_dtype_size(act), used = 0;
  size_t two = 2 * (size_t)maxblk * E * a, one = (size_t)maxblk * E * a;
  size_t f = (size_t)maxblk * (size_t)H * sizeof(float);
  void **p2[5] = {&ra->kv[0], &ra->kv[1], &ra->grad[0], &ra->grad[1], &ra->gpart};
  for (int i = 0; i < 5; i++) {
    size_t at = cp_workspace_carve(&used, two);
    if (base) *p2[i] = base + at;
  }
  size_t at_out = cp_workspace_carve(&used, one), at_lse = cp_workspace_carve(&used, f);
  size_t at_delta = cp_workspace_carve(&used, f);
  if (base) {
    ra->pout = base + at_out;
    ra->plse = (float *)(base + at_lse), ra->delta = (float *)(base + at_delta);
  }
  return used;
}

// The work buffers for blocks of maxblk tokens of E = H * Dh values, carved from the
// workspace (fetched every call: another group may have grown a shared one).
static tsr_status ensure_buffers(ring_attention *ra, int H, int Dh) {
  void *base;
  size_t bytes = carve_buffers(ra, NULL, ra->kb->act_dtype, ra->maxblk, H, Dh);
  tsr_status st = cp_workspace_get(ra->ws, ra->ws_region, bytes, &base);
  if (!st) carve_buffers(ra, base, ra->kb->act_dtype, ra->maxblk, H, Dh);
  return st;
}

// Owner of the block a rank holds at ring step s.
static int owner_at(const ring_attention *ra, int s) { return (ra->p - s + ra->k) % ra->k; }

// The bound of the clips' lengths in owner o's block for the attention entries (kernels.h
// max_len): its longest chunk, rounded as the model rounds a batch's (so that at group size
// 1 it is the bound the model keys its recorded graphs by).
static int bound_of(const ring_attention *ra, int o) {
  return kernels_attention_max_len(ra->longest[o], ra->blk[o]);
}

tsr_status ring_attention_set_mask(ring_attention *ra, kernels_mask mask, const int32_t *pos) {
  const kernels_backend *kb = ra->kb;
  ra->mask = mask;
  if (mask.kind == KERNELS_MASK_FULL) return TSR_OK;
  if (!kernels_has(kb, attention_masked_forward) ||
      !kernels_has(kb, attention_masked_partial_backward))
    return err_set(TSR_EINVAL, "ring attention: backend %s has no masked attention entries "
                   "(attention_masked_forward, attention_masked_partial_backward)", kb->name);
  tsr_status st = TSR_OK;
  int64_t need = ra->maxblk > 0 ? ra->maxblk : 1;
  if (need > ra->pos_cap) {
    kb->free(kb, ra->pos), kb->free(kb, ra->pos_send);
    ra->pos = ra->pos_send = NULL, ra->pos_cap = 0;
    if ((st = kb->alloc(kb, (void **)&ra->pos, (size_t)(ra->k * need * 3) * sizeof(int32_t))) ||
        (st = kb->alloc(kb, (void **)&ra->pos_send, (size_t)(need * 3) * sizeof(int32_t))))
      return st;
    ra->pos_cap = need;
  }
  size_t mine = (size_t)ra->blk[ra->p] * 3 * sizeof(int32_t);
  if (mine && (st = kb->copy(kb, ra->pos_send, pos, mine))) return st;
  return ra->cb->allgather(ra->cb, ra->g, ra->pos_send, ra->pos,
                           (int64_t)((size_t)ra->maxblk * 3 * sizeof(int32_t)));
}

// Owner o's token positions in the gathered array.
static const int32_t *pos_of(const ring_attention *ra, int o) {
  return ra->pos + (size_t)o * (size_t)ra->maxblk * 3;
}

// Local queries against owner o's K/V block (kk, vv), masked when a mask is set:
// attention_partial_forward's or attention_masked_forward's out: (Lq, H, Dh), lse: (Lq, H).
static tsr_status block_forward(const ring_attention *ra, void *out, float *lse, const void *q,
                                const void *kk, const void *vv, int o, int H, int Dh,
                                float scale) {
  const kernels_backend *kb = ra->kb;
  const int p = ra->p, Lq = (int)ra->blk[p], Lk = (int)ra->blk[o];
  if (ra->mask.kind == KERNELS_MASK_FULL)
    return kb->attention_partial_forward(kb, out, lse, q, kk, vv, ra->cu[p], ra->cu[o], ra->n_clips,
                                         bound_of(ra, p), bound_of(ra, o), Lq, Lk, H, Dh, scale);
  return kb->attention_masked_forward(kb, out, lse, q, kk, vv, ra->cu[p], ra->cu[o], pos_of(ra, p),
                                      pos_of(ra, o), ra->mask, ra->n_clips, bound_of(ra, p),
                                      bound_of(ra, o), Lq, Lk, H, Dh, scale);
}

// The backward of block_forward (dq, dk, dv accumulated: attention_partial_backward's), from
// the local queries' final out, lse and delta.
static tsr_status block_backward(const ring_attention *ra, void *dq, void *dk, void *dv,
                                 const void *dout, const void *q, const void *kk, const void *vv,
                                 const void *out, const float *lse, int o, int H, int Dh,
                                 float scale) {
  const kernels_backend *kb = ra->kb;
  const int p = ra->p, Lq = (int)ra->blk[p], Lk = (int)ra->blk[o];
  if (ra->mask.kind == KERNELS_MASK_FULL)
    return kb->attention_partial_backward(kb, dq, dk, dv, dout, q, kk, vv, out, lse, ra->delta,
                                          ra->cu[p], ra->cu[o], ra->n_clips, bound_of(ra, p),
                                          bound_of(ra, o), Lq, Lk, H, Dh, scale);
  return kb->attention_masked_partial_backward(kb, dq, dk, dv, dout, q, kk, vv, out, lse,
                                               ra->delta, ra->cu[p], ra->cu[o], pos_of(ra, p),
                                               pos_of(ra, o), ra->mask, ra->n_clips,
                                               bound_of(ra, p), bound_of(ra, o), Lq, Lk, H, Dh,
                                               scale);
}

tsr_status ring_attention_forward(ring_attention *ra, void *out, float *lse, const void *q,
                                  const void *k, const void *v, int H, int Dh, float scale) {
  const kernels_backend *kb = ra->kb;
  const comm_backend *cb = ra->cb;
  const int Lq = (int)ra->blk[ra->p];
  if (ra->k == 1 && ra->mask.kind == KERNELS_MASK_FULL)
    return kb->attention_forward(kb, out, lse, q, k, v, ra->cu[0], ra->n_clips, bound_of(ra, 0), Lq,
                                 H, Dh, scale);
  if (ra->k == 1) return block_forward(ra, out, lse, q, k, v, 0, H, Dh, scale);
  tsr_status st = ensure_buffers(ra, H, Dh);
  if (st) return st;
  const size_t E = (size_t)H * Dh, half = (size_t)ra->maxblk * E;
  const int64_t bytes = (int64_t)kernels_act_bytes(kb, 2 * half);
  const size_t qbytes = kernels_act_bytes(kb, (size_t)Lq * E);
  if ((st = kb->copy(kb, ra->kv[0], k, qbytes)) ||
      (st = kb->copy(kb, kernels_act_at(kb, ra->kv[0], half), v, qbytes)))
    return st;
  int cur = 0;
  for (int s = 0; s < ra->k && !st; s++) {
    int o = owner_at(ra, s);
    comm_request *req = NULL;
    if (s < ra->k - 1 && (st = cb->ring_start(cb, ra->g, ra->kv[cur], ra->kv[1 - cur], bytes, &req)))
      break;
    const void *kb_k = ra->kv[cur], *kb_v = kernels_act_at(kb, ra->kv[cur], half);
    if (s == 0) {
      st = block_forward(ra, out, lse, q, kb_k, kb_v, o, H, Dh, scale);
    } else {
      st = block_forward(ra, ra->pout, ra->plse, q, kb_k, kb_v, o, H, Dh, scale);
      if (!st) st = kb->attention_merge(kb, out, lse, ra->pout, ra->plse, Lq, H, Dh);
    }
    tsr_status wst = cb->wait(cb, &req);
    if (!st) st = wst;
    cur = 1 - cur;
  }
  return st;
}

// Backward, pipelined so that both exchanges overlap compute. At step s a rank holds the
// K/V block of owner o = p - s and:
//   1. starts sending that block on (the next rank uses it at step s + 1);
//   2. computes its queries' share of the block's dK/dV (and of dq) into gpart;
//   3. waits for the block's gradient accumulator, which the previous rank sent at the end
//      of its step s - 1 (it traveled during 2), and adds gpart to it (step 0: the
//      accumulator is gpart itself);
//   4. starts sending the accumulator on: it travels while the next rank computes its own
//      share of the same block (its step s + 1), and after k sends reaches the owner.
// The accumulator of block o sums the ranks' shares in ring order p = o, o + 1, ...,
// o + k - 1, each share rounded once to the act dtype (kernels.h) before it is added.
tsr_status ring_attention_backward(ring_attention *ra, void *dq, void *dk, void *dv,
                                   const void *dout, const void *q, const void *k,
                                   const void *v, const void *out, const float *lse, int H,
                                   int Dh, float scale) {
  const kernels_backend *kb = ra->kb;
  const comm_backend *cb = ra->cb;
  const int Lq = (int)ra->blk[ra->p];
  if (ra->k == 1 && ra->mask.kind == KERNELS_MASK_FULL)
    return kb->attention_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, ra->cu[0], ra->n_clips,
                                  bound_of(ra, 0), Lq, H, Dh, scale);
  if (ra->k == 1)
    return kb->attention_masked_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, ra->cu[0],
                                         pos_of(ra, 0), ra->mask, ra->n_clips, bound_of(ra, 0), Lq,
                                         H, Dh, scale);
  tsr_status st = ensure_buffers(ra, H, Dh);
  if (st) return st;
  const size_t E = (size_t)H * Dh, half = (size_t)ra->maxblk * E;
  const int64_t bytes = (int64_t)kernels_act_bytes(kb, 2 * half);
  const size_t qbytes = kernels_act_bytes(kb, (size_t)Lq * E);
  if ((st = kb->attention_delta(kb, ra->delta, dout, out, Lq, H, Dh)) ||
      (st = kb->memset_zero(kb, dq, qbytes)) ||
      (st = kb->copy(kb, ra->kv[0], k, qbytes)) ||
      (st = kb->copy(kb, kernels_act_at(kb, ra->kv[0], half), v, qbytes)))
    return st;
  comm_request *req_g = NULL;  // the accumulator in flight: grad[1 - g] -> grad[g]
  int cur = 0, g = 0;
  for (int s = 0; s < ra->k && !st; s++) {
    int o = owner_at(ra, s);
    comm_request *req_kv = NULL;
    if (s < ra->k - 1 &&
        (st = cb->ring_start(cb, ra->g, ra->kv[cur], ra->kv[1 - cur], bytes, &req_kv)))
      break;
    // step 0 computes straight into the accumulator it then sends
    void *share = s == 0 ? ra->grad[g] : ra->gpart;
    st = kb->memset_zero(kb, share, (size_t)bytes);
    if (!st) st = block_backward(ra, dq, share, kernels_act_at(kb, share, half), dout, q,
                                 ra->kv[cur], kernels_act_at(kb, ra->kv[cur], half), out, lse, o,
                                 H, Dh, scale);
    if (s > 0) {  // the block's accumulator has arrived in grad[g]: add this rank's share
      tsr_status w = cb->wait(cb, &req_g);
      if (!st) st = w;
      if (!st) st = kb->add_act(kb, ra->grad[g], ra->grad[g], ra->gpart, 2 * half);
    }
    if (!st) st = cb->ring_start(cb, ra->g, ra->grad[g], ra->grad[1 - g], bytes, &req_g);
    g = 1 - g;
    tsr_status w = cb->wait(cb, &req_kv);
    if (!st) st = w;
    cur = 1 - cur;
  }
  tsr_status w = cb->wait(cb, &req_g);  // this rank's own block, complete
  if (!st) st = w;
  if (st) return st;
  if ((st = kb->copy(kb, dk, ra->grad[g], qbytes))) return st;
  return kb->copy(kb, dv, kernels_act_at(kb, ra->grad[g], half), qbytes);
}

void ring_attention_use_workspace(ring_attention *ra, cp_workspace *ws, int region) {
  cp_workspace_free(&ra->own_ws);
  ra->ws = ws, ra->ws_region = region;
}

size_t ring_attention_index_bytes(int k, int max_clips) {
  return (size_t)k * ((size_t)max_clips + 1) * sizeof(int32_t);  // set_clips
}

size_t ring_attention_work_bytes(kernels_dtype act, int k, int64_t maxblk, int H, int Dh) {
  if (k < 2) return 0;  // a group of one attends locally: no work buffers
  ring_attention ra = {0};
  return carve_buffers(&ra, NULL, act, maxblk, H, Dh);
}
