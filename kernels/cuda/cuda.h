// kernels/cuda/cuda.h — the CUDA backend (kernels.h): bf16 activations, fp32 accumulation,
// fp32 parameters/gradients/optimizer state, device memory, one stream.
//
// Built only when the CUDA toolkit is found (TESSERA_HAVE_CUDA); kernels_backends() lists
// "cuda" only when kernels_cuda_available() says a device is usable, so
// tests/kernels/test_backend_ops checks every entry against CPU fp32 on a GPU machine
// with no change (no extra tolerance is needed: P stays fp32 in attention, so every entry
// rounds only on its [act] stores).
//
// Files, one per op family as in kernels/cpu/: backend.cu (context, the table, errors),
// memory.cu (memory arena, copies, staged uploads, sync), elementwise.cu (cast, arithmetic,
// GELU, SiLU), layernorm.cu (LayerNorm, adaLN modulate and gate, their fusion), rmsnorm.cu
// (RMSNorm, RoPE, their fusion on q and k), objective.cu (timestep and label embeddings,
// objective inputs with a device Philox-4x32-10 equal to core/rng.c, Euler step),
// reduce.cu (column sums, MSE loss, sumsq), adamw.cu (AdamW, EMA), graph.cu (recorded
// graphs: stream capture, kernels.h graph_*), gemm.cu (cuBLASLt: plans cached by shape,
// BIAS / GELU_AUX(_BIAS) / DGELU epilogues), attention.cu (the attention entries and their
// own fp32 kernels), attention_cudnn.cu (cuDNN's fused SDPA for attention_forward,
// attention_backward and attention_partial_forward, chosen per call:
// TESSERA_CUDA_ATTENTION=auto|cudnn|own, docs/gpu.md "Attention"), sdpa.h/sdpa.c (its
// host-side rules), kcu.h (private: the context and the helpers the files share). Context
// (kb->ctx, struct kcu_ctx): the current device, one non-blocking stream that orders every
// entry, the cuBLASLt handle, the device error word, the cuDNN attention state (handle on
// the same stream, plan cache; created on first use), and the run's one device allocation
// (the arena, kernels.h `alloc`): every tensor from alloc, the 32 MiB cuBLASLt workspace,
// the reduction scratch and cuDNN's workspace are ranges of it (kernels/arena.h keeps the
// books on the host).
//
// Memory: the arena is made by kb->reserve(bytes) or at the first alloc, sized by
// TESSERA_CUDA_ARENA ("70G", "90%" of free memory) or by default this rank's share of the
// free memory (the MPI local ranks beyond one per device share it) less its own max(1 GiB,
// 4% of the device) for the CUDA libraries (kernels.h alloc states the rule; arena.h
// kernels_arena_default_size computes it). No cudaMalloc after that (none in a step); an
// allocation that does not fit fails with TSR_ENOMEM naming the bytes asked, the arena's
// size, use and largest free range, and TESSERA_CUDA_ARENA. kb->memory_stats gives its use
// and peak (nvidia-smi shows the whole arena).
//
// Synchronisation: entries only queue work on the stream, except to_host (waits for its
// copy), sumsq (its result goes to the host: the one sync of a step), sync, alloc (zero
// fill, so the memory is ready for every stream) and to_device from pinned host memory
// (from pageable memory it copies into pinned staging and queues the DMA, waiting only when
// a staging half is reused before its last DMA finished; uploads over 128 MiB take the
// runtime's path, which drains the stream first); while a graph is recorded, those refuse;
// free returns the range to the arena at once (later users are ordered after earlier ones
// on the one stream). Index arrays stay on the device: bad cu_seqlens, ids or AdamW
// segment tables are detected by the kernels, which clamp (never access out of bounds)
// and record the first bad value in the error word; sync and sumsq report it (TSR_EINVAL
// naming the entry). CUDA and cuBLASLt failures return TSR_EIO (TSR_ENOMEM for memory)
// naming the entry, the call and the CUDA error string.
//
// Determinism: no float atomics in the backend's own kernels; every reduction sums fixed
// slices in a fixed order and every own attention output row has one owning warp: bitwise
// reproducible run to run. cuDNN's forward has no atomics; its backward, by default
// (TESSERA_CUDA_ATTENTION_DETERMINISTIC=0), accumulates dQ with fp32 atomics: fast, not
// bitwise reproducible (dQ's last bits, and from them the step's results, vary run to
// run). =1 builds it in cuDNN's deterministic form, whose dense b x H x sq x skv dS
// workspace limits it to microbatches of short clips (larger ones take the own, slow
// kernels), for bitwise reproducible runs (docs/gpu.md, "Determinism").
//
// Environment: TESSERA_CUDA_ARENA (above; "none": a cudaMalloc per allocation instead, for
// compute-sanitizer, which sees overruns only at allocation edges — tests/kernels/
// memcheck.sh sets it; an explicit reserve still makes an arena). With launchers that give
// each local rank its own GPU through CUDA_VISIBLE_DEVICES, the default's division among
// local ranks is too cautious: set TESSERA_CUDA_ARENA=90% there.
// TESSERA_CUDA_LT_LOG=1 logs every cuBLASLt plan as it is built (shape, epilogue,
// alignments, and whether cuBLASLt had an algorithm or the plain path runs).
// TESSERA_CUDA_GRAPHS=1 fills the graph_* entries (recorded graphs, graph.cu; any other
// value than 0/1: the backend is unavailable, with the reason). TESSERA_CUDA_STAGING=0 turns
// off the pinned staging of uploads from pageable memory (memory.cu stage_upload: 2 x 128
// MiB pinned, so that an upload does not first drain the stream).
// TESSERA_CUDA_LT_GELU=0 runs linear_gelu_forward
// and linear_backward_dgelu as GEMM + GELU kernel instead of cuBLASLt's epilogues (to
// compare the two on a GPU).
//
// What the backend does not do yet (kernels left on slower paths, fusions not made) is
// listed in docs/gpu.md, "Open items of the CUDA backend".
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
