// sched/plan_timeline.h — one batch's plans on a timeline, as JSON for the picture of
// `tessera plan --timeline` (tools/plan_timeline.py draws it; format: docs/plan.md
// "Timeline"):
//
// {"format":"tessera-plan-timeline","version":1,"step":s,"ranks":N,"gpus_per_node":G,
//  "mem_tokens":M,"static_cp":k_s,"lower_bound_s":..,"allreduce_s":..,
//  "plans":[{"name":"dynamic"|"packing-only"|"static-balanced","role":"planned",
//            "step_s":..,"makespan_s":..,"idle_frac":..,
//            "groups":[{"wave":w,"first_rank":r,"size":k,"start_s":..,"time_s":..,
//                       "clips":[{"id":..,"tokens":..}]}]},
//           {... "name":"packing-only","role":"static" ...}]}
// The first plan is the one the planner chose (sched_result.plan), the second the same
// batch under static CP with packing only (sched_baseline_packing); groups are those with
// clips, start_s and time_s from plan_simulate and plan_group_time: the boxes of the picture.
#ifndef TESSERA_SCHED_PLAN_TIMELINE_H
#define TESSERA_SCHED_PLAN_TIMELINE_H

#include <stdint.h>

#include "core/err.h"
#include "sched/sched.h"

// Writes the timeline of batch `step` (ids, tokens: n clips in batch order; r: its plan
// from sched_plan_batch) to `path`. TSR_EIO naming the file, TSR_ENOMEM.
tsr_status sched_timeline_write(const sched_config *cfg, int64_t step, const int64_t *ids,
                                const int64_t *tokens, int n, const sched_result *r,
                                const char *path);

#endif
