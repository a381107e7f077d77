// model/train/train.h — the training loop of `tessera train` (docs/train.md).
//
// One process, or N processes under mpirun/srun: every global batch is planned by the
// Dynamic-CP scheduler (sched/) for comm_size() ranks, identically on every rank; each
// rank runs its chunks of the clips of its groups, wave by wave, with ring attention
// across each group (model/dist/dist_step.h), and the gradients are summed over all ranks
// before the (replicated) optimizer step. Rank 0 writes metrics and checkpoints.
//
// Step numbering: step s (0-based) trains global batch s of the sampler; its objective
// randomness is keyed by (train.seed, s, clip id) (model/objective.h), its learning rate
// is lr_schedule(s) and its AdamW step count is s + 1. After it, the run has done s + 1
// steps: metrics lines and checkpoints are named by that count (ckpt-20 holds the state
// after 20 steps). So the losses of a run depend only on the config, the store and the
// step, never on where a run was stopped and resumed.
//
// Loss of a step: mean over the batch's clips of each clip's mean squared error over its
// token values (docs/model.md "Objective"); per-clip weights 1 / (n * tokens * P) make the sum
// over microbatches (and ranks) equal that mean.
#ifndef TESSERA_MODEL_TRAIN_H
#define TESSERA_MODEL_TRAIN_H

#include <stdint.h>
#include <stdio.h>
#include "comm/comm.h"
#include "core/err.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/train/data.h"
#include "model/dist/dist_step.h"
#include "model/dit.h"
#include "model/sample/sample.h"
#include "sched/sched.h"

// ---- learning-rate schedule (model/train/lr.c) -----------------------------------------------
// Linear warmup then cosine decay to min_lr at train.steps, for 0-based step s:
//   s < warmup:            lr * (s + 1) / warmup
//   else, p = (s - warmup) / max(1, steps - warmup) clamped to [0, 1]:
//                          min_lr + (lr - min_lr) * (1 + cos(pi p)) / 2
// Steps past train.steps stay at min_lr. Computed in double.
double lr_schedule(const train_config *t, int64_t s);
// EMA decay used at 0-based step s, with warm-up: min(ema_decay, (1 + s) / (10 + s)).
// Without it the EMA of a short run is mostly the initial weights (0.999^200 = 0.82),
// whose zero-initialised output layer predicts nothing: samples would stay noise.
double ema_decay_at(const train_config *t, int64_t s);

// ---- the state of a run ------------------------------------------------------------------
typedef struct {
  dit_config mc;
  train_config tc;
  const kernels_backend *kb;     // set by the caller: the compute backend (its act dtype is
                                 // train.precision)
  const comm_backend *cb;        // set by the caller: ring exchange and gradient all-reduce
  dit_model *model;
  size_t n_params;
  data_split split;              // training and held-out clips (train.val_clips)
  float *adam_m, *adam_v, *ema;  // (n_params) backend memory each
  kernels_param_segment *adam_segs;  // (n_adam_segs) backend memory: train_adamw_segments
  int n_adam_segs;
  data_store *data;
  data_sampler sampler;
  int64_t step;                  // steps done
  sched_config sched;            // cluster: comm_size() ranks, train.mem_tokens
  int rank;                      // this process's rank in the plan
  dist_step *dist;               // this rank's part of a plan (model/dist/dist_step.h)
  dist_clip *clips;              // (global_batch) the clips of the step being run
  uint8_t *clip_bad;             // (store clips) 1: failed its checksum, skipped, reported
  int64_t bad_clips;             // clips skipped so far by this process (--skip-bad-clips)
  double verify_s;               // seconds spent drawing batches and hashing their clips
  dit_model *sample_model;       // rank 0, train.sample_every: the EMA weights' sampling model
  int sample_pending;            // rank 0, --resume: the checkpoint's sample is due and missing
  int64_t samples_failed;        // rank 0: samples that could not be written (warned)
} trainer;

// Which plan a step runs: the scheduler's (Dynamic-CP, falling back to the better static
// plan when it is not faster), or one of the static-CP baselines (for comparisons).
enum { TRAIN_PLAN_AUTO = 0, TRAIN_PLAN_DYNAMIC, TRAIN_PLAN_STATIC, TRAIN_PLAN_PACKING };

// The plan of kind `kind` for a batch of n clips of `tokens` tokens whose scheduler result
// is `res` (sched_plan_batch): res's own plan for AUTO, else the one asked for, made in
// `alt` (plan_init'ed scratch). *predicted: its step time under the cost model; *name:
// which plan ran ("dynamic", "packing-only", "static-balanced").
tsr_status train_choose_plan(const trainer *tr, int kind, const int64_t *tokens, int64_t n,
                             const sched_result *res, plan *alt, const plan **run,
                             double *predicted, const char **name);

// ---- validation (model/train/val.c) ---------------------------------------------------
// The held-out clips (data_split) are scored at fixed noise levels with fixed noise: the
// objective of model/objective.h with a point mass for t instead of its logit-normal draw
// (t_logit_std = 0, t_logit_mean = logit(level), no length shift), no label dropout, and
// the noise keyed by (train.seed, TRAIN_VAL_KEY_STEP, clip id), a step no training step
// reaches, so every validation of a run, and every run with the same seed, sees the same
// x_t. The same objective_inputs kernel builds it, so nothing of the objective is written
// twice. Each clip's MSE is its squared error / (tokens * P); the numbers are means over
// clips. The clips are planned for all ranks like a batch (batches of at most
// train.global_batch clips, --plan respected) and run forward only (dist_step_eval); the
// per-clip squared errors are summed over the ranks, so 1, 2 or 4 ranks and any plan give
// the same numbers up to floating-point reassociation (the ring attention's order).
// Weights: the trained ones (the curve of the optimisation, beside the training loss).
enum { TRAIN_VAL_LEVELS = 5 };
extern const double train_val_levels[TRAIN_VAL_LEVELS];  // 0.1, 0.3, 0.5, 0.7, 0.9
#define TRAIN_VAL_KEY_STEP INT64_MAX

typedef struct {
  int64_t step;                        // steps done when measured
  double loss;                         // mean over levels and clips
  double level[TRAIN_VAL_LEVELS];      // mean over clips, per noise level
  double bucket[DATA_BUCKETS];         // mean over levels and the bucket's clips; NaN: none
  int64_t clips;
  double seconds;                      // wall time of the validation
} train_val_stats;

// Hashes every held-out clip's payload on every rank and agrees on the verdicts (as a
// training batch's clips, train_run "Clip checksums"): a bad clip stops the run
// (TSR_EFORMAT naming it), or with `skip` is left out of validation with a warning.
tsr_status train_val_check(trainer *tr, int skip);
// RUN/val_clips.txt: "id bucket tokens" of every held-out clip, one a line (written
// atomically by rank 0 at start), for tools that must tell them from training clips
// (tools/sample_stats.py).
tsr_status train_val_write_list(const trainer *tr, const char *run_dir);
// Scores the held-out clips with the current weights (collective: every rank calls it).
// plan_kind: TRAIN_PLAN_*, as the steps run.
tsr_status train_validate(trainer *tr, int plan_kind, train_val_stats *out);

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
  int64_t bad_clips;  // distinct clips skipped so far by this process (--skip-bad-clips)
  const char *backend;    // the compute backend's name (kb->name: "cpu", "cpu-bf16", "cuda")
  const char *precision;  // train.precision: "fp32" or "bf16"
} train_step_stats;

// 1 if AdamW's weight decay applies to tensor t: matrices only, not biases, norm weights
// or the label table (y_embed).
int train_decays(const dit_tensor *t);
// The segment table of kernels adamw_update_multi for m: one segment per tensor, in table
// order, decaying as train_decays says; made in backend memory (*segs, free it with
// kb->free) once per run, since the tensor table does not change.
tsr_status train_adamw_segments(dit_model *m, kernels_param_segment **segs, int *n_segs);
// AdamW over every tensor of m in one backend call (adamw_update_multi with the segments
// of train_adamw_segments) with the config's betas, eps and weight decay, learning rate lr,
// step count t >= 1 and gradient scale (clipping factor, 1 for none), then the refresh of
// the act-dtype working copy of the weights. adam_m, adam_v: (n_params) backend memory.
// Bitwise the same as one adamw_update per tensor. The trainer's step, the calibration
// and the training benchmark all run this.
tsr_status train_adamw(dit_model *m, const train_config *c, float *adam_m, float *adam_v,
                       const kernels_param_segment *segs, int n_segs, double lr, int64_t t,
                       float grad_scale);

// Creates the model, optimizer state and buffers for `tr->mc`, `tr->tc`, `tr->data` on
// backend `tr->kb` (already set by the caller); parameters are left zero (dit_init or a checkpoint fills
// them), Adam moments zero, ema zero (train_ema_reset copies the weights).
tsr_status trainer_setup(trainer *tr);
void trainer_free(trainer *tr);
tsr_status train_ema_reset(trainer *tr);

// Runs step tr->step on the batch of n clips (batch: store table positions, in sampler
// order) under plan `p` (from sched_plan_batch on the batch's token counts): zero grads,
// for each wave this rank's chunks of its group's clips (objective -> forward -> backward
// with ring attention, gradients accumulated), the sum of gradients and loss over all
// ranks, then clip by the global norm, AdamW (lr_schedule), EMA and the refresh of the
// weights' working copy. Collective; every rank ends with the same weights. Increments
// tr->step. The host waits for the backend twice: for the step's losses (once, after the
// last wave) and for the gradient's sum of squares (one double over the flat buffer).
tsr_status train_step(trainer *tr, const int64_t *batch, int n, const plan *p,
                      train_step_stats *st);

// ---- metrics (model/train/metrics.c) -------------------------------------------------------------
// RUN/metrics.jsonl: one JSON object per line,
//   {"step", "loss", "lr", "grad_norm", "clips", "tokens", "step_s", "tokens_per_s",
//    "predicted_s", "plan", "bad_clips", "backend", "precision"} (predicted_s: the cost
//   model's time of the plan that ran; bad_clips: distinct clips skipped for a failed
//   checksum so far by this process, 0 unless --skip-bad-clips; backend: kb->name,
//   precision: train.precision), and after a validation "val_loss", "val_t" ({"0.1": mean
//   MSE at t = 0.1, ...}), "val_bucket" ({"short", "medium", "long"}), "val_clips", "val_s".
//   A validation before the first step of a fresh run is a line of its own,
//   {"step": 0, "val_loss", ...}, without the step fields.
// Opening for a resume at step S first drops lines with step > S (written after the last
// checkpoint by a run that then died), so the file reads as one uninterrupted run.
// A fresh run (resume_step < 0) starts a new file.
tsr_status metrics_open(FILE **f, const char *run_dir, int64_t resume_step);
// st == NULL: a validation line of its own (val != NULL).
tsr_status metrics_write(FILE *f, int64_t step, const train_step_stats *st,
                         const train_val_stats *val);

// ---- the whole run (model/train/train.c) ---------------------------------------------------------
typedef struct {
  const char *config_path;       // config file; may be NULL with resume (checkpoint's config)
  char *const *overrides;        // "section.key=value" (n_overrides)
  int n_overrides;
  const char *data_dir;          // token store
  const char *run_dir;           // RUN: checkpoints and metrics.jsonl
  int64_t stop_step;             // stop once this many steps are done (0: train.steps)
  int resume;                    // continue from RUN's latest checkpoint
  const char *init_ckpt;         // weights to start from (fine-tuning), or NULL
  const char *cost_path;         // cost model for the planner (tessera calibrate), or NULL:
                                 // the built-in CPU numbers
  int gpus_per_node;             // ranks per node for the cost model (0: all ranks)
  int plan_kind;                 // TRAIN_PLAN_*: which plan each step runs
  int planners;                  // ranks that plan, in turn, and broadcast each plan (capped
                                 // at the world size); 0: every rank plans every batch
  int64_t mem_bytes;             // memory per rank for the memory model (0: the backend's
                                 // free memory; model/train/memory.h)
  const comm_backend *comm;      // communication backend (comm/comm.h), chosen by the caller
  int skip_bad_clips;            // 1: leave out clips whose checksum fails (else stop)
  const backend_choice *backend; // compute device, chosen by the caller (tools/backend.h);
                                 // train.precision picks its table
  // Writes a sample (train.sample_every) as a video at path_noext plus the extension it
  // picks, the full path into written (cap bytes): MP4, or Y4M in a build without media.
  // The caller's (tools/video.h: model/ encodes no video); NULL: samples are refused.
  tsr_status (*write_video)(const char *path_noext, const sample_result *s, char *written,
                            size_t cap);
} train_options;


// Checks every input (config, store vs config, checkpoint) before the first step, then
// trains. Checkpoints every train.ckpt_every steps and at the end.
//
// Clip checksums: when a batch is drawn (before it is planned), every rank hashes the
// whole payload of every clip of the batch (XXH3-64 against its block header;
// data_clip_tokens verify: each clip at most once per process, a good verdict is cached),
// also the chunks other ranks will train, and the ranks max-reduce their verdicts, so all
// agree on which clips are bad even if they read different copies of the store. A bad
// clip stops the run (TSR_EFORMAT naming the clip id, shard and offset, and
// `tessera index verify STORE`) before its step; with skip_bad_clips it is left out of
// the batch before planning (every rank plans the same smaller batch, so plan invariance
// holds), reported once on stderr and counted in metrics ("bad_clips"); a batch with no
// good clip left is replaced by the next. Skipping keeps resume bitwise: the same clips
// fail the same way on a resume.
tsr_status train_run(const train_options *o);

// ---- samples during training (model/train/samples.c) ---------------------------------------
// RUN/samples/sample-STEP.mp4 (Y4M without media): the EMA weights, copied into a sampling
// model of their own (made on first use, tr->sampler), integrate the flow
// (model/sample/sample.h, sample_row) for train.sample_steps Euler steps from fixed seeds: one
// clip per label of the store, side by side (the first 8 labels; seed 0 each, guidance
// train.sample_cfg), or without labels 4 clips of seeds 0..3. The clip's grid is the
// store's most common one, cut to at most mem_tokens / 2 tokens (fewer frames). Rank 0.
// Nothing of the training state is written, so the losses and resume are bitwise those
// of a run without samples (tests/train/samples.sh).
tsr_status train_write_samples(trainer *tr, const train_options *o);
// The samples of a step as part of the run's state: written before the checkpoint of that
// step (which records them as due), so a checkpoint never exists without its sample
// having been tried; a failure is a warning naming the file and why (its temporary file
// removed), counted in tr->samples_failed, and the run goes on to its checkpoint. A
// --resume from a checkpoint whose sample is missing writes it first (tr->sample_pending).
void train_samples_step(trainer *tr, const train_options *o);
// 1 if RUN/samples/sample-STEP (.mp4 or .y4m) exists.
int train_sample_exists(const char *run_dir, int64_t step);

#endif
