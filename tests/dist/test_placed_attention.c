// Masked attention over blockwise placements (model/dist/placed_attention.h) at CP sizes 1,
// 2 and 4 equals single-rank masked attention: outputs, log-sum-exp and the gradients dq,
// dk, dv of every rank's rows, for random packed clips (some shorter than the group, some
// ending in a partial frame) under block-causal masks (one chunk back; all chunks back, of
// 2 frames) and a window mask, with contiguous, zigzag and greedy placements
// (sched/placement.h). Reference: the CPU backend's masked entries over the whole
// microbatch on every rank; tolerances relative to the reference's largest entry, 1e-5
// (the partial softmaxes are merged and the gradient shares summed in another order). And
// the K/V bytes each rank receives, counted by the communication layer
// (comm_alltoall_received), are the placements' count: sum over clips of recv[rank] rows of
// K and V in a forward, the same plus the gradient shares of its rows in a backward. With
// the K/V exchanges waited for as soon as posted (placed_attention_set_overlap 0) every
// output is the same bits as overlapped.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "masked_full.h"
#include "rand.h"
#include "comm/comm.h"
#include "kernels/kernels.h"
#include "model/dist/placed_attention.h"

static uint64_t rng_state;  // seeded alike on every rank: the same cases everywhere

// This rank's rows of full (L, w) in its layout (clip order, its segments in token order)
// into local; returns the rows. local NULL: count only.
static int64_t gather(void *local, const void *full, const placement *const *pl, int n,
                      const int32_t *cu, int p, size_t w) {
  int64_t row = 0;
  for (int c = 0; c < n; c++)
    for (int i = 0; i < pl[c]->nseg; i++) {
      const place_seg *s = &pl[c]->seg[i];
      if (s->rank != p) continue;
      if (local)
        memcpy((char *)local + row * w, (const char *)full + ((size_t)cu[c] + s->first) * w,
               (size_t)s->len * w);
      row += s->len;
    }
  return row;
}

// Max |local - this rank's rows of full| over rows x e floats.
static double err_of(const float *local, const float *full, const placement *const *pl, int n,
                     const int32_t *cu, int p, size_t e, int64_t rows) {
  float *want = malloc((size_t)(rows + 1) * e * 4);
  gather(want, full, pl, n, cu, p, e * 4);
  double m = 0;
  for (size_t i = 0; i < (size_t)rows * e; i++) m = fmax(m, fabs((double)local[i] - want[i]));
  free(want);
  return m;
}

static void one_case(const kernels_backend *kb, comm_group *g, int ncase) {
  const int k = comm_group_size(g), p = comm_group_rank(g), Dh = 8, H = 2;
  const size_t E = (size_t)H * Dh;
  const kernels_mask kms[3] = {
      {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 1, .window = 1},
      {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 2},
      {.kind = KERNELS_MASK_WINDOW, .wt = 1, .wh = 0, .ww = 1, .tile_t = 1, .tile_h = 1, .tile_w = 2}};
  const kernels_mask km = kms[ncase % 3];
  const place_kind kind = (place_kind)(ncase / 3 % PLACE_NKINDS);
  const cost_mask cm = {.kind = km.kind, .chunk = km.chunk, .window = km.window, .wt = km.wt,
                        .wh = km.wh, .ww = km.ww, .tile_t = km.tile_t, .tile_h = km.tile_h,
                        .tile_w = km.tile_w, .rows = 2, .cols = 3};
  const int n = 1 + (int)(test_urand(&rng_state) * 4);
  static const int64_t choices[] = {1, 5, 17, 64, 97, 130};
  int64_t lens[8];
  int32_t cu[9] = {0};
  int longest = 0;
  placement pls[8];
  const placement *pl[8];
  for (int c = 0; c < n; c++) {
    lens[c] = choices[(int)(test_urand(&rng_state) * 6)];
    cu[c + 1] = cu[c] + (int32_t)lens[c];
    if (lens[c] > longest) longest = (int)lens[c];
    CHECK_OK(placement_make(&cm, lens[c], k, kind, &pls[c]));
    pl[c] = &pls[c];
  }
  const int L = cu[n];
  size_t nf = (size_t)L * E;
  masked_full f;
  masked_full_make(&f, kb, km, cu, n, longest, H, Dh, &rng_state);
  float *q = f.q, *kk = f.k, *v = f.v, *dout = f.dout, *out = f.out, *lse = f.lse, *dq = f.dq,
        *dk = f.dk, *dv = f.dv;
  int32_t *pos = f.pos, *lpos = malloc((size_t)L * 3 * 4 + 4);
  const float scale = f.scale;
  int64_t lq = gather(NULL, q, pl, n, cu, p, E * 4);
  size_t lf = (size_t)lq * E + 1;
  float *lq_ = malloc(lf * 4), *lk = malloc(lf * 4), *lv = malloc(lf * 4), *ldo = malloc(lf * 4);
  float *lout = malloc(lf * 4), *llse = malloc(lf * 4), *ldq = malloc(lf * 4),
        *ldk = malloc(lf * 4), *ldv = malloc(lf * 4);
  gather(lq_, q, pl, n, cu, p, E * 4), gather(lk, kk, pl, n, cu, p, E * 4);
  gather(lv, v, pl, n, cu, p, E * 4), gather(ldo, dout, pl, n, cu, p, E * 4);
  gather(lpos, pos, pl, n, cu, p, 3 * 4);
  placed_attention *pa = NULL;
  CHECK_OK(placed_attention_create(&pa, kb, comm_mpi(), g));
  CHECK_OK(placed_attention_set_clips(pa, n, pl, &cm, km, lpos));
  CHECK(placed_attention_tokens(pa) == lq, "case %d: rank %d holds %lld rows, the placement %lld",
        ncase, p, (long long)placed_attention_tokens(pa), (long long)lq);
  int64_t plan_kv = 0, kv, grad;
  for (int c = 0; c < n; c++) plan_kv += pl[c]->recv[p];
  placed_attention_recv_tokens(pa, &kv, &grad);
  int64_t b0 = comm_alltoall_received();
  CHECK_OK(placed_attention_forward(pa, lout, llse, lq_, lk, lv, H, Dh, scale));
  int64_t b1 = comm_alltoall_received();
  CHECK_OK(placed_attention_backward(pa, ldq, ldk, ldv, ldo, lq_, lk, lv, lout, llse, H, Dh, scale));
  int64_t b2 = comm_alltoall_received();
  // each exchange waited for as soon as posted: the same bits (the overlap moves when the
  // rows arrive, not the order of any sum)
  float *s5[5], *o5[5] = {lout, llse, ldq, ldk, ldv};
  for (int i = 0; i < 5; i++) s5[i] = malloc(lf * 4);
  placed_attention_set_overlap(pa, 0);
  CHECK_OK(placed_attention_forward(pa, s5[0], s5[1], lq_, lk, lv, H, Dh, scale));
  CHECK_OK(placed_attention_backward(pa, s5[2], s5[3], s5[4], ldo, lq_, lk, lv, s5[0], s5[1], H,
                                     Dh, scale));
  for (int i = 0; i < 5; i++) {
    size_t bytes = (size_t)lq * (i == 1 ? (size_t)H : E) * 4;
    CHECK(!memcmp(s5[i], o5[i], bytes), "case %d (mask %d, %s) k=%d rank %d: %s differs with "
          "the exchanges not overlapped", ncase, km.kind, place_kind_name(kind), k, p,
          (const char *[]){"out", "lse", "dq", "dk", "dv"}[i]);
    free(s5[i]);
  }
  placed_attention_free(&pa);
  const int64_t row = (int64_t)E * 4;  // the CPU backend's fp32 rows
  CHECK(kv == plan_kv && b1 - b0 == 2 * plan_kv * row && b2 - b1 == 2 * (plan_kv + grad) * row,
        "case %d (mask %d, %s) k=%d rank %d: received %lld bytes forward, %lld backward; the "
        "placements' count is %lld K/V rows (%lld bytes), the executor's %lld, %lld gradient rows",
        ncase, km.kind, place_kind_name(kind), k, p, (long long)(b1 - b0), (long long)(b2 - b1),
        (long long)plan_kv, (long long)(2 * plan_kv * row), (long long)kv, (long long)grad);
  double eo = err_of(lout, out, pl, n, cu, p, E, lq) / fmax(test_max_abs(out, nf), 1e-30);
  double el = err_of(llse, lse, pl, n, cu, p, H, lq) /
              fmax(test_max_abs(lse, (size_t)L * H), 1e-30);
  double eq = err_of(ldq, dq, pl, n, cu, p, E, lq) / fmax(test_max_abs(dq, nf), 1e-30);
  double ek = err_of(ldk, dk, pl, n, cu, p, E, lq) / fmax(test_max_abs(dk, nf), 1e-30);
  double ev = err_of(ldv, dv, pl, n, cu, p, E, lq) / fmax(test_max_abs(dv, nf), 1e-30);
  CHECK(eo <= 1e-5 && el <= 1e-5 && eq <= 1e-5 && ek <= 1e-5 && ev <= 1e-5,
        "case %d (mask %d, %s) k=%d rank %d (%d clips, L=%d): out %.2e lse %.2e dq %.2e dk "
        "%.2e dv %.2e", ncase, km.kind, place_kind_name(kind), k, p, n, L, eo, el, eq, ek, ev);
  for (int c = 0; c < n; c++) placement_free(&pls[c]);
  masked_full_free(&f);
  free(lq_), free(lk), free(lv), free(ldo), free(lout), free(llse), free(ldq), free(ldk), free(ldv);
  free(lpos);
}

int main(int argc, char **argv) {
  if (comm_init(&argc, &argv)) return 1;
  CHECK_OK(comm_groups_init());
  const kernels_backend *kb = kernels_cpu();
  for (int k = 1; k <= comm_size() && k <= 4; k *= 2) {
    rng_state = 777 + (uint64_t)k;  // every rank draws the same cases
    for (int c = 0; c < 18; c++) one_case(kb, comm_group_get(k), c);
  }
  int rc = check_done();
  comm_finalize();
  return rc;
}
