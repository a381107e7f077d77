// model/train/train_state.h — the checkpoint's view of a trainer (what ckpt_save writes and
// ckpt_load fills, model/io/checkpoint.h) and a run's start from a checkpoint: --resume's
// whole state, or --init's weights (docs/train.md "Resume").
#ifndef TESSERA_MODEL_TRAIN_TRAIN_STATE_H
#define TESSERA_MODEL_TRAIN_TRAIN_STATE_H

#include <stddef.h>
#include "core/err.h"
#include "model/io/checkpoint.h"
#include "model/train/options.h"
#include "model/train/step.h"

// *cs = the trainer's state with the sampler at `pos`. names: (n_labels) scratch for the
// label pointers, freed by the caller; plan: (256) scratch for the plan settings of
// plan_kind; sh: scratch for the shard of train.zero (the sharded sets are loaded by shard
// and saved through collective gathers); sample_due: the step's samples were due (and tried)
// before; base: a LoRA run's base checkpoint (the state is then the adapters').
tsr_status train_ckpt_state(const trainer *tr, const data_sampler *pos, int plan_kind,
                            int sample_due, const char *base, ckpt_state *cs,
                            const char ***names, char *plan, ckpt_shard *sh);

// Restores the state of `path` (resume != 0) or its weights only (--init). A resume must
// train the same model the same way: only the cadences, train.mem_tokens, cp_mode,
// ulysses_chunks, precision and zero may differ from the checkpoint's config (TSR_EMISMATCH
// naming the first line that differs); its store must be the run's. A LoRA run's state is
// its adapters': --init loads the base's weights under them; --resume first loads the base
// its checkpoint names (train_resume_base), then the adapters. base: (cap) the base the run
// trains on, for its checkpoints.
tsr_status train_start_from(trainer *tr, const train_options *o, const char *path, int resume,
                            char *base, size_t cap);

// A dry run's --resume: the checks train_start_from makes before loading (config, store,
// plan settings; the same errors), then the step and the sampler's position of checkpoint
// `path`, from its metadata alone (no weights are read).
tsr_status train_resume_peek(trainer *tr, const train_options *o, const char *path);

#endif
