// kernels/dtype.h — the element types of backend tensors and the one fp32 <-> bf16
// conversion of the project (used by the CPU backend, the tests and, later, the host side
// of the CUDA backend, so that every place rounds the same way).
//
// bf16 ("brain float"): the upper 16 bits of an IEEE fp32 — sign, the same 8 exponent bits,
// 7 stored mantissa bits (8 significant bits). So the range is fp32's and the unit
// roundoff is u = 2^-8: rounding to nearest changes a value by at most 2^-8 of itself.
#ifndef TESSERA_KERNELS_DTYPE_H
#define TESSERA_KERNELS_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

// The compute dtype of a backend's activations (kernels_backend.act_dtype).
typedef enum { KERNELS_F32 = 0, KERNELS_BF16 = 1 } kernels_dtype;

// bf16 storage: the bit pattern, not a number (no arithmetic on it; convert to float).
typedef uint16_t kernels_bf16;

// Bytes per element: 4 for KERNELS_F32, 2 for KERNELS_BF16 (0 for an unknown value).
static inline size_t kernels_dtype_size(kernels_dtype t) {
  return t == KERNELS_F32 ? 4 : t == KERNELS_BF16 ? 2 : 0;
}

static inline const char *kernels_dtype_name(kernels_dtype t) {
  return t == KERNELS_F32 ? "f32" : t == KERNELS_BF16 ? "bf16" : "?";
}

// fp32 -> bf16, round to nearest, ties to even (as PyTorch, CUDA __float2bfloat16_rn and
// Eigen): add 0x7fff plus the lowest kept bit, then truncate; a carry out of the mantissa
// rightly bumps the exponent (values past the largest bf16 become infinity). NaN is kept
// NaN (quiet bit set) instead: the rounding add could carry its payload into infinity.
static inline kernels_bf16 kernels_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (kernels_bf16)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (kernels_bf16)(u >> 16);
}

// bf16 -> fp32: exact (the 16 low mantissa bits are zero).
static inline float kernels_bf16_to_f32(kernels_bf16 h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// The value f would hold after a store to bf16 and a load back.
static inline float kernels_bf16_round(float f) { return kernels_bf16_to_f32(kernels_f32_to_bf16(f)); }

#endif
