// kernels/cpu/attention.c — attention over packed variable-length clips, flash style.
//
// Forward: for every (clip, head, tile of BQ queries) work item, loop over the clip's keys
// in tiles of BK with an online softmax (running max m, running sum l, unnormalised output
// O rescaled by exp(m_old - m_new)); finally out = O / l, lse = m + log l.
// Backward (given the final lse and delta = rowsum(dout * out)), two passes so that every
// output row is owned by exactly one work item (no atomics, deterministic):
//   pass 1, per (clip, head, key tile): loop over query tiles, recompute
//           P = exp(scale q.k - lse), accumulate dv += P^T dout and dk += scale dS^T q;
//   pass 2, per (clip, head, query tile): loop over key tiles, recompute P and dS,
//           accumulate dq += scale dS k.
// dS = P * (dout.v - delta). Scores are recomputed by the same tile functions in both
// passes, so they are bitwise the same.
// Clip items: clips of at most CLIP_ITEM_ROWS queries and keys, when there are enough of
// them to keep every thread busy, get one work item per (clip, head) instead. Forward: the
// clip's keys are transposed once for all its query tiles. Backward: ONE pass that owns
// the clip's dq, dk and dv rows of that head and computes each P and dS tile once (the two
// passes compute each twice). Both keep the tiles and the order of every sum, so the bits
// are the same whichever way a clip goes (tests/kernels/test_kernels_attention.c). The items
// and their schedule: attention_items.h.
// Every product runs on register-blocked vector tiles (see "tiles in the thread's
// scratch" below). Memory: per thread O((BQ + BK) * Dh + BQ * BK) floats, plus for clip
// items the clip's keys and values (forward) or queries, output gradients and dQ sums
// (backward): at most 3 * CLIP_ITEM_ROWS * Dh floats per thread; plus a tile list of
// O(L / B + clips) entries: linear in L.
// Masks (kernels.h kernels_mask, the attention_masked_* entries): each token's chunk or tile
// is computed once a call (mask.h), and each (query tile, key tile) pair is classed from
// their coordinates' boxes: denied whole (skipped: it would add exact zeros), allowed whole
// (the unmasked path) or mixed (denied scores -inf in the forward, P and dS 0 in the
// backward); with no mask every path is the unmasked kernel's, bit for bit.
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check_attention.h"
#include "kernels/cpu/attention_items.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/mask.h"

enum { BQ = 64, BK = 64 };

// How a's mask treats queries [q0, q0 + bq) against keys [k0, k0 + bk), from the boxes of
// their mask coordinates: no pair allowed (the tile is skipped: it would add exact zeros),
// every pair (no per-score test), or some.
enum { MT_NONE, MT_SOME, MT_ALL };
static int mask_tile(const attn_args *a, size_t q0, int bq, size_t k0, int bk) {
  int32_t box[2][2][3];  // [query, key][lo, hi][axis]
  const int32_t *src[2] = {a->cq + 3 * q0, a->ck + 3 * k0};
  const int n[2] = {bq, bk};
  for (int s = 0; s < 2; s++) {
    for (int d = 0; d < 3; d++) box[s][0][d] = box[s][1][d] = src[s][d];
    for (int i = 1; i < n[s]; i++)
      for (int d = 0; d < 3; d++) {
        int32_t v = src[s][3 * i + d];
        if (v < box[s][0][d]) box[s][0][d] = v;
        if (v > box[s][1][d]) box[s][1][d] = v;
      }
  }
  return kcpu_mask_boxes(a->mask, box[0][0], box[0][1], box[1][0], box[1][1]);
}

// s[j] = fill for the keys j < bk of [k0, k0 + bk) that a's mask denies query q.
static void mask_row(const attn_args *a, size_t q, size_t k0, int bk, float *s, float fill) {
  const int32_t *cq = a->cq + 3 * q;
  for (int j = 0; j < bk; j++)
    if (!kcpu_mask_coords_allow(a->mask, cq, a->ck + 3 * (k0 + j))) s[j] = fill;
}

// ---- tiles in the thread's scratch, and the register-blocked products over them ----------
// A row of a head (Dh floats) is held in the scratch as NV = ceil(Dh / 16) vectors of 16
// floats (vf16: one AVX-512 register, two AVX ones), zero-padded to Dhp = 16 NV: every
// product below runs on whole vectors with its accumulators in registers. The padding
// adds exact zeros (0 * 0) to sums that are never stored, so it changes no stored bit.
// Every product sums its terms in the same order as the plain loops it replaces (d
// ascending for scores, key or query ascending for the outputs), so the kernels keep
// their bits: each accumulator only lives in a register instead of memory.
typedef float vf16 __attribute__((vector_size(64)));
enum { VW = 16, KV = BK / VW };  // floats per vector; vectors per score row

static inline int padded_dh(int Dh) { return (Dh + VW - 1) / VW * VW; }

// Floats of forward_rows's workspace (a multiple of 16, so what follows stays aligned).
#define FWD_TILE_WS(Dh)                                                                  \
  (2 * (size_t)BQ * padded_dh(Dh) + (size_t)BK * padded_dh(Dh) + (size_t)(Dh) * BK + \
   (size_t)BQ * BK + 3 * BQ)

// dst: (n, Dhp) = rows [r0, r0 + n) of head h of x (rows of H * Dh), zero-padded
static void load_rows(float *dst, const float *x, size_t r0, int n, int h, int H, int Dh) {
  int Dhp = padded_dh(Dh);
  for (int i = 0; i < n; i++) {
    float *d = dst + (size_t)i * Dhp;
    memcpy(d, x + ((r0 + i) * H + h) * (size_t)Dh, (size_t)Dh * sizeof(float));
    for (int e = Dh; e < Dhp; e++) d[e] = 0.0f;
  }
}

// dst: (Dh, ld), dst[d][j] = row r0 + j of head h of x for j < n, 0 for n <= j < n
// rounded up to BK (transposed keys; the zero columns make every score row BK wide)
static void load_cols(float *dst, size_t ld, const float *x, size_t r0, int n, int h, int H,
                      int Dh) {
  for (int j = 0; j < n; j++) {
    const float *xr = x + ((r0 + j) * H + h) * (size_t)Dh;
    for (int d = 0; d < Dh; d++) dst[(size_t)d * ld + j] = xr[d];
  }
  int padded = (n + BK - 1) / BK * BK;
  if (n < padded)
    for (int d = 0; d < Dh; d++)
      memset(dst + (size_t)d * ld + n, 0, (size_t)(padded - n) * sizeof(float));
}

// S: (bq, BK) = A (bq, Dhp) * Bt (Dh, BK; rows ldb apart, 64-byte aligned): s[j] = sum
// over d ascending of a[d] bt[d][j], from 0. Two rows at a time share the loads of Bt.
static void tile_dot(float *S, const float *A, const float *Bt, size_t ldb, int bq, int Dh) {
  const int Dhp = padded_dh(Dh);
  int i = 0;
  for (; i + 1 < bq; i += 2) {
    const float *a0 = A + (size_t)i * Dhp, *a1 = a0 + Dhp;
    vf16 s0[KV], s1[KV];
    for (int c = 0; c < KV; c++) s0[c] = s1[c] = (vf16){0};
    for (int d = 0; d < Dh; d++) {
      const vf16 *bt = (const vf16 *)(Bt + (size_t)d * ldb);
      float x0 = a0[d], x1 = a1[d];
      for (int c = 0; c < KV; c++) {
        s0[c] += x0 * bt[c];
        s1[c] += x1 * bt[c];
      }
    }
    vf16 *r0 = (vf16 *)(S + (size_t)i * BK), *r1 = (vf16 *)(S + (size_t)(i + 1) * BK);
    for (int c = 0; c < KV; c++) r0[c] = s0[c], r1[c] = s1[c];
  }
  for (; i < bq; i++) {
    const float *a0 = A + (size_t)i * Dhp;
    vf16 s0[KV];
    for (int c = 0; c < KV; c++) s0[c] = (vf16){0};
    for (int d = 0; d < Dh; d++) {
      const vf16 *bt = (const vf16 *)(Bt + (size_t)d * ldb);
      float x0 = a0[d];
      for (int c = 0; c < KV; c++) s0[c] += x0 * bt[c];
    }
    vf16 *r0 = (vf16 *)(S + (size_t)i * BK);
    for (int c = 0; c < KV; c++) r0[c] = s0[c];
  }
}

// The row products: R rows of nv vectors each, both compile-time (the R * nv accumulators
// stay in registers; R independent rows hide the latency of the additions, which within
// one row must stay in order). Rows wider than NVMAX vectors go through NVMAX at a time.
enum { NVMAX = 4, RMAX = 4 };

// For r < R: o_r (nv vectors, o + r * os) = o_r * corr[r] + sum over j < n ascending of
// p[r * prs + j * ps] x[j] (x: rows of xs floats, shared by the R rows). corr NULL: 1 (the
// product with 1 is then skipped: it is exact anyway).
static inline __attribute__((always_inline)) void rows_axpy_k(float *o, size_t os,
                                                             const float *corr, const float *p,
                                                             size_t prs, size_t ps, const float *x,
                                                             size_t xs, int n, const int R,
                                                             const int nv) {
  vf16 acc[RMAX][NVMAX];
  for (int r = 0; r < R; r++)
    for (int c = 0; c < nv; c++) {
      acc[r][c] = ((const vf16 *)(o + r * os))[c];
      if (corr) acc[r][c] *= corr[r];
    }
  for (int j = 0; j < n; j++) {
    const vf16 *xj = (const vf16 *)(x + (size_t)j * xs);
    for (int r = 0; r < R; r++) {
      float pj = p[r * prs + (size_t)j * ps];
      for (int c = 0; c < nv; c++) acc[r][c] += pj * xj[c];
    }
  }
  for (int r = 0; r < R; r++)
    for (int c = 0; c < nv; c++) ((vf16 *)(o + r * os))[c] = acc[r][c];
}

// rows_axpy_k over `rows` rows of Dhp floats (o, x rows 64-byte aligned; Dhp a multiple
// of 16): groups of 4 rows when a row is one vector, 2 when two, else one.
static void rows_axpy(float *o, size_t os, const float *corr, const float *p, size_t prs,
                      size_t ps, const float *x, size_t xs, int n, int rows, int Dhp) {
  int r = 0;
  if (Dhp == VW)
    for (; r + 4 <= rows; r += 4)
      rows_axpy_k(o + r * os, os, corr ? corr + r : NULL, p + r * prs, prs, ps, x, xs, n, 4, 1);
  if (Dhp == 2 * VW)
    for (; r + 2 <= rows; r += 2)
      rows_axpy_k(o + r * os, os, corr ? corr + r : NULL, p + r * prs, prs, ps, x, xs, n, 2, 2);
  for (; r < rows; r++) {
    float *orow = o + r * os;
    const float *cr = corr ? corr + r : NULL, *pr = p + r * prs;
    for (int v0 = 0; v0 < Dhp; v0 += NVMAX * VW) {
      int nv = (Dhp - v0) / VW < NVMAX ? (Dhp - v0) / VW : NVMAX;
      switch (nv) {
      case 1: rows_axpy_k(orow + v0, 0, cr, pr, 0, ps, x + v0, xs, n, 1, 1); break;
      case 2: rows_axpy_k(orow + v0, 0, cr, pr, 0, ps, x + v0, xs, n, 1, 2); break;
      case 3: rows_axpy_k(orow + v0, 0, cr, pr, 0, ps, x + v0, xs, n, 1, 3); break;
      default: rows_axpy_k(orow + v0, 0, cr, pr, 0, ps, x + v0, xs, n, 1, 4); break;
      }
    }
  }
}

// max(m, s[0 .. BK)) with the comparisons of `s > m ? s : m` (a NaN is never taken), in
// vectors: the maximum of a set does not depend on the order it is taken in.
typedef int32_t vi16 __attribute__((vector_size(64)));
static inline float row_max(const float *s, float m) {
  vf16 mv = (vf16){0} + m;
  for (int c = 0; c < KV; c++) {
    vf16 x = ((const vf16 *)s)[c];
    vi16 gt = x > mv;
    mv = (vf16)(((vi16)x & gt) | ((vi16)mv & ~gt));
  }
  for (int e = 0; e < VW; e++) m = mv[e] > m ? mv[e] : m;
  return m;
}

// y: (n) += alpha * x: (n)
static inline void row_axpy(float *restrict y, float alpha, const float *restrict x, int n) {
  for (int d = 0; d < n; d++) y[d] += alpha * x[d];
}

// Every clip of cu (already checked) has at most max tokens (kernels.h: max_len bounds them).
static tsr_status check_max_len(const char *op, const char *name, const char *max_name,
                                const int32_t *cu, int n_clips, int max) {
  if (max < 0) return err_set(TSR_EINVAL, "%s: %s = %d is negative", op, max_name, max);
  for (int c = 0; c < n_clips; c++)
    if (cu[c + 1] - cu[c] > max)
      return err_set(TSR_EINVAL, "%s: clip %d of %s has %d tokens, more than %s = %d (it must "
                     "bound every clip's length)", op, c, name, cu[c + 1] - cu[c], max_name, max);
  return TSR_OK;
}

// The offsets' values and the clips' lengths against max_q, max_k, which the CPU reads at
// the call; the rest of the arguments are kernels/check_attention.h's (each entry checks
// them first).
static tsr_status check_clips(const char *op, int whole, const int32_t *cu_q,
                              const int32_t *cu_k, int n_clips, int max_q, int max_k, int Lq,
                              int Lk) {
  tsr_status st = kcpu_check_cu(op, whole ? "cu_seqlens" : "cu_q", cu_q, n_clips, Lq);
  if (!st && !whole) st = kcpu_check_cu(op, "cu_k", cu_k, n_clips, Lk);
  if (!st)
    st = check_max_len(op, whole ? "cu_seqlens" : "cu_q", whole ? "max_len" : "max_q", cu_q,
                       n_clips, max_q);
  if (!st && !whole) st = check_max_len(op, "cu_k", "max_k", cu_k, n_clips, max_k);
  return st;
}

// Queries [q0, q0 + bq) of head h against keys [k_begin, k_end). The keys come from Ktc
// (Dh, ldk) and Vc (rows of Dhp) when given, transposed and padded once for the clip
// (forward_clip_item), else tile by tile from k and v.
// ws: BQ*Dhp (Q) + BQ*Dhp (O) + BK*Dhp (V) + Dh*BK (Kt) + BQ*BK (S) + 3*BQ (m, l, corr)
static void forward_rows(float *ws, const attn_args *a, size_t q0, int bq, size_t k_begin,
                         size_t k_end, int h, const float *Ktc, size_t ldk, const float *Vc) {
  float *out = a->out, *lse = a->lse;
  const float *q = a->q, *k = a->k, *v = a->v, scale = a->scale;
  const int H = a->H, Dh = a->Dh, Dhp = padded_dh(Dh);
  float *Q = ws, *O = Q + (size_t)BQ * Dhp, *Vw = O + (size_t)BQ * Dhp;
  float *Ktw = Vw + (size_t)BK * Dhp;
  float *S = Ktw + (size_t)Dh * BK, *m = S + (size_t)BQ * BK, *l = m + BQ, *corr = l + BQ;
  load_rows(Q, q, q0, bq, h, H, Dh);
  memset(O, 0, (size_t)bq * Dhp * sizeof(float));
  for (int i = 0; i < bq; i++) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  for (size_t k0 = k_begin; k0 < k_end; k0 += BK) {
    int bk = k_end - k0 < BK ? (int)(k_end - k0) : BK;
    const int mt = a->mask ? mask_tile(a, q0, bq, k0, bk) : MT_ALL;
    if (mt == MT_NONE) continue;
    const float *Kt = Ktw, *V = Vw;
    size_t ld = BK;
    if (Ktc) {
      Kt = Ktc + (k0 - k_begin), V = Vc + (k0 - k_begin) * Dhp, ld = ldk;
    } else {
      load_cols(Ktw, BK, k, k0, bk, h, H, Dh);
      load_rows(Vw, v, k0, bk, h, H, Dh);
    }
    tile_dot(S, Q, Kt, ld, bq, Dh);
    for (int i = 0; i < bq; i++) {
      float *s = S + (size_t)i * BK;
      for (int j = 0; j < BK; j++) s[j] *= scale;
      for (int j = bk; j < BK; j++) s[j] = -INFINITY;  // past the clip's last key
      if (mt == MT_SOME) mask_row(a, q0 + i, k0, bk, s, -INFINITY);
      float mx = row_max(s, m[i]);
      if (a->mask && mx == -INFINITY) {  // no key allowed yet: the row stays empty
        for (int j = 0; j < BK; j++) s[j] = 0.0f;
        corr[i] = 1.0f;
        continue;
      }
      for (int j = 0; j < BK; j++) s[j] = kcpu_expf(s[j] - mx);  // exp(-inf) = 0
      corr[i] = kcpu_expf(m[i] - mx);
      m[i] = mx;
    }
    // l = l corr + the row's sum over keys in order; four rows' sums side by side
    int i = 0;
    for (; i + 4 <= bq; i += 4) {
      const float *s0 = S + (size_t)i * BK;
      float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
      for (int j = 0; j < bk; j++) {
        a0 += s0[j];
        a1 += s0[BK + j];
        a2 += s0[2 * BK + j];
        a3 += s0[3 * BK + j];
      }
      l[i] = l[i] * corr[i] + a0;
      l[i + 1] = l[i + 1] * corr[i + 1] + a1;
      l[i + 2] = l[i + 2] * corr[i + 2] + a2;
      l[i + 3] = l[i + 3] * corr[i + 3] + a3;
    }
    for (; i < bq; i++) {
      const float *s0 = S + (size_t)i * BK;
      float a0 = 0.0f;
      for (int j = 0; j < bk; j++) a0 += s0[j];
      l[i] = l[i] * corr[i] + a0;
    }
    // O[i] = O[i] corr[i] + sum over keys j in order of S[i][j] V[j]
    rows_axpy(O, (size_t)Dhp, corr, S, BK, 1, V, (size_t)Dhp, bk, bq, Dhp);
  }
  for (int i = 0; i < bq; i++) {
    float *dst = out + ((q0 + i) * H + h) * (size_t)Dh;
    float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    for (int d = 0; d < Dh; d++) dst[d] = O[(size_t)i * Dhp + d] * inv;
    lse[(q0 + i) * H + h] = l[i] > 0.0f ? m[i] + logf(l[i]) : -INFINITY;
  }
}

// One forward work item of the tile scheme: a tile of queries against the clip's keys.
static void forward_item(float *ws, const attn_args *a, size_t q0, int bq, size_t k_begin,
                         size_t k_end, int h) {
  forward_rows(ws, a, q0, bq, k_begin, k_end, h, NULL, 0, NULL);
}

// One forward item per (clip, head) (see kcpu_attn_clip_items): the clip's keys transposed and its
// values padded ONCE, then every query tile against them (the tile items redo both for
// each query tile). Same arithmetic, same bits. ws: forward_rows's, then Dh*ldk (Ktc) and
// lenk*Dhp (Vc), ldk = lenk rounded up to BK.
static void forward_clip_item(float *ws, const attn_args *a, size_t q_begin, int n_q,
                              size_t k_begin, size_t k_end, int h) {
  size_t q_end = q_begin + (size_t)n_q;
  const int H = a->H, Dh = a->Dh;
  int lenk = (int)(k_end - k_begin);
  size_t ldk = (size_t)(lenk + BK - 1) / BK * BK;
  float *Ktc = ws + FWD_TILE_WS(Dh), *Vc = Ktc + (size_t)Dh * ldk;
  load_cols(Ktc, ldk, a->k, k_begin, lenk, h, H, Dh);
  load_rows(Vc, a->v, k_begin, lenk, h, H, Dh);
  for (size_t q0 = q_begin; q0 < q_end; q0 += BQ) {
    int bq = q_end - q0 < BQ ? (int)(q_end - q0) : BQ;
    forward_rows(ws, a, q0, bq, k_begin, k_end, h, Ktc, ldk, Vc);
  }
}

// The mask coordinates (mask.h) of pos_q (Lq, 3) and pos_k (Lk, 3) in one allocation
// *coords (freed by the caller): *cq (Lq, 3) and *ck (Lk, 3), the same rows when pos_q is
// pos_k.
static tsr_status mask_coords(const char *op, const kernels_mask *m, const int32_t *pos_q, int Lq,
                              const int32_t *pos_k, int Lk, int32_t **coords,
                              const int32_t **cq, const int32_t **ck) {
  const int same = pos_q == pos_k && Lq == Lk;
  size_t n = (size_t)Lq + (same ? 0 : (size_t)Lk);
  int32_t *c = malloc((3 * n + 1) * sizeof *c);
  if (!c) return err_set(TSR_ENOMEM, "%s: no memory for the mask's coordinates", op);
  kcpu_mask_coords(m, pos_q, Lq, c);
  if (!same) kcpu_mask_coords(m, pos_k, Lk, c + 3 * (size_t)Lq);
  *coords = c, *cq = c, *ck = same ? c : c + 3 * (size_t)Lq;
  return TSR_OK;
}

// The forward under mask (NULL or FULL: the unmasked attention, bit for bit), its arguments
// checked (kernels/check_attention.h) but for what the CPU reads (whole: cu_q == cu_k are
// whole clips'): out: (Lq, H, Dh), lse: (Lq, H), q: (Lq, H, Dh), k, v: (Lk, H, Dh), cu_q,
// cu_k: (C + 1), pos_q: (Lq, 3), pos_k: (Lk, 3)
static tsr_status forward_masked(const char *op, int whole, float *out, float *lse, const float *q,
                                 const float *k, const float *v, const int32_t *cu_q,
                                 const int32_t *cu_k, const int32_t *pos_q, const int32_t *pos_k,
                                 const kernels_mask *mask, int n_clips, int max_q, int max_k,
                                 int Lq, int Lk, int H, int Dh, float scale) {
  tsr_status st = check_clips(op, whole, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk);
  if (!st && mask) st = kcpu_check_positions(op, mask, pos_q, Lq, pos_k, Lk);
  if (mask && mask->kind == KERNELS_MASK_FULL) mask = NULL;
  if (st || Lq == 0 || H == 0) return st;
  attn_args a = {.out = out, .lse = lse, .q = q, .k = k, .v = v, .H = H, .Dh = Dh, .scale = scale,
                 .mask = mask};
  int32_t *coords = NULL;
  if (mask && (st = mask_coords(op, mask, pos_q, Lq, pos_k, Lk, &coords, &a.cq, &a.ck))) return st;
  // Clips with clip items (kcpu_attn_clip_items) go through forward_clip_item, the others by tiles.
  uint8_t *one = NULL;
  int n_items = 0, item_q = 0, item_k = 0;  // the clip items' longest
  if (Lk > 0)
    st = kcpu_attn_clip_items(op, cu_q, cu_k, n_clips, H, 1, &one, &n_items, &item_q, &item_k);
  size_t ldk = (size_t)(item_k + BK - 1) / BK * BK;
  size_t per1 = FWD_TILE_WS(Dh) + (size_t)Dh * ldk + (size_t)item_k * padded_dh(Dh);
  if (!st && one)
    st = kcpu_attn_for_each_clip(op, &a, cu_q, cu_k, n_clips, one, n_items, per1,
                                 forward_clip_item);
  if (!st)
    st = kcpu_attn_for_each_tile(op, &a, cu_q, cu_k, n_clips, one, BQ, FWD_TILE_WS(Dh),
                                 forward_item);
  free(one);
  free(coords);
  return st;
}

// out: (Lq, H, Dh), lse: (Lq, H), q: (Lq, H, Dh), k, v: (Lk, H, Dh), cu_q, cu_k: (C + 1)
tsr_status kcpu_attention_partial_forward(kb_t *kb, float *out, float *lse, const float *q,
                                          const float *k, const float *v, const int32_t *cu_q,
                                          const int32_t *cu_k, int n_clips, int max_q, int max_k,
                                          int Lq, int Lk, int H, int Dh, float scale) {
  tsr_status st = kernels_check_attention_partial_forward(out, lse, q, k, v, cu_q, cu_k, n_clips,
                                                          max_q, max_k, Lq, Lk, H, Dh, scale);
  return st ? st
            : forward_masked("attention_partial_forward", 0, out, lse, q, k, v, cu_q, cu_k, NULL,
                             NULL, NULL, n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
}

// kcpu_attention_partial_forward under mask; pos_q: (Lq, 3), pos_k: (Lk, 3)
tsr_status kcpu_attention_masked_forward(kb_t *kb, float *out, float *lse, const float *q,
                                         const float *k, const float *v, const int32_t *cu_q,
                                         const int32_t *cu_k, const int32_t *pos_q,
                                         const int32_t *pos_k, kernels_mask mask, int n_clips,
                                         int max_q, int max_k, int Lq, int Lk, int H, int Dh,
                                         float scale) {
  tsr_status st = kernels_check_attention_masked_forward(out, lse, q, k, v, cu_q, cu_k, pos_q,
                                                         pos_k, &mask, n_clips, max_q, max_k, Lq,
                                                         Lk, H, Dh, scale);
  return st ? st
            : forward_masked("attention_masked_forward", 0, out, lse, q, k, v, cu_q, cu_k, pos_q,
                             pos_k, &mask, n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
}

tsr_status kcpu_attention_forward(kb_t *kb, float *out, float *lse, const float *q, const float *k,
                                  const float *v, const int32_t *cu, int n_clips, int max_len,
                                  int L, int H, int Dh, float scale) {
  tsr_status st = kernels_check_attention_forward(out, lse, q, k, v, cu, n_clips, max_len, L, H,
                                                  Dh, scale);
  return st ? st
            : forward_masked("attention_forward", 1, out, lse, q, k, v, cu, cu, NULL, NULL, NULL,
                             n_clips, max_len, max_len, L, L, H, Dh, scale);
}

// out_a: (L, H, Dh), lse_a: (L, H), out_b: (L, H, Dh), lse_b: (L, H)
tsr_status kcpu_attention_merge(kb_t *kb, float *out_a, float *lse_a, const float *out_b,
                                const float *lse_b, int L, int H, int Dh) {
  tsr_status st = kernels_check_attention_merge(out_a, lse_a, out_b, lse_b, L, H, Dh);
  size_t rows = (size_t)L * H;
  if (st || rows == 0) return st;
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
  tsr_status st = kernels_check_attention_delta(delta, dout, out, L, H, Dh);
  size_t rows = (size_t)L * H;
  if (st || rows == 0) return st;
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
// Q, dO: (bq, Dhp) loaded; lse, delta: (Lq, H) of the queries.
// a: the call; some: its mask denies some pairs of the tile (their P and dS are zeroed);
// k0: the tile's first key.
static void tile_grad(const attn_args *a, int some, float *P, float *dS, const float *Q,
                      const float *dO,
                      const float *Kt, const float *Vt, const float *lse, const float *delta,
                      size_t q0, int bq, size_t k0, int bk, int h, int H, int Dh, float scale) {
  tile_dot(P, Q, Kt, BK, bq, Dh);
  tile_dot(dS, dO, Vt, BK, bq, Dh);
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
    if (some) {
      mask_row(a, q0 + i, k0, bk, p, 0.0f);
      mask_row(a, q0 + i, k0, bk, ds, 0.0f);
    }
  }
}

// Pass 1 item: key tile [k0, k0 + bk) of head h against queries [q_begin, q_end):
// dk, dv rows += their contributions. ws: Kt, Vt (Dh*BK each), dK, dV (BK*Dhp each),
// Q, dO (BQ*Dhp each), P, dS (BQ*BK each).
static void backward_kv_item(float *ws, const attn_args *a, size_t k0, int bk, size_t q_begin,
                             size_t q_end, int h) {
  float *dk = a->dk, *dv = a->dv;
  const float *dout = a->dout, *q = a->q, *k = a->k, *v = a->v, *lse = a->lse_in;
  const float *delta = a->delta, scale = a->scale;
  const int H = a->H, Dh = a->Dh, Dhp = padded_dh(Dh);
  size_t tk = (size_t)Dh * BK, tr = (size_t)BK * Dhp, tq = (size_t)BQ * Dhp;
  float *Kt = ws, *Vt = Kt + tk, *dK = Vt + tk, *dV = dK + tr, *Q = dV + tr, *dO = Q + tq;
  float *P = dO + tq, *dS = P + (size_t)BQ * BK;
  load_cols(Kt, BK, k, k0, bk, h, H, Dh);
  load_cols(Vt, BK, v, k0, bk, h, H, Dh);
  memset(dK, 0, (size_t)bk * Dhp * sizeof(float));
  memset(dV, 0, (size_t)bk * Dhp * sizeof(float));
  for (size_t q0 = q_begin; q0 < q_end; q0 += BQ) {
    int bq = q_end - q0 < BQ ? (int)(q_end - q0) : BQ;
    const int mt = a->mask ? mask_tile(a, q0, bq, k0, bk) : MT_ALL;
    if (mt == MT_NONE) continue;
    load_rows(Q, q, q0, bq, h, H, Dh);
    load_rows(dO, dout, q0, bq, h, H, Dh);
    tile_grad(a, mt == MT_SOME, P, dS, Q, dO, Kt, Vt, lse, delta, q0, bq, k0, bk, h, H, Dh, scale);
    // dV[j] += sum over queries i ascending of P[i][j] dO[i], dK[j] likewise with dS, Q
    rows_axpy(dV, (size_t)Dhp, NULL, P, 1, BK, dO, (size_t)Dhp, bq, bk, Dhp);
    rows_axpy(dK, (size_t)Dhp, NULL, dS, 1, BK, Q, (size_t)Dhp, bq, bk, Dhp);
  }
  for (int j = 0; j < bk; j++) {
    size_t o = ((k0 + j) * H + h) * (size_t)Dh;
    row_axpy(dk + o, scale, dK + (size_t)j * Dhp, Dh);
    row_axpy(dv + o, 1.0f, dV + (size_t)j * Dhp, Dh);
  }
}

// Pass 2 item: query tile [q0, q0 + bq) of head h against keys [k_begin, k_end): dq rows +=.
// ws: Kt, Vt (Dh*BK each), K (BK*Dhp), Q, dO, dQ (BQ*Dhp each), P, dS (BQ*BK each).
static void backward_q_item(float *ws, const attn_args *a, size_t q0, int bq, size_t k_begin,
                            size_t k_end, int h) {
  float *dq = a->dq;
  const float *dout = a->dout, *q = a->q, *k = a->k, *v = a->v, *lse = a->lse_in;
  const float *delta = a->delta, scale = a->scale;
  const int H = a->H, Dh = a->Dh, Dhp = padded_dh(Dh);
  size_t tk = (size_t)Dh * BK, tr = (size_t)BK * Dhp, tq = (size_t)BQ * Dhp;
  float *Kt = ws, *Vt = Kt + tk, *K = Vt + tk, *Q = K + tr, *dO = Q + tq, *dQ = dO + tq;
  float *P = dQ + tq, *dS = P + (size_t)BQ * BK;
  load_rows(Q, q, q0, bq, h, H, Dh);
  load_rows(dO, dout, q0, bq, h, H, Dh);
  memset(dQ, 0, (size_t)bq * Dhp * sizeof(float));
  for (size_t k0 = k_begin; k0 < k_end; k0 += BK) {
    int bk = k_end - k0 < BK ? (int)(k_end - k0) : BK;
    const int mt = a->mask ? mask_tile(a, q0, bq, k0, bk) : MT_ALL;
    if (mt == MT_NONE) continue;
    load_cols(Kt, BK, k, k0, bk, h, H, Dh);
    load_cols(Vt, BK, v, k0, bk, h, H, Dh);
    load_rows(K, k, k0, bk, h, H, Dh);
    tile_grad(a, mt == MT_SOME, P, dS, Q, dO, Kt, Vt, lse, delta, q0, bq, k0, bk, h, H, Dh, scale);
    // dQ[i] += sum over keys j ascending of dS[i][j] K[j]
    rows_axpy(dQ, (size_t)Dhp, NULL, dS, BK, 1, K, (size_t)Dhp, bk, bq, Dhp);
  }
  for (int i = 0; i < bq; i++)
    row_axpy(dq + ((q0 + i) * H + h) * (size_t)Dh, scale, dQ + (size_t)i * Dhp, Dh);
}

// One-pass item: every key tile of clip c's head h against every query tile, giving dk, dv
// of each key tile (as backward_kv_item) and dq of the whole clip (as backward_q_item) from
// ONE computation of each P and dS tile, where the two passes compute each twice. The
// clip's dQ sums stay in the workspace (lenq rows) across the key tiles; every sum runs
// in the order of the two-pass items (keys ascending for dQ, queries ascending for dK,
// dV), with the same tiles, so the results are bitwise theirs.
// The clip's queries and output gradients are loaded once (the tile items reload them for
// every key tile). ws: Kt, Vt (Dh*BK each), K, dK, dV (BK*Dhp each), P, dS (BQ*BK each),
// Qc, dOc, dQ (lenq*Dhp each).
static void backward_clip_item(float *ws, const attn_args *a, size_t q_begin, int n_q,
                               size_t k_begin, size_t k_end, int h) {
  size_t q_end = q_begin + (size_t)n_q;
  float *dq = a->dq, *dk = a->dk, *dv = a->dv;
  const float *dout = a->dout, *q = a->q, *k = a->k, *v = a->v, *lse = a->lse_in;
  const float *delta = a->delta, scale = a->scale;
  const int H = a->H, Dh = a->Dh, Dhp = padded_dh(Dh);
  size_t tk = (size_t)Dh * BK, tr = (size_t)BK * Dhp;
  size_t lq = q_end - q_begin;
  float *Kt = ws, *Vt = Kt + tk, *K = Vt + tk, *dK = K + tr, *dV = dK + tr, *P = dV + tr;
  float *dS = P + (size_t)BQ * BK, *Qc = dS + (size_t)BQ * BK, *dOc = Qc + lq * Dhp;
  float *dQ = dOc + lq * Dhp;
  load_rows(Qc, q, q_begin, (int)lq, h, H, Dh);
  load_rows(dOc, dout, q_begin, (int)lq, h, H, Dh);
  memset(dQ, 0, lq * Dhp * sizeof(float));
  for (size_t k0 = k_begin; k0 < k_end; k0 += BK) {
    int bk = k_end - k0 < BK ? (int)(k_end - k0) : BK;
    load_cols(Kt, BK, k, k0, bk, h, H, Dh);
    load_cols(Vt, BK, v, k0, bk, h, H, Dh);
    load_rows(K, k, k0, bk, h, H, Dh);
    memset(dK, 0, (size_t)bk * Dhp * sizeof(float));
    memset(dV, 0, (size_t)bk * Dhp * sizeof(float));
    for (size_t q0 = q_begin; q0 < q_end; q0 += BQ) {
      int bq = q_end - q0 < BQ ? (int)(q_end - q0) : BQ;
      const int mt = a->mask ? mask_tile(a, q0, bq, k0, bk) : MT_ALL;
      if (mt == MT_NONE) continue;
      const float *Q = Qc + (q0 - q_begin) * Dhp, *dO = dOc + (q0 - q_begin) * Dhp;
      tile_grad(a, mt == MT_SOME, P, dS, Q, dO, Kt, Vt, lse, delta, q0, bq, k0, bk, h, H, Dh, scale);
      rows_axpy(dV, (size_t)Dhp, NULL, P, 1, BK, dO, (size_t)Dhp, bq, bk, Dhp);
      rows_axpy(dK, (size_t)Dhp, NULL, dS, 1, BK, Q, (size_t)Dhp, bq, bk, Dhp);
      rows_axpy(dQ + (q0 - q_begin) * Dhp, (size_t)Dhp, NULL, dS, BK, 1, K, (size_t)Dhp, bk,
                bq, Dhp);
    }
    for (int j = 0; j < bk; j++) {
      size_t o = ((k0 + j) * H + h) * (size_t)Dh;
      row_axpy(dk + o, scale, dK + (size_t)j * Dhp, Dh);
      row_axpy(dv + o, 1.0f, dV + (size_t)j * Dhp, Dh);
    }
  }
  for (size_t i = q_begin; i < q_end; i++)
    row_axpy(dq + (i * H + h) * (size_t)Dh, scale, dQ + (i - q_begin) * Dhp, Dh);
}

// The accumulating backward under mask (NULL or FULL: unmasked, bit for bit), its arguments
// checked as forward_masked's: dq: (Lq, H, Dh), dk, dv: (Lk, H, Dh) accumulated; dout, q,
// out: (Lq, H, Dh); k, v: (Lk, H, Dh); lse, delta: (Lq, H); cu_q, cu_k: (C + 1); pos_q:
// (Lq, 3), pos_k: (Lk, 3). out is required by the contract (kernels/entries.h) but not read:
// delta carries what is needed of it.
static tsr_status backward_masked(const char *op, int whole, float *dq, float *dk, float *dv,
                                  const float *dout, const float *q, const float *k,
                                  const float *v, const void *out, const float *lse,
                                  const float *delta,
                                  const int32_t *cu_q, const int32_t *cu_k, const int32_t *pos_q,
                                  const int32_t *pos_k, const kernels_mask *mask, int n_clips,
                                  int max_q, int max_k, int Lq, int Lk, int H, int Dh,
                                  float scale) {
  tsr_status st = check_clips(op, whole, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk);
  if (!st && mask) st = kcpu_check_positions(op, mask, pos_q, Lq, pos_k, Lk);
  if (mask && mask->kind == KERNELS_MASK_FULL) mask = NULL;
  if (st || Lq == 0 || Lk == 0 || H == 0 || (!dq && !dk)) return st;
  size_t Dhp = (size_t)padded_dh(Dh);
  // the larger of the two passes' workspaces (backward_kv_item, backward_q_item)
  size_t per = 2 * (size_t)Dh * BK + 2 * (size_t)BK * Dhp + 3 * (size_t)BQ * Dhp +
               2 * (size_t)BQ * BK;
  attn_args a = {.dq = dq, .dk = dk, .dv = dv, .q = q, .k = k, .v = v, .dout = dout,
                 .lse_in = lse, .delta = delta, .H = H, .Dh = Dh, .scale = scale,
                 .mask = mask};
  int32_t *coords = NULL;
  if (mask && (st = mask_coords(op, mask, pos_q, Lq, pos_k, Lk, &coords, &a.cq, &a.ck))) return st;
  // Every output row is written by one work item (no atomics, the same bits for any
  // number of threads): clips done in one pass (kcpu_attn_clip_items) by one item per (clip, head);
  // the others in two passes, per key tile for dk, dv and per query tile for dq.
  uint8_t *one = NULL;
  int n_items = 0, item_q = 0, item_k = 0;  // the clip items' longest
  st = kcpu_attn_clip_items(op, cu_q, cu_k, n_clips, H, dq && dk, &one, &n_items, &item_q,
                            &item_k);
  size_t per1 = 2 * (size_t)Dh * BK + 3 * (size_t)BK * Dhp + 2 * (size_t)BQ * BK +
                3 * (size_t)item_q * Dhp;
  if (!st && one)
    st = kcpu_attn_for_each_clip(op, &a, cu_q, cu_k, n_clips, one, n_items, per1,
                                 backward_clip_item);
  if (!st && dk)
    st = kcpu_attn_for_each_tile(op, &a, cu_k, cu_q, n_clips, one, BK, per, backward_kv_item);
  if (!st && dq)
    st = kcpu_attn_for_each_tile(op, &a, cu_q, cu_k, n_clips, one, BQ, per, backward_q_item);
  free(one);
  free(coords);
  return st;
}

// dq: (Lq, H, Dh), dk, dv: (Lk, H, Dh) accumulated; dout, q: (Lq, H, Dh); k, v: (Lk, H, Dh);
// out: the final output (checked, not read); lse, delta: (Lq, H); cu_q, cu_k: (C + 1)
tsr_status kcpu_attention_partial_backward(kb_t *kb, float *dq, float *dk, float *dv,
                                           const float *dout, const float *q, const float *k,
                                           const float *v, const void *out, const float *lse,
                                           const float *delta, const int32_t *cu_q,
                                           const int32_t *cu_k, int n_clips, int max_q, int max_k,
                                           int Lq, int Lk, int H, int Dh, float scale) {
  tsr_status st = kernels_check_attention_partial_backward(dq, dk, dv, dout, q, k, v, out, lse,
                                                           delta, cu_q, cu_k, n_clips, max_q,
                                                           max_k, Lq, Lk, H, Dh, scale);
  return st ? st
            : backward_masked("attention_partial_backward", 0, dq, dk, dv, dout, q, k, v, out,
                              lse, delta, cu_q, cu_k, NULL, NULL, NULL, n_clips, max_q, max_k,
                              Lq, Lk, H, Dh, scale);
}

// kcpu_attention_partial_backward under mask; pos_q: (Lq, 3), pos_k: (Lk, 3)
tsr_status kcpu_attention_masked_partial_backward(kb_t *kb, float *dq, float *dk, float *dv,
                                                  const float *dout, const float *q,
                                                  const float *k, const float *v,
                                                  const void *out, const float *lse,
                                                  const float *delta, const int32_t *cu_q,
                                                  const int32_t *cu_k, const int32_t *pos_q,
                                                  const int32_t *pos_k, kernels_mask mask,
                                                  int n_clips, int max_q, int max_k, int Lq,
                                                  int Lk, int H, int Dh, float scale) {
  tsr_status st = kernels_check_attention_masked_partial_backward(
      dq, dk, dv, dout, q, k, v, out, lse, delta, cu_q, cu_k, pos_q, pos_k, &mask, n_clips, max_q,
      max_k, Lq, Lk, H, Dh, scale);
  return st ? st
            : backward_masked("attention_masked_partial_backward", 0, dq, dk, dv, dout, q, k, v,
                              out, lse, delta, cu_q, cu_k, pos_q, pos_k, &mask, n_clips, max_q,
                              max_k, Lq, Lk, H, Dh, scale);
}

// The overwriting backward of whole clips under mask (NULL: unmasked), its arguments checked
// as forward_masked's: dq, dk, dv: (L, H, Dh); dout, q, k, v, out: (L, H, Dh); lse: (L, H);
// pos: (L, 3)
static tsr_status whole_backward(const char *op, float *dq, float *dk, float *dv,
                                 const float *dout, const float *q, const float *k,
                                 const float *v, const float *out, const float *lse,
                                 const int32_t *cu, const int32_t *pos, const kernels_mask *mask,
                                 int n_clips, int max_len, int L, int H, int Dh, float scale) {
  tsr_status st = check_clips(op, 1, cu, cu, n_clips, max_len, max_len, L, L);
  if (!st && mask) st = kcpu_check_positions(op, mask, pos, L, pos, L);
  if (st || L == 0 || H == 0 || (!dq && !dk)) return st;
  size_t rows = (size_t)L * H, n = rows * Dh;
  if (dq) memset(dq, 0, n * sizeof(float));
  if (dk) memset(dk, 0, n * sizeof(float));
  if (dv) memset(dv, 0, n * sizeof(float));
  float *delta = malloc(rows * sizeof(float));
  if (!delta) return err_set(TSR_ENOMEM, "%s: no memory for delta (%zu floats)", op, rows);
  st = kcpu_attention_delta(NULL, delta, dout, out, L, H, Dh);
  if (!st)
    st = backward_masked(op, 1, dq, dk, dv, dout, q, k, v, out, lse, delta, cu, cu, pos, pos,
                         mask, n_clips, max_len, max_len, L, L, H, Dh, scale);
  free(delta);
  return st;
}

// dq, dk, dv: (L, H, Dh) overwritten; dout, q, k, v, out: (L, H, Dh); lse: (L, H)
tsr_status kcpu_attention_backward(kb_t *kb, float *dq, float *dk, float *dv, const float *dout,
                                   const float *q, const float *k, const float *v,
                                   const float *out, const float *lse, const int32_t *cu,
                                   int n_clips, int max_len, int L, int H, int Dh, float scale) {
  tsr_status st = kernels_check_attention_backward(dq, dk, dv, dout, q, k, v, out, lse, cu,
                                                   n_clips, max_len, L, H, Dh, scale);
  return st ? st
            : whole_backward("attention_backward", dq, dk, dv, dout, q, k, v, out, lse, cu, NULL,
                             NULL, n_clips, max_len, L, H, Dh, scale);
}

// kcpu_attention_backward under mask; pos: (L, 3)
tsr_status kcpu_attention_masked_backward(kb_t *kb, float *dq, float *dk, float *dv,
                                          const float *dout, const float *q, const float *k,
                                          const float *v, const float *out, const float *lse,
                                          const int32_t *cu, const int32_t *pos, kernels_mask mask,
                                          int n_clips, int max_len, int L, int H, int Dh,
                                          float scale) {
  tsr_status st = kernels_check_attention_masked_backward(dq, dk, dv, dout, q, k, v, out, lse, cu,
                                                          pos, &mask, n_clips, max_len, L, H, Dh,
                                                          scale);
  return st ? st
            : whole_backward("attention_masked_backward", dq, dk, dv, dout, q, k, v, out, lse, cu,
                             pos, &mask, n_clips, max_len, L, H, Dh, scale);
}
