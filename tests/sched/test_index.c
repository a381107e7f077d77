// The dynamic planner's trees against its exhaustive reference: sched_dynamic finds each
// placement through per-level tournament trees and a best-first search of the open groups
// with a lower bound; sched_dynamic_reference scans every block and every open group of
// every CP size. Both must give the same plan, bitwise, on every batch: random lengths of
// several shapes on clusters of 1 to 256 ranks, cost models with hidden and with exposed
// ring steps (where the bound is loose), groups choosing between ring and Ulysses (and
// Ulysses alone), tiny memory (groups full) and real length mixes
// (150 random batches on 1 to 256 ranks, 30 on 3 to 200 ranks that are not powers of two,
// 12 real ones on 64, 256, 24 and 96: 1-2 s in release, 10-20 s under the sanitizers).
#include <math.h>
#include <string.h>

#include "check.h"
#include "sched/lengths.h"
#include "sched/sched.h"
#include "sched_test.h"

static int ncases;

static void compare(const char *what, const sched_config *cfg, const int64_t *L, int n) {
  plan a, b;
  plan_init(&a, cfg->cluster.ranks);
  plan_init(&b, cfg->cluster.ranks);
  CHECK_OK(sched_dynamic(cfg, L, n, &a));
  CHECK_OK(sched_dynamic_reference(cfg, L, n, &b));
  CHECK(same_plan(&a, &b), "%s: trees and reference differ (%d vs %d groups)", what, a.ngroups,
        b.ngroups);
  CHECK(plan_validate(&a, L, n, &cfg->cluster) == TSR_OK, "%s: %s", what, err_msg());
  plan_free(&a);
  plan_free(&b);
  ncases++;
}

// Fills L[0..n) with random lengths of SHAPE (0 to 4: up to 4 x mem_tokens, log-uniform up
// to CAP, tiny clips (bundles, packing), all 777 (ties everywhere), mostly small with a few
// of half CAP and more), each within [1, CAP].
static void random_lengths(sched_rng *rng, int shape, const sched_config *cfg, int64_t cap,
                           int64_t *L, int n) {
  for (int i = 0; i < n; i++) {
    double u = sched_rng_uniform(rng);
    int64_t v = shape == 0   ? 1 + (int64_t)(u * 4 * (double)cfg->cluster.mem_tokens)
                : shape == 1 ? (int64_t)exp(u * log((double)cap))
                : shape == 2 ? 1 + (int64_t)(u * 50)
                : shape == 3 ? 777
                : u < 0.05   ? cap / 2 + (int64_t)(u * (double)cap)
                             : 1 + (int64_t)(u * (double)cfg->cluster.mem_tokens / 2);
    L[i] = v < 1 ? 1 : v > cap ? cap : v;
  }
}

// Case IT of KIND: n random lengths of shape it % 5 (within CAP) planned both ways on CFG.
static void random_case(const char *kind, int it, sched_rng *rng, const sched_config *cfg,
                        int64_t cap, int64_t *L, int n) {
  int shape = it % 5;
  random_lengths(rng, shape, cfg, cap, L, n);
  char what[128];
  snprintf(what, sizeof what, "%s #%d shape %d n=%d N=%d G=%d M=%lld", kind, it, shape, n,
           cfg->cluster.ranks, cfg->cluster.gpus_per_node, (long long)cfg->cluster.mem_tokens);
  compare(what, cfg, L, n);
}

int main(void) {
  sched_rng rng = sched_rng_seed(777, 0);
  static int64_t L[4096];
  const int64_t Ms[] = {64, 1000, 65536};
  for (int it = 0; it < 150; it++) {
    int N = 1 << sched_rng_below(&rng, 9);
    sched_config cfg = {{N, 1 << sched_rng_below(&rng, 4), Ms[sched_rng_below(&rng, 3)]}, h100, 0, 0};
    if (it % 3 == 1) {  // ring exchange exposed between nodes, overhead matters
      cfg.cost.bw_inter = 1e9;
      cfg.cost.ovh = 0.05;
      cfg.cost.lat = 0.01;
    }
    if (it % 5 == 2) {  // exposed inside nodes too: the merge bound is loose
      cfg.cost.bw_intra = 1e9;
      cfg.cost.kv = 1e7;
    }
    if (it % 4 == 3) {  // the group's mode chosen between ring and Ulysses (uneven heads),
      cfg.cost.cp_modes = COST_MODES_AUTO;  // the all-to-all blocking or pipelined
      cfg.cost.heads = 1 + (int)sched_rng_below(&rng, 24);
      cfg.cost.a2a_chunks = 1 + (it / 4) % 4;
    } else if (it % 7 == 5) {
      cfg.cost.cp_modes = COST_MODES_ULYSSES;
      cfg.cost.a2a_chunks = it % 2 ? 2 : 1;
    }
    int n = 1 + (int)sched_rng_below(&rng, N >= 128 ? 250 : 500);
    int64_t cap = cfg.cluster.mem_tokens * N;
    random_case("random", it, &rng, &cfg, cap, L, n);
  }
  // World sizes that are not powers of two (the blocks that fit in N, ranks past the last
  // whole block of a size in none of it): every shape again, with their own seed so the
  // cases above stay as they were.
  sched_rng rng2 = sched_rng_seed(778, 0);
  for (int it = 0; it < 30; it++) {
    int N = 3 + (int)sched_rng_below(&rng2, 198);
    if (!(N & (N - 1))) N--;
    int K = 1;
    while (2 * K <= N) K *= 2;
    sched_config cfg = {{N, 1 << sched_rng_below(&rng2, 4), Ms[sched_rng_below(&rng2, 3)]}, h100, 0, 0};
    if (it % 3 == 1) cfg.cost.bw_inter = 1e9, cfg.cost.ovh = 0.05, cfg.cost.lat = 0.01;
    if (it % 4 == 3) {
      cfg.cost.cp_modes = COST_MODES_AUTO;
      cfg.cost.heads = 1 + (int)sched_rng_below(&rng2, 24);
      cfg.cost.a2a_chunks = 1 + (it / 4) % 4;
    }
    if (it % 6 == 5) cfg.cluster.gpus_per_node = 6;  // not a power of two: no hybrid
    int n = 1 + (int)sched_rng_below(&rng2, 250);
    int64_t cap = cfg.cluster.mem_tokens * K;
    random_case("any-N", it, &rng2, &cfg, cap, L, n);
  }
  // Real mixes (seconds-long clips with minutes-long videos) on 64 and 512 ranks, and on
  // 24 and 96 (3 and 12 nodes of 8).
  const char *shared = check_shared("lengths");
  const char *mixes[][2] = {{"ucf101_clips.csv:0.97", "youcook2_videos.csv:0.03"},
                            {"webvid10m_val.csv:0.96", "activitynet_captions_videos.csv:0.04"},
                            {"charades_videos.csv:0.98", "activitynet_captions_videos.csv:0.02"}};
  lengths_opts lo = {.tokens_per_second = 1800, .max_seconds = 300};
  for (int m = 0; shared && m < 3; m++) {
    lengths_set ls = {0};
    CHECK_OK(load_shared_mix(&ls, shared, mixes[m][0], mixes[m][1], &lo));
    static int64_t ids[1024];
    for (int step = 0; step < 4; step++) {
      int N = (int[]){64, 256, 24, 96}[step], B = step == 1 ? 512 : 256;
      sched_config cfg = {{N, 8, 65536}, h100, lengths_max(&ls), 0};
      if (m == 1) cfg.cost.cp_modes = COST_MODES_AUTO, cfg.cost.heads = 12, cfg.cost.a2a_chunks = 2;
      CHECK_OK(lengths_sample(&ls, 3, step, B, ids, L));
      char what[160];
      snprintf(what, sizeof what, "mix %s, %d clips on %d ranks", mixes[m][0], B, N);
      compare(what, &cfg, L, B);
    }
    lengths_free(&ls);
  }
  printf("%d batches: trees == reference\n", ncases);
  return check_done();
}
