// tests/sched/sched_test.h — what the scheduler's tests share: the H100 cost model they plan
// with, the bitwise comparison of two plans, the loading of a two-file mix of real lengths
// and the checks that planning is deterministic.
#ifndef TESSERA_TESTS_SCHED_SCHED_TEST_H
#define TESSERA_TESTS_SCHED_SCHED_TEST_H

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "sched/lengths.h"
#include "sched/sched.h"

static const cost_model h100 = {.a = 2.0e-5, .b = 1.8e-9, .kv = 6.9e5, .bw_intra = 4.0e11,
                                .bw_inter = 4.5e10, .lat = 5e-4, .ovh = 5e-3, .allreduce = 0.05};

// 1 when plans a and b are the same, bitwise: waves, groups and clip references.
static inline int same_plan(const plan *a, const plan *b) {
  return a->nwaves == b->nwaves && a->ngroups == b->ngroups && a->nrefs == b->nrefs &&
         !memcmp(a->wave_off, b->wave_off, (size_t)(a->nwaves + 1) * sizeof *a->wave_off) &&
         !memcmp(a->groups, b->groups, (size_t)a->ngroups * sizeof *a->groups) &&
         !memcmp(a->clip_index, b->clip_index, (size_t)a->nrefs * sizeof *a->clip_index);
}

// Loads the mix of SHARED/lengths/A and SHARED/lengths/B (each NAME.csv:WEIGHT) into *ls;
// lengths_load_mix's status.
static inline tsr_status load_shared_mix(lengths_set *ls, const char *shared, const char *a,
                                         const char *b, const lengths_opts *lo) {
  char spec[2048];
  snprintf(spec, sizeof spec, "%s/lengths/%s,%s/lengths/%s", shared, a, shared, b);
  return lengths_load_mix(ls, spec, lo);
}

// Plans CFG's batch L[0..n) again: in this thread (a check that the plan and predicted time
// are R's, bitwise, naming WHAT) and in the background, whose result *ASYNC the caller
// compares and frees.
static inline void replan(const char *what, const sched_config *cfg, const int64_t *L, int n,
                          const sched_result *r, sched_result *async) {
  sched_result r2;
  CHECK_OK(sched_plan_batch(cfg, L, n, &r2));
  CHECK(same_plan(&r->plan, &r2.plan) && r->predicted_s == r2.predicted_s, "%s: deterministic",
        what);
  sched_result_free(&r2);
  sched_async *h;
  CHECK_OK(sched_async_start(&h, cfg, L, n));
  CHECK_OK(sched_async_wait(&h, async));
}

#endif
