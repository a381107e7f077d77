// model/train/val.h — validation on held-out clips at fixed noise levels.
#ifndef TESSERA_MODEL_TRAIN_VAL_H
#define TESSERA_MODEL_TRAIN_VAL_H

#include <stdint.h>

#include "core/err.h"
#include "model/train/data.h"
#include "model/train/step.h"

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

#endif
