#include "model/dist/ulysses_attention.h"

#include <stdlib.h>
#include <string.h>

#include "model/dist/cp_workspace.h"


enum { U_Q, U_K, U_V, U_OUT, U_DOUT, U_DQ, U_DK, U_DV, U_NBUF };  // head-layout tensors
enum { S_IN, S_OUT };  // staging slots: to the head layout, back to the sequence layout
enum { XMAX = 6 };     // tensors of one transfer: the backward's q, k, v, out, dout, lse

struct ulysses_attention {
  const kernels_backend *kb;
  const comm_backend *cb;     // its buffers are in kb's memory space
  comm_group *g;
  ring_attention *inner;      // hybrid: the ring over the stride group, else NULL
  cp_workspace *ws;           // where the work buffers are carved from: own_ws, or a shared one
  cp_workspace *own_ws;       // its own, until ulysses_attention_use_workspace
  int ws_region;
  int k, p;                   // group size, this rank's place in it
  int chunks;                 // ulysses_attention_set_chunks (1: blocking)
  int nc;                     // head chunks of the call in progress (1: blocking)
  int n_clips, clip_cap;
  int64_t *clip_tokens;       // (clip_cap) host: the microbatch's clip lengths
  int64_t *clip_off;          // (clip_cap) host: first token of each clip in the head layout
  int64_t *lq;                // (k) tokens member i holds in the sequence layout
  int64_t Lt, longest;        // the microbatch's tokens, its longest clip
  int32_t *cu;                // (clip_cap + 1) backend: whole-clip offsets
  int64_t *sb, *sd, *rb, *rd; // (k) each: the all-to-all's byte counts and displacements
  void *h[U_NBUF];            // (Lt, h_p, Dh) [act] each
  float *lseh;                // (Lt, h_p) [f32]
  void *send[2], *recv[2];    // staging of the all-to-alls, by slot (S_OUT: pipelined only)
  comm_request *req[2];       // the all-to-all in flight from each slot
  kernels_mask mask;          // ulysses_attention_set_mask's (FULL: none)
  int32_t *posh;              // (Lt, 3) backend: every token's position in the head layout
  int32_t *pos_all;           // (k, most, 3) backend: each member's positions, most apart
  int32_t *pos_send;          // (most, 3) backend: this rank's, padded for the allgather
  int64_t posh_cap, pos_cap;  // tokens posh holds; most that pos_all and pos_send hold
};

// The tensors one all-to-all moves: n of them, a head of tensor t being w[t] bytes, from src
// to dst (the sequence-layout tensors (Lq, H, w) on one side, the head-layout ones (Lt, h_p, w)
// on the other; a head chunk c of the latter is (Lt, its heads, w) at Lt * its first head * w).
typedef struct {
  int n;
  const void *src[XMAX];
  void *dst[XMAX];
  size_t w[XMAX];
} xfer;

static void heads_of(int H, int k, int j, int64_t *h0, int64_t *hn) { ring_chunk(H, k, j, h0, hn); }

// Head chunks of a call with H heads over k ranks: min(chunks, the most heads a member has),
// so that no chunk is empty on every member (1: blocking).
static int chunks_of(int chunks, int H, int k) {
  int64_t h0, hmax;
  heads_of(H, k, 0, &h0, &hmax);  // member 0 has the most heads
  return chunks > 1 && hmax > 1 ? (int)(chunks < hmax ? chunks : hmax) : 1;
}

// Member j's heads in chunk c of nc: chunk c (ring_chunk) of its heads ring_chunk(H, k, j).
static void chunk_heads(int H, int k, int nc, int j, int c, int64_t *h0, int64_t *hn) {
  int64_t first, n, f;
  heads_of(H, k, j, &first, &n);
  ring_chunk(n, nc, c, &f, hn);
  *h0 = first + f;
}

void hybrid_chunk(int64_t L, int k, int u, int p, int64_t *first, int64_t *len) {
  int64_t f1, l1, f2;
  ring_chunk(L, k / u, p / u, &f1, &l1);  // super-chunk of the ring position
  ring_chunk(l1, u, p % u, &f2, len);     // chunk of the block position inside it
  *first = f1 + f2;
}

void ulysses_attention_free(ulysses_attention **pua) {
  ulysses_attention *ua = *pua;
  if (!ua) return;
  cp_workspace_free(&ua->own_ws);
  ua->kb->free(ua->kb, ua->cu);
  ua->kb->free(ua->kb, ua->posh), ua->kb->free(ua->kb, ua->pos_all);
  ua->kb->free(ua->kb, ua->pos_send);
  free(ua->clip_tokens), free(ua->clip_off), free(ua->lq);
  free(ua->sb), free(ua->sd), free(ua->rb), free(ua->rd);
  free(ua);
  *pua = NULL;
}

tsr_status ulysses_attention_create(ulysses_attention **out, const kernels_backend *kb,
                                    const comm_backend *cb, comm_group *g,
                                    ring_attention *inner) {
  *out = NULL;
  if (!kb || !cb || !g) return err_set(TSR_EINVAL, "Ulysses attention: no backend or group");
  ulysses_attention *ua = calloc(1, sizeof *ua);
  if (!ua) return err_set(TSR_ENOMEM, "Ulysses attention: out of memory");
  ua->kb = kb, ua->cb = cb, ua->g = g, ua->inner = inner;
  ua->k = comm_group_size(g), ua->p = comm_group_rank(g);
  size_t k = (size_t)ua->k;
  ua->lq = calloc(k, sizeof *ua->lq);
  ua->sb = calloc(k, sizeof *ua->sb), ua->sd = calloc(k, sizeof *ua->sd);
  ua->rb = calloc(k, sizeof *ua->rb), ua->rd = calloc(k, sizeof *ua->rd);
  if (!ua->lq || !ua->sb || !ua->sd || !ua->rb || !ua->rd) {
    ulysses_attention_free(&ua);
    return err_set(TSR_ENOMEM, "Ulysses attention: out of memory");
  }
  tsr_status st = cp_workspace_create(&ua->own_ws, kb);
  if (st) {
    ulysses_attention_free(&ua);
    return st;
  }
  ua->ws = ua->own_ws;
  ua->chunks = ULYSSES_DEFAULT_CHUNKS;
  *out = ua;
  return TSR_OK;
}

static tsr_status grow_clips(ulysses_attention *ua, int n_clips) {
  if (n_clips <= ua->clip_cap) return TSR_OK;
  const kernels_backend *kb = ua->kb;
  kb->free(kb, ua->cu);
  ua->cu = NULL;
  free(ua->clip_tokens), free(ua->clip_off);
  ua->clip_tokens = malloc((size_t)n_clips * sizeof *ua->clip_tokens);
  ua->clip_off = malloc((size_t)n_clips * sizeof *ua->clip_off);
  ua->clip_cap = 0;
  if (!ua->clip_tokens || !ua->clip_off)
    return err_set(TSR_ENOMEM, "Ulysses attention: out of memory");
  tsr_status st = kb->alloc(kb, (void **)&ua->cu, (size_t)(n_clips + 1) * sizeof(int32_t));
  if (!st) ua->clip_cap = n_clips;
  return st;
}

tsr_status ulysses_attention_set_clips(ulysses_attention *ua, int n_clips,
                                       const int64_t *clip_tokens) {
  tsr_status st = grow_clips(ua, n_clips);
  if (st) return st;
  int32_t *host = malloc((size_t)(n_clips + 1) * sizeof *host);
  if (!host) return err_set(TSR_ENOMEM, "Ulysses attention: out of memory");
  memset(ua->lq, 0, (size_t)ua->k * sizeof *ua->lq);
  ua->n_clips = n_clips, ua->Lt = 0, ua->longest = 0;
  ua->mask = (kernels_mask){.kind = KERNELS_MASK_FULL};
  host[0] = 0;
  for (int c = 0; c < n_clips && !st; c++) {
    if (clip_tokens[c] < 0) {
      st = err_set(TSR_EINVAL, "Ulysses attention: clip %d has %lld tokens", c,
                   (long long)clip_tokens[c]);
      break;
    }
    ua->clip_tokens[c] = clip_tokens[c];
    ua->clip_off[c] = ua->Lt;
    ua->Lt += clip_tokens[c];
    if (clip_tokens[c] > ua->longest) ua->longest = clip_tokens[c];
    if (ua->Lt > INT32_MAX) st = err_set(TSR_EINVAL, "Ulysses attention: a microbatch exceeds 2^31 tokens");
    host[c + 1] = (int32_t)ua->Lt;
    for (int j = 0; j < ua->k; j++) {
      int64_t first, len;
      ring_chunk(clip_tokens[c], ua->k, j, &first, &len);
      ua->lq[j] += len;
    }
  }
  if (!st) st = ua->kb->to_device(ua->kb, ua->cu, host, (size_t)(n_clips + 1) * sizeof *host);
  free(host);
  return st;
}

// The position buffers for the microbatch: posh (Lt tokens), pos_all and pos_send (most
// tokens a member holds); at least one token each.
static tsr_status grow_positions(ulysses_attention *ua, int64_t most) {
  const kernels_backend *kb = ua->kb;
  const size_t tok = 3 * sizeof(int32_t);
  int64_t lt = ua->Lt > 0 ? ua->Lt : 1;
  most = most > 0 ? most : 1;
  tsr_status st = TSR_OK;
  if (lt > ua->posh_cap) {
    kb->free(kb, ua->posh);
    ua->posh = NULL, ua->posh_cap = 0;
    if ((st = kb->alloc(kb, (void **)&ua->posh, (size_t)lt * tok))) return st;
    ua->posh_cap = lt;
  }
  if (most > ua->pos_cap) {
    kb->free(kb, ua->pos_all), kb->free(kb, ua->pos_send);
    ua->pos_all = ua->pos_send = NULL, ua->pos_cap = 0;
    if ((st = kb->alloc(kb, (void **)&ua->pos_all, (size_t)ua->k * (size_t)most * tok)) ||
        (st = kb->alloc(kb, (void **)&ua->pos_send, (size_t)most * tok)))
      return st;
    ua->pos_cap = most;
  }
  return st;
}

tsr_status ulysses_attention_set_mask(ulysses_attention *ua, kernels_mask mask,
                                      const int32_t *pos) {
  const kernels_backend *kb = ua->kb;
  ua->mask = mask;
  if (mask.kind == KERNELS_MASK_FULL) return TSR_OK;  // the inner ring's set_clips reset it
  if (!kernels_has(kb, attention_masked_forward) || !kernels_has(kb, attention_masked_backward))
    return err_set(TSR_EINVAL, "Ulysses attention: backend %s has no masked attention entries "
                   "(attention_masked_forward, attention_masked_backward)", kb->name);
  int64_t most = 0;
  for (int j = 0; j < ua->k; j++) most = ua->lq[j] > most ? ua->lq[j] : most;
  tsr_status st = grow_positions(ua, most);
  if (st) return st;
  const size_t tok = 3 * sizeof(int32_t), mine = (size_t)ua->lq[ua->p] * tok;
  if (mine && (st = kb->copy(kb, ua->pos_send, pos, mine))) return st;
  if (ua->k == 1) st = kb->copy(kb, ua->pos_all, ua->pos_send, (size_t)most * tok);
  else st = ua->cb->allgather(ua->cb, ua->g, ua->pos_send, ua->pos_all, (int64_t)((size_t)most * tok));
  // member j's chunk of every clip, packed in clip order, to its place in the whole clip
  for (int j = 0; j < ua->k && !st; j++) {
    const char *from = (const char *)ua->pos_all + (size_t)j * (size_t)most * tok;
    for (int cl = 0; cl < ua->n_clips && !st; cl++) {
      int64_t first, len;
      ring_chunk(ua->clip_tokens[cl], ua->k, j, &first, &len);
      if (len) st = kb->copy(kb, (char *)ua->posh + (size_t)(ua->clip_off[cl] + first) * tok, from,
                             (size_t)len * tok);
      from += (size_t)len * tok;
    }
  }
  if (!st && ua->inner) st = ring_attention_set_mask(ua->inner, mask, ua->posh);
  return st;
}

// Head-layout bytes of a head of a token in the widest tensor: an act row or an fp32 lse.
static size_t widest(size_t row) { return row > sizeof(float) ? row : sizeof(float); }

// Bytes of one staging buffer: the larger of what a rank sends and receives in one all-to-all
// of chunk 0 (the largest: ring_chunk puts the extra heads first), per byte of a head of a token
// of the tensors it moves: its lq tokens of every member's chunk heads, or the Lt tokens of
// its own (at most member 0's).
static size_t stage_bytes(int k, int nc, int64_t lq, int64_t Lt, int H, size_t head_bytes) {
  int64_t seq = 0, h0, hn, hmax;
  for (int j = 0; j < k; j++) chunk_heads(H, k, nc, j, 0, &h0, &hn), seq += hn;
  chunk_heads(H, k, nc, 0, 0, &h0, &hmax);
  int64_t a = lq * seq, b = Lt * hmax;
  return (size_t)(a > b ? a : b) * head_bytes;
}

// The work buffers: U_NBUF head-layout tensors (Lt, h_max, Dh) [act], the head-layout lse
// (Lt, h_max) [f32], and the staging of the all-to-alls: blocking (nc = 1, one tensor a
// transfer) a send and a receive buffer; pipelined (nc > 1, every tensor of a chunk in one
// transfer, a transfer to the head layout in flight beside one back) a send and a receive
// buffer for each direction, of a chunk's tensors: to the heads the backward's 5 act tensors
// and the lse, back the larger of the forward's out and lse and the backward's dq, dk, dv.
// Placed from base (NULL: sizes only), returns the bytes.
static size_t carve_buffers(ulysses_attention *ua, char *base, kernels_dtype act, int k, int nc,
                            int64_t lq, int64_t Lt, int H, int Dh) {
  int64_t h0, hmax;
  heads_of(H, k, 0, &h0, &hmax);  // member 0 has the most heads
  size_t row = kernels_dtype_size(act) * (size_t)Dh, f = sizeof(float), used = 0;
  for (int i = 0; i < U_NBUF; i++) {
    size_t at = cp_workspace_carve(&used, (size_t)Lt * (size_t)hmax * row);
    if (base) ua->h[i] = base + at;
  }
  size_t at_lse = cp_workspace_carve(&used, (size_t)Lt * (size_t)hmax * f);
  if (base) ua->lseh = (float *)(base + at_lse);
  size_t in = nc > 1 ? 5 * row + f : widest(row), out = 3 * row > row + f ? 3 * row : row + f;
  for (int sl = 0; sl < (nc > 1 ? 2 : 1); sl++) {
    size_t bytes = stage_bytes(k, nc, lq, Lt, H, sl == S_IN ? in : out);
    size_t at_send = cp_workspace_carve(&used, bytes), at_recv = cp_workspace_carve(&used, bytes);
    if (base) ua->send[sl] = base + at_send, ua->recv[sl] = base + at_recv;
  }
  return used;
}

// The buffers for this microbatch with H heads of Dh values, carved from the workspace
// (fetched every call: another group may have grown a shared one).
static tsr_status ensure_buffers(ulysses_attention *ua, int H, int Dh) {
  const kernels_dtype act = ua->kb->act_dtype;
  void *base;
  size_t bytes = carve_buffers(ua, NULL, act, ua->k, ua->nc, ua->lq[ua->p], ua->Lt, H, Dh);
  tsr_status st = cp_workspace_get(ua->ws, ua->ws_region, bytes, &base);
  if (!st) carve_buffers(ua, base, act, ua->k, ua->nc, ua->lq[ua->p], ua->Lt, H, Dh);
  return st;
}

// Head chunk c of the head-layout tensor at base (heads of w bytes): (Lt, this rank's heads
// of chunk c, w), after the earlier chunks' (Lt, their heads, w).
static char *chunk_at(const ulysses_attention *ua, const void *base, size_t w, int H, int c) {
  int64_t mh0, mhn, h0, hn;
  heads_of(H, ua->k, ua->p, &mh0, &mhn);
  chunk_heads(H, ua->k, ua->nc, ua->p, c, &h0, &hn);
  return (char *)base + (size_t)ua->Lt * (size_t)(h0 - mh0) * w;
}

// Sequence layout -> head layout, chunk c of the tensors of x (src (Lq, H, w), dst the head
// layout), started from slot sl: each member's chunk heads of every local token packed
// (copy_2d, tensor after tensor), then the all-to-all.
static tsr_status heads_start(ulysses_attention *ua, int sl, int c, int H, const xfer *x) {
  const kernels_backend *kb = ua->kb;
  const int k = ua->k, p = ua->p;
  int64_t h0, hn, mh0, mhn, soff = 0, roff = 0;
  chunk_heads(H, k, ua->nc, p, c, &mh0, &mhn);
  tsr_status st = TSR_OK;
  for (int j = 0; j < k && !st; j++) {
    chunk_heads(H, k, ua->nc, j, c, &h0, &hn);
    ua->sd[j] = soff, ua->rd[j] = roff;
    for (int t = 0; t < x->n && !st; t++) {
      const int64_t w = (int64_t)x->w[t];
      st = kb->copy_2d(kb, (char *)ua->send[sl] + soff, (size_t)(hn * w),
                       (const char *)x->src[t] + h0 * w, (size_t)H * (size_t)w, (size_t)(hn * w),
                       (size_t)ua->lq[p]);
      soff += ua->lq[p] * hn * w, roff += ua->lq[j] * mhn * w;
    }
    ua->sb[j] = soff - ua->sd[j], ua->rb[j] = roff - ua->rd[j];
  }
  if (!st) st = ua->cb->ialltoallv(ua->cb, ua->g, ua->send[sl], ua->sb, ua->sd, ua->recv[sl],
                                   ua->rb, ua->rd, &ua->req[sl]);
  return st;
}

// Completes heads_start: waits, then puts each member's chunks in their clips' places.
static tsr_status heads_finish(ulysses_attention *ua, int sl, int c, int H, const xfer *x) {
  const kernels_backend *kb = ua->kb;
  const int k = ua->k;
  int64_t mh0, mhn;
  chunk_heads(H, k, ua->nc, ua->p, c, &mh0, &mhn);
  tsr_status st = ua->cb->wait(ua->cb, &ua->req[sl]);
  const char *from = ua->recv[sl];
  for (int j = 0; j < k && !st; j++)
    for (int t = 0; t < x->n && !st; t++) {
      const size_t tok = (size_t)mhn * x->w[t];  // bytes of a token in the head layout
      char *dst = chunk_at(ua, x->dst[t], x->w[t], H, c);
      for (int cl = 0; cl < ua->n_clips && !st; cl++) {
        int64_t first, len;
        ring_chunk(ua->clip_tokens[cl], k, j, &first, &len);
        st = kb->copy(kb, dst + (size_t)(ua->clip_off[cl] + first) * tok, from, (size_t)len * tok);
        from += (size_t)len * tok;
      }
    }
  return st;
}

// Head layout -> sequence layout, chunk c of the tensors of x (src the head layout, dst
// (Lq, H, w)), the inverse of heads_start: each member's tokens of every clip packed, then
// the all-to-all from slot sl.
static tsr_status seq_start(ulysses_attention *ua, int sl, int c, int H, const xfer *x) {
  const kernels_backend *kb = ua->kb;
  const int k = ua->k, p = ua->p;
  int64_t h0, hn, mh0, mhn, soff = 0, roff = 0;
  chunk_heads(H, k, ua->nc, p, c, &mh0, &mhn);
  tsr_status st = TSR_OK;
  for (int i = 0; i < k && !st; i++) {
    chunk_heads(H, k, ua->nc, i, c, &h0, &hn);
    ua->sd[i] = soff, ua->rd[i] = roff;
    for (int t = 0; t < x->n && !st; t++) {
      const size_t tok = (size_t)mhn * x->w[t];
      const char *src = chunk_at(ua, x->src[t], x->w[t], H, c);
      for (int cl = 0; cl < ua->n_clips && !st; cl++) {
        int64_t first, len;
        ring_chunk(ua->clip_tokens[cl], k, i, &first, &len);
        st = kb->copy(kb, (char *)ua->send[sl] + soff,
                      src + (size_t)(ua->clip_off[cl] + first) * tok, (size_t)len * tok);
        soff += len * (int64_t)tok;
      }
      roff += ua->lq[p] * hn * (int64_t)x->w[t];
    }
    ua->sb[i] = soff - ua->sd[i], ua->rb[i] = roff - ua->rd[i];
  }
  if (!st) st = ua->cb->ialltoallv(ua->cb, ua->g, ua->send[sl], ua->sb, ua->sd, ua->recv[sl],
                                   ua->rb, ua->rd, &ua->req[sl]);
  return st;
}

// Completes seq_start: waits, then puts each member's chunk heads in place (copy_2d).
static tsr_status seq_finish(ulysses_attention *ua, int sl, int c, int H, const xfer *x) {
  const kernels_backend *kb = ua->kb;
  const int k = ua->k, p = ua->p;
  int64_t h0, hn;
  tsr_status st = ua->cb->wait(ua->cb, &ua->req[sl]);
  const char *from = ua->recv[sl];
  for (int j = 0; j < k && !st; j++) {
    chunk_heads(H, k, ua->nc, j, c, &h0, &hn);
    for (int t = 0; t < x->n && !st; t++) {
      const int64_t w = (int64_t)x->w[t];
      st = kb->copy_2d(kb, (char *)x->dst[t] + h0 * w, (size_t)H * (size_t)w, from,
                       (size_t)(hn * w), (size_t)(hn * w), (size_t)ua->lq[p]);
      from += (size_t)(ua->lq[p] * hn * w);
    }
  }
  return st;
}

static int bound(const ulysses_attention *ua) {
  return kernels_attention_max_len(ua->longest, ua->Lt);
}

// The backend's attention over whole clips in the head layout, masked when a mask is set:
// q, k, v, out (Lt, H, Dh) [act], lse (Lt, H) [f32] (H: the heads in hand).
static tsr_status local_forward(const ulysses_attention *ua, void *out, float *lse, const void *q,
                                const void *k, const void *v, int H, int Dh, float scale) {
  const kernels_backend *kb = ua->kb;
  const int L = (int)ua->Lt, mx = bound(ua);
  if (ua->mask.kind == KERNELS_MASK_FULL)
    return kb->attention_forward(kb, out, lse, q, k, v, ua->cu, ua->n_clips, mx, L, H, Dh, scale);
  return kb->attention_masked_forward(kb, out, lse, q, k, v, ua->cu, ua->cu, ua->posh, ua->posh,
                                      ua->mask, ua->n_clips, mx, mx, L, L, H, Dh, scale);
}

// Its backward: dq, dk, dv (Lt, H, Dh) [act] overwritten.
static tsr_status local_backward(const ulysses_attention *ua, void *dq, void *dk, void *dv,
                                 const void *dout, const void *q, const void *k, const void *v,
                                 const void *out, const float *lse, int H, int Dh, float scale) {
  const kernels_backend *kb = ua->kb;
  const int L = (int)ua->Lt, mx = bound(ua);
  if (ua->mask.kind == KERNELS_MASK_FULL)
    return kb->attention_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, ua->cu, ua->n_clips,
                                  mx, L, H, Dh, scale);
  return kb->attention_masked_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, ua->cu, ua->posh,
                                       ua->mask, ua->n_clips, mx, L, H, Dh, scale);
}

// The attention of head chunk c (this rank's heads of it; none: nothing to do) in the head
// layout, forward (dq NULL) or backward, on the backend or the inner ring.
static tsr_status attend(ulysses_attention *ua, int c, int H, int Dh, float scale, int backward) {
  const kernels_backend *kb = ua->kb;
  int64_t h0, hn;
  chunk_heads(H, ua->k, ua->nc, ua->p, c, &h0, &hn);
  if (!hn) return TSR_OK;  // every member of a hybrid's stride group has the same heads
  const size_t row = kernels_act_bytes(kb, (size_t)Dh);
  void *t[U_NBUF];
  for (int i = 0; i < U_NBUF; i++) t[i] = chunk_at(ua, ua->h[i], row, H, c);
  float *lse = (float *)chunk_at(ua, ua->lseh, sizeof(float), H, c);
  if (!backward && ua->inner)
    return ring_attention_forward(ua->inner, t[U_OUT], lse, t[U_Q], t[U_K], t[U_V], (int)hn, Dh,
                                  scale);
  if (!backward)
    return local_forward(ua, t[U_OUT], lse, t[U_Q], t[U_K], t[U_V], (int)hn, Dh, scale);
  if (ua->inner)
    return ring_attention_backward(ua->inner, t[U_DQ], t[U_DK], t[U_DV], t[U_DOUT], t[U_Q],
                                   t[U_K], t[U_V], t[U_OUT], lse, (int)hn, Dh, scale);
  return local_backward(ua, t[U_DQ], t[U_DK], t[U_DV], t[U_DOUT], t[U_Q], t[U_K], t[U_V],
                        t[U_OUT], lse, (int)hn, Dh, scale);
}

// One attention call: the tensors of `in` to the head layout, attend, the tensors of `out`
// back. Blocking (nc = 1): one tensor an all-to-all, each waited for at once. Pipelined: per
// head chunk c, one all-to-all of every tensor of `in`, started while chunk c - 1 attends,
// and one of `out`, travelling while chunk c + 1 attends:
//   in(0) | wait in(0), start in(1), attend 0, start out(0) | wait in(1), start in(2),
//   attend 1, wait out(0), start out(1) | ... | wait out(nc - 1)
// so only the first chunk's transfer in and the last one's back are not hidden.
static tsr_status run(ulysses_attention *ua, const xfer *in, const xfer *out, int H, int Dh,
                      float scale, int backward) {
  tsr_status st = TSR_OK;
  if (ua->nc == 1) {
    for (int t = 0; t < in->n && !st; t++) {
      xfer one = {1, {in->src[t]}, {in->dst[t]}, {in->w[t]}};
      st = heads_start(ua, S_IN, 0, H, &one);
      if (!st) st = heads_finish(ua, S_IN, 0, H, &one);
    }
    if (!st) st = attend(ua, 0, H, Dh, scale, backward);
    for (int t = 0; t < out->n && !st; t++) {
      xfer one = {1, {out->src[t]}, {out->dst[t]}, {out->w[t]}};
      st = seq_start(ua, S_IN, 0, H, &one);
      if (!st) st = seq_finish(ua, S_IN, 0, H, &one);
    }
  } else {
    if (!st) st = heads_start(ua, S_IN, 0, H, in);
    for (int c = 0; c < ua->nc && !st; c++) {
      st = heads_finish(ua, S_IN, c, H, in);
      if (!st && c + 1 < ua->nc) st = heads_start(ua, S_IN, c + 1, H, in);
      if (!st) st = attend(ua, c, H, Dh, scale, backward);
      if (!st && c > 0) st = seq_finish(ua, S_OUT, c - 1, H, out);
      if (!st) st = seq_start(ua, S_OUT, c, H, out);
    }
    if (!st) st = seq_finish(ua, S_OUT, ua->nc - 1, H, out);
  }
  for (int sl = 0; sl < 2; sl++) ua->cb->wait(ua->cb, &ua->req[sl]);  // after an error
  return st;
}

tsr_status ulysses_attention_forward(ulysses_attention *ua, void *out, float *lse, const void *q,
                                     const void *k, const void *v, int H, int Dh, float scale) {
  const kernels_backend *kb = ua->kb;
  if (ua->k == 1) return local_forward(ua, out, lse, q, k, v, H, Dh, scale);
  ua->nc = chunks_of(ua->chunks, H, ua->k);
  tsr_status st = ensure_buffers(ua, H, Dh);  // the head-layout pointers the transfers name
  if (st) return st;
  const size_t w = kernels_act_bytes(kb, (size_t)Dh), f = sizeof(float);
  xfer in = {3, {q, k, v}, {ua->h[U_Q], ua->h[U_K], ua->h[U_V]}, {w, w, w}};
  xfer back = {2, {ua->h[U_OUT], ua->lseh}, {out, lse}, {w, f}};
  return run(ua, &in, &back, H, Dh, scale, 0);
}

tsr_status ulysses_attention_backward(ulysses_attention *ua, void *dq, void *dk, void *dv,
                                      const void *dout, const void *q, const void *k,
                                      const void *v, const void *out, const float *lse, int H,
                                      int Dh, float scale) {
  const kernels_backend *kb = ua->kb;
  if (ua->k == 1)
    return local_backward(ua, dq, dk, dv, dout, q, k, v, out, lse, H, Dh, scale);
  ua->nc = chunks_of(ua->chunks, H, ua->k);
  tsr_status st = ensure_buffers(ua, H, Dh);  // the head-layout pointers the transfers name
  if (st) return st;
  const size_t w = kernels_act_bytes(kb, (size_t)Dh), f = sizeof(float);
  xfer in = {6, {q, k, v, out, dout, lse},
             {ua->h[U_Q], ua->h[U_K], ua->h[U_V], ua->h[U_OUT], ua->h[U_DOUT], ua->lseh},
             {w, w, w, w, w, f}};
  xfer back = {3, {ua->h[U_DQ], ua->h[U_DK], ua->h[U_DV]}, {dq, dk, dv}, {w, w, w}};
  return run(ua, &in, &back, H, Dh, scale, 1);
}

void ulysses_attention_use_workspace(ulysses_attention *ua, cp_workspace *ws, int region) {
  cp_workspace_free(&ua->own_ws);
  ua->ws = ws, ua->ws_region = region;
}

size_t ulysses_attention_index_bytes(int max_clips) {
  return ((size_t)max_clips + 1) * sizeof(int32_t);  // set_clips
}

void ulysses_attention_set_chunks(ulysses_attention *ua, int chunks) {
  ua->chunks = chunks > 1 ? chunks : 1;
}

size_t ulysses_attention_work_bytes(kernels_dtype act, int k, int chunks, int64_t max_local,
                                    int64_t max_total, int H, int Dh) {
  if (k < 2) return 0;  // a group of one attends locally: no work buffers
  ulysses_attention ua = {0};
  return carve_buffers(&ua, NULL, act, k, chunks_of(chunks, H, k), max_local, max_total, H, Dh);
}
