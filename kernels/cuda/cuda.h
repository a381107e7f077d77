// kernels/cuda/cuda.h — the CUDA backend (kernels.h): bf16 activations, fp32 accumulation,
// fp32 parameters/gradients/optimizer state, device memory, one stream.
//
// Built only when the CUDA toolkit is found (TESSERA_HAVE_CUDA); kernels_backends() lists
// "cuda" only when kernels_cuda_available() says a device is usable, so
// tests/kernels/test_backend_ops checks every entry against CPU fp32 on a GPU machine
// with no change (no extra tolerance is needed: P stays fp32 in attention, so every entry
// rounds only on its [act] stores).
//
// Files: backend.cu (context, memory, table, every token-local entry, reductions, objective
// with a device Philox-4x32-10 equal to core/rng.c), gemm.cu (cuBLASLt), attention.cu (own
// kernels), kcu.h (private). Context (kb->ctx, struct kcu_ctx): the current device, one
// non-blocking stream that orders every entry, the cuBLASLt handle and a 32 MiB workspace,
// a scratch buffer for reduction partials, a device error word.
//
// Synchronisation: entries only queue work on the stream, except to_host (waits for its
// copy), sumsq (its result goes to the host: the one sync of a step), sync, alloc/free,
// and to_device from pinned host memory. Index arrays stay on the device: bad cu_seqlens
// or ids are detected by the kernels, which clamp (never access out of bounds) and record
// the first bad value in the error word; sync and sumsq report it (TSR_EINVAL naming the
// entry). CUDA and cuBLASLt failures return TSR_EIO (TSR_ENOMEM for memory) naming the
// entry, the call and the CUDA error string.
//
// Determinism: no float atomics; every reduction sums fixed slices in a fixed order and
// every attention output row has one owning warp: bitwise reproducible run to run.
//
// Not done yet (next steps, issue 11 "GPU speed"):
// - memory: alloc/free are cudaMalloc/cudaFree and the scratch buffer grows by
//   cudaMalloc while shapes grow (first step only); an arena (one allocation per run,
//   suballocated by alloc, scratch carved from it) replaces both without touching entries.
// - attention: fp32 CUDA-core kernels (correct, slow). cuDNN fused SDPA (graph API with
//   ragged offsets and the stats output) or an own wgmma flash kernel is the fast path.
// - GEMM: plans (descriptors + heuristic) are built per call; cache them by shape. dbias
//   is a separate column-sum kernel (BGRADB epilogue would overwrite, dbias accumulates).
// - fusions beyond the table's entries (GELU epilogue in the MLP linear, LayerNorm +
//   modulate, RMSNorm + RoPE, multi-tensor AdamW/EMA/sumsq in one launch) need new
//   entries in kernels.h.
// - sumsq per tensor costs one sync each; a multi-tensor sumsq entry would make it one.
#ifndef TESSERA_KERNELS_CUDA_CUDA_H
#define TESSERA_KERNELS_CUDA_CUDA_H

#include <stddef.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

// 1 when a CUDA device is visible and the backend can be created (its stream, cuBLASLt
// handle and workspace); 0 otherwise, with the reason in why[0 .. n) (may be NULL). Prints
// nothing. Safe to call repeatedly (the answer is computed once).
int kernels_cuda_available(char *why, size_t n);

// The CUDA backend on the current device (created on the first call, never freed), or NULL
// when kernels_cuda_available() is 0.
const kernels_backend *kernels_cuda(void);

#ifdef __cplusplus
}
#endif

#endif
