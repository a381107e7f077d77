// model/train/metrics.h — RUN/metrics.jsonl: one line per step and per validation.
#ifndef TESSERA_MODEL_TRAIN_METRICS_H
#define TESSERA_MODEL_TRAIN_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "model/train/step.h"
#include "model/train/val.h"

// RUN/metrics.jsonl: one JSON object per line,
//   {"step", "loss", "lr", "grad_norm", "clips", "tokens", "step_s", "tokens_per_s",
//    "predicted_s", "plan", "bad_clips", "backend", "precision", "steps", "loss_step",
//   "grad_norm_step", "tokens_per_s_step"} (loss, grad_norm: the means over the "steps"
//   steps since the previous line, tokens_per_s their tokens over their time; *_step: the
//   line's own step's values, as lr, clips, tokens, step_s and the rest; predicted_s: the cost
//   model's time of the plan that ran; bad_clips: distinct clips skipped for a failed
//   checksum so far by this process, 0 unless --skip-bad-clips; backend: kb->name,
//   precision: train.precision), "plan_ms" (the planner's wall time for the batch) and
//   "cp" ({"1": clips run at CP size 1, "2": ..., the sizes with clips}), and after a
//   validation "val_loss", "val_t" ({"0.1": mean MSE at t = 0.1, ...}), "val_bucket"
//   ({"short", "medium", "long"}), "val_clips", "val_s".
//   A validation before the first step of a fresh run is a line of its own,
//   {"step": 0, "val_loss", ...}, without the step fields.
// Opening for a resume at step S first drops lines with step > S (written after the last
// checkpoint by a run that then died), so the file reads as one uninterrupted run.
// A fresh run (resume_step < 0) starts a new file.
tsr_status metrics_open(FILE **f, const char *run_dir, int64_t resume_step);
// The steps since the previous metrics line (metrics_interval_add after each step).
typedef struct {
  double loss, grad_norm, tokens, step_s;  // sums
  int64_t n;
} metrics_interval;
void metrics_interval_add(metrics_interval *iv, const train_step_stats *st);
// *line = *st with the interval's means (loss, grad_norm; tokens_per_s = its tokens over its
// time) and st's own values beside them (*_step); then *iv starts a new interval. One step's
// interval gives its values exactly (x / 1).
void metrics_interval_line(metrics_interval *iv, const train_step_stats *st,
                           train_step_stats *line);
// st == NULL: a validation line of its own (val != NULL).
tsr_status metrics_write(FILE *f, int64_t step, const train_step_stats *st,
                         const train_val_stats *val);

#endif
