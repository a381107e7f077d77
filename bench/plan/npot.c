// bench/plan/npot.c — would CP groups of any size gain over power-of-two groups? (a
// measurement for docs/plan.md, driven by bench/plan/npot.sh; not a test).
//
// The same list-scheduling heuristic as sched/dynamic.c (items heaviest first, each to the
// block with the best score: earliest finish plus mu x wasted rank-seconds, or packed into
// the group last on exactly that block; the shortest makespan over a list of (eps, mu)
// variants), run twice on the same batch with only the family of blocks changed:
//   pow2  aligned power-of-two blocks [i*k, (i+1)*k) (the planner's family)
//   any   every contiguous block [s, s+k), any k in 1..N, any start s
// by exhaustive scans over per-rank timelines (window max and sum per size: O(N^2) per
// item, fine up to about a thousand ranks). A block uses bw_intra only when it lies inside one node (both families; an
// aligned power-of-two block of <= G ranks always does). Bundling and the improvement
// phase of the planner are left out of both, so the comparison isolates the block family.
// Also a bound that needs no planner: the lower bound of sched/bound.c with the longest
// clip's best time taken over every k (not only powers of two) holds for plans of any
// group shape, so no any-size plan beats it; (production plan) / (that bound) - 1 bounds
// what any-size groups could gain at all.
//   npot --mix SPEC --ranks N --clips B --batches S [--cost FILE] [--bound-only 1]
// prints one JSON line (--bound-only 1: the planner against the any-shape bound only, for
// clusters where the O(N^2) scans take too long).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/plan/plan_input.h"
#include "sched/lengths.h"
#include "sched/sched.h"

typedef struct {
  int first, k, m;
  double s1, s2, start, end;
  int64_t mem;
  int open;  // still the last group on every one of its ranks
} grp;

typedef struct {
  const cost_model *cm;
  const sched_cluster *cl;
  int N, any;
} fam;

static int in_family(const fam *f, int k) { return f->any || !(k & (k - 1)); }

// Time of a group of k ranks starting at rank s holding clips with sums (m, s1, s2):
// bw_intra only inside one node.
static double gtime(const fam *f, int s, int k, int m, double s1, double s2) {
  int G = f->cl->gpus_per_node;
  int inside = s / G == (s + k - 1) / G;
  return cost_group_time(f->cm, inside ? k : 0, k, m, s1, s2);
}

// Least rank-seconds of a clip alone over the family's feasible sizes (inside a node where
// the size allows: the best placement).
static double rs_least(const fam *f, int64_t L) {
  double best = INFINITY;
  for (int k = 1; k <= f->N; k++) {
    if (!in_family(f, k) || cost_chunk_tokens(L, k) > f->cl->mem_tokens) continue;
    double t = gtime(f, 0, k, 1, (double)L, (double)L * L);
    if (k * t < best) best = k * t;
  }
  return best;
}

// One list-scheduling run; returns the makespan + allreduce.
static double run(const fam *f, const int64_t *L, const int32_t *order, const double *rsmin,
                  int n, double eps, double mu, double *end, int *last, grp *g, int *dq) {
  const int N = f->N;
  const int64_t M = f->cl->mem_tokens;
  for (int r = 0; r < N; r++) end[r] = 0, last[r] = -1;
  int ng = 0;
  for (int oi = 0; oi < n; oi++) {
    int c = order[oi];
    double Lc = (double)L[c];
    double best = INFINITY;
    int bs = -1, bk = 0, bmerge = -1;
    for (int k = 1; k <= N; k++) {
      if (!in_family(f, k)) continue;
      int64_t chunk = cost_chunk_tokens(L[c], k);
      if (chunk > M) continue;
      // the eps rule: a size whose best placement (inside a node when it fits one) costs
      // at most (1 + eps) times the item's least rank-seconds
      double t_in = gtime(f, 0, k, 1, Lc, Lc * Lc);
      if (k * t_in > (1 + eps) * rsmin[c]) continue;
      int step = f->any ? 1 : k;
      // window max (monotone deque of ranks) and sum over [s, s + k), s = 0, 1, ...
      int qh = 0, qt = 0;
      double wsum = 0;
      for (int r = 0; r < k - 1; r++) {
        while (qt > qh && end[dq[qt - 1]] <= end[r]) qt--;
        dq[qt++] = r;
        wsum += end[r];
      }
      for (int s = 0; s + k <= N; s++) {
        int r = s + k - 1;  // enters
        while (qt > qh && end[dq[qt - 1]] <= end[r]) qt--;
        dq[qt++] = r;
        wsum += end[r];
        if (dq[qh] < s) qh++;
        double bmax = end[dq[qh]], bsum = wsum;
        wsum -= end[s];  // leaves before the next window
        if (s % step) continue;
        double t = gtime(f, s, k, 1, Lc, Lc * Lc);
        double extra = k * t - rsmin[c];
        double score = bmax + t + mu * (k * bmax - bsum + extra) / N;
        if (score < best) best = score, bs = s, bk = k, bmerge = -1;
        int lg = last[s];
        if (lg >= 0 && g[lg].open && g[lg].first == s && g[lg].k == k && g[lg].mem + chunk <= M) {
          double tm = gtime(f, s, k, g[lg].m + 1, g[lg].s1 + Lc, g[lg].s2 + Lc * Lc);
          double fin = g[lg].start + tm;
          double ms = fin + mu * (k * (fin - g[lg].end) - rsmin[c]) / N;
          if (ms <= score && ms < best) best = ms, bs = s, bk = k, bmerge = lg;
        }
      }
    }
    if (bs < 0) return NAN;
    int gi = bmerge;
    if (gi < 0) {
      double st = 0;
      for (int r = bs; r < bs + bk; r++) {
        if (end[r] > st) st = end[r];
        if (last[r] >= 0) g[last[r]].open = 0;
      }
      gi = ng++;
      g[gi] = (grp){bs, bk, 0, 0, 0, st, st, 0, 1};
    }
    g[gi].m++;
    g[gi].s1 += Lc;
    g[gi].s2 += Lc * Lc;
    g[gi].mem += cost_chunk_tokens(L[c], bk);
    g[gi].end = g[gi].start + gtime(f, bs, bk, g[gi].m, g[gi].s1, g[gi].s2);
    for (int r = bs; r < bs + bk; r++) end[r] = g[gi].end, last[r] = gi;
  }
  double ms = 0;
  for (int r = 0; r < N; r++)
    if (end[r] > ms) ms = end[r];
  return ms + f->cm->allreduce;
}

// Best makespan over the planner's non-bundling variants.
static double plan_family(const fam *f, const int64_t *L, int n) {
  static const double variants[][2] = {{0.01, 0}, {0.1, 0},  {0.03, 0}, {0.1, 1},  {0.3, 0},
                                       {0, 0},    {0.03, 1}, {0.3, 1},  {1e9, 0.3}, {1e9, 1}};
  double *rsmin = malloc((size_t)n * sizeof *rsmin), *end = malloc((size_t)f->N * sizeof *end);
  int32_t *order = malloc((size_t)n * sizeof *order);
  int *last = malloc((size_t)f->N * sizeof *last), *dq = malloc((size_t)f->N * sizeof *dq);
  grp *g = malloc((size_t)n * sizeof *g);
  double best = INFINITY;
  if (rsmin && end && order && last && g && dq) {
    for (int c = 0; c < n; c++) rsmin[c] = rs_least(f, L[c]);
    // heaviest first, ties by index (sched_order_desc's rule)
    for (int c = 0; c < n; c++) order[c] = c;
    for (int i = 1; i < n; i++) {  // insertion sort: n is at most a few thousand here
      int32_t x = order[i];
      int j = i;
      while (j > 0 && rsmin[order[j - 1]] < rsmin[x]) order[j] = order[j - 1], j--;
      order[j] = x;
    }
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
      double ms = run(f, L, order, rsmin, n, variants[v][0], variants[v][1], end, last, g, dq);
      if (ms < best) best = ms;
    }
  }
  free(rsmin), free(end), free(order), free(last), free(g), free(dq);
  return best;
}

// The sched/bound.c lower bound with the longest clip's best time over every k.
static double bound_any(const fam *f, const int64_t *L, int n) {
  double work = 0, total = 0, longest = 0;
  for (int c = 0; c < n; c++) {
    double l = (double)L[c], best = INFINITY;
    for (int k = 1; k <= f->N; k++) {
      if (cost_chunk_tokens(L[c], k) > f->cl->mem_tokens) continue;
      double t = gtime(f, 0, k, 1, l, l * l);
      if (t < best) best = t;
    }
    work += f->cm->a * l + f->cm->b * l * l;
    total += l;
    if (best > longest) longest = best;
  }
  work += f->cm->ovh * ceil(total / (double)f->cl->mem_tokens);
  return fmax(work / f->N, longest) + f->cm->allreduce;
}

int main(int argc, char **argv) {
  const char *mix = NULL, *cost = "configs/cost/h100-dit1b.conf";
  int N = 64, B = 256, S = 20, bound_only = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--mix")) mix = argv[i + 1];
    else if (!strcmp(argv[i], "--ranks")) N = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--clips")) B = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--batches")) S = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--cost")) cost = argv[i + 1];
    else if (!strcmp(argv[i], "--bound-only")) bound_only = atoi(argv[i + 1]);
  }
  if (!mix) {
    fprintf(stderr, "usage: npot --mix SPEC [--ranks N] [--clips B] [--batches S] [--cost FILE]\n");
    return 1;
  }
  lengths_opts lo = {.tokens_per_second = 1800, .max_seconds = 300};
  lengths_set ls = {0};
  sched_config cfg = {.cluster = {N, 8, 65536}};
  if (plan_input_load("npot", mix, &lo, cost, &ls, &cfg)) return 1;
  tsr_status st = TSR_OK;
  int64_t *ids = malloc((size_t)B * sizeof *ids), *L = malloc((size_t)B * sizeof *L);
  fam pow2 = {&cfg.cost, &cfg.cluster, N, 0}, any = {&cfg.cost, &cfg.cluster, N, 1};
  double sum_p = 0, sum_a = 0, sum_prod = 0, sum_bany = 0, best_gain = -INFINITY, worst_gain = INFINITY;
  for (int s = 0; s < S; s++) {
    if ((st = lengths_sample(&ls, 1, s, B, ids, L))) break;
    // --bound-only 1: no heuristics (their scans are O(N^2) per clip), the bound only
    double p = bound_only ? NAN : plan_family(&pow2, L, B);
    double a = bound_only ? NAN : plan_family(&any, L, B), b = bound_any(&any, L, B);
    sched_result r;
    if ((st = sched_plan_batch(&cfg, L, B, &r))) break;
    sum_p += p, sum_a += a, sum_prod += r.predicted_s, sum_bany += b;
    double gain = p / a - 1;
    if (gain > best_gain) best_gain = gain;  // (NaN with --bound-only: left out)
    if (gain < worst_gain) worst_gain = gain;
    sched_result_free(&r);
  }
  if (st) {
    fprintf(stderr, "npot: %s\n", err_msg());
    return 1;
  }
  printf("{\"mix\":\"%s\",\"ranks\":%d,\"clips\":%d,\"batches\":%d,", mix, N, B, S);
  if (!bound_only)
    printf("\"pow2_heuristic_s\":%.6g,\"any_heuristic_s\":%.6g,\"gain_any_over_pow2\":%.5f,"
           "\"best_batch_gain\":%.5f,\"worst_batch_gain\":%.5f,",
           sum_p, sum_a, sum_p / sum_a - 1, best_gain, worst_gain);
  printf("\"planner_s\":%.6g,\"bound_any_shape_s\":%.6g,\"max_gain_any_shape_over_planner\":%.5f}\n",
         sum_prod, sum_bany, sum_prod / sum_bany - 1);
  free(ids), free(L);
  lengths_free(&ls);
  return 0;
}
