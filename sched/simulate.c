// sched/simulate.c — replays a plan on per-rank timelines (see sched/plan.h).
#include <stdlib.h>

#include "sched/placement.h"
#include "sched/plan.h"

// s1, s2 of group g's clips (s2: their attention areas under cm's mask).
static void group_sums(const plan *p, const plan_group *g, const int64_t *tokens,
                       const cost_model *cm, double *s1, double *s2) {
  *s1 = *s2 = 0;
  for (int j = 0; j < g->nclips; j++) {
    int64_t L = tokens[p->clip_index[g->clip_off + j]];
    *s1 += (double)L;
    *s2 += cost_clip_area(cm, L);
  }
}

// A masked ring group under a placement (cost_mask.place): S2 = k * its most loaded
// rank's work, and *x the most exposed exchange of a rank, from its receipts and own-key
// work (sched/cost.h). Returns 0, leaving both as they are, for a group priced without one
// or when that cannot be had (no memory).
static int placed_sums(const plan *p, const plan_group *g, const int64_t *tokens,
                       const cost_model *cm, int gpus_per_node, double *s2, double *x) {
  const cost_mask *m = &cm->mask;
  if (m->place == COST_PLACE_EVEN || m->kind == COST_MASK_FULL || g->size < 2 ||
      g->mode != COST_CP_RING)
    return 0;
  double *work = malloc((size_t)g->size * sizeof *work), *own = malloc((size_t)g->size * sizeof *own);
  int64_t *got = malloc((size_t)g->size * sizeof *got);
  int64_t *L = malloc((size_t)g->nclips * sizeof *L);
  int placed = 0;
  if (work && own && got && L) {
    for (int j = 0; j < g->nclips; j++) L[j] = tokens[p->clip_index[g->clip_off + j]];
    if (!placement_group(m, L, g->nclips, g->size, work, got, NULL, own)) {
      double most = 0, xmost = 0;
      for (int r = 0; r < g->size; r++) {
        double xr = cost_placed_exchange(cm, gpus_per_node, g->size, (double)got[r], own[r]);
        most = work[r] > most ? work[r] : most;
        xmost = xr > xmost ? xr : xmost;
      }
      *s2 = most * g->size, *x = xmost, placed = 1;
    }
  }
  free(work), free(own), free(got), free(L);
  return placed;
}

double plan_group_time(const plan *p, int gi, const int64_t *tokens, const cost_model *cm,
                       const sched_cluster *cl) {
  const plan_group *g = &p->groups[gi];
  if (g->nclips == 0) return 0;
  double s1, s2, x;
  group_sums(p, g, tokens, cm, &s1, &s2);
  // blockwise: the placed executor's all-to-alls; contiguous chunks run the ring
  if (placed_sums(p, g, tokens, cm, cl->gpus_per_node, &s2, &x) &&
      cm->mask.place == COST_PLACE_BLOCKWISE)
    return cost_placed_time(cm, g->size, g->nclips, s1, s2, x);
  return cost_group_time_mode(cm, cl->gpus_per_node, g->size, g->nclips, s1, s2,
                              (cost_cp_mode)g->mode);
}

void plan_choose_modes(plan *p, const int64_t *tokens, const cost_model *cm,
                       const sched_cluster *cl) {
  for (int gi = 0; gi < p->ngroups; gi++) {
    plan_group *g = &p->groups[gi];
    double s1, s2;
    group_sums(p, g, tokens, cm, &s1, &s2);
    g->mode = g->nclips ? cost_group_mode(cm, cl->gpus_per_node, g->size, g->nclips, s1, s2)
                        : COST_CP_RING;
  }
}

// ZeRO stage >= 2: the waves one after the other, every group of wave w starting at the
// end of wave w-1's longest group and its exposed ZeRO communication (sched/plan.h).
static void simulate_lockstep(const plan *p, const int64_t *tokens, const cost_model *cm,
                              const sched_cluster *cl, plan_sim *s, double *end,
                              double *group_start) {
  double t0 = 0;
  for (int w = 0; w < p->nwaves; w++) {
    double longest = 0;
    for (int gi = p->wave_off[w]; gi < p->wave_off[w + 1]; gi++) {
      const plan_group *g = &p->groups[gi];
      if (group_start) group_start[gi] = t0;
      if (g->nclips == 0) continue;
      double t = plan_group_time(p, gi, tokens, cm, cl);
      for (int r = g->first_rank; r < g->first_rank + g->size; r++) end[r] = t0 + t;
      s->busy_rank_s += g->size * t;
      s->groups_used++;
      if (t > longest) longest = t;
    }
    double z = cost_zero_wave(cm, p->ranks, cl->gpus_per_node, longest);
    s->zero_s += z;
    t0 += longest + z;
  }
  s->makespan_s = t0;
}

tsr_status plan_simulate(const plan *p, const int64_t *tokens, const cost_model *cm,
                   const sched_cluster *cl, plan_sim *out, double *rank_end,
                   double *group_start) {
  double *end = rank_end ? rank_end : malloc((size_t)p->ranks * sizeof *end);
  if (!end) return err_set(TSR_ENOMEM, "plan_simulate: out of memory");
  for (int r = 0; r < p->ranks; r++) end[r] = 0;
  plan_sim s = {0};
  if (cost_zero_lockstep(cm, p->ranks))
    simulate_lockstep(p, tokens, cm, cl, &s, end, group_start);
  for (int gi = 0; gi < p->ngroups && !cost_zero_lockstep(cm, p->ranks); gi++) {
    const plan_group *g = &p->groups[gi];
    double start = 0;
    for (int r = g->first_rank; r < g->first_rank + g->size; r++)
      if (end[r] > start) start = end[r];
    if (group_start) group_start[gi] = start;
    if (g->nclips == 0) continue;  // no time, no synchronisation
    double t = plan_group_time(p, gi, tokens, cm, cl);
    for (int r = g->first_rank; r < g->first_rank + g->size; r++) end[r] = start + t;
    s.busy_rank_s += g->size * t;
    s.groups_used++;
  }
  for (int r = 0; r < p->ranks; r++)
    if (end[r] > s.makespan_s) s.makespan_s = end[r];
  double zstep = cost_zero_step(cm, p->ranks, cl->gpus_per_node);
  s.zero_s += zstep;
  s.step_s = s.makespan_s + cm->allreduce + zstep;
  s.idle_frac = s.makespan_s > 0 ? 1.0 - s.busy_rank_s / (p->ranks * s.makespan_s) : 0.0;
  if (!rank_end) free(end);
  *out = s;
  return TSR_OK;
}
