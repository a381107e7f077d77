// Scheduler properties over many random and real length distributions: every plan is
// valid, the lower bound is never above any plan, the planner is never slower than the
// better baseline, plans are deterministic, and background planning equals synchronous
// planning. Plus the baselines' structure on a small hand case and bad-input errors.
#include <string.h>

#include "check.h"
#include "sched/lengths.h"
#include "sched/sched.h"
#include "sched_test.h"

// Relative slack for comparisons of simulated times that are sums of up to a few
// thousand doubles of different order: 1e-9.
#define REL 1e-9

static int ncases, nused[3];

// Runs every check on one batch.
static void check_batch(const char *what, const sched_config *cfg, const int64_t *L, int n) {
  ncases++;
  sched_result r, r2;
  tsr_status st = sched_plan_batch(cfg, L, n, &r);
  CHECK(st == TSR_OK, "%s: %s", what, err_msg());
  if (st) return;
  CHECK(plan_validate(&r.plan, L, n, &cfg->cluster) == TSR_OK, "%s: chosen plan: %s", what,
        err_msg());
  double slack = REL * r.predicted_s;
  CHECK(r.lower_bound_s <= r.predicted_s + slack, "%s: bound %.9g > plan %.9g", what,
        r.lower_bound_s, r.predicted_s);
  CHECK(r.lower_bound_s <= r.dynamic_s + slack, "%s: bound > dynamic", what);
  CHECK(r.lower_bound_s <= r.packing_only_s + slack, "%s: bound > packing", what);
  CHECK(r.lower_bound_s <= r.static_balanced_s + slack, "%s: bound > balanced", what);
  double better = r.packing_only_s < r.static_balanced_s ? r.packing_only_s : r.static_balanced_s;
  CHECK(r.predicted_s <= better, "%s: plan %.9g slower than baseline %.9g", what, r.predicted_s,
        better);
  CHECK(r.predicted_s <= r.dynamic_s, "%s: fallback picked a slower plan", what);
  CHECK((r.used == SCHED_USED_DYNAMIC) == (r.dynamic_s < better), "%s: used %s dyn %.9g base %.9g",
        what, sched_used_name(r.used), r.dynamic_s, better);
  plan_sim s;
  CHECK_OK(plan_simulate(&r.plan, L, &cfg->cost, &cfg->cluster, &s, NULL, NULL));
  CHECK(s.step_s == r.predicted_s, "%s: reported time is the simulated one", what);

  // each planner's own plan is valid
  plan p;
  plan_init(&p, cfg->cluster.ranks);
  CHECK_OK(sched_dynamic(cfg, L, n, &p));
  CHECK(plan_validate(&p, L, n, &cfg->cluster) == TSR_OK, "%s: dynamic: %s", what, err_msg());
  CHECK_OK(sched_baseline_packing(cfg, L, n, &p));
  CHECK(plan_validate(&p, L, n, &cfg->cluster) == TSR_OK, "%s: packing: %s", what, err_msg());
  for (int g = 0; g < p.ngroups; g++)
    CHECK(p.groups[g].nclips == 0 || p.groups[g].size == r.static_cp, "%s: static CP", what);
  CHECK_OK(sched_baseline_balanced(cfg, L, n, &p));
  CHECK(plan_validate(&p, L, n, &cfg->cluster) == TSR_OK, "%s: balanced: %s", what, err_msg());
  plan_free(&p);

  // determinism and background planning
  replan(what, cfg, L, n, &r, &r2);
  CHECK(same_plan(&r.plan, &r2.plan) && r.predicted_s == r2.predicted_s &&
            r.used == r2.used && r.lower_bound_s == r2.lower_bound_s,
        "%s: async equals sync", what);
  sched_result_free(&r2);
  nused[r.used]++;
  // SCHED_DEBUG=1: list the batches where a baseline was used, and by how much.
  if (getenv("SCHED_DEBUG") && r.used) printf("%-60s dyn/base %.4f  base %.4g lb %.4g ks %d\n", what, r.dynamic_s / r.predicted_s, r.predicted_s, r.lower_bound_s, r.static_cp);
  sched_result_free(&r);
}

// Random length distributions: shape 0 uniform, 1 log-uniform, 2 bimodal (few long),
// 3 all equal, 4 tiny clips, 5 near the cluster's capacity.
static void random_batch(sched_rng *rng, int shape, int64_t M, int N, int64_t *L, int n) {
  int64_t cap = M * N;
  int64_t eq = 1 + (int64_t)sched_rng_below(rng, (uint64_t)cap);
  for (int i = 0; i < n; i++) {
    double u = sched_rng_uniform(rng);
    int64_t v;
    switch (shape) {
    case 0: v = 1 + (int64_t)(u * (double)(cap < 4 * M ? cap : 4 * M)); break;
    case 1: v = (int64_t)exp(u * log((double)cap)); break;
    case 2: v = u < 0.05 ? cap / 2 + (int64_t)(u * cap) : 1 + (int64_t)(u * (double)M / 2); break;
    case 3: v = eq; break;
    case 4: v = 1 + (int64_t)(u * 50); break;
    default: v = cap - (int64_t)(u * (double)M); break;
    }
    L[i] = v < 1 ? 1 : v > cap ? cap : v;
  }
}

static void hand_baselines(void) {
  // N=4, M=1000, longest 2000 -> k_s = 2, two groups [0,2) and [2,4).
  sched_config cfg = {{4, 2, 1000}, h100, 2000, 0};
  int64_t L[5] = {1500, 100, 100, 1200, 2000};  // per rank at k=2: 750 50 50 600 1000
  CHECK(sched_static_cp(&cfg, L, 5) == 2, "k_s");
  plan p;
  plan_init(&p, 4);
  // packing only: mb0 = {0,1,2} (850), mb1 = {3} (600 + 1000 > 1000), mb2 = {4};
  // round-robin: wave 0 = mb0 on [0,2), mb1 on [2,4); wave 1 = mb2 on [0,2).
  CHECK_OK(sched_baseline_packing(&cfg, L, 5, &p));
  CHECK(p.nwaves == 2, "waves %d", p.nwaves);
  CHECK(p.groups[0].first_rank == 0 && p.groups[0].nclips == 3, "mb0");
  CHECK(p.groups[1].first_rank == 2 && p.groups[1].nclips == 1 &&
            p.clip_index[p.groups[1].clip_off] == 3, "mb1");
  CHECK(p.groups[2].first_rank == 0 && p.clip_index[p.groups[2].clip_off] == 4, "mb2");
  // balanced: longest first: 2000 -> group 0; 1500 -> group 1 (least loaded); 1200 ->
  // group 1 (T(1500) < T(2000)), new microbatch there (750 + 600 > 1000); 100 -> group 0
  // or 1 by load ... every clip in a k_s group and per-group microbatches fit memory.
  CHECK_OK(sched_baseline_balanced(&cfg, L, 5, &p));
  CHECK_OK(plan_validate(&p, L, 5, &cfg.cluster));
  int g_of[5] = {-1, -1, -1, -1, -1};
  for (int g = 0; g < p.ngroups; g++)
    for (int j = 0; j < p.groups[g].nclips; j++) g_of[p.clip_index[p.groups[g].clip_off + j]] =
        p.groups[g].first_rank;
  CHECK(g_of[4] == 0 && g_of[0] == 2 && g_of[3] == 2, "longest-first placement %d %d %d",
        g_of[4], g_of[0], g_of[3]);
  plan_free(&p);
}

static void bad_inputs(void) {
  sched_config cfg = {{0, 8, 65536}, h100, 0, 0};
  int64_t L[3] = {1000, 2000, 3000};
  sched_result r;
  CHECK(sched_plan_batch(&cfg, L, 3, &r) == TSR_EINVAL && strstr(err_msg(), "ranks = 0"),
        "N=0: %s", err_msg());
  sched_result_free(&r);
  cfg.cluster = (sched_cluster){12, 8, 500};  // 12 ranks: groups of at most 8 x 500 tokens
  L[2] = 4001;
  CHECK(sched_plan_batch(&cfg, L, 3, &r) == TSR_EINVAL && strstr(err_msg(), "clip 2") &&
            strstr(err_msg(), "8 ranks"),
        "N=12, a clip over 8 x M: %s", err_msg());
  sched_result_free(&r);
  L[2] = 3000;
  cfg.cluster.ranks = 8;
  cfg.cluster.mem_tokens = 100;  // 8 ranks x 100 = 800 < every clip
  CHECK(sched_plan_batch(&cfg, L, 3, &r) == TSR_EINVAL && strstr(err_msg(), "clip 0") &&
            strstr(err_msg(), "more than any group can hold"),
        "M too small: %s", err_msg());
  sched_result_free(&r);
  cfg.cluster.mem_tokens = 65536;
  L[1] = 0;
  CHECK(sched_plan_batch(&cfg, L, 3, &r) == TSR_EINVAL && strstr(err_msg(), "clip 1") &&
            strstr(err_msg(), "> 0"),
        "zero length: %s", err_msg());
  sched_result_free(&r);
  L[1] = -5;
  CHECK(sched_plan_batch(&cfg, L, 3, &r) == TSR_EINVAL && strstr(err_msg(), "clip 1"),
        "negative length: %s", err_msg());
  sched_result_free(&r);
  L[1] = 2000;
  CHECK(sched_plan_batch(&cfg, L, 0, &r) == TSR_EINVAL && strstr(err_msg(), "empty batch"),
        "%s", err_msg());
  sched_result_free(&r);
  cfg.max_clip_tokens = 2500;
  CHECK(sched_plan_batch(&cfg, L, 3, &r) == TSR_EINVAL && strstr(err_msg(), "max clip tokens"),
        "%s", err_msg());
  sched_result_free(&r);
  cfg.max_clip_tokens = 8 * 65536 + 1;
  CHECK(sched_config_check(&cfg) == TSR_EINVAL && strstr(err_msg(), "max clip tokens"), "%s",
        err_msg());
  cfg.max_clip_tokens = 0;
  cfg.cost.bw_intra = 0;
  CHECK(sched_config_check(&cfg) == TSR_EFORMAT && strstr(err_msg(), "bw_intra"), "%s",
        err_msg());
  sched_async *h;  // errors come back from the planner thread with their message
  cfg.cost = h100;
  cfg.cluster.ranks = 0;
  CHECK_OK(sched_async_start(&h, &cfg, L, 3));
  CHECK(sched_async_wait(&h, &r) == TSR_EINVAL && strstr(err_msg(), "ranks = 0"), "%s",
        err_msg());
  sched_result_free(&r);
}

int main(void) {
  hand_baselines();
  bad_inputs();

  // Random distributions on random clusters.
  sched_rng rng = sched_rng_seed(12345, 0);
  static int64_t L[4096];
  const int Ns[] = {1, 2, 4, 8, 16, 64};
  const int Gs[] = {1, 2, 4, 8};
  const int64_t Ms[] = {64, 1000, 65536};
  for (int it = 0; it < 120; it++) {
    sched_config cfg = {{Ns[sched_rng_below(&rng, 6)], Gs[sched_rng_below(&rng, 4)],
                         Ms[sched_rng_below(&rng, 3)]},
                        h100, 0, 0};
    if (it % 3 == 1) {  // a model where ring exchange is exposed and overhead matters
      cfg.cost.bw_inter = 1e9;
      cfg.cost.ovh = 0.05;
      cfg.cost.lat = 0.01;
    }
    int shape = it % 6, n = 1 + (int)sched_rng_below(&rng, 300);
    random_batch(&rng, shape, cfg.cluster.mem_tokens, cfg.cluster.ranks, L, n);
    if (it % 4 == 3) {  // a max_clip_tokens above the batch's longest
      int64_t mx = 0;
      for (int i = 0; i < n; i++) mx = L[i] > mx ? L[i] : mx;
      int64_t cap = cfg.cluster.mem_tokens * cfg.cluster.ranks;
      cfg.max_clip_tokens = mx + (cap - mx) / 2;
    }
    char what[96];
    snprintf(what, sizeof what, "random #%d shape %d n=%d N=%d G=%d M=%lld", it, shape, n,
             cfg.cluster.ranks, cfg.cluster.gpus_per_node, (long long)cfg.cluster.mem_tokens);
    check_batch(what, &cfg, L, n);
  }

  // World sizes that are not powers of two: groups are the aligned power-of-two blocks that
  // fit in N (the largest K <= N holds the longest clip), the static baselines leave the
  // ranks past their last whole block idle where k_s does not divide N.
  sched_rng rng2 = sched_rng_seed(12346, 0);
  const int Nany[] = {3, 5, 6, 7, 12, 24, 96};
  for (int it = 0; it < 21; it++) {
    sched_config cfg = {{Nany[it % 7], Gs[sched_rng_below(&rng2, 4)], Ms[sched_rng_below(&rng2, 3)]},
                        h100, 0, 0};
    if (it % 3 == 1) cfg.cost.bw_inter = 1e9, cfg.cost.ovh = 0.05, cfg.cost.lat = 0.01;
    if (it % 4 == 3) cfg.cost.cp_modes = COST_MODES_AUTO, cfg.cost.heads = 12;
    int K = 1;
    while (2 * K <= cfg.cluster.ranks) K *= 2;
    int shape = it % 6, n = 1 + (int)sched_rng_below(&rng2, 300);
    random_batch(&rng2, shape, cfg.cluster.mem_tokens, K, L, n);
    char what[96];
    snprintf(what, sizeof what, "any-N #%d shape %d n=%d N=%d G=%d M=%lld", it, shape, n,
             cfg.cluster.ranks, cfg.cluster.gpus_per_node, (long long)cfg.cluster.mem_tokens);
    check_batch(what, &cfg, L, n);
  }

  // Real distributions from shared/lengths: mixes of seconds-long clips with a few
  // percent of minutes-long videos, tokens = duration * 1800, capped at 300 s.
  const char *shared = check_shared("lengths");
  const char *mixes[][2] = {
      {"ucf101_clips.csv:0.97", "youcook2_videos.csv:0.03"},
      {"webvid10m_val.csv:0.96", "activitynet_captions_videos.csv:0.04"},
      {"activitynet_captions_events.csv:0.95", "youcook2_videos.csv:0.05"},
      {"charades_videos.csv:0.98", "activitynet_captions_videos.csv:0.02"},
  };
  lengths_opts lo = {.tokens_per_second = 1800, .max_seconds = 300};
  for (int m = 0; shared && m < 4; m++) {
    lengths_set ls = {0};
    CHECK_OK(load_shared_mix(&ls, shared, mixes[m][0], mixes[m][1], &lo));
    if (!ls.n) continue;
    static int64_t ids[4096];
    for (int step = 0; step < 4; step++) {  // and 24 ranks (3 nodes of 8)
      int N = step == 3 ? 24 : step == 2 ? 16 : 64, B = step == 2 ? 64 : 256;
      sched_config cfg = {{N, 8, 65536}, h100, lengths_max(&ls), 0};
      CHECK_OK(lengths_sample(&ls, 42, step, B, ids, L));
      char what[160];
      snprintf(what, sizeof what, "mix %s step %d", mixes[m][0], step);
      check_batch(what, &cfg, L, B);
    }
    if (m == 0) {  // one large cluster
      sched_config cfg = {{1024, 8, 65536}, h100, lengths_max(&ls), 0};
      CHECK_OK(lengths_sample(&ls, 42, 9, 2048, ids, L));
      check_batch("mix ucf101+youcook2, 2048 clips on 1024 ranks", &cfg, L, 2048);
    }
    lengths_free(&ls);
  }
  printf("%d batches checked; plan used: dynamic %d, packing-only %d, static-balanced %d\n",
         ncases, nused[0], nused[1], nused[2]);
  return check_done();
}
