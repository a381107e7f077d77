// sched/dynamic_internal.h — the Dynamic-CP planner's state, shared by its files:
// sched/dynamic.c (the list scheduler, its trees and variants) and sched/dynamic_items.c
// (the items it places: clips, or bundles of small clips packed first-fit). Not a public
// interface: sched/sched.h is.
#ifndef TESSERA_SCHED_DYNAMIC_INTERNAL_H
#define TESSERA_SCHED_DYNAMIC_INTERNAL_H

#include <stdint.h>

#include "core/err.h"
#include "sched/cost.h"
#include "sched/plan.h"
#include "sched/sched.h"

typedef struct {
  int32_t first, lev, m;   // block [first, first + 2^lev), clips in it
  double s1, s2;           // sum L, sum L^2 of its clips
  int64_t mem;             // tokens a rank holds
  double start, end;       // on the list schedule's timeline
} dyn_group;

// A level's tree is two arrays of nodes with the same numbering. Keys: over the blocks of
// the node's subtree, the least key and its block (every placement changes keys on every
// level). Open groups: over the groups of the subtree still open (last on every rank of
// exactly their block, so an item may join them), per CP mode, the least start + time in
// that mode (end) and the least start + time minus the communication it could hide (adj),
// and the most memory room (tokens per rank; -1 and INFINITY where there is none, or the
// mode is not chosen from); a placement changes them on a level or two, so they are kept
// apart from the keys and only the nodes that change are rewritten.
typedef struct {
  double key;
  int32_t idx;
  int32_t tag;  // 1: the children are stale; each holds this key over its own subtree
                // (dyn_kset), its idx its subtree's first block
} dyn_knode;

// An inner node's numbers are over the open groups of its subtree with room >= the level's
// rth (dyn); `any` is over all of them.
typedef struct {
  double end[COST_CP_NMODES], adj[COST_CP_NMODES];
  int64_t room;
  double xmax[COST_CP_NMODES];  // per CP mode, the most exposed time an open group there
                               // could hide (end - adj; 0 where none)
  int64_t any;                 // the most room of any open group there (-1: none)
} dyn_node;

typedef struct {
  double bound;  // lower bound on the score of the node's groups
  int64_t node;
} dyn_subtree;

// The planner places items: single clips, or bundles of small clips packed together
// beforehand (first-fit decreasing) so that they share one microbatch's overhead.
typedef struct {
  const cost_model *cm;
  const sched_cluster *cl;
  const int64_t *L;        // (n)
  int n, N, nlev;          // clips, ranks, log2(N) + 1
  int exhaustive;          // 1: scan every block (the reference); 0: the trees
  int nm;                  // CP modes the trees keep bounds for: 1 (ring alone) or all
  int lnm[32];             // of those, the ones level l can choose from (modes are slots
                           // 0, 1, 2: ring, Ulysses, hybrid): 1 at k = 1, 2 where hybrid
                           // is Ulysses (k <= G), else nm
  int ni;                  // items of the current run
  int items_made;          // 1: the items are those of (items_bundle, items_up)
  double items_bundle;
  int items_up;
  int32_t *item_of;        // (n) item of each clip
  int32_t *im;             // (n) clips per item
  double *is1, *is2;       // (n) sum L, sum L^2 per item
  int64_t *imem;           // (n * nlev) tokens a rank holds of item i at k = 2^l
  double *t;               // (n * nlev) time of item i alone at k = 2^l; INFINITY if it
                           // does not fit
  double *rsmin;           // (n) least rank-seconds k*t of each item
  int32_t *order;          // (n) items, heaviest (rsmin) first: after dyn_items, 0..ni-1
  void *perm;              // (n * nlev * 8 bytes) scratch of dyn_items
  int32_t *corder;         // (n) clips, longest first (for bundling)
  int32_t *clev;           // (n) least CP level of each clip
  int64_t *bin_room;       // (n) bundling: room left per bundle
  int32_t *bin_lev;        // (n) bundling: CP level of each bundle
  int32_t *lev_bins;       // (n) bundling: bundles of each level in creation order, level
                           // v's from lev_off[v]
  int32_t *lev_off, *lev_cnt;  // (nlev + 1), (nlev)
  int64_t *bin_tree;       // (4n) bundling: per level, max room over its bundles (a tree
                           // of lev_cap[v] leaves from 2 * lev_off[v])
  int32_t *lev_cap;        // (nlev) leaves of level v's bundle tree (a power of two)
  int32_t *item_group;     // (n) group of each item in the current run
  int32_t *force;          // (n) CP level an item must use (-1: free), improvement phase
  // Timeline of the current run: level l has N >> l aligned blocks (those that fit in N,
  // any N >= 1: ranks beyond the last whole block of 2^l are in none), stored from off[l].
  int32_t *off;            // (nlev)
  double *bmax;            // (2N - 1) latest finish of a rank of the block
  double *bsum;            // (2N - 1) sum of the ranks' finish times
  int32_t *buni;           // (2N - 1) group last on every rank of the block; -1 none, -2 mixed
  // Per level l a tree of tcap[l] leaves (N >> l rounded up to a power of two, so that
  // every leaf has the same depth and a subtree's blocks are contiguous): node 1 the root,
  // leaf i at node tcap + i (the leaves past N >> l are empty: INFINITY keys, no room),
  // node x's children 2x and 2x + 1, stored from toff[l] (2 tcap entries, entry 0 unused).
  int64_t *toff;           // (nlev)
  int32_t *tcap;           // (nlev)
  int tlg[32];             // log2 tcap[l]
  int64_t rth[32];         // per level: open groups with less room are left out of the
                           // inner nodes, which only the search reads (no item searched
                           // that level since with a smaller chunk; lowered when one does)
  dyn_knode *ktree;        // (sum of 2 tcap <= 8N) keys
  dyn_node *tree;          // (sum of 2 tcap <= 8N) open groups
  double mu;               // the current run's waste weight (the keys depend on it)
  dyn_subtree *stack;      // (2N) the merge search's subtrees left to visit
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

// The items of one bundling (bundle: items of at most bundle*M tokens per rank, 0: every
// clip its own item; up: a clip may join a bundle of a larger least CP size than its own)
// into d: their sums, least CP level and heaviest-first order. Kept while the same bundling
// is asked again (items_made, items_bundle, items_up).
tsr_status dyn_items(dyn *d, double bundle, int up);

#endif
