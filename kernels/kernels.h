// kernels/kernels.h — the compute primitives of the DiT behind one backend interface.
//
// A backend is a struct of function pointers (like ggml's backend interface), one per row of
// kernels/entries.h, where each entry's signature, class, cost and contract are written
// once; this header holds the contract every entry shares (below). The model and the
// trainer call only these entries, so the same code runs on the CPU backend
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
// entry in kernels/entries.h (GELU: tanh approximation; RoPE: frequency split; AdamW:
// PyTorch's order).
#ifndef TESSERA_KERNELS_KERNELS_H
#define TESSERA_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "kernels/dtype.h"

#ifdef __cplusplus
extern "C" {  // the CUDA backend's C++ includes it too
#endif

typedef struct kernels_backend kernels_backend;

// Calls per implementation (kernels_backend.path_stats): GEMMs through the vendor library
// and through the backend's plain kernel; calls of the four attention entries through the
// vendor's fused attention and through the backend's own kernels.
typedef struct {
  int64_t gemm_library, gemm_plain;
  int64_t attention_library, attention_own;
} kernels_path_stats;

// The random-number key of one clip (or CP chunk of a clip) for objective_inputs: the
// store's clip id, the clip's total token count N (for the time shift), the index in
// the clip of the chunk's first token (0 for a whole clip) and the counter of its noise
// level's draw (0: the clip's one level; k: the level of the clip's mask chunk k under
// train.noise_per_chunk). Backend memory, like every array an entry reads.
typedef struct {
  int64_t clip_id;
  int64_t total_tokens;
  int64_t first_token;
  int64_t t_index;
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

  // ---- the entries: one row each in kernels/entries.h, with its contract --------------
#define KERNELS_ENTRY(RET, NAME, CLASS, ACT, PARAMS, ARGS, BYTES, FLOPS) RET(*NAME) PARAMS;
#include "kernels/entries.h"
#undef KERNELS_ENTRY
};

// ---- unsupported entries ----------------------------------------------------------------
// A backend may leave an entry out (NULL in its table), so that a new entry can land on the
// CPU first and on CUDA later: every entry of kernels/entries.h with a status to return and
// a class other than NONE. kernels_fill_unsupported(t) sets each such NULL member of t to
// kernels_unsupported_<NAME>, a stub that returns TSR_EINVAL with "NAME: not supported by
// backend B" (the profiled table's too: kernels/profile.h), and each backend's constructor
// calls it on its table, so no call of an entry is a call through NULL. kernels_has(kb,
// NAME) is 1 when kb implements NAME (neither NULL nor the stub): the model asks it before
// it takes a path that needs an entry (masked attention), to refuse the config up front.
#define KERNELS_STUB_tsr_status(NAME, PARAMS) tsr_status kernels_unsupported_##NAME PARAMS;
#define KERNELS_STUB_void(NAME, PARAMS)
#define KERNELS_ENTRY(RET, NAME, CLASS, ACT, PARAMS, ARGS, BYTES, FLOPS) \
  KERNELS_STUB_##RET(NAME, PARAMS)
#include "kernels/entries.h"
#undef KERNELS_ENTRY
#undef KERNELS_STUB_tsr_status
#undef KERNELS_STUB_void
void kernels_fill_unsupported(kernels_backend *t);
#define kernels_has(kb, NAME) ((kb)->NAME != NULL && (kb)->NAME != kernels_unsupported_##NAME)

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
// The noise level t'' of a clip (model/objective.h, entries.h objective_inputs), in double:
// z = rng_normal({seed, step, clip_id, RNG_STREAM_TIMESTEP}, t_index), then kernels_t_dist's
// formula for a clip of total_tokens (t_index: kernels_clip_key's, 0 for a whole clip's level).
double kernels_objective_timestep(uint64_t seed, uint64_t step, int64_t clip_id,
                                  int64_t t_index, int64_t total_tokens,
                                  const kernels_t_dist *td);

// Loss weight of a clip for the objective "mean over n_batch_clips clips of each clip's
// mean squared error": 1 / (n_batch_clips * clip_tokens * D), computed in double.
float kernels_mse_weight(int n_batch_clips, int64_t clip_tokens, int D);

#ifdef __cplusplus
}
#endif

#endif
