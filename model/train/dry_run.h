// model/train/dry_run.h — `tessera train --dry-run`: what a run would do, printed from its
// start's checks alone (docs/train.md "Dry run"): nothing trains, nothing is written.
#ifndef TESSERA_MODEL_TRAIN_DRY_RUN_H
#define TESSERA_MODEL_TRAIN_DRY_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "model/train/memory.h"
#include "model/train/options.h"
#include "model/train/run_config.h"
#include "model/train/step.h"

// What the start computed that the report shows (pointers owned by the caller).
typedef struct {
  const run_config *prev;        // RUN/config.ini as a resume read it (found = 0: none)
  const dit_config *mc;          // the config as loaded (what RUN/config.ini would record)
  const train_config *tc;
  const train_memory *mem;       // one rank's memory model at train.mem_tokens tokens
  size_t capacity;               // the memory a rank has, and where that figure came from
  const char *cap_source;
  int64_t stop;                  // the step the run would stop at
  int batches;                   // batches whose plans are shown
} train_dry_run_view;

// Rank 0 prints into out: the effective config (RUN/config.ini's text), the memory model's
// figures for the largest microbatch (train.mem_tokens tokens a rank), the plans of the
// next v->batches batches from tr's sampler position (drawn on a copy: tr is unchanged)
// with their predicted step times, and the run's predicted time. tr: set up to the sampler
// and the scheduler (no model). Other ranks print nothing.
tsr_status train_dry_run_print(const trainer *tr, const train_options *o,
                               const train_dry_run_view *v, FILE *out);

#endif
