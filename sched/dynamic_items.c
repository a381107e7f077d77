// sched/dynamic_items.c — the Dynamic-CP planner's items: clips, or bundles of small clips
// packed first-fit per least CP level (sched/dynamic_internal.h).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/dynamic_internal.h"
#include "sched/order.h"

// ---- bundling ---------------------------------------------------------------------------
// Level v's bundle tree: leaves are its bundles in creation order (room left, -1 where no
// bundle yet), inner nodes the max of their children. Stored from tree_base(v).
static int64_t *bin_tree_of(dyn *d, int v) {
  size_t o = 0;
  for (int u = 0; u < v; u++) o += 2 * (size_t)d->lev_cap[u];
  return d->bin_tree + o;
}

static void bin_tree_set(int64_t *t, int cap, int pos, int64_t room) {
  int x = cap + pos;
  t[x] = room;
  for (x >>= 1; x >= 1; x >>= 1) t[x] = t[2 * x] > t[2 * x + 1] ? t[2 * x] : t[2 * x + 1];
}

// First leaf (lowest position) with room >= need, or -1.
static int bin_tree_first(const int64_t *t, int cap, int64_t need) {
  if (t[1] < need) return -1;
  int x = 1;
  while (x < cap) x = t[2 * x] >= need ? 2 * x : 2 * x + 1;
  return x - cap;
}

// a[j] = a[order[j]] for rows of `width` elements of `size` bytes; scratch: n * width * size
// bytes.
static void dyn_permute(void *scratch, void *a, size_t size, int width, const int32_t *order,
                        int n) {
  size_t row = size * (size_t)width;
  memcpy(scratch, a, row * (size_t)n);
  for (int j = 0; j < n; j++)
    memcpy((char *)a + row * (size_t)j, (const char *)scratch + row * (size_t)order[j], row);
}

// Forms the items of a run: with bundle > 0, clips are packed first-fit, longest first,
// into bundles of clips with the same least CP size k (or, with `up`, a least CP size of
// at most k), such that a rank of a k group holds at most bundle*M tokens of a bundle;
// a clip above that is an item of its own. First fit: the bundle created first among
// those that can take the clip (per level, a tree of the bundles' room finds it in
// O(log n)). Then prices every item at every CP size and orders them.
tsr_status dyn_items(dyn *d, double bundle, int up) {
  if (d->items_made && d->items_bundle == bundle && d->items_up == up) {
    // the same items as the last call (variants differing in eps and mu only): nothing
    // in them depends on a run, which changes only force
    for (int i = 0; i < d->ni; i++) d->force[i] = -1;
    return TSR_OK;
  }
  d->items_made = 0;
  int64_t cap = (int64_t)(bundle * (double)d->cl->mem_tokens);
  int nbins = 0;  // bundles are items 0..nbins-1
  if (cap > 0)
    for (int v = 0; v < d->nlev; v++) {
      int64_t *t = bin_tree_of(d, v);
      for (int x = 1; x < 2 * d->lev_cap[v]; x++) t[x] = -1;
      d->lev_cnt[v] = 0;
    }
  for (int j = 0; j < d->n; j++) {
    int c = d->corder[j];
    int lev = d->clev[c];
    int64_t need = cost_chunk_tokens(d->L[c], 1 << lev);
    int it = -1;
    if (cap > 0 && need <= cap) {
      for (int v = lev; v < (up ? d->nlev : lev + 1); v++) {
        if (!d->lev_cnt[v]) continue;
        int pos = bin_tree_first(bin_tree_of(d, v), d->lev_cap[v],
                                 cost_chunk_tokens(d->L[c], 1 << v));
        if (pos < 0) continue;
        int b = d->lev_bins[d->lev_off[v] + pos];
        if (it < 0 || b < it) it = b;
      }
      if (it < 0) {
        it = nbins++;
        d->bin_room[it] = cap;
        d->bin_lev[it] = lev;
        d->lev_bins[d->lev_off[lev] + d->lev_cnt[lev]++] = it;
      }
      int v = d->bin_lev[it];
      d->bin_room[it] -= cost_chunk_tokens(d->L[c], 1 << v);
      // its position in level v's list: bundles of a level are listed in creation order
      int lo = d->lev_off[v], hi = lo + d->lev_cnt[v] - 1;
      while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (d->lev_bins[mid] < it) lo = mid + 1;
        else hi = mid;
      }
      bin_tree_set(bin_tree_of(d, v), d->lev_cap[v], lo - d->lev_off[v], d->bin_room[it]);
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
    d->is2[i] += cost_clip_area(d->cm, d->L[c]);
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
  tsr_status st = sched_order_desc(d->rsmin, d->ni, d->order);
  if (st) return st;
  // Items are renumbered in placement order (heaviest first), so that a run reads their
  // arrays front to back instead of at random (cache misses dominated large batches).
  int32_t *rank = d->item_group;  // scratch until a run fills it
  for (int j = 0; j < d->ni; j++) rank[d->order[j]] = j;
  for (int c = 0; c < d->n; c++) d->item_of[c] = rank[d->item_of[c]];
  dyn_permute(d->perm, d->is1, sizeof *d->is1, 1, d->order, d->ni);
  dyn_permute(d->perm, d->is2, sizeof *d->is2, 1, d->order, d->ni);
  dyn_permute(d->perm, d->rsmin, sizeof *d->rsmin, 1, d->order, d->ni);
  dyn_permute(d->perm, d->im, sizeof *d->im, 1, d->order, d->ni);
  dyn_permute(d->perm, d->t, sizeof *d->t, d->nlev, d->order, d->ni);
  dyn_permute(d->perm, d->imem, sizeof *d->imem, d->nlev, d->order, d->ni);
  for (int j = 0; j < d->ni; j++) d->order[j] = j;
  d->items_made = 1, d->items_bundle = bundle, d->items_up = up;
  return TSR_OK;
}
