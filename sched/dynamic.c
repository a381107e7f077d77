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
// Instead each level keeps a tournament tree over its blocks: the least placement key (the
// block a new group would use; dyn_knode) and, over the groups still open for packing
// (dyn_node), the earliest end, the least end minus exposed ring time and the most memory
// room (to find the groups an item could join). A new group's block is the root's, O(1);
// the open groups are searched depth-first by a lower bound on the score of joining them,
// skipping subtrees that cannot beat the best placement so far or have no room; a
// placement sets one subtree of keys per level (tagged, not rewritten below its root) and
// the open groups it closes or opens, O(log^2 N + open groups closed x log N), stopping
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
  free(d->ktree);
  free(d->tree);
  free(d->stack);
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
  d->ktree = malloc(4 * nb * sizeof *d->ktree);
  d->tree = malloc(4 * nb * sizeof *d->tree);
  d->stack = malloc(2 * nb * sizeof *d->stack);
  d->g = malloc(nn * sizeof *d->g);
  d->group_of = malloc(nn * sizeof *d->group_of);
  if (!d->item_of || !d->im || !d->is1 || !d->is2 || !d->imem || !d->corder || !d->clev ||
      !d->bin_room || !d->bin_lev || !d->lev_bins || !d->lev_off || !d->lev_cnt || !d->lev_cap ||
      !d->item_group || !d->force || !d->t || !d->rsmin || !d->order || !d->perm || !d->off || !d->bmax ||
      !d->bsum || !d->buni || !d->toff || !d->tcap || !d->ktree || !d->tree || !d->stack ||
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
    while ((1 << d->tlg[l]) < cap) d->tlg[l]++;
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

// Marks open-group node x (an index into d->tree) as holding no open group; 0 if it held none.
static int dyn_close_node(dyn *d, int64_t x) {
  dyn_node *t = &d->tree[x];
  if (t->any == -1) return 0;  // an open group's room is >= 0 (its memory is <= M)
  for (int md = 0; md < COST_CP_NMODES; md++) t->end[md] = t->adj[md] = INFINITY, t->xmax[md] = 0;
  t->room = t->any = -1;
  return 1;
}

// Opens leaf i of level l for group gg, whose time and floor in each mode are tm, fl
// (cost_group_floors).
static void dyn_open_leaf(dyn *d, int l, int i, const dyn_group *gg, const double *tm,
                          const double *fl) {
  dyn_node *t = &d->tree[d->toff[l] + d->tcap[l] + i];
  for (int md = 0; md < d->lnm[l]; md++) t->end[md] = gg->start + tm[md], t->adj[md] = gg->start + fl[md];
  t->room = t->any = d->cl->mem_tokens - gg->mem;
  for (int md = 0; md < d->lnm[l]; md++)
    t->xmax[md] = tm[md] < INFINITY && t->end[md] > t->adj[md] ? t->end[md] - t->adj[md] : 0;
}

// Recomputes key node x of the tree at `base` from its children; 0 if it did not change.
static int dyn_kpull(dyn *d, int64_t base, int64_t x) {
  dyn_knode *p = &d->ktree[base + x];
  const dyn_knode *a = &d->ktree[base + 2 * x], *b = a + 1;
  const dyn_knode *m = b->key < a->key ? b : a;  // left (lower blocks) wins ties
  int same = m->key == p->key && m->idx == p->idx;
  p->key = m->key, p->idx = m->idx;
  return !same;
}

// Recomputes open-group node x of level l's tree from its children, leaving out leaves with
// less room than rth[l]; 0 if it did not change.
static int dyn_pull(dyn *d, int l, int64_t x) {
  static const dyn_node none = {{INFINITY, INFINITY, INFINITY}, {INFINITY, INFINITY, INFINITY},
                                -1, {0, 0, 0}, -1};
  const int nm = d->lnm[l];
  dyn_node *p = &d->tree[d->toff[l] + x];
  const dyn_node *a = &d->tree[d->toff[l] + 2 * x], *b = a + 1;
  int64_t any = b->any > a->any ? b->any : a->any;
  int same = any == p->any;
  p->any = any;
  if (2 * x >= d->tcap[l]) {  // leaves
    if (a->room < d->rth[l]) a = &none;
    if (b->room < d->rth[l]) b = &none;
  }
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

// Node x of level l's tree changed: refresh its ancestors' keys (keys != 0) or open groups
// (keys == 0) up to the first one left unchanged (a node is a function of its children's
// nodes of the same kind, so above it nothing changes).
static void dyn_pull_up(dyn *d, int l, int64_t x, int keys) {
  for (int64_t y = x >> 1; y >= 1; y >>= 1)
    if (!(keys ? dyn_kpull(d, d->toff[l], y) : dyn_pull(d, l, y))) break;
}

// Sets key node x of level l, of height h (its subtree holds leaves [(x << h) - tcap,
// (x + 1) << h) - tcap)), to `key` for every leaf of its subtree, and its ancestors. The
// subtree below x is not rewritten: x is tagged, and a tagged node's children are taken
// to be its key over their own subtrees; the tags on the path from the root to x are
// first handed down one level, so every node that a pull reads holds its true value.
static void dyn_kset(dyn *d, int l, int64_t x, int h, double key) {
  dyn_knode *kt = d->ktree + d->toff[l];
  const int64_t cap = d->tcap[l];
  const int H = d->tlg[l], dx = H - h;  // depth of x
  for (int s = dx; s >= 1; s--) {
    int64_t y = x >> s;
    if (!kt[y].tag) continue;
    int hc = H - (dx - s) - 1;  // height of y's children
    for (int64_t z = 2 * y; z <= 2 * y + 1; z++)
      kt[z] = (dyn_knode){kt[y].key, (int32_t)((z << hc) - cap), hc > 0};
    kt[y].tag = 0;
  }
  kt[x] = (dyn_knode){key, (int32_t)((x << h) - cap), h > 0};
  dyn_pull_up(d, l, x, 1);
}

// Closes every open group in the subtree of open-group node x of level l (room -1 there:
// none); 1 if there was one.
static int dyn_close_subtree(dyn *d, int l, int64_t x) {
  const int64_t base = d->toff[l];
  if (d->tree[base + x].any == -1) return 0;
  if (x >= d->tcap[l]) return dyn_close_node(d, base + x);
  dyn_close_subtree(d, l, 2 * x);
  dyn_close_subtree(d, l, 2 * x + 1);
  dyn_pull(d, l, x);
  return 1;
}

// Lets the open groups of level l with room >= r (r < rth[l]) into its inner nodes.
static void dyn_lower_room(dyn *d, int l, int64_t r) {
  const int64_t old = d->rth[l], leaf = d->tcap[l];
  const dyn_node *t = d->tree + d->toff[l] + leaf;
  d->rth[l] = r;
  for (int64_t i = 0; i < d->N >> l; i++)
    if (t[i].room >= r && t[i].room < old) dyn_pull_up(d, l, leaf + i, 0);
}

// Sets every rank of block (lev, i) to finish at `end` with last group g (which is open
// there: its times and floors per mode tm, fl), and updates the enclosing blocks and the
// trees of every block touched: below lev the blocks' last group is g, of another level,
// and above it the blocks are mixed, so only (lev, i) is open. At a level l below lev the
// blocks inside (lev, i) are the leaves of one subtree, of height lev - l, and all have
// the same key.
static void dyn_set_block(dyn *d, int lev, int i, double end, int32_t g, const double *tm,
                          const double *fl) {
  for (int l = 0; l <= lev; l++) {
    int lo = i << (lev - l), hi = (i + 1) << (lev - l);
    double span = (double)(1 << l);
    for (int j = d->off[l] + lo; j < d->off[l] + hi; j++) {
      d->bmax[j] = end;
      d->bsum[j] = end * span;
      d->buni[j] = g;
    }
  }
  int was_open[32];  // per level above lev: its block held an open group (its leaf is open)
  for (int l = lev + 1, a = i; l < d->nlev; l++) {
    a >>= 1;
    if (a >= d->N >> l) break;  // past the last whole block of 2^l (and of every larger size)
    int c = d->off[l - 1] + 2 * a, p = d->off[l] + a;
    d->bmax[p] = fmax(d->bmax[c], d->bmax[c + 1]);
    d->bsum[p] = d->bsum[c] + d->bsum[c + 1];
    was_open[l] = d->buni[p] >= 0 && d->g[d->buni[p]].lev == l;
    d->buni[p] = d->buni[c] == d->buni[c + 1] ? d->buni[c] : -2;
  }
  for (int l = 0; l < lev; l++) {
    int h = lev - l;
    int64_t x = (d->tcap[l] + ((int64_t)i << h)) >> h;
    dyn_kset(d, l, x, h, dyn_key(d, l, d->off[l] + (i << h)));
    if (dyn_close_subtree(d, l, x)) dyn_pull_up(d, l, x, 0);
  }
  int64_t x = d->tcap[lev] + i;
  dyn_kset(d, lev, x, 0, dyn_key(d, lev, d->off[lev] + i));
  dyn_open_leaf(d, lev, i, &d->g[g], tm, fl);
  dyn_pull_up(d, lev, x, 0);
  for (int l = lev + 1, a = i; l < d->nlev; l++) {
    a >>= 1;
    if (a >= d->N >> l) break;
    x = d->tcap[l] + a;
    dyn_kset(d, l, x, 0, dyn_key(d, l, d->off[l] + a));
    if (was_open[l] && dyn_close_node(d, d->toff[l] + x)) dyn_pull_up(d, l, x, 0);
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

// Whether a subtree whose score is at least `bound` may hold a placement no worse than the
// best so far (with a margin far above rounding).
static int dyn_may_beat(double bound, const dyn_bound *bd, const dyn_choice *best) {
  return bound - 1e-9 * (fabs(bound) + bd->A + bd->D) <= best->score;
}

// Depth-first branch and bound over level q.l's open groups, the child of least bound
// first: it skips subtrees whose bound cannot beat the best placement so far (with a margin
// far above rounding) or whose largest room is too small. Where ring steps stay hidden
// (X = 0) the bound is the exact score, and the search visits little more than the path to
// the earliest group with room. (A heap of the frontier, least bound first, visits about
// as many nodes at a higher cost per node.)
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
  // Groups with less room than the chunk cannot take the item: leave out those with less
  // than 7/8 of it from the bounds (lowering the level's threshold in steps, so that
  // chunks slowly shrinking over the heaviest-first order rarely rescan its leaves).
  if (q->chunk < d->rth[q->l]) dyn_lower_room(d, q->l, q->chunk - q->chunk / 8);
  int64_t nb = d->tcap[q->l], base = d->toff[q->l];
  dyn_subtree *st = d->stack;  // subtrees left to search, the better of two siblings on top
  int sp = 0;
  if (d->tree[base + 1].room >= q->chunk) st[sp++] = (dyn_subtree){dyn_node_bound(d, base + 1, &bd), 1};
  while (sp) {
    dyn_subtree top = st[--sp];
    if (!dyn_may_beat(top.bound, &bd, best)) continue;
    if (top.node >= nb) {
      dyn_try_merge(d, v, c, q, (int)(top.node - nb), best);
      continue;
    }
    dyn_subtree ch[2];
    int nc = 0;
    for (int64_t y = 2 * top.node; y <= 2 * top.node + 1; y++) {
      if (d->tree[base + y].room < q->chunk) continue;  // also: no open group there
      double bound = dyn_node_bound(d, base + y, &bd);
      if (dyn_may_beat(bound, &bd, best)) ch[nc++] = (dyn_subtree){bound, y};
    }
    if (nc == 2 && ch[1].bound < ch[0].bound) st[sp++] = ch[0], st[sp++] = ch[1];
    else for (int i = nc - 1; i >= 0; i--) st[sp++] = ch[i];
  }
}

// Rebuilds the trees of an empty timeline (no group: every leaf closed).
static void dyn_reset_trees(dyn *d) {
  for (int l = 0; l < d->nlev; l++) {
    int64_t nb = d->N >> l, cap = d->tcap[l], leaf = d->toff[l] + cap;
    for (int64_t i = 0; i < cap; i++) {
      d->tree[leaf + i].any = 0;  // so that dyn_close_node writes every field
      dyn_close_node(d, leaf + i);
      double key = i < nb ? dyn_key(d, l, d->off[l] + (int)i) : INFINITY;  // no block: never the least
      d->ktree[leaf + i] = (dyn_knode){key, (int32_t)i, 0};
    }
    d->rth[l] = INT64_MAX;
    for (int64_t x = cap - 1; x >= 1; x--) {
      d->ktree[d->toff[l] + x].tag = 0;
      dyn_kpull(d, d->toff[l], x);
      dyn_pull(d, l, x);
    }
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
      int nb = d->N >> l, ib = d->ktree[d->toff[l] + 1].idx;
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
    double tm[COST_CP_NMODES], fl[COST_CP_NMODES];
    gg->end = gg->start + cost_group_floors(d->cm, G, k, gg->m, gg->s1, gg->s2, tm, fl);
    d->item_group[c] = g;
    dyn_set_block(d, best.lev, best.i, gg->end, g, tm, fl);
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
