// model/train/train.h — the training loop of `tessera train` (docs/train.md).
//
// One process, or N processes under mpirun/srun: every global batch is planned by the
// Dynamic-CP scheduler (sched/) for comm_size() ranks, identically on every rank; each
// rank runs its chunks of the clips of its groups, wave by wave, attending across each
// group in the group's CP mode (ring, Ulysses or hybrid: model/dist/dist_step.h), and the
// gradients are summed over all ranks before the optimizer step (replicated, or with
// train.zero 1-3 its state, the masters and the working weights sharded over the ranks:
// model/train/zero.h). Any world size runs (the group set of comm/comm.h). Rank 0 writes
// metrics and checkpoints; RUN/config.ini is the run as started (model/train/run_config.h).
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

#include "core/err.h"
#include "model/train/options.h"

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

#endif
