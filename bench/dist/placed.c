// bench/dist/placed.c — masked CP attention at 2 (or more) ranks on the CPU: contiguous
// chunks (ring attention) against a blockwise placement (placed attention), measured beside
// the planner's model (not a test; bench/dist/placed.sh runs it).
//
//   mpirun -np K bench_placed [--tokens L] [--rows R --cols C] [--mask block_causal|window]
//                             [--chunk F] [--window W] [--heads H] [--dh D] [--reps N]
//                             [--place contiguous|zigzag|greedy|balanced]
//
// One clip of L tokens in frames of R x C tokens (raster order) under the mask, one group
// of all K ranks, random q, k, v, dout: forward and backward of its attention (the part of
// a step the placement changes), each rep's time the slowest rank's, the median over reps:
//   contiguous  ring attention over chunk r of the tokens on rank r (ring_attention_set_mask)
//   blockwise   placed attention over placement_for's blockwise placement of the clip, its
//               exchanges (K/V, the shares' return) travelling while the own keys are
//               attended, and (serial_s, reps interleaved with those) waited for as soon
//               as posted: x_overlap is serial over overlapped
// The model: the same attention on one rank (the whole clip, timed here first) gives b, the
// seconds per allowed (query, key) pair, and each layout is predicted as b times its most
// loaded rank's work (sched/placement.h; the exchange is not priced: the ranks share one
// machine's memory). One JSON line: measured and predicted seconds and the speedups.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/log.h"
#include "kernels/kernels.h"
#include "model/dist/placed_attention.h"
#include "model/dist/ring_attention.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

// The slowest rank's seconds since t0 (after the collective work ended).
static double slowest(double t0) {
  int64_t us = (int64_t)((time_now() - t0) * 1e6);
  comm_allreduce_max_i64(&us, 1);
  return (double)us * 1e-6;
}

// One timed rep of a CP layout: forward and backward of this rank's rows (lx: q, k, v,
// dout; d: dq, dk, dv) by ring attention (ra) or placed attention (pa, when ra is NULL).
typedef struct {
  ring_attention *ra;
  placed_attention *pa;
  float *out, *lse, *const *lx, *const *d;
  int H, Dh;
  float scale;
} cp_step;

static tsr_status cp_step_run(const cp_step *c) {
  float *const *x = c->lx, *const *d = c->d;
  if (c->ra) {
    TSR_TRY(ring_attention_forward(c->ra, c->out, c->lse, x[0], x[1], x[2], c->H, c->Dh, c->scale));
    return ring_attention_backward(c->ra, d[0], d[1], d[2], x[3], x[0], x[1], x[2], c->out, c->lse,
                                   c->H, c->Dh, c->scale);
  }
  TSR_TRY(placed_attention_forward(c->pa, c->out, c->lse, x[0], x[1], x[2], c->H, c->Dh, c->scale));
  return placed_attention_backward(c->pa, d[0], d[1], d[2], x[3], x[0], x[1], x[2], c->out, c->lse,
                                   c->H, c->Dh, c->scale);
}

// reps timed reps of c, times[r] the slowest rank's seconds of rep r.
static tsr_status cp_step_time(const cp_step *c, int reps, double *times) {
  tsr_status st = TSR_OK;
  for (int r = 0; r < reps && !st; r++) {
    comm_barrier();
    double t0 = time_now();
    st = cp_step_run(c);
    times[r] = slowest(t0);
  }
  return st;
}

int main(int argc, char **argv) {
  if (comm_init(&argc, &argv) || comm_groups_init()) return 1;
  int64_t L = 6144, rows = 8, cols = 16;
  int chunk = 2, window = 0, H = 2, Dh = 32, reps = 3, is_window = 0, force = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "--tokens")) L = atoll(v);
    else if (!strcmp(k, "--rows")) rows = atoll(v);
    else if (!strcmp(k, "--cols")) cols = atoll(v);
    else if (!strcmp(k, "--mask")) is_window = !strcmp(v, "window");
    else if (!strcmp(k, "--chunk")) chunk = atoi(v);
    else if (!strcmp(k, "--window")) window = atoi(v);
    else if (!strcmp(k, "--heads")) H = atoi(v);
    else if (!strcmp(k, "--dh")) Dh = atoi(v);
    else if (!strcmp(k, "--reps")) reps = atoi(v);
    else if (!strcmp(k, "--place"))  // a kind of sched/placement.h instead of placement_for's
      for (int j = 0; j < PLACE_NKINDS; j++)
        if (!strcmp(v, place_kind_name((place_kind)j))) force = j;
  }
  const int K = comm_size(), p = comm_rank();
  comm_group *g = comm_group_get(K);
  const kernels_backend *kb = kernels_cpu();
  kernels_mask km = is_window ? (kernels_mask){.kind = KERNELS_MASK_WINDOW, .wt = 1, .wh = 1,
                                               .ww = 1, .tile_t = chunk, .tile_h = 4, .tile_w = 4}
                              : (kernels_mask){.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = chunk,
                                               .window = window};
  cost_mask cm = {.kind = km.kind, .chunk = km.chunk, .window = km.window, .wt = km.wt,
                  .wh = km.wh, .ww = km.ww, .tile_t = km.tile_t, .tile_h = km.tile_h,
                  .tile_w = km.tile_w, .rows = rows, .cols = cols};
  const size_t E = (size_t)H * Dh, n = (size_t)L * E;
  float *x[4], *lx[4], *out = malloc(n * 4), *lse = malloc((size_t)L * H * 4);
  float *d[3];
  int32_t *pos = malloc((size_t)L * 12), *lpos = malloc((size_t)L * 12);
  uint64_t s = 99;
  for (int t = 0; t < 4; t++) {
    x[t] = malloc(n * 4), lx[t] = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      x[t][i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
    }
  }
  for (int t = 0; t < 3; t++) d[t] = malloc(n * 4);
  for (int64_t i = 0; i < L; i++) {
    int64_t f = rows * cols;
    pos[3 * i] = (int32_t)(i / f), pos[3 * i + 1] = (int32_t)(i % f / cols), pos[3 * i + 2] = (int32_t)(i % cols);
  }
  const float scale = 1.0f / sqrtf((float)Dh);
  int32_t cu[2] = {0, (int32_t)L};
  int mx = kernels_attention_max_len((int)L, L);
  double *one = malloc((size_t)reps * sizeof(double)), *con = malloc((size_t)reps * sizeof(double)),
         *blk = malloc((size_t)reps * sizeof(double)), *ser = malloc((size_t)reps * sizeof(double));
  // one rank: the whole clip (every rank runs it; the slowest counts)
  for (int r = 0; r < reps; r++) {
    comm_barrier();
    double t0 = time_now();
    kb->attention_masked_forward(kb, out, lse, x[0], x[1], x[2], cu, cu, pos, pos, km, 1, mx, mx,
                                 (int)L, (int)L, H, Dh, scale);
    kb->attention_masked_backward(kb, d[0], d[1], d[2], x[3], x[0], x[1], x[2], out, lse, cu, pos,
                                  km, 1, mx, (int)L, H, Dh, scale);
    one[r] = slowest(t0);
  }
  // contiguous: ring attention over this rank's chunk
  int64_t first, len;
  ring_chunk(L, K, p, &first, &len);
  for (int t = 0; t < 4; t++) memcpy(lx[t], x[t] + (size_t)first * E, (size_t)len * E * 4);
  memcpy(lpos, pos + 3 * first, (size_t)len * 12);
  ring_attention *ra = NULL;
  tsr_status st = ring_attention_create(&ra, kb, comm_mpi(), g);
  if (!st) st = ring_attention_set_clips(ra, 1, &L);
  if (!st) st = ring_attention_set_mask(ra, km, lpos);
  cp_step step = {.out = out, .lse = lse, .lx = lx, .d = d, .H = H, .Dh = Dh, .scale = scale};
  step.ra = ra;
  if (!st) st = cp_step_time(&step, reps, con);
  ring_attention_free(&ra);
  // blockwise: placed attention over the clip's placement
  cm.place = COST_PLACE_BLOCKWISE;
  const placement *pl = NULL, *pc = NULL, *pz = NULL;
  if (!st) st = force < 0 ? placement_for(&cm, L, K, &pl) : placement_cached(&cm, L, K, (place_kind)force, &pl);
  if (!st) st = placement_cached(&cm, L, K, PLACE_CONTIGUOUS, &pc);
  if (!st) st = placement_cached(&cm, L, K, PLACE_ZIGZAG, &pz);
  int64_t row = 0;
  for (int i = 0; !st && i < pl->nseg; i++) {
    const place_seg *sg = &pl->seg[i];
    if (sg->rank != p) continue;
    for (int t = 0; t < 4; t++)
      memcpy(lx[t] + (size_t)row * E, x[t] + (size_t)sg->first * E, (size_t)sg->len * E * 4);
    memcpy(lpos + 3 * row, pos + 3 * sg->first, (size_t)sg->len * 12);
    row += sg->len;
  }
  placed_attention *pa = NULL;
  if (!st) st = placed_attention_create(&pa, kb, comm_mpi(), g);
  if (!st) st = placed_attention_set_clips(pa, 1, &pl, &cm, km, lpos);
  step.ra = NULL, step.pa = pa;
  for (int r = 0; r < reps && !st; r++) {  // interleaved: the same load on both
    placed_attention_set_overlap(pa, 0);
    st = cp_step_time(&step, 1, &ser[r]);
    placed_attention_set_overlap(pa, 1);
    if (!st) st = cp_step_time(&step, 1, &blk[r]);
  }
  placed_attention_free(&pa);
  if (st) {
    fprintf(stderr, "bench_placed: %s\n", err_msg());
    comm_finalize();
    return 1;
  }
  qsort(one, (size_t)reps, sizeof *one, cmp_double), qsort(con, (size_t)reps, sizeof *con, cmp_double);
  qsort(blk, (size_t)reps, sizeof *blk, cmp_double), qsort(ser, (size_t)reps, sizeof *ser, cmp_double);
  double area = 0, wc = 0, wb = 0;
  for (int r = 0; r < K; r++) area += pc->work[r], wc = fmax(wc, pc->work[r]), wb = fmax(wb, pl->work[r]);
  double b = one[reps / 2] / area, mc = con[reps / 2], mb = blk[reps / 2], ms = ser[reps / 2];
  if (p == 0)
    printf("{\"ranks\":%d,\"tokens\":%lld,\"frame\":\"%lldx%lld\",\"mask\":\"%s\",\"chunk\":%d,"
           "\"window\":%d,\"heads\":%d,\"dh\":%d,\"reps\":%d,\"one_rank_s\":%.4f,\"b\":%.4g,"
           "\"contiguous\":{\"measured_s\":%.4f,\"model_s\":%.4f,\"imbalance\":%.4f},"
           "\"blockwise\":{\"measured_s\":%.4f,\"model_s\":%.4f,\"imbalance\":%.4f,\"kind\":\"%s\","
           "\"serial_s\":%.4f},\"x_measured\":%.3f,\"x_model\":%.3f,\"x_overlap\":%.3f}\n",
           K, (long long)L, (long long)rows, (long long)cols, is_window ? "window" : "block_causal",
           chunk, window, H, Dh, reps, one[reps / 2], b, mc, b * wc, placement_imbalance(pc), mb,
           b * wb, placement_imbalance(pl), place_kind_name(pl == pc ? PLACE_CONTIGUOUS : pl == pz ? PLACE_ZIGZAG : pl->nseg > 2 * K + pl->nblocks ? PLACE_GREEDY : PLACE_BALANCED), ms, mc / mb, wc / wb, ms / mb);
  placement_cache_clear();
  for (int t = 0; t < 4; t++) free(x[t]), free(lx[t]);
  for (int t = 0; t < 3; t++) free(d[t]);
  free(out), free(lse), free(pos), free(lpos), free(one), free(con), free(blk), free(ser);
  comm_finalize();
  return 0;
}
