// kernels/arena.h — the bookkeeping of a suballocator over one address range: which byte
// ranges [offset, offset + size) of a region of `capacity` bytes are in use. It touches no
// memory (the region may be device memory): the CUDA backend makes one device allocation
// per run and hands out offsets into it (kernels.h, alloc), and the tests check the
// bookkeeping here without a GPU.
//
// Best fit: an allocation takes the smallest free range that holds it (the lowest one on a
// tie), so the long-lived buffers of a run made first pack at the start and scratch that
// grows later does not split them. Freed ranges merge with free neighbours at once. Every
// offset and size is a multiple of the alignment given at creation. Not thread-safe (the
// backend is called from one thread, kernels.h).
#ifndef TESSERA_KERNELS_ARENA_H
#define TESSERA_KERNELS_ARENA_H

#include <stddef.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kernels_arena kernels_arena;

// A region of `capacity` bytes (rounded down to the alignment); align: a power of two.
tsr_status kernels_arena_create(kernels_arena **out, size_t capacity, size_t align);
void kernels_arena_destroy(kernels_arena *a);

// *offset = the start of `bytes` bytes (at least one alignment unit, so every allocation
// has its own offset). TSR_ENOMEM when no free range holds them, with the message
// "BYTES bytes asked, the arena of CAP bytes has USED in use and its largest free range
// is FREE bytes" (the caller adds what to do).
tsr_status kernels_arena_alloc(kernels_arena *a, size_t bytes, size_t *offset);
// Frees the allocation that starts at offset; TSR_EINVAL when none does.
tsr_status kernels_arena_free(kernels_arena *a, size_t offset);

typedef struct {
  size_t capacity;      // bytes of the region
  size_t in_use;        // bytes allocated now (rounded sizes)
  size_t peak;          // the largest in_use so far
  size_t largest_free;  // the largest free range
  size_t allocations;   // ranges allocated now
} kernels_arena_stats;
kernels_arena_stats kernels_arena_get_stats(const kernels_arena *a);

// A size as TESSERA_CUDA_ARENA gives it: bytes with an optional K/M/G/T suffix (powers of
// 1024) and an optional B ("60G", "512MB", "1073741824", "1.5g"), or a percentage of
// free_bytes ("80%", at most 100). 0 when the text is none of these (or absurdly large).
size_t kernels_arena_parse_size(const char *text, size_t free_bytes);

// The default arena (TESSERA_CUDA_ARENA unset). Every process on a device has its own CUDA
// context and library workspaces (cuBLASLt, cuDNN), so each keeps its own headroom outside
// its arena: a process's part is its share of the free memory less one headroom,
//   free_bytes / sharers - kernels_arena_headroom(total_bytes),
// rounded down to KERNELS_ARENA_GRAIN; 0 when that is not positive. (Dividing free memory
// less ONE headroom among the sharers would leave every process but the first without
// room for its libraries.)
enum { KERNELS_ARENA_GRAIN = 2 << 20 };
// The headroom of one process: max(1 GiB, 4% of the device's total memory).
size_t kernels_arena_headroom(size_t total_bytes);
// The processes that share one device: `local_ranks` of this node spread over `devices`
// visible devices, ceil(local_ranks / devices); 1 when local_ranks <= devices or either
// is unknown (< 1).
int kernels_arena_sharers(int local_ranks, int devices);
size_t kernels_arena_default_size(size_t free_bytes, size_t total_bytes, int sharers);

#ifdef __cplusplus
}
#endif

#endif
