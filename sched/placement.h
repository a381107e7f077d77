// sched/placement.h — which rank of a CP group holds which tokens of a masked clip.
//
// A masked clip (sched/cost.h cost_mask) is a sequence of mask blocks: block-causal chunks
// of `chunk` frames, or window mask time tiles of `tile_t` frames (rows x cols tokens a
// frame; the last block partial). Every query of block b attends keys of blocks [lo, hi]
// only (placement_keys), so a query token of block b does keys(b) units of attention work
// (block-causal: the key tokens of blocks lo..hi; window: the key frames of lo..hi times
// the frame's spatial area over a frame, so that a clip's work sums to cost_clip_area).
//
// A placement gives each group rank a set of token segments (its queries, and the keys and
// values of the same tokens): the rank's work is the sum of its tokens' keys(b), and the
// key/value tokens it must receive are those of the blocks its queries need (the union of
// their [lo, hi]) that it does not hold itself. Kinds:
//   contiguous  rank r holds chunk r of k of the token range (model/dist/ring_attention.h
//               ring_chunk, the executor's layout without a placement);
//   zigzag      2k such chunks, rank r holds chunks r and 2k-1-r (the causal baseline);
//   greedy      every mask block cut into ceil(8k / blocks) even pieces (at most one a
//               token), placed heaviest first on the least loaded rank
//               (longest-processing-time), but on the rank that last took a piece of the
//               same block when that rank is within 2% of a mean rank's work of the least
//               loaded one and taking the piece does not raise the most loaded rank's work:
//               that rank already receives the block's keys;
//   balanced    contiguous ranges cut where the work, not the tokens, reaches r/k of the
//               clip's (to the nearest token): what a graph partitioner finds on the chain
//               of blocks of a window mask, whose keys are neighbours (few to receive);
//   metis       a graph partition (libmetis, METIS_PartGraphKway): every mask block cut
//               into ceil(16k / blocks) even pieces (at most one a token), a piece a vertex
//               weighing its work and its tokens (two constraints: work within
//               PLACE_METIS_UB_WORK of a k-th, tokens within PLACE_HOLD_SLACK), an edge
//               between pieces of blocks one needs of the other weighing the key/value tokens that would travel were they cut (a
//               piece's tokens spread over its needers, at most k - 1 copies: the hypergraph
//               of receipts approximated by a graph), then pieces moved off any rank over
//               PLACE_HOLD_SLACK x ceil(L / k) tokens (METIS's balance is a target); seeded by PLACE_METIS_SEED, so every
//               rank (with the same libmetis) makes the same one. k = 1 or L <= k: contiguous.
//               Only in builds with libmetis (TESSERA_METIS): PLACE_NKINDS counts it then.
// Full attention (kind FULL) is treated as one block every query needs.
#ifndef TESSERA_SCHED_PLACEMENT_H
#define TESSERA_SCHED_PLACEMENT_H

#include <stdint.h>
#include "core/err.h"
#include "sched/cost.h"

// sched/CMakeLists.txt defines TESSERA_HAVE_METIS (0 or 1) for every target linking tsr_sched.
#ifndef TESSERA_HAVE_METIS
#error "TESSERA_HAVE_METIS undefined: link tsr_sched, whose CMake target defines it"
#endif

// PLACE_NKINDS: the kinds this build makes (PLACE_METIS is one only with libmetis).
typedef enum {
  PLACE_CONTIGUOUS = 0, PLACE_ZIGZAG = 1, PLACE_GREEDY = 2, PLACE_BALANCED = 3, PLACE_METIS = 4,
  PLACE_NKINDS = PLACE_METIS + TESSERA_HAVE_METIS
} place_kind;
_Static_assert(PLACE_METIS + 1 == COST_PINS, "cost_mask.pin counts every place_kind");
// "contiguous", "zigzag", "greedy", "balanced", "metis"
const char *place_kind_name(place_kind k);
// The kind named s (place_kind_name's), or -1: kinds this build does not make included.
int place_kind_parse(const char *s);
// What a build without libmetis tells a caller who asks for the metis kind (every place
// that refuses it says the same).
#define PLACE_METIS_MISSING \
  "no libmetis (install libmetis-dev, tools/setup.sh, and reconfigure with TESSERA_METIS=AUTO or ON)"
// 1.05 on work measured 1.03 to 1.06 imbalance, 1.01 1.006 to 1.02 (docs/plan.md)
#define PLACE_METIS_UB_WORK 1.01
#define PLACE_METIS_SEED 1

typedef struct {
  int64_t first, len;  // tokens [first, first + len) of the clip, len >= 1, in one block
  int32_t rank;        // the group rank holding them
  int32_t block;       // the mask block they lie in
} place_seg;

typedef struct {
  int k;            // group size
  int64_t L;        // the clip's tokens
  int nblocks;      // mask blocks of the clip
  int nseg;
  place_seg *seg;   // (nseg) in token order, covering [0, L) once
  double *work;     // (k) attention work (query-key pairs) of each rank's queries
  double *own;      // (k) the part of work[r] against keys rank r holds: what it attends
                    // while the keys it receives and its gradient shares travel
                    // (model/dist/placed_attention.h)
  int64_t *held;    // (k) tokens each rank holds
  int64_t *recv;    // (k) key/value tokens each rank receives (needed, held elsewhere)
} placement;

// Tokens of one mask block of m (rows x cols x frames of a block); L for FULL.
int64_t placement_block_tokens(const cost_mask *m, int64_t L);
// The key blocks [*lo, *hi] the queries of block b (of nb) need under m.
void placement_keys(const cost_mask *m, int b, int nb, int *lo, int *hi);
// Chunk o of k of n tokens (the first n % k chunks one token longer): first, length.
void placement_split(int64_t n, int k, int o, int64_t *first, int64_t *len);

// The placement of kind `kind` of a clip of L >= 0 tokens over k >= 1 ranks under m
// (checked: cost_model_check's mask). out is overwritten; placement_free releases it.
// TSR_EINVAL for k < 1 or L < 0, a kind this build does not make (metis without libmetis)
// or a metis graph too large, TSR_ENOMEM.
tsr_status placement_make(const cost_mask *m, int64_t L, int k, place_kind kind, placement *out);
void placement_free(placement *p);
// max over ranks of work / the mean (1 when there is no work).
double placement_imbalance(const placement *p);

// The placement m->place asks for (COST_PLACE_*): blockwise tries zigzag, balanced, greedy
// and contiguous in turn and stops at the first whose imbalance is at most
// PLACE_GOOD_ENOUGH, keeping of those tried the one whose most loaded rank has the least
// work, then the least to receive. Zigzag first: under a causal mask it is balanced and
// ran fastest measured (bench/dist/placed.sh: balanced, priced the same, ran slower on the
// CPU); balanced next: cheap to make, balanced to a token and receiving least under
// windows (a rank's keys are its own and its neighbours'); greedy is the costliest to make
// and receives most (its pieces scatter a block's keys over more ranks). EVEN, CONTIGUOUS
// and a full mask: contiguous. A kind whose most loaded rank would hold more than
// PLACE_HOLD_SLACK x ceil(L / k) tokens is passed over (balanced under a causal mask gives
// the first ranks most of the tokens), since the memory model counts ceil(L / k) a rank
// (sched/cost.h): up to 5% more is not counted. Cached as placement_cached. Metis is not
// tried: it balances work less well than zigzag or greedy and takes 140 to 6,000 times
// greedy's time to make (docs/plan.md "Attention masks"). With m->pin > 0 (a kind pinned:
// train.placement = zigzag, ...) every clip takes kind pin - 1 instead, or contiguous where
// that kind would hold more than PLACE_HOLD_SLACK x ceil(L / k) tokens on a rank (the same
// memory bound); TSR_EINVAL for a kind this build does not make (metis without libmetis).
#define PLACE_GOOD_ENOUGH 1.01
#define PLACE_HOLD_SLACK 1.05
tsr_status placement_for(const cost_mask *m, int64_t L, int k, const placement **out);
// Over the n clips of lengths L of a group of k ranks placed by placement_for: each rank's
// work (k), K/V tokens to receive (k), segments held (k) and own-key work (k), summed; any
// may be NULL.
tsr_status placement_group(const cost_mask *m, const int64_t *L, int n, int k, double *work,
                           int64_t *recv, int64_t *segs, double *own);

// placement_make's result for (m, L, k, kind), made once per process and kept (the planner
// prices every group of a batch by it; clips of one length and group size share it):
// *out stays valid until placement_cache_clear. Thread-safe.
tsr_status placement_cached(const cost_mask *m, int64_t L, int k, place_kind kind,
                            const placement **out);
void placement_cache_clear(void);

#endif
