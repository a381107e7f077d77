// core/bf16.h — the one fp32 <-> bf16 conversion of the project, for every place that
// stores or reads bf16: the CPU kernels (kernels/dtype.h gives them kernels' names), latent
// and caption files at ingest, the token store, the tests.
//
// bf16 ("brain float"): the upper 16 bits of an IEEE fp32 — sign, the same 8 exponent bits,
// 7 stored mantissa bits (8 significant bits). So the range is fp32's and the unit
// roundoff is u = 2^-8: rounding to nearest changes a value by at most 2^-8 of itself.
#ifndef TESSERA_CORE_BF16_H
#define TESSERA_CORE_BF16_H

#include <stdint.h>
#include <string.h>

// fp32 -> bf16, round to nearest, ties to even (as PyTorch, CUDA __float2bfloat16_rn and
// Eigen): add 0x7fff plus the lowest kept bit, then truncate; a carry out of the mantissa
// rightly bumps the exponent (values past the largest bf16 become infinity). NaN is kept
// NaN (quiet bit set) instead: the rounding add could carry its payload into infinity.
static inline uint16_t bf16_from_f32(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

// bf16 -> fp32: exact (the 16 low mantissa bits are zero).
static inline float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

#endif
