// kernels/kernels.h — the compute primitives of the DiT behind one backend interface.
//
// A backend is a struct of function pointers (like ggml's backend interface). The model
// and the trainer call only these entries, so the same code runs on the CPU backend
// (kernels_cpu(): fp32, OpenBLAS GEMMs, OpenMP elsewhere) and on the CUDA backend (a
// later issue) that fills the same struct.
//
// Contract for every entry
// - Call as `kb->op(kb, ...)`: the first argument is the backend itself (its state is
//   kb->ctx: NULL on the CPU; streams and handles on CUDA).
// - Tensors are plain pointers plus dimensions: row-major, contiguous, fp32 unless the
//   comment says int32/uint8. Every pointer lives in the backend's memory space (host
//   memory on the CPU, device memory on CUDA), index arrays (cu_seqlens, positions,
//   ids) included. Get such memory from kb->alloc and move data with kb->to_device /
//   kb->to_host; the model never mallocs activations itself. The one exception is a
//   pointer named `*_host`, which is host memory on every backend.
// - The shape of each pointer is written next to it: `(L, D)` means L rows of D floats.
//   Names used throughout: L tokens of a packed microbatch, D hidden size, H heads,
//   Dh head dimension (D = H * Dh), C clips (n_clips), M/K/N GEMM sizes.
// - Packed clips: the tokens of clip c are the contiguous rows
//   [cu_seqlens[c], cu_seqlens[c+1]) with cu_seqlens[0] == 0, non-decreasing, and
//   cu_seqlens[n_clips] == L (int32, n_clips + 1 entries; an empty clip is allowed).
// - Gradients: an activation gradient (dinp, dq, dshift, ...) is OVERWRITTEN; a
//   parameter gradient (dw, dbias, dweight, dtable) is ACCUMULATED (+=) so that gradient
//   accumulation over microbatches needs no extra buffer. The exceptions are spelled
//   out: gemm (explicit beta), axpy, and attention_partial_backward (accumulates
//   dq, dk, dv: it adds one K/V block's contribution). Any gradient output may be NULL
//   to skip it unless said otherwise.
// - In-place: out may equal inp in elementwise entries (gelu, silu, scale, add, rope,
//   modulate, gate_residual with out == res); nothing else may alias.
// - Errors: every entry returns TSR_OK or an error with err_set() message (NULL
//   required pointer, negative size, bad cu_seqlens, position/id out of range, no
//   memory). Backends may check device-resident index arrays only where cheap (the CPU
//   backend checks all of them).
// - Threading: an entry is not to be called concurrently on the same backend from two
//   threads (the CUDA backend orders them on one stream); each entry may use many
//   threads internally (OpenMP on the CPU: OMP_NUM_THREADS).
// - Determinism: on the CPU every result is bitwise reproducible for the same inputs and
//   thread count. The backend's own reductions (bias/weight gradients, per-clip sums,
//   loss, sumsq) and attention are moreover independent of the thread count: they sum
//   fixed blocks in a fixed order, and every attention output row has one owner. GEMMs
//   are OpenBLAS's (which partitions M and N, not K, between threads).
//
// Numerical definitions that a reference implementation must follow are stated per
// entry (GELU: tanh approximation; RoPE: frequency split; AdamW: PyTorch's order).
#ifndef TESSERA_KERNELS_KERNELS_H
#define TESSERA_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef struct kernels_backend kernels_backend;

struct kernels_backend {
  const char *name;  // "cpu", "cuda"
  void *ctx;         // backend state, owned by the backend
  int device_memory; // 0: buffers are host memory (cpu); 1: device memory (cuda). A
                     // communication backend working with it must use the same space.

  // ---- memory --------------------------------------------------------------------
  // *ptr = `bytes` of zero-filled backend memory, 64-byte aligned (bytes == 0 gives a
  // valid pointer to free). TSR_ENOMEM when it cannot be had.
  tsr_status (*alloc)(const kernels_backend *kb, void **ptr, size_t bytes);
  // Frees memory from alloc; NULL is ignored.
  void (*free)(const kernels_backend *kb, void *ptr);
  tsr_status (*to_device)(const kernels_backend *kb, void *dst, const void *src_host, size_t bytes);
  tsr_status (*to_host)(const kernels_backend *kb, void *dst_host, const void *src, size_t bytes);
  // Device-to-device copy; the ranges must not overlap.
  tsr_status (*copy)(const kernels_backend *kb, void *dst, const void *src, size_t bytes);
  tsr_status (*memset_zero)(const kernels_backend *kb, void *ptr, size_t bytes);
  // Waits for every queued entry to finish (no-op on the CPU).
  tsr_status (*sync)(const kernels_backend *kb);

  // ---- small elementwise helpers (n floats) --------------------------------------
  tsr_status (*fill)(const kernels_backend *kb, float *x, float value, size_t n);  // x: (n)
  tsr_status (*scale)(const kernels_backend *kb, float *x, float alpha, size_t n); // x *= alpha
  // out = a + b. out: (n), a: (n), b: (n)
  tsr_status (*add)(const kernels_backend *kb, float *out, const float *a, const float *b, size_t n);
  // y += alpha * x. y: (n), x: (n)
  tsr_status (*axpy)(const kernels_backend *kb, float *y, float alpha, const float *x, size_t n);
  // out = a * in + b, e.g. a = 2/255, b = -1 maps uint8 pixels to [-1, 1].
  // out: (n) fp32, in: (n) uint8
  tsr_status (*u8_affine)(const kernels_backend *kb, float *out, const uint8_t *in, float a, float b,
                          size_t n);

  // ---- GEMM (OpenBLAS sgemm on the CPU) -----------------------------------------
  // General row-major GEMM: c = alpha * op(a) * op(b) + beta * c, op(x) = x or x^T.
  // c: (m, n); a: (m, k), or (k, m) if trans_a; b: (k, n), or (n, k) if trans_b.
  // beta == 0 overwrites c (its old contents are ignored, NaN included).
  tsr_status (*gemm)(const kernels_backend *kb, int trans_a, int trans_b, int m, int n, int k,
                     float alpha, const float *a, const float *b, float beta, float *c);
  // Linear layer: out = inp * w + bias (weights stored (in, out), i.e. PyTorch's
  // nn.Linear weight transposed). bias may be NULL.
  // out: (M, N), inp: (M, K), w: (K, N), bias: (N)
  tsr_status (*linear_forward)(const kernels_backend *kb, float *out, const float *inp, const float *w,
                               const float *bias, int M, int K, int N);
  // dinp = dout * w^T (overwritten); dw += inp^T * dout; dbias += column sums of dout.
  // dinp: (M, K), dw: (K, N), dbias: (N), dout: (M, N), inp: (M, K), w: (K, N)
  // inp is needed only for dw, w only for dinp.
  tsr_status (*linear_backward)(const kernels_backend *kb, float *dinp, float *dw, float *dbias,
                                const float *dout, const float *inp, const float *w, int M, int K,
                                int N);

  // ---- normalisation -------------------------------------------------------------
  // LayerNorm without affine over the last dimension: out = (inp - mean) * rstd,
  // rstd = 1 / sqrt(var + eps), var biased (divide by D). Statistics in double.
  // out: (L, D), mean: (L) or NULL, rstd: (L) or NULL (saved for backward), inp: (L, D)
  tsr_status (*layernorm_forward)(const kernels_backend *kb, float *out, float *mean, float *rstd,
                                  const float *inp, int L, int D, float eps);
  // dinp = rstd * (dout - mean(dout) - xhat * mean(dout * xhat)), xhat = (inp-mean)*rstd.
  // dinp: (L, D) overwritten, dout: (L, D), inp: (L, D), mean: (L), rstd: (L)
  tsr_status (*layernorm_backward)(const kernels_backend *kb, float *dinp, const float *dout,
                                   const float *inp, const float *mean, const float *rstd, int L,
                                   int D);
  // RMSNorm with a learned weight over rows of C values: out = inp * rstd * weight,
  // rstd = 1 / sqrt(mean(inp^2) + eps). For QK-norm per head pass q as R = L*H rows of
  // C = Dh (the weight (Dh) is shared by all heads).
  // out: (R, C), rstd: (R) or NULL, inp: (R, C), weight: (C)
  tsr_status (*rmsnorm_forward)(const kernels_backend *kb, float *out, float *rstd, const float *inp,
                                const float *weight, int R, int C, float eps);
  // dinp overwritten; dweight += sum over rows of dout * inp * rstd.
  // dinp: (R, C), dweight: (C), dout: (R, C), inp: (R, C), weight: (C), rstd: (R)
  tsr_status (*rmsnorm_backward)(const kernels_backend *kb, float *dinp, float *dweight,
                                 const float *dout, const float *inp, const float *weight,
                                 const float *rstd, int R, int C);

  // ---- adaLN modulation (per clip) -----------------------------------------------
  // The per-clip vectors (shift, scale, gate) are rows of a (C, mstride) array, so they can
  // point into the adaLN linear's output (C, 6*D) directly: clip c's vector is
  // shift[c * mstride + 0 .. D). mstride >= D. Their gradients use the same layout.
  //
  // out = inp * (1 + scale[c]) + shift[c] for every token of clip c.
  // out: (L, D), inp: (L, D), shift/scale: (C, mstride), cu_seqlens: (C + 1) int32
  tsr_status (*modulate_forward)(const kernels_backend *kb, float *out, const float *inp,
                                 const float *shift, const float *scale, int mstride,
                                 const int32_t *cu_seqlens, int n_clips, int L, int D);
  // dinp = dout * (1 + scale[c]); dshift[c] = sum over clip c's tokens of dout;
  // dscale[c] = sum of dout * inp. All overwritten (activation gradients); a clip with no
  // tokens gets zeros.
  // dinp: (L, D), dshift/dscale: (C, mstride), dout: (L, D), inp: (L, D), scale: (C, mstride)
  tsr_status (*modulate_backward)(const kernels_backend *kb, float *dinp, float *dshift,
                                  float *dscale, const float *dout, const float *inp,
                                  const float *scale, int mstride, const int32_t *cu_seqlens,
                                  int n_clips, int L, int D);
  // Gated residual: out = res + gate[c] * inp (out may equal res).
  // out: (L, D), res: (L, D), inp: (L, D), gate: (C, mstride)
  tsr_status (*gate_residual_forward)(const kernels_backend *kb, float *out, const float *res,
                                      const float *inp, const float *gate, int mstride,
                                      const int32_t *cu_seqlens, int n_clips, int L, int D);
  // dinp = gate[c] * dout; dgate[c] = sum over clip c's tokens of dout * inp (both
  // overwritten). The gradient to res is dout itself.
  // dinp: (L, D), dgate: (C, mstride), dout: (L, D), inp: (L, D), gate: (C, mstride)
  tsr_status (*gate_residual_backward)(const kernels_backend *kb, float *dinp, float *dgate,
                                       const float *dout, const float *inp, const float *gate,
                                       int mstride, const int32_t *cu_seqlens, int n_clips, int L,
                                       int D);

  // ---- 3D rotary position embedding ----------------------------------------------
  // Split of the head dimension (as in Wan 2.1): Dh even; d_h = d_w = 2 * (Dh / 6)
  // (integer division), d_t = Dh - d_h - d_w. The Dh/2 rotation pairs are the adjacent
  // elements (2p, 2p+1); pairs [0, d_t/2) rotate by the time position t, the next d_h/2
  // pairs by the row y, the last d_w/2 by the column x. Inside a group of width d_g the
  // j-th pair has frequency theta^(-2j / d_g) and angle = position * frequency (computed
  // in double). Rotation: (a, b) -> (a cos - b sin, a sin + b cos).
  // out: (L, H, Dh), inp: (L, H, Dh) (out may equal inp), pos: (L, 3) int32 (t, y, x)
  tsr_status (*rope_forward)(const kernels_backend *kb, float *out, const float *inp,
                             const int32_t *pos, int L, int H, int Dh, float theta);
  // The inverse rotation: dinp = R^T dout. dinp: (L, H, Dh), dout: (L, H, Dh), pos: (L, 3)
  tsr_status (*rope_backward)(const kernels_backend *kb, float *dinp, const float *dout,
                              const int32_t *pos, int L, int H, int Dh, float theta);

  // ---- activations ---------------------------------------------------------------
  // GELU, tanh approximation (PyTorch approximate='tanh'):
  // y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). out, inp: (n)
  tsr_status (*gelu_forward)(const kernels_backend *kb, float *out, const float *inp, size_t n);
  // dinp = gelu'(inp) * dout. dinp, dout, inp: (n)
  tsr_status (*gelu_backward)(const kernels_backend *kb, float *dinp, const float *dout,
                              const float *inp, size_t n);
  // SiLU y = x / (1 + exp(-x)). out, inp: (n)
  tsr_status (*silu_forward)(const kernels_backend *kb, float *out, const float *inp, size_t n);
  tsr_status (*silu_backward)(const kernels_backend *kb, float *dinp, const float *dout,
                              const float *inp, size_t n);

  // ---- conditioning --------------------------------------------------------------
  // Sinusoidal timestep embedding (DiT): half = dim/2, f_j = exp(-ln(max_period) j / half),
  // out[i] = [cos(t_i f_0..half-1), sin(t_i f_0..half-1)], a last zero column if dim is odd.
  // t is used as given (scale it, e.g. by 1000, before). Computed in double.
  // out: (n, dim), t: (n)
  tsr_status (*timestep_embedding)(const kernels_backend *kb, float *out, const float *t, int n,
                                   int dim, float max_period);
  // Row gather (class labels): out[i] = table[ids[i]]. out: (n, D), table: (V, D), ids: (n) int32
  tsr_status (*embedding_forward)(const kernels_backend *kb, float *out, const float *table,
                                  const int32_t *ids, int n, int V, int D);
  // dtable[ids[i]] += dout[i], in order of i. dtable: (V, D), dout: (n, D), ids: (n)
  tsr_status (*embedding_backward)(const kernels_backend *kb, float *dtable, const float *dout,
                                   const int32_t *ids, int n, int V, int D);

  // ---- attention over packed clips -----------------------------------------------
  // q, k, v, out: (L, H, Dh) (= (L, D) activations); lse: (L, H), the natural log of the
  // softmax denominator of each query row (in units of the scaled scores), token-major
  // like every activation so a CP chunk of tokens is a contiguous slice. scale is the
  // softmax scale (1/sqrt(Dh) for standard attention). Each query attends
  // bidirectionally to every key of its own clip only. Tiled online softmax: memory is
  // O(threads * tile * Dh), never (L x L).
  //
  // Full attention (one rank holds whole clips): out, lse overwritten.
  tsr_status (*attention_forward)(const kernels_backend *kb, float *out, float *lse, const float *q,
                                  const float *k, const float *v, const int32_t *cu_seqlens,
                                  int n_clips, int L, int H, int Dh, float scale);
  // dq, dk, dv overwritten; recomputes the scores tile by tile from q, k, lse and
  // delta = rowsum(dout * out). dq, dk, dv, dout, q, k, v, out: (L, H, Dh), lse: (L, H)
  tsr_status (*attention_backward)(const kernels_backend *kb, float *dq, float *dk, float *dv,
                                   const float *dout, const float *q, const float *k,
                                   const float *v, const float *out, const float *lse,
                                   const int32_t *cu_seqlens, int n_clips, int L, int H, int Dh,
                                   float scale);
  // Partial attention for ring attention: Lq local queries against one block of Lk
  // keys/values. Clip c's queries [cu_q[c], cu_q[c+1]) attend to the block's keys
  // [cu_k[c], cu_k[c+1]) only. out is normalised over this block's keys and lse is this
  // block's log-sum-exp; a query whose clip has no key in the block gets out = 0 and
  // lse = -INFINITY. Combine blocks with attention_merge.
  // out: (Lq, H, Dh), lse: (Lq, H), q: (Lq, H, Dh), k, v: (Lk, H, Dh),
  // cu_q, cu_k: (C + 1) int32 (cu_q[C] == Lq, cu_k[C] == Lk)
  tsr_status (*attention_partial_forward)(const kernels_backend *kb, float *out, float *lse,
                                          const float *q, const float *k, const float *v,
                                          const int32_t *cu_q, const int32_t *cu_k, int n_clips,
                                          int Lq, int Lk, int H, int Dh, float scale);
  // Merges partial b into the accumulator a, exactly (up to rounding):
  // lse = log(exp(lse_a) + exp(lse_b)), out_a = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b.
  // -INFINITY lse (empty partial) is handled; merging in any order gives the full result.
  // out_a: (L, H, Dh) updated, lse_a: (L, H) updated, out_b: (L, H, Dh), lse_b: (L, H)
  tsr_status (*attention_merge)(const kernels_backend *kb, float *out_a, float *lse_a,
                                const float *out_b, const float *lse_b, int L, int H, int Dh);
  // delta = rowsum over Dh of dout * out (computed in double), the D_i of the backward.
  // delta: (L, H), dout, out: (L, H, Dh)
  tsr_status (*attention_delta)(const kernels_backend *kb, float *delta, const float *dout,
                                const float *out, int L, int H, int Dh);
  // Backward of one K/V block given the FINAL lse and delta of the local queries:
  // with P = exp(scale q.k - lse), dS = P * (dout.v - delta):
  // dq += scale dS k, dk += scale dS^T q, dv += P^T dout — all three ACCUMULATED (dq over
  // the blocks of the ring, dk/dv are the block's gradients travelling with it).
  // dq may be NULL; dk and dv are given together or both NULL (same for attention_backward).
  // dq: (Lq, H, Dh), dk, dv: (Lk, H, Dh), dout, q: (Lq, H, Dh), k, v: (Lk, H, Dh),
  // lse, delta: (Lq, H), cu_q, cu_k: (C + 1)
  tsr_status (*attention_partial_backward)(const kernels_backend *kb, float *dq, float *dk,
                                           float *dv, const float *dout, const float *q,
                                           const float *k, const float *v, const float *lse,
                                           const float *delta, const int32_t *cu_q,
                                           const int32_t *cu_k, int n_clips, int Lq, int Lk, int H,
                                           int Dh, float scale);

  // ---- loss ------------------------------------------------------------------------
  // Weighted per-clip squared error: sse[c] = sum over clip c's local tokens and D values
  // of (pred - target)^2 (double accumulation), loss[0] = sum_c weight[c] * sse[c].
  // For the objective of DESIGN.md (mean over B clips of each clip's mean) use
  // weight[c] = 1 / (B * T_c * D) with T_c the clip's total token count, so CP chunks
  // and microbatches of one global batch sum to the global loss (see kernels_mse_weight).
  // loss: (1), sse: (C) or NULL, pred, target: (L, D), weight: (C)
  tsr_status (*mse_forward)(const kernels_backend *kb, float *loss, float *sse, const float *pred,
                            const float *target, const float *weight, const int32_t *cu_seqlens,
                            int n_clips, int L, int D);
  // dpred = 2 * weight[c] * (pred - target) (overwritten). dpred, pred, target: (L, D)
  tsr_status (*mse_backward)(const kernels_backend *kb, float *dpred, const float *pred,
                             const float *target, const float *weight, const int32_t *cu_seqlens,
                             int n_clips, int L, int D);

  // ---- optimizer ---------------------------------------------------------------------
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
};

// The CPU backend (fp32, OpenBLAS, OpenMP); a static object, never freed.
const kernels_backend *kernels_cpu(void);
// Threads of the CPU backend (OpenMP regions and OpenBLAS GEMMs); n <= 0 keeps the
// defaults (OMP_NUM_THREADS / all cores). Results do not depend on it (see Determinism).
void kernels_cpu_set_threads(int n);

// Clipping factor as torch.nn.utils.clip_grad_norm_: norm = sqrt(total_sumsq);
// returns min(1, max_norm / (norm + 1e-6)) in float; max_norm <= 0 means no clipping (1).
float kernels_clip_scale(double total_sumsq, float max_norm);

// Loss weight of a clip for the objective "mean over n_batch_clips clips of each clip's
// mean squared error": 1 / (n_batch_clips * clip_tokens * D), computed in double.
float kernels_mse_weight(int n_batch_clips, int64_t clip_tokens, int D);

#endif
