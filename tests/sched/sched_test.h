// tests/sched/sched_test.h — what the scheduler's tests share: the H100 cost model they plan
// with and the bitwise comparison of two plans.
#ifndef TESSERA_TESTS_SCHED_SCHED_TEST_H
#define TESSERA_TESTS_SCHED_SCHED_TEST_H

#include <string.h>

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

#endif
