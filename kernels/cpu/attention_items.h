// kernels/cpu/attention_items.h — private to the CPU backend: how an attention call of
// kernels/cpu/attention.c is cut into work items and run on the OpenMP threads. A work
// item is either one tile of a clip's rows of one head against the clip's rows on the
// other side, or a whole (clip, head) when the clip is short (CLIP_ITEM_ROWS) and there are
// enough of those to keep the threads busy (kcpu_attn_clip_items). Every item writes its
// own output rows only, so no result depends on the number of threads or the schedule.
#ifndef TESSERA_KERNELS_CPU_ATTENTION_ITEMS_H
#define TESSERA_KERNELS_CPU_ATTENTION_ITEMS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "kernels/kernels.h"

// The tensors and sizes of one attention call, shared by all its work items.
typedef struct {
  float *out, *lse, *dq, *dk, *dv;                   // outputs (NULL where unused)
  const float *q, *k, *v, *dout, *lse_in, *delta;    // inputs (NULL where unused)
  int H, Dh;
  float scale;
  const kernels_mask *mask;                          // NULL: every key of the clip
  const int32_t *cq, *ck;                            // (Lq, 3), (Lk, 3) with a mask: the
                                                     // tokens' mask coordinates (mask.h)
} attn_args;


// One work item: rows [r0, r0 + n) of head h (a tile of one clip) against the rows
// [o_begin, o_end) of the same clip on the other side (keys for query tiles, queries for
// key tiles). ws: the calling thread's workspace.
typedef void (*attn_item_fn)(float *ws, const attn_args *a, size_t r0, int n, size_t o_begin,
                             size_t o_end, int h);

// Runs fn over every (tile of cu_rows in blocks of B rows, head) in parallel, each against
// its clip's rows of cu_other, with `per` floats of 64-byte aligned workspace per thread;
// clips with skip[c] != 0 are left out (skip may be NULL). op names the entry in errors.
tsr_status kcpu_attn_for_each_tile(const char *op, const attn_args *a, const int32_t *cu_rows,
                                   const int32_t *cu_other, int n_clips, const uint8_t *skip,
                                   int B, size_t per, attn_item_fn fn);

// Clips with at most this many queries and keys may go through the per-(clip, head) items
// (attention.c's forward_clip_item, backward_clip_item: their workspace is linear in them);
// longer ones through the tile items.
enum { CLIP_ITEM_ROWS = 4096 };

// Whether the per-(clip, head) items are used: (backward) dq, dk and dv all wanted
// (all_grads), and the threads' share of them done no later than the tile items would
// finish: the tile items spread over every thread but compute each P and dS tile twice
// (about 1.5x the work of one pass: 0.223 s against 0.146 s for 4,096 tokens on one thread),
// so the clip items win when the longest-first makespan of their costs (queries x keys) is
// at most 1.5x the work's even share; one thread always takes them. The choice changes no
// result (see the items). *skip: the clips done by clip items (n_clips bytes, freed by the
// caller), NULL when none is; *n_items: their (clip, head) items; *max_q, *max_k: their
// most queries and keys.
tsr_status kcpu_attn_clip_items(const char *op, const int32_t *cu_q, const int32_t *cu_k,
                                int n_clips, int H, int all_grads, uint8_t **skip, int *n_items,
                                int *max_q, int *max_k);

// fn over the clips marked in `one` (n_items of them with every head) in parallel, largest
// first so that the threads finish together, with `per` floats of workspace per thread.
tsr_status kcpu_attn_for_each_clip(const char *op, const attn_args *a, const int32_t *cu_q,
                                   const int32_t *cu_k, int n_clips, const uint8_t *one,
                                   int n_items, size_t per, attn_item_fn fn);

#endif
