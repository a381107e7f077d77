// kernels/cpu/attention.c — attention over packed variable-length clips, flash style.
//
// Forward: for every (clip, head, tile of BQ queries) work item, loop over the clip's keys
// in tiles of BK with an online softmax (running max m, running sum l, unnormalised
// output O rescaled by exp(m_old - m_new)); finally out = O / l, lse = m + log l.
// Backward (given the final lse and delta = rowsum(dout * out)), two passes so that every
// output row is owned by exactly one work item (no atomics, deterministic):
//   pass 1, per (clip, head, key tile): loop over query tiles, recompute
//           P = exp(scale q.k - lse), accumulate dv += P^T dout and dk += scale dS^T q;
//   pass 2, per (clip, head, query tile): loop over key tiles, recompute P and dS,
//           accumulate dq += scale dS k.
// dS = P * (dout.v - delta). Scores are recomputed by the same tile functions in both
// passes, so they are bitwise the same. Memory: per thread O((BQ + BK) * Dh + BQ * BK)
// floats, plus a tile list of O(L / B + clips) entries: linear in L.
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

enum { BQ = 64, BK = 64 };

typedef struct {
  int clip;   // clip index
  int start;  // first row of the tile, relative to the clip's first row
  int rows;   // rows in the tile (<= BQ or BK)
} tile;

// Tiles of at most B rows covering every clip of cu (C + 1). *out freed by the caller.
static tsr_status build_tiles(const char *op, const int32_t *cu, int n_clips, int B, tile **out,
                              size_t *n_out) {
  size_t n = 0;
  for (int c = 0; c < n_clips; c++) n += (size_t)(cu[c + 1] - cu[c] + B - 1) / B;
  tile *t = malloc((n ? n : 1) * sizeof(tile));
  if (!t) return err_set(TSR_ENOMEM, "%s: no memory for %zu tiles", op, n);
  size_t i = 0;
  for (int c = 0; c < n_clips; c++) {
    int len = cu[c + 1] - cu[c];
    for (int s = 0; s < len; s += B) t[i++] = (tile){c, s, len - s < B ? len - s : B};
  }
  *out = t;
  *n_out = n;
  return TSR_OK;
}

// The tensors and sizes of one attention call, shared by all its work items.
typedef struct {
  float *out, *lse, *dq, *dk, *dv;                   // outputs (NULL where unused)
  const float *q, *k, *v, *dout, *lse_in, *delta;    // inputs (NULL where unused)
  int H, Dh;
  float scale;
} attn_args;

// One work item: rows [r0, r0 + n) of head h (a tile of one clip) against the rows
// [o_begin, o_end) of the same clip on the other side (keys for query tiles, queries for
// key tiles). ws: the calling thread's workspace.
typedef void (*attn_item_fn)(float *ws, const attn_args *a, size_t r0, int n, size_t o_begin,
                             size_t o_end, int h);

// Runs fn over every (tile of cu_rows in blocks of B rows, head) in parallel, each against
// its clip's rows of cu_other. Items write disjoint rows, so the result does not depend on
// the number of threads.
static tsr_status attn_for_each_tile(const char *op, const attn_args *a, const int32_t *cu_rows,
                                     const int32_t *cu_other, int n_clips, int B, size_t per,
                                     attn_item_fn fn) {
  tile *tiles = NULL;
  size_t nt = 0;
  float *ws = NULL;
  tsr_status st = build_tiles(op, cu_rows, n_clips, B, &tiles, &nt);
  // 64-byte aligned (kcpu_thread_scratch): the tiles inside are read with full-width vector
  // loads, and a base that malloc leaves 16 bytes past a line would split every one of
  // them across two lines (the forward's tile loop measured ~25% slower on dit-s then).
  if (!st && !(ws = kcpu_thread_scratch(op, &per))) st = TSR_ENOMEM;
  if (!st) {
    const int H = a->H;
    ptrdiff_t items = (ptrdiff_t)(nt * (size_t)H);
#pragma omp parallel
    {
      float *w = ws + (size_t)omp_get_thread_num() * per;
#pragma omp for schedule(dynamic, 1)
      for (ptrdiff_t it = 0; it < items; it++) {
        const tile *t = &tiles[it / H];
        fn(w, a, (size_t)cu_rows[t->clip] + t->start, t->rows, (size_t)cu_other[t->clip],
           (size_t)cu_other[t->clip + 1], (int)(it % H));
      }
    }
  }
  free(ws);
  free(tiles);
  return st;
}

// dst: (n, Dh) contiguous = rows [r0, r0 + n) of head h of x (rows of H * Dh)
static void load_rows(float *dst, const float *x, size_t r0, int n, int h, int H, int Dh) {
  for (int i = 0; i < n; i++)
    memcpy(dst + (size_t)i * Dh, x + ((r0 + i) * H + h) * (size_t)Dh, (size_t)Dh * sizeof(float));
}

// dst: (Dh, BK), dst[d][j] = row r0 + j of head h of x, j < n (transposed tile)
static void load_cols(float *dst, const float *x, size_t r0, int n, int h, int H, int Dh) {
  for (int j = 0; j < n; j++) {
    const float *xr = x + ((r0 + j) * H + h) * (size_t)Dh;
    for (int d = 0; d < Dh; d++) dst[(size_t)d * BK + j] = xr[d];
  }
}

// S: (bq, BK) = A (bq, Dh) * Bt (Dh, BK), columns j < bk; sums over d in order.
static void tile_dot(float *S, const float *A, const float *Bt, int bq, int bk, int Dh) {
  for (int i = 0; i < bq; i++) {
    float *s = S + (size_t)i * BK;
    const float *a = A + (size_t)i * Dh;
    for (int j = 0; j < bk; j++) s[j] = 0.0f;
    for (int d = 0; d < Dh; d++) {
      float ad = a[d];
      const float *bt = Bt + (size_t)d * BK;
      for (int j = 0; j < bk; j++) s[j] += ad * bt[j];
    }
  }
}

// y: (n) += alpha * x: (n)
static inline void row_axpy(float *restrict y, float alpha, const float *restrict x, int n) {
  for (int d = 0; d < n; d++) y[d] += alpha * x[d];
}

static tsr_status check_attn(const char *op, const int32_t *cu_q, const int32_t *cu_k,
                             int n_clips, int Lq, int Lk, int H, int Dh, float scale) {
  KCPU_DIM(op, Lq);
  KCPU_DIM(op, Lk);
  KCPU_DIM(op, H);
  if (Dh <= 0) return err_set(TSR_EINVAL, "%s: head dimension %d must be > 0", op, Dh);
  if (!isfinite(scale)) return err_set(TSR_EINVAL, "%s: softmax scale is not finite", op);
  tsr_status st = kcpu_check_cu(op, "cu_q", cu_q, n_clips, Lq);
  return st ? st : kcpu_check_cu(op, "cu_k", cu_k, n_clips, Lk);
}

// One forward work item: queries [q0, q0 + bq) of head h against keys [k_begin, k_end).
// ws: BQ*Dh (Q) + BQ*Dh (O) + Dh*BK (Kt) + BQ*BK (S) + 2*BQ (m, l) floats
static void forward_item(float *ws, const attn_args *a, size_t q0, int bq, size_t k_begin,
                         size_t k_end, int h) {
  float *out = a->out, *lse = a->lse;
  const float *q = a->q, *k = a->k, *v = a->v, scale = a->scale;
  const int H = a->H, Dh = a->Dh;
  float *Q = ws, *O = Q + (size_t)BQ * Dh, *Kt = O + (size_t)BQ * Dh, *S = Kt + (size_t)Dh * BK;
  float *m = S + (size_t)BQ * BK, *l = m + BQ;
  load_rows(Q, q, q0, bq, h, H, Dh);
  memset(O, 0, (size_t)bq * Dh * sizeof(float));
  for (int i = 0; i < bq; i++) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  for (size_t k0 = k_begin; k0 < k_end; k0 += BK) {
    int bk = k_end - k0 < BK ? (int)(k_end - k0) : BK;
    load_cols(Kt, k, k0, bk, h, H, Dh);
    tile_dot(S, Q, Kt, bq, bk, Dh);
    for (int i = 0; i < bq; i++) {
      float *s = S + (size_t)i * BK, mx = m[i];
      for (int j = 0; j < bk; j++) {
        s[j] *= scale;
        mx = s[j] > mx ? s[j] : mx;
      }
      float corr = kcpu_expf(m[i] - mx), sum = 0.0f;
      for (int j = 0; j < bk; j++) {
        s[j] = kcpu_expf(s[j] - mx);
        sum += s[j];
      }
      l[i] = l[i] * corr + sum;
      m[i] = mx;
      float *o = O + (size_t)i * Dh;
      for (int d = 0; d < Dh; d++) o[d] *= corr;
      for (int j = 0; j < bk; j++) row_axpy(o, s[j], v + ((k0 + j) * H + h) * (size_t)Dh, Dh);
    }
  }
  for (int i = 0; i < bq; i++) {
    float *dst = out + ((q0 + i) * H + h) * (size_t)Dh;
    float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    for (int d = 0; d < Dh; d++) dst[d] = O[(size_t)i * Dh + d] * inv;
    lse[(q0 + i) * H + h] = l[i] > 0.0f ? m[i] + logf(l[i]) : -INFINITY;
  }
}

// out: (Lq, H, Dh), lse: (Lq, H), q: (Lq, H, Dh), k, v: (Lk, H, Dh), cu_q, cu_k: (C + 1)
tsr_status kcpu_attention_partial_forward(kb_t *kb, float *out, float *lse, const float *q,
                                          const float *k, const float *v, const int32_t *cu_q,
                                          const int32_t *cu_k, int n_clips, int Lq, int Lk, int H,
                                          int Dh, float scale) {
  const char *op = "attention_forward";
  tsr_status st = check_attn(op, cu_q, cu_k, n_clips, Lq, Lk, H, Dh, scale);
  if (st || Lq == 0 || H == 0) return st;
  KCPU_NEED(op, out);
  KCPU_NEED(op, lse);
  KCPU_NEED(op, q);
  if (Lk > 0) {
    KCPU_NEED(op, k);
    KCPU_NEED(op, v);
  }
  size_t per = 2 * (size_t)BQ * Dh + (size_t)Dh * BK + (size_t)BQ * BK + 2 * BQ;
  attn_args a = {.out = out, .lse = lse, .q = q, .k = k, .v = v, .H = H, .Dh = Dh, .scale = scale};
  return attn_for_each_tile(op, &a, cu_q, cu_k, n_clips, BQ, per, forward_item);
}

tsr_status kcpu_attention_forward(kb_t *kb, float *out, float *lse, const float *q, const float *k,
                                  const float *v, const int32_t *cu, int n_clips, int L, int H,
                                  int Dh, float scale) {
  return kcpu_attention_partial_forward(kb, out, lse, q, k, v, cu, cu, n_clips, L, L, H, Dh, scale);
}

// out_a: (L, H, Dh), lse_a: (L, H), out_b: (L, H, Dh), lse_b: (L, H)
tsr_status kcpu_attention_merge(kb_t *kb, float *out_a, float *lse_a, const float *out_b,
                                const float *lse_b, int L, int H, int Dh) {
  KCPU_DIM("attention_merge", L);
  KCPU_DIM("attention_merge", H);
  KCPU_DIM("attention_merge", Dh);
  size_t rows = (size_t)L * H;
  if (rows == 0) return TSR_OK;
  KCPU_NEED("attention_merge", out_a);
  KCPU_NEED("attention_merge", lse_a);
  KCPU_NEED("attention_merge", out_b);
  KCPU_NEED("attention_merge", lse_b);
#pragma omp parallel for schedule(static) if (rows * Dh > KCPU_PAR_MIN)
  for (size_t r = 0; r < rows; r++) {
    float *oa = out_a + r * Dh;
    const float *ob = out_b + r * Dh;
    double la = lse_a[r], lb = lse_b[r];
    if (lb == -INFINITY) continue;
    if (la == -INFINITY) {
      memcpy(oa, ob, (size_t)Dh * sizeof(float));
      lse_a[r] = lse_b[r];
      continue;
    }
    double mx = la > lb ? la : lb;
    double lse = mx + log(exp(la - mx) + exp(lb - mx));
    float wa = (float)exp(la - lse), wb = (float)exp(lb - lse);
    for (int d = 0; d < Dh; d++) oa[d] = wa * oa[d] + wb * ob[d];
    lse_a[r] = (float)lse;
  }
  return TSR_OK;
}

// delta: (L, H), dout, out: (L, H, Dh)
tsr_status kcpu_attention_delta(kb_t *kb, float *delta, const float *dout, const float *out, int L,
                                int H, int Dh) {
  KCPU_DIM("attention_delta", L);
  KCPU_DIM("attention_delta", H);
  KCPU_DIM("attention_delta", Dh);
  size_t rows = (size_t)L * H;
  if (rows == 0) return TSR_OK;
  KCPU_NEED("attention_delta", delta);
  KCPU_NEED("attention_delta", dout);
  KCPU_NEED("attention_delta", out);
#pragma omp parallel for schedule(static) if (rows * Dh > KCPU_PAR_MIN)
  for (size_t r = 0; r < rows; r++) {
    double s = 0.0;
    for (int d = 0; d < Dh; d++) s += (double)dout[r * Dh + d] * out[r * Dh + d];
    delta[r] = (float)s;
  }
  return TSR_OK;
}

// Shared by both backward passes. For queries [q0, q0 + bq) and the key tile held in
// Kt, Vt (Dh, BK): P (bq, BK) = exp(scale Q.K - lse), dS (bq, BK) = P * (dO.V - delta).
// Q, dO: (bq, Dh) loaded; lse, delta: (Lq, H) of the queries.
static void tile_grad(float *P, float *dS, const float *Q, const float *dO, const float *Kt,
                      const float *Vt, const float *lse, const float *delta, size_t q0, int bq,
                      int bk, int h, int H, int Dh, float scale) {
  tile_dot(P, Q, Kt, bq, bk, Dh);
  tile_dot(dS, dO, Vt, bq, bk, Dh);
  for (int i = 0; i < bq; i++) {
    float li = lse[(q0 + i) * H + h], di = delta[(q0 + i) * H + h];
    float *p = P + (size_t)i * BK, *ds = dS + (size_t)i * BK;
    if (!isfinite(li)) {  // no key anywhere: the row contributes nothing
      for (int j = 0; j < bk; j++) p[j] = ds[j] = 0.0f;
      continue;
    }
    for (int j = 0; j < bk; j++) {
      p[j] = kcpu_expf(p[j] * scale - li);
      ds[j] = p[j] * (ds[j] - di);
    }
  }
}

// Pass 1 item: key tile [k0, k0 + bk) of head h against queries [q_begin, q_end):
// dk, dv rows += their contributions. ws: Kt, Vt (Dh*BK each), dK, dV (BK*Dh each),
// Q, dO (BQ*Dh each), P, dS (BQ*BK each).
static void backward_kv_item(float *ws, const attn_args *a, size_t k0, int bk, size_t q_begin,
                             size_t q_end, int h) {
  float *dk = a->dk, *dv = a->dv;
  const float *dout = a->dout, *q = a->q, *k = a->k, *v = a->v, *lse = a->lse_in;
  const float *delta = a->delta, scale = a->scale;
  const int H = a->H, Dh = a->Dh;
  size_t tk = (size_t)Dh * BK, tq = (size_t)BQ * Dh;
  float *Kt = ws, *Vt = Kt + tk, *dK = Vt + tk, *dV = dK + tk, *Q = dV + tk, *dO = Q + tq;
  float *P = dO + tq, *dS = P + (size_t)BQ * BK;
  load_cols(Kt, k, k0, bk, h, H, Dh);
  load_cols(Vt, v, k0, bk, h, H, Dh);
  memset(dK, 0, (size_t)bk * Dh * sizeof(float));
  memset(dV, 0, (size_t)bk * Dh * sizeof(float));
  for (size_t q0 = q_begin; q0 < q_end; q0 += BQ) {
    int bq = q_end - q0 < BQ ? (int)(q_end - q0) : BQ;
    load_rows(Q, q, q0, bq, h, H, Dh);
    load_rows(dO, dout, q0, bq, h, H, Dh);
    tile_grad(P, dS, Q, dO, Kt, Vt, lse, delta, q0, bq, bk, h, H, Dh, scale);
    for (int i = 0; i < bq; i++)
      for (int j = 0; j < bk; j++) {
        row_axpy(dV + (size_t)j * Dh, P[(size_t)i * BK + j], dO + (size_t)i * Dh, Dh);
        row_axpy(dK + (size_t)j * Dh, dS[(size_t)i * BK + j], Q + (size_t)i * Dh, Dh);
      }
  }
  for (int j = 0; j < bk; j++) {
    size_t o = ((k0 + j) * H + h) * (size_t)Dh;
    row_axpy(dk + o, scale, dK + (size_t)j * Dh, Dh);
    row_axpy(dv + o, 1.0f, dV + (size_t)j * Dh, Dh);
  }
}

// Pass 2 item: query tile [q0, q0 + bq) of head h against keys [k_begin, k_end): dq rows +=.
// ws: Kt, Vt (Dh*BK each), Q, dO, dQ (BQ*Dh each), P, dS (BQ*BK each).
static void backward_q_item(float *ws, const attn_args *a, size_t q0, int bq, size_t k_begin,
                            size_t k_end, int h) {
  float *dq = a->dq;
  const float *dout = a->dout, *q = a->q, *k = a->k, *v = a->v, *lse = a->lse_in;
  const float *delta = a->delta, scale = a->scale;
  const int H = a->H, Dh = a->Dh;
  size_t tk = (size_t)Dh * BK, tq = (size_t)BQ * Dh;
  float *Kt = ws, *Vt = Kt + tk, *Q = Vt + tk, *dO = Q + tq, *dQ = dO + tq, *P = dQ + tq;
  float *dS = P + (size_t)BQ * BK;
  load_rows(Q, q, q0, bq, h, H, Dh);
  load_rows(dO, dout, q0, bq, h, H, Dh);
  memset(dQ, 0, (size_t)bq * Dh * sizeof(float));
  for (size_t k0 = k_begin; k0 < k_end; k0 += BK) {
    int bk = k_end - k0 < BK ? (int)(k_end - k0) : BK;
    load_cols(Kt, k, k0, bk, h, H, Dh);
    load_cols(Vt, v, k0, bk, h, H, Dh);
    tile_grad(P, dS, Q, dO, Kt, Vt, lse, delta, q0, bq, bk, h, H, Dh, scale);
    for (int i = 0; i < bq; i++)
      for (int j = 0; j < bk; j++)
        row_axpy(dQ + (size_t)i * Dh, dS[(size_t)i * BK + j], k + ((k0 + j) * H + h) * (size_t)Dh,
                 Dh);
  }
  for (int i = 0; i < bq; i++)
    row_axpy(dq + ((q0 + i) * H + h) * (size_t)Dh, scale, dQ + (size_t)i * Dh, Dh);
}

// dq: (Lq, H, Dh), dk, dv: (Lk, H, Dh) accumulated; dout, q: (Lq, H, Dh); k, v: (Lk, H, Dh);
// lse, delta: (Lq, H); cu_q, cu_k: (C + 1)
tsr_status kcpu_attention_partial_backward(kb_t *kb, float *dq, float *dk, float *dv,
                                           const float *dout, const float *q, const float *k,
                                           const float *v, const float *lse, const float *delta,
                                           const int32_t *cu_q, const int32_t *cu_k, int n_clips,
                                           int Lq, int Lk, int H, int Dh, float scale) {
  const char *op = "attention_backward";
  tsr_status st = check_attn(op, cu_q, cu_k, n_clips, Lq, Lk, H, Dh, scale);
  if (st || Lq == 0 || Lk == 0 || H == 0) return st;
  if (!dq && !dk && !dv) return TSR_OK;
  if ((dk && !dv) || (dv && !dk))
    return err_set(TSR_EINVAL, "%s: dk and dv must both be given or both be NULL", op);
  KCPU_NEED(op, dout);
  KCPU_NEED(op, q);
  KCPU_NEED(op, k);
  KCPU_NEED(op, v);
  KCPU_NEED(op, lse);
  KCPU_NEED(op, delta);
  size_t per = 4 * (size_t)Dh * BK + 3 * (size_t)BQ * Dh + 2 * (size_t)BQ * BK;
  attn_args a = {.dq = dq, .dk = dk, .dv = dv, .q = q, .k = k, .v = v, .dout = dout,
                 .lse_in = lse, .delta = delta, .H = H, .Dh = Dh, .scale = scale};
  // Two passes, so that every output row is written by one work item (no atomics, the
  // same bits for any number of threads): per key tile for dk, dv; per query tile for dq.
  if (dk) st = attn_for_each_tile(op, &a, cu_k, cu_q, n_clips, BK, per, backward_kv_item);
  if (!st && dq) st = attn_for_each_tile(op, &a, cu_q, cu_k, n_clips, BQ, per, backward_q_item);
  return st;
}

// dq, dk, dv: (L, H, Dh) overwritten; dout, q, k, v, out: (L, H, Dh); lse: (L, H)
tsr_status kcpu_attention_backward(kb_t *kb, float *dq, float *dk, float *dv, const float *dout,
                                   const float *q, const float *k, const float *v,
                                   const float *out, const float *lse, const int32_t *cu,
                                   int n_clips, int L, int H, int Dh, float scale) {
  const char *op = "attention_backward";
  tsr_status st = check_attn(op, cu, cu, n_clips, L, L, H, Dh, scale);
  if (st || L == 0 || H == 0) return st;
  KCPU_NEED(op, out);
  size_t rows = (size_t)L * H, n = rows * Dh;
  if (dq) memset(dq, 0, n * sizeof(float));
  if (dk) memset(dk, 0, n * sizeof(float));
  if (dv) memset(dv, 0, n * sizeof(float));
  float *delta = malloc(rows * sizeof(float));
  if (!delta) return err_set(TSR_ENOMEM, "%s: no memory for delta (%zu floats)", op, rows);
  st = kcpu_attention_delta(kb, delta, dout, out, L, H, Dh);
  if (!st)
    st = kcpu_attention_partial_backward(kb, dq, dk, dv, dout, q, k, v, lse, delta, cu, cu,
                                         n_clips, L, L, H, Dh, scale);
  free(delta);
  return st;
}
