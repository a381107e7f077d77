// model/dist/cp_workspace.h — one rank's work memory for CP attention, shared by the ring,
// Ulysses and hybrid attention of every group size (model/dist/ring_attention.h,
// ulysses_attention.h).
//
// A rank attends in one group at a time, so the work buffers of its groups never live
// together: instead of each group keeping its own (one set per CP size and mode, most of
// them idle), every group carves its buffers out of this workspace at the start of each
// call. Two regions, because a hybrid group runs two at once: region 0 for the group's
// own attention (a ring's blocks, or Ulysses' head-layout tensors), region 1 for the ring
// inside a hybrid group. A region only grows (to the most any call asked), so after the
// first step of each shape no allocation happens; growing frees the old memory first, so
// a region's contents do not survive a call that asks for more.
#ifndef TESSERA_MODEL_CP_WORKSPACE_H
#define TESSERA_MODEL_CP_WORKSPACE_H

#include <stddef.h>
#include "core/err.h"
#include "kernels/kernels.h"

enum { CP_WS_GROUP = 0, CP_WS_INNER = 1, CP_WS_REGIONS = 2 };

typedef struct cp_workspace cp_workspace;

// A workspace in kb's memory (nothing allocated yet).
tsr_status cp_workspace_create(cp_workspace **ws, const kernels_backend *kb);
void cp_workspace_free(cp_workspace **ws);

// *ptr = at least `bytes` of region r (CP_WS_GROUP or CP_WS_INNER), aligned as kb's alloc;
// valid until the next call for the same region.
tsr_status cp_workspace_get(cp_workspace *ws, int region, size_t bytes, void **ptr);

// Carving: the offset of the next piece of `bytes` after *used (256-byte aligned), *used
// advanced past it. Sizes a layout and places it with the same calls.
static inline size_t cp_workspace_carve(size_t *used, size_t bytes) {
  size_t at = (*used + 255) / 256 * 256;
  *used = at + bytes;
  return at;
}

#endif
