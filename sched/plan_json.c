// sched/plan_json.c — JSON report of plans (jansson).
#include "sched/plan_json.h"

#include <jansson.h>
#include <stdlib.h>

#include "sched/placement.h"

struct sched_json {
  json_t *root;
  json_t *steps;  // borrowed from root
  int nlev;       // CP levels of the cluster
  cost_mask mask; // the model's mask and how groups place it (sched/placement.h)
};

// json_object_set_new that turns a failed allocation into a flag.
static void put(json_t *o, const char *k, json_t *v, int *bad) {
  if (!v || json_object_set_new(o, k, v)) *bad = 1;
}

static void append(json_t *a, json_t *v, int *bad) {
  if (!v || json_array_append_new(a, v)) *bad = 1;
}

// A masked ring group placed blockwise or in contiguous chunks (cost_mask.place): the
// segments of its clips each rank holds ("query_blocks"), the K/V tokens each must receive
// ("kv_recv_tokens") and its most loaded rank's work over the mean ("work_imbalance").
// Returns 1 when memory ran out.
static int put_placement(json_t *grp, const cost_mask *m, const plan *p, const plan_group *g,
                         const int64_t *tokens) {
  if (m->place == COST_PLACE_EVEN || m->kind == COST_MASK_FULL || g->size < 2 ||
      g->mode != COST_CP_RING || !g->nclips)
    return 0;
  size_t k = (size_t)g->size;
  double *work = malloc(k * sizeof *work);
  int64_t *recv = malloc(k * sizeof *recv), *segs = malloc(k * sizeof *segs);
  int64_t *L = malloc((size_t)g->nclips * sizeof *L);
  int bad = !work || !recv || !segs || !L;
  for (int c = 0; !bad && c < g->nclips; c++) L[c] = tokens[p->clip_index[g->clip_off + c]];
  if (!bad && placement_group(m, L, g->nclips, g->size, work, recv, segs, NULL)) bad = 1;
  json_t *qb = json_array(), *kv = json_array();
  double most = 0, sum = 0;
  for (size_t r = 0; !bad && r < k; r++) {
    append(qb, json_integer(segs[r]), &bad);
    append(kv, json_integer(recv[r]), &bad);
    sum += work[r], most = work[r] > most ? work[r] : most;
  }
  if (!bad) {
    put(grp, "placement", json_string(m->place == COST_PLACE_BLOCKWISE ? "blockwise" : "contiguous"), &bad);
    put(grp, "query_blocks", qb, &bad);
    put(grp, "kv_recv_tokens", kv, &bad);
    put(grp, "work_imbalance", json_real(sum > 0 ? most / (sum / (double)k) : 1.0), &bad);
  } else {
    json_decref(qb), json_decref(kv);
  }
  free(work), free(recv), free(segs), free(L);
  return bad;
}

tsr_status sched_json_begin(sched_json **out, const sched_config *cfg) {
  *out = NULL;
  sched_json *j = calloc(1, sizeof *j);
  if (!j) return err_set(TSR_ENOMEM, "json: out of memory");
  int bad = 0;
  j->root = json_object();
  j->steps = json_array();
  json_t *cost = json_object();
  if (!j->root || !j->steps || !cost) bad = 1;
  while ((1 << j->nlev) <= cfg->cluster.ranks) j->nlev++;
  j->mask = cfg->cost.mask;
  if (!bad) {
    put(j->root, "format", json_string("tessera-plan"), &bad);
    put(j->root, "version", json_integer(1), &bad);
    put(j->root, "ranks", json_integer(cfg->cluster.ranks), &bad);
    put(j->root, "gpus_per_node", json_integer(cfg->cluster.gpus_per_node), &bad);
    put(j->root, "mem_tokens", json_integer(cfg->cluster.mem_tokens), &bad);
    put(j->root, "max_clip_tokens", json_integer(cfg->max_clip_tokens), &bad);
    for (int i = 0; i < COST_NKEYS; i++)
      put(cost, cost_key_names[i], json_real(cost_model_get(&cfg->cost, i)), &bad);
    put(j->root, "cost", cost, &bad);
    cost = NULL;
    const cost_zero *z = &cfg->cost.zero;  // ZeRO's terms (sched/cost.h)
    json_t *zo = json_object();
    put(zo, "stage", json_integer(z->stage), &bad);
    put(zo, "params", json_real(z->params), &bad);
    put(zo, "block", json_real(z->block), &bad);
    put(zo, "buckets", json_integer(z->buckets), &bad);
    put(zo, "blocks", json_integer(z->blocks), &bad);
    put(zo, "step_s", json_real(cost_zero_step(&cfg->cost, cfg->cluster.ranks,
                                               cfg->cluster.gpus_per_node)), &bad);
    put(j->root, "zero", zo, &bad);
    put(j->root, "steps", json_incref(j->steps), &bad);
  }
  json_decref(cost);
  *out = j;
  if (bad) {
    sched_json_free(out);
    return err_set(TSR_ENOMEM, "json: out of memory");
  }
  return TSR_OK;
}

// {"ring": v[0], "ulysses": v[1], "hybrid": v[2]}.
static json_t *modes_json(const double *v, int *bad) {
  json_t *o = json_object();
  for (int m = 0; m < COST_CP_NMODES; m++)
    put(o, cost_cp_mode_name((cost_cp_mode)m), json_real(v[m]), bad);
  return o;
}

// {"1":clips at CP 1, "2":..., ...} for sizes with clips.
static json_t *cp_histogram(const int64_t *hist, int nlev, int *bad) {
  json_t *h = json_object();
  if (!h) *bad = 1;
  for (int l = 0; h && l < nlev; l++) {
    if (!hist[l]) continue;
    char key[16];
    snprintf(key, sizeof key, "%d", 1 << l);
    put(h, key, json_integer(hist[l]), bad);
  }
  return h;
}

static double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

tsr_status sched_json_add_step(sched_json *j, int step, const int64_t *ids,
                               const int64_t *tokens, int n, const sched_result *r) {
  int bad = 0;
  json_t *s = json_object(), *clips = json_array(), *waves = json_array();
  if (!s || !clips || !waves) bad = 1;
  for (int i = 0; !bad && i < n; i++) {
    json_t *c = json_object();
    put(c, "id", json_integer(ids[i]), &bad);
    put(c, "tokens", json_integer(tokens[i]), &bad);
    append(clips, c, &bad);
  }
  const plan *p = &r->plan;
  for (int w = 0; !bad && w < p->nwaves; w++) {
    json_t *wave = json_object(), *groups = json_array();
    for (int gi = p->wave_off[w]; !bad && gi < p->wave_off[w + 1]; gi++) {
      const plan_group *g = &p->groups[gi];
      json_t *grp = json_object(), *gc = json_array(), *gx = json_array();
      for (int k = 0; k < g->nclips; k++) {
        int c = p->clip_index[g->clip_off + k];
        append(gc, json_integer(ids[c]), &bad);
        append(gx, json_integer(c), &bad);
      }
      put(grp, "first_rank", json_integer(g->first_rank), &bad);
      put(grp, "size", json_integer(g->size), &bad);
      put(grp, "mode", json_string(cost_cp_mode_name((cost_cp_mode)g->mode)), &bad);
      put(grp, "clips", gc, &bad);
      put(grp, "clip_index", gx, &bad);
      if (!bad) bad = put_placement(grp, &j->mask, p, g, tokens);
      append(groups, grp, &bad);
    }
    put(wave, "groups", groups, &bad);
    append(waves, wave, &bad);
  }
  int64_t hist[SCHED_MAX_LEVELS] = {0};
  plan_cp_histogram(p, hist);
  put(s, "step", json_integer(step), &bad);
  put(s, "clips", clips, &bad);
  put(s, "waves", waves, &bad);
  put(s, "used", json_string(sched_used_name(r->used)), &bad);
  put(s, "predicted_s", json_real(r->predicted_s), &bad);
  put(s, "dynamic_s", json_real(r->dynamic_s), &bad);
  put(s, "packing_only_s", json_real(r->packing_only_s), &bad);
  put(s, "static_balanced_s", json_real(r->static_balanced_s), &bad);
  put(s, "static_mode_s", modes_json(r->static_mode_s, &bad), &bad);
  put(s, "lower_bound_s", json_real(r->lower_bound_s), &bad);
  put(s, "lower_bound_ref_s", json_real(r->lower_bound_ref_s), &bad);
  put(s, "efficiency", json_real(ratio(r->lower_bound_s, r->predicted_s)), &bad);
  put(s, "speedup_packing_only", json_real(ratio(r->packing_only_s, r->predicted_s)), &bad);
  put(s, "speedup_static_balanced", json_real(ratio(r->static_balanced_s, r->predicted_s)),
      &bad);
  put(s, "idle_frac", json_real(r->idle_frac), &bad);
  put(s, "zero_s", json_real(r->zero_s), &bad);
  put(s, "static_cp", json_integer(r->static_cp), &bad);
  put(s, "cp_histogram", cp_histogram(hist, j->nlev, &bad), &bad);
  put(s, "plan_ms", json_real(r->plan_ms), &bad);
  put(s, "plan_cpu_ms", json_real(r->plan_cpu_ms), &bad);
  append(j->steps, s, &bad);
  return bad ? err_set(TSR_ENOMEM, "json: out of memory") : TSR_OK;
}

tsr_status sched_json_write(sched_json *j, const sched_totals *t, const char *path) {
  int bad = 0;
  json_t *o = json_object();
  put(o, "steps", json_integer(t->steps), &bad);
  put(o, "predicted_s", json_real(t->predicted_s), &bad);
  put(o, "dynamic_s", json_real(t->dynamic_s), &bad);
  put(o, "packing_only_s", json_real(t->packing_only_s), &bad);
  put(o, "static_balanced_s", json_real(t->static_balanced_s), &bad);
  put(o, "static_mode_s", modes_json(t->static_mode_s, &bad), &bad);
  json_t *modes = json_object();
  for (int m = 0; m < COST_CP_NMODES; m++)
    put(modes, cost_cp_mode_name((cost_cp_mode)m), json_integer(t->mode_clips[m]), &bad);
  put(o, "mode_clips", modes, &bad);
  put(o, "lower_bound_s", json_real(t->lower_bound_s), &bad);
  put(o, "lower_bound_ref_s", json_real(t->lower_bound_ref_s), &bad);
  put(o, "efficiency", json_real(ratio(t->lower_bound_s, t->predicted_s)), &bad);
  put(o, "speedup_packing_only", json_real(ratio(t->packing_only_s, t->predicted_s)), &bad);
  put(o, "speedup_static_balanced", json_real(ratio(t->static_balanced_s, t->predicted_s)),
      &bad);
  put(o, "idle_frac", json_real(ratio(t->idle_s, t->predicted_s)), &bad);
  put(o, "zero_s", json_real(t->zero_s), &bad);
  put(o, "cp_histogram", cp_histogram(t->cp_hist, j->nlev, &bad), &bad);
  put(o, "plan_ms_mean", json_real(t->steps ? t->plan_ms / t->steps : 0), &bad);
  put(o, "plan_ms_max", json_real(t->plan_ms_max), &bad);
  put(o, "plan_cpu_ms_mean", json_real(t->steps ? t->plan_cpu_ms / t->steps : 0), &bad);
  put(o, "plan_cpu_ms_max", json_real(t->plan_cpu_ms_max), &bad);
  json_t *used = json_object();
  for (int u = 0; u < 3; u++) put(used, sched_used_name((sched_used)u), json_integer(t->used[u]), &bad);
  put(o, "used", used, &bad);
  put(j->root, "total", o, &bad);
  if (bad) return err_set(TSR_ENOMEM, "json: out of memory");
  if (json_dump_file(j->root, path, JSON_COMPACT | JSON_REAL_PRECISION(9)))
    return err_set(TSR_EIO, "--json %s: cannot write the plan file (check the directory "
                            "exists and is writable)", path);
  return TSR_OK;
}

void sched_json_free(sched_json **j) {
  if (!*j) return;
  json_decref((*j)->root);
  json_decref((*j)->steps);
  free(*j);
  *j = NULL;
}
