// sched/cost.c — the reference cost model and its key = value file loader (core/ini.h).
#include "sched/cost.h"

#include "core/ini.h"
#include "core/num.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const cost_key_names[COST_NKEYS] = {
    "a",      "b",      "kv",      "bw_intra",     "bw_inter",    "lat",         "ovh",
    "allreduce", "text_a", "text_c", "a2a_lat", "a2a_bw_intra", "a2a_bw_inter",
    "ag_bw",  "rs_bw",  "coll_lat"};
// 0 allowed: "the ring's"
enum { KEY_A2A_BW_INTRA = 11, KEY_A2A_BW_INTER = 12, KEY_AG_BW = 13, KEY_RS_BW = 14 };
static const char *const cost_key_help[COST_NKEYS] = {
    "s per token", "s per token^2", "bytes per token per ring step", "bytes/s", "bytes/s",
    "s per ring step", "s per microbatch", "s per step",
    "s per token per caption token (cross-attention)",
    "s per caption token per clip on each rank of its group",
    "s per all-to-all (0: lat)", "bytes/s a rank sends in an all-to-all inside a node (0: bw_intra)",
    "bytes/s a rank sends in an all-to-all across nodes (0: bw_inter)",
    "bytes/s a rank receives in a world all-gather (ZeRO; 0: the ring's)",
    "bytes/s a rank sends in a world reduce-scatter (ZeRO; 0: the ring's)",
    "s per world all-gather or reduce-scatter (ZeRO; 0: lat)"};

static double *cost_field(cost_model *cm, int i) {
  double *f[COST_NKEYS] = {&cm->a,        &cm->b,   &cm->kv,  &cm->bw_intra,
                           &cm->bw_inter, &cm->lat, &cm->ovh, &cm->allreduce,
                           &cm->text_a,   &cm->text_c, &cm->a2a_lat, &cm->a2a_bw_intra,
                           &cm->a2a_bw_inter, &cm->ag_bw, &cm->rs_bw, &cm->coll_lat};
  return f[i];
}

double cost_model_get(const cost_model *cm, int i) { return *cost_field((cost_model *)cm, i); }

const char *cost_cp_mode_name(cost_cp_mode m) {
  return m == COST_CP_RING ? "ring" : m == COST_CP_ULYSSES ? "ulysses" : m == COST_CP_HYBRID ? "hybrid" : "?";
}

// The link of a group of k ranks: inside a node or across nodes.
static double link_bw(const cost_model *cm, int gpus_per_node, int k) {
  return k <= gpus_per_node ? cm->bw_intra : cm->bw_inter;
}

// An all-to-all's bandwidth and latency: calibrated (a2a_*) where the file has them, else
// the ring's.
static double a2a_bw(const cost_model *cm, int inside_node) {
  double a = inside_node ? cm->a2a_bw_intra : cm->a2a_bw_inter;
  return a > 0 ? a : inside_node ? cm->bw_intra : cm->bw_inter;
}
static double a2a_lat(const cost_model *cm) { return cm->a2a_lat > 0 ? cm->a2a_lat : cm->lat; }

// The share of the heads (of the attention work of a clip) a rank of u ranks splitting
// them holds: ceil(H/u)/H, 1/u when H is unknown.
static double head_share(const cost_model *cm, int u) {
  if (cm->heads <= 0) return 1.0 / u;
  return (double)((cm->heads + u - 1) / u) / (double)cm->heads;
}

// Hybrid's split of a group of k: Ulysses over u = G ranks, ring over r = k/u; 0 when it is
// not hybrid (k <= G, or G not a power of two): then the mode is Ulysses.
static int hybrid_u(int gpus_per_node, int k) {
  int pow2 = !(gpus_per_node & (gpus_per_node - 1));  // blocks of u must tile the group
  return gpus_per_node > 1 && pow2 && k > gpus_per_node ? gpus_per_node : 0;
}

// The ring part of a hybrid group: per-step exposure of r steps with the head share sh.
static double hybrid_ring_step(const cost_model *cm, int r, double sh, double s1, double s2) {
  double rr = (double)r;
  return cm->kv * s1 * sh / rr / cm->bw_inter + cm->lat - cm->b * s2 * sh / (rr * rr);
}

// Ulysses' all-to-all over u of the group's k ranks, pipelined over the head chunks
// (sched/cost.h): the chunks C, one chunk's transfers (*x, in and back, with its latency) and
// the attention of a chunk that hides them (*w; `att` the rank's whole attention work).
static int a2a_pipeline(const cost_model *cm, int k, int u, int inside_node, double s1, double att,
                        double *x, double *w) {
  int c = cm->a2a_chunks > 1 ? cm->a2a_chunks : 1;
  int hmax = cm->heads > 0 ? (cm->heads + u - 1) / u : c;  // heads of the rank with the most
  if (c > hmax) c = hmax > 1 ? hmax : 1;
  double kk = (double)k, uu = (double)u;
  *x = 2.0 * (cm->kv * s1 / kk * (uu - 1) / uu / a2a_bw(cm, inside_node) / c + a2a_lat(cm));
  *w = att / c;
  return c;
}

// Exposed time of the pipelined all-to-all: the first chunk's transfer in and the last one's
// back, x, and in each of the other C - 1 steps what the chunk's attention does not hide.
static double a2a_exposed(int c, double x, double w) {
  return x + (double)(c - 1) * (x > w ? x - w : 0);
}

double cost_group_exposed(const cost_model *cm, int gpus_per_node, int k, double s1, double s2,
                          cost_cp_mode mode) {
  if (k <= 1) return 0.0;
  double kk = (double)k, x, w;
  int u = mode == COST_CP_HYBRID ? hybrid_u(gpus_per_node, k) : 0;
  if (mode == COST_CP_ULYSSES || (mode == COST_CP_HYBRID && !u)) {
    int c = a2a_pipeline(cm, k, k, k <= gpus_per_node, s1, cm->b * s2 * head_share(cm, k), &x, &w);
    return a2a_exposed(c, x, w);
  }
  if (mode == COST_CP_HYBRID) {
    double sh = head_share(cm, u), e = hybrid_ring_step(cm, k / u, sh, s1, s2);
    int c = a2a_pipeline(cm, k, u, 1, s1, cm->b * s2 * sh / (double)(k / u), &x, &w);
    return a2a_exposed(c, x, w) + (double)(k / u - 1) * (e > 0 ? e : 0);
  }
  double exposed = cm->kv * s1 / kk / link_bw(cm, gpus_per_node, k) + cm->lat - cm->b * s2 / (kk * kk);
  return (kk - 1) * (exposed > 0 ? exposed : 0);
}

double cost_placed_exchange(const cost_model *cm, int gpus_per_node, int k, double recv,
                            double own) {
  if (k <= 1) return 0.0;
  double t = cm->kv * recv / a2a_bw(cm, k <= gpus_per_node), lat = a2a_lat(cm);
  // the K/V rows, both passes, past the forward's own keys and the backward's first half;
  // the dK/dV shares' return past the backward's second half
  double kv = 2.0 / 3.0 * (t - cm->b * own) + lat, back = (t - cm->b * own) / 3.0 + lat;
  return (kv > 0 ? kv : 0) + (back > 0 ? back : 0);
}

// The ring's work term: token-linear and attention work split over the k ranks.
static double ring_work(const cost_model *cm, int k, double s1, double s2) {
  return ((cm->a + cm->text_a * cm->text_tokens) * s1 + cm->b * s2) / (double)k;
}

double cost_placed_time(const cost_model *cm, int k, int m, double s1, double s2, double x) {
  if (m == 0) return 0.0;
  return ring_work(cm, k, s1, s2) + (k > 1 ? x : 0) + cm->ovh + (double)m * cm->text_c * cm->text_tokens;
}

double cost_group_time_mode(const cost_model *cm, int gpus_per_node, int k, int m, double s1,
                            double s2, cost_cp_mode mode) {
  if (m == 0) return 0.0;
  if (k <= 1) mode = COST_CP_RING;
  if (mode == COST_CP_HYBRID && !hybrid_u(gpus_per_node, k)) mode = COST_CP_ULYSSES;
  double lt = cm->text_tokens;  // captions: queries split over the group, caption replicated
  double kk = (double)k, exposed = cost_group_exposed(cm, gpus_per_node, k, s1, s2, mode);
  double work;
  if (mode == COST_CP_ULYSSES)
    work = (cm->a + cm->text_a * lt) * s1 / kk + cm->b * s2 * head_share(cm, k);
  else if (mode == COST_CP_HYBRID)
    work = (cm->a + cm->text_a * lt) * s1 / kk +
           cm->b * s2 * head_share(cm, hybrid_u(gpus_per_node, k)) / (double)(k / hybrid_u(gpus_per_node, k));
  else
    work = ring_work(cm, k, s1, s2);
  return work + exposed + cm->ovh + (double)m * cm->text_c * lt;
}

// The modes cost_group_time chooses from for a group of k (bits of COST_MODES_*): cm's, with
// hybrid as Ulysses where it is not hybrid, Ulysses not for k > H, nor hybrid for u > H; ring
// alone at k = 1 (0 bits left: ring, cost_group_mode's fallback).
static int allowed_modes(const cost_model *cm, int gpus_per_node, int k) {
  int allowed = cm->cp_modes ? cm->cp_modes : COST_MODES_RING;
  if (k <= 1) return COST_MODES_RING;
  if (!hybrid_u(gpus_per_node, k) && (allowed & COST_MODES_HYBRID))
    allowed = (allowed & ~COST_MODES_HYBRID) | COST_MODES_ULYSSES;  // hybrid is Ulysses there
  // Ulysses splits heads: more ranks than heads would leave ranks without attention work
  // and hold k L tokens of a head each (k/H times the ring's buffers); not offered then
  if (cm->heads > 0 && k > cm->heads) allowed &= ~COST_MODES_ULYSSES;
  if (cm->heads > 0 && (allowed & COST_MODES_HYBRID) && hybrid_u(gpus_per_node, k) > cm->heads)
    allowed &= ~COST_MODES_HYBRID;
  return allowed;
}

// The allowed mode of least time and that time (ring on ties, and when nothing is allowed).
static cost_cp_mode best_mode(const cost_model *cm, int gpus_per_node, int k, int m, double s1,
                              double s2, double *t_best) {
  int allowed = allowed_modes(cm, gpus_per_node, k);
  cost_cp_mode best = COST_CP_RING;
  double bt = INFINITY;
  for (int md = 0; md < COST_CP_NMODES; md++) {
    if (!(allowed & (1 << md))) continue;
    double t = cost_group_time_mode(cm, gpus_per_node, k, m, s1, s2, (cost_cp_mode)md);
    if (t < bt) bt = t, best = (cost_cp_mode)md;
  }
  if (!allowed) bt = cost_group_time_mode(cm, gpus_per_node, k, m, s1, s2, COST_CP_RING);
  *t_best = bt;
  return best;
}

cost_cp_mode cost_group_mode(const cost_model *cm, int gpus_per_node, int k, int m, double s1,
                             double s2) {
  double t;
  return best_mode(cm, gpus_per_node, k, m, s1, s2, &t);
}

// The same number as cost_group_time_mode of cost_group_mode's choice, computed once.
double cost_group_time(const cost_model *cm, int gpus_per_node, int k, int m, double s1,
                       double s2) {
  double t;
  best_mode(cm, gpus_per_node, k, m, s1, s2, &t);
  return t;
}

// One mode's part of cost_group_shrink: the exposed time of the group (sums s1, s2) that
// clips joining could hide (*can) and the most an item (item_s1, item_s2) takes off (*per).
// mode ULYSSES: the pipelined all-to-all over k; HYBRID (u = hybrid_u > 0): the ring over the
// k/u nodes and the all-to-all over u; RING: the ring steps.
// *grow: what the item adds to the exposed time for certain (the pipelined all-to-all's first
// chunk carries its bytes: xi of the item without the latency; 0 for the ring).
static void mode_shrink(const cost_model *cm, int gpus_per_node, int k, double s1, double s2,
                        double item_s1, double item_s2, cost_cp_mode mode, double *can,
                        double *per, double *grow) {
  double kk = (double)k, x, w, xi, wi;
  *grow = 0;
  if (mode == COST_CP_RING) {
    double bw = link_bw(cm, gpus_per_node, k);
    double e = cm->kv * s1 / kk / bw + cm->lat - cm->b * s2 / (kk * kk);
    double delta = cm->kv * item_s1 / kk / bw - cm->b * item_s2 / (kk * kk);
    *can = (kk - 1) * (e > 0 ? e : 0);
    *per = (kk - 1) * (delta < 0 ? -delta : 0);
  } else if (mode == COST_CP_ULYSSES) {
    // a pipelined all-to-all's steps other than the first: the attention of a chunk hides
    // more of them as clips join (the first chunk's transfer only grows)
    double sh = head_share(cm, k);
    int c = a2a_pipeline(cm, k, k, k <= gpus_per_node, s1, cm->b * s2 * sh, &x, &w);
    a2a_pipeline(cm, k, k, k <= gpus_per_node, item_s1, cm->b * item_s2 * sh, &xi, &wi);
    xi -= 2.0 * a2a_lat(cm);  // an item adds bytes, not transfers
    *can = (double)(c - 1) * (x > w ? x - w : 0), *per = (double)(c - 1) * (wi > xi ? wi - xi : 0);
    *grow = xi > 0 ? xi : 0;
  } else {
    int u = hybrid_u(gpus_per_node, k), r = k / u;
    double sh = head_share(cm, u), rr = (double)r;
    double eh = hybrid_ring_step(cm, r, sh, s1, s2);
    double dh = cm->kv * item_s1 * sh / rr / cm->bw_inter - cm->b * item_s2 * sh / (rr * rr);
    double ch = (rr - 1) * (eh > 0 ? eh : 0), ph = (rr - 1) * (dh < 0 ? -dh : 0);
    int c = a2a_pipeline(cm, k, u, 1, s1, cm->b * s2 * sh / rr, &x, &w);  // its Ulysses part
    a2a_pipeline(cm, k, u, 1, item_s1, cm->b * item_s2 * sh / rr, &xi, &wi);
    xi -= 2.0 * a2a_lat(cm);
    ch += (double)(c - 1) * (x > w ? x - w : 0), ph += (double)(c - 1) * (wi > xi ? wi - xi : 0);
    *can = ch, *per = ph, *grow = xi > 0 ? xi : 0;
  }
}

void cost_group_shrink(const cost_model *cm, int gpus_per_node, int k, double s1, double s2,
                       double item_s1, double item_s2, double *can, double *per_item) {
  // the ring's (a bound whatever the group's mode), then the larger of the other modes'
  double g0;
  mode_shrink(cm, gpus_per_node, k, s1, s2, item_s1, item_s2, COST_CP_RING, can, per_item, &g0);
  const int modes = cm->cp_modes ? cm->cp_modes : COST_MODES_RING;
  int u = hybrid_u(gpus_per_node, k);
  double c, p, g;
  if (modes & (COST_MODES_ULYSSES | (u ? 0 : COST_MODES_HYBRID))) {
    mode_shrink(cm, gpus_per_node, k, s1, s2, item_s1, item_s2, COST_CP_ULYSSES, &c, &p, &g);
    if (c > *can) *can = c;
    if (p > *per_item) *per_item = p;
  }
  if (!u || !(modes & COST_MODES_HYBRID)) return;
  mode_shrink(cm, gpus_per_node, k, s1, s2, item_s1, item_s2, COST_CP_HYBRID, &c, &p, &g);
  if (c > *can) *can = c;
  if (p > *per_item) *per_item = p;
}

double cost_group_floors(const cost_model *cm, int gpus_per_node, int k, int m, double s1,
                         double s2, double *t_mode, double *floor_mode) {
  int allowed = allowed_modes(cm, gpus_per_node, k), none = !allowed;
  if (none) allowed = COST_MODES_RING;  // cost_group_time's fallback
  double bt = INFINITY;  // best_mode's choice among the same numbers
  for (int md = 0; md < COST_CP_NMODES; md++) {
    t_mode[md] = floor_mode[md] = INFINITY;
    if (!(allowed & (1 << md))) continue;
    double t = cost_group_time_mode(cm, gpus_per_node, k, m, s1, s2, (cost_cp_mode)md), can = 0, per, g;
    if (k > 1) mode_shrink(cm, gpus_per_node, k, s1, s2, 0, 0, (cost_cp_mode)md, &can, &per, &g);
    t_mode[md] = t;
    floor_mode[md] = t - can;
    if (t < bt) bt = t;
  }
  return none ? t_mode[COST_CP_RING] : bt;
}

void cost_item_shrink(const cost_model *cm, int gpus_per_node, int k, double item_s1,
                      double item_s2, double *per_mode, double *grow_mode) {
  int allowed = allowed_modes(cm, gpus_per_node, k);
  if (!allowed) allowed = COST_MODES_RING;  // cost_group_time's fallback
  for (int md = 0; md < COST_CP_NMODES; md++) {
    double can;
    per_mode[md] = grow_mode[md] = 0;
    if (k > 1 && (allowed & (1 << md)))
      mode_shrink(cm, gpus_per_node, k, 0, 0, item_s1, item_s2, (cost_cp_mode)md, &can,
                  &per_mode[md], &grow_mode[md]);
  }
}

// ---- ZeRO (sched/cost.h) ------------------------------------------------------------------

// A world collective moving `bytes` whole in `calls` calls at bandwidth bw (0: the ring's
// bw(N)): t = (N-1)/N bytes / bw + calls * coll_lat; 0 with one rank.
static double zero_coll(const cost_model *cm, int ranks, int gpus_per_node, double bw,
                        double bytes, int calls) {
  if (ranks <= 1) return 0.0;
  double n = (double)ranks, b = bw > 0 ? bw : link_bw(cm, gpus_per_node, ranks);
  double l = cm->coll_lat > 0 ? cm->coll_lat : cm->lat;
  return (n - 1) / n * bytes / b + calls * l;
}

double cost_zero_step(const cost_model *cm, int ranks, int gpus_per_node) {
  const cost_zero *z = &cm->zero;
  if (z->stage < 1 || z->stage > 2) return 0.0;  // stage 3 gathers per block instead
  return zero_coll(cm, ranks, gpus_per_node, cm->ag_bw, 4 * z->params, z->buckets);
}

// t_g: one block's all-gather (stage 3).
static double zero_block_gather(const cost_model *cm, int ranks, int gpus_per_node) {
  return zero_coll(cm, ranks, gpus_per_node, cm->ag_bw, 4 * cm->zero.block, 1);
}

double cost_zero_wave(const cost_model *cm, int ranks, int gpus_per_node, double wave_s) {
  const cost_zero *z = &cm->zero;
  if (!cost_zero_lockstep(cm, ranks)) return 0.0;
  double last = zero_coll(cm, ranks, gpus_per_node, cm->rs_bw, 4 * z->block, 1);
  double rest = zero_coll(cm, ranks, gpus_per_node, cm->rs_bw, 4 * (z->params - z->block),
                          z->buckets - 1) - 2.0 / 3.0 * wave_s;
  double t = last + (rest > 0 ? rest : 0);
  if (z->stage >= 3) {
    double tg = zero_block_gather(cm, ranks, gpus_per_node), D = (double)z->blocks;
    double fwd = tg - wave_s / (3 * D), bwd = tg - 2 * wave_s / (3 * D);
    t += tg + (D - 1) * ((fwd > 0 ? fwd : 0) + (bwd > 0 ? bwd : 0));
  }
  return t;
}

double cost_zero_min_wave(const cost_model *cm, int ranks, int gpus_per_node) {
  if (!cost_zero_lockstep(cm, ranks)) return 0.0;
  double t = zero_coll(cm, ranks, gpus_per_node, cm->rs_bw, 4 * cm->zero.block, 1);
  if (cm->zero.stage >= 3) t += zero_block_gather(cm, ranks, gpus_per_node);
  return t;
}

// Sum over tile pairs (i, j) of an axis of n tiles with |i - j| <= r of size(i) size(j),
// where tile i has extent `tile` but the last, which has what is left of `len`; len may be
// fractional (the time axis of a partial last frame).
static double axis_area(double len, int tile, int r) {
  int64_t n = (int64_t)ceil(len / tile);
  double s = 0;
  for (int64_t i = 0; i < n; i++) {
    double si = fmin(tile, len - (double)i * tile), near = 0;
    for (int64_t j = i - r < 0 ? 0 : i - r; j <= i + r && j < n; j++)
      near += fmin(tile, len - (double)j * tile);
    s += si * near;
  }
  return s;
}

double cost_clip_area(const cost_model *cm, int64_t L) {
  const cost_mask *m = &cm->mask;
  double l = (double)L;
  if (m->kind == COST_MASK_FULL || m->rows < 1 || m->cols < 1) return l * l;
  double frame = (double)m->rows * (double)m->cols;
  if (m->kind == COST_MASK_WINDOW)
    return axis_area(l / frame, m->tile_t, m->wt) * axis_area((double)m->rows, m->tile_h, m->wh) *
           axis_area((double)m->cols, m->tile_w, m->ww);
  // block-causal: chunk c holds tokens [c n, min((c + 1) n, L)); with the prefix sums of the
  // chunks' sizes, chunk c's allowed keys are the chunks [c - window, c] (or [0, c])
  double n = frame * m->chunk, area = 0;
  int64_t chunks = (int64_t)ceil(l / n);
  for (int64_t c = 0; c < chunks; c++) {
    double size = fmin(n, l - (double)c * n);
    int64_t first = m->window > 0 && c - m->window > 0 ? c - m->window : 0;
    double keys = fmin(l, (double)(c + 1) * n) - (double)first * n;  // chunks first..c
    area += size * keys;
  }
  return area;
}

double cost_clip_time(const cost_model *cm, int gpus_per_node, int k, int64_t L) {
  double l = (double)L;
  return cost_group_time(cm, gpus_per_node, k, 1, l, cost_clip_area(cm, L));
}

int cost_min_cp(const sched_cluster *cl, int64_t L) {
  for (int k = 1; k <= cl->ranks; k *= 2)
    if (cost_chunk_tokens(L, k) <= cl->mem_tokens) return k;
  return 0;
}

// Accepted range of each key, in the units of sched/cost.h. Physical sense, with room
// for CPUs (slow) and future GPUs (fast), and arithmetic safety: with clips and memory of
// at most SCHED_MAX_TOKENS (2^38) tokens, b*L^2 <= 1e-3 * 7.6e22 and every other term of
// a group's time stay far below DBL_MAX, so no candidate time of the planner overflows.
//   a: token-linear work costs at least ~6 flops per parameter per token; 1e-15 s/token
//      would be 1e15 tokens/s; 1 s/token is a 10B model on one slow CPU core.
//   b: attention costs ~12 flops per layer and channel per token pair; 1e-18 s/token^2
//      is beyond any machine for a model of >= 64 channels, 1e-3 a large model on a CPU.
//   kv: K/V bytes per token per ring step, >= 1 byte; 1e12 is a terabyte per token.
//   bw_*: 1 kB/s (a broken link) to 1e16 bytes/s (10 PB/s).
//   lat, ovh, allreduce: may be 0 (not modelled); at most 10 s per ring step, 1000 s per
//      microbatch, 1e5 s per step (a day).
//   text_a, text_c: may be 0 (no captions); at most a 1e-3 s per token and caption token
//      (b's bound: a query against a key costs as much as against a video key) and 1 s per
//      caption token (a's bound).
//   a2a_*: as lat and bw_*, and 0 (absent: the ring's keys price the all-to-all).
//   ag_bw, rs_bw, coll_lat: as bw_* and lat, and 0 (absent: the ring's keys price them).
const double cost_key_lo[COST_NKEYS] = {1e-15, 1e-18, 1, 1e3, 1e3, 0, 0, 0, 0, 0, 0, 1e3, 1e3,
                                        1e3, 1e3, 0};
const double cost_key_hi[COST_NKEYS] = {1, 1e-3, 1e12, 1e16, 1e16, 10, 1e3, 1e5, 1e-3, 1, 10,
                                        1e16, 1e16, 1e16, 1e16, 10};

static tsr_status cost_value_check(const char *where, int i, double v) {
  if ((i == KEY_A2A_BW_INTRA || i == KEY_A2A_BW_INTER || i == KEY_AG_BW || i == KEY_RS_BW) &&
      v == 0)
    return TSR_OK;  // unset
  if (!(v >= cost_key_lo[i] && v <= cost_key_hi[i]))  // NaN fails too
    return err_set(TSR_EFORMAT, "%s: key '%s' = %g is out of range [%g, %g] (%s; docs/plan.md)",
                   where, cost_key_names[i], v, cost_key_lo[i], cost_key_hi[i],
                   cost_key_help[i]);
  return TSR_OK;
}

tsr_status cost_model_check(const cost_model *cm) {
  for (int i = 0; i < COST_NKEYS; i++) {
    tsr_status st = cost_value_check("cost model", i, cost_model_get(cm, i));
    if (st) return st;
  }
  // at most STORE_MAX_CAPTION_TOKENS (2^16) caption tokens a clip: every term stays finite
  if (!(cm->text_tokens >= 0 && cm->text_tokens <= 65536))
    return err_set(TSR_EINVAL, "cost model: %g caption tokens per clip is outside [0, 65536]",
                   cm->text_tokens);
  const cost_mask *mk = &cm->mask;
  if (mk->place < COST_PLACE_EVEN || mk->place > COST_PLACE_BLOCKWISE)
    return err_set(TSR_EINVAL, "cost model: placement %d is none of even (0), contiguous (1), "
                   "blockwise (2)", mk->place);
  if (mk->pin < 0 || mk->pin > COST_PINS)
    return err_set(TSR_EINVAL, "cost model: pinned placement kind %d is outside [0, %d]", mk->pin,
                   COST_PINS);
  if (mk->kind < COST_MASK_FULL || mk->kind > COST_MASK_WINDOW ||
      (mk->kind != COST_MASK_FULL &&
       (mk->rows < 1 || mk->cols < 1 || mk->rows > SCHED_MAX_TOKENS || mk->cols > SCHED_MAX_TOKENS ||
        (mk->kind == COST_MASK_BLOCK_CAUSAL && (mk->chunk < 1 || mk->window < 0)) ||
        (mk->kind == COST_MASK_WINDOW && (mk->tile_t < 1 || mk->tile_h < 1 || mk->tile_w < 1 ||
                                          mk->wt < 0 || mk->wh < 0 || mk->ww < 0)))))
    return err_set(TSR_EINVAL, "cost model: attention mask kind %d with a frame of %lld x %lld "
                   "tokens, chunk %d, window %d, tiles %dx%dx%d, radii %d, %d, %d: a masked "
                   "model needs the token grid of a frame (>= 1 x 1) and the mask's sizes",
                   mk->kind, (long long)mk->rows, (long long)mk->cols, mk->chunk, mk->window,
                   mk->tile_t, mk->tile_h, mk->tile_w, mk->wt, mk->wh, mk->ww);
  const cost_zero *z = &cm->zero;  // 2^50 floats: 4 PB of weights, every term finite
  if (z->stage < 0 || z->stage > 3 ||
      (z->stage > 0 && !(z->params >= 0 && z->params <= 0x1p50 && z->block >= 0 &&
                         z->block <= z->params && z->buckets >= 1 && z->blocks >= 1)))
    return err_set(TSR_EINVAL, "cost model: ZeRO stage %d of %g parameters, blocks of %g in %d "
                   "buckets and %d blocks: the stage must be in [0, 3], 0 <= block <= "
                   "parameters <= 2^50, buckets and blocks >= 1", z->stage, z->params,
                   z->block, z->buckets, z->blocks);
  return TSR_OK;
}

tsr_status sched_cluster_check(const sched_cluster *cl) {
  if (cl->ranks < 1 || cl->ranks > SCHED_MAX_RANKS)
    return err_set(TSR_EINVAL, "ranks = %d: the number of ranks must be in [1, %d]",
                   cl->ranks, SCHED_MAX_RANKS);
  if (cl->gpus_per_node < 1 || cl->gpus_per_node > SCHED_MAX_RANKS)
    return err_set(TSR_EINVAL, "gpus per node = %d: must be in [1, %d]", cl->gpus_per_node,
                   SCHED_MAX_RANKS);
  if (cl->mem_tokens < 1 || cl->mem_tokens > SCHED_MAX_TOKENS)
    return err_set(TSR_EINVAL, "mem tokens = %lld: must be in [1, %lld]",
                   (long long)cl->mem_tokens, (long long)SCHED_MAX_TOKENS);
  return TSR_OK;
}

typedef struct {
  const char *path;
  cost_model *cm;
  int line[COST_NKEYS];  // line of each key in the file, 0: not seen yet
} cost_parse;

static tsr_status cost_key(void *user, const char *section, const char *name, const char *value,
                           int line) {
  cost_parse *p = user;
  if (*section)
    return err_set(TSR_EFORMAT, "%s:%d: key '%s' in section [%s]; a cost file has no sections",
                   p->path, line, name, section);
  int i = 0;
  while (i < COST_NKEYS && strcmp(name, cost_key_names[i])) i++;
  if (i == COST_NKEYS)
    return err_set(TSR_EFORMAT,
                   "%s:%d: unknown key '%s' (keys: a, b, kv, bw_intra, bw_inter, lat, ovh, "
                   "allreduce; optional: text_a, text_c, a2a_lat, a2a_bw_intra, a2a_bw_inter, "
                   "ag_bw, rs_bw, coll_lat)",
                   p->path, line, name);
  if (p->line[i])
    return err_set(TSR_EFORMAT, "%s:%d: key '%s' given twice (lines %d and %d); keep one",
                   p->path, line, name, p->line[i], line);
  double v;
  num_result r = num_parse_double(value, -HUGE_VAL, HUGE_VAL, &v);
  if (r == NUM_SYNTAX)
    return err_set(TSR_EFORMAT, "%s:%d: key '%s': '%s' is not a number", p->path, line, name,
                   value);
  if (r == NUM_RANGE)
    return err_set(TSR_EFORMAT, "%s:%d: key '%s' = '%s' is out of range [%g, %g] (%s)", p->path,
                   line, name, value, cost_key_lo[i], cost_key_hi[i], cost_key_help[i]);
  char where[64 + 4096];
  snprintf(where, sizeof where, "%s:%d", p->path, line);
  tsr_status st = cost_value_check(where, i, v);
  if (st) return st;
  *cost_field(p->cm, i) = v;
  p->line[i] = line;
  return TSR_OK;
}

const cost_model cost_model_cpu = {.a = 2e-5, .b = 2e-9, .kv = 1024, .bw_intra = 1e10,
                                   .bw_inter = 1e9, .lat = 1e-5, .ovh = 2e-3, .allreduce = 0};

tsr_status cost_model_load(const char *path, cost_model *out) {
  cost_model cm = {0};
  cost_parse p = {.path = path, .cm = &cm};
  tsr_status st = ini_read(path, NULL, cost_key, &p);
  if (st == TSR_EIO) return err_wrap(st, "cost file (presets: configs/cost/*.conf): ");
  if (st) return st;
  for (int i = 0; i < COST_NKEYS - COST_NOPTIONAL; i++)
    if (!p.line[i])
      return err_set(TSR_EFORMAT, "%s: missing key '%s' (every key of docs/plan.md but the "
                     "optional text_a, text_c, a2a_*, ag_bw, rs_bw and coll_lat is required)",
                     path, cost_key_names[i]);
  *out = cm;
  return TSR_OK;
}
