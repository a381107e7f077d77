// bench/plan/plan_input.h — what the planner benchmarks of bench/plan/ read before they plan:
// the clip lengths of a mix and a cost file, the job's longest clip taken from the lengths.
#ifndef TESSERA_BENCH_PLAN_INPUT_H
#define TESSERA_BENCH_PLAN_INPUT_H

#include <stdio.h>

#include "core/err.h"
#include "sched/lengths.h"
#include "sched/sched.h"

// The lengths of the mix `spec` (sched/lengths.h lengths_load_mix, with lo) into ls, the
// cost file `cost` into cfg->cost and cfg->max_clip_tokens = the longest of the lengths:
// 0, or 1 after printing "name: why" on stderr.
static inline int plan_input_load(const char *name, const char *spec, const lengths_opts *lo,
                                  const char *cost, lengths_set *ls, sched_config *cfg) {
  tsr_status st = lengths_load_mix(ls, spec, lo);
  if (!st) st = cost_model_load(cost, &cfg->cost);
  if (st) {
    fprintf(stderr, "%s: %s\n", name, err_msg());
    return 1;
  }
  cfg->max_clip_tokens = lengths_max(ls);
  return 0;
}

#endif
