// sched/plan_json.h — the JSON report of `tessera plan --json` (format: docs/plan.md).
//
// {"ranks":N,"gpus_per_node":G,"mem_tokens":M,"max_clip_tokens":..,"cost":{"a":..,...},
//  "steps":[{"step":s,"clips":[{"id":..,"tokens":..}],
//            "waves":[{"groups":[{"first_rank":r,"size":k,"clips":[ids]}]}],
//            "predicted_s":..,"packing_only_s":..,"static_balanced_s":..,
//            "lower_bound_s":..,"plan_ms":.., ...}],
//  "total":{...}}
// Ownership: a sched_json holds the document until sched_json_free.
#ifndef TESSERA_SCHED_PLAN_JSON_H
#define TESSERA_SCHED_PLAN_JSON_H

#include <stdint.h>
#include "core/err.h"
#include "sched/sched.h"

typedef struct sched_json sched_json;

tsr_status sched_json_begin(sched_json **j, const sched_config *cfg);
// Adds step `step`: the batch's clip ids and tokens (n), in batch order, and its result.
tsr_status sched_json_add_step(sched_json *j, int step, const int64_t *ids,
                               const int64_t *tokens, int n, const sched_result *r);
// Adds the totals and writes the document to `path` (TSR_EIO naming it on failure).
tsr_status sched_json_write(sched_json *j, const sched_totals *t, const char *path);
void sched_json_free(sched_json **j);

#endif
