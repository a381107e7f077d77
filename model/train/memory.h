// model/train/memory.h — the trainer's memory model in bytes, per rank (docs/train.md,
// "Memory").
//
// What one rank of `tessera train` holds, for microbatches of at most L tokens (the
// planner's per-rank limit, train.mem_tokens) and C = min(global_batch, L) clips, counted
// from the code that allocates it (one formula each: dit_memory_bytes for the model,
// objective_device_bytes for the inputs, ring_/ulysses_attention_index_bytes and _work_bytes
// for CP attention):
//   weights      fp32 master weights + their act-dtype working copy (bf16 runs)
//   grads        fp32 gradients
//   optimizer    AdamW m and v + EMA weights, fp32
//   (train.zero >= 1: the optimizer as this rank's shards of 1/ranks each, plus a shard of
//   the masters and of the gradient and a bucket-sized gather buffer; stage 2 without the
//   whole gradient: its shard, two bucket buffers and their slices; `zero`, `shard` below)
//   activations  the model's activation arena for L tokens: every block's buffers, or with
//                model.recompute only the block inputs plus one block's buffers
//   inputs       the microbatch's inputs on the backend (x_t, target, tokens, positions)
//   ring         communication workspace: the index arrays of every CP size a rank may run
//                (2, 4, ... ranks), and one workspace (model/dist/cp_workspace.h) shared
//                by all of them, which grows to the most any of them asks: a ring's blocks
//                of L tokens, and when train.cp_mode allows them a Ulysses group's head-
//                layout tensors and staging (the group's k L tokens for ceil(H/k) heads), a
//                hybrid group's Ulysses block and ring (the most over the u a node may
//                have: an upper bound)
//   placed       train.placement = blockwise under a mask (model/dist/dist_step.h): the
//                buffers of one placed-attention executor per CP size > 1, each bounded
//                by every peer's rows both ways (placed_attention_work_bytes); and every
//                buffer above made for Lh = L + L / 20 tokens (dist_step_placed_tokens: a
//                placement may put 5% more than L on a rank), the inputs' per-clip arrays
//                for Lh + C runs
//   attention    attention workspace outside the backend's allocations: the backward's
//                delta, L x heads fp32 (host malloc on the CPU, the CUDA scratch buffer)
//   reserve      on a device, runtime memory no allocation of ours shows: 1 GiB (cuBLASLt
//                and cuDNN workspaces, NCCL buffers per communicator, fragmentation);
//                0 on the CPU
// With train.act_bytes_token > 0 (bytes per token measured on the device: bench/gpu/run.sh's
// memory report, the backend's peak in a step less the parameter state, over the tokens)
// activations = that x L, and inputs and attention are 0 (the measurement holds them and
// whatever else a step takes per token: cuDNN's workspace, the backend's scratch).
// The first six go through the backend's alloc; train_memory_counter measures their
// high-water mark, and tests/train/memory.sh holds the model to it.
#ifndef TESSERA_MODEL_TRAIN_MEMORY_H
#define TESSERA_MODEL_TRAIN_MEMORY_H

#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/train/data.h"

#define TRAIN_MEMORY_DEVICE_RESERVE ((size_t)1 << 30)
// The largest train.mem_tokens the trainer takes (trainer_setup's int-sized buffers).
#define TRAIN_MEMORY_MAX_TOKENS ((int64_t)INT32_MAX / 4)

typedef struct {
  int64_t tokens;        // L
  int64_t clips;         // C
  int ring_sizes;        // CP sizes > 1 counted in `ring` (log2 of the ranks)
  size_t weights, grads, optimizer, activations, inputs, ring, placed, attention, reserve;
  // train.val_clips > 0: the forward-only prediction and per-clip errors of validation;
  // train.sample_every > 0: the sampling model and the sampler's buffers (an upper bound:
  // a sample clip has at most mem_tokens / 2 tokens, model/train/samples.c)
  size_t validation, samples;
  size_t allocated;      // what goes through the backend's alloc: all but attention, reserve
  size_t total;          // all of it
  // Activation bytes per token, per DiT block, without recomputation, with whole blocks
  // recomputed (model.recompute = 1) and with the cheap layers recomputed (= 2): the slope
  // of the arena in L, from the layout; for reports and docs.
  double act_token_block, act_token_block_recompute, act_token_block_cheap;
  int measured;          // 1: activations from train.act_bytes_token
  // lora.rank > 0: the adapters' floats (model/lora.h dit_lora_memory). The base is frozen:
  // weights add the adapters, grads and optimizer are the adapters' only, activations add
  // the adapters' kept products. With train.zero (1, 2) the adapters' state is sharded, the
  // base whole: shard below is the adapters'.
  size_t lora_params;
  // train.zero >= 1 (model/train/zero.h): the bytes of one fp32 shard of the state (S floats
  // of the padded flat buffer / ranks). weights add the masters' shard to the whole working
  // weights; grads the gradient's shard to the whole buffer (stage 1) or are the shard, two
  // buckets and their slices (stages 2 and 3); optimizer is 3 shards (m, v, EMA) and one
  // bucket (checkpoints put the sharded sets together in it). Stage 3: weights are the
  // masters' shard and two slots of the largest bucket, fp32 and act copy (the bucket
  // computing and the next, prefetched: model/dist/dist_step.h dist_step_set_weights).
  int zero;
  size_t shard;
} train_memory;

// The model for the config (its act dtype: train.precision), `ranks` ranks (the CP sizes
// up to it), L = tokens, on a device (device != 0: the reserve counts) or the CPU.
// value_bytes: bytes of one stored token value as uploaded (store_dtype_size: 1 for pixels,
// 2 or 4 for bf16 or f32 latents; below 1 counts as 1).
tsr_status train_memory_model(const dit_config *mc, const train_config *tc, int device,
                              int ranks, int64_t tokens, int value_bytes, train_memory *out);
// The largest L <= max_tokens whose total fits `capacity` bytes (and *out at it): what
// train.mem_tokens = 0 derives. TSR_EINVAL saying what takes the memory when not even one
// token fits.
tsr_status train_memory_tokens(const dit_config *mc, const train_config *tc, int device,
                               int ranks, int value_bytes, size_t capacity, int64_t max_tokens,
                               int64_t *tokens, train_memory *out);
// The memory a rank may use: mem_bytes when > 0 (--mem-bytes), else the backend's free
// memory at start (kb->mem_info): a device's as is; host memory, shared by the processes of
// a node, halved (room for the store's page cache and the rest of the process) and divided
// by `sharing` processes. *source: "--mem-bytes", "device free memory" or "host memory".
tsr_status train_memory_capacity(const kernels_backend *kb, int64_t mem_bytes, int sharing,
                                 size_t *capacity, const char **source);
// The trainer's per-rank token limit from memory, the same on every rank of the job: with
// tc->mem_tokens == 0 the largest L that fits (train_memory_tokens; the least over the
// ranks), written to tc->mem_tokens; with an explicit tc->mem_tokens, a check that it fits
// (TSR_EINVAL naming what takes the memory and what to do otherwise). *m: the model at the
// limit; *capacity, *source: train_memory_capacity's. Collective (comm/comm.h).
// On the CPU without --mem-bytes, L is also at most batch_tokens (> 0; train_batch_tokens):
// no microbatch holds more than a whole batch, and the host's memory is no budget to fill
// (half of it, allocated and touched: 11.4 GB for the tiny model on a 23 GB machine).
tsr_status train_memory_limit(train_config *tc, const dit_config *mc, const kernels_backend *kb,
                              int value_bytes, int64_t mem_bytes, int64_t batch_tokens,
                              train_memory *m, size_t *capacity, const char **source);
// The most tokens one global batch of `batch` clips of the store can hold: the sum of its
// `batch` longest clips (all of them if it has fewer).
int64_t train_batch_tokens(const data_store *d, int64_t batch);
// "12.3 GiB (weights 1.0 GiB, ...)" into buf.
void train_memory_format(const train_memory *m, char *buf, size_t n);

// A backend that counts: every entry of `inner`, with alloc and free recording the bytes
// held now and at most (the requested sizes). Use &c->kb as the backend; c must outlive it.
typedef struct {
  kernels_backend kb;            // first: the entries receive &kb
  const kernels_backend *inner;
  size_t live, peak;
  void **ptrs;                   // (n) live allocations and their sizes
  size_t *sizes;
  size_t n, cap;
} train_memory_counter;
void train_memory_counter_init(train_memory_counter *c, const kernels_backend *inner);
void train_memory_counter_free(train_memory_counter *c);

#endif
