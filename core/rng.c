// core/rng.c — Philox-4x32-10 (Salmon, Moraes, Dror, Shaw, SC'11), as in Random123.
//
// Packing of (seed, step, clip, stream, ctr) into Philox's 128-bit counter and 64-bit key
// (documented in docs/model.md):
//   counter = (ctr low 32, ctr high 32, clip low 32, step low 32)
//   key     = (seed low 32, stream (8 bits) | mix24(seed high 32, step high 32, clip high 32) << 8)
// For seed, step and clip below 2^32 and stream below 256 the map is injective, so no two
// (seed, step, clip, stream, ctr) ever share a random word. Larger values are folded in by
// a 24-bit hash (collisions then only as likely as for any hash).
#include "core/rng.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

// Published Philox-4x32 with 10 rounds on an explicit counter and key.
static void philox4x32_10(const uint32_t ctr_in[4], const uint32_t key_in[2], uint32_t out[4]) {
  uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
  uint32_t k0 = key_in[0], k1 = key_in[1];
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += PHILOX_W0;
      k1 += PHILOX_W1;
    }
    uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

// 64 -> 64 bit finaliser (splitmix64), used only to fold high bits into 24.
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void rng_philox_raw(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  philox4x32_10(ctr, key, out);
}

void rng_philox(const rng_key *key, uint64_t ctr, uint32_t out[4]) {
  uint32_t hs = (uint32_t)(key->seed >> 32), ht = (uint32_t)(key->step >> 32),
           hc = (uint32_t)(key->clip >> 32);
  uint32_t high = 0;
  if (hs | ht | hc) {
    uint64_t h = mix64(((uint64_t)hs << 32 | ht) ^ mix64(hc + 0x9E3779B97F4A7C15ull));
    high = (uint32_t)(h & 0xFFFFFFu);
    if (high == 0) high = 1;  // keep "any high bit set" distinct from "none"
  }
  uint32_t c[4] = {(uint32_t)ctr, (uint32_t)(ctr >> 32), (uint32_t)key->clip, (uint32_t)key->step};
  uint32_t k[2] = {(uint32_t)key->seed, (key->stream & 0xFFu) | high << 8};
  philox4x32_10(c, k, out);
}

// (n + 0.5) / 2^52 for a 52-bit n: exact in double, strictly inside (0, 1).
static double unit52(uint32_t hi, uint32_t lo) {
  uint64_t n = ((uint64_t)hi << 20) ^ (lo >> 12);  // 32 + 20 bits
  return ((double)n + 0.5) * 0x1p-52;
}

double rng_uniform(const rng_key *key, uint64_t ctr) {
  uint32_t w[4];
  rng_philox(key, ctr, w);
  return unit52(w[0], w[1]);
}

double rng_normal(const rng_key *key, uint64_t ctr) {
  uint32_t w[4];
  rng_philox(key, ctr, w);
  double u1 = unit52(w[0], w[1]), u2 = unit52(w[2], w[3]);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

void rng_normal_fill(const rng_key *key, uint64_t first, float *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = (float)rng_normal(key, first + (uint64_t)i);
}
