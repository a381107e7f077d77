// core/rng.h — counter-based random numbers.
//
// Every random value that defines the training objective is a pure function of a key
// (seed, step, clip id, stream) and a counter (e.g. the token's value index), so it does
// not depend on which rank holds a token, how clips were packed or split, or the order
// of evaluation (docs/model.md "RNG"). The generator is Philox-4x32-10
// (Salmon et al., SC'11): 128-bit counter, 64-bit key, 10 rounds.
#ifndef TESSERA_CORE_RNG_H
#define TESSERA_CORE_RNG_H

#include <stdint.h>

// Streams: what a value is for, so different uses never share numbers.
typedef enum {
  RNG_STREAM_TIMESTEP = 1,  // t of a clip
  RNG_STREAM_NOISE = 2,     // e of a token value
  RNG_STREAM_LABEL_DROP = 3,// classifier-free guidance label dropout of a clip
  RNG_STREAM_SAMPLER = 4,   // epoch shuffles
  RNG_STREAM_INIT = 5,      // parameter initialisation
  RNG_STREAM_SAMPLE = 6,    // sampling noise (tessera sample)
} rng_stream;

typedef struct {
  uint64_t seed, step, clip;  // clip: a clip id, or 0 where not per clip
  uint32_t stream;            // rng_stream
} rng_key;

// Packing (injective for seed, step, clip < 2^32 and stream < 256; larger seed/step/clip
// values are folded in by a 24-bit hash): Philox counter = (ctr low 32, ctr high 32,
// clip low 32, step low 32), key = (seed low 32, stream | hash24(high halves) << 8).
// Counters of one key therefore never overlap another key's, whatever ctr is.

// Philox-4x32-10 exactly as published (Random123 philox4x32 with R = 10) on an explicit
// 128-bit counter and 64-bit key; for known-answer tests. ctr: (4), key: (2), out: (4)
void rng_philox_raw(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
// Four independent uniform 32-bit words for counter `ctr` under `key`.
void rng_philox(const rng_key *key, uint64_t ctr, uint32_t out[4]);
// Uniform in (0, 1) (never 0 or 1; 52 bits: (n + 0.5) / 2^52) for counter `ctr`.
double rng_uniform(const rng_key *key, uint64_t ctr);
// Standard normal for counter `ctr` (Box-Muller on the words of rng_philox(ctr)).
double rng_normal(const rng_key *key, uint64_t ctr);
// n standard normals for counters first..first+n-1, as floats. out: (n)
void rng_normal_fill(const rng_key *key, uint64_t first, float *out, int64_t n);

#endif
