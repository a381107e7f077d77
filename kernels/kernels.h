// kernels/kernels.h — the compute primitives of the DiT behind one backend interface.
//
// A backend is a struct of function pointers (like ggml's backend interface). The model
// and the trainer call only these entries, so the same code runs on the CPU backend
// (kernels_cpu(): fp32, OpenBLAS GEMMs, OpenMP elsewhere; kernels/cpu/) and on the CUDA
// backend (kernels_cuda(): bf16 activations; kernels/cuda/cuda.h), which fill the same
// struct.
//
// Contract for every entry
// - Call as `kb->op(kb, ...)`: the first argument is the backend itself (its state is
//   kb->ctx: NULL on the CPU; streams and handles on CUDA).
// - Tensors are plain pointers plus dimensions: row-major, contiguous. Element types
//   (docs/kernels.md, "Dtypes"): a pointer typed `void *` holds ACTIVATIONS in the
//   backend's compute dtype kb->act_dtype (fp32 or bf16, kernels/dtype.h); a `float *` is
//   always fp32 — parameters the entry reads as such (biases, norm weights, the embedding
//   table), parameter gradients, optimizer state, EMA and statistics (LayerNorm mean/rstd,
//   attention lse/delta, t, loss weights, losses). Comments mark them [act] and [f32];
//   int32/uint8/int64 arrays say so. An [act] output is computed in fp32 and rounded to
//   the act dtype once, when stored (an accumulated one: loaded, summed in fp32, rounded).
//   The weights `w` of linear layers and GEMM operands are [act]: the model keeps fp32
//   master weights and refreshes an act-dtype working copy with `cast` (after AdamW:
//   adamw_update_multi's `work` output, the same bits).
//   Every pointer lives in the backend's memory space (host
//   memory on the CPU, device memory on CUDA), index arrays (cu_seqlens, positions,
//   ids) included. Get such memory from kb->alloc and move data with kb->to_device /
//   kb->to_host; the model never mallocs activations itself. The one exception is a
//   pointer named `*_host`, which is host memory on every backend.
// - The shape of each pointer is written next to it: `(L, D)` means L rows of D elements.
//   Names used throughout: L tokens of a packed microbatch, D hidden size, H heads,
//   Dh head dimension (D = H * Dh), C clips (n_clips), M/K/N GEMM sizes.
// - Packed clips: the tokens of clip c are the contiguous rows
//   [cu_seqlens[c], cu_seqlens[c+1]) with cu_seqlens[0] == 0, non-decreasing, and
//   cu_seqlens[n_clips] == L (int32, n_clips + 1 entries; an empty clip is allowed).
// - Gradients: an activation gradient (dinp, dq, dshift, ...) is OVERWRITTEN; a
//   parameter gradient (dw, dbias, dweight, dtable) is ACCUMULATED (+=) so that gradient
//   accumulation over microbatches needs no extra buffer. The exceptions are spelled
//   out: gemm (explicit beta), axpy, attention_partial_backward (accumulates
//   dq, dk, dv: it adds one K/V block's contribution) and layernorm_modulate_backward
//   (accumulates dinp: the residual stream's gradient). Any gradient output may be NULL
//   to skip it unless said otherwise.
// - In-place: out may equal inp in elementwise entries (gelu, silu, scale, add, add_act, rope,
//   modulate, gate_residual with out == res); nothing else may alias.
// - Fused entries (layernorm_modulate_*, qk_norm_rope_*, linear_gelu_forward,
//   linear_backward_dgelu, adamw_update_multi) compute what a named composition of the
//   other entries computes, in one pass: their definition is that composition. In fp32 on
//   the CPU they are BITWISE equal to it (tests/kernels/test_backend_ops.c checks); with
//   bf16 activations they may be more exact than it, because an intermediate that the
//   composition stores (and rounds) stays in fp32 inside the fused entry.
// - Errors: every entry returns TSR_OK or an error with err_set() message (NULL
//   required pointer, negative size, bad cu_seqlens, a clip longer than an attention
//   entry's max_len, position/id out of range, no memory). Backends may check
//   device-resident index arrays only where cheap (the CPU backend checks all of them).
// - Threading: an entry is not to be called concurrently on the same backend from two
//   threads (the CUDA backend orders them on one stream); each entry may use many
//   threads internally (OpenMP on the CPU: OMP_NUM_THREADS).
// - Determinism: on the CPU every result is bitwise reproducible for the same inputs and
//   thread count. The backend's own reductions (bias/weight gradients, per-clip sums,
//   loss, sumsq) and attention are moreover independent of the thread count: they sum
//   fixed blocks in a fixed order, and every attention output row has one owner. GEMMs
//   are OpenBLAS's: reproducible for a thread count, not independent of it (measured with
//   OpenBLAS 0.3.21: the dW GEMMs, K = tokens, differ in the last bits between 1 and 2
//   threads; docs/kernels.md "CPU speed").
//
// Numerical definitions that a reference implementation must follow are stated per
// entry (GELU: tanh approximation; RoPE: frequency split; AdamW: PyTorch's order).
#ifndef TESSERA_KERNELS_KERNELS_H
#define TESSERA_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "kernels/dtype.h"

typedef struct kernels_backend kernels_backend;

// Calls per implementation (kernels_backend.path_stats): GEMMs through the vendor library
// and through the backend's plain kernel; calls of the four attention entries through the
// vendor's fused attention and through the backend's own kernels.
typedef struct {
  int64_t gemm_library, gemm_plain;
  int64_t attention_library, attention_own;
} kernels_path_stats;

// The random-number key of one clip (or CP chunk of a clip) for objective_inputs: the
// store's clip id, the clip's total token count N (for the time shift) and the index in
// the clip of the chunk's first token (0 for a whole clip). Backend memory, like every
// array an entry reads.
typedef struct {
  int64_t clip_id;
  int64_t total_tokens;
  int64_t first_token;
} kernels_clip_key;

// The distribution of a clip's noise level t in the objective (model/objective.h;
// train.t_logit_mean, t_logit_std, t_shift_tokens, t_min, t_max): z ~ N(0, 1) from the clip's
// key, t = sigmoid(logit_mean + logit_std z), shifted by s = max(1, sqrt(N / shift_tokens))
// (s = 1 when shift_tokens <= 0): t' = s t / (1 + (s - 1) t), clamped to [1e-5, 1 - 1e-5],
// then mapped into [t_min, t_max]: t'' = t_min + (t_max - t_min) t' (t_min 0, t_max 1: t'
// exactly) — all in double, then rounded to float.
typedef struct {
  double logit_mean, logit_std;
  int64_t shift_tokens;
  double t_min, t_max;
} kernels_t_dist;

// Which keys a query may attend to, by the tokens' grid positions (t, y, x) in their clip
// (model.attn_mask; docs/model.md "Attention masks"):
//   FULL          every key of the clip (the unmasked attention)
//   BLOCK_CAUSAL  chunks of `chunk` latent frames (t / chunk): a query of chunk cq attends
//                 to the keys of chunks ck with ck <= cq and, when window > 0,
//                 cq - ck <= window (itself and `window` chunks back)
//   WINDOW        tiles of tile_t x tile_h x tile_w tokens (t / tile_t, y / tile_h,
//                 x / tile_w): a query attends to the keys whose tile is within wt, wh, ww
//                 tiles of its own in time, rows and columns
// Sizes: chunk, tile_* >= 1; window, wt, wh, ww >= 0. Positions are >= 0.
enum { KERNELS_MASK_FULL = 0, KERNELS_MASK_BLOCK_CAUSAL = 1, KERNELS_MASK_WINDOW = 2 };
typedef struct {
  int32_t kind;                  // KERNELS_MASK_*
  int32_t chunk, window;         // BLOCK_CAUSAL
  int32_t wt, wh, ww;            // WINDOW: radii in tiles
  int32_t tile_t, tile_h, tile_w;  // WINDOW: tile extent in tokens
} kernels_mask;

// One parameter tensor of a flat parameter buffer, for adamw_update_multi: its elements
// [offset, offset + numel) and whether weight decay applies to it. A table of these lives
// in backend memory, made once per run (the model's tensor table does not change).
typedef struct {
  int64_t offset;
  int64_t numel;
  int32_t decay;     // 1: weight decay applies (matrices), 0: it does not (biases, norms)
  int32_t reserved;  // 0
} kernels_param_segment;

struct kernels_backend {
  const char *name;         // "cpu", "cpu-bf16", "cuda"
  void *ctx;                // backend state, owned by the backend
  kernels_dtype act_dtype;  // the dtype of every [act] (void *) tensor; see the contract
  int device_memory;        // 0: buffers are host memory (cpu); 1: device memory (cuda). A
                            // communication backend working with it must use the same space.
  void *stream;             // the stream every entry is queued on (a cudaStream_t), or NULL
                            // (host-synchronous): a device communication backend orders
                            // its transfers against it (comm/comm.h comm_open).

  // ---- memory --------------------------------------------------------------------
  // *ptr = `bytes` of zero-filled backend memory, 64-byte aligned (bytes == 0 gives a
  // valid pointer to free). TSR_ENOMEM when it cannot be had, with a message naming the
  // bytes asked, what the backend holds and how to get more.
  // CPU: one host allocation per call. CUDA: a suballocation (256-byte aligned) of ONE
  // device allocation per run, the arena, which also holds the backend's own workspaces
  // (cuBLASLt's, reduction scratch): no cudaMalloc after it exists, none in a training
  // step. The arena is made by `reserve`, or else by the first alloc, with the size of
  // TESSERA_CUDA_ARENA when set (bytes with an optional K/M/G/T suffix, e.g. "60G", or
  // a percentage of the device's free memory, e.g. "80%") and otherwise this process's
  // share of the device's free memory less its own headroom for the CUDA libraries:
  // free / S - max(1 GiB, 4% of the device's total memory), rounded down to 2 MiB, where S
  // is the number of processes sharing the device (ceil(MPI local ranks / visible devices),
  // 1 with a device each); each process keeps a headroom because each has its own CUDA
  // context and library workspaces (kernels/arena.h kernels_arena_default_size);
  // TESSERA_CUDA_ARENA=none: a cudaMalloc per allocation (for compute-sanitizer).
  tsr_status (*alloc)(const kernels_backend *kb, void **ptr, size_t bytes);
  // Frees memory from alloc; NULL is ignored.
  void (*free)(const kernels_backend *kb, void *ptr);
  tsr_status (*to_device)(const kernels_backend *kb, void *dst, const void *src_host, size_t bytes);
  tsr_status (*to_host)(const kernels_backend *kb, void *dst_host, const void *src, size_t bytes);
  // Device-to-device copy; the ranges must not overlap.
  tsr_status (*copy)(const kernels_backend *kb, void *dst, const void *src, size_t bytes);
  // Strided device-to-device copy of `rows` rows of row_bytes bytes: row i from
  // src + i * src_pitch to dst + i * dst_pitch (pitches in bytes, >= row_bytes); the ranges
  // must not overlap. Ulysses attention's head slices (model/dist/ulysses_attention.h).
  tsr_status (*copy_2d)(const kernels_backend *kb, void *dst, size_t dst_pitch, const void *src,
                        size_t src_pitch, size_t row_bytes, size_t rows);
  tsr_status (*memset_zero)(const kernels_backend *kb, void *ptr, size_t bytes);
  // Waits for every queued entry to finish (no-op on the CPU).
  tsr_status (*sync)(const kernels_backend *kb);
  // Sizes the backend's memory for this run: on CUDA, makes the arena of exactly `bytes`
  // (0, or TESSERA_CUDA_ARENA set: the sizing of alloc; the trainer reserves its memory
  // model's count, so a run takes what it needs, not the device). Call it before the
  // first alloc; once the arena
  // exists, TSR_EINVAL unless bytes is 0 or its size. A no-op on the CPU (host memory is
  // allocated per call).
  tsr_status (*reserve)(const kernels_backend *kb, size_t bytes);
  // Memory of the backend, in bytes, host values: in_use (allocated now, by alloc and the
  // backend's own workspaces), peak (the largest in_use so far) and capacity (the arena's
  // size; 0 where the backend allocates per call, the CPU). Any pointer may be NULL.
  tsr_status (*memory_stats)(const kernels_backend *kb, size_t *in_use_host, size_t *peak_host,
                             size_t *capacity_host);
  // ---- recorded graphs (optional: NULL where the backend records nothing, the CPU) ----
  // graph_begin starts recording: until graph_end, entries are recorded, not run, and each
  // records the pointers and sizes it was given. Between the two, nothing may wait for the
  // device, allocate or read back (sync, to_host, to_device, sumsq, alloc, free, reserve):
  // the recording then fails. graph_end stops recording and gives *graph, replayable by
  // graph_launch (queued like an entry; the same pointers, sizes and scalars, the contents
  // of device memory as they are at replay), freed by graph_free. A recording that failed
  // (any entry's error, an unsupported call, the backend's scratch moving) returns that
  // error from graph_end, *graph = NULL, and leaves the backend as before graph_begin (the
  // recorded entries never ran: run them again eagerly). graph_launch sets *stale = 1 and
  // queues nothing when the graph depends on backend memory that has moved since it was
  // recorded (the scratch grew): free it, run eagerly, record again. CUDA: stream capture into a CUDA graph (kernels/cuda/graph.cu);
  // filled only with TESSERA_CUDA_GRAPHS=1 (docs/gpu.md). kernels/graph_cache.h decides
  // what to record and when.
  tsr_status (*graph_begin)(const kernels_backend *kb);
  tsr_status (*graph_end)(const kernels_backend *kb, void **graph);
  tsr_status (*graph_launch)(const kernels_backend *kb, void *graph, int *stale);
  void (*graph_free)(const kernels_backend *kb, void *graph);
  // Memory of the backend's space that can still be had and its total, in bytes: host
  // MemAvailable and MemTotal (/proc/meminfo; shared by every process of the node) on the
  // CPU, cudaMemGetInfo of the device on CUDA. For the trainer's memory model.
  tsr_status (*mem_info)(const kernels_backend *kb, size_t *free_bytes, size_t *total_bytes);
  // Which implementation ran the calls so far (optional: NULL where every entry has one
  // path, the CPU). Counts since the backend was created, host values. A GEMM that the
  // vendor library (cuBLASLt) has no algorithm for runs the backend's plain kernel, many
  // times slower; attention runs the vendor's fused kernel (cuDNN) or the backend's own.
  // Benchmarks report them so that a slow step names its cause.
  tsr_status (*path_stats)(const kernels_backend *kb, kernels_path_stats *out_host);

  // ---- dtype conversion ------------------------------------------------------------
  // dst = src converted elementwise (fp32 -> bf16 rounds to nearest even; bf16 -> fp32 is
  // exact; same dtype copies). For the working copy of the weights (master fp32 -> act
  // after init, load and every optimizer step) and for reading activations back as fp32.
  // Any pair of kernels_dtype works on every backend, whatever its act_dtype.
  // dst: (n) [dst_dtype], src: (n) [src_dtype]; must not overlap.
  tsr_status (*cast)(const kernels_backend *kb, void *dst, kernels_dtype dst_dtype,
                     const void *src, kernels_dtype src_dtype, size_t n);

  // ---- small elementwise helpers (n elements) ----------------------------------------
  // fill, scale, add, axpy are [f32]: for parameters, their gradients, t and statistics
  // (model/cond.c scales t). add_act and axpy_act are their [act] forms, for activations
  // and activation gradients (model/cond.c adds the label embedding to c,
  // model/layers.c adds the second path of the residual-stream gradient).
  tsr_status (*fill)(const kernels_backend *kb, float *x, float value, size_t n);  // x: (n) [f32]
  tsr_status (*scale)(const kernels_backend *kb, float *x, float alpha, size_t n); // x *= alpha [f32]
  // out = a + b. out: (n), a: (n), b: (n) [f32]
  tsr_status (*add)(const kernels_backend *kb, float *out, const float *a, const float *b, size_t n);
  // y += alpha * x. y: (n), x: (n) [f32]
  tsr_status (*axpy)(const kernels_backend *kb, float *y, float alpha, const float *x, size_t n);
  // out = a + b. out, a, b: (n) [act] (out may equal a or b)
  tsr_status (*add_act)(const kernels_backend *kb, void *out, const void *a, const void *b,
                        size_t n);
  // y += alpha * x. y, x: (n) [act]
  tsr_status (*axpy_act)(const kernels_backend *kb, void *y, float alpha, const void *x, size_t n);
  // out = a * in + b, e.g. a = 2/255, b = -1 maps uint8 pixels to [-1, 1].
  // out: (n) [act], in: (n) uint8
  tsr_status (*u8_affine)(const kernels_backend *kb, void *out, const uint8_t *in, float a, float b,
                          size_t n);

  // ---- GEMM (OpenBLAS sgemm on the CPU) -----------------------------------------
  // General row-major GEMM: c = alpha * op(a) * op(b) + beta * c, op(x) = x or x^T.
  // c: (m, n) [act]; a: (m, k), or (k, m) if trans_a [act]; b: (k, n), or (n, k) if
  // trans_b [act]. beta == 0 overwrites c (its old contents are ignored, NaN included);
  // otherwise c is read, the sum formed in fp32 and rounded once.
  tsr_status (*gemm)(const kernels_backend *kb, int trans_a, int trans_b, int m, int n, int k,
                     float alpha, const void *a, const void *b, float beta, void *c);
  // gemm on column slices of wider matrices, with a choice of output dtype (LoRA's adapters
  // that share an input: one down-projection for all of them, each adapter reading its
  // columns; model/lora.c). c = alpha op(a) op(b) + beta c exactly as gemm, but row i of
  // each operand starts ld elements after row i - 1: a is (m, k) rows of lda >= k, or
  // (k, m) rows of lda >= m if trans_a; b is (k, n) rows of ldb >= n, or (n, k) rows of
  // ldb >= k if trans_b; c is (m, n) rows of ldc >= n. The elements between a row's end
  // and the next row's start are neither read nor written. c_dtype is kb->act_dtype (c is
  // [act], rounded once as gemm's) or KERNELS_F32 (c is [f32], a parameter gradient formed
  // and accumulated in fp32 at any act dtype, as linear_backward's dw). a, b: [act]. With
  // dense strides and c_dtype = act it computes what gemm computes (bitwise on the CPU).
  // TSR_EINVAL for a stride below its row's length or another c_dtype.
  tsr_status (*gemm_strided)(const kernels_backend *kb, int trans_a, int trans_b, int m, int n,
                             int k, float alpha, const void *a, int lda, const void *b, int ldb,
                             float beta, void *c, int ldc, kernels_dtype c_dtype);
  // Linear layer: out = inp * w + bias (weights stored (in, out), i.e. PyTorch's
  // nn.Linear weight transposed). bias may be NULL.
  // out: (M, N) [act], inp: (M, K) [act], w: (K, N) [act] working copy, bias: (N) [f32]
  tsr_status (*linear_forward)(const kernels_backend *kb, void *out, const void *inp,
                               const void *w, const float *bias, int M, int K, int N);
  // dinp = dout * w^T (overwritten); dw += inp^T * dout; dbias += column sums of dout.
  // dinp: (M, K) [act], dw: (K, N) [f32], dbias: (N) [f32], dout: (M, N) [act],
  // inp: (M, K) [act], w: (K, N) [act]. inp is needed only for dw, w only for dinp.
  tsr_status (*linear_backward)(const kernels_backend *kb, void *dinp, float *dw, float *dbias,
                                const void *dout, const void *inp, const void *w, int M, int K,
                                int N);

  // ---- normalisation -------------------------------------------------------------
  // LayerNorm without affine over the last dimension: out = (inp - mean) * rstd,
  // rstd = 1 / sqrt(var + eps), var biased (divide by D). Statistics in double.
  // out: (L, D) [act], mean: (L) [f32] or NULL, rstd: (L) [f32] or NULL (saved for
  // backward), inp: (L, D) [act]
  tsr_status (*layernorm_forward)(const kernels_backend *kb, void *out, float *mean, float *rstd,
                                  const void *inp, int L, int D, float eps);
  // dinp = rstd * (dout - mean(dout) - xhat * mean(dout * xhat)), xhat = (inp-mean)*rstd.
  // dinp: (L, D) [act] overwritten, dout: (L, D) [act], inp: (L, D) [act], mean: (L) [f32],
  // rstd: (L) [f32]
  tsr_status (*layernorm_backward)(const kernels_backend *kb, void *dinp, const void *dout,
                                   const void *inp, const float *mean, const float *rstd, int L,
                                   int D);
  // RMSNorm with a learned weight over rows of C values: out = inp * rstd * weight,
  // rstd = 1 / sqrt(mean(inp^2) + eps). For QK-norm per head pass q as R = L*H rows of
  // C = Dh (the weight (Dh) is shared by all heads).
  // out: (R, C) [act], rstd: (R) [f32] or NULL, inp: (R, C) [act], weight: (C) [f32]
  tsr_status (*rmsnorm_forward)(const kernels_backend *kb, void *out, float *rstd, const void *inp,
                                const float *weight, int R, int C, float eps);
  // dinp overwritten; dweight += sum over rows of dout * inp * rstd.
  // dinp: (R, C) [act], dweight: (C) [f32], dout: (R, C) [act], inp: (R, C) [act],
  // weight: (C) [f32], rstd: (R) [f32]
  tsr_status (*rmsnorm_backward)(const kernels_backend *kb, void *dinp, float *dweight,
                                 const void *dout, const void *inp, const float *weight,
                                 const float *rstd, int R, int C);

  // ---- adaLN modulation (per clip) -----------------------------------------------
  // The per-clip vectors (shift, scale, gate) are rows of a (C, mstride) array, so they can
  // point into the adaLN linear's output (C, 6*D) directly: clip c's vector is
  // shift[c * mstride + 0 .. D). mstride >= D. Their gradients use the same layout. Being
  // rows of a linear's output (and the dout of its backward), they are [act]; only the D
  // values of each row are read or written (the rest of the stride is untouched).
  //
  // out = inp * (1 + scale[c]) + shift[c] for every token of clip c.
  // out: (L, D) [act], inp: (L, D) [act], shift/scale: (C, mstride) [act],
  // cu_seqlens: (C + 1) int32
  tsr_status (*modulate_forward)(const kernels_backend *kb, void *out, const void *inp,
                                 const void *shift, const void *scale, int mstride,
                                 const int32_t *cu_seqlens, int n_clips, int L, int D);
  // dinp = dout * (1 + scale[c]); dshift[c] = sum over clip c's tokens of dout;
  // dscale[c] = sum of dout * inp. All overwritten (activation gradients); a clip with no
  // tokens gets zeros. The sums are formed in fp32/double and rounded once.
  // dinp: (L, D) [act], dshift/dscale: (C, mstride) [act], dout: (L, D) [act],
  // inp: (L, D) [act], scale: (C, mstride) [act]
  tsr_status (*modulate_backward)(const kernels_backend *kb, void *dinp, void *dshift,
                                  void *dscale, const void *dout, const void *inp,
                                  const void *scale, int mstride, const int32_t *cu_seqlens,
                                  int n_clips, int L, int D);
  // Gated residual: out = res + gate[c] * inp (out may equal res).
  // out: (L, D) [act], res: (L, D) [act], inp: (L, D) [act], gate: (C, mstride) [act]
  tsr_status (*gate_residual_forward)(const kernels_backend *kb, void *out, const void *res,
                                      const void *inp, const void *gate, int mstride,
                                      const int32_t *cu_seqlens, int n_clips, int L, int D);
  // dinp = gate[c] * dout; dgate[c] = sum over clip c's tokens of dout * inp (both
  // overwritten). The gradient to res is dout itself.
  // dinp: (L, D) [act], dgate: (C, mstride) [act], dout: (L, D) [act], inp: (L, D) [act],
  // gate: (C, mstride) [act]
  tsr_status (*gate_residual_backward)(const kernels_backend *kb, void *dinp, void *dgate,
                                       const void *dout, const void *inp, const void *gate,
                                       int mstride, const int32_t *cu_seqlens, int n_clips, int L,
                                       int D);

  // ---- 3D rotary position embedding ----------------------------------------------
  // Split of the head dimension (as in Wan 2.1): Dh even; d_h = d_w = 2 * (Dh / 6)
  // (integer division), d_t = Dh - d_h - d_w. The Dh/2 rotation pairs are the adjacent
  // elements (2p, 2p+1); pairs [0, d_t/2) rotate by the time position t, the next d_h/2
  // pairs by the row y, the last d_w/2 by the column x. Inside a group of width d_g the
  // j-th pair has frequency theta^(-2j / d_g) and angle = position * frequency (computed
  // in double). Rotation: (a, b) -> (a cos - b sin, a sin + b cos).
  // out: (L, H, Dh) [act], inp: (L, H, Dh) [act] (out may equal inp), pos: (L, 3) int32
  // (t, y, x)
  tsr_status (*rope_forward)(const kernels_backend *kb, void *out, const void *inp,
                             const int32_t *pos, int L, int H, int Dh, float theta);
  // The inverse rotation: dinp = R^T dout. dinp: (L, H, Dh) [act], dout: (L, H, Dh) [act],
  // pos: (L, 3)
  tsr_status (*rope_backward)(const kernels_backend *kb, void *dinp, const void *dout,
                              const int32_t *pos, int L, int H, int Dh, float theta);

  // ---- activations ---------------------------------------------------------------
  // GELU, tanh approximation (PyTorch approximate='tanh'):
  // y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). out, inp: (n) [act]
  tsr_status (*gelu_forward)(const kernels_backend *kb, void *out, const void *inp, size_t n);
  // dinp = gelu'(inp) * dout. dinp, dout, inp: (n) [act]
  tsr_status (*gelu_backward)(const kernels_backend *kb, void *dinp, const void *dout,
                              const void *inp, size_t n);
  // SiLU y = x / (1 + exp(-x)). out, inp: (n) [act]
  tsr_status (*silu_forward)(const kernels_backend *kb, void *out, const void *inp, size_t n);
  // dinp, dout, inp: (n) [act]
  tsr_status (*silu_backward)(const kernels_backend *kb, void *dinp, const void *dout,
                              const void *inp, size_t n);

  // ---- conditioning --------------------------------------------------------------
  // Sinusoidal timestep embedding (DiT): half = dim/2, f_j = exp(-ln(max_period) j / half),
  // out[i] = [cos(t_i f_0..half-1), sin(t_i f_0..half-1)], a last zero column if dim is odd.
  // t is used as given (scale it, e.g. by 1000, before). Computed in double.
  // out: (n, dim) [act], t: (n) [f32] (a noise level: bf16 would keep 3 digits of it)
  tsr_status (*timestep_embedding)(const kernels_backend *kb, void *out, const float *t, int n,
                                   int dim, float max_period);
  // Row gather (class labels): out[i] = table[ids[i]].
  // out: (n, D) [act], table: (V, D) [f32] parameter, ids: (n) int32
  tsr_status (*embedding_forward)(const kernels_backend *kb, void *out, const float *table,
                                  const int32_t *ids, int n, int V, int D);
  // dtable[ids[i]] += dout[i], in order of i. dtable: (V, D) [f32], dout: (n, D) [act], ids: (n)
  tsr_status (*embedding_backward)(const kernels_backend *kb, float *dtable, const void *dout,
                                   const int32_t *ids, int n, int V, int D);

  // ---- attention over packed clips -----------------------------------------------
  // q, k, v, out: (L, H, Dh) [act] (= (L, D) activations); lse: (L, H) [f32], the natural
  // log of the softmax denominator of each query row (in units of the scaled scores),
  // token-major like every activation so a CP chunk of tokens is a contiguous slice. scale
  // is the softmax scale (1/sqrt(Dh) for standard attention). Each query attends
  // bidirectionally to every key of its own clip only. Tiled online softmax: memory is
  // O(threads * tile * Dh), never (L x L).
  // max_len (max_q, max_k for the partial entries: queries' and keys' clips) is an upper
  // bound on every clip's token count, given by the caller, who packed the clips and knows
  // their lengths on the host (FlashAttention's max_seqlen): a fused kernel sizes its plan,
  // workspace and launch grid by it instead of by the packed total (CUDA: cuDNN's sequence
  // dimension, docs/gpu.md "Attention"). Any value >= the longest clip is correct (L
  // always is; kernels_attention_max_len below rounds the longest clip so that one plan
  // and one recorded graph serve many packings); a smaller one is TSR_EINVAL naming the
  // clip (CPU: at the call; CUDA: checked on the device and reported by the next sync,
  // the call's results undefined but its reads and writes inside its tensors). Negative:
  // TSR_EINVAL.
  //
  // Full attention (one rank holds whole clips): out, lse overwritten.
  tsr_status (*attention_forward)(const kernels_backend *kb, void *out, float *lse, const void *q,
                                  const void *k, const void *v, const int32_t *cu_seqlens,
                                  int n_clips, int max_len, int L, int H, int Dh, float scale);
  // dq, dk, dv overwritten; recomputes the scores tile by tile from q, k, lse and
  // delta = rowsum(dout * out). dq, dk, dv, dout, q, k, v, out: (L, H, Dh) [act],
  // lse: (L, H) [f32]
  tsr_status (*attention_backward)(const kernels_backend *kb, void *dq, void *dk, void *dv,
                                   const void *dout, const void *q, const void *k,
                                   const void *v, const void *out, const float *lse,
                                   const int32_t *cu_seqlens, int n_clips, int max_len, int L,
                                   int H, int Dh, float scale);
  // Partial attention for ring attention: Lq local queries against one block of Lk
  // keys/values. Clip c's queries [cu_q[c], cu_q[c+1]) attend to the block's keys
  // [cu_k[c], cu_k[c+1]) only. out is normalised over this block's keys and lse is this
  // block's log-sum-exp; a query whose clip has no key in the block gets out = 0 and
  // lse = -INFINITY. Combine blocks with attention_merge.
  // out: (Lq, H, Dh) [act], lse: (Lq, H) [f32], q: (Lq, H, Dh) [act], k, v: (Lk, H, Dh)
  // [act], cu_q, cu_k: (C + 1) int32 (cu_q[C] == Lq, cu_k[C] == Lk); max_q, max_k bound
  // the clips' lengths in cu_q and in cu_k
  tsr_status (*attention_partial_forward)(const kernels_backend *kb, void *out, float *lse,
                                          const void *q, const void *k, const void *v,
                                          const int32_t *cu_q, const int32_t *cu_k, int n_clips,
                                          int max_q, int max_k, int Lq, int Lk, int H, int Dh,
                                          float scale);
  // Merges partial b into the accumulator a, exactly (up to rounding):
  // lse = log(exp(lse_a) + exp(lse_b)), out_a = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b.
  // -INFINITY lse (empty partial) is handled; merging in any order gives the full result.
  // out_a: (L, H, Dh) [act] updated (rounded once per merge), lse_a: (L, H) [f32] updated,
  // out_b: (L, H, Dh) [act], lse_b: (L, H) [f32]
  tsr_status (*attention_merge)(const kernels_backend *kb, void *out_a, float *lse_a,
                                const void *out_b, const float *lse_b, int L, int H, int Dh);
  // delta = rowsum over Dh of dout * out (computed in double), the D_i of the backward.
  // delta: (L, H) [f32], dout, out: (L, H, Dh) [act]
  tsr_status (*attention_delta)(const kernels_backend *kb, float *delta, const void *dout,
                                const void *out, int L, int H, int Dh);
  // Backward of one K/V block given the FINAL lse and delta of the local queries:
  // with P = exp(scale q.k - lse), dS = P * (dout.v - delta):
  // dq += scale dS k, dk += scale dS^T q, dv += P^T dout — all three ACCUMULATED (dq over
  // the blocks of the ring, dk/dv are the block's gradients travelling with it; with bf16
  // activations each call loads them, adds in fp32 and rounds once).
  // dq may be NULL; dk and dv are given together or both NULL (same for attention_backward).
  // dq: (Lq, H, Dh) [act], dk, dv: (Lk, H, Dh) [act], dout, q: (Lq, H, Dh) [act],
  // k, v: (Lk, H, Dh) [act], lse, delta: (Lq, H) [f32], cu_q, cu_k: (C + 1); max_q, max_k
  // as in attention_partial_forward
  tsr_status (*attention_partial_backward)(const kernels_backend *kb, void *dq, void *dk,
                                           void *dv, const void *dout, const void *q,
                                           const void *k, const void *v, const float *lse,
                                           const float *delta, const int32_t *cu_q,
                                           const int32_t *cu_k, int n_clips, int max_q, int max_k,
                                           int Lq, int Lk, int H, int Dh, float scale);
  // Masked attention (model.attn_mask, docs/model.md "Attention masks"): as the entries
  // above, but query i attends only to the keys j of its clip that kernels_mask allows for
  // their grid positions pos_q[i], pos_k[j] ((t, y, x), the RoPE positions: a CP chunk's
  // are its true positions in the clip), the softmax taken over those keys alone; a query
  // with none gets out = 0, lse = -INFINITY. KERNELS_MASK_FULL is the unmasked entry's
  // result. cu_q may equal cu_k (whole clips: attention_forward's case).
  // OPTIONAL: NULL in a backend without them (CUDA for now); the model then refuses a
  // masked config naming the entry and the backend.
  // attention_partial_forward's tensors, plus pos_q: (Lq, 3), pos_k: (Lk, 3) int32
  tsr_status (*attention_masked_forward)(const kernels_backend *kb, void *out, float *lse,
                                         const void *q, const void *k, const void *v,
                                         const int32_t *cu_q, const int32_t *cu_k,
                                         const int32_t *pos_q, const int32_t *pos_k,
                                         kernels_mask mask, int n_clips, int max_q, int max_k,
                                         int Lq, int Lk, int H, int Dh, float scale);
  // attention_backward's contract (dq, dk, dv overwritten) under the mask; pos: (L, 3)
  tsr_status (*attention_masked_backward)(const kernels_backend *kb, void *dq, void *dk,
                                          void *dv, const void *dout, const void *q,
                                          const void *k, const void *v, const void *out,
                                          const float *lse, const int32_t *cu_seqlens,
                                          const int32_t *pos, kernels_mask mask, int n_clips,
                                          int max_len, int L, int H, int Dh, float scale);
  // attention_partial_backward's contract (dq, dk, dv accumulated) under the mask
  tsr_status (*attention_masked_partial_backward)(
      const kernels_backend *kb, void *dq, void *dk, void *dv, const void *dout, const void *q,
      const void *k, const void *v, const float *lse, const float *delta, const int32_t *cu_q,
      const int32_t *cu_k, const int32_t *pos_q, const int32_t *pos_k, kernels_mask mask,
      int n_clips, int max_q, int max_k, int Lq, int Lk, int H, int Dh, float scale);

  // ---- objective and sampler (no host work per step) ---------------------------------
  // The rectified-flow inputs of a packed microbatch, from the stored tokens and the keys
  // of core/rng.h, exactly as model/objective.h defines them (the CPU fp32 entry is
  // bitwise equal to objective_build): for clip c with key (seed, step, clip_id) and
  // token j = first_token + i of its own token index (i-th row of the clip here),
  //   z = rng_normal({seed, step, clip_id, TIMESTEP}, 0)
  //   t' = the noise level of kernels_t_dist td (its z from the key above), a float
  //   x0 = u8 * (2/255) - 1 for uint8 pixels; x0 = the value itself (exact in fp32) for bf16
  //        or f32 latents
  //   e = (float)rng_normal({seed, step, clip_id, NOISE}, j P + v)
  //   x_t = (1 - t') x0 + t' e;  target = e - x0           (float arithmetic, no FMA)
  // t: (C) [f32] out, x_t, target: (L, P) [act] out, tokens: (L, P) of tokens_dtype,
  // clips: (C) kernels_clip_key, cu_seqlens: (C + 1) int32
  tsr_status (*objective_inputs)(const kernels_backend *kb, float *t, void *x_t, void *target,
                                 const void *tokens, kernels_tokens tokens_dtype,
                                 const kernels_clip_key *clips,
                                 const int32_t *cu_seqlens, int n_clips, int L, int P,
                                 uint64_t seed, uint64_t step, kernels_t_dist td);
  // One Euler step of the sampler with classifier-free guidance (model/sample/sample.h):
  //   v = v_uncond + cfg (v_cond - v_uncond)   (v = v_cond when v_uncond is NULL)
  //   x += dt v                                (float arithmetic, no FMA)
  // x is the sampler's state, kept in fp32 like master weights: with bf16 the increment
  // dt v of a 50-step run is below half an ulp of x for |x| > ~1 and would be lost; cast
  // it to the act dtype for the model's input.
  // x: (n) [f32] updated, v_cond, v_uncond: (n) [act] (the model's two predictions)
  tsr_status (*euler_update)(const kernels_backend *kb, float *x, const void *v_cond,
                             const void *v_uncond, float cfg, float dt, size_t n);

  // ---- loss ------------------------------------------------------------------------
  // Weighted per-clip squared error: sse[c] = sum over clip c's local tokens and D values
  // of (pred - target)^2 (double accumulation), loss[0] = sum_c weight[c] * sse[c].
  // For the training objective (mean over B clips of each clip's mean) use
  // weight[c] = 1 / (B * T_c * D) with T_c the clip's total token count, so CP chunks
  // and microbatches of one global batch sum to the global loss (see kernels_mse_weight).
  // loss: (1) [f32], sse: (C) [f32] or NULL, pred, target: (L, D) [act], weight: (C) [f32]
  tsr_status (*mse_forward)(const kernels_backend *kb, float *loss, float *sse, const void *pred,
                            const void *target, const float *weight, const int32_t *cu_seqlens,
                            int n_clips, int L, int D);
  // dpred = 2 * weight[c] * (pred - target) (overwritten). dpred, pred, target: (L, D) [act]
  tsr_status (*mse_backward)(const kernels_backend *kb, void *dpred, const void *pred,
                             const void *target, const float *weight, const int32_t *cu_seqlens,
                             int n_clips, int L, int D);

  // ---- optimizer (all [f32]) -----------------------------------------------------------
  // *result_host = sum of x^2 in double (fixed blocks, fixed order). Sum it over tensors
  // (and ranks) for the global gradient norm; see kernels_clip_scale. x: (n)
  tsr_status (*sumsq)(const kernels_backend *kb, double *result_host, const float *x, size_t n);
  // AdamW, PyTorch's torch.optim.AdamW (non-fused, non-amsgrad) order of operations, with
  // g = grad * grad_scale (grad_scale = clipping factor, 1 for none), step t >= 1:
  //   param *= 1 - lr * weight_decay
  //   m = m + (g - m) * (1 - beta1)          (lerp)
  //   v = v * beta2 + (1 - beta2) * g * g
  //   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
  //   param -= (lr / (1 - beta1^t)) * m / denom
  // param, m, v: (n) updated; grad: (n)
  tsr_status (*adamw_update)(const kernels_backend *kb, float *param, const float *grad, float *m,
                             float *v, size_t n, float lr, float beta1, float beta2, float eps,
                             float weight_decay, int64_t step, float grad_scale);
  // EMA of weights: ema = ema * decay + param * (1 - decay). ema, param: (n)
  tsr_status (*ema_update)(const kernels_backend *kb, float *ema, const float *param, size_t n,
                           float decay);
  // AdamW over every tensor of flat buffers in one call (one launch on CUDA): for each
  // segment s, adamw_update on the elements [segs[s].offset, + segs[s].numel) with
  // weight_decay if segs[s].decay else 0 — bitwise equal to those n_segs calls. Segments
  // in increasing offset order, not overlapping, inside [0, n); elements in no segment
  // are untouched. EMA and the gradient's sum of squares need no such table: ema_update
  // and sumsq over the whole flat buffer are already one call each.
  // work, unless NULL, is the act-dtype working copy of param: each updated element is also
  // stored there rounded as `cast` rounds it, so AdamW then cast of the segments gives the
  // same bits in one pass over the weights (elements in no segment untouched there too).
  // param, m, v: (n) updated; grad: (n); work: (n) [act] or NULL, not overlapping param;
  // segs: (n_segs) kernels_param_segment (backend memory; checked on the CPU, on CUDA a bad
  // table is reported by the next sync)
  tsr_status (*adamw_update_multi)(const kernels_backend *kb, float *param, const float *grad,
                                   float *m, float *v, void *work, size_t n,
                                   const kernels_param_segment *segs, int n_segs, float lr,
                                   float beta1, float beta2, float eps, float weight_decay,
                                   int64_t step, float grad_scale);

  // ---- fused entries (see "Fused entries" in the contract above) ----------------------
  // LayerNorm + adaLN modulation, = layernorm_forward then modulate_forward:
  //   out = LN(inp) (1 + scale[c]) + shift[c]; mean, rstd saved (LN(inp) itself is not:
  //   the backward recomputes it from inp, mean and rstd, bitwise as the forward made it).
  // out: (L, D) [act], mean, rstd: (L) [f32] (required), inp: (L, D) [act],
  // shift/scale: (C, mstride) [act], cu_seqlens: (C + 1)
  tsr_status (*layernorm_modulate_forward)(const kernels_backend *kb, void *out, float *mean,
                                           float *rstd, const void *inp, const void *shift,
                                           const void *scale, int mstride,
                                           const int32_t *cu_seqlens, int n_clips, int L, int D,
                                           float eps);
  // Its backward, = modulate_backward (with ln = (inp - mean) rstd) then
  // layernorm_backward then dinp += that gradient (axpy_act with alpha 1): dinp is
  // ACCUMULATED (the residual stream's gradient), dshift/dscale overwritten as in
  // modulate_backward. dinp: (L, D) [act], dshift/dscale: (C, mstride) [act],
  // dout, inp: (L, D) [act], mean, rstd: (L) [f32], scale: (C, mstride) [act]
  tsr_status (*layernorm_modulate_backward)(const kernels_backend *kb, void *dinp, void *dshift,
                                            void *dscale, const void *dout, const void *inp,
                                            const float *mean, const float *rstd,
                                            const void *scale, int mstride,
                                            const int32_t *cu_seqlens, int n_clips, int L, int D);
  // QK-norm and 3D RoPE of q and k together, = for x in (q, k):
  //   rmsnorm_forward(x_out, x_rstd, x_in, x_weight, L*H rows, Dh, eps) then
  //   rope_forward(x_out, x_out, pos, L, H, Dh, theta)   (the angles computed once for both)
  // q_out, k_out: (L, H, Dh) [act], q_rstd, k_rstd: (L*H) [f32] (required),
  // q_in, k_in: (L, H, Dh) [act], q_weight, k_weight: (Dh) [f32], pos: (L, 3) int32
  tsr_status (*qk_norm_rope_forward)(const kernels_backend *kb, void *q_out, void *k_out,
                                     float *q_rstd, float *k_rstd, const void *q_in,
                                     const void *k_in, const float *q_weight,
                                     const float *k_weight, const int32_t *pos, int L, int H,
                                     int Dh, float eps, float theta);
  // Its backward, = for x in (q, k): rope_backward(tmp, dx, pos) then
  //   rmsnorm_backward(dx_in, dx_weight, tmp, x_in, x_weight, x_rstd, L*H rows, Dh)
  // (tmp kept in fp32). dq_in, dk_in overwritten; dq_weight, dk_weight accumulated (either
  // may be NULL). dq_in, dk_in: (L, H, Dh) [act], dq_weight, dk_weight: (Dh) [f32],
  // dq, dk: (L, H, Dh) [act] gradients of q_out, k_out, q_in, k_in: (L, H, Dh) [act],
  // q_weight, k_weight: (Dh) [f32], q_rstd, k_rstd: (L*H) [f32], pos: (L, 3) int32
  tsr_status (*qk_norm_rope_backward)(const kernels_backend *kb, void *dq_in, void *dk_in,
                                      float *dq_weight, float *dk_weight, const void *dq,
                                      const void *dk, const void *q_in, const void *k_in,
                                      const float *q_weight, const float *k_weight,
                                      const float *q_rstd, const float *k_rstd,
                                      const int32_t *pos, int L, int H, int Dh, float theta);
  // Linear layer with a GELU (tanh) epilogue, = linear_forward(pre, inp, w, bias) then
  // gelu_forward(out, pre), GELU applied to the fp32 sum (pre is rounded only for
  // storing). pre is kept for the backward (linear_backward_dgelu). On CUDA: cuBLASLt's
  // GELU_AUX(_BIAS) epilogue where it takes the shape, else the GEMM and a GELU kernel.
  // out, pre: (M, N) [act], inp: (M, K) [act], w: (K, N) [act], bias: (N) [f32] or NULL
  tsr_status (*linear_gelu_forward)(const kernels_backend *kb, void *out, void *pre,
                                    const void *inp, const void *w, const float *bias, int M,
                                    int K, int N);
  // Backward of a linear layer whose input is GELU(pre) (the MLP's second linear), with
  // GELU's backward fused into its dinp: = linear_backward(tmp, dw, dbias, dout, inp, w)
  // then gelu_backward(dpre, tmp, pre), tmp kept in fp32. dpre overwritten, dw and dbias
  // accumulated. On CUDA: cuBLASLt's DGELU epilogue where it takes the shape.
  // dpre: (M, K) [act], dw: (K, N) [f32], dbias: (N) [f32], dout: (M, N) [act],
  // inp = GELU(pre): (M, K) [act] (for dw), w: (K, N) [act], pre: (M, K) [act]
  tsr_status (*linear_backward_dgelu)(const kernels_backend *kb, void *dpre, float *dw,
                                      float *dbias, const void *dout, const void *inp,
                                      const void *w, const void *pre, int M, int K, int N);
};

// Element i of an [act] buffer of kb (void *: no pointer arithmetic in C): base + i
// elements of kb->act_dtype, in bytes. The one way the model steps through activations.
static inline void *kernels_act_at(const kernels_backend *kb, const void *base, size_t i) {
  return (char *)base + i * kernels_dtype_size(kb->act_dtype);
}
// Bytes of n [act] elements of kb.
static inline size_t kernels_act_bytes(const kernels_backend *kb, size_t n) {
  return n * kernels_dtype_size(kb->act_dtype);
}
// The max_len (max_q, max_k) a caller passes to the attention entries for a packing of L
// tokens whose longest clip has `longest`: longest rounded up to a power of two (at least
// 64), at most L. Still a bound on every clip, and the same for every packing of L tokens
// whose longest clip falls in the same power-of-two range, so that the backend's plans
// (cuDNN's are sized by it) and a recorded graph of the model (keyed by it) serve them all.
static inline int kernels_attention_max_len(int64_t longest, int64_t L) {
  int64_t b = 64;
  while (b < longest) b *= 2;
  return (int)(b < L ? b : L);
}

// The CPU backend (fp32, OpenBLAS, OpenMP); a static object, never freed.
const kernels_backend *kernels_cpu(void);
// The CPU backend with bf16 activations ("cpu-bf16"): every entry converts its [act]
// inputs to fp32, computes exactly as kernels_cpu() does, and rounds each [act] output to
// bf16 (nearest even) once when it is stored. The reference for GPU backends in bf16 and
// mixed precision without a GPU. Static, never freed.
const kernels_backend *kernels_cpu_bf16(void);
// Every backend built into this binary, in a fixed order, the CPU fp32 one first (the
// reference of tests/kernels/test_backend_ops.c): "cpu", "cpu-bf16", then "cuda" when
// built. Returns how many there are; fills out[0 .. min(count, max)).
int kernels_backends(const kernels_backend **out, int max);
// Whether a backend of device `device` ("cuda": a table name up to its first '-') is built
// into this binary but cannot be used here, which is why kernels_backends() leaves it out
// (a CUDA build whose GPU cannot be opened): 1 with the backend's reason in why[0 .. n)
// (why may be NULL), else 0 (usable, or not built). Lets a tool tell "not built" from
// "built, but the device failed".
int kernels_backend_unusable(const char *device, char *why, size_t n);
// Threads of the CPU backend (OpenMP regions and OpenBLAS GEMMs); n <= 0 keeps the
// defaults (OMP_NUM_THREADS / all cores). Results do not depend on it (see Determinism).
void kernels_cpu_set_threads(int n);

// Clipping factor as torch.nn.utils.clip_grad_norm_: norm = sqrt(total_sumsq);
// returns min(1, max_norm / (norm + 1e-6)) in float; max_norm <= 0 means no clipping (1).
float kernels_clip_scale(double total_sumsq, float max_norm);

// The per-step scalars of adamw_update, formed in double and rounded to float once, as
// PyTorch does with Python-float hyperparameters: decay = 1 - lr wd, w1 = 1 - beta1,
// w2 = 1 - beta2, step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 - beta2^t). Every
// backend's adamw_update takes them from here (TSR_EINVAL naming the entry when
// step < 1 or a beta is outside [0, 1)).
typedef struct {
  float decay, w1, w2, step_size, bc2_sqrt;
} kernels_adamw_scalars;
tsr_status kernels_adamw_prepare(float lr, float beta1, float beta2, float weight_decay,
                                 int64_t step, kernels_adamw_scalars *out);

// The time shift of a clip of total_tokens tokens (longer clips get more noise,
// docs/model.md "Objective"): s = max(1, sqrt(total_tokens / shift_tokens)), t' = s t / (1 + (s - 1) t);
// t itself when shift_tokens <= 0. Training shifts the t it draws with it; the sampler
// shifts its grid of noise levels with it. The one definition of the formula.
double kernels_time_shift(double t, int64_t total_tokens, int64_t shift_tokens);
// The noise level t'' of a clip (model/objective.h, objective_inputs above), in double:
// z = rng_normal({seed, step, clip_id, RNG_STREAM_TIMESTEP}, 0), then kernels_t_dist's formula
// for a clip of total_tokens.
double kernels_objective_timestep(uint64_t seed, uint64_t step, int64_t clip_id,
                                  int64_t total_tokens, const kernels_t_dist *td);

// Loss weight of a clip for the objective "mean over n_batch_clips clips of each clip's
// mean squared error": 1 / (n_batch_clips * clip_tokens * D), computed in double.
float kernels_mse_weight(int n_batch_clips, int64_t clip_tokens, int D);

#endif
