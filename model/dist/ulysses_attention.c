#include "model/dist/ulysses_attention.h"

#include <stdlib.h>
#include <string.h>

#include "model/dist/cp_workspace.h"


enum { U_Q, U_K, U_V, U_OUT, U_DOUT, U_DQ, U_DK, U_DV, U_NBUF };  // head-layout tensors

struct ulysses_attention {
  const kernels_backend *kb;
  const comm_backend *cb;     // its buffers are in kb's memory space
  comm_group *g;
  ring_attention *inner;      // hybrid: the ring over the stride group, else NULL
  cp_workspace *ws;           // where the work buffers are carved from: own_ws, or a shared one
  cp_workspace *own_ws;       // its own, until ulysses_attention_use_workspace
  int ws_region;
  int k, p;                   // group size, this rank's place in it
  int n_clips, clip_cap;
  int64_t *clip_tokens;       // (clip_cap) host: the microbatch's clip lengths
  int64_t *clip_off;          // (clip_cap) host: first token of each clip in the head layout
  int64_t *lq;                // (k) tokens member i holds in the sequence layout
  int64_t Lt, longest;        // the microbatch's tokens, its longest clip
  int32_t *cu;                // (clip_cap + 1) backend: whole-clip offsets
  int64_t *sb, *sd, *rb, *rd; // (k) each: the all-to-all's byte counts and displacements
  void *h[U_NBUF];            // (Lt, h_p, Dh) [act] each
  float *lseh;                // (Lt, h_p) [f32]
  void *send, *recv;          // staging of the all-to-all
};

static void heads_of(int H, int k, int j, int64_t *h0, int64_t *hn) { ring_chunk(H, k, j, h0, hn); }

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

// The work buffers: U_NBUF head-layout tensors (Lt, h_max, Dh) [act], the head-layout lse
// (Lt, h_max) [f32], two staging buffers of the larger of a rank's sequence and head
// layouts; placed from base (NULL: sizes only), returns the bytes.
static size_t carve_buffers(ulysses_attention *ua, char *base, kernels_dtype act, int k,
                            int64_t lq, int64_t Lt, int H, int Dh) {
  int64_t h0, hmax;
  heads_of(H, k, 0, &h0, &hmax);  // member 0 has the most heads
  size_t row = kernels_dtype_size(act) * (size_t)Dh, f = sizeof(float), w = row > f ? row : f;
  size_t head = (size_t)Lt * (size_t)hmax * w, seq = (size_t)lq * (size_t)H * w;
  size_t stage = head > seq ? head : seq, used = 0;
  for (int i = 0; i < U_NBUF; i++) {
    size_t at = cp_workspace_carve(&used, (size_t)Lt * (size_t)hmax * row);
    if (base) ua->h[i] = base + at;
  }
  size_t at_lse = cp_workspace_carve(&used, (size_t)Lt * (size_t)hmax * f);
  size_t at_send = cp_workspace_carve(&used, stage), at_recv = cp_workspace_carve(&used, stage);
  if (base) {
    ua->lseh = (float *)(base + at_lse);
    ua->send = base + at_send, ua->recv = base + at_recv;
  }
  return used;
}

// The buffers for this microbatch with H heads of Dh values, carved from the workspace
// (fetched every call: another group may have grown a shared one).
static tsr_status ensure_buffers(ulysses_attention *ua, int H, int Dh) {
  const kernels_dtype act = ua->kb->act_dtype;
  void *base;
  size_t bytes = carve_buffers(ua, NULL, act, ua->k, ua->lq[ua->p], ua->Lt, H, Dh);
  tsr_status st = cp_workspace_get(ua->ws, ua->ws_region, bytes, &base);
  if (!st) carve_buffers(ua, base, act, ua->k, ua->lq[ua->p], ua->Lt, H, Dh);
  return st;
}

// Sequence layout -> head layout of one tensor: src (Lq, H, w bytes a head) to dst
// (Lt, h_p, w). Each member's head slice of every local token is packed (copy_2d), the
// all-to-all delivers every member's chunks of this rank's heads, and each chunk is put in
// its clip's place.
static tsr_status to_heads(ulysses_attention *ua, void *dst, const void *src, int H, size_t w) {
  const kernels_backend *kb = ua->kb;
  const int k = ua->k, p = ua->p;
  int64_t h0, hn, mh0, mhn, soff = 0, roff = 0;
  heads_of(H, k, p, &mh0, &mhn);
  tsr_status st = TSR_OK;
  for (int j = 0; j < k && !st; j++) {
    heads_of(H, k, j, &h0, &hn);
    ua->sb[j] = ua->lq[p] * hn * (int64_t)w, ua->sd[j] = soff;
    ua->rb[j] = ua->lq[j] * mhn * (int64_t)w, ua->rd[j] = roff;
    st = kb->copy_2d(kb, (char *)ua->send + soff, (size_t)(hn * (int64_t)w),
                     (const char *)src + h0 * (int64_t)w, (size_t)H * w, (size_t)(hn * (int64_t)w),
                     (size_t)ua->lq[p]);
    soff += ua->sb[j], roff += ua->rb[j];
  }
  if (!st) st = ua->cb->alltoallv(ua->cb, ua->g, ua->send, ua->sb, ua->sd, ua->recv, ua->rb, ua->rd);
  const size_t tok = (size_t)mhn * w;  // bytes of a token in the head layout
  for (int j = 0; j < k && !st; j++) {
    const char *from = (const char *)ua->recv + ua->rd[j];
    for (int c = 0; c < ua->n_clips && !st; c++) {
      int64_t first, len;
      ring_chunk(ua->clip_tokens[c], k, j, &first, &len);
      st = kb->copy(kb, (char *)dst + (size_t)(ua->clip_off[c] + first) * tok, from, (size_t)len * tok);
      from += (size_t)len * tok;
    }
  }
  return st;
}

// Head layout -> sequence layout: src (Lt, h_p, w) to dst (Lq, H, w), the inverse of
// to_heads.
static tsr_status to_seq(ulysses_attention *ua, void *dst, const void *src, int H, size_t w) {
  const kernels_backend *kb = ua->kb;
  const int k = ua->k, p = ua->p;
  int64_t h0, hn, mh0, mhn, soff = 0, roff = 0;
  heads_of(H, k, p, &mh0, &mhn);
  const size_t tok = (size_t)mhn * w;
  tsr_status st = TSR_OK;
  for (int i = 0; i < k && !st; i++) {
    heads_of(H, k, i, &h0, &hn);
    ua->sb[i] = ua->lq[i] * (int64_t)tok, ua->sd[i] = soff;
    ua->rb[i] = ua->lq[p] * hn * (int64_t)w, ua->rd[i] = roff;
    for (int c = 0; c < ua->n_clips && !st; c++) {
      int64_t first, len;
      ring_chunk(ua->clip_tokens[c], k, i, &first, &len);
      st = kb->copy(kb, (char *)ua->send + soff,
                    (const char *)src + (size_t)(ua->clip_off[c] + first) * tok, (size_t)len * tok);
      soff += len * (int64_t)tok;
    }
    roff += ua->rb[i];
  }
  if (!st) st = ua->cb->alltoallv(ua->cb, ua->g, ua->send, ua->sb, ua->sd, ua->recv, ua->rb, ua->rd);
  for (int j = 0; j < k && !st; j++) {
    heads_of(H, k, j, &h0, &hn);
    st = kb->copy_2d(kb, (char *)dst + h0 * (int64_t)w, (size_t)H * w,
                     (const char *)ua->recv + ua->rd[j], (size_t)(hn * (int64_t)w),
                     (size_t)(hn * (int64_t)w), (size_t)ua->lq[p]);
  }
  return st;
}

static int bound(const ulysses_attention *ua) {
  return kernels_attention_max_len(ua->longest, ua->Lt);
}

tsr_status ulysses_attention_forward(ulysses_attention *ua, void *out, float *lse, const void *q,
                                     const void *k, const void *v, int H, int Dh, float scale) {
  const kernels_backend *kb = ua->kb;
  if (ua->k == 1)
    return kb->attention_forward(kb, out, lse, q, k, v, ua->cu, ua->n_clips, bound(ua),
                                 (int)ua->Lt, H, Dh, scale);
  tsr_status st = ensure_buffers(ua, H, Dh);
  const size_t w = kernels_act_bytes(kb, (size_t)Dh);
  int64_t h0, hn;
  heads_of(H, ua->k, ua->p, &h0, &hn);
  if (!st) st = to_heads(ua, ua->h[U_Q], q, H, w);
  if (!st) st = to_heads(ua, ua->h[U_K], k, H, w);
  if (!st) st = to_heads(ua, ua->h[U_V], v, H, w);
  if (!st && hn && ua->inner)  // every member of the stride group has this rank's heads
    st = ring_attention_forward(ua->inner, ua->h[U_OUT], ua->lseh, ua->h[U_Q], ua->h[U_K],
                                ua->h[U_V], (int)hn, Dh, scale);
  else if (!st && hn)
    st = kb->attention_forward(kb, ua->h[U_OUT], ua->lseh, ua->h[U_Q], ua->h[U_K], ua->h[U_V],
                               ua->cu, ua->n_clips, bound(ua), (int)ua->Lt, (int)hn, Dh, scale);
  if (!st) st = to_seq(ua, out, ua->h[U_OUT], H, w);
  if (!st) st = to_seq(ua, lse, ua->lseh, H, sizeof(float));
  return st;
}

tsr_status ulysses_attention_backward(ulysses_attention *ua, void *dq, void *dk, void *dv,
                                      const void *dout, const void *q, const void *k,
                                      const void *v, const void *out, const float *lse, int H,
                                      int Dh, float scale) {
  const kernels_backend *kb = ua->kb;
  if (ua->k == 1)
    return kb->attention_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, ua->cu, ua->n_clips,
                                  bound(ua), (int)ua->Lt, H, Dh, scale);
  tsr_status st = ensure_buffers(ua, H, Dh);
  const size_t w = kernels_act_bytes(kb, (size_t)Dh);
  int64_t h0, hn;
  heads_of(H, ua->k, ua->p, &h0, &hn);
  const void *src[5] = {q, k, v, out, dout};
  const int dst[5] = {U_Q, U_K, U_V, U_OUT, U_DOUT};
  for (int i = 0; i < 5 && !st; i++) st = to_heads(ua, ua->h[dst[i]], src[i], H, w);
  if (!st) st = to_heads(ua, ua->lseh, lse, H, sizeof(float));
  if (!st && hn && ua->inner)
    st = ring_attention_backward(ua->inner, ua->h[U_DQ], ua->h[U_DK], ua->h[U_DV], ua->h[U_DOUT],
                                 ua->h[U_Q], ua->h[U_K], ua->h[U_V], ua->h[U_OUT], ua->lseh,
                                 (int)hn, Dh, scale);
  else if (!st && hn)
    st = kb->attention_backward(kb, ua->h[U_DQ], ua->h[U_DK], ua->h[U_DV], ua->h[U_DOUT],
                                ua->h[U_Q], ua->h[U_K], ua->h[U_V], ua->h[U_OUT], ua->lseh, ua->cu,
                                ua->n_clips, bound(ua), (int)ua->Lt, (int)hn, Dh, scale);
  if (!st) st = to_seq(ua, dq, ua->h[U_DQ], H, w);
  if (!st) st = to_seq(ua, dk, ua->h[U_DK], H, w);
  if (!st) st = to_seq(ua, dv, ua->h[U_DV], H, w);
  return st;
}

void ulysses_attention_use_workspace(ulysses_attention *ua, cp_workspace *ws, int region) {
  cp_workspace_free(&ua->own_ws);
  ua->ws = ws, ua->ws_region = region;
}

size_t ulysses_attention_index_bytes(int max_clips) {
  return ((size_t)max_clips + 1) * sizeof(int32_t);  // set_clips
}

size_t ulysses_attention_work_bytes(kernels_dtype act, int k, int64_t max_local,
                                    int64_t max_total, int H, int Dh) {
  if (k < 2) return 0;  // a group of one attends locally: no work buffers
  ulysses_attention ua = {0};
  return carve_buffers(&ua, NULL, act, k, max_local, max_total, H, Dh);
}
