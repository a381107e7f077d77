// model/dit.h — the diffusion transformer: parameters, forward and backward over a
// packed microbatch of clips (docs/model.md has every formula).
//
// Architecture (weights stored (in, out): y = x W + b, PyTorch's nn.Linear transposed):
//   x_embed: tokens (L, P) -> h (L, D)                    P = pt*ph*pw*channels
//   conditioning per clip: c = t_embed.fc2(SiLU(t_embed.fc1(sinusoid(1000 t, freq_dim))))
//                              + y_embed[label] (if num_classes > 0);  cs = SiLU(c)
//   block i (adaLN-Zero): (shift1, scale1, gate1, shift2, scale2, gate2) = cs adaln + b
//     a = LN(h) (1 + scale1) + shift1;  q = a Wq + bq, k = a Wk + bk, v = a Wv + bv, (L, H, Dh)
//     (three (D, D) tensors q, k, v rather than one fused qkv: attention reads each of q,
//     k, v contiguous, and the checkpoints and diffusers' names keep them apart)
//     q = RoPE3D(RMSNorm(q) q_norm), k = RoPE3D(RMSNorm(k) k_norm)
//     h = h + gate1 * proj(attention(q, k, v within each clip))
//     m = LN(h) (1 + scale2) + shift2;  h = h + gate2 * fc2(GELU_tanh(fc1(m)))
//   final: (shift, scale) = cs final.adaln + b;  out = (LN(h)(1 + scale) + shift) final.linear
// adaLN weights and final.linear are zero at init (adaLN-Zero).
// model.family = wan: Wan 2.1/2.2's transformer on the same code (a shared time_proj plus a
// learned modulation row per block, the head's rows added to c, QK RMSNorm over all heads,
// an affine LayerNorm before cross-attention, no null token); docs/model.md "The Wan family"
// has its tensors and every difference.
//
// Parameter tensors (names as in the safetensors checkpoints and the PyTorch reference,
// tools/reference/), in this order (dit_tensor_info); F = mlp_ratio * D, Dh = D / H:
//   x_embed.weight (P, D), x_embed.bias (D)
//   t_embed.fc1.weight (freq_dim, D), .bias (D); t_embed.fc2.weight (D, D), .bias (D)
//   y_embed.weight (num_classes + 1, D)                       only if num_classes > 0
//   blocks.{i}.adaln.weight (D, 6D), .bias (6D)
//   blocks.{i}.{q,k,v}.weight (D, D), .bias (D)
//   blocks.{i}.q_norm.weight (Dh), blocks.{i}.k_norm.weight (Dh)
//   blocks.{i}.proj.weight (D, D), .bias (D)
//   blocks.{i}.fc1.weight (D, F), .bias (F); blocks.{i}.fc2.weight (F, D), .bias (D)
//   final.adaln.weight (D, 2D), .bias (2D); final.linear.weight (D, P), .bias (P)
// with captions (model.text_dim > 0), after y_embed: text_embed.fc1.weight (text_dim, D),
//   .bias (D); text_embed.fc2.weight (D, D), .bias (D); text_null.weight (D) (tessera's
//   learned null token, not Wan's); and in each block after fc2: blocks.{i}.cross.norm.weight,
//   .bias (D) (Wan's affine LayerNorm only), blocks.{i}.cross.{q,k,v,proj}.weight (D, D),
//   .bias (D), blocks.{i}.cross.{q,k}_norm.weight (Dh, or D with Wan's norm over all heads)
// Wan's layout (model.family = wan) replaces adaln by blocks.{i}.modulation (6D) with a shared
// time_proj.weight (D, 6D), .bias (6D), and final.adaln by final.modulation (2D):
// model/params.c builds the table.
// All parameters live in one flat fp32 buffer in the backend's memory, gradients in a second
// buffer of the same layout, so optimizer, all-reduce and checkpoints see one array.
//
// Precision (docs/kernels.md "Dtypes"): activations are in the backend's act dtype
// (kb->act_dtype, fp32 or bf16) — every activation buffer, the batch's x and target, the
// prediction. Parameters (the fp32 MASTER weights), gradients and statistics are fp32.
// With bf16 activations the model also keeps a bf16 WORKING COPY of the weights, the one
// the linear layers read; dit_refresh_weights rounds the masters into it and must follow
// every write of dit_params (dit_init and the checkpoint loads call it). With fp32 the
// working copy is the masters themselves (no copy, nothing to refresh).
//
// Packed microbatch: clips are contiguous token ranges (cu_seqlens); every clip has its
// own t, label, RoPE positions and adaLN modulation, and attends only to itself (or, with
// dit_batch.attn_cu, to the other segments of its clip of attention). A clip
// may be a CP chunk of a longer clip: positions are then the chunk's true positions in
// the whole clip, and the attention hook (dit_set_attention) runs ring attention.
#ifndef TESSERA_MODEL_DIT_H
#define TESSERA_MODEL_DIT_H

#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "kernels/graph_cache.h"
#include "kernels/kernels.h"
#include "model/config.h"

// One microbatch. Every pointer is backend memory (kernels.h), shapes as noted.
typedef struct {
  int n_clips;                 // C
  int L;                       // tokens
  int max_len;                 // tokens of the longest clip (a larger bound is correct too, L
                               // always is): the attention entries size their plans by it
                               // (kernels.h max_len); at least L / C rounded up
  const int32_t *cu_seqlens;   // (C + 1) token offsets of the clips
  // Self-attention's clips when they are not the conditioning clips above: a clip of
  // attention then spans consecutive conditioning clips, its SEGMENTS (train.noise_per_chunk:
  // one a mask chunk, each with its own t; chunk-by-chunk sampling: the clean context at
  // t = 0 and the chunk being denoised). NULL: cu_seqlens (every clip attends to itself).
  // Each offset must also be one of cu_seqlens'; max_len bounds these clips' lengths.
  const int32_t *attn_cu;      // (A + 1) or NULL
  int attn_clips;              // A
  const int32_t *pos;          // (L, 3) (t, y, x) position of each token in its clip's grid
  const float *t;              // (C) [f32] diffusion time of each clip, in (0, 1)
  const int32_t *labels;       // (C) class ids, num_classes = "no label"; NULL: all "no label"
                               // (ignored when num_classes == 0)
  const void *x;               // (L, P) [act] model input (noisy tokens x_t)
  const void *target;          // (L, P) [act] regression target v = e - x0; NULL for inference
  const float *loss_weight;    // (C) [f32] per-clip loss weight (kernels_mse_weight); NULL
                               // for inference
  // captions (model.text_dim > 0; ignored otherwise): clip c's caption embedding is rows
  // [cu_text[c], cu_text[c+1]) of text; a clip with no rows (no caption, or dropped)
  // attends to the learned null token only
  int Lt;                      // caption tokens of all clips
  const int32_t *cu_text;      // (C + 1)
  const void *text;            // (Lt, text_dim) [act]
  // Chunk-by-chunk sampling (model/kvcache.h): NULL, or the cached keys and values of the
  // finished chunks that every clip's queries also attend to (clip c: the cache's branch c;
  // forward only, no segments); the chunk's own keys and values are stored in it.
  struct dit_kv_cache *kv;
} dit_batch;

typedef struct {
  const char *name;            // e.g. "blocks.0.qkv.weight"
  int ndim;
  int64_t shape[2];
  size_t offset, numel;        // in floats, into the flat parameter buffer
} dit_tensor;

typedef struct dit_model dit_model;

// Attention hook (ring attention across a CP group in multi-rank training). The default
// is the backend's attention_forward/backward over the batch's clips, with max_len
// kernels_attention_max_len(b->max_len, b->L). A recordable hook must pass the backend the
// same bound for every batch of equal L, n_clips and that rounded bound: recorded graphs
// are keyed by them (the ring at group size 1 derives it from the same clip lengths).
// out, lse, q, k, v, dq, dk, dv, dout: as kernels.h attention_* (lse [f32], the rest
// (L, H, Dh) [act]); b: the microbatch.
typedef struct {
  tsr_status (*forward)(void *ctx, const kernels_backend *kb, const dit_batch *b, void *out,
                        float *lse, const void *q, const void *k, const void *v, int H, int Dh,
                        float scale);
  tsr_status (*backward)(void *ctx, const kernels_backend *kb, const dit_batch *b, void *dq,
                         void *dk, void *dv, const void *dout, const void *q, const void *k,
                         const void *v, const void *out, const float *lse, int H, int Dh,
                         float scale);
  void *ctx;
  // 1 when the hook's calls for the coming forward/backward only queue backend entries (no
  // host work, no communication), so the model may record them as a graph (dit_graph_stats);
  // NULL: never (the ring's steps communicate)
  int (*recordable)(void *ctx);
} dit_attention;

// Creates a model for microbatches of at most max_tokens tokens and max_clips clips
// (activation buffers are sized for them). Parameters are zero until dit_init or a load.
tsr_status dit_create(dit_model **m, const dit_config *c, const kernels_backend *kb,
                      int max_tokens, int max_clips);
// As dit_create, with the base frozen: no gradient buffer (dit_grads NULL), a backward that
// computes no gradient of the model's own parameters (only the input gradients, and the
// adapters' of model/lora.h), dit_zero_grad a no-op and no gradient buckets. For LoRA
// training and for forward-only models (sampling): the gradients' memory and the weight-
// gradient GEMMs (a third of a linear's backward) are saved.
tsr_status dit_create_frozen(dit_model **m, const dit_config *c, const kernels_backend *kb,
                             int max_tokens, int max_clips);
// As dit_create_frozen, for a base that never changes (a LoRA run's, and its sampling
// model): with act-dtype activations other than fp32 the fp32 masters are kept only of the
// tensors the kernels read in fp32 (biases, norm weights, modulation rows, the label table:
// dit_reads_fp32); the linear layers' weights live in the act-dtype working copy alone, so
// a bf16 base takes 2 bytes a parameter instead of 6. It computes the same bits as
// dit_create_frozen. dit_params is then NULL: weights come in tensor by tensor
// (dit_put_tensor: what the checkpoint loads do) or from a model of the same kind
// (dit_copy_weights); dit_init refuses. With fp32 activations, or TESSERA_FROZEN_FP32=1 in
// the environment, it is dit_create_frozen.
tsr_status dit_create_frozen_base(dit_model **m, const dit_config *c, const kernels_backend *kb,
                                  int max_tokens, int max_clips);
// 1 when the kernels read tensor i in fp32 whatever the act dtype (dit_p): every tensor but
// the linear layers' weights (read through the act-dtype working copy).
int dit_reads_fp32(const dit_model *m, int i);
// Tensor i's weights from host (its numel fp32 values): into the fp32 masters where the
// model keeps them and into the act-dtype working copy. For any model with weights of its
// own (not dit_create_sharded).
tsr_status dit_put_tensor(dit_model *m, int i, const float *host);
// dst's weights (masters and working copy) = src's: two models of the same config and kind
// (dit_create_frozen_base of both, or neither), on one backend.
tsr_status dit_copy_weights(dit_model *dst, const dit_model *src);
// The XXH3 of every tensor's fp32 values as the last checkpoint load read them (tensor_sums:
// dit_num_tensors of them) and of the whole weights set (*all, what a checkpoint records as
// xxh3_weights): set by the loads of a model of dit_create_frozen_base without whole
// masters; dit_weight_sums returns NULL when none were set.
void dit_set_weight_sums(dit_model *m, const uint64_t *tensor_sums, uint64_t all);
const uint64_t *dit_weight_sums(const dit_model *m, uint64_t *all);
// As dit_create, without the whole gradient buffer (ZeRO stage 2, model/train/zero.h): each
// bucket's gradients go where dit_set_bucket_grads last put them (bucket-sized buffers of
// the caller, which zeroes them); dit_grads is NULL, dit_zero_grad a no-op; the buckets and
// their hook are as dit_create's.
tsr_status dit_create_bucket_grads(dit_model **m, const dit_config *c, const kernels_backend *kb,
                                   int max_tokens, int max_clips);
// A model of dit_create_bucket_grads: bucket i's gradients accumulate in g (its numel floats,
// backend memory) from now on. Set before the backward reaches the bucket.
void dit_set_bucket_grads(dit_model *m, int bucket, float *g);
// As dit_create_bucket_grads, without the whole weights either (ZeRO stage 3,
// model/train/zero.h): bucket b's fp32 master weights and act-dtype working copy are where
// dit_set_bucket_weights last put them (the same buffer with fp32 activations); dit_params
// is NULL, dit_init refuses (dit_init_range makes a shard), dit_refresh_weights is a no-op.
// Every forward and backward calls the weight hook (dit_set_weight_hook) with a bucket
// before it first reads that bucket's weights, in a fixed order: the forward depth + 1
// (the embeddings), depth, .., 1 (blocks 0 .. depth - 1), 0 (the final layer); the backward
// 0, 1, .., depth + 1, each call before the bucket's gradients are complete (its bucket hook).
tsr_status dit_create_sharded(dit_model **m, const dit_config *c, const kernels_backend *kb,
                              int max_tokens, int max_clips);
// A model of dit_create_sharded: bucket i's weights are p (numel floats [f32]) and w (numel
// [act]; p itself with fp32 activations), backend memory, until set again.
void dit_set_bucket_weights(dit_model *m, int bucket, float *p, void *w);
// fn(ctx, bucket) must make the bucket's weights available (dit_set_bucket_weights) before
// it returns; an error it returns ends the forward or backward. NULL: no calls.
void dit_set_weight_hook(dit_model *m, tsr_status (*fn)(void *ctx, int bucket), void *ctx);
void dit_free(dit_model **m);

const dit_config *dit_get_config(const dit_model *m);
int dit_num_tensors(const dit_model *m);
const dit_tensor *dit_tensor_info(const dit_model *m, int i);
// Index of a tensor by name, or -1.
int dit_find_tensor(const dit_model *m, const char *name);
size_t dit_num_params(const dit_model *m);
// The compute backend the model was created on (its memory holds every buffer below).
const kernels_backend *dit_backend(const dit_model *m);
float *dit_params(dit_model *m);  // (n_params) [f32] backend memory: the master weights
float *dit_grads(dit_model *m);   // (n_params) [f32] backend memory; NULL when frozen
// Rounds the master weights into the act-dtype working copy the kernels read (kb->cast).
// Call after writing dit_params (an optimizer step, a load); a no-op with fp32 activations.
tsr_status dit_refresh_weights(dit_model *m);
// (n_params) [act] backend memory: the working copy dit_refresh_weights writes, for an
// optimizer that stores it with the update (kernels adamw_update_multi's work); NULL when
// there is nothing to refresh (fp32 activations, a sharded model).
void *dit_weights_work(dit_model *m);

// Initialises parameters from `seed` (counter-based, core/rng.h): linear weights Xavier
// uniform, biases 0, embeddings N(0, 0.02), RMSNorm weights 1, adaLN and final.linear 0;
// then refreshes the working copy.
tsr_status dit_init(dit_model *m, uint64_t seed);
// host (n floats) = flat elements [lo, lo + n) of the parameters dit_init(seed) makes (the
// padding 0): a shard initialised without the whole model (counter-based, so any range).
void dit_init_range(const dit_model *m, uint64_t seed, size_t lo, size_t n, float *host);
tsr_status dit_zero_grad(dit_model *m);
void dit_set_attention(dit_model *m, const dit_attention *a);

// Forward. pred: (L, P) [act] backend memory or NULL (kept internally for backward). With
// a target, the loss sum_c loss_weight[c] * squared error of clip c goes to *loss (host
// double: a copy to the host, which waits for the backend) or, when loss is NULL, stays
// on the backend in *loss_dev ([f32] backend memory, may be NULL) so that a caller
// running several microbatches copies all their losses to the host at once.
tsr_status dit_forward(dit_model *m, const dit_batch *b, void *pred, double *loss);
tsr_status dit_forward_dev(dit_model *m, const dit_batch *b, void *pred, float *loss_dev);
// Tokens through the model's forwards so far (the sum of their batches' L): the work count
// of a sampler (tests/model/test_kvcache.c).
int64_t dit_forward_tokens(const dit_model *m);
// Backward of the last dit_forward (same batch, with target): ACCUMULATES into grads.
// Each dit_forward allows one dit_backward. With model.recompute = 1 each block is re-run
// from its kept input before its backward, with = 2 its token-local layers are re-run from
// its kept GEMM and attention outputs (bitwise the same activations either way).
tsr_status dit_backward(dit_model *m, const dit_batch *b);

// Bytes of activation memory dit_create allocated (for memory reports and benchmarks),
// the act-dtype working copy of the weights included.
size_t dit_activation_bytes(const dit_model *m);

// Recorded graphs: on a backend that records (kernels.h graph_*: CUDA with
// TESSERA_CUDA_GRAPHS=1), dit_forward_dev and dit_backward each run as one replayed graph
// per microbatch shape (its sizes and buffer pointers) from the second use of the shape on
// (the first runs eagerly and builds the libraries' plans; kernels/graph_cache.h keeps 8).
// Only with the backend's own attention or a hook that says it is recordable (the ring at
// group size 1), and for the backward no bucket hook: the ring's steps and the gradient
// all-reduce work on the host. A shape whose recording
// fails runs eagerly from then on, after one warning line. Replays compute what the eager
// run computes, bit for bit (tests/gpu/test_graphs.c). dit_set_graphs(m, 0) turns them off
// for this model; the stats count eager runs, recordings and replays.
void dit_set_graphs(dit_model *m, int on);
kgraph_stats dit_graph_stats(const dit_model *m);

// What dit_create allocates for config c, activations of dtype act, microbatches of
// max_tokens tokens and max_clips clips, without allocating: the same tensor table and
// activation layout (one formula; the trainer's memory model, model/train/memory.h).
typedef struct {
  size_t n_params;       // floats of the flat parameter buffer (tensors padded to 64 bytes)
  size_t params, grads;  // bytes: fp32 master weights, fp32 gradients
  size_t activations;    // bytes of the activation arena (recompute 1: block inputs + one
                         // block's buffers; 2: the kept GEMM/attention outputs of every
                         // block + one set of token-local buffers), the working copy of the
                         // weights excluded
  size_t act_weights;    // bytes of the act-dtype working copy of the weights (0 for fp32)
  size_t frozen_params;  // bytes of the fp32 masters dit_create_frozen_base keeps (params
                         // with fp32 activations)
  size_t largest_bucket; // floats of the largest gradient bucket (dit_get_bucket)
} dit_memory;
tsr_status dit_memory_bytes(const dit_config *c, kernels_dtype act, int64_t max_tokens,
                            int64_t max_clips, dit_memory *out);

// The tensor table of config c without a model (no buffers, no backend): what a conversion
// of a model too large for memory streams tensor by tensor (model/io/wan_convert.h).
// t[i] is dit_tensor_info(m, i) of a model of config c; dit_table_free frees it.
typedef struct {
  int n;                 // tensors
  dit_tensor *t;         // (n), the names owned by the table
  size_t n_params;       // floats of the flat buffer (dit_num_params)
  void *names;           // the names' storage
} dit_table;
tsr_status dit_table_make(const dit_config *c, dit_table *out);
void dit_table_free(dit_table *t);

// Number of parameters (sum of the tensors' numel). dit_num_params is the flat buffer's
// length, which is larger: every tensor starts on a 16-float (64-byte) boundary and the
// padding floats between tensors stay 0 (their gradients are always 0).
size_t dit_count_params(const dit_model *m);

// Gradient buckets, for an all-reduce that overlaps backward: contiguous ranges of the flat
// parameter/gradient buffer, in the order dit_backward completes them — bucket 0 the
// final layer, then blocks depth-1 .. 0, then the embeddings and conditioning (whose
// gradients collect contributions from every block). They cover the buffer once.
typedef struct {
  size_t offset, numel;  // in floats
} dit_bucket;
int dit_num_buckets(const dit_model *m);
dit_bucket dit_get_bucket(const dit_model *m, int i);
// fn(ctx, i) is called inside dit_backward as soon as bucket i's gradients of this
// backward are complete (NULL: no calls). The caller decides which backward is the last
// of a step; buckets come in index order.
void dit_set_bucket_hook(dit_model *m, void (*fn)(void *ctx, int bucket), void *ctx);

// dx: (max_tokens, P) [act] backend memory or NULL (the default). When set, dit_backward
// also writes dL/dx for the batch's L tokens into it (overwritten): gradient tests, guidance.
void dit_set_input_grad(dit_model *m, void *dx);

#endif
