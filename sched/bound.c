// sched/bound.c — lower bounds on the step time of any plan (see sched/sched.h).
#include <math.h>

#include "sched/sched.h"

void sched_lower_bound(const sched_config *cfg, const int64_t *tokens, int n, double *lb,
                       double *lb_ref) {
  const sched_cluster *cl = &cfg->cluster;
  const cost_model *cm = &cfg->cost;
  double work = 0, ref_work = 0, longest = 0, total_tokens = 0;
  for (int i = 0; i < n; i++) {
    double L = (double)tokens[i], best_t = INFINITY, best_rs = INFINITY;
    for (int k = cost_min_cp(cl, tokens[i]); k >= 1 && k <= cl->ranks; k *= 2) {
      double t = cost_clip_time(cm, cl->gpus_per_node, k, tokens[i]);
      if (t < best_t) best_t = t;
      if (k * t < best_rs) best_rs = k * t;
    }
    work += cm->a * L + cm->b * cost_clip_area(cm, tokens[i]);
    ref_work += best_rs;
    total_tokens += L;
    if (best_t > longest) longest = best_t;
  }
  // Each group of k ranks holds at most k*M tokens, so the groups with clips span at
  // least ceil(total / M) ranks in all, each paying ovh.
  work += cm->ovh * ceil(total_tokens / (double)cl->mem_tokens);
  double N = (double)cl->ranks;
  double fixed = cm->allreduce + cost_zero_step(cm, cl->ranks, cl->gpus_per_node) +
                 cost_zero_min_wave(cm, cl->ranks, cl->gpus_per_node);
  if (lb) *lb = fmax(work / N, longest) + fixed;
  if (lb_ref) *lb_ref = fmax(ref_work / N, longest) + fixed;
}
