// model/io/ckpt_run.h — the checkpoints of a run directory: RUN/ckpt-STEP.safetensors (and
// a LoRA run's RUN/lora-STEP.safetensors beside them), saved, pruned, found and cleaned up
// after a crash. The file format is model/io/checkpoint.h's.
#ifndef TESSERA_MODEL_IO_CKPT_RUN_H
#define TESSERA_MODEL_IO_CKPT_RUN_H

#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "model/io/checkpoint.h"

// Saves RUN/ckpt-<cs->step>.safetensors, then removes all but the newest `keep`, and for a
// LoRA run's checkpoint (cs->adapters) all but the newest `keep` adapter files
// RUN/lora-STEP.safetensors too.
tsr_status ckpt_save_run(const char *run_dir, const ckpt_state *cs, int keep);
// Path and step of the newest RUN/ckpt-STEP.safetensors; TSR_EINVAL if there is none.
tsr_status ckpt_latest(const char *run_dir, char *path, size_t n, int64_t *step);
// Removes RUN/ckpt-*.tmp (and lora-*.tmp) files left by a crash during a save.
tsr_status ckpt_clean_tmp(const char *run_dir);

#endif
