// sched/cost.h — the scheduler's cost and memory model of one microbatch group.
//
// A group of k ranks (k a power of two) runs clips of L_1..L_m tokens; every clip is
// cut into k contiguous chunks and rank p of the group holds chunk p of every clip.
// The reference time model (seconds), used for every reported plan time:
//
//   T = sum((a + text_a*Lt)*L + b*L^2)/k
//       + (k-1) * max(0, sum(kv*L/k)/bw(k) + lat - sum(b*L^2/k^2))
//       + ovh + m * text_c * Lt
//   bw(k) = bw_intra if k <= gpus_per_node else bw_inter
//
// i.e. token-linear work and quadratic attention work split over k ranks, k-1 ring
// steps whose K/V exchange is hidden behind the attention of the chunk in hand as long
// as it is shorter, and a fixed overhead per microbatch. With captions (a text model,
// model/cross.c) each clip's queries also attend to its Lt caption tokens: work
// text_a*Lt per video token, split over the group like the rest (CP splits the queries),
// and text_c*Lt per clip on EVERY rank of the group (the caption is replicated: each rank
// embeds it and projects its keys and values). Lt is the data's mean caption length
// (cost_model.text_tokens, set by the caller; 0 without captions). An empty group (m = 0)
// takes no time. Because T depends on the clips only through m, S1 = sum L and
// S2 = sum L^2, groups are priced incrementally from those sums.
//
// How a group splits its clips' attention (cost_model.cp_modes: the modes the planner may
// choose from; each group gets the one of least time, ring on ties):
//   ring     the formula above (model/dist/ring_attention.h);
//   Ulysses  an all-to-all over heads (model/dist/ulysses_attention.h): each rank attends
//            whole clips for its ceil(H/k) of the H heads, and every q/k/v/out tensor
//            crosses the group once, pipelined over C head chunks (train.ulysses_chunks):
//            chunk c+1's transfer in and chunk c-1's back travel while chunk c attends, so
//            the first chunk's transfer in and the last one's back are exposed and each of
//            the other C-1 steps exposes what a chunk's attention does not hide:
//     T_u = (a + text_a*Lt)*S1/k + W + E(k, W) + ovh + m*text_c*Lt            (k > 1)
//     W = b*S2*ceil(H/k)/H                           (the rank's attention work)
//     x = 2*(kv*(S1/k)*(k-1)/k / bw(k) / C + lat)    (one chunk's transfers, in and back)
//     E(u, W) = x + (C-1)*max(0, x - W/C)
//   C = min(a2a_chunks, ceil(H/u)) (1: blocking, E = the whole all-to-all, exposed);
//   (bw and lat of the all-to-all: a2a_bw_intra/inter and a2a_lat where the cost file has
//   them, from tessera calibrate, else the ring's),
//   (the forward and backward move 12 such tensors a layer against the ring's 6 a step:
//   twice kv; H = cost_model.heads, 0: the heads split evenly, ceil(H/k)/H = 1/k, and C
//   is a2a_chunks).
//   hybrid   (USP) for a group spanning nodes (k > G, G = gpus_per_node > 1): Ulysses
//            over the G ranks of each node (u = G), ring over the r = k/G nodes, each ring
//            step carrying a block of S1/r tokens for the node's ceil(H/u) of the heads:
//     T_h = (a + text_a*Lt)*S1/k + b*S2*sh/r + E(u, b*S2*sh/r)
//           + (r-1)*max(0, kv*S1*sh/r / bw_inter + lat - b*S2*sh/r^2) + ovh + m*text_c*Lt
//   with sh = ceil(H/u)/H (1/u for H = 0) and E's x over the node's u ranks at bw_intra:
//   x = 2*(kv*(S1/k)*(u-1)/u / bw_intra / C + lat). For k <= G (or G not a power of two)
//   hybrid is Ulysses.
// At k = 1 every mode is the local attention: ring.
//
// ZeRO (cost_model.zero, docs/dist.md "ZeRO"): the world collectives of a sharded run, over
// all N ranks of the job, priced per step. A collective over the world moving X bytes whole
// (all-gather: every rank receives the X - X/N it lacks; reduce-scatter: every rank sends it)
// in c calls takes, with N > 1 (N = 1: no time, the collectives are local copies):
//   t_ag(X, c) = (N-1)/N * X / ag_bw + c * coll_lat
//   t_rs(X, c) = (N-1)/N * X / rs_bw + c * coll_lat
// (ag_bw, rs_bw: bytes a rank receives (sends) per second in a world all-gather (reduce-
// scatter), coll_lat: s per collective; tessera calibrate measures them under mpirun; a file
// without them prices them with the ring's figure of a group of N ranks: bw_intra when the
// world fits a node (N <= G), else bw_inter, and lat). With P the model's floats (fp32, 4
// bytes each), nb its gradient buckets (the collectives of one pass over the buffer), Pb a
// block's floats and D its blocks (cost_zero: set by the caller from the model), and W_w
// the time of wave w's longest group:
//   stage 1: Z = t_ag(4P, nb)          the masters all-gathered after the optimizer, nothing
//                                      to hide it behind (the gradient all-reduce stays in
//                                      `allreduce`, as at stage 0)
//   stage 2: Z = t_ag(4P, nb) + sum_w R_w,
//            R_w = t_rs(4Pb, 1) + max(0, t_rs(4(P - Pb), nb - 1) - 2/3 W_w)
//            every wave reduce-scatters every bucket as the backward (2/3 of a wave's
//            forward + backward) fills them: all but the last are hidden behind the rest
//            of the backward as far as it lasts; the last (a block's, the embeddings' after
//            it are small) waits
//   stage 3: Z = sum_w (R_w + G_w) (no all-gather after the optimizer: no whole weights),
//            G_w = t_g + (D-1) * (max(0, t_g - W_w/(3D)) + max(0, t_g - 2 W_w/(3D))),
//            t_g = t_ag(4Pb, 1): each pass (forward, 1/3 of W_w; backward, 2/3) gathers the
//            blocks, block j+1's gather overlapped with block j's compute (prefetch); the
//            forward's first block has nothing before it, the backward's first is still held
//            from the forward (model/dist/dist_step.h)
// Because every ZeRO collective is a world collective issued in lockstep (the bucket or
// block order of every wave on every rank, idle or not), a wave of a stage >= 2 plan ends on
// every rank together: plan_simulate then runs the waves one after the other (wave w+1
// starts when the longest group of wave w and its R_w + G_w are done), so a plan with more
// waves pays more. `allreduce` is charged at every stage (the file holds the optimizer and
// the all-reduce together: at stages 2 and 3, which reduce-scatter instead, it is an upper
// bound by the all-reduce's time).
//
// Memory: a rank of the group holds sum(ceil(L/k)) tokens, which must be <= the
// cluster's mem_tokens (M) in either mode (the work buffers of both are counted by the
// trainer's memory model, model/train/memory.h).
//
// Units: a s/token, b s/token^2, kv bytes per token per ring step (forward and backward
// together), bw_* bytes/s, lat s per ring step, ovh s per microbatch, allreduce s per
// step. The file format (key = value) is in docs/plan.md; presets in configs/cost/.
#ifndef TESSERA_SCHED_COST_H
#define TESSERA_SCHED_COST_H

#include <stdint.h>
#include "core/err.h"

// CP modes of a group (plan_group.mode) and their bits in cost_model.cp_modes.
typedef enum { COST_CP_RING = 0, COST_CP_ULYSSES = 1, COST_CP_HYBRID = 2, COST_CP_NMODES } cost_cp_mode;
enum { COST_MODES_RING = 1 << COST_CP_RING, COST_MODES_ULYSSES = 1 << COST_CP_ULYSSES,
       COST_MODES_HYBRID = 1 << COST_CP_HYBRID,
       COST_MODES_AUTO = COST_MODES_RING | COST_MODES_ULYSSES | COST_MODES_HYBRID };
const char *cost_cp_mode_name(cost_cp_mode m);  // "ring", "ulysses", "hybrid"

// The model's ZeRO communication (above); NOT file keys: the caller sets them from the
// model and train.zero (model/train/zero_cost.h). stage 0: none of it.
typedef struct {
  int stage;      // train.zero, 0..3
  double params;  // P: floats of the model's flat buffer (the state ZeRO shards), >= 0
  double block;   // Pb: floats of one block's bucket, in [0, P]
  int buckets;    // nb >= 1: gradient buckets, each a collective per pass over the buffer
  int blocks;     // D >= 1: blocks, each gathered twice per wave at stage 3
} cost_zero;

// The attention mask of the model (model.attn_mask; kernels.h kernels_mask, whose kinds
// these values are), for a clip's attention area; NOT file keys: the caller sets them from
// the model config, and rows x cols, the token grid of one latent frame the planner takes
// every clip to have (its L tokens are then ceil(L / (rows cols)) frames, the last one
// partial). kind 0 (full): the area is L^2 and the rest is unused.
enum { COST_MASK_FULL = 0, COST_MASK_BLOCK_CAUSAL = 1, COST_MASK_WINDOW = 2 };
typedef struct {
  int kind;
  int chunk, window;                // block_causal: frames per chunk, chunks back (0: all)
  int wt, wh, ww;                   // window: radii in tiles
  int tile_t, tile_h, tile_w;       // window: a tile's extent in tokens
  int place;                        // COST_PLACE_*: how a ring group's ranks hold its clips
  int pin;                          // BLOCKWISE: 0, placement_for's choice per clip, or 1 + the
                                    // sched/placement.h place_kind of every clip (1..COST_PINS)
  int64_t rows, cols;               // the token grid of a frame (>= 1 unless kind is full)
} cost_mask;
// cost_mask.place (sched/placement.h): EVEN prices a group's attention as its area split
// evenly over the k ranks (the form above); CONTIGUOUS and BLOCKWISE price a masked ring
// group's attention (the S2/k and S2/k^2 terms) by its most loaded rank's work when every
// clip is cut into contiguous chunks, or placed blockwise (placement_for's choice for the
// clip), i.e. S2 = k * max over ranks of the rank's work (plan_group_time, sched/plan.h; the
// planner's own search keeps the even form). CONTIGUOUS keeps the ring's exchange; BLOCKWISE
// prices the placed executor's (cost_placed_time, below).
enum { COST_PLACE_EVEN = 0, COST_PLACE_CONTIGUOUS = 1, COST_PLACE_BLOCKWISE = 2 };
// cost_mask.pin's kinds (sched/placement.h checks it counts place_kind's)
enum { COST_PINS = 5 };

typedef struct {
  double a, b, kv, bw_intra, bw_inter, lat, ovh, allreduce;
  double text_a, text_c;  // cross-attention to captions (optional keys, 0 when absent)
  double a2a_lat, a2a_bw_intra, a2a_bw_inter;  // Ulysses' all-to-all, measured by tessera
                          // calibrate (optional keys; 0: priced with lat, bw_intra, bw_inter)
  double text_tokens;     // Lt: mean caption tokens of a clip of the data; NOT a file key:
                          // the caller sets it from the store (0: no captions)
  int cp_modes;           // COST_MODES_* the planner may choose from; NOT a file key: the
                          // caller sets it (train.cp_mode); 0 is COST_MODES_RING
  int heads;              // H, the model's attention heads (Ulysses' split); NOT a file
                          // key; 0: unknown (even split)
  double ag_bw, rs_bw, coll_lat;  // ZeRO's world all-gather and reduce-scatter, measured by
                          // tessera calibrate (optional keys; 0: the ring's bw(N) and lat)
  cost_zero zero;         // NOT file keys: the caller sets them (train.zero, the model)
  int a2a_chunks;         // C, head chunks Ulysses pipelines its all-to-alls over
                          // (train.ulysses_chunks); NOT a file key; 0 or 1: blocking
  cost_mask mask;         // NOT file keys: the model's attention mask (zero: full)
} cost_model;

// Limits of every size the scheduler takes, checked where values enter (files, CLI,
// sched_cluster_check, sched_batch_check), so that no token count, sum or product of
// the planner overflows int64 or double:
//   SCHED_MAX_TOKENS = 2^38 (2.7e11) tokens, for one clip and for mem_tokens: a one-hour
//     4K video at 30 fps in 2x16x16 tubelets is 1.75e9 tokens; 2^38 tokens of
//     activations would be petabytes per rank. N * M <= 2^62, a batch's sum <= 2^62.
//   SCHED_MAX_RANKS = 2^24 ranks (and gpus per node); SCHED_MAX_BATCH = 2^24 clips.
#define SCHED_MAX_TOKENS (INT64_C(1) << 38)
enum { SCHED_MAX_RANKS = 1 << 24, SCHED_MAX_BATCH = 1 << 24 };

// The cluster a plan is made for.
typedef struct {
  int ranks;          // N in [1, SCHED_MAX_RANKS], any N: groups are the aligned power-
                      // of-two blocks that fit in N (sched/plan.h)
  int gpus_per_node;  // G in [1, SCHED_MAX_RANKS]: groups of at most G ranks use bw_intra
  int64_t mem_tokens; // M in [1, SCHED_MAX_TOKENS]: most tokens one rank may hold in one
                      // microbatch
} sched_cluster;

// Number of keys of a cost file and their names, in file order (for writers). The last
// COST_NOPTIONAL keys (text_a, text_c: 0, no captions priced; a2a_lat, a2a_bw_intra,
// a2a_bw_inter: 0, the all-to-all priced with the ring's lat and bandwidths; ag_bw, rs_bw,
// coll_lat: 0, ZeRO's collectives priced likewise) may be absent from a file.
enum { COST_NKEYS = 16, COST_NOPTIONAL = 8 };
extern const char *const cost_key_names[COST_NKEYS];
// Value of key i (0..COST_NKEYS-1) of `cm`.
double cost_model_get(const cost_model *cm, int i);
// Accepted range [lo, hi] of key i, in its unit (the reasons are in sched/cost.c):
//   a [1e-15, 1]  b [1e-18, 1e-3]  kv [1, 1e12]  bw_intra, bw_inter [1e3, 1e16]
//   lat [0, 10]  ovh [0, 1e3]  allreduce [0, 1e5]  text_a [0, 1e-3]  text_c [0, 1]
//   a2a_lat [0, 10]  a2a_bw_intra, a2a_bw_inter 0 or [1e3, 1e16]
//   ag_bw, rs_bw 0 or [1e3, 1e16]  coll_lat [0, 10]
// So a and b are > 0, and every group time of clips within SCHED_MAX_TOKENS is finite.
extern const double cost_key_lo[COST_NKEYS], cost_key_hi[COST_NKEYS];

// Reads a cost file of `key = value` lines (core/ini.h: '#' or ';' comments, no
// sections). Every key but the optional ones is required; a missing, unknown or repeated
// key (naming both
// lines), a line that is not `key = value` (quoted), a non-number (NaN, inf) or a value
// outside its range fails with TSR_EFORMAT naming the file, line and key; TSR_EIO if
// the file cannot be read.
tsr_status cost_model_load(const char *path, cost_model *out);
// The cost model when no file is given (`tessera train` and `tessera plan` alike): the tiny
// model's CPU costs measured on a 2-core machine (docs/train.md). With one rank the plan is
// a packing of the batch into microbatches of at most mem_tokens tokens and only a, b and
// ovh steer it; multi-rank runs should use a file from `tessera calibrate`.
extern const cost_model cost_model_cpu;
// Checks values of a model built in code (same ranges as the loader; cm->zero: stage in
// [0, 3], 0 <= Pb <= P <= 2^50, nb and D >= 1 from stage 1 on).
tsr_status cost_model_check(const cost_model *cm);
// Checks a cluster: N and G within [1, SCHED_MAX_RANKS], 1 <= M <= SCHED_MAX_TOKENS.
tsr_status sched_cluster_check(const sched_cluster *cl);

// Time (s) of a group of k ranks holding m clips whose lengths sum to s1 and whose
// squares sum to s2, in the fastest of cm's modes. 0 when m == 0.
double cost_group_time(const cost_model *cm, int gpus_per_node, int k, int m, double s1,
                       double s2);
// The same in one mode (any mode, allowed by cm->cp_modes or not).
double cost_group_time_mode(const cost_model *cm, int gpus_per_node, int k, int m, double s1,
                            double s2, cost_cp_mode mode);
// The mode cost_group_time takes: the allowed one of least time, the first of ring,
// Ulysses, hybrid on ties; ring at k = 1, Ulysses for hybrid when k <= G; Ulysses not for
// k > H, nor hybrid for u > H (H = cm->heads when known): ring when nothing allowed is left.
cost_cp_mode cost_group_mode(const cost_model *cm, int gpus_per_node, int k, int m, double s1,
                             double s2);
// The communication time of the group not hidden behind its compute, in its mode: the
// ring's (k-1)*max(0, ...) term, Ulysses' all-to-all term, or hybrid's both.
double cost_group_exposed(const cost_model *cm, int gpus_per_node, int k, double s1, double s2,
                          cost_cp_mode mode);
// A masked ring group placed blockwise (cost_mask.place = BLOCKWISE, run by
// model/dist/placed_attention.h): its ranks attend their placement's queries (S2 = k x the
// most loaded rank's work, below) and receive only the K/V rows those queries need, by
// all-to-alls the executor posts before a rank attends to its own keys and waits for
// before it attends to the received ones (k > 1; the ring's form at k = 1):
//   T_p = ((a + text_a*Lt)*S1 + b*S2)/k + X + ovh + m*text_c*Lt
//   X = max over the ranks r of X_r,
//   X_r = max(0, 2/3 (t_r - b*O_r) + lat_a) + max(0, 1/3 (t_r - b*O_r) + lat_a),
//   t_r = kv*R_r/bw_a(k)
// R_r: the K/V tokens rank r receives over the group's clips (placement_group's recv), O_r
// its work against the keys it holds (placement_group's own). Each received token's K and
// V arrive in the forward and again in the backward, and the rank's dK/dV shares return
// (the rows it sent: the same count summed over the group, priced at R_r): kv bytes a
// token, a ring step's, a third each. A third of the rank's own-key work is the forward's
// and two its backward's, which the executor splits at half its own keys' work: the two K/V
// exchanges travel while it attends to its own keys in the forward and runs the first half
// of their backward (2/3 b*O_r, summed like the ring's steps sum both passes), the
// gradients' return while it runs the second half (1/3 b*O_r). Two latencies: the K/V
// exchange and the gradients' return, one a direction of travel as Ulysses counts its
// transfers. bw_a and lat_a: the all-to-all's (a2a_bw_intra for k <= G,
// else a2a_bw_inter, and a2a_lat; the ring's keys where those are 0).
// cost_placed_exchange is X_r (0 for k <= 1); cost_placed_time takes X.
double cost_placed_exchange(const cost_model *cm, int gpus_per_node, int k, double recv,
                            double own);
double cost_placed_time(const cost_model *cm, int k, int m, double s1, double s2, double x);
// For the planner's bounds (sched/dynamic.c): the most the exposed communication of a group
// of k ranks with sums s1, s2 can shrink when clips join it, over the modes cm allows (ring
// steps, hybrid's ring and the pipelined all-to-all's steps after the first hide more behind
// a larger attention; the first chunk's transfer only grows): *can = that part of the
// group's exposed time; *per_item (when item_s1 > 0) = the most one item of sums item_s1,
// item_s2 can take off.
void cost_group_shrink(const cost_model *cm, int gpus_per_node, int k, double s1, double s2,
                       double item_s1, double item_s2, double *can, double *per_item);
// For the planner's merge bound (sched/dynamic.c), mode by mode (t_mode, floor_mode:
// COST_CP_NMODES each): t_mode[m] the group's time in mode m and floor_mode[m] that minus the
// part of its exposed communication clips joining could hide (the *can of cost_group_shrink
// in that mode alone), for the modes cost_group_time chooses from; INFINITY for the others.
// cost_item_shrink: per_mode[m] the most one item of sums item_s1, item_s2 can take off mode
// m's exposed time, grow_mode[m] what it adds to it for certain (the bytes of the pipelined
// all-to-all's first chunk; 0 for the ring; both 0 for modes not chosen from). Mode m of a
// group grown by the item takes at least
// t_mode[m] - min(t_mode[m] - floor_mode[m], per_mode[m]) + grow_mode[m] + (a*S1 + b*S2)/k.
// cost_group_floors returns cost_group_time of the group (the same number, computed once).
double cost_group_floors(const cost_model *cm, int gpus_per_node, int k, int m, double s1,
                         double s2, double *t_mode, double *floor_mode);
void cost_item_shrink(const cost_model *cm, int gpus_per_node, int k, double item_s1,
                      double item_s2, double *per_mode, double *grow_mode);
// A clip's attention area: the (query, key) token pairs its mask allows, the term every
// formula above writes L^2 (S2 sums it over a group's clips). Full: L^2. Block-causal: the
// sum over allowed (query chunk, key chunk) pairs of their token counts' product. Window:
// the product over time, rows and columns of the sum over allowed (query tile, key tile)
// pairs of their extents' product (the last frame counted as its fraction of a frame), exact
// for whole frames. O(chunks) or O(tiles per axis) time.
double cost_clip_area(const cost_model *cm, int64_t L);
// Time (s) of one clip of L tokens alone in a group of k ranks.
double cost_clip_time(const cost_model *cm, int gpus_per_node, int k, int64_t L);
// Tokens a rank holds of a clip of L tokens cut over k ranks: ceil(L/k).
static inline int64_t cost_chunk_tokens(int64_t L, int k) { return (L + k - 1) / k; }
// ZeRO's terms (above) for a job of `ranks` ranks, G = gpus_per_node; all 0 at stage 0 or
// with one rank. cost_zero_step: t_ag(4P, nb) (stages 1 and 2), per step. cost_zero_wave: R_w
// (stage 2) or R_w + G_w (stage 3) of a wave whose longest group takes wave_s; 0 at stages
// 0 and 1. cost_zero_min_wave: the least cost_zero_wave of any wave (wave_s -> infinity:
// t_rs(4Pb, 1), + t_g at stage 3), for lower bounds.
double cost_zero_step(const cost_model *cm, int ranks, int gpus_per_node);
double cost_zero_wave(const cost_model *cm, int ranks, int gpus_per_node, double wave_s);
double cost_zero_min_wave(const cost_model *cm, int ranks, int gpus_per_node);
// 1 when cm's ZeRO stage makes every wave a world collective (stage >= 2, ranks > 1).
static inline int cost_zero_lockstep(const cost_model *cm, int ranks) {
  return cm->zero.stage >= 2 && ranks > 1;
}
// Smallest power-of-two k <= ranks with ceil(L/k) <= mem_tokens, or 0 if none.
int cost_min_cp(const sched_cluster *cl, int64_t L);

#endif
