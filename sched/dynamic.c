// sched/dynamic.c — the Dynamic-CP planner (algorithm in docs/plan.md).
//
// List scheduling of clips, heaviest first, onto per-rank timelines: each clip goes to
// the (CP size, aligned block) that finishes it earliest, either as a new group or
// packed into the group that is last on exactly that block. A few variants (which CP
// sizes a clip may use, how much idle time a placement may leave) are run and the one
// with the shortest simulated step is kept. Everything is deterministic.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/order.h"
#include "sched/sched.h"

typedef struct {
  int32_t first, lev, m;   // block [first, first + 2^lev), clips in it
  double s1, s2;           // sum L, sum L^2 of its clips
  int64_t mem;             // tokens a rank holds
  double start, end;       // on the list schedule's timeline
} dyn_group;

typedef struct {
  const cost_model *cm;
  const sched_cluster *cl;
  const int64_t *L;        // (n)
  int n, N, nlev;          // clips, ranks, log2(N) + 1
  double *t;               // (n * nlev) time of clip i alone at k = 2^l; INFINITY if it
                           // does not fit
  double *rsmin;           // (n) least rank-seconds k*t of each clip
  int32_t *order;          // (n) heaviest (rsmin) first
  // Timeline of the current run: level l has N >> l aligned blocks, stored from off[l].
  int32_t *off;            // (nlev)
  double *bmax;            // (2N - 1) latest finish of a rank of the block
  double *bsum;            // (2N - 1) sum of the ranks' finish times
  int32_t *buni;           // (2N - 1) group last on every rank of the block; -1 none, -2 mixed
  dyn_group *g;            // (n) groups of the current run
  int ng;
  int32_t *group_of;       // (n) group of each clip in the current run
} dyn;

// A variant of the list scheduler.
typedef struct {
  double eps;  // a clip may use CP sizes whose rank-seconds are <= (1 + eps) * least
  double mu;   // weight of the rank-seconds a placement wastes (idle + extra), per rank
} dyn_variant;

static const dyn_variant dyn_variants[] = {
    {0.0, 0.0},  {0.01, 0.0}, {0.03, 0.0}, {0.1, 0.0}, {0.3, 0.0},
    {0.03, 1.0}, {0.1, 1.0},  {0.3, 1.0},  {1e9, 1.0}, {1e9, 0.3},
};
enum { DYN_NVARIANTS = sizeof dyn_variants / sizeof dyn_variants[0] };

static void dyn_free(dyn *d) {
  free(d->t);
  free(d->rsmin);
  free(d->order);
  free(d->off);
  free(d->bmax);
  free(d->bsum);
  free(d->buni);
  free(d->g);
  free(d->group_of);
}

static tsr_status dyn_init(dyn *d, const sched_config *cfg, const int64_t *tokens, int n) {
  memset(d, 0, sizeof *d);
  d->cm = &cfg->cost;
  d->cl = &cfg->cluster;
  d->L = tokens;
  d->n = n;
  d->N = cfg->cluster.ranks;
  while ((1 << d->nlev) <= d->N) d->nlev++;
  size_t nb = 2 * (size_t)d->N;
  d->t = malloc((size_t)n * d->nlev * sizeof *d->t);
  d->rsmin = malloc((size_t)n * sizeof *d->rsmin);
  d->order = malloc((size_t)n * sizeof *d->order);
  d->off = malloc((size_t)d->nlev * sizeof *d->off);
  d->bmax = malloc(nb * sizeof *d->bmax);
  d->bsum = malloc(nb * sizeof *d->bsum);
  d->buni = malloc(nb * sizeof *d->buni);
  d->g = malloc((size_t)n * sizeof *d->g);
  d->group_of = malloc((size_t)n * sizeof *d->group_of);
  if (!d->t || !d->rsmin || !d->order || !d->off || !d->bmax || !d->bsum || !d->buni ||
      !d->g || !d->group_of)
    return err_set(TSR_ENOMEM, "dynamic planner: out of memory for %d clips", n);
  for (int l = 0, o = 0; l < d->nlev; l++) {
    d->off[l] = o;
    o += d->N >> l;
  }
  for (int i = 0; i < n; i++) {
    d->rsmin[i] = INFINITY;
    for (int l = 0; l < d->nlev; l++) {
      int k = 1 << l;
      double t = INFINITY;
      if (cost_chunk_tokens(tokens[i], k) <= d->cl->mem_tokens)
        t = cost_clip_time(d->cm, d->cl->gpus_per_node, k, tokens[i]);
      d->t[(size_t)i * d->nlev + l] = t;
      if (k * t < d->rsmin[i]) d->rsmin[i] = k * t;
    }
  }
  return sched_order_desc(d->rsmin, n, d->order);
}

// Sets every rank of block (lev, i) to finish at `end` with last group g, and updates
// the enclosing blocks.
static void dyn_set_block(dyn *d, int lev, int i, double end, int32_t g) {
  for (int l = 0; l <= lev; l++) {
    int lo = i << (lev - l), hi = (i + 1) << (lev - l);
    double span = (double)(1 << l);
    for (int j = d->off[l] + lo; j < d->off[l] + hi; j++) {
      d->bmax[j] = end;
      d->bsum[j] = end * span;
      d->buni[j] = g;
    }
  }
  for (int l = lev + 1; l < d->nlev; l++) {
    i >>= 1;
    int c = d->off[l - 1] + 2 * i, p = d->off[l] + i;
    d->bmax[p] = fmax(d->bmax[c], d->bmax[c + 1]);
    d->bsum[p] = d->bsum[c] + d->bsum[c + 1];
    d->buni[p] = d->buni[c] == d->buni[c + 1] ? d->buni[c] : -2;
  }
}

// One list-scheduling run with variant v; returns the makespan.
static double dyn_run(dyn *d, const dyn_variant *v) {
  const int G = d->cl->gpus_per_node;
  const double N = (double)d->N;
  for (int j = 0; j < 2 * d->N - 1; j++) {
    d->bmax[j] = d->bsum[j] = 0;
    d->buni[j] = -1;
  }
  d->ng = 0;
  for (int oi = 0; oi < d->n; oi++) {
    int c = d->order[oi];
    const double *tc = d->t + (size_t)c * d->nlev;
    double L = (double)d->L[c], limit = (1 + v->eps) * d->rsmin[c];
    double best = INFINITY;
    int best_lev = -1, best_i = -1, best_merge = 0;
    for (int l = 0; l < d->nlev; l++) {
      int k = 1 << l;
      if (!(tc[l] < INFINITY) || k * tc[l] > limit) continue;
      int64_t chunk = cost_chunk_tokens(d->L[c], k);
      double extra = k * tc[l] - d->rsmin[c];
      for (int i = 0, nb = d->N >> l; i < nb; i++) {
        int j = d->off[l] + i;
        double start = d->bmax[j];
        double score = start + tc[l] + v->mu * (k * start - d->bsum[j] + extra) / N;
        if (score < best) {
          best = score;
          best_lev = l, best_i = i, best_merge = 0;
        }
        int32_t g = d->buni[j];
        if (g >= 0 && d->g[g].lev == l && d->g[g].mem + chunk <= d->cl->mem_tokens) {
          const dyn_group *gg = &d->g[g];
          double t = cost_group_time(d->cm, G, k, gg->m + 1, gg->s1 + L, gg->s2 + L * L);
          double fin = gg->start + t;
          double mscore = fin + v->mu * (k * (fin - gg->end) - d->rsmin[c]) / N;
          if (mscore <= score && mscore < best) {
            best = mscore;
            best_lev = l, best_i = i, best_merge = 1;
          }
        }
      }
    }
    // Every clip fits at k = N (checked by sched_batch_check), so best_lev >= 0.
    int k = 1 << best_lev, j = d->off[best_lev] + best_i;
    int32_t g;
    if (best_merge) {
      g = d->buni[j];
    } else {
      g = d->ng++;
      d->g[g] = (dyn_group){best_i * k, best_lev, 0, 0, 0, 0, d->bmax[j], d->bmax[j]};
    }
    dyn_group *gg = &d->g[g];
    gg->m++;
    gg->s1 += L;
    gg->s2 += L * L;
    gg->mem += cost_chunk_tokens(d->L[c], k);
    gg->end = gg->start + cost_group_time(d->cm, G, k, gg->m, gg->s1, gg->s2);
    d->group_of[c] = g;
    dyn_set_block(d, best_lev, best_i, gg->end, g);
  }
  return d->bmax[d->off[d->nlev - 1]];
}

// Turns the groups of a run into waves: groups in start order, each in the wave after
// the last wave any of its ranks is in.
static tsr_status dyn_to_plan(const dyn *d, const dyn_group *groups, int ng,
                              const int32_t *group_of, plan *out) {
  double *key = malloc(((size_t)ng + 1) * sizeof *key);
  int32_t *ord = malloc(((size_t)ng + 1) * sizeof *ord);
  int32_t *last = malloc((size_t)d->N * sizeof *last);
  plan_slot *slots = malloc(((size_t)ng + 1) * sizeof *slots);
  tsr_status st = TSR_OK;
  if (!key || !ord || !last || !slots) st = err_set(TSR_ENOMEM, "dynamic planner: out of memory");
  if (!st) {
    for (int g = 0; g < ng; g++) key[g] = -groups[g].start;  // ascending start, ties by id
    st = sched_order_desc(key, ng, ord);
  }
  if (!st) {
    for (int r = 0; r < d->N; r++) last[r] = -1;
    for (int j = 0; j < ng; j++) {
      const dyn_group *g = &groups[ord[j]];
      int k = 1 << g->lev, w = 0;
      for (int r = g->first; r < g->first + k; r++)
        if (last[r] + 1 > w) w = last[r] + 1;
      for (int r = g->first; r < g->first + k; r++) last[r] = w;
      slots[ord[j]] = (plan_slot){w, g->first, k};
    }
    st = plan_build(out, slots, ng, group_of, d->n);
  }
  free(key);
  free(ord);
  free(last);
  free(slots);
  return st;
}

tsr_status sched_dynamic(const sched_config *cfg, const int64_t *tokens, int n, plan *out) {
  tsr_status st = sched_batch_check(cfg, tokens, n);
  if (st) return st;
  dyn d;
  st = dyn_init(&d, cfg, tokens, n);
  dyn_group *best_g = malloc((size_t)n * sizeof *best_g);
  int32_t *best_of = malloc((size_t)n * sizeof *best_of);
  if (!st && (!best_g || !best_of)) st = err_set(TSR_ENOMEM, "dynamic planner: out of memory");
  double best = INFINITY;
  int best_ng = 0;
  for (int v = 0; v < DYN_NVARIANTS && !st; v++) {
    double ms = dyn_run(&d, &dyn_variants[v]);
    if (ms < best) {
      best = ms;
      best_ng = d.ng;
      memcpy(best_g, d.g, (size_t)d.ng * sizeof *best_g);
      memcpy(best_of, d.group_of, (size_t)n * sizeof *best_of);
    }
  }
  if (!st) st = dyn_to_plan(&d, best_g, best_ng, best_of, out);
  free(best_g);
  free(best_of);
  dyn_free(&d);
  return st;
}
