// kernels/dtype.h — the element types of backend tensors, and the fp32 <-> bf16 conversion
// under the kernels' names (core/bf16.h has the one definition, so that the CPU backend,
// the tests, ingest and the host side of the CUDA backend round the same way).
#ifndef TESSERA_KERNELS_DTYPE_H
#define TESSERA_KERNELS_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/bf16.h"

// The compute dtype of a backend's activations (kernels_backend.act_dtype).
typedef enum { KERNELS_F32 = 0, KERNELS_BF16 = 1 } kernels_dtype;

// The element type of stored tokens, which the objective reads (kernels.h
// objective_inputs): uint8 RGB pixels, or the real-valued latents of a video VAE in bf16 or
// fp32. The numbers are a store's dtype (store/settings.h store_dtype) and its shard header's.
typedef enum { KERNELS_TOKENS_U8 = 0, KERNELS_TOKENS_BF16 = 1, KERNELS_TOKENS_F32 = 2 } kernels_tokens;

// Bytes per token value (0 for an unknown value).
static inline size_t kernels_tokens_size(kernels_tokens t) {
  return t == KERNELS_TOKENS_U8 ? 1 : t == KERNELS_TOKENS_BF16 ? 2 : t == KERNELS_TOKENS_F32 ? 4 : 0;
}

// bf16 storage: the bit pattern, not a number (no arithmetic on it; convert to float).
typedef uint16_t kernels_bf16;

// Bytes per element: 4 for KERNELS_F32, 2 for KERNELS_BF16 (0 for an unknown value).
static inline size_t kernels_dtype_size(kernels_dtype t) {
  return t == KERNELS_F32 ? 4 : t == KERNELS_BF16 ? 2 : 0;
}

static inline const char *kernels_dtype_name(kernels_dtype t) {
  return t == KERNELS_F32 ? "f32" : t == KERNELS_BF16 ? "bf16" : "?";
}

// The dtype a name spells, the one voice of every option and config key that takes one:
// "fp32" (its canonical name), "float32" (PyTorch's) or "f32" (ingest --dtype's old
// spelling: *old = 1, for the caller's deprecation note); "bf16" (canonical) or "bfloat16".
// Returns 1 and sets *t, or 0 for anything else. old may be NULL.
static inline int kernels_dtype_parse(const char *s, kernels_dtype *t, int *old) {
  int o = !strcmp(s, "f32");
  if (old) *old = o;
  if (o || !strcmp(s, "fp32") || !strcmp(s, "float32")) return *t = KERNELS_F32, 1;
  if (!strcmp(s, "bf16") || !strcmp(s, "bfloat16")) return *t = KERNELS_BF16, 1;
  return 0;
}

// fp32 -> bf16, round to nearest, ties to even (core/bf16.h: the project's one conversion,
// shared with ingest and the file formats).
static inline kernels_bf16 kernels_f32_to_bf16(float f) { return bf16_from_f32(f); }

// bf16 -> fp32: exact (the 16 low mantissa bits are zero).
static inline float kernels_bf16_to_f32(kernels_bf16 h) { return bf16_to_f32(h); }

// The value f would hold after a store to bf16 and a load back.
static inline float kernels_bf16_round(float f) { return kernels_bf16_to_f32(kernels_f32_to_bf16(f)); }

#endif
