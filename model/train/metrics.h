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
//    "predicted_s", "plan", "bad_clips", "backend", "precision"} (predicted_s: the cost
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
// st == NULL: a validation line of its own (val != NULL).
tsr_status metrics_write(FILE *f, int64_t step, const train_step_stats *st,
                         const train_val_stats *val);

#endif
