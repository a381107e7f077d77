// sched/dynamic.c — the Dynamic-CP planner (algorithm in docs/plan.md).
//
// List scheduling of items (clips, or bundles of small clips packed first-fit), heaviest
// first, onto per-rank timelines: each item goes to the (CP size, aligned block) with
// the best score (earliest finish, optionally plus the rank-seconds it wastes), either
// as a new group or packed into the group that is last on exactly that block. A fixed
// list of variants (which CP sizes an item may use, the waste weight, bundling) is run
// and the one with the shortest makespan is kept. Everything is deterministic.
//
// Cost of a placement. Scanning every aligned block of every CP size costs O(N) per item
// (2N - 1 blocks), so a run was O(items x N): 6.5 s for 32,768 clips on 8,192 ranks.
// Instead each level keeps a tournament tree over its blocks (dyn_node): the least
// placement key (the block a new group would use) and, over the groups still open for
// packing, the earliest end, the least end minus exposed ring time and the most memory
// room (to find the groups an item could join). A new group's block is the root's, O(1);
// the open groups are searched best-first by a lower bound on the score of joining them,
// stopping when it cannot beat the best placement so far and skipping subtrees without
// room; a placement updates the nodes of the blocks it touches, O(k + log^2 N), stopping
// early where a node does not change. The exhaustive scan is kept as a reference
// (sched_dynamic_reference) and gives the same plans (tests/sched/test_index.c).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/dynamic_internal.h"
#include "sched/order.h"
#include "sched/sched.h"


// Most useful first (on the mixes of bench/plan): large batches on many ranks run only
// a prefix of the list, see DYN_BUDGET.
static const dyn_variant dyn_variants[] = {
    {0.01, 0.0, 0, 0}, {0.1, 0.0, 0, 0},  {0.03, 0.0, 0, 0}, {0.1, 1.0, 0, 0},
    {0.3, 0.0, 0, 0},  {0.1, 1.0, 1, 0},  {0.1, 1.0, 1, 1},  {0.03, 0.0, 1, 0},
    {0.0, 0.0, 0, 0},  {0.03, 1.0, 0, 0}, {0.3, 1.0, 0, 0},  {0.0, 0.0, 1, 0},
    {1e9, 1.0, 0.5, 0}, {0.0, 0.0, 1, 1}, {1e9, 0.3, 0, 0},  {1e9, 1.0, 0, 0},
};
// Work over all runs, at most, in units of clips x (levels + 8): a run with the trees
// costs about that many units (a placement reads a few nodes per allowed level and updates
// O(levels) nodes), about 0.1 us each on one core of the benchmark machine, so the budget
// is about 0.2 s of runs. 256 clips on 64 ranks get every variant and the full improvement
// phase (40 runs); 32,768 clips on 8,192 ranks and more DYN_MIN_VARIANTS runs, which on the
// benchmark mixes reach the same plans as more runs there (docs/plan.md).
#define DYN_BUDGET 2e6
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
  free(d->clev);
  free(d->bin_room);
  free(d->bin_lev);
  free(d->lev_bins);
  free(d->lev_off);
  free(d->lev_cnt);
  free(d->bin_tree);
  free(d->lev_cap);
  free(d->item_group);
  free(d->force);
  free(d->t);
  free(d->rsmin);
  free(d->order);
  free(d->perm);
  free(d->off);
  free(d->bmax);
  free(d->bsum);
  free(d->buni);
  free(d->toff);
  free(d->tcap);
  free(d->tree);
  free(d->heap);
  free(d->g);
  free(d->group_of);
}

// Least CP level of a clip of L tokens (it fits at the largest power of two <= N: sched_batch_check).
static int dyn_min_level(const dyn *d, int64_t L) {
  int lev = 0;
  while (cost_chunk_tokens(L, 1 << lev) > d->cl->mem_tokens) lev++;
  return lev;
}

static tsr_status dyn_init(dyn *d, const sched_config *cfg, const int64_t *tokens, int n,
                           int exhaustive) {
  memset(d, 0, sizeof *d);
  d->cm = &cfg->cost;
  d->cl = &cfg->cluster;
  d->L = tokens;
  d->n = n;
  d->N = cfg->cluster.ranks;
  d->exhaustive = exhaustive;
  d->nm = (cfg->cost.cp_modes & ~COST_MODES_RING) ? COST_CP_NMODES : 1;
  for (int l = 0; (1 << l) <= d->N; l++) {
    int k = 1 << l, G = cfg->cluster.gpus_per_node;
    int hybrid = (cfg->cost.cp_modes & COST_MODES_HYBRID) && G > 1 && !(G & (G - 1)) && k > G;
    d->lnm[l] = l == 0 ? 1 : d->nm < COST_CP_NMODES ? d->nm : hybrid ? COST_CP_NMODES : 2;
  }
  while ((1 << d->nlev) <= d->N) d->nlev++;
  size_t nb = 2 * (size_t)d->N, nl = (size_t)n * d->nlev, nn = (size_t)n, lv = (size_t)d->nlev;
  d->item_of = malloc(nn * sizeof *d->item_of);
  d->im = malloc(nn * sizeof *d->im);
  d->is1 = malloc(nn * sizeof *d->is1);
  d->is2 = malloc(nn * sizeof *d->is2);
  d->imem = malloc(nl * sizeof *d->imem);
  d->corder = malloc(nn * sizeof *d->corder);
  d->clev = malloc(nn * sizeof *d->clev);
  d->bin_room = malloc(nn * sizeof *d->bin_room);
  d->bin_lev = malloc(nn * sizeof *d->bin_lev);
  d->lev_bins = malloc(nn * sizeof *d->lev_bins);
  d->lev_off = calloc(lv + 1, sizeof *d->lev_off);
  d->lev_cnt = calloc(lv, sizeof *d->lev_cnt);
  d->lev_cap = calloc(lv, sizeof *d->lev_cap);
  d->item_group = malloc(nn * sizeof *d->item_group);
  d->force = malloc(nn * sizeof *d->force);
  d->t = malloc(nl * sizeof *d->t);
  d->rsmin = malloc(nn * sizeof *d->rsmin);
  d->order = malloc(nn * sizeof *d->order);
  d->perm = malloc(nl * sizeof(double));
  d->off = malloc(lv * sizeof *d->off);
  d->bmax = malloc(nb * sizeof *d->bmax);
  d->bsum = malloc(nb * sizeof *d->bsum);
  d->buni = malloc(nb * sizeof *d->buni);
  d->toff = malloc(lv * sizeof *d->toff);
  d->tcap = malloc(lv * sizeof *d->tcap);
  d->tree = malloc(4 * nb * sizeof *d->tree);
  d->heap = malloc(2 * nb * sizeof *d->heap);
  d->g = malloc(nn * sizeof *d->g);
  d->group_of = malloc(nn * sizeof *d->group_of);
  if (!d->item_of || !d->im || !d->is1 || !d->is2 || !d->imem || !d->corder || !d->clev ||
      !d->bin_room || !d->bin_lev || !d->lev_bins || !d->lev_off || !d->lev_cnt || !d->lev_cap ||
      !d->item_group || !d->force || !d->t || !d->rsmin || !d->order || !d->perm || !d->off || !d->bmax ||
      !d->bsum || !d->buni || !d->toff || !d->tcap || !d->tree || !d->heap ||
      !d->g || !d->group_of)
    return err_set(TSR_ENOMEM, "dynamic planner: out of memory for %d clips", n);
  for (int l = 0, o = 0; l < d->nlev; l++) {
    d->off[l] = o;
    o += d->N >> l;
  }
  for (int l = 0; l < d->nlev; l++) {
    int cap = 1;
    while (cap < d->N >> l) cap *= 2;
    d->tcap[l] = cap;
    d->toff[l] = l ? d->toff[l - 1] + 2 * d->tcap[l - 1] : 0;
  }
  // Bundling's per-level trees: a bundle of level v is opened by a clip of least level v.
  for (int c = 0; c < n; c++) d->lev_cnt[d->clev[c] = dyn_min_level(d, tokens[c])]++;
  size_t tree = 0;
  for (int v = 0; v < d->nlev; v++) {
    d->lev_off[v + 1] = d->lev_off[v] + d->lev_cnt[v];
    int cap = 1;
    while (cap < d->lev_cnt[v]) cap *= 2;
    d->lev_cap[v] = cap;
    tree += 2 * (size_t)cap;
  }
  d->bin_tree = malloc(tree * sizeof *d->bin_tree);
  if (!d->bin_tree) return err_set(TSR_ENOMEM, "dynamic planner: out of memory for %d clips", n);
  for (int i = 0; i < n; i++) d->rsmin[i] = (double)tokens[i];
  return sched_order_desc(d->rsmin, n, d->corder);
}

// ---- the timeline's trees ---------------------------------------------------------------
// Key of block j at level l (k = 2^l ranks): a new group there starts at bmax and its
// score is bmax + t + mu * (k * bmax - bsum + extra) / N, so among the blocks of a level
// the least key bmax + mu * (k * bmax - bsum) / N gives the least score.
static double dyn_key(const dyn *d, int l, int j) {
  return d->bmax[j] + d->mu * ((double)(1 << l) * d->bmax[j] - d->bsum[j]) / (double)d->N;
}

// Sets leaf i of level l from the block's state.
static void dyn_leaf(dyn *d, int l, int i) {
  int j = d->off[l] + i;
  int64_t x = d->toff[l] + d->tcap[l] + i;
  dyn_node *t = &d->tree[x];
  t->key = dyn_key(d, l, j);
  t->idx = i;
  int32_t g = d->buni[j];
  if (g >= 0 && d->g[g].lev == l) {  // open: last on every rank of exactly this block
    const dyn_group *gg = &d->g[g];
    double tm[COST_CP_NMODES], fl[COST_CP_NMODES];
    cost_group_floors(d->cm, d->cl->gpus_per_node, 1 << l, gg->m, gg->s1, gg->s2, tm, fl);
    for (int md = 0; md < d->lnm[l]; md++) t->end[md] = gg->start + tm[md], t->adj[md] = gg->start + fl[md];
    t->room = d->cl->mem_tokens - gg->mem;
    for (int md = 0; md < d->lnm[l]; md++)
      t->xmax[md] = tm[md] < INFINITY && t->end[md] > t->adj[md] ? t->end[md] - t->adj[md] : 0;
  } else {
    for (int md = 0; md < d->lnm[l]; md++) t->end[md] = t->adj[md] = INFINITY;
    t->room = -1;
    for (int md = 0; md < d->lnm[l]; md++) t->xmax[md] = 0;
  }
}

// Recomputes node x of the tree at `base` from its children; 0 if it did not change.
static int dyn_pull(dyn *d, int64_t base, int64_t x, int nm) {
  dyn_node *p = &d->tree[base + x];
  const dyn_node *a = &d->tree[base + 2 * x], *b = a + 1;
  const dyn_node *m = b->key < a->key ? b : a;  // left (lower blocks) wins ties
  int same = m->key == p->key && m->idx == p->idx;
  p->key = m->key, p->idx = m->idx;
  int64_t room = b->room > a->room ? b->room : a->room;
  same &= room == p->room;
  p->room = room;
  for (int md = 0; md < nm; md++) {
    double e = b->end[md] < a->end[md] ? b->end[md] : a->end[md];
    double j = b->adj[md] < a->adj[md] ? b->adj[md] : a->adj[md];
    double x = b->xmax[md] > a->xmax[md] ? b->xmax[md] : a->xmax[md];
    same &= e == p->end[md] && j == p->adj[md] && x == p->xmax[md];
    p->end[md] = e, p->adj[md] = j, p->xmax[md] = x;
  }
  return !same;
}

// Leaves [lo, hi) of level l changed: refresh them and their ancestors (up to the first
// ancestor left unchanged once the range is a single node).
static void dyn_level_update(dyn *d, int l, int lo, int hi) {
  int64_t nb = d->tcap[l], base = d->toff[l];
  for (int i = lo; i < hi; i++) dyn_leaf(d, l, i);
  for (int64_t a = (nb + lo) >> 1, b = (nb + hi - 1) >> 1; a >= 1; a >>= 1, b >>= 1) {
    int changed = 0;
    for (int64_t x = a; x <= b; x++) changed |= dyn_pull(d, base, x, d->lnm[l]);
    if (!changed) break;
  }
}

// Sets every rank of block (lev, i) to finish at `end` with last group g, and updates
// the enclosing blocks and the trees of every block touched.
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
  for (int l = lev + 1, a = i; l < d->nlev; l++) {
    a >>= 1;
    if (a >= d->N >> l) break;  // past the last whole block of 2^l (and of every larger size)
    int c = d->off[l - 1] + 2 * a, p = d->off[l] + a;
    d->bmax[p] = fmax(d->bmax[c], d->bmax[c + 1]);
    d->bsum[p] = d->bsum[c] + d->bsum[c + 1];
    d->buni[p] = d->buni[c] == d->buni[c + 1] ? d->buni[c] : -2;
  }
  for (int l = 0; l <= lev; l++) dyn_level_update(d, l, i << (lev - l), (i + 1) << (lev - l));
  for (int l = lev + 1, a = i; l < d->nlev; l++) {
    a >>= 1;
    if (a >= d->N >> l) break;
    dyn_level_update(d, l, a, a + 1);
  }
}

// ---- one run ------------------------------------------------------------------------------
// The best placement so far: least score, then lowest level, block, new before merge (the
// order in which a scan of levels, blocks and, per block, new group then merge meets
// them), so the trees and the exhaustive scan choose the same.
typedef struct {
  double score;
  int lev, i, merge;
} dyn_choice;

static void dyn_consider(dyn_choice *b, double score, int lev, int i, int merge) {
  if (score < b->score ||
      (score == b->score && b->lev >= 0 &&
       (lev < b->lev || (lev == b->lev && (i < b->i || (i == b->i && merge < b->merge))))))
    *b = (dyn_choice){score, lev, i, merge};
}

// Per-item quantities of one level, shared by its candidates.
typedef struct {
  int l, k;
  double tc, extra;  // time alone, rank-seconds above the least
  int64_t chunk;     // tokens a rank holds of the item
} dyn_cand;

// The merge of item c into the open group of block i of level q.l, if memory allows and
// it is no worse than a new group on that block.
static void dyn_try_merge(const dyn *d, const dyn_variant *v, int c, const dyn_cand *q, int i,
                          dyn_choice *best) {
  int j = d->off[q->l] + i;
  const dyn_group *gg = &d->g[d->buni[j]];
  if (gg->mem + q->chunk > d->cl->mem_tokens) return;
  const double N = (double)d->N;
  double start = d->bmax[j];
  double score = start + q->tc + v->mu * (q->k * start - d->bsum[j] + q->extra) / N;
  double t = cost_group_time(d->cm, d->cl->gpus_per_node, q->k, gg->m + d->im[c],
                             gg->s1 + d->is1[c], gg->s2 + d->is2[c]);
  double fin = gg->start + t;
  double mscore = fin + v->mu * (q->k * (fin - gg->end) - d->rsmin[c]) / N;
  if (mscore <= score) dyn_consider(best, mscore, q->l, i, 1);
}

// Lower bound on the score of joining item c to any open group of tree node x of level
// q.l. Joining a group of k ranks adds at least A = (a*S1 + b*S2)/k to its compute in every
// mode (S1, S2: the item's sums), and mode m's exposed communication shrinks by at most
// X_m, the part of it the group could hide, and by at most D_m, what the item can take off
// (for the ring (k-1)*max(0, -delta), delta = kv*S1/(k*bw) - b*S2/k^2 its per-step
// change), so the group ends at least at min over m of (start + T_m + A - min(X_m, D)),
// D = max D_m, which is >= A + max(start + min_m (T_m - X_m), end - D). With oend the
// subtree's earliest end and oadj its least start + min_m (T_m - X_m) (dyn_floor):
// score >= A + max(oadj, oend - D) + mu*(k*dT - rsmin)/N, where dT >= A - D; also (the
// group ends at start + min_m T_m) dT >= A - max_m (min(X_m, D_m) - G_m) >= A - max_m
// (min(xmax_m, D_m) - G_m), xmax_m the subtree's largest X_m: the waste term is then exact
// where the fastest mode's communication stays hidden, which matters when mu > 0.
typedef struct {
  double A, D, mu, k, rsmin, N;
  double Dm[COST_CP_NMODES];  // D of each mode (cost_item_shrink)
  double Gm[COST_CP_NMODES];  // what the item adds to each mode's exposed time for certain
  int nm;                     // modes of the level (dyn.lnm)
} dyn_bound;

// The least over the modes of A + G_m + max(oadj_m, oend_m - D_m), plus the waste term.
static double dyn_node_bound(const dyn *d, int64_t node, const dyn_bound *bd) {
  const dyn_node *t = &d->tree[node];
  double lo = INFINITY;
  for (int md = 0; md < bd->nm; md++) {
    double adj = t->end[md] - bd->Dm[md];
    if (t->adj[md] > adj) adj = t->adj[md];
    adj += bd->Gm[md];
    if (adj < lo) lo = adj;
  }
  double dd = 0;
  for (int md = 0; md < bd->nm; md++) {
    double x = (t->xmax[md] < bd->Dm[md] ? t->xmax[md] : bd->Dm[md]) - bd->Gm[md];
    if (x > dd) dd = x;
  }
  if (dd > bd->D) dd = bd->D;
  return lo + bd->A + bd->mu * (bd->k * (bd->A - dd) - bd->rsmin) / bd->N;
}

// Best-first branch and bound over level q.l's open groups, least bound first: it stops
// when the least bound left cannot beat the best placement so far (with a margin far above
// rounding) and skips subtrees whose largest room is too small. Where ring steps stay
// hidden (X = 0) the bound is the exact score, and the search visits little more than the
// path to the earliest group with room.
static void dyn_search_merges(dyn *d, const dyn_variant *v, int c, const dyn_cand *q,
                              dyn_choice *best) {
  const double k = (double)q->k;
  double can, per_item;  // per_item: D of the bound (the ring's, or hybrid's when larger)
  cost_group_shrink(d->cm, d->cl->gpus_per_node, q->k, 0, 0, d->is1[c], d->is2[c], &can, &per_item);
  dyn_bound bd = {(d->cm->a * d->is1[c] + d->cm->b * d->is2[c]) / k, per_item, v->mu, k,
                  d->rsmin[c], (double)d->N, {0, 0, 0}, {0, 0, 0}, d->lnm[q->l]};
  if (d->nm > 1)
    cost_item_shrink(d->cm, d->cl->gpus_per_node, q->k, d->is1[c], d->is2[c], bd.Dm, bd.Gm);
  else bd.Dm[0] = per_item;  // ring alone: the ring's
  int64_t nb = d->tcap[q->l], base = d->toff[q->l];
  dyn_heap_item *h = d->heap;  // min-heap by bound
  int hn = 0;
  if (d->tree[base + 1].room >= q->chunk) h[hn++] = (dyn_heap_item){dyn_node_bound(d, base + 1, &bd), 1};
  while (hn) {
    dyn_heap_item top = h[0];
    if (!(top.bound - 1e-9 * (fabs(top.bound) + bd.A + bd.D) <= best->score)) break;
    h[0] = h[--hn];  // pop
    for (int p = 0;;) {
      int a = 2 * p + 1, m = p;
      if (a < hn && h[a].bound < h[m].bound) m = a;
      if (a + 1 < hn && h[a + 1].bound < h[m].bound) m = a + 1;
      if (m == p) break;
      dyn_heap_item t = h[p];
      h[p] = h[m], h[m] = t, p = m;
    }
    if (top.node >= nb) {
      dyn_try_merge(d, v, c, q, (int)(top.node - nb), best);
      continue;
    }
    for (int64_t y = 2 * top.node; y <= 2 * top.node + 1; y++) {
      if (d->tree[base + y].room < q->chunk) continue;  // also: no open group there
      double bound = dyn_node_bound(d, base + y, &bd);
      if (!(bound - 1e-9 * (fabs(bound) + bd.A + bd.D) <= best->score)) continue;
      int p = hn++;  // push
      h[p] = (dyn_heap_item){bound, y};
      while (p > 0 && h[(p - 1) / 2].bound > h[p].bound) {
        dyn_heap_item t = h[p];
        h[p] = h[(p - 1) / 2], h[(p - 1) / 2] = t, p = (p - 1) / 2;
      }
    }
  }
}

// Rebuilds the trees of an empty timeline.
static void dyn_reset_trees(dyn *d) {
  for (int l = 0; l < d->nlev; l++) {
    int64_t nb = d->N >> l, cap = d->tcap[l];
    for (int i = 0; i < nb; i++) dyn_leaf(d, l, i);
    for (int64_t i = nb; i < cap; i++)  // no block: never the least key, never open
      d->tree[d->toff[l] + cap + i] = (dyn_node){INFINITY, {INFINITY, INFINITY, INFINITY},
                                                 {INFINITY, INFINITY, INFINITY}, -1, (int32_t)i, {0, 0, 0}};
    for (int64_t x = cap - 1; x >= 1; x--) dyn_pull(d, d->toff[l], x, d->lnm[l]);
  }
}

// Latest finish over all ranks: over the maximal whole blocks that tile [0, N) (one per bit
// of N, largest first; the root alone when N is a power of two).
static double dyn_makespan(const dyn *d) {
  double ms = 0;
  for (int l = d->nlev - 1, r = 0; l >= 0; l--)
    if (d->N & (1 << l)) {
      double e = d->bmax[d->off[l] + (r >> l)];
      if (e > ms) ms = e;
      r += 1 << l;
    }
  return ms;
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
  d->mu = v->mu;
  d->ng = 0;
  dyn_reset_trees(d);
  for (int oi = 0; oi < d->ni; oi++) {
    int c = d->order[oi];  // an item
    const double *tc = d->t + (size_t)c * d->nlev;
    const int64_t *mc = d->imem + (size_t)c * d->nlev;
    double limit = (1 + v->eps) * d->rsmin[c];
    dyn_choice best = {INFINITY, -1, -1, 0};
    // New groups at every allowed level first, then the merges: dyn_consider's order is
    // total, so the choice does not depend on the order candidates are met in, and the
    // merge searches start from the best new group of all levels and prune more.
    dyn_cand qs[32];
    int nq = 0;
    for (int l = 0; l < d->nlev; l++) {
      int k = 1 << l;
      if (d->force[c] >= 0 ? l != d->force[c] : !(tc[l] < INFINITY) || k * tc[l] > limit)
        continue;
      dyn_cand q = {l, k, tc[l], k * tc[l] - d->rsmin[c], mc[l]};
      int nb = d->N >> l, ib = d->tree[d->toff[l] + 1].idx;
      if (d->exhaustive) {  // the reference: every block's key, then every open group
        ib = 0;
        for (int i = 1; i < nb; i++)
          if (dyn_key(d, l, d->off[l] + i) < dyn_key(d, l, d->off[l] + ib)) ib = i;
      }
      int j = d->off[l] + ib;
      double start = d->bmax[j];
      dyn_consider(&best, start + q.tc + v->mu * (k * start - d->bsum[j] + q.extra) / N, l, ib, 0);
      qs[nq++] = q;
    }
    for (int iq = 0; iq < nq; iq++) {
      const dyn_cand *q = &qs[iq];
      if (d->exhaustive) {
        for (int i = 0; i < d->N >> q->l; i++) {
          int32_t g = d->buni[d->off[q->l] + i];
          if (g >= 0 && d->g[g].lev == q->l) dyn_try_merge(d, v, c, q, i, &best);
        }
      } else {
        dyn_search_merges(d, v, c, q, &best);
      }
    }
    // Every item fits at the largest level (its clips each fit there, and bundles hold at most M
    // tokens), so best.lev < 0 means that every score was infinite or NaN.
    if (best.lev < 0) return NAN;
    int k = 1 << best.lev, j = d->off[best.lev] + best.i;
    int32_t g;
    if (best.merge) {
      g = d->buni[j];
    } else {
      g = d->ng++;
      d->g[g] = (dyn_group){best.i * k, best.lev, 0, 0, 0, 0, d->bmax[j], d->bmax[j]};
    }
    dyn_group *gg = &d->g[g];
    gg->m += d->im[c];
    gg->s1 += d->is1[c];
    gg->s2 += d->is2[c];
    gg->mem += mc[best.lev];
    gg->end = gg->start + cost_group_time(d->cm, G, k, gg->m, gg->s1, gg->s2);
    d->item_group[c] = g;
    dyn_set_block(d, best.lev, best.i, gg->end, g);
  }
  for (int c = 0; c < d->n; c++) d->group_of[c] = d->item_group[d->item_of[c]];
  return dyn_makespan(d);
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

// Runs a batch allows: DYN_BUDGET over the units of one run, and never fewer than the
// planner made before the trees (DYN_SCAN_BUDGET candidate placements of clips x 2N each),
// so that on any batch the runs are a superset of its runs (the same variants, the same
// improvement steps, then more) and the plan is never slower than its plan was; at least
// DYN_MIN_VARIANTS. Sized by the batch and the cluster, never by the clock, so plans are
// deterministic.
#define DYN_SCAN_BUDGET 1e8
static int dyn_runs(int n, int nlev, int N) {
  double runs = DYN_BUDGET / ((double)n * (nlev + 8));
  double scan_runs = DYN_SCAN_BUDGET / ((double)n * 2.0 * N);
  if (scan_runs > runs) runs = scan_runs;
  return runs < DYN_MIN_VARIANTS ? DYN_MIN_VARIANTS : runs > 1e6 ? 1000000 : (int)runs;
}

static tsr_status dyn_plan(const sched_config *cfg, const int64_t *tokens, int n, plan *out,
                           int exhaustive) {
  tsr_status st = sched_batch_check(cfg, tokens, n);
  if (st) return st;
  dyn d;
  st = dyn_init(&d, cfg, tokens, n, exhaustive);
  dyn_best b = {INFINITY, 0, malloc((size_t)n * sizeof *b.g),
                malloc((size_t)n * sizeof *b.group_of)};
  if (!st && (!b.g || !b.group_of)) st = err_set(TSR_ENOMEM, "dynamic planner: out of memory");
  int runs = dyn_runs(n, d.nlev, d.N);
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
  if (!st) plan_choose_modes(out, tokens, &cfg->cost, &cfg->cluster);
  free(b.g);
  free(b.group_of);
  dyn_free(&d);
  return st;
}

tsr_status sched_dynamic(const sched_config *cfg, const int64_t *tokens, int n, plan *out) {
  return dyn_plan(cfg, tokens, n, out, 0);
}

tsr_status sched_dynamic_reference(const sched_config *cfg, const int64_t *tokens, int n,
                                   plan *out) {
  return dyn_plan(cfg, tokens, n, out, 1);
}
