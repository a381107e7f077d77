// Plan sharing under mpirun (driven by share.sh): every process runs the draw-and-plan
// pipeline over the same batches with sched_share (P planner processes in turn, MPI
// broadcast through comm/comm.h), and checks each batch it is handed against the plan it
// computes itself with sched_plan_batch: the same plan and the same numbers, bitwise.
// Also: each process planned exactly the batches sched_planner_of gives it (and only the
// planners spent planner CPU time); a batch that cannot be planned (a clip no group can
// hold) fails on every process at that step with the planner's message, without hanging.
//   mpirun -np N test_sched_share P
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "comm/comm.h"
#include "sched/lengths.h"
#include "sched/sched.h"
#include "sched_test.h"

enum { B = 512, STEPS = 6, BAD_STEP = 2 };

typedef struct {
  const lengths_set *ls;
  int64_t bad_step;  // this step gets a clip no group can hold (-1: none)
  int64_t too_long;
} draw_ctx;

static tsr_status draw(void *vctx, int64_t s, int64_t *ids, int64_t *tokens, int64_t *n) {
  draw_ctx *x = vctx;
  *n = B - (int)(s % 3);  // batches of different sizes
  tsr_status st = lengths_sample(x->ls, 11, s, (int)*n, ids, tokens);
  if (s == x->bad_step) tokens[5] = x->too_long;
  return st;
}

static tsr_status bcast(void *ctx, void *buf, int64_t bytes, int root) {
  (void)ctx;
  return comm_bcast(buf, bytes, root);
}

static int same_result(const sched_result *a, const sched_result *b) {
  return same_plan(&a->plan, &b->plan) && a->used == b->used && a->static_cp == b->static_cp &&
         !memcmp(&a->predicted_s, &b->predicted_s, sizeof(double)) &&
         !memcmp(&a->dynamic_s, &b->dynamic_s, sizeof(double)) &&
         !memcmp(&a->packing_only_s, &b->packing_only_s, sizeof(double)) &&
         !memcmp(&a->static_balanced_s, &b->static_balanced_s, sizeof(double)) &&
         !memcmp(&a->lower_bound_s, &b->lower_bound_s, sizeof(double)) &&
         !memcmp(&a->lower_bound_ref_s, &b->lower_bound_ref_s, sizeof(double)) &&
         !memcmp(&a->idle_frac, &b->idle_frac, sizeof(double)) &&
         !memcmp(&a->zero_s, &b->zero_s, sizeof(double));
}

int main(int argc, char **argv) {
  if (comm_init(&argc, &argv)) {
    fprintf(stderr, "%s\n", err_msg());
    return 1;
  }
  int rank = comm_rank(), size = comm_size();
  int P = argc > 1 ? atoi(argv[1]) : 1;
  const char *shared = getenv("TESSERA_SHARED");
  CHECK(shared != NULL, "TESSERA_SHARED is set by ctest");
  char spec[2048];
  snprintf(spec, sizeof spec, "%s/lengths/ucf101_clips.csv:0.97,%s/lengths/youcook2_videos.csv:0.03",
           shared ? shared : ".", shared ? shared : ".");
  lengths_opts lo = {.tokens_per_second = 1800, .max_seconds = 300};
  lengths_set ls = {0};
  CHECK_OK(lengths_load_mix(&ls, spec, &lo));
  // The plans are for a virtual cluster of 256 ranks, whatever the job's size.
  sched_config cfg = {{256, 8, 65536}, h100, 0, 0};
  sched_share share = {.rank = rank, .size = size, .planners = P, .bcast = bcast};
  draw_ctx dc = {.ls = &ls, .bad_step = -1, .too_long = 256 * 65536 + 1};

  // Shared plans == own plans, bitwise, for every batch.
  sched_pipeline *pipe = NULL;
  CHECK_OK(sched_pipeline_open(&pipe, &cfg, B, 0, STEPS, draw, &dc, &share));
  int64_t expect_here = 0;
  for (int64_t s = 0; pipe && s < STEPS; s++) {
    sched_batch b;
    tsr_status st = sched_pipeline_next(pipe, &b);
    CHECK(st == TSR_OK, "rank %d step %lld: %s", rank, (long long)s, err_msg());
    if (st) break;
    CHECK(b.step == s && b.n == B - s % 3, "rank %d: step %lld, %lld clips", rank,
          (long long)b.step, (long long)b.n);
    sched_result own;
    CHECK_OK(sched_plan_batch(&cfg, b.tokens, (int)b.n, &own));
    CHECK(same_result(&b.res, &own), "rank %d step %lld: the shared plan differs from its own",
          rank, (long long)s);
    CHECK(plan_validate(&b.res.plan, b.tokens, (int)b.n, &cfg.cluster) == TSR_OK, "%s",
          err_msg());
    sched_result_free(&own);
    expect_here += sched_planner_of(&share, s) == rank;
  }
  sched_pipeline_stats ps;
  if (pipe) sched_pipeline_get_stats(pipe, &ps);
  sched_pipeline_close(&pipe);
  CHECK(ps.batches == STEPS && ps.planned_here == expect_here,
        "rank %d: planned %lld of %lld batches, expected %lld", rank, (long long)ps.planned_here,
        (long long)ps.batches, (long long)expect_here);
  CHECK((ps.plan_cpu_s > 0) == (expect_here > 0), "rank %d: planner CPU %.3f s for %lld batches",
        rank, ps.plan_cpu_s, (long long)expect_here);
  CHECK(ps.bcast_bytes > 0 || size == 1, "rank %d: no plan was broadcast", rank);

  // A batch that cannot be planned: the same error on every process, at that step.
  dc.bad_step = BAD_STEP;
  CHECK_OK(sched_pipeline_open(&pipe, &cfg, B, 0, STEPS, draw, &dc, &share));
  int64_t failed_at = -1;
  for (int64_t s = 0; pipe && s < STEPS; s++) {
    sched_batch b;
    if (sched_pipeline_next(pipe, &b)) {
      failed_at = s;
      CHECK(strstr(err_msg(), "clip 5") && strstr(err_msg(), "more than any group can hold"),
            "rank %d: error message: %s", rank, err_msg());
      CHECK((sched_planner_of(&share, s) == rank) == !strstr(err_msg(), "(from the planner)"),
            "rank %d: who planned: %s", rank, err_msg());
      break;
    }
  }
  sched_pipeline_close(&pipe);
  CHECK(failed_at == BAD_STEP, "rank %d: failed at step %lld, expected %d", rank,
        (long long)failed_at, BAD_STEP);

  // Bad sharing settings are refused.
  share.planners = size + 1;
  CHECK(sched_pipeline_open(&pipe, &cfg, B, 0, STEPS, draw, &dc, &share) == TSR_EINVAL &&
            strstr(err_msg(), "planners must be in"), "%s", err_msg());
  lengths_free(&ls);

  int64_t fails = check_failed;
  comm_allreduce_sum_i64(&fails, 1);
  if (rank == 0) printf("plan sharing, %d processes, %d planner(s): %lld failures\n", size, P,
                        (long long)fails);
  comm_finalize();
  return fails ? 1 : 0;
}
