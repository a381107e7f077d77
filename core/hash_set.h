// core/hash_set.h — a set of 64-bit hashes: open addressing with linear probing, doubling
// at 3/4 full, so memory is at most ~21 bytes an entry (8 bytes a slot, 3/4 to 3/8 full)
// and half as much again while it doubles. For "seen before?" checks over streams too long
// to keep (manifest rows). The hashes must be uniform in their low bits (XXH3 is); 0 is
// stored as 1.
#ifndef TESSERA_CORE_HASH_SET_H
#define TESSERA_CORE_HASH_SET_H

#include <stdint.h>

typedef struct {
  uint64_t *slot;  // (cap) 0: empty
  uint64_t n, cap;
} hash_set;        // zero-initialised: empty

// 1 if h was in the set, 0 if it is added now, -1 out of memory (the set unchanged).
int hash_set_add(hash_set *s, uint64_t h);
void hash_set_free(hash_set *s);

#endif
