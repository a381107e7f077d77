// model/train/plan_choice.c — which plan a step runs (model/train/plan_choice.h).
#include "model/train/plan_choice.h"

tsr_status train_choose_plan(const sched_config *sc, int kind, const int64_t *tok, int64_t n,
                             const sched_result *res, plan *alt, const plan **run,
                             double *predicted, const char **name) {
  *run = &res->plan;
  *predicted = res->predicted_s;
  *name = sched_used_name(res->used);
  if (kind == TRAIN_PLAN_AUTO) return TSR_OK;
  tsr_status st;
  if (kind == TRAIN_PLAN_DYNAMIC) {
    st = sched_dynamic(sc, tok, (int)n, alt);
    *predicted = res->dynamic_s;
    *name = sched_used_name(SCHED_USED_DYNAMIC);
  } else if (kind == TRAIN_PLAN_STATIC) {
    st = sched_baseline_balanced(sc, tok, (int)n, alt);
    *predicted = res->static_balanced_s;
    *name = sched_used_name(SCHED_USED_STATIC_BALANCED);
  } else {
    st = sched_baseline_packing(sc, tok, (int)n, alt);
    *predicted = res->packing_only_s;
    *name = sched_used_name(SCHED_USED_PACKING_ONLY);
  }
  *run = alt;
  return st;
}
