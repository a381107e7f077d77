// kernels/cpu/attention_items.c — the work items of the CPU attention kernels and their
// parallel schedule (attention_items.h).
#include "kernels/cpu/attention_items.h"

#include <omp.h>
#include <stdlib.h>

#include "kernels/cpu/cpu.h"

typedef struct {
  int clip;   // clip index
  int start;  // first row of the tile, relative to the clip's first row
  int rows;   // rows in the tile (<= BQ or BK)
} tile;


// Tiles of at most B rows covering every clip of cu (C + 1) but those with skip[c] != 0
// (skip may be NULL). *out freed by the caller.
static tsr_status build_tiles(const char *op, const int32_t *cu, int n_clips, int B,
                              const uint8_t *skip, tile **out, size_t *n_out) {
  size_t n = 0;
  for (int c = 0; c < n_clips; c++)
    if (!skip || !skip[c]) n += (size_t)(cu[c + 1] - cu[c] + B - 1) / B;
  tile *t = malloc((n ? n : 1) * sizeof(tile));
  if (!t) return err_set(TSR_ENOMEM, "%s: no memory for %zu tiles", op, n);
  size_t i = 0;
  for (int c = 0; c < n_clips; c++) {
    int len = skip && skip[c] ? 0 : cu[c + 1] - cu[c];
    for (int s = 0; s < len; s += B) t[i++] = (tile){c, s, len - s < B ? len - s : B};
  }
  *out = t;
  *n_out = n;
  return TSR_OK;
}

tsr_status kcpu_attn_for_each_tile(const char *op, const attn_args *a, const int32_t *cu_rows,
                                   const int32_t *cu_other, int n_clips, const uint8_t *skip,
                                   int B, size_t per, attn_item_fn fn) {
  tile *tiles = NULL;
  size_t nt = 0;
  float *ws = NULL;
  tsr_status st = build_tiles(op, cu_rows, n_clips, B, skip, &tiles, &nt);
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

static int by_double_desc(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a < b) - (a > b);
}

// Least makespan of items of costs w (n, sorted in place, largest first) on T threads by
// longest-first assignment (what kcpu_attn_for_each_clip's dynamic schedule does).
static double lpt_makespan(double *w, int n, int T) {
  qsort(w, (size_t)n, sizeof *w, by_double_desc);
  double load[64] = {0}, m = 0;
  if (T > 64) T = 64;
  for (int i = 0; i < n; i++) {
    int t = 0;
    for (int j = 1; j < T; j++)
      if (load[j] < load[t]) t = j;
    load[t] += w[i];
    if (load[t] > m) m = load[t];
  }
  return m;
}

tsr_status kcpu_attn_clip_items(const char *op, const int32_t *cu_q, const int32_t *cu_k,
                                int n_clips, int H, int all_grads, uint8_t **skip, int *n_items,
                                int *max_q, int *max_k) {
  *skip = NULL, *n_items = 0, *max_q = 0, *max_k = 0;
  if (!all_grads) return TSR_OK;
  int n = 0;
  for (int c = 0; c < n_clips; c++) {
    int lq = cu_q[c + 1] - cu_q[c], lk = cu_k[c + 1] - cu_k[c];
    if (lq > 0 && lk > 0 && lq <= CLIP_ITEM_ROWS && lk <= CLIP_ITEM_ROWS) n += H;
  }
  if (n == 0) return TSR_OK;
  double *w = malloc((size_t)n * sizeof *w), total = 0;
  if (!w) return err_set(TSR_ENOMEM, "%s: no memory", op);
  for (int c = 0, i = 0; c < n_clips; c++) {
    int lq = cu_q[c + 1] - cu_q[c], lk = cu_k[c + 1] - cu_k[c];
    if (lq > 0 && lk > 0 && lq <= CLIP_ITEM_ROWS && lk <= CLIP_ITEM_ROWS)
      for (int h = 0; h < H; h++) w[i++] = (double)lq * lk, total += (double)lq * lk;
  }
  const int T = omp_get_max_threads();
  const int worth = lpt_makespan(w, n, T) <= 1.5 * total / T;
  free(w);
  if (!worth) return TSR_OK;
  uint8_t *m = calloc((size_t)n_clips + 1, 1);
  if (!m) return err_set(TSR_ENOMEM, "%s: no memory", op);
  for (int c = 0; c < n_clips; c++) {
    int lq = cu_q[c + 1] - cu_q[c], lk = cu_k[c + 1] - cu_k[c];
    if (lq > 0 && lk > 0 && lq <= CLIP_ITEM_ROWS && lk <= CLIP_ITEM_ROWS) {
      m[c] = 1;
      if (lq > *max_q) *max_q = lq;
      if (lk > *max_k) *max_k = lk;
    }
  }
  *skip = m, *n_items = n;
  return TSR_OK;
}

typedef struct {
  int clip, head;
  int64_t cost;  // queries x keys
} clip_item;

static int by_cost_desc(const void *x, const void *y) {
  const clip_item *a = x, *b = y;
  if (a->cost != b->cost) return a->cost < b->cost ? 1 : -1;
  return a->clip != b->clip ? a->clip - b->clip : a->head - b->head;
}

tsr_status kcpu_attn_for_each_clip(const char *op, const attn_args *a, const int32_t *cu_q,
                                   const int32_t *cu_k, int n_clips, const uint8_t *one,
                                   int n_items, size_t per, attn_item_fn fn) {
  const int H = a->H;
  clip_item *items = malloc((size_t)n_items * sizeof *items);
  if (!items) return err_set(TSR_ENOMEM, "%s: no memory for %d work items", op, n_items);
  int n = 0;
  for (int c = 0; c < n_clips; c++)
    for (int h = 0; one[c] && h < H; h++)
      items[n++] = (clip_item){c, h, (int64_t)(cu_q[c + 1] - cu_q[c]) * (cu_k[c + 1] - cu_k[c])};
  qsort(items, (size_t)n, sizeof *items, by_cost_desc);
  float *ws = kcpu_thread_scratch(op, &per);
  if (!ws) {
    free(items);
    return TSR_ENOMEM;
  }
#pragma omp parallel
  {
    float *w = ws + (size_t)omp_get_thread_num() * per;
#pragma omp for schedule(dynamic, 1)
    for (int it = 0; it < n; it++) {
      int c = items[it].clip;
      fn(w, a, (size_t)cu_q[c], (int)(cu_q[c + 1] - cu_q[c]), (size_t)cu_k[c],
         (size_t)cu_k[c + 1], items[it].head);
    }
  }
  free(ws);
  free(items);
  return TSR_OK;
}
