// sched/dynamic.c — the Dynamic-CP planner (algorithm in docs/plan.md).
//
// List scheduling of items (clips, or bundles of small clips packed first-fit), heaviest
// first, onto per-rank timelines: each item goes to the (CP size, aligned block) with
// the best score (earliest finish, optionally plus the rank-seconds it wastes), either
// as a new group or packed into the group that is last on exactly that block. A fixed
// list of variants (which CP sizes an item may use, the waste weight, bundling) is run
// and the one with the shortest makespan is kept. Everything is deterministic.
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

// The planner places items: single clips, or bundles of small clips packed together
// beforehand (first-fit decreasing) so that they share one microbatch's overhead.
typedef struct {
  const cost_model *cm;
  const sched_cluster *cl;
  const int64_t *L;        // (n)
  int n, N, nlev;          // clips, ranks, log2(N) + 1
  int ni;                  // items of the current run
  int32_t *item_of;        // (n) item of each clip
  int32_t *im;             // (n) clips per item
  double *is1, *is2;       // (n) sum L, sum L^2 per item
  int64_t *imem;           // (n * nlev) tokens a rank holds of item i at k = 2^l
  double *t;               // (n * nlev) time of item i alone at k = 2^l; INFINITY if it
                           // does not fit
  double *rsmin;           // (n) least rank-seconds k*t of each item
  int32_t *order;          // (n) items, heaviest (rsmin) first
  int32_t *corder;         // (n) clips, longest first (for bundling)
  int64_t *bin_room;       // (n) bundling scratch: room left per bundle
  int32_t *item_group;     // (n) group of each item in the current run
  int32_t *force;          // (n) CP level an item must use (-1: free), improvement phase
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
  double eps;     // an item may use CP sizes whose rank-seconds are <= (1 + eps) * least
  double mu;      // weight of the rank-seconds a placement wastes (idle + extra), per rank
  double bundle;  // bundle clips into items of <= bundle*M tokens per rank (0: no bundles)
  int up;         // a clip may join a bundle of a larger least CP size than its own
} dyn_variant;

// Most useful first (on the mixes of bench/plan): large batches on many ranks run only
// a prefix of the list, see DYN_BUDGET.
static const dyn_variant dyn_variants[] = {
    {0.01, 0.0, 0, 0}, {0.1, 0.0, 0, 0},  {0.03, 0.0, 0, 0}, {0.1, 1.0, 0, 0},
    {0.3, 0.0, 0, 0},  {0.1, 1.0, 1, 0},  {0.1, 1.0, 1, 1},  {0.03, 0.0, 1, 0},
    {0.0, 0.0, 0, 0},  {0.03, 1.0, 0, 0}, {0.3, 1.0, 0, 0},  {0.0, 0.0, 1, 0},
    {1e9, 1.0, 0.5, 0}, {0.0, 0.0, 1, 1}, {1e9, 0.3, 0, 0},  {1e9, 1.0, 0, 0},
};
// Candidate placements evaluated over all variants, at most (about 0.2 s on one
// core); a run evaluates about clips x 2N of them. At least DYN_MIN_VARIANTS run.
#define DYN_BUDGET 1e8
enum { DYN_MIN_VARIANTS = 4 };
// Most runs of the improvement phase (after the variants, within DYN_BUDGET).
enum { DYN_MAX_IMPROVE = 24 };
enum { DYN_NVARIANTS = sizeof dyn_variants / sizeof dyn_variants[0] };

static void dyn_free(dyn *d) {
  free(d->item_of);
  free(d->im);
  free(d->is1);
  free(d->is2);
  free(d->imem);
  free(d->corder);
  free(d->bin_room);
  free(d->item_group);
  free(d->force);
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
  size_t nb = 2 * (size_t)d->N, nl = (size_t)n * d->nlev;
  d->item_of = malloc((size_t)n * sizeof *d->item_of);
  d->im = malloc((size_t)n * sizeof *d->im);
  d->is1 = malloc((size_t)n * sizeof *d->is1);
  d->is2 = malloc((size_t)n * sizeof *d->is2);
  d->imem = malloc(nl * sizeof *d->imem);
  d->corder = malloc((size_t)n * sizeof *d->corder);
  d->bin_room = malloc((size_t)n * sizeof *d->bin_room);
  d->item_group = malloc((size_t)n * sizeof *d->item_group);
  d->force = malloc((size_t)n * sizeof *d->force);
  d->t = malloc(nl * sizeof *d->t);
  d->rsmin = malloc((size_t)n * sizeof *d->rsmin);
  d->order = malloc((size_t)n * sizeof *d->order);
  d->off = malloc((size_t)d->nlev * sizeof *d->off);
  d->bmax = malloc(nb * sizeof *d->bmax);
  d->bsum = malloc(nb * sizeof *d->bsum);
  d->buni = malloc(nb * sizeof *d->buni);
  d->g = malloc((size_t)n * sizeof *d->g);
  d->group_of = malloc((size_t)n * sizeof *d->group_of);
  if (!d->item_of || !d->im || !d->is1 || !d->is2 || !d->imem || !d->corder || !d->bin_room ||
      !d->item_group || !d->force ||
      !d->t || !d->rsmin || !d->order || !d->off || !d->bmax || !d->bsum || !d->buni || !d->g ||
      !d->group_of)
    return err_set(TSR_ENOMEM, "dynamic planner: out of memory for %d clips", n);
  for (int l = 0, o = 0; l < d->nlev; l++) {
    d->off[l] = o;
    o += d->N >> l;
  }
  for (int i = 0; i < n; i++) d->rsmin[i] = (double)tokens[i];
  return sched_order_desc(d->rsmin, n, d->corder);
}

// Forms the items of a run: with bundle > 0, clips are packed first-fit, longest first,
// into bundles of clips with the same least CP size k (or, with `up`, a least CP size of
// at most k), such that a rank of a k group holds at most bundle*M tokens of a bundle;
// a clip above that is an item of its own. Then prices every item at every CP size and
// orders them.
static tsr_status dyn_items(dyn *d, double bundle, int up) {
  int64_t cap = (int64_t)(bundle * (double)d->cl->mem_tokens);
  int nbins = 0;  // bundles are items 0..nbins-1; bin_room and imem[.. + 0] track them
  for (int j = 0; j < d->n; j++) {
    int c = d->corder[j];
    int lev = 0;
    while (cost_chunk_tokens(d->L[c], 1 << lev) > d->cl->mem_tokens) lev++;
    int64_t need = cost_chunk_tokens(d->L[c], 1 << lev);
    int it = -1;
    if (cap > 0 && need <= cap) {
      for (int b = 0; b < nbins && it < 0; b++) {  // im[b]: the bundle's level, for now
        int64_t need_b = cost_chunk_tokens(d->L[c], 1 << d->im[b]);
        if ((d->im[b] == lev || (up && d->im[b] > lev)) && d->bin_room[b] >= need_b) {
          it = b;
          need = need_b;
        }
      }
      if (it < 0) {
        it = nbins++;
        d->bin_room[it] = cap;
        d->im[it] = lev;
      }
      d->bin_room[it] -= need;
    }
    d->item_of[c] = it;  // -1: own item, numbered below
  }
  d->ni = nbins;
  for (int c = 0; c < d->n; c++)
    if (d->item_of[c] < 0) d->item_of[c] = d->ni++;
  for (int i = 0; i < d->ni; i++) {
    d->im[i] = 0;
    d->is1[i] = d->is2[i] = 0;
    for (int l = 0; l < d->nlev; l++) d->imem[(size_t)i * d->nlev + l] = 0;
  }
  for (int c = 0; c < d->n; c++) {
    int i = d->item_of[c];
    double L = (double)d->L[c];
    d->im[i]++;
    d->is1[i] += L;
    d->is2[i] += L * L;
    for (int l = 0; l < d->nlev; l++)
      d->imem[(size_t)i * d->nlev + l] += cost_chunk_tokens(d->L[c], 1 << l);
  }
  for (int i = 0; i < d->ni; i++) {
    d->rsmin[i] = INFINITY;
    for (int l = 0; l < d->nlev; l++) {
      int k = 1 << l;
      size_t x = (size_t)i * d->nlev + l;
      double t = INFINITY;
      if (d->imem[x] <= d->cl->mem_tokens)
        t = cost_group_time(d->cm, d->cl->gpus_per_node, k, d->im[i], d->is1[i], d->is2[i]);
      d->t[x] = t;
      if (k * t < d->rsmin[i]) d->rsmin[i] = k * t;
    }
  }
  for (int i = 0; i < d->ni; i++) d->force[i] = -1;
  return sched_order_desc(d->rsmin, d->ni, d->order);
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

// One list-scheduling run with variant v; returns the makespan, or NaN when an item has
// no placement with a finite score (only a cost model whose times overflow double can do
// that: the ranges of sched/cost.h rule it out, but a model built in code is not
// required to be checked, and a wrong guess here would index level -1).
static double dyn_run(dyn *d, const dyn_variant *v) {
  const int G = d->cl->gpus_per_node;
  const double N = (double)d->N;
  for (int j = 0; j < 2 * d->N - 1; j++) {
    d->bmax[j] = d->bsum[j] = 0;
    d->buni[j] = -1;
  }
  d->ng = 0;
  for (int oi = 0; oi < d->ni; oi++) {
    int c = d->order[oi];  // an item
    const double *tc = d->t + (size_t)c * d->nlev;
    const int64_t *mc = d->imem + (size_t)c * d->nlev;
    double limit = (1 + v->eps) * d->rsmin[c];
    double best = INFINITY;
    int best_lev = -1, best_i = -1, best_merge = 0;
    for (int l = 0; l < d->nlev; l++) {
      int k = 1 << l;
      if (d->force[c] >= 0 ? l != d->force[c] : !(tc[l] < INFINITY) || k * tc[l] > limit)
        continue;
      int64_t chunk = mc[l];
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
          double t = cost_group_time(d->cm, G, k, gg->m + d->im[c], gg->s1 + d->is1[c],
                                     gg->s2 + d->is2[c]);
          double fin = gg->start + t;
          double mscore = fin + v->mu * (k * (fin - gg->end) - d->rsmin[c]) / N;
          if (mscore <= score && mscore < best) {
            best = mscore;
            best_lev = l, best_i = i, best_merge = 1;
          }
        }
      }
    }
    // Every item fits at k = N (its clips each fit there, and bundles hold at most M
    // tokens), so best_lev < 0 means that every score was infinite or NaN.
    if (best_lev < 0) return NAN;
    int k = 1 << best_lev, j = d->off[best_lev] + best_i;
    int32_t g;
    if (best_merge) {
      g = d->buni[j];
    } else {
      g = d->ng++;
      d->g[g] = (dyn_group){best_i * k, best_lev, 0, 0, 0, 0, d->bmax[j], d->bmax[j]};
    }
    dyn_group *gg = &d->g[g];
    gg->m += d->im[c];
    gg->s1 += d->is1[c];
    gg->s2 += d->is2[c];
    gg->mem += mc[best_lev];
    gg->end = gg->start + cost_group_time(d->cm, G, k, gg->m, gg->s1, gg->s2);
    d->item_group[c] = g;
    dyn_set_block(d, best_lev, best_i, gg->end, g);
  }
  for (int c = 0; c < d->n; c++) d->group_of[c] = d->item_group[d->item_of[c]];
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

// The best run so far: its makespan, groups and clip -> group map.
typedef struct {
  double makespan;
  int ng;
  dyn_group *g;      // (n)
  int32_t *group_of; // (n)
} dyn_best;

static int dyn_keep(const dyn *d, double ms, dyn_best *b) {
  if (!(ms < b->makespan)) return 0;
  b->makespan = ms;
  b->ng = d->ng;
  memcpy(b->g, d->g, (size_t)d->ng * sizeof *b->g);
  memcpy(b->group_of, d->group_of, (size_t)d->n * sizeof *b->group_of);
  return 1;
}

// Improvement: for the heaviest items of the best variant, one at a time, force the CP
// size one level below or above the one it got, and keep the change when the makespan
// shrinks (hill climbing on the critical clips' CP sizes). At most `runs` runs.
static void dyn_improve(dyn *d, const dyn_variant *v, dyn_best *b, int runs) {
  double cur = dyn_run(d, v);
  if (isnan(cur)) return;  // groups of a failed run are incomplete
  dyn_keep(d, cur, b);
  for (int j = 0; j < d->ni && runs > 0; j++) {
    int c = d->order[j];
    int lev = d->g[d->item_group[c]].lev;
    for (int dir = -1; dir <= 1 && runs > 0; dir += 2) {
      int alt = lev + dir;
      if (alt < 0 || alt >= d->nlev || !(d->t[(size_t)c * d->nlev + alt] < INFINITY)) continue;
      int saved = d->force[c];
      d->force[c] = alt;
      double ms = dyn_run(d, v);
      runs--;
      if (ms < cur) {
        cur = ms;
        dyn_keep(d, ms, b);
        break;
      }
      d->force[c] = saved;
    }
  }
}

tsr_status sched_dynamic(const sched_config *cfg, const int64_t *tokens, int n, plan *out) {
  tsr_status st = sched_batch_check(cfg, tokens, n);
  if (st) return st;
  dyn d;
  st = dyn_init(&d, cfg, tokens, n);
  dyn_best b = {INFINITY, 0, malloc((size_t)n * sizeof *b.g),
                malloc((size_t)n * sizeof *b.group_of)};
  if (!st && (!b.g || !b.group_of)) st = err_set(TSR_ENOMEM, "dynamic planner: out of memory");
  // Deterministic effort: runs are sized by clips x ranks, never by the clock.
  double per_run = (double)n * 2.0 * d.N;
  int runs = (int)(DYN_BUDGET / per_run);
  if (runs < DYN_MIN_VARIANTS) runs = DYN_MIN_VARIANTS;
  int nvar = runs < DYN_NVARIANTS ? runs : DYN_NVARIANTS;
  int best_v = 0;
  for (int v = 0; v < nvar && !st; v++) {
    if ((st = dyn_items(&d, dyn_variants[v].bundle, dyn_variants[v].up))) break;
    if (dyn_keep(&d, dyn_run(&d, &dyn_variants[v]), &b)) best_v = v;
  }
  int left = runs - nvar < DYN_MAX_IMPROVE ? runs - nvar : DYN_MAX_IMPROVE;
  if (!st && left > 0) {
    st = dyn_items(&d, dyn_variants[best_v].bundle, dyn_variants[best_v].up);
    if (!st) dyn_improve(&d, &dyn_variants[best_v], &b, left);
  }
  if (!st && !(b.makespan < INFINITY))
    st = err_set(TSR_EINVAL,
                 "dynamic planner: no placement of the %d clips has a finite time under the cost "
                 "model (a = %g, b = %g, kv = %g, ovh = %g): its numbers overflow; use "
                 "coefficients within the ranges of docs/plan.md",
                 n, cfg->cost.a, cfg->cost.b, cfg->cost.kv, cfg->cost.ovh);
  if (!st) st = dyn_to_plan(&d, b.g, b.ng, b.group_of, out);
  free(b.g);
  free(b.group_of);
  dyn_free(&d);
  return st;
}
