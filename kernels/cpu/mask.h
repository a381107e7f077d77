// kernels/cpu/mask.h — private to the CPU backend: the attention masks of kernels.h
// (kernels_mask) as the attention kernels evaluate them (attention.c), and their argument
// checks.
#ifndef TESSERA_KERNELS_CPU_MASK_H
#define TESSERA_KERNELS_CPU_MASK_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/err.h"
#include "kernels/kernels.h"

// Whether kernels_mask m lets the query at grid position pq attend to the key at pk
// ((t, y, x) each, >= 0).
static inline int kcpu_mask_allows(const kernels_mask *m, const int32_t *pq, const int32_t *pk) {
  if (m->kind == KERNELS_MASK_BLOCK_CAUSAL) {
    int cq = pq[0] / m->chunk, ck = pk[0] / m->chunk;
    return ck <= cq && (m->window == 0 || cq - ck <= m->window);
  }
  if (m->kind == KERNELS_MASK_WINDOW)
    return abs(pq[0] / m->tile_t - pk[0] / m->tile_t) <= m->wt &&
           abs(pq[1] / m->tile_h - pk[1] / m->tile_h) <= m->wh &&
           abs(pq[2] / m->tile_w - pk[2] / m->tile_w) <= m->ww;
  return 1;
}

// A mask's sizes (kernels.h kernels_mask) and, unless it is FULL, its positions: given,
// and >= 0 (pos_q: (Lq, 3), pos_k: (Lk, 3)).
static inline tsr_status kcpu_check_mask(const char *op, const kernels_mask *m,
                                         const int32_t *pos_q, int Lq, const int32_t *pos_k,
                                         int Lk) {
  if (m->kind < KERNELS_MASK_FULL || m->kind > KERNELS_MASK_WINDOW)
    return err_set(TSR_EINVAL, "%s: unknown mask kind %d", op, m->kind);
  if (m->kind == KERNELS_MASK_BLOCK_CAUSAL && (m->chunk < 1 || m->window < 0))
    return err_set(TSR_EINVAL, "%s: block-causal mask with chunk %d (>= 1) and window %d (>= 0)",
                   op, m->chunk, m->window);
  if (m->kind == KERNELS_MASK_WINDOW &&
      (m->tile_t < 1 || m->tile_h < 1 || m->tile_w < 1 || m->wt < 0 || m->wh < 0 || m->ww < 0))
    return err_set(TSR_EINVAL, "%s: window mask with tiles %dx%dx%d (>= 1) and radii %d, %d, %d "
                   "(>= 0)", op, m->tile_t, m->tile_h, m->tile_w, m->wt, m->wh, m->ww);
  if (m->kind == KERNELS_MASK_FULL) return TSR_OK;
  if ((Lq > 0 && !pos_q) || (Lk > 0 && !pos_k))
    return err_set(TSR_EINVAL, "%s: a mask needs the positions of the queries and keys", op);
  for (size_t i = 0; i < 3 * (size_t)Lq; i++)
    if (pos_q[i] < 0) return err_set(TSR_EINVAL, "%s: query %zu has a negative position", op, i / 3);
  for (size_t i = 0; i < 3 * (size_t)Lk; i++)
    if (pos_k[i] < 0) return err_set(TSR_EINVAL, "%s: key %zu has a negative position", op, i / 3);
  return TSR_OK;
}

#endif
