// model/train/plan_choice.h — which plan a training or validation step runs.
#ifndef TESSERA_MODEL_TRAIN_PLAN_CHOICE_H
#define TESSERA_MODEL_TRAIN_PLAN_CHOICE_H

#include <stdint.h>

#include "core/err.h"
#include "sched/sched.h"

// Which plan a step runs: the scheduler's (Dynamic-CP, falling back to the better static
// plan when it is not faster), or one of the static-CP baselines (for comparisons).
enum { TRAIN_PLAN_AUTO = 0, TRAIN_PLAN_DYNAMIC, TRAIN_PLAN_STATIC, TRAIN_PLAN_PACKING };

// The plan of kind `kind` for a batch, under the cluster `sc`, for a batch of n clips of `tokens` tokens whose scheduler result
// is `res` (sched_plan_batch): res's own plan for AUTO, else the one asked for, made in
// `alt` (plan_init'ed scratch). *predicted: its step time under the cost model; *name:
// which plan ran ("dynamic", "packing-only", "static-balanced").
tsr_status train_choose_plan(const sched_config *sc, int kind, const int64_t *tokens, int64_t n,
                             const sched_result *res, plan *alt, const plan **run,
                             double *predicted, const char **name);

#endif
