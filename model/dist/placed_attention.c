// model/dist/placed_attention.c — masked attention over a blockwise placement (see the
// header): who sends which rows to whom, the all-to-alls of each direction, and the masked
// entries on the local and received rows.
#include "model/dist/placed_attention.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  int64_t row, len;  // rows [row, row + len) of this rank's layout
} row_run;

struct placed_attention {
  const kernels_backend *kb;
  const comm_backend *cb;
  comm_group *g;
  int k, p, n_clips;
  int serial;                // 1: every exchange is waited for as soon as it is posted
  kernels_mask mask;
  int64_t lq;                // rows this rank holds
  int64_t split;             // the backward's own keys: rows [0, split), then [split, lq)
  int64_t *stok, *rtok;      // (k) rows sent to, received from each rank (own: 0)
  int64_t *soff, *roff;      // (k + 1) prefix sums of stok, rtok
  row_run *runs;             // the rows sent to rank o: runs[run_off[o] .. run_off[o + 1])
  int *run_off;              // (k + 1)
  int run_cap;
  int32_t *cu_loc;           // (3, n_clips + 1) backend: this rank's rows per clip, then
                             // those of rows [0, split) and of [split, lq) (cu_split)
  int32_t **cu_peer;         // (k) backend (n_clips + 1): rows received from o per clip
  int bound_loc, *bound_peer;  // the attention entries' max_len of those
  int cu_cap;
  int32_t *pos_loc, *pos_recv;  // backend: (lq, 3) own positions, (roff[k], 3) received
  int64_t pos_cap_loc, pos_cap_recv;
  void *sbuf, *rbuf, *gsend, *grecv;  // backend act: (2, soff[k]) and (2, roff[k]) rows x E
  void *pout;                         // (lq, E) act
  float *plse, *delta;                // (lq, H)
  size_t cap_s, cap_r, cap_gs, cap_gr, cap_q, cap_l, cap_d;  // bytes each buffer holds
  int64_t *sb, *sd, *rb, *rd;  // (k) alltoallv counts and displacements in bytes
};

tsr_status placed_attention_create(placed_attention **out, const kernels_backend *kb,
                                   const comm_backend *cb, comm_group *g) {
  *out = NULL;
  if (!kb || !cb || !g) return err_set(TSR_EINVAL, "placed attention: no backend or group");
  placed_attention *pa = calloc(1, sizeof *pa);
  if (!pa) return err_set(TSR_ENOMEM, "placed attention: out of memory");
  pa->kb = kb, pa->cb = cb, pa->g = g;
  pa->k = comm_group_size(g), pa->p = comm_group_rank(g);
  size_t k = (size_t)pa->k;
  pa->stok = calloc(k, sizeof(int64_t)), pa->rtok = calloc(k, sizeof(int64_t));
  pa->soff = calloc(k + 1, sizeof(int64_t)), pa->roff = calloc(k + 1, sizeof(int64_t));
  pa->run_off = calloc(k + 1, sizeof(int)), pa->cu_peer = calloc(k, sizeof(int32_t *));
  pa->bound_peer = calloc(k, sizeof(int));
  pa->sb = calloc(k, sizeof(int64_t)), pa->sd = calloc(k, sizeof(int64_t));
  pa->rb = calloc(k, sizeof(int64_t)), pa->rd = calloc(k, sizeof(int64_t));
  if (!pa->stok || !pa->rtok || !pa->soff || !pa->roff || !pa->run_off || !pa->cu_peer ||
      !pa->bound_peer || !pa->sb || !pa->sd || !pa->rb || !pa->rd) {
    placed_attention_free(&pa);
    return err_set(TSR_ENOMEM, "placed attention: out of memory");
  }
  *out = pa;
  return TSR_OK;
}

void placed_attention_free(placed_attention **ppa) {
  placed_attention *pa = *ppa;
  if (!pa) return;
  const kernels_backend *kb = pa->kb;
  void *dev[] = {pa->cu_loc, pa->pos_loc, pa->pos_recv, pa->sbuf, pa->rbuf, pa->gsend,
                 pa->grecv, pa->pout, pa->plse, pa->delta};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) kb->free(kb, dev[i]);
  for (int o = 0; pa->cu_peer && o < pa->k; o++) kb->free(kb, pa->cu_peer[o]);
  free(pa->stok), free(pa->rtok), free(pa->soff), free(pa->roff), free(pa->runs);
  free(pa->run_off), free(pa->cu_peer), free(pa->bound_peer);
  free(pa->sb), free(pa->sd), free(pa->rb), free(pa->rd);
  free(pa);
  *ppa = NULL;
}

// *buf holds at least `bytes` of backend memory (grown, contents lost).
static tsr_status ensure(const kernels_backend *kb, void **buf, size_t *cap, size_t bytes) {
  if (bytes <= *cap && *buf) return TSR_OK;
  kb->free(kb, *buf);
  *buf = NULL, *cap = 0;
  tsr_status st = kb->alloc(kb, buf, bytes ? bytes : 1);
  if (!st) *cap = bytes;
  return st;
}

// The union of the key ranges of rank r's segments of pl, as token intervals [a, e):
// iv (2 * nseg) gets them in order; returns their count.
static int need_of(const placement *pl, const cost_mask *cm, int r, int64_t *iv) {
  int64_t n = placement_block_tokens(cm, pl->L);
  int m = 0;
  for (int i = 0; i < pl->nseg; i++) {
    if (pl->seg[i].rank != r) continue;
    int lo, hi;
    placement_keys(cm, pl->seg[i].block, pl->nblocks, &lo, &hi);
    int64_t a = (int64_t)lo * n, e = (int64_t)(hi + 1) * n < pl->L ? (int64_t)(hi + 1) * n : pl->L;
    if (m && a <= iv[2 * m - 1]) {
      if (e > iv[2 * m - 1]) iv[2 * m - 1] = e;
    } else {
      iv[2 * m] = a, iv[2 * m + 1] = e, m++;
    }
  }
  return m;
}

// Walks holder h's segments of pl against intervals iv (m of them): the tokens h holds
// that they cover. With `runs` (room for nseg + m) appends (row, len) with row = `row0` +
// the token's index among h's tokens of the clip. Returns the tokens.
static int64_t overlap(const placement *pl, int h, const int64_t *iv, int m, int64_t row0,
                       row_run *runs, int *nruns) {
  int64_t total = 0, row = row0;
  int j = 0;
  for (int i = 0; i < pl->nseg; i++) {
    const place_seg *s = &pl->seg[i];
    if (s->rank != h) continue;
    int64_t e = s->first + s->len;
    while (j < m && iv[2 * j + 1] <= s->first) j++;
    for (int t = j; t < m && iv[2 * t] < e; t++) {
      int64_t a = iv[2 * t] > s->first ? iv[2 * t] : s->first;
      int64_t b = iv[2 * t + 1] < e ? iv[2 * t + 1] : e;
      if (b <= a) continue;
      total += b - a;
      if (runs) runs[(*nruns)++] = (row_run){.row = row + (a - s->first), .len = b - a};
    }
    row += s->len;
  }
  return total;
}

// The own-key work of the keys of rank p's segment s of pl: its tokens times the tokens of
// p's segments whose blocks need s's block (placement_keys).
static double key_work(const placement *pl, const cost_mask *cm, int p, const place_seg *s) {
  double q = 0;
  for (int i = 0; i < pl->nseg; i++) {
    if (pl->seg[i].rank != p) continue;
    int lo, hi;
    placement_keys(cm, pl->seg[i].block, pl->nblocks, &lo, &hi);
    if (lo <= s->block && s->block <= hi) q += (double)pl->seg[i].len;
  }
  return q * (double)s->len;
}

// The row where the own keys' backward work reaches half (whole segments' work, a
// segment's rows counted alike): the split of the backward's own keys, which hides the
// K/V exchange with the keys before it and the shares' return with those after.
static int64_t split_row(const placed_attention *pa, int n, const placement *const *pl,
                         const cost_mask *cm) {
  double total = 0, at = 0;
  for (int c = 0; c < n; c++)
    for (int i = 0; i < pl[c]->nseg; i++)
      if (pl[c]->seg[i].rank == pa->p) total += key_work(pl[c], cm, pa->p, &pl[c]->seg[i]);
  int64_t row = 0;
  for (int c = 0; c < n; c++)
    for (int i = 0; i < pl[c]->nseg; i++) {
      const place_seg *s = &pl[c]->seg[i];
      if (s->rank != pa->p) continue;
      double w = key_work(pl[c], cm, pa->p, s);
      if (w > 0 && at + w >= total / 2) {
        int64_t r = (int64_t)((total / 2 - at) / w * (double)s->len + 0.5);
        return row + (r < s->len ? r : s->len);
      }
      at += w, row += s->len;
    }
  return row;
}

// The masks must describe the same blocks.
static tsr_status mask_agree(const cost_mask *cm, kernels_mask km) {
  int same = cm->kind == km.kind &&
             (cm->kind != COST_MASK_BLOCK_CAUSAL || (cm->chunk == km.chunk && cm->window == km.window)) &&
             (cm->kind != COST_MASK_WINDOW || (cm->wt == km.wt && cm->tile_t == km.tile_t));
  if (same) return TSR_OK;
  return err_set(TSR_EINVAL, "placed attention: the placement's mask (kind %d, chunk %d, window "
                 "%d, wt %d, tile_t %d) is not the attention's (kind %d, chunk %d, window %d, wt "
                 "%d, tile_t %d)", cm->kind, cm->chunk, cm->window, cm->wt, cm->tile_t, km.kind,
                 km.chunk, km.window, km.wt, km.tile_t);
}

// The rows this rank sends each peer (runs) and the counts both ways, per clip into the
// host cu arrays: cu (k, n_clips + 1) rows received per clip from each rank, loc (n_clips
// + 1) own rows.
static tsr_status plan_rows(placed_attention *pa, int n, const placement *const *pl,
                            const cost_mask *cm, int32_t *cu, int32_t *loc) {
  const int k = pa->k, p = pa->p;
  int64_t maxseg = 1, nseg = 0;
  for (int c = 0; c < n; c++) {
    nseg += pl[c]->nseg;
    if (pl[c]->nseg > maxseg) maxseg = pl[c]->nseg;
  }
  int64_t cap = (int64_t)k * (2 * nseg + n) + 1;
  if (cap > INT32_MAX) return err_set(TSR_EINVAL, "placed attention: too many segments");
  if (cap > pa->run_cap) {
    free(pa->runs);
    pa->runs = malloc((size_t)cap * sizeof *pa->runs);
    pa->run_cap = pa->runs ? (int)cap : 0;
  }
  int64_t *iv = malloc((size_t)(2 * maxseg) * sizeof *iv);
  int64_t *row0 = malloc((size_t)(n + 1) * sizeof *row0);
  if (!pa->runs || !iv || !row0) {
    free(iv), free(row0);
    return err_set(TSR_ENOMEM, "placed attention: out of memory");
  }
  row0[0] = 0, loc[0] = 0;
  for (int c = 0; c < n; c++) {
    row0[c + 1] = row0[c] + pl[c]->held[p];
    if (row0[c + 1] > INT32_MAX) {
      free(iv), free(row0);
      return err_set(TSR_EINVAL, "placed attention: a rank's block exceeds 2^31 tokens");
    }
    loc[c + 1] = (int32_t)row0[c + 1];
  }
  pa->lq = row0[n];
  int nruns = 0;
  for (int o = 0; o < k; o++) {
    pa->run_off[o] = nruns;
    pa->stok[o] = pa->rtok[o] = 0;
    cu[(size_t)o * (n + 1)] = 0;
    for (int c = 0; c < n; c++) {
      if (o != p) {
        int m = need_of(pl[c], cm, o, iv);  // what o needs: p sends it the rows it holds
        pa->stok[o] += overlap(pl[c], p, iv, m, row0[c], pa->runs, &nruns);
        m = need_of(pl[c], cm, p, iv);      // what p needs of o's rows
        pa->rtok[o] += overlap(pl[c], o, iv, m, 0, NULL, NULL);
      }
      cu[(size_t)o * (n + 1) + c + 1] = (int32_t)pa->rtok[o];
    }
  }
  pa->run_off[k] = nruns;
  for (int o = 0; o < k; o++)
    pa->soff[o + 1] = pa->soff[o] + pa->stok[o], pa->roff[o + 1] = pa->roff[o] + pa->rtok[o];
  free(iv), free(row0);
  return TSR_OK;
}

// Packs the rows of src (lq rows of `row` bytes) this rank sends into dst, peer by peer;
// with src2, that tensor's same rows after each peer's rows of src (K then V).
static tsr_status pack(const placed_attention *pa, void *dst, const void *src, const void *src2,
                       size_t row) {
  const kernels_backend *kb = pa->kb;
  tsr_status st = TSR_OK;
  for (int o = 0; o < pa->k && !st; o++) {
    int64_t at = src2 ? 2 * pa->soff[o] : pa->soff[o];
    for (int r = pa->run_off[o]; r < pa->run_off[o + 1] && !st; r++) {
      const row_run *u = &pa->runs[r];
      size_t bytes = (size_t)u->len * row;
      st = kb->copy(kb, (char *)dst + (size_t)at * row, (const char *)src + (size_t)u->row * row, bytes);
      if (!st && src2)
        st = kb->copy(kb, (char *)dst + (size_t)(at + pa->stok[o]) * row,
                      (const char *)src2 + (size_t)u->row * row, bytes);
      at += u->len;
    }
  }
  return st;
}

// The all-to-all counts of `per` bytes a row, both tensors (`two`) or one; `back` swaps the
// directions (gradient shares return to the rows' holders).
static void counts(placed_attention *pa, size_t per, int two, int back) {
  const int64_t *s = back ? pa->rtok : pa->stok, *r = back ? pa->stok : pa->rtok;
  const int64_t *so = back ? pa->roff : pa->soff, *ro = back ? pa->soff : pa->roff;
  int64_t f = two ? 2 : 1;
  for (int o = 0; o < pa->k; o++) {
    pa->sb[o] = f * s[o] * (int64_t)per, pa->sd[o] = f * so[o] * (int64_t)per;
    pa->rb[o] = f * r[o] * (int64_t)per, pa->rd[o] = f * ro[o] * (int64_t)per;
  }
}

tsr_status placed_attention_set_clips(placed_attention *pa, int n_clips, const placement *const *pl,
                                      const cost_mask *cm, kernels_mask km, const int32_t *pos) {
  const kernels_backend *kb = pa->kb;
  tsr_status st = mask_agree(cm, km);
  for (int c = 0; c < n_clips && !st; c++)
    if (pl[c]->k != pa->k)
      st = err_set(TSR_EINVAL, "placed attention: clip %d is placed over %d ranks, the group has "
                   "%d", c, pl[c]->k, pa->k);
  if (!kernels_has(kb, attention_masked_forward) ||
      !kernels_has(kb, attention_masked_partial_backward))
    st = err_set(TSR_EINVAL, "placed attention: backend %s has no masked attention entries "
                 "(attention_masked_forward, attention_masked_partial_backward)", kb->name);
  if (st) return st;
  const int k = pa->k;
  int32_t *cu = malloc((size_t)(k + 3) * (size_t)(n_clips + 1) * sizeof *cu);
  if (!cu) return err_set(TSR_ENOMEM, "placed attention: out of memory");
  int32_t *loc = cu + (size_t)k * (n_clips + 1);  // then the two halves' (cu_split)
  pa->mask = km, pa->n_clips = n_clips;
  st = plan_rows(pa, n_clips, pl, cm, cu, loc);
  if (!st) pa->split = split_row(pa, n_clips, pl, cm);
  if (!st && n_clips > pa->cu_cap) {
    kb->free(kb, pa->cu_loc), pa->cu_loc = NULL;
    for (int o = 0; o < k; o++) kb->free(kb, pa->cu_peer[o]), pa->cu_peer[o] = NULL;
    size_t bytes = (size_t)(n_clips + 1) * sizeof(int32_t);
    st = kb->alloc(kb, (void **)&pa->cu_loc, 3 * bytes);
    for (int o = 0; o < k && !st; o++) st = kb->alloc(kb, (void **)&pa->cu_peer[o], bytes);
    if (!st) pa->cu_cap = n_clips;
  }
  size_t cub = (size_t)(n_clips + 1) * sizeof(int32_t);
  for (int c = 0; c <= n_clips && !st; c++) {
    int32_t a = (int32_t)pa->split;
    loc[n_clips + 1 + c] = loc[c] < a ? loc[c] : a;
    loc[2 * (n_clips + 1) + c] = (loc[c] > a ? loc[c] : a) - a;
  }
  if (!st) st = kb->to_device(kb, pa->cu_loc, loc, 3 * cub);
  for (int o = 0; o < k && !st; o++) st = kb->to_device(kb, pa->cu_peer[o], cu + (size_t)o * (n_clips + 1), cub);
  // bounds: the longest clip's rows of each side, rounded as the model rounds them
  for (int o = 0; o <= k && !st; o++) {
    const int32_t *x = o < k ? cu + (size_t)o * (n_clips + 1) : loc;
    int longest = 0;
    for (int c = 0; c < n_clips; c++)
      if (x[c + 1] - x[c] > longest) longest = x[c + 1] - x[c];
    int b = kernels_attention_max_len(longest, x[n_clips]);
    if (o < k) pa->bound_peer[o] = b;
    else pa->bound_loc = b;
  }
  free(cu);
  if (st) return st;
  size_t prow = 3 * sizeof(int32_t);
  size_t lb = (size_t)pa->lq * prow, rb = (size_t)pa->roff[k] * prow;
  size_t cl = (size_t)pa->pos_cap_loc, cr = (size_t)pa->pos_cap_recv;
  if ((st = ensure(kb, (void **)&pa->pos_loc, &cl, lb)) ||
      (st = ensure(kb, (void **)&pa->pos_recv, &cr, rb)))
    return st;
  pa->pos_cap_loc = (int64_t)cl, pa->pos_cap_recv = (int64_t)cr;
  if (lb && (st = kb->copy(kb, pa->pos_loc, pos, lb))) return st;
  if ((st = ensure(kb, &pa->sbuf, &pa->cap_s, (size_t)pa->soff[k] * prow + 1))) return st;
  if ((st = pack(pa, pa->sbuf, pos, NULL, prow))) return st;
  counts(pa, prow, 0, 0);
  return pa->cb->alltoallv(pa->cb, pa->g, pa->sbuf, pa->sb, pa->sd, pa->pos_recv, pa->rb, pa->rd);
}

int64_t placed_attention_tokens(const placed_attention *pa) { return pa->lq; }

void placed_attention_set_overlap(placed_attention *pa, int on) { pa->serial = !on; }

void placed_attention_recv_tokens(const placed_attention *pa, int64_t *kv, int64_t *grad) {
  *kv = pa->roff[pa->k], *grad = pa->soff[pa->k];
}

// The work buffers for H heads of Dh.
static tsr_status buffers(placed_attention *pa, int H, int Dh) {
  const kernels_backend *kb = pa->kb;
  const int k = pa->k;
  size_t row = kernels_act_bytes(kb, (size_t)H * Dh), f = (size_t)H * sizeof(float);
  size_t s = 2 * (size_t)pa->soff[k] * row + 1, r = 2 * (size_t)pa->roff[k] * row + 1;
  tsr_status st;
  if ((st = ensure(kb, &pa->sbuf, &pa->cap_s, s)) || (st = ensure(kb, &pa->grecv, &pa->cap_gr, s)) ||
      (st = ensure(kb, &pa->rbuf, &pa->cap_r, r)) || (st = ensure(kb, &pa->gsend, &pa->cap_gs, r)) ||
      (st = ensure(kb, &pa->pout, &pa->cap_q, (size_t)pa->lq * row + 1)) ||
      (st = ensure(kb, (void **)&pa->plse, &pa->cap_l, (size_t)pa->lq * f + 1)) ||
      (st = ensure(kb, (void **)&pa->delta, &pa->cap_d, (size_t)pa->lq * f + 1)))
    return st;
  return TSR_OK;
}

size_t placed_attention_work_bytes(kernels_dtype act, int k, int64_t lq, int H, int Dh) {
  size_t row = (size_t)H * Dh * kernels_dtype_size(act), f = (size_t)H * sizeof(float);
  size_t q = (size_t)lq, peers = (size_t)(k > 1 ? k - 1 : 0) * q, prow = 3 * sizeof(int32_t);
  // sbuf, grecv (2 x sent rows); rbuf, gsend (2 x received); pout; plse, delta; positions
  // (own and received); each buffer ensure()'s one byte more
  return 2 * (2 * peers * row + 1) + 2 * (2 * peers * row + 1) + q * row + 1 + 2 * (q * f + 1) +
         q * prow + peers * prow;
}

// Peer o's received rows in a buffer of 2 tensors a peer (K then V, or dK then dV).
static void *peer_rows(const placed_attention *pa, void *buf, int o, int second, size_t E) {
  int64_t at = 2 * pa->roff[o] + (second ? pa->rtok[o] : 0);
  return kernels_act_at(pa->kb, buf, (size_t)at * E);
}

// Posts the K/V rows every peer needs (rbuf gets, per peer, its K rows then its V rows):
// sbuf, rbuf belong to the exchange until *req is waited for.
static tsr_status start_kv(placed_attention *pa, const void *k, const void *v, size_t E,
                           comm_request **req) {
  size_t row = kernels_act_bytes(pa->kb, E);
  tsr_status st = pack(pa, pa->sbuf, k, v, row);
  if (st) return st;
  counts(pa, row, 1, 0);
  st = pa->cb->ialltoallv(pa->cb, pa->g, pa->sbuf, pa->sb, pa->sd, pa->rbuf, pa->rb, pa->rd, req);
  return st || !pa->serial ? st : pa->cb->wait(pa->cb, req);
}

// Waits for the exchange *req (also after an error, so its buffers are free again): st, or
// the wait's error.
static tsr_status finish_kv(placed_attention *pa, tsr_status st, comm_request **req) {
  tsr_status w = pa->cb->wait(pa->cb, req);
  return st ? st : w;
}

static const int32_t *peer_pos(const placed_attention *pa, int o) {
  return pa->pos_recv + (size_t)pa->roff[o] * 3;
}

// The own keys' attention runs while the peers' K/V rows travel; the received rows'
// partials are merged after it in rank order, as without the overlap.
tsr_status placed_attention_forward(placed_attention *pa, void *out, float *lse, const void *q,
                                    const void *k, const void *v, int H, int Dh, float scale) {
  const kernels_backend *kb = pa->kb;
  const int Lq = (int)pa->lq, n = pa->n_clips;
  const size_t E = (size_t)H * Dh;
  comm_request *req = NULL;
  tsr_status st = pa->k > 1 ? buffers(pa, H, Dh) : TSR_OK;
  if (!st && pa->k > 1) st = start_kv(pa, k, v, E, &req);
  if (!st)
    st = kb->attention_masked_forward(kb, out, lse, q, k, v, pa->cu_loc, pa->cu_loc, pa->pos_loc,
                                      pa->pos_loc, pa->mask, n, pa->bound_loc, pa->bound_loc, Lq,
                                      Lq, H, Dh, scale);
  if ((st = finish_kv(pa, st, &req)) || pa->k == 1) return st;
  for (int o = 0; o < pa->k && !st; o++) {
    if (!pa->rtok[o]) continue;
    st = kb->attention_masked_forward(kb, pa->pout, pa->plse, q, peer_rows(pa, pa->rbuf, o, 0, E),
                                      peer_rows(pa, pa->rbuf, o, 1, E), pa->cu_loc, pa->cu_peer[o],
                                      pa->pos_loc, peer_pos(pa, o), pa->mask, n, pa->bound_loc,
                                      pa->bound_peer[o], Lq, (int)pa->rtok[o], H, Dh, scale);
    if (!st) st = kb->attention_merge(kb, out, lse, pa->pout, pa->plse, Lq, H, Dh);
  }
  return st;
}

// Adds the gradient shares the peers computed for this rank's rows (grecv, per peer dK
// rows then dV rows, in the order pack sent them) into dk, dv.
static tsr_status add_shares(placed_attention *pa, void *dk, void *dv, size_t E) {
  const kernels_backend *kb = pa->kb;
  tsr_status st = TSR_OK;
  for (int o = 0; o < pa->k && !st; o++) {
    int64_t at = 2 * pa->soff[o];
    for (int r = pa->run_off[o]; r < pa->run_off[o + 1] && !st; r++) {
      const row_run *u = &pa->runs[r];
      size_t nel = (size_t)u->len * E;
      void *gk = kernels_act_at(kb, dk, (size_t)u->row * E), *gv = kernels_act_at(kb, dv, (size_t)u->row * E);
      st = kb->add_act(kb, gk, gk, kernels_act_at(kb, pa->grecv, (size_t)at * E), nel);
      if (!st)
        st = kb->add_act(kb, gv, gv, kernels_act_at(kb, pa->grecv, (size_t)(at + pa->stok[o]) * E), nel);
      at += u->len;
    }
  }
  return st;
}

// The own keys' share of the backward (dq, dk, dv += of every query against them) for the
// keys of `half`: rows [0, split) (0), [split, lq) (1), or all of them (-1). Each key's
// dk, dv sum over the queries in one call (the bits of one call); dq gets the halves' sums
// one after the other.
static tsr_status own_backward(placed_attention *pa, int half, void *dq, void *dk, void *dv,
                               const void *dout, const void *q, const void *k, const void *v,
                               const void *out, const float *lse, int H, int Dh, float scale) {
  const kernels_backend *kb = pa->kb;
  const int Lq = (int)pa->lq, n = pa->n_clips;
  const size_t E = (size_t)H * Dh;
  int64_t a = half == 1 ? pa->split : 0, e = half == 0 ? pa->split : pa->lq;
  if (e == a && half >= 0) return TSR_OK;
  const int32_t *cu_k = half < 0 ? pa->cu_loc : pa->cu_loc + (size_t)(1 + half) * (n + 1);
  size_t at = (size_t)a * E;
  return kb->attention_masked_partial_backward(
      kb, dq, kernels_act_at(kb, dk, at), kernels_act_at(kb, dv, at), dout, q,
      kernels_act_at(kb, k, at), kernels_act_at(kb, v, at), out, lse, pa->delta, pa->cu_loc, cu_k,
      pa->pos_loc, pa->pos_loc + (size_t)a * 3, pa->mask, n, pa->bound_loc, pa->bound_loc, Lq,
      (int)(e - a), H, Dh, scale);
}

// The K/V rows travel again while the own keys before split run their backward; the
// received rows' dK/dV shares then return to their holders while the own keys after it
// run theirs, and each holder adds what returns to its own. dq gets the own keys' first
// half, the peers' in rank order, then the second half.
tsr_status placed_attention_backward(placed_attention *pa, void *dq, void *dk, void *dv,
                                     const void *dout, const void *q, const void *k,
                                     const void *v, const void *out, const float *lse, int H,
                                     int Dh, float scale) {
  const kernels_backend *kb = pa->kb;
  const int Lq = (int)pa->lq, n = pa->n_clips;
  const size_t E = (size_t)H * Dh, qbytes = kernels_act_bytes(kb, (size_t)Lq * E);
  comm_request *req = NULL;
  tsr_status st;
  if ((st = buffers(pa, H, Dh)) || (st = kb->attention_delta(kb, pa->delta, dout, out, Lq, H, Dh)) ||
      (st = kb->memset_zero(kb, dq, qbytes)) || (st = kb->memset_zero(kb, dk, qbytes)) ||
      (st = kb->memset_zero(kb, dv, qbytes)))
    return st;
  if (pa->k == 1)
    return own_backward(pa, -1, dq, dk, dv, dout, q, k, v, out, lse, H, Dh, scale);
  size_t rbytes = kernels_act_bytes(kb, 2 * (size_t)pa->roff[pa->k] * E);
  if ((st = kb->memset_zero(kb, pa->gsend, rbytes)) || (st = start_kv(pa, k, v, E, &req)))
    return st;
  st = own_backward(pa, 0, dq, dk, dv, dout, q, k, v, out, lse, H, Dh, scale);
  if ((st = finish_kv(pa, st, &req))) return st;
  for (int o = 0; o < pa->k && !st; o++) {
    if (!pa->rtok[o]) continue;
    st = kb->attention_masked_partial_backward(
        kb, dq, peer_rows(pa, pa->gsend, o, 0, E), peer_rows(pa, pa->gsend, o, 1, E), dout, q,
        peer_rows(pa, pa->rbuf, o, 0, E), peer_rows(pa, pa->rbuf, o, 1, E), out, lse, pa->delta,
        pa->cu_loc, pa->cu_peer[o], pa->pos_loc, peer_pos(pa, o), pa->mask, n, pa->bound_loc,
        pa->bound_peer[o], Lq, (int)pa->rtok[o], H, Dh, scale);
  }
  if (st) return st;
  counts(pa, kernels_act_bytes(kb, E), 1, 1);
  st = pa->cb->ialltoallv(pa->cb, pa->g, pa->gsend, pa->sb, pa->sd, pa->grecv, pa->rb, pa->rd,
                          &req);
  if (!st && pa->serial) st = pa->cb->wait(pa->cb, &req);
  if (!st) st = own_backward(pa, 1, dq, dk, dv, dout, q, k, v, out, lse, H, Dh, scale);
  if ((st = finish_kv(pa, st, &req))) return st;
  return add_shares(pa, dk, dv, E);
}
