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
// with a device Philox-4x32-10 equal to core/rng.c), gemm.cu (cuBLASLt), attention.cu (the
// attention entries and their own fp32 kernels), attention_cudnn.cu (cuDNN's fused SDPA for
// attention_forward, attention_backward and attention_partial_forward, chosen per call:
// TESSERA_CUDA_ATTENTION=auto|cudnn|own, docs/gpu.md "Attention"), sdpa.h/sdpa.c (its
// host-side rules), kcu.h (private). Context (kb->ctx, struct kcu_ctx): the current device,
// one non-blocking stream that orders every entry, the cuBLASLt handle and a 32 MiB
// workspace, a scratch buffer for reduction partials, a device error word, the cuDNN
// attention state (handle on the same stream, plan cache; created on first use).
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
// every own attention output row has one owning warp: bitwise reproducible run to run.
// cuDNN's forward has no atomics; its backward is built in cuDNN's deterministic form
// (TESSERA_CUDA_ATTENTION_DETERMINISTIC=1, the default), whose dense dP workspace limits it
// to small microbatches (larger ones take the own kernels); with =0 cuDNN's backward
// accumulates dQ with fp32 atomics and is not bitwise reproducible (docs/gpu.md).
//
// Not done yet (next steps, issue 11 "GPU speed"):
// - memory: alloc/free are cudaMalloc/cudaFree and the scratch buffer grows by
//   cudaMalloc while shapes grow (first step only); an arena (one allocation per run,
//   suballocated by alloc, scratch carved from it) replaces both without touching entries.
// - attention: cuDNN's fused SDPA (attention_cudnn.cu) has been planned for an H100 without
//   a GPU (tests/kernels/test_cuda_sdpa_plan) but never run: gpu_backend_ops{,_cudnn,
//   _cudnn_atomic,_own} must pass on a GPU first. Left on the own fp32 CUDA-core kernels
//   (correct, slow): attention_partial_backward (cuDNN's backward derives delta from out,
//   which that entry's contract does not pass), merge, delta, head dims cuDNN does not
//   take, and with the default deterministic backward every microbatch whose dense dP
//   workspace (b x H x sq x skv bf16 over the plan's rounded sizes) exceeds an eighth of
//   the GPU memory — passing the longest clip to the entries (kernels.h) would make that
//   workspace b x H x max_len^2 instead. An own wgmma flash kernel (deterministic, every
//   head dim) would replace the remaining own ones.
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

// What the attention entries did so far (attention_cudnn.cu), one line per item into
// buf[0, n): TESSERA_CUDA_ATTENTION and the determinism switch, cuDNN and GPU versions, the
// calls sent to the own kernels, and each cuDNN plan (kind, rounded shape, engine,
// workspace, calls) or why it could not be built. "" before the first attention call. For
// tests and benchmarks to print (tests/kernels/test_backend_ops.c on a GPU).
void kernels_cuda_attention_report(char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
