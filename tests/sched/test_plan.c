// Plans: builder and validation (each rule broken once), and the simulator against
// timelines worked out by hand from the reference formula.
#include <math.h>
#include <string.h>

#include "check.h"
#include "sched/plan.h"
#include "sched/sched.h"

// Tolerance: hand-computed decimal values; a few double operations of order 1.
#define TOL 1e-12

// a=0.001 b=1e-6 kv=100 bw_intra=1e6 bw_inter=1e5 lat=0.01 ovh=0.1 allreduce=0.5
static const cost_model cm = {.a = 0.001, .b = 1e-6, .kv = 100, .bw_intra = 1e6, .bw_inter = 1e5,
                              .lat = 0.01, .ovh = 0.1, .allreduce = 0.5};
static const sched_cluster cl = {4, 2, 1000};  // 4 ranks, 2 per node, 1000 tokens
// clips:                 A     B    C    D    E
static const int64_t L[5] = {1000, 100, 300, 100, 400};

static void add(plan *p, int first, int size, const int32_t *c, int n) {
  CHECK_OK(plan_add_group(p, first, size, c, n));
}

// wave 0: [0,2) A (1.1 s), [2,3) B (0.21 s), [3,4) empty
// wave 1: [2,4) C+D packed (0.355 s)
// wave 2: `last` block with E
static void build(plan *p, int last_first, int last_size) {
  plan_init(p, 4);
  CHECK_OK(plan_wave_begin(p));
  add(p, 0, 2, (int32_t[]){0}, 1);
  add(p, 2, 1, (int32_t[]){1}, 1);
  CHECK_OK(plan_wave_end(p));
  CHECK_OK(plan_wave_begin(p));
  add(p, 2, 2, (int32_t[]){2, 3}, 2);
  CHECK_OK(plan_wave_end(p));
  CHECK_OK(plan_wave_begin(p));
  add(p, last_first, last_size, (int32_t[]){4}, 1);
  CHECK_OK(plan_wave_end(p));
}

int main(void) {
  plan p;
  build(&p, 0, 4);
  CHECK(p.nwaves == 3, "waves %d", p.nwaves);
  CHECK(p.wave_off[1] - p.wave_off[0] == 3, "wave 0: rank 3 filled with an empty group");
  CHECK(p.wave_off[2] - p.wave_off[1] == 2, "wave 1: ranks 0-1 filled with one empty group");
  CHECK_OK(plan_validate(&p, L, 5, &cl));

  // Hand timeline. Group times (see test_cost.c for the arithmetic):
  //   A alone at k=2: 1.1;  B at k=1: 0.21;  C+D at k=2: 0.355
  //   E at k=4 (inter-node, 4 > G=2): compute (0.4+0.16)/4 = 0.14, exposed per ring step
  //   100*100/1e5 + 0.01 - 1e-6*160000/16 = 0.1, 3 steps: 0.3; + ovh 0.1 -> 0.54
  // Ranks 2,3: B ends 0.21 on rank 2, rank 3 idle; C+D starts max(0.21, 0) = 0.21, ends
  // 0.565. E on all four starts at max(1.1, 0.565) = 1.1, ends 1.64. Step = 1.64 + 0.5.
  plan_sim s;
  double end[4], gstart[16];
  CHECK_OK(plan_simulate(&p, L, &cm, &cl, &s, end, gstart));
  CHECK_NEAR(s.makespan_s, 1.64, TOL);
  CHECK_NEAR(s.step_s, 2.14, TOL);
  // busy = 2*1.1 + 0.21 + 2*0.355 + 4*0.54 = 5.28 rank-s of 4*1.64 = 6.56
  CHECK_NEAR(s.busy_rank_s, 5.28, TOL);
  CHECK_NEAR(s.idle_frac, 1 - 5.28 / 6.56, TOL);
  CHECK(s.groups_used == 4, "groups used %lld", (long long)s.groups_used);
  CHECK_NEAR(end[3], 1.64, TOL);
  int64_t hist[3] = {0};
  plan_cp_histogram(&p, hist);
  CHECK(hist[0] == 1 && hist[1] == 3 && hist[2] == 1, "hist %lld %lld %lld",
        (long long)hist[0], (long long)hist[1], (long long)hist[2]);
  plan_free(&p);

  // Waves are not barriers: E on [2,4) only (intra-node, k=2: compute (0.4+0.16)/2 = 0.28,
  // exposed 100*200/1e6 + 0.01 - 1e-6*160000/4 = 0.03 - 0.04 < 0 -> 0.38) starts when
  // ranks 2,3 are free at 0.565, not when A ends at 1.1: ends 0.945; makespan is A's 1.1.
  build(&p, 2, 2);
  CHECK_OK(plan_validate(&p, L, 5, &cl));
  CHECK_OK(plan_simulate(&p, L, &cm, &cl, &s, end, NULL));
  CHECK_NEAR(end[2], 0.945, TOL);
  CHECK_NEAR(s.makespan_s, 1.1, TOL);
  CHECK_NEAR(s.step_s, 1.6, TOL);
  plan_free(&p);

  // An empty group of size 2 does not synchronise: ranks 0 (busy till 0.21) and 1 (free)
  // pass it at their own times, so a clip on rank 1 in the next wave starts at 0.
  plan_init(&p, 2);
  sched_cluster c2 = {2, 2, 1000};
  CHECK_OK(plan_wave_begin(&p));
  add(&p, 0, 1, (int32_t[]){0}, 1);
  CHECK_OK(plan_wave_end(&p));
  CHECK_OK(plan_wave_begin(&p));
  add(&p, 0, 2, NULL, 0);
  CHECK_OK(plan_wave_end(&p));
  CHECK_OK(plan_wave_begin(&p));
  add(&p, 1, 1, (int32_t[]){1}, 1);
  CHECK_OK(plan_wave_end(&p));
  int64_t L2[2] = {100, 100};
  CHECK_OK(plan_validate(&p, L2, 2, &c2));
  CHECK_OK(plan_simulate(&p, L2, &cm, &c2, &s, end, NULL));
  CHECK_NEAR(end[1], 0.21, TOL);
  CHECK_NEAR(s.makespan_s, 0.21, TOL);
  plan_free(&p);

  // Builder refuses unaligned, out of range and overlapping blocks.
  plan_init(&p, 4);
  CHECK_OK(plan_wave_begin(&p));
  CHECK(plan_add_group(&p, 1, 2, NULL, 0) == TSR_EINVAL && strstr(err_msg(), "aligned"), "%s",
        err_msg());
  CHECK(plan_add_group(&p, 0, 3, NULL, 0) == TSR_EINVAL, "size 3");
  CHECK(plan_add_group(&p, 4, 1, NULL, 0) == TSR_EINVAL, "out of range");
  add(&p, 0, 2, NULL, 0);
  CHECK(plan_add_group(&p, 0, 1, NULL, 0) == TSR_EINVAL && strstr(err_msg(), "rank 0"), "%s",
        err_msg());
  plan_free(&p);

  // Validation: break each rule in a copy of a valid plan.
  build(&p, 0, 4);
  plan q;
  plan_init(&q, 4);
  CHECK_OK(plan_copy(&q, &p));
  q.clip_index[q.groups[q.wave_off[2]].clip_off] = 0;  // A twice, E missing
  CHECK(plan_validate(&q, L, 5, &cl) == TSR_EINVAL && strstr(err_msg(), "clip 0 appears"),
        "%s", err_msg());
  CHECK_OK(plan_copy(&q, &p));
  q.groups[0].first_rank = 1;  // unaligned
  CHECK(plan_validate(&q, L, 5, &cl) == TSR_EINVAL && strstr(err_msg(), "aligned"), "%s",
        err_msg());
  CHECK_OK(plan_copy(&q, &p));
  q.groups[1].first_rank = 0;  // rank 0 twice in wave 0 (and rank 2 in none)
  CHECK(plan_validate(&q, L, 5, &cl) == TSR_EINVAL && strstr(err_msg(), "wave 0"), "%s",
        err_msg());
  CHECK_OK(plan_copy(&q, &p));
  q.groups[2].first_rank = 2;  // rank 3's empty group moved onto rank 2
  CHECK(plan_validate(&q, L, 5, &cl) == TSR_EINVAL && strstr(err_msg(), "wave 0"), "%s",
        err_msg());
  CHECK_OK(plan_copy(&q, &p));
  q.groups[0].size = 1;  // A (1000 tokens) on one rank is fine (M = 1000), rank 1 uncovered
  CHECK(plan_validate(&q, L, 5, &cl) == TSR_EINVAL && strstr(err_msg(), "rank 1 is in no group"),
        "%s", err_msg());
  sched_cluster small = {4, 2, 500};  // A needs 500/rank on 2 ranks: fits; C+D 150+50 fits;
  CHECK_OK(plan_validate(&p, L, 5, &small));
  small.mem_tokens = 499;  // A needs 500 per rank
  CHECK(plan_validate(&p, L, 5, &small) == TSR_EINVAL && strstr(err_msg(), "mem_tokens"), "%s",
        err_msg());
  int64_t L6[6] = {1000, 100, 300, 100, 400, 7};  // a sixth clip no group holds
  CHECK(plan_validate(&p, L6, 6, &cl) == TSR_EINVAL && strstr(err_msg(), "clip 5"), "%s",
        err_msg());
  plan_free(&q);
  plan_free(&p);

  // Lower bound by hand: clips {1000, 100} on 4 ranks, M = 1000, G = 2.
  // work: a*L + b*L^2 = 1 + 1 = 2 and 0.1 + 0.01 = 0.11; ovh * ceil(1100/1000) = 0.2;
  // (2.11 + 0.2) / 4 = 0.5775. Longest clip's best time: k=1: 2 + 0.1 = 2.1;
  // k=2: 1.1; k=4 (inter): compute 0.5, exposed 100*250/1e5 + 0.01 - 1e-6*1e6/16 =
  // 0.26 - 0.0625 = 0.1975, x3 = 0.5925, + 0.1 -> 1.1925. Best 1.1 -> lb = 1.1 + 0.5.
  // Reference form: clip 1000 least k*T: min(2.1, 2.2, 4.77) = 2.1; clip 100: k=1 0.21;
  // (2.31)/4 = 0.5775 < 1.1 -> 1.6 too.
  sched_config cfg = {cl, cm, 0, 0};
  double lb, lbr;
  sched_lower_bound(&cfg, (int64_t[]){1000, 100}, 2, &lb, &lbr);
  CHECK_NEAR(lb, 1.6, TOL);
  CHECK_NEAR(lbr, 1.6, TOL);
  // 40 clips of 100 tokens on 4 ranks: work 40*0.11 = 4.4, ovh*ceil(4000/1000) = 0.4 ->
  // 4.8/4 = 1.2 (> longest 0.21) -> 1.7. Reference form charges ovh per clip:
  // 40*0.21/4 = 2.1 -> 2.6, above what packing achieves, which is why lb is the bound.
  int64_t many[40];
  for (int i = 0; i < 40; i++) many[i] = 100;
  sched_lower_bound(&cfg, many, 40, &lb, &lbr);
  CHECK_NEAR(lb, 1.7, TOL);
  CHECK_NEAR(lbr, 2.6, TOL);
  sched_result r;
  CHECK_OK(sched_plan_batch(&cfg, many, 40, &r));
  CHECK(r.predicted_s >= lb - 1e-9 && r.predicted_s < lbr, "packed plan %.4f in [%.4f, %.4f)",
        r.predicted_s, lb, lbr);
  sched_result_free(&r);

  // Issue 9, part 6: a cost model whose times overflow (a = 1e308: every finish time is
  // infinite) crashed sched_dynamic (a shift by -1). A model built in code is not
  // required to be checked, so the planner itself must refuse it; sched_plan_batch
  // refuses it earlier, through cost_model_check.
  sched_config inf_cfg = cfg;
  inf_cfg.cost.a = 1e308;
  plan ip;
  plan_init(&ip, cl.ranks);
  CHECK(sched_dynamic(&inf_cfg, many, 40, &ip) == TSR_EINVAL &&
            strstr(err_msg(), "no placement of the 40 clips has a finite time"),
        "%s", err_msg());
  plan_free(&ip);
  inf_cfg.cost.a = NAN;
  plan_init(&ip, cl.ranks);
  CHECK(sched_dynamic(&inf_cfg, many, 40, &ip) == TSR_EINVAL, "NaN cost: %s", err_msg());
  plan_free(&ip);
  inf_cfg.cost.a = 1e308;
  CHECK(sched_plan_batch(&inf_cfg, many, 40, &r) == TSR_EFORMAT && strstr(err_msg(), "'a'"),
        "%s", err_msg());
  sched_result_free(&r);
  // Clip and batch sizes beyond the planner's 64-bit limits are refused, not overflowed.
  int64_t absurd = INT64_MAX;
  CHECK(sched_batch_check(&cfg, &absurd, 1) == TSR_EINVAL && strstr(err_msg(), "clip 0"), "%s",
        err_msg());
  return check_done();
}
