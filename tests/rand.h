// tests/rand.h — the C tests' one pseudo-random sequence: a 64-bit LCG (Knuth's MMIX
// constants) whose state the test seeds, so every rank and every run draws the same numbers.
#ifndef TESSERA_TESTS_RAND_H
#define TESSERA_TESTS_RAND_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

// The next draw of state *s: a double in [0, 1) from the state's top 53 bits.
static inline double test_urand(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*s >> 11) / 9007199254740992.0;
}

// max |x[i]| over x: (n) (0 for n = 0), the scale of a relative error.
static inline double test_max_abs(const float *x, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
  return m;
}

#endif
