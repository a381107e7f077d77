// kernels/arena.c — best-fit suballocator bookkeeping (kernels/arena.h).
//
// The region is a sorted array of ranges that tile [0, capacity): each is in use or free,
// and no two free ranges are neighbours (they merge when freed). alloc scans the free
// ranges (O(ranges)); free finds its range by binary search. A run holds a few hundred
// allocations, so a flat array is enough.
#include "kernels/arena.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  size_t off, size;
  int used;
} range;

struct kernels_arena {
  size_t capacity, align, in_use, peak;
  range *r;  // (n) sorted by off, tiling [0, capacity)
  size_t n, cap;
};

tsr_status kernels_arena_create(kernels_arena **out, size_t capacity, size_t align) {
  *out = NULL;
  if (align == 0 || (align & (align - 1)))
    return err_set(TSR_EINVAL, "arena: alignment %zu is not a power of two", align);
  capacity -= capacity % align;
  if (capacity == 0) return err_set(TSR_EINVAL, "arena: a region of 0 bytes (after alignment)");
  kernels_arena *a = calloc(1, sizeof *a);
  range *r = malloc(16 * sizeof *r);
  if (!a || !r) {
    free(a);
    free(r);
    return err_set(TSR_ENOMEM, "arena: no host memory for its table");
  }
  *a = (kernels_arena){.capacity = capacity, .align = align, .r = r, .n = 1, .cap = 16};
  r[0] = (range){0, capacity, 0};
  *out = a;
  return TSR_OK;
}

void kernels_arena_destroy(kernels_arena *a) {
  if (!a) return;
  free(a->r);
  free(a);
}

static size_t largest_free(const kernels_arena *a) {
  size_t best = 0;
  for (size_t i = 0; i < a->n; i++)
    if (!a->r[i].used && a->r[i].size > best) best = a->r[i].size;
  return best;
}

tsr_status kernels_arena_alloc(kernels_arena *a, size_t bytes, size_t *offset) {
  size_t want = bytes == 0 ? a->align : bytes;
  if (want > SIZE_MAX - a->align) want = SIZE_MAX - a->align;  // fails below, no overflow
  want = (want + a->align - 1) / a->align * a->align;
  size_t best = a->n;
  for (size_t i = 0; i < a->n; i++)
    if (!a->r[i].used && a->r[i].size >= want && (best == a->n || a->r[i].size < a->r[best].size))
      best = i;
  if (best == a->n)
    return err_set(TSR_ENOMEM, "%zu bytes asked, the arena of %zu bytes has %zu in use and its "
                   "largest free range is %zu bytes", bytes, a->capacity, a->in_use,
                   largest_free(a));
  range *b = &a->r[best];
  if (b->size > want) {  // split: the allocation first, the rest stays free after it
    if (a->n == a->cap) {
      range *nr = realloc(a->r, 2 * a->cap * sizeof *nr);
      if (!nr) return err_set(TSR_ENOMEM, "arena: no host memory for its table");
      a->r = nr;
      a->cap *= 2;
      b = &a->r[best];
    }
    memmove(b + 2, b + 1, (a->n - best - 1) * sizeof *b);
    b[1] = (range){b->off + want, b->size - want, 0};
    b->size = want;
    a->n++;
  }
  b->used = 1;
  a->in_use += want;
  if (a->in_use > a->peak) a->peak = a->in_use;
  *offset = b->off;
  return TSR_OK;
}

tsr_status kernels_arena_free(kernels_arena *a, size_t offset) {
  size_t lo = 0, hi = a->n;  // the range with off == offset
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (a->r[mid].off < offset) lo = mid + 1;
    else hi = mid;
  }
  if (lo == a->n || a->r[lo].off != offset || !a->r[lo].used)
    return err_set(TSR_EINVAL, "arena: offset %zu is not the start of an allocation", offset);
  size_t i = lo;
  a->r[i].used = 0;
  a->in_use -= a->r[i].size;
  if (i + 1 < a->n && !a->r[i + 1].used) {  // merge the free range after it
    a->r[i].size += a->r[i + 1].size;
    memmove(&a->r[i + 1], &a->r[i + 2], (a->n - i - 2) * sizeof *a->r);
    a->n--;
  }
  if (i > 0 && !a->r[i - 1].used) {  // and into the free range before it
    a->r[i - 1].size += a->r[i].size;
    memmove(&a->r[i], &a->r[i + 1], (a->n - i - 1) * sizeof *a->r);
    a->n--;
  }
  return TSR_OK;
}

kernels_arena_stats kernels_arena_get_stats(const kernels_arena *a) {
  kernels_arena_stats s = {a->capacity, a->in_use, a->peak, largest_free(a), 0};
  for (size_t i = 0; i < a->n; i++) s.allocations += a->r[i].used != 0;
  return s;
}

size_t kernels_arena_parse_size(const char *text, size_t free_bytes) {
  if (!text) return 0;
  char *end = NULL;
  double v = strtod(text, &end);
  if (end == text || !(v > 0)) return 0;
  if (*end == '%' && end[1] == '\0') return v <= 100 ? (size_t)((double)free_bytes * v / 100.0) : 0;
  const char *units = "KMGT", *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
  double mul = 1;
  if (u) {
    for (const char *q = units; q <= u; q++) mul *= 1024;
    end++;
  }
  if (*end == 'B' || *end == 'b') end++;
  return *end == '\0' && v * mul < 0x1p62 ? (size_t)(v * mul) : 0;
}

size_t kernels_arena_headroom(size_t total_bytes) {
  const size_t gib = (size_t)1 << 30;
  return total_bytes / 25 > gib ? total_bytes / 25 : gib;
}

int kernels_arena_sharers(int local_ranks, int devices) {
  if (local_ranks < 1 || devices < 1 || local_ranks <= devices) return 1;
  return (local_ranks + devices - 1) / devices;
}

size_t kernels_arena_default_size(size_t free_bytes, size_t total_bytes, int sharers) {
  size_t share = free_bytes / (size_t)(sharers > 1 ? sharers : 1);
  size_t headroom = kernels_arena_headroom(total_bytes);
  if (share <= headroom) return 0;  // no room after the libraries: the caller says so
  size_t bytes = share - headroom;
  return bytes - bytes % KERNELS_ARENA_GRAIN;
}
