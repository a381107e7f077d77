// model/train/zero.h — ZeRO: the optimizer state sharded over the ranks of the job
// (docs/dist.md "ZeRO", train.zero).
//
// Layout. A run with train.zero >= 1 makes its model with dit_config.shard_ranks = world, so
// every gradient bucket of the flat buffer (dit_get_bucket: [offset, offset + numel)) is a
// multiple of 16 * world floats. Rank r owns slice r of every bucket, flat elements
// [offset + r s, offset + (r + 1) s) with s = numel / world, held at shard offset
// offset / world: its shard is S = n_params / world floats, the slices in memory order.
// The collectives of the comm table then take equal slices of a bucket in place: the
// gradient reduce-scatter (stage 2) sends the bucket and receives the slice, the weights'
// all-gather sends the slice and receives the bucket.
//
// The shard is over ALL ranks of the world, not a CP group: Dynamic-CP's groups change from
// wave to wave, but every rank issues the same world collectives in the same order (bucket
// order; at stage 2 for every wave of the plan, idle or not: model/dist/dist_step.h), so
// they are in lockstep whatever the plan.
//
// Per rank: every stage holds the fp32 master weights, the gradient, AdamW m and v and the
// EMA as shards (S floats each); stages 1 and 2 also the model's whole weights (the working
// copy forward and backward read). Stage 1 keeps the whole gradient buffer too (backward
// accumulates the step's waves into it, all-reduced once); stages 2 and 3 have none
// (dit_create_bucket_grads, dit_create_sharded): two bucket buffers, each wave's buckets
// reduce-scattered and summed into the shard. Stage 3 has no whole weights either: each
// bucket is gathered from the masters' shards before use (model/dist/dist_step.h).
#ifndef TESSERA_MODEL_TRAIN_ZERO_H
#define TESSERA_MODEL_TRAIN_ZERO_H

#include <stdint.h>

#include "comm/comm.h"
#include "core/err.h"
#include "kernels/kernels.h"
#include "model/dit.h"

typedef struct {
  int stage;                 // train.zero: 1, 2 or 3 (0: no layout is made)
  int world, rank;
  int64_t n;                 // the model's flat floats (dit_num_params, padded)
  int64_t shard;             // S = n / world
  int n_buckets;
  int64_t *lo, *len, *at;    // (n_buckets) this rank's slice of bucket b: flat [lo, lo + len),
                             // at shard offset at (the ckpt_shard ranges, checkpoint.h)
} zero_layout;

// The layout of model m (made with shard_ranks = world) for this rank. TSR_EINVAL naming the
// bucket when one is not a multiple of 16 * world floats (the model was not made for it).
tsr_status zero_layout_make(zero_layout *z, dit_model *m, int stage, int world, int rank);
// The layout of a flat buffer of n floats as ONE bucket [0, n): a LoRA run's adapters (model/
// lora.h, made with lora_config.shard_ranks = world), whose state is sharded the same way.
// TSR_EINVAL when n is not a multiple of 16 * world floats.
tsr_status zero_layout_flat(zero_layout *z, int64_t n, int stage, int world, int rank);
void zero_layout_free(zero_layout *z);

// The floats of the largest bucket (a buffer that holds any one bucket whole).
size_t zero_largest_bucket(const zero_layout *z);
// AdamW's segment table over the shard (kernels adamw_update_multi): every tensor's part in
// each of this rank's slices, at its shard offset, decaying as decays(tensor) says (1/0);
// *segs: host memory (malloc: free it), *n_segs of them.
tsr_status zero_segments(const zero_layout *z, const dit_model *m,
                         int (*decays)(const dit_tensor *t), kernels_param_segment **segs,
                         int *n_segs);
// The same over another table of tensors of m: n_tensors of them, info(m, i) (the adapters':
// dit_lora_num_tensors, dit_lora_tensor_info), in table order (adamw_update_multi wants them
// by increasing offset: sort them when the table is not in buffer order, as the adapters'
// is not).
tsr_status zero_segments_of(const zero_layout *z, const dit_model *m, int n_tensors,
                            const dit_tensor *(*info)(const dit_model *m, int i),
                            int (*decays)(const dit_tensor *t), kernels_param_segment **segs,
                            int *n_segs);
// shard (S) = this rank's slices of full (n), on the backend: the gradient after a stage-1
// all-reduce, the master weights after dit_init or a checkpoint load.
tsr_status zero_take(const zero_layout *z, const kernels_backend *kb, float *shard,
                     const float *full);
// full (n) = every rank's shard (S) put back in place: one all-gather per bucket over the
// world, through cb. Collective.
tsr_status zero_gather(const zero_layout *z, const comm_backend *cb, float *full,
                       const float *shard);
// dst (bucket b's numel floats) = bucket b of every rank's shard put together: one
// all-gather over the world. Collective.
tsr_status zero_gather_bucket(const zero_layout *z, const comm_backend *cb, int b, float *dst,
                              const float *shard);
// *out = the sum over the world of the shards' sums of squares (the global norm squared of
// the flat buffer). Collective.
tsr_status zero_sumsq(const zero_layout *z, const kernels_backend *kb, const float *shard,
                      double *out);

#endif
