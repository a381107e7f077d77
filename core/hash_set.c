// core/hash_set.c — a set of 64-bit hashes (core/hash_set.h).
#include "core/hash_set.h"

#include <stdlib.h>

static int grow(hash_set *s) {
  uint64_t cap = s->cap ? 2 * s->cap : 1 << 16;
  uint64_t *v = calloc(cap, sizeof *v);
  if (!v) return -1;
  for (uint64_t i = 0; i < s->cap; i++) {
    if (!s->slot[i]) continue;
    uint64_t j = s->slot[i] & (cap - 1);
    while (v[j]) j = (j + 1) & (cap - 1);
    v[j] = s->slot[i];
  }
  free(s->slot);
  s->slot = v;
  s->cap = cap;
  return 0;
}

int hash_set_add(hash_set *s, uint64_t h) {
  if (!h) h = 1;
  if (4 * (s->n + 1) > 3 * s->cap && grow(s)) return -1;
  uint64_t j = h & (s->cap - 1);
  for (; s->slot[j]; j = (j + 1) & (s->cap - 1))
    if (s->slot[j] == h) return 1;
  s->slot[j] = h;
  s->n++;
  return 0;
}

void hash_set_free(hash_set *s) {
  free(s->slot);
  *s = (hash_set){0};
}
