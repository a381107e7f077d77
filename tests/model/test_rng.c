// tests/model/test_rng.c — Philox-4x32-10 known answers (Random123's kat_vectors) and the
// moments of rng_normal / rng_uniform; key packing keeps streams, clips and steps apart.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "core/rng.h"

static void kat(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                uint32_t e0, uint32_t e1, uint32_t e2, uint32_t e3) {
  uint32_t c[4] = {c0, c1, c2, c3}, k[2] = {k0, k1}, o[4];
  rng_philox_raw(c, k, o);
  CHECK(o[0] == e0 && o[1] == e1 && o[2] == e2 && o[3] == e3,
        "got %08x %08x %08x %08x want %08x %08x %08x %08x", o[0], o[1], o[2], o[3], e0, e1, e2, e3);
}

int main(void) {
  // Random123 kat_vectors, philox4x32 R=10.
  kat(0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8);
  kat(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
      0x41c83b0e, 0xa20bc7c6, 0x6d5451fd);
  kat(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
      0x94fdcceb, 0x5001e420, 0x24126ea1);

  // Packing: rng_philox with small fields is the raw generator on the documented words.
  rng_key key = {.seed = 7, .step = 3, .clip = 11, .stream = RNG_STREAM_NOISE};
  uint32_t a[4], b[4];
  rng_philox(&key, 0x100000005ull, a);
  uint32_t c[4] = {5, 1, 11, 3}, k[2] = {7, RNG_STREAM_NOISE};
  rng_philox_raw(c, k, b);
  CHECK(memcmp(a, b, sizeof a) == 0, "packing differs from docs");

  // Different stream / clip / step / seed (including high bits) give different words.
  rng_key vary[] = {{7, 3, 11, RNG_STREAM_TIMESTEP}, {7, 3, 12, RNG_STREAM_NOISE},
                    {7, 4, 11, RNG_STREAM_NOISE},     {8, 3, 11, RNG_STREAM_NOISE},
                    {7 + (1ull << 32), 3, 11, RNG_STREAM_NOISE}, {7, 3, 11 + (1ull << 40), RNG_STREAM_NOISE}};
  for (size_t i = 0; i < sizeof vary / sizeof vary[0]; i++) {
    rng_philox(&vary[i], 0x100000005ull, b);
    CHECK(memcmp(a, b, sizeof a) != 0, "key variant %zu collides", i);
  }

  // Moments of 1e6 normals and uniforms; tolerances ~5 standard errors
  // (se of mean 1e-3, of variance 1.4e-3, of 3rd moment 2.4e-3, of 4th 1e-2).
  const int n = 1000000;
  double s1 = 0, s2 = 0, s3 = 0, s4 = 0, u1 = 0, u2 = 0, umin = 1, umax = 0;
  for (int i = 0; i < n; i++) {
    double z = rng_normal(&key, (uint64_t)i);
    s1 += z, s2 += z * z, s3 += z * z * z, s4 += z * z * z * z;
    double u = rng_uniform(&key, (uint64_t)i);
    u1 += u, u2 += u * u;
    umin = fmin(umin, u), umax = fmax(umax, u);
  }
  CHECK_NEAR(s1 / n, 0.0, 5e-3);
  CHECK_NEAR(s2 / n, 1.0, 7e-3);
  CHECK_NEAR(s3 / n, 0.0, 1.2e-2);
  CHECK_NEAR(s4 / n, 3.0, 5e-2);
  CHECK_NEAR(u1 / n, 0.5, 1.5e-3);
  CHECK_NEAR(u2 / n - 0.25, 1.0 / 12, 1e-3);
  CHECK(umin > 0 && umax < 1, "uniform range [%g, %g]", umin, umax);

  // rng_normal_fill is rng_normal counter by counter (so any slice is reproducible).
  float f[16];
  rng_normal_fill(&key, 100, f, 16);
  int same = 1;
  for (int i = 0; i < 16; i++) same &= f[i] == (float)rng_normal(&key, 100 + (uint64_t)i);
  CHECK(same, "fill differs from rng_normal");
  return check_done();
}
