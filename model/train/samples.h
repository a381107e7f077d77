// model/train/samples.h — sample videos during training, from the EMA weights.
#ifndef TESSERA_MODEL_TRAIN_SAMPLES_H
#define TESSERA_MODEL_TRAIN_SAMPLES_H

#include <stdint.h>

#include "core/err.h"
#include "model/train/options.h"
#include "model/train/step.h"

// RUN/samples/sample-STEP.mp4 (Y4M without media): the EMA weights, copied into a sampling
// model of their own (made on first use, tr->sample_model), integrate the flow
// (model/sample/sample.h, sample_row) for train.sample_steps Euler steps from fixed seeds: one
// clip per label of the store, side by side (the first 8 labels; seed 0 each, guidance
// train.sample_cfg), or without labels 4 clips of seeds 0..3. The clip's grid is the
// store's most common one, cut to at most mem_tokens / 2 tokens (fewer frames). Rank 0.
// With lora.rank > 0 the sampling model holds the frozen base's weights and the run's
// adapters (train_lora_config) loaded with their EMA (tr->ema): the base as trained on,
// not an EMA of it, so a sample equals `tessera sample` of the base with the adapters'
// EMA merged, up to the rounding of the merge.
// Nothing of the training state is written, so the losses and resume are bitwise those
// of a run without samples (tests/train/samples.sh).
// With train.sample_prompts (tr->prompts, train_samples_prepare) one file per prompt
// instead, RUN/samples/sample-STEP-K (K = 1, 2, ... in the file's order): the clip of that
// prompt's caption, unlabelled, seed 0, guidance train.sample_cfg against no caption: what
// `tessera sample --ckpt RUN/ckpt-STEP.safetensors --prompt TEXT --seed 0 --steps
// train.sample_steps --cfg train.sample_cfg` gives for the same grid, bitwise.
// Every file written is recorded as one line of RUN/samples/samples.jsonl (step, file,
// frames, height, width, steps, cfg, and prompt, prompt_index, prompts (their number) and
// seed, or the row's
// labels and seed, or its seeds), appended with one write(2): a crash leaves at most a
// torn last line; a sample written again (a resume) appends its line again.
tsr_status train_write_samples(trainer *tr, const train_options *o);
// train.sample_prompts with train.sample_every > 0: rank 0 has the prompts embedded once
// (o->embed_prompts, the store's encoder record) into tr->prompts; an error (on rank 0:
// shared, so that every rank stops) when they cannot be, or a prompt is longer than
// model.text_len. Nothing to do otherwise.
tsr_status train_samples_prepare(trainer *tr, const train_options *o);
void train_prompts_free(train_prompts *p);
// The samples of a step as part of the run's state: written before the checkpoint of that
// step (which records them as due), so a checkpoint never exists without its sample
// having been tried; a failure is a warning naming the file and why (its temporary file
// removed), counted in tr->samples_failed, and the run goes on to its checkpoint. A
// --resume from a checkpoint whose sample is missing writes it first (tr->sample_pending).
void train_samples_step(trainer *tr, const train_options *o);
// 1 if RUN/samples/sample-STEP (.mp4 or .y4m) exists; with n_prompts > 0, if every
// sample-STEP-K of K = 1..n_prompts does.
int train_sample_exists(const char *run_dir, int64_t step, int n_prompts);

#endif
