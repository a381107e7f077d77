// sched/plan_timeline.c — one batch's plans as timeline JSON (sched/plan_timeline.h).
#include "sched/plan_timeline.h"

#include <jansson.h>
#include <stdlib.h>

static void put(json_t *o, const char *k, json_t *v, int *bad) {
  if (!v || json_object_set_new(o, k, v)) *bad = 1;
}

static void append(json_t *a, json_t *v, int *bad) {
  if (!v || json_array_append_new(a, v)) *bad = 1;
}

// Group gi of p as a box: wave, ranks, start and time, clips.
static json_t *group_json(const plan *p, int wave, int gi, double start, double time,
                          const int64_t *ids, const int64_t *tokens, int *bad) {
  const plan_group *g = &p->groups[gi];
  json_t *o = json_object(), *clips = json_array();
  if (!o || !clips) *bad = 1;
  for (int j = 0; !*bad && j < g->nclips; j++) {
    int c = p->clip_index[g->clip_off + j];
    append(clips, json_pack("{sIsI}", "id", (json_int_t)ids[c], "tokens", (json_int_t)tokens[c]),
           bad);
  }
  if (!*bad) {
    put(o, "wave", json_integer(wave), bad);
    put(o, "first_rank", json_integer(g->first_rank), bad);
    put(o, "size", json_integer(g->size), bad);
    put(o, "start_s", json_real(start), bad);
    put(o, "time_s", json_real(time), bad);
    put(o, "clips", json_incref(clips), bad);
  }
  json_decref(clips);
  return o;
}

// One plan with its simulated times.
static json_t *plan_json(const sched_config *cfg, const plan *p, const char *name,
                         const char *role, const int64_t *ids, const int64_t *tokens, int *bad) {
  plan_sim sim;
  double *start = malloc(((size_t)p->ngroups + 1) * sizeof *start);
  json_t *o = json_object(), *groups = json_array();
  if (!start || !o || !groups ||
      plan_simulate(p, tokens, &cfg->cost, &cfg->cluster, &sim, NULL, start))
    *bad = 1;
  for (int w = 0; !*bad && w < p->nwaves; w++)
    for (int gi = p->wave_off[w]; !*bad && gi < p->wave_off[w + 1]; gi++)
      if (p->groups[gi].nclips)
        append(groups, group_json(p, w, gi, start[gi],
                                  plan_group_time(p, gi, tokens, &cfg->cost, &cfg->cluster), ids,
                                  tokens, bad),
               bad);
  if (!*bad) {
    put(o, "name", json_string(name), bad);
    put(o, "role", json_string(role), bad);
    put(o, "step_s", json_real(sim.step_s), bad);
    put(o, "makespan_s", json_real(sim.makespan_s), bad);
    put(o, "zero_s", json_real(sim.zero_s), bad);  // train.zero: part of step_s, and of the
                                                   // makespan where waves are in lockstep
    put(o, "idle_frac", json_real(sim.idle_frac), bad);
    put(o, "groups", json_incref(groups), bad);
  }
  json_decref(groups);
  free(start);
  return o;
}

tsr_status sched_timeline_write(const sched_config *cfg, int64_t step, const int64_t *ids,
                                const int64_t *tokens, int n, const sched_result *r,
                                const char *path) {
  int bad = 0;
  plan pk;
  plan_init(&pk, cfg->cluster.ranks);
  tsr_status st = sched_baseline_packing(cfg, tokens, n, &pk);
  json_t *root = json_object(), *plans = json_array();
  if (!st && (!root || !plans)) bad = 1;
  if (!st && !bad) {
    put(root, "format", json_string("tessera-plan-timeline"), &bad);
    put(root, "version", json_integer(1), &bad);
    put(root, "step", json_integer((json_int_t)step), &bad);
    put(root, "ranks", json_integer(cfg->cluster.ranks), &bad);
    put(root, "gpus_per_node", json_integer(cfg->cluster.gpus_per_node), &bad);
    put(root, "mem_tokens", json_integer((json_int_t)cfg->cluster.mem_tokens), &bad);
    put(root, "static_cp", json_integer(r->static_cp), &bad);
    put(root, "lower_bound_s", json_real(r->lower_bound_s), &bad);
    put(root, "allreduce_s", json_real(cfg->cost.allreduce), &bad);
    append(plans, plan_json(cfg, &r->plan, sched_used_name(r->used), "planned", ids, tokens, &bad),
           &bad);
    append(plans, plan_json(cfg, &pk, "packing-only", "static", ids, tokens, &bad), &bad);
    put(root, "plans", json_incref(plans), &bad);
  }
  if (!st && bad) st = err_set(TSR_ENOMEM, "timeline: out of memory");
  if (!st && json_dump_file(root, path, JSON_COMPACT | JSON_REAL_PRECISION(17)))
    st = err_set(TSR_EIO, "cannot write the timeline %s", path);
  json_decref(plans);
  json_decref(root);
  plan_free(&pk);
  return st;
}
