// model/train/train_checks.h — the checks of a run's start that need the store, the config
// and the options together, before the model is built (model/train/train.c calls them).
#ifndef TESSERA_MODEL_TRAIN_TRAIN_CHECKS_H
#define TESSERA_MODEL_TRAIN_TRAIN_CHECKS_H

#include "core/err.h"
#include "model/train/options.h"
#include "model/train/step.h"

// The store holds what the config's model reads: the same tubelet and channels (uint8 pixels
// or bf16/f32 latents alike), captions of the model's width and at most model.text_len tokens,
// labels that fit model.num_classes, clips that fit one rank's memory at `ranks` ranks.
// TSR_EMISMATCH / TSR_EINVAL naming the store, clip and keys; warnings for what only looks odd.
tsr_status train_check_store(const trainer *tr, int ranks);

// Every rank was launched with the same run: the effective config (LoRA and ZeRO among its
// keys), the store's fingerprint, --init (by the checkpoint's recorded weights checksum),
// --steps and --resume, the planner's inputs (--plan, --planners, the cost model's values,
// --gpus-per-node, --mem-bytes) and --skip-bad-clips. Collective over the world: all ranks
// stop at once with "launch every rank with the same ..." naming what differs.
tsr_status train_check_ranks_agree(const trainer *tr, const train_options *o);

#endif
