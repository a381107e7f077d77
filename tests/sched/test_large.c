// Scheduler properties at cluster scale: 32,768 clips on 8,192 ranks and 65,536 clips on
// 16,384 ranks from a real length mix, and 8,192 random clips on 4,096 ranks with little
// memory and exposed ring steps. Each plan is checked here, independently of
// plan_validate: every clip in exactly one group, every group an aligned power-of-two
// block inside the cluster, every rank in exactly one group per wave, no rank holding more
// than M tokens; the lower bound <= the plan <= both baselines; the same plan again (same
// batch: bitwise) and on the background thread. Planner time is a benchmark's business
// (bench/plan), not asserted here.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sched/lengths.h"
#include "sched/sched.h"
#include "sched_test.h"

// The rules of sched/plan.h, counted directly.
static void check_rules(const char *what, const plan *p, const int64_t *L, int n,
                        const sched_cluster *cl) {
  int N = cl->ranks, bad_block = 0, bad_cover = 0, bad_mem = 0, bad_clip = 0;
  int *seen = calloc((size_t)n, sizeof *seen), *cover = malloc((size_t)N * sizeof *cover);
  CHECK(seen && cover, "%s: memory", what);
  if (!seen || !cover) return;
  for (int w = 0; w < p->nwaves; w++) {
    for (int r = 0; r < N; r++) cover[r] = 0;
    for (int gi = p->wave_off[w]; gi < p->wave_off[w + 1]; gi++) {
      const plan_group *g = &p->groups[gi];
      int k = g->size;
      if (k < 1 || (k & (k - 1)) || g->first_rank % k || g->first_rank < 0 ||
          g->first_rank + k > N) {
        bad_block++;
        continue;
      }
      for (int r = g->first_rank; r < g->first_rank + k; r++) cover[r]++;
      int64_t mem = 0;
      for (int j = 0; j < g->nclips; j++) {
        int c = p->clip_index[g->clip_off + j];
        if (c < 0 || c >= n) {
          bad_clip++;
          continue;
        }
        seen[c]++;
        mem += (L[c] + k - 1) / k;
      }
      if (mem > cl->mem_tokens) bad_mem++;
    }
    for (int r = 0; r < N; r++) bad_cover += cover[r] != 1;
  }
  int missing = 0, twice = 0;
  for (int c = 0; c < n; c++) missing += seen[c] == 0, twice += seen[c] > 1;
  CHECK(!bad_block && !bad_cover && !bad_mem && !bad_clip && !missing && !twice,
        "%s: %d bad blocks, %d rank-waves not covered once, %d groups over memory, %d bad clip "
        "indices, %d clips missing, %d clips more than once",
        what, bad_block, bad_cover, bad_mem, bad_clip, missing, twice);
  free(seen);
  free(cover);
}

static void check_large(const char *what, const sched_config *cfg, const int64_t *L, int n) {
  sched_result r, r2;
  CHECK_OK(sched_plan_batch(cfg, L, n, &r));
  check_rules(what, &r.plan, L, n, &cfg->cluster);
  CHECK(plan_validate(&r.plan, L, n, &cfg->cluster) == TSR_OK, "%s: %s", what, err_msg());
  double slack = 1e-9 * r.predicted_s;
  CHECK(r.lower_bound_s <= r.predicted_s + slack, "%s: bound %.9g > plan %.9g", what,
        r.lower_bound_s, r.predicted_s);
  CHECK(r.predicted_s <= r.packing_only_s && r.predicted_s <= r.static_balanced_s,
        "%s: plan %.9g slower than a baseline (%.9g, %.9g)", what, r.predicted_s,
        r.packing_only_s, r.static_balanced_s);
  replan(what, cfg, L, n, &r, &r2);
  CHECK(same_plan(&r.plan, &r2.plan), "%s: background thread gives the same plan", what);
  sched_result_free(&r2);
  printf("%s: step %.3f s, bound %.3f s (eff %.3f), %.3fx over packing only, %s, %.0f ms\n",
         what, r.predicted_s, r.lower_bound_s, r.lower_bound_s / r.predicted_s,
         r.packing_only_s / r.predicted_s, sched_used_name(r.used), r.plan_ms);
  sched_result_free(&r);
}

int main(void) {
  const char *shared = check_shared("lengths");
  enum { NMAX = 65536 };
  int64_t *ids = malloc(NMAX * sizeof *ids), *L = malloc(NMAX * sizeof *L);
  CHECK(ids && L, "memory");
  if (!ids || !L) return check_done();
  if (shared) {
    char spec[2048];
    snprintf(spec, sizeof spec, "%s/lengths/ucf101_clips.csv:0.97,%s/lengths/youcook2_videos.csv:0.03",
             shared, shared);
    lengths_opts lo = {.tokens_per_second = 1800, .max_seconds = 300};
    lengths_set ls = {0};
    CHECK_OK(lengths_load_mix(&ls, spec, &lo));
    const int sizes[][2] = {{8192, 32768}, {16384, 65536}};
    for (int s = 0; s < 2 && ls.n; s++) {
      sched_config cfg = {{sizes[s][0], 8, 65536}, h100, lengths_max(&ls), 0};
      CHECK_OK(lengths_sample(&ls, 7, s, sizes[s][1], ids, L));
      char what[96];
      snprintf(what, sizeof what, "ucf101+3%%youcook2, %d clips on %d ranks", sizes[s][1],
               sizes[s][0]);
      check_large(what, &cfg, L, sizes[s][1]);
    }
    lengths_free(&ls);
  }
  // Random log-uniform lengths, 4096 tokens per rank (groups fill up), ring steps exposed.
  sched_config cfg = {{4096, 4, 4096}, h100, 0, 0};
  cfg.cost.bw_inter = 1e9;
  cfg.cost.lat = 0.01;
  sched_rng rng = sched_rng_seed(99, 0);
  int n = 8192;
  for (int i = 0; i < n; i++) {
    L[i] = (int64_t)exp(sched_rng_uniform(&rng) * log(64.0 * 4096));
    if (L[i] < 1) L[i] = 1;
  }
  check_large("log-uniform, 8192 clips on 4096 ranks, M = 4096", &cfg, L, n);
  free(ids);
  free(L);
  return check_done();
}
