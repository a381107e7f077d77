// model/train/tensorboard.h — train.tensorboard = 1: the scalars of RUN/metrics.jsonl also
// as a TensorBoard event file, RUN/tensorboard/events.out.tfevents.TIME.HOST (rank 0).
//
// Each metrics line is one Event at its step (format: model/io/tfevents.h) with a tag per
// numeric field, grouped in TensorBoard's sections: train/loss, train/loss_step,
// train/grad_norm, train/grad_norm_step, train/lr, train/clips, train/tokens,
// train/bad_clips; perf/tokens_per_s, perf/tokens_per_s_step, perf/step_s;
// plan/predicted_s, plan/plan_ms; after a validation val/loss, val/t_0.1 ... val/t_0.9,
// val/bucket_short|medium|long (a bucket without held-out clips is left out), val/clips,
// val/s. Values are metrics.jsonl's rounded to float32 (TensorBoard's simple_value).
// With train.sample_every, each sample also as an image (tb_write_sample), with its prompt.
// Crash consistency: a step's record is appended with one write(2) on an O_APPEND file, so
// a crash leaves whole records and at most one torn last one, which TensorBoard's reader
// skips. Opening for a resume at step S (as metrics_open) keeps the whole records of
// steps <= S and cuts the file after them (the torn one too), so the file reads as one run;
// a fresh run removes the directory's old event files and starts one.
#ifndef TESSERA_MODEL_TRAIN_TENSORBOARD_H
#define TESSERA_MODEL_TRAIN_TENSORBOARD_H

#include <stdint.h>

#include "core/err.h"
#include "model/sample/sample.h"
#include "model/train/step.h"
#include "model/train/val.h"

typedef struct tb_writer tb_writer;

// resume_step < 0: a fresh run.
tsr_status tb_open(tb_writer **w, const char *run_dir, int64_t resume_step);
// The Event of one metrics line (stats == NULL: a validation line of its own).
tsr_status tb_write(tb_writer *w, int64_t step, const train_step_stats *stats,
                    const train_val_stats *val);
// A sample of the run (model/train/samples.h) as an image at its step, under `tag`
// (samples/frames for a row of labels or seeds, samples/prompt_K for train.sample_prompts'
// K-th) with `description` (the prompt; NULL: none) as its summary_description: 4 of its
// frames (0, F/4, 2F/4, 3F/4; all when fewer), each the row of the sample's clips, top to
// bottom, as an uncompressed PNG (core/png.h). Nothing for a latent model's sample.
tsr_status tb_write_sample(tb_writer *w, int64_t step, const sample_result *s, const char *tag,
                           const char *description);
void tb_close(tb_writer **w);

#endif
