// kernels/cpu/mask.h — private to the CPU backend: the attention masks of kernels.h
// (kernels_mask) as the attention kernels evaluate them (attention.c), and the check of the
// positions they read.
#ifndef TESSERA_KERNELS_CPU_MASK_H
#define TESSERA_KERNELS_CPU_MASK_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/err.h"
#include "kernels/kernels.h"

// The mask coordinates of n positions (n, 3) into c (n, 3): block-causal the chunk
// (t / chunk, 0, 0), window the tile (t / tile_t, y / tile_h, x / tile_w), so that the
// kernels compare coordinates only. kcpu_mask_coords_allow: whether the mask lets a query of
// coordinates a attend to a key of coordinates b (kernels.h kernels_mask).
static inline void kcpu_mask_coords(const kernels_mask *m, const int32_t *pos, int n, int32_t *c) {
  for (size_t i = 0; i < (size_t)n; i++) {
    const int32_t *p = pos + 3 * i;
    int32_t *o = c + 3 * i;
    if (m->kind == KERNELS_MASK_BLOCK_CAUSAL) o[0] = p[0] / m->chunk, o[1] = o[2] = 0;
    else o[0] = p[0] / m->tile_t, o[1] = p[1] / m->tile_h, o[2] = p[2] / m->tile_w;
  }
}
static inline int kcpu_mask_coords_allow(const kernels_mask *m, const int32_t *a, const int32_t *b) {
  if (m->kind == KERNELS_MASK_BLOCK_CAUSAL)
    return b[0] <= a[0] && (m->window == 0 || a[0] - b[0] <= m->window);
  return abs(a[0] - b[0]) <= m->wt && abs(a[1] - b[1]) <= m->wh && abs(a[2] - b[2]) <= m->ww;
}

// What the mask allows between queries whose coordinates lie in the box [qlo, qhi] and keys
// in [klo, khi] (3 axes each): 0 no pair (certainly), 2 every pair (certainly), 1 it cannot
// tell from the boxes (some, or none: the pairs are then tested one by one).
static inline int kcpu_mask_boxes(const kernels_mask *m, const int32_t *qlo, const int32_t *qhi,
                                  const int32_t *klo, const int32_t *khi) {
  if (m->kind == KERNELS_MASK_BLOCK_CAUSAL) {
    const int w = m->window;
    if (klo[0] > qhi[0] || (w > 0 && qlo[0] - khi[0] > w)) return 0;
    return khi[0] <= qlo[0] && (w == 0 || qhi[0] - klo[0] <= w) ? 2 : 1;
  }
  const int r[3] = {m->wt, m->wh, m->ww};
  int all = 1;
  for (int d = 0; d < 3; d++) {
    int32_t gap = qlo[d] - khi[d] > klo[d] - qhi[d] ? qlo[d] - khi[d] : klo[d] - qhi[d];
    int32_t span = qhi[d] - klo[d] > khi[d] - qlo[d] ? qhi[d] - klo[d] : khi[d] - qlo[d];
    if (gap > r[d]) return 0;
    if (span > r[d]) all = 0;
  }
  return all ? 2 : 1;
}

// Unless the mask is FULL, the positions >= 0 (pos_q: (Lq, 3), pos_k: (Lk, 3)); the mask and
// the rest are the masked entries' checks' (kernels/check_attention.h), made first.
static inline tsr_status kcpu_check_positions(const char *op, const kernels_mask *m,
                                              const int32_t *pos_q, int Lq,
                                              const int32_t *pos_k, int Lk) {
  if (m->kind == KERNELS_MASK_FULL) return TSR_OK;
  for (size_t i = 0; i < 3 * (size_t)Lq; i++)
    if (pos_q[i] < 0) return err_set(TSR_EINVAL, "%s: query %zu has a negative position", op, i / 3);
  for (size_t i = 0; i < 3 * (size_t)Lk; i++)
    if (pos_k[i] < 0) return err_set(TSR_EINVAL, "%s: key %zu has a negative position", op, i / 3);
  return TSR_OK;
}

#endif
