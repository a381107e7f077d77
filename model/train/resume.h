// model/train/resume.h — a run directory's owner and what a resume compares: the run's
// lock, the store it started with, the plan settings that make a resume bitwise
// (docs/train.md "Run directory", "Resume").
#ifndef TESSERA_MODEL_TRAIN_RESUME_H
#define TESSERA_MODEL_TRAIN_RESUME_H

#include <stddef.h>
#include "core/err.h"
#include "core/lockfile.h"
#include "model/io/checkpoint.h"
#include "model/train/memory.h"
#include "model/train/options.h"
#include "model/train/step.h"

// One writer per run directory: rank 0 holds an exclusive lock on RUN/lock (core/lockfile.h,
// the machinery of the store's locks) from before it touches RUN until the run ends, with
// its description (pid, host, command, since when) as the file's text. A second `train
// --out RUN` (or --resume) meanwhile is refused naming it, before anything in RUN changes
// (it used to remove the first's temporary files, rewrite metrics.jsonl and prune its
// checkpoints). Then the leftovers of a crash are removed: RUN/ckpt-*.tmp and
// RUN/samples/*.tmp. Collective: every rank learns rank 0's outcome.
tsr_status train_run_dir_open(lockfile **lock, const char *run_dir);

// What shapes the plans of a run, as one line ("mem_tokens 512, ranks 1, ranks per node 1,
// plan auto, cost model 0123456789abcdef"): a checkpoint records it; a resume under
// another line is not bitwise (the batches are packed into other microbatches: their
// losses agree to rounding), and says so.
void train_plan_settings(const trainer *tr, int plan_kind, char *out, size_t n);
// RUN/store-clips.txt: the clip table the run started with (data_clip_line, one a line),
// written atomically by rank 0 at the start of a fresh run (and of a resume that lacks
// it), so that a resume on a changed store can say what changed.
tsr_status train_store_record(const trainer *tr, const char *run_dir, int replace);
// --resume: the store must be the one the run started with: the checkpoint's fingerprint
// (data_fingerprint) against the store's; on a difference TSR_EMISMATCH listing what
// changed (clips gone, new, or with another grid, checksum or label, from
// RUN/store-clips.txt). A checkpoint without a fingerprint (older) is compared by clip count.
tsr_status train_resume_check_store(const ckpt_meta *cm, const trainer *tr, const char *path,
                                    const char *run_dir);
// --resume: rank 0 says whether the resume is bitwise (the checkpoint's plan settings
// against this run's, train_plan_settings).
void train_resume_check_plan(const ckpt_meta *cm, const trainer *tr, int plan_kind,
                             const char *path);
// --resume of a LoRA run (cm->adapters, the meta of checkpoint `path`): the frozen base's
// weights into tr->model (its adapters attached, loaded after), from the checkpoint's
// base_model or from `init` (--init, non-NULL: the base moved; it must hold the same
// weights). Refused naming the file and saying to give the base with --init when it cannot
// be read, and naming the first tensor that differs when it is not the base the adapters
// trained on (ckpt_check_base). base: (cap) the path used, which later checkpoints record.
tsr_status train_resume_base(trainer *tr, const ckpt_meta *cm, const char *path, const char *init,
                             char *base, size_t cap);
// train_memory_limit for a run that may resume: with train.mem_tokens = 0 (derived from
// memory) and --resume, the newest checkpoint's mem_tokens is kept when it fits every rank
// (the derived value would follow the free memory of the day and change the plans);
// otherwise as train_memory_limit. Collective.
tsr_status train_memory_limit_run(trainer *tr, const train_options *o, int value_bytes,
                                  train_memory *m, size_t *capacity, const char **source);

#endif
