// sched/baseline.c — the static-CP baselines: packing only, and static balanced.
#include <stdlib.h>

#include "sched/order.h"
#include "sched/sched.h"

int sched_static_cp(const sched_config *cfg, const int64_t *tokens, int n) {
  int64_t longest = cfg->max_clip_tokens;
  if (longest <= 0)
    for (int i = 0; i < n; i++)
      if (tokens[i] > longest) longest = tokens[i];
  // the least power of two that holds the clip: it divides N whenever a power of two that
  // divides N holds it (the powers of two dividing N are all those up to N's largest)
  return cost_min_cp(&cfg->cluster, longest);
}

// Scratch of both baselines: slots, slot of each clip.
typedef struct {
  plan_slot *slots;
  int32_t *slot_of;
  int ks, ngroups;  // static CP size, data-parallel groups
} static_scratch;

static tsr_status static_begin(const sched_config *cfg, const int64_t *tokens, int n,
                               static_scratch *s) {
  s->ks = sched_static_cp(cfg, tokens, n);
  if (s->ks == 0)
    return err_set(TSR_EINVAL, "static CP: the longest clip fits no group of %d ranks x %lld "
                               "tokens", cfg->cluster.ranks, (long long)cfg->cluster.mem_tokens);
  s->ngroups = cfg->cluster.ranks / s->ks;  // the ranks past the last whole block idle
  s->slots = malloc((size_t)n * sizeof *s->slots);  // at most one microbatch per clip
  s->slot_of = malloc((size_t)n * sizeof *s->slot_of);
  if (!s->slots || !s->slot_of) return err_set(TSR_ENOMEM, "baseline: out of memory");
  return TSR_OK;
}

static void static_end(static_scratch *s) {
  free(s->slots);
  free(s->slot_of);
}

tsr_status sched_baseline_packing(const sched_config *cfg, const int64_t *tokens, int n,
                                  plan *out) {
  static_scratch s = {0};
  tsr_status st = static_begin(cfg, tokens, n, &s);
  int nmb = 0;
  int64_t mem = 0;
  for (int i = 0; !st && i < n; i++) {
    int64_t chunk = cost_chunk_tokens(tokens[i], s.ks);
    if (nmb == 0 || mem + chunk > cfg->cluster.mem_tokens) {  // open a microbatch
      int q = nmb % s.ngroups;
      s.slots[nmb] = (plan_slot){nmb / s.ngroups, q * s.ks, s.ks};
      nmb++;
      mem = 0;
    }
    mem += chunk;
    s.slot_of[i] = nmb - 1;
  }
  if (!st) st = plan_build(out, s.slots, nmb, s.slot_of, n);
  if (!st) plan_choose_modes(out, tokens, &cfg->cost, &cfg->cluster);
  static_end(&s);
  return st;
}

typedef struct {
  int64_t mem;
  double s1, s2;
  int m;
} mb_state;

// The least-loaded of n groups (N / k_s, any n >= 1) in O(log n): tree[1] is the group with
// the least load, the lowest index on ties (the scan it replaces took O(n) per clip).
// tree: (2n) node -> group; leaf of group q at n + q (when n is not a power of two a
// subtree's leaves are not in index order, so ties compare indices). Refreshes q's path.
static int32_t load_less(const double *load, int32_t a, int32_t b) {
  return load[b] < load[a] || (load[b] == load[a] && b < a) ? b : a;
}

static void load_tree_update(int32_t *tree, const double *load, int n, int q) {
  int x = n + q;
  tree[x] = q;
  for (x >>= 1; x >= 1; x >>= 1) tree[x] = load_less(load, tree[2 * x], tree[2 * x + 1]);
}

tsr_status sched_baseline_balanced(const sched_config *cfg, const int64_t *tokens, int n,
                                   plan *out) {
  static_scratch s = {0};
  tsr_status st = static_begin(cfg, tokens, n, &s);
  int32_t *order = malloc((size_t)n * sizeof *order);
  mb_state *mb = calloc((size_t)n, sizeof *mb);
  double *load = calloc((size_t)s.ngroups + 1, sizeof *load);
  int32_t *nmb_of = calloc((size_t)s.ngroups + 1, sizeof *nmb_of);   // microbatches per group
  int32_t *first_mb = malloc(((size_t)s.ngroups + 1) * sizeof *first_mb);  // per group
  int32_t *next_mb = malloc((size_t)n * sizeof *next_mb);  // per microbatch: next of group
  double *key = malloc((size_t)n * sizeof *key);
  if (!st && (!order || !mb || !load || !nmb_of || !first_mb || !next_mb || !key))
    st = err_set(TSR_ENOMEM, "baseline: out of memory");
  int nmb = 0;
  if (!st) {
    for (int i = 0; i < n; i++) key[i] = (double)tokens[i];
    st = sched_order_desc(key, n, order);
    for (int q = 0; q < s.ngroups; q++) first_mb[q] = -1;
    const cost_model *cm = &cfg->cost;
    int G = cfg->cluster.gpus_per_node;
    int32_t *last_mb = calloc((size_t)s.ngroups, sizeof *last_mb);
    int32_t *tree = malloc(2 * (size_t)s.ngroups * sizeof *tree);
    if (!st && (!last_mb || !tree)) st = err_set(TSR_ENOMEM, "baseline: out of memory");
    for (int q = 0; !st && q < s.ngroups; q++) tree[s.ngroups + q] = q;  // all loads 0:
    for (int x = s.ngroups - 1; !st && x >= 1; x--)  // all loads 0: the lowest index wins
      tree[x] = load_less(load, tree[2 * x], tree[2 * x + 1]);
    for (int j = 0; !st && j < n; j++) {
      int c = order[j];
      int q = tree[1];  // least-loaded group (first on ties)
      int64_t chunk = cost_chunk_tokens(tokens[c], s.ks);
      int b = first_mb[q];
      while (b >= 0 && mb[b].mem + chunk > cfg->cluster.mem_tokens) b = next_mb[b];
      if (b < 0) {  // new microbatch at the end of group q's list
        b = nmb++;
        s.slots[b] = (plan_slot){nmb_of[q]++, q * s.ks, s.ks};
        next_mb[b] = -1;
        if (first_mb[q] < 0) first_mb[q] = b;
        else next_mb[last_mb[q]] = b;
        last_mb[q] = b;
      }
      double L = (double)tokens[c];
      load[q] -= cost_group_time(cm, G, s.ks, mb[b].m, mb[b].s1, mb[b].s2);
      mb[b].mem += chunk;
      mb[b].s1 += L;
      mb[b].s2 += cost_clip_area(cm, tokens[c]);
      mb[b].m++;
      load[q] += cost_group_time(cm, G, s.ks, mb[b].m, mb[b].s1, mb[b].s2);
      load_tree_update(tree, load, s.ngroups, q);
      s.slot_of[c] = b;
    }
    free(last_mb);
    free(tree);
  }
  if (!st) st = plan_build(out, s.slots, nmb, s.slot_of, n);
  if (!st) plan_choose_modes(out, tokens, &cfg->cost, &cfg->cluster);
  free(order);
  free(mb);
  free(load);
  free(nmb_of);
  free(first_mb);
  free(next_mb);
  free(key);
  static_end(&s);
  return st;
}
