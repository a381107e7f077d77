// core/hash.h — FNV-1a, the one 64-bit hash of short names and texts that are not file
// contents (file checksums are XXH3, store/shard.h): a tensor's name as its RNG key
// (model/params.c), the config text that every rank must agree on (model/train/train.c).
// Stable across runs, machines and versions: changing it changes initial weights.
#ifndef TESSERA_CORE_HASH_H
#define TESSERA_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV1A_INIT 1469598103934665603ull

// Continues hash h (start with HASH_FNV1A_INIT) over n bytes of p.
static inline uint64_t hash_fnv1a(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

#endif
