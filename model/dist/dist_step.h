// model/dist/dist_step.h — one global batch of a plan, executed on this rank (docs/dist.md
// "One global batch").
//
// The plan (sched/plan.h) lists waves; in each wave this rank is in one aligned group of
// k ranks at place p. For every clip of that group the rank builds chunk p of the clip
// (model/dist/ring_attention.h ring_chunk: contiguous, the first L % k chunks one token
// longer; a masked clip of a ring group under train.placement = blockwise: its placement's
// segments, dist_step_placed below), the rectified-flow inputs of exactly those tokens (model/objective.h: t,
// noise, label dropout and positions depend only on (seed, step, clip id, token index)),
// and runs forward and backward with ring or Ulysses attention across the group (the plan
// group's mode, sched/cost.h), accumulating the
// parameter gradients. Because the loss is a sum over tokens with per-clip weights
// (kernels_mse_weight with the batch's clip count), the sum over ranks of their local
// losses and gradients is the batch's loss and gradient for ANY plan: the same, up to
// floating-point reassociation, for static or dynamic plans and any world size.
//
// Gradients are summed over the world (all ranks) in buckets (dit_get_bucket): in a rank's
// last wave, each bucket's non-blocking all-reduce (or reduce-scatter: dist_step_set_shard)
// starts as soon as backward has passed it; dist_step_reduce starts any left (ranks idle at the end), waits for all of them and
// sums the loss.
#ifndef TESSERA_MODEL_DIST_STEP_H
#define TESSERA_MODEL_DIST_STEP_H

#include <stdint.h>
#include "comm/comm.h"
#include "core/err.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/dit.h"
#include "sched/plan.h"

// A clip of the global batch, indexed by its batch index in the plan.
typedef struct {
  int64_t id;             // clip id: the RNG key of its noise and time
  int T, H, W;            // token grid
  int label;              // class id, or -1 for none
  const void *tokens;     // (T*H*W, P) host memory: the whole clip (e.g. a mapped shard)
  kernels_tokens tokens_dtype;  // the store's dtype (0: uint8 pixels)
  const void *text;       // (text_tokens, text_dim) host memory: the clip's caption
                          // embedding, given whole to every chunk (NULL: none)
  int text_tokens;
  kernels_tokens text_dtype;
} dist_clip;

typedef struct dist_step dist_step;

// Work buffers for waves of at most max_tokens tokens and max_clips clips on this rank,
// computing on the model's backend and communicating through cb (comm/comm.h), whose
// memory space must be the compute backend's (TSR_EINVAL naming both otherwise). The
// world's group set must exist (comm_groups_init).
tsr_status dist_step_create(dist_step **ds, dit_model *m, const comm_backend *cb,
                            const dit_config *mc, const train_config *tc, int max_tokens,
                            int max_clips);
void dist_step_free(dist_step **ds);
// The null caption of every wave from now on (train.null_caption; model/objective.h
// objective_set_null_caption): emb (tokens, text_dim) fp32 host memory, the caller's, alive
// while ds runs; NULL: none.
void dist_step_set_null_caption(dist_step *ds, const float *emb, int tokens);

// Runs this rank's part of plan p for the batch `clips` (nclips, the plan's indices) at
// training step `step`: ACCUMULATES parameter gradients into the model and adds this
// rank's share of the batch loss to *loss (each wave's loss stays on the backend; they
// reach the host together after the last wave, summed in wave order). *waves (may be NULL) receives the number of
// waves in which this rank ran clips. Collective over each wave's group.
tsr_status dist_step_run(dist_step *ds, const plan *p, const dist_clip *clips, int nclips,
                         int64_t step, double *loss, int *waves);

// Forward only, for validation: this rank's part of plan p for `clips` (nclips), with the
// objective's inputs made from config `tc` at key step `step` (the caller's choice of t
// distribution and noise keys: model/train/val.c), and no gradient. sse[i] (nclips, host)
// += this rank's sum over its chunk of batch clip i of the squared error of the
// prediction against the target v (the kernels' mse_forward, per clip). Summed over the
// ranks (by the caller), it is clip i's whole squared error for any plan. Collective over
// each wave's group (ring attention), nothing over the world.
tsr_status dist_step_eval(dist_step *ds, const plan *p, const dist_clip *clips, int nclips,
                          const train_config *tc, int64_t step, double *sse);

// ZeRO stage 2 (model/train/zero.h): the gradients are reduce-scattered over the `world`
// ranks instead of all-reduced, bucket [offset, offset + numel) into shard + offset / world
// (numel / world floats: this rank's slice of the sum). Every bucket must split into equal
// slices (dit_config.shard_ranks). With a model of dit_create_bucket_grads (no whole gradient
// buffer) the buckets of EVERY wave are reduce-scattered as the backward passes them, from
// two bucket buffers in turn (one filling while the other's reduce-scatter runs), and summed
// into the shard (zeroed at each dist_step_run); a rank idle in a wave takes part with zero
// buckets, so every rank makes the same collectives in the same order (docs/dist.md "ZeRO").
// Otherwise, as the all-reduce: in the last wave, from the whole gradient buffer.
tsr_status dist_step_set_shard(dist_step *ds, float *shard, int world);

// ZeRO stage 3 (after dist_step_set_shard, with a model of dit_create_sharded): the model's
// weights are gathered bucket by bucket from every rank's shard of the fp32 masters (`shard`,
// the same layout as the gradient's; backend memory, the caller's, read at every wave) into
// two bucket-sized slots (and their act-dtype copies): the model's weight hook waits for the
// bucket it asks for and starts the world all-gather of the one it will ask for next, which
// runs while this one computes. The slots are refilled at each step's and each evaluation's
// first wave (the optimizer changed the shard). Every wave of a plan runs the same sequence
// of needs on every rank, the forward's (embeddings, blocks 0 .. depth - 1, final layer) then
// the backward's (the reverse), an idle rank included, so that the world's gathers and
// reduce-scatters are issued in the same order everywhere (docs/dist.md "ZeRO").
tsr_status dist_step_set_weights(dist_step *ds, const float *shard);

// train.placement = blockwise or a pinned kind under a mask (model/config.h): a masked clip
// of a ring group of k > 1 ranks is held as sched/placement.h's placement_for places it
// (cost_mask.pin: config_cost_pin; each rank its
// segments' tokens, in runs: objective_device_build_runs) and its attention runs through
// model/dist/placed_attention.h; everything else of the step is as for the ring's chunks.
// Every clip of such a group must have the same frame grid (H x W tokens).
int dist_step_placed(const dit_config *mc, const train_config *tc);
// The tokens a rank may hold in one wave for a planner's limit of mem_tokens: a placement
// puts up to PLACE_HOLD_SLACK x ceil(L / k) tokens of a clip on a rank (sched/placement.h),
// so with one mem_tokens + mem_tokens / 20; without, mem_tokens. dist_step_create's
// max_tokens.
int64_t dist_step_placed_tokens(const dit_config *mc, const train_config *tc, int64_t mem_tokens);
// The K/V bytes this rank's placed forwards received in the last dist_step_run (*got,
// counted by the communication layer, comm_alltoall_received: the MPI and staged backends)
// and the placements' count of them (*plan: each forward's recv of this rank, summed over
// its group's clips, times 2 H Dh act bytes).
void dist_step_placed_kv(const dist_step *ds, int64_t *got, int64_t *plan);

// Completes the sum of the model's gradients over every rank of the world (in place; with
// dist_step_set_shard into the shard) and sums *loss. Must follow every dist_step_run.
tsr_status dist_step_reduce(dist_step *ds, double *loss);

#endif
