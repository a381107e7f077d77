// model/train/step.h — the state of a training run and one optimizer step over a planned
// batch: objective, forward, backward across the ranks, gradient clipping, AdamW, EMA.
#ifndef TESSERA_MODEL_TRAIN_STEP_H
#define TESSERA_MODEL_TRAIN_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "core/err.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/dist/dist_step.h"
#include "model/dit.h"
#include "model/lora.h"
#include "model/train/data.h"
#include "model/train/options.h"
#include "model/train/zero.h"
#include "sched/sched.h"

typedef struct {
  dit_config mc;
  train_config tc;
  const kernels_backend *kb;     // set by the caller: the compute backend (its act dtype is
                                 // train.precision)
  const comm_backend *cb;        // set by the caller: ring exchange and gradient all-reduce
  dit_model *model;
  size_t n_params;               // what the optimizer trains: the adapters' floats with
                                 // lora.rank > 0 (dit_lora_num_params), else the model's
  data_split split;              // training and held-out clips (train.val_clips)
  float *adam_m, *adam_v, *ema;  // (n_params) backend memory each: of the adapters with LoRA;
                                 // with train.zero >= 1 this rank's shards (zero.shard)
  zero_layout zero;              // train.zero >= 1: the shard layout (model/train/zero.h)
  float *master, *gshard;        // train.zero >= 1: (zero.shard) the fp32 master weights and
                                 // the gradient of this rank's shard; NULL otherwise
  float *zero_buf;               // train.zero >= 1: (largest bucket) a bucket of a sharded set
  const float *zero_buf_set;     // put together (checkpoints): which set's shard it holds,
  int zero_buf_bucket;           // and which bucket
  const float *ema_whole;        // train.zero >= 1, while samples are made: the EMA put
                                 // together (train_ema_full), else NULL
  kernels_param_segment *adam_segs;  // (n_adam_segs) backend memory: train_adamw_segments
  int n_adam_segs;
  data_store *data;
  data_sampler sampler;
  int64_t step;                  // steps done
  sched_config sched;            // cluster: comm_size() ranks, train.mem_tokens
  int rank;                      // this process's rank in the plan
  dist_step *dist;               // this rank's part of a plan (model/dist/dist_step.h)
  dist_clip *clips;              // (global_batch) the clips of the step being run
  float *null_text;              // (null_tokens, text_dim) host: train.null_caption's
  int null_tokens;               // embedding, or NULL (model/objective.h)
  uint8_t *clip_bad;             // (store clips) 1: failed its checksum, skipped, reported
  int64_t bad_clips;             // clips skipped so far by this process (--skip-bad-clips)
  double verify_s;               // seconds spent drawing batches and hashing their clips
  dit_model *sample_model;       // rank 0, train.sample_every: the EMA weights' sampling model
                                 // (LoRA: the frozen base and the adapters' EMA)
  train_prompts prompts;         // rank 0, train.sample_prompts: the samples' prompts
  int sample_pending;            // rank 0, --resume: the checkpoint's sample is due and missing
  struct tb_writer *tb;          // rank 0 with train.tensorboard, while the loop runs: the
                                 // samples go there as images too (model/train/tensorboard.h)
  int64_t samples_failed;        // rank 0: samples that could not be written (warned)
} trainer;

// Statistics of one step (every rank sees the global values).
typedef struct {
  double loss;        // mean over clips of each clip's MSE
  double grad_norm;   // global L2 norm before clipping
  double lr;
  int64_t clips, tokens;
  int microbatches;   // waves in which this rank ran clips
  double step_s, tokens_per_s;
  double predicted_s; // the cost model's step time for the plan that ran (sched/)
  const char *plan;   // which plan ran: "dynamic", "packing-only", "static-balanced"
  double plan_ms;     // wall time the planner took for this batch (sched_result.plan_ms)
  int64_t cp_clips[SCHED_MAX_LEVELS];  // clips of the plan that ran at CP size 2^l
  int64_t mode_clips[COST_CP_NMODES];  // clips of groups of CP > 1 in each mode
  int placed;         // train.placement = blockwise under a mask, on more than one rank:
  int64_t kv_bytes, kv_plan_bytes, kv_ranks_off;  // then the placed forwards' K/V bytes
                      // received, summed over the ranks (dist_step_placed_kv), the
                      // placements' count of them, and the ranks where the two differ
  int64_t bad_clips;  // distinct clips skipped so far by this process (--skip-bad-clips)
  const char *backend;    // the compute backend's name (kb->name: "cpu", "cpu-bf16", "cuda")
  const char *precision;  // train.precision: "fp32" or "bf16"
  // A metrics line's view (metrics_interval_line): loss, grad_norm and tokens_per_s above
  // are then the means over the steps since the previous line (interval_steps of them),
  // and these the last step's own values.
  double loss_step, grad_norm_step, tokens_per_s_step;
  int64_t interval_steps;
} train_step_stats;

// Copies the n segments h (host) to backend memory *segs (free it with kb->free); *n_segs = n.
tsr_status train_segments_upload(const kernels_backend *kb, const kernels_param_segment *h, int n,
                                 kernels_param_segment **segs, int *n_segs);
// 1 if AdamW's weight decay applies to tensor t: matrices only, not biases, norm weights
// or the label table (y_embed).
int train_decays(const dit_tensor *t);
// The segment table of kernels adamw_update_multi for m: one segment per tensor, in table
// order, decaying as train_decays says; made in backend memory (*segs, free it with
// kb->free) once per run, since the tensor table does not change.
tsr_status train_adamw_segments(dit_model *m, kernels_param_segment **segs, int *n_segs);
// AdamW over every tensor of m in one backend call (adamw_update_multi with the segments
// of train_adamw_segments) with the config's betas, eps and weight decay, learning rate lr,
// step count t >= 1 and gradient scale (clipping factor, 1 for none); the act-dtype working
// copy of the weights (dit_weights_work) is written by the same call, as dit_refresh_weights
// would write it. adam_m, adam_v: (n_params) backend memory.
// Bitwise the same as one adamw_update per tensor. The trainer's step, the calibration
// and the training benchmark all run this.
tsr_status train_adamw(dit_model *m, const train_config *c, float *adam_m, float *adam_v,
                       const kernels_param_segment *segs, int n_segs, double lr, int64_t t,
                       float grad_scale);
// The adapters lora.rank, lora.alpha and lora.targets of c describe (model/lora.h).
lora_config train_lora_config(const train_config *c);
// The same two for the adapters of m (model/lora.h) instead of its tensors: segments of the
// adapter tensors, AdamW over dit_lora_params/dit_lora_grads and their working copy
// (dit_lora_work, the bits dit_lora_refresh writes).
// adam_m, adam_v: (dit_lora_num_params) backend memory.
tsr_status train_lora_adamw_segments(dit_model *m, kernels_param_segment **segs, int *n_segs);
tsr_status train_lora_adamw(dit_model *m, const train_config *c, float *adam_m, float *adam_v,
                            const kernels_param_segment *segs, int n_segs, double lr, int64_t t,
                            float grad_scale);

// The trained parameters and their gradient: (n_params) backend memory, the adapters'
// (dit_lora_params, dit_lora_grads) when tr->tc.lora_rank > 0 (the base is frozen: its
// weights are never updated), else the model's.
float *train_params(trainer *tr);
float *train_grads(trainer *tr);

// Creates the model, optimizer state and buffers for `tr->mc`, `tr->tc`, `tr->data` on
// backend `tr->kb` (already set by the caller); parameters are left zero (dit_init or a checkpoint fills
// them), Adam moments zero, ema zero (train_ema_reset copies the weights). train.zero >= 1:
// the model is made with shard_ranks = comm_size() and the optimizer state, masters and
// EMA are this rank's shards (model/train/zero.h); after the weights are set (dit_init, a
// checkpoint) train_weights_set copies the masters out of them. lora.rank > 0:
// the config's adapters are attached first (PEFT init, A drawn from train.seed, B zero), and
// the optimizer state, EMA and AdamW segments are the adapters'.
tsr_status trainer_setup(trainer *tr);
void trainer_free(trainer *tr);
tsr_status train_ema_reset(trainer *tr);
// The model's weights were set (dit_init, a checkpoint): train.zero >= 1 takes this rank's
// master shard from them (stage 3: the checkpoint loaded the shard itself); a no-op otherwise.
tsr_status train_weights_set(trainer *tr);
// The weights of a fresh run from `seed` (dit_init), and train_weights_set; train.zero = 3
// (no whole weights anywhere): this rank's master shard made directly (dit_init_range).
tsr_status train_weights_init(trainer *tr, uint64_t seed);
// The EMA weights whole, in the model's flat layout (backend memory): tr->ema, or with
// train.zero = 1 every rank's EMA shard gathered into the gradient buffer (free between
// steps; the next step zeroes it; collective). train.zero >= 2 has no such buffer: TSR_EINVAL
// (config_validate refuses samples during training with it).
tsr_status train_ema_full(trainer *tr, const float **ema);

// Runs step tr->step on the batch of n clips (batch: store table positions, in sampler
// order) under plan `p` (from sched_plan_batch on the batch's token counts): zero grads,
// for each wave this rank's chunks of its group's clips (objective -> forward -> backward
// with ring attention, gradients accumulated), the sum of gradients and loss over all
// ranks, then clip by the global norm, AdamW (lr_schedule), EMA and the refresh of the
// weights' working copy. Collective; every rank ends with the same weights. Increments
// tr->step. The host waits for the backend twice: for the step's losses (once, after the
// last wave) and for the gradient's sum of squares (one double over the flat buffer).
tsr_status train_step(trainer *tr, const int64_t *batch, int n, const plan *p,
                      train_step_stats *stats);

#endif
