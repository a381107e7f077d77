// bench/plan/bench_share.c — planning once per job vs once per process, under mpirun
// (driven by bench/plan/share.sh; not a test).
//
// Every process runs the trainer's loop shape: the draw-and-plan pipeline (sched/) hands
// out batch s while batch s+1 is planned in the background, and the process "trains" batch
// s by a fixed amount of CPU work on its main thread (calibrated alone to --train-ms), so a
// planner thread on the same cores slows training the way it does on a CPU cluster. The
// plans are for a virtual cluster (--ranks, --clips per batch, the ucf101+3% youcook2 mix),
// so a plan costs what it costs on thousands of GPUs. With --planners 0 every process
// plans every batch (the baseline); with P >= 1, P processes plan in turn and broadcast.
// Rank 0 prints one JSON line: wall per step, planner CPU over all processes and per
// process, the longest wait for a plan, plan bytes broadcast.
//   mpirun -np 4 bench_plan_share --ranks 8192 --clips 32768 --steps 6 --planners 1
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "comm/comm.h"
#include "core/log.h"
#include "bench/plan/plan_input.h"
#include "sched/lengths.h"
#include "sched/sched.h"

typedef struct {
  const lengths_set *ls;
  int clips;
} draw_ctx;

static tsr_status draw(void *vctx, int64_t s, int64_t *ids, int64_t *tokens, int64_t *n) {
  draw_ctx *x = vctx;
  *n = x->clips;
  return lengths_sample(x->ls, 1, s, x->clips, ids, tokens);
}

static tsr_status bcast(void *ctx, void *buf, int64_t bytes, int root) {
  (void)ctx;
  return comm_bcast(buf, bytes, root);
}

// `iters` iterations of dependent floating-point work (a stand-in for a training step).
static double work(int64_t iters) {
  double x = 1.0;
  for (int64_t i = 0; i < iters; i++) x = x * 1.0000001 + 1e-9;
  return x;
}

static double process_cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

int main(int argc, char **argv) {
  if (comm_init(&argc, &argv)) {
    fprintf(stderr, "%s\n", err_msg());
    return 1;
  }
  int ranks = 8192, clips = 32768, steps = 6, planners = 1;
  double train_ms = 500;
  const char *cost = "configs/cost/h100-dit1b.conf", *shared = getenv("TESSERA_SHARED");
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--ranks")) ranks = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--clips")) clips = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--planners")) planners = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--train-ms")) train_ms = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--cost")) cost = argv[i + 1];
    else {
      fprintf(stderr, "bench_plan_share: unknown option %s\n", argv[i]);
      return 1;
    }
  }
  int rank = comm_rank(), size = comm_size();
  char spec[2048];
  snprintf(spec, sizeof spec, "%s/lengths/ucf101_clips.csv:0.97,%s/lengths/youcook2_videos.csv:0.03",
           shared ? shared : "../shared", shared ? shared : "../shared");
  lengths_opts lo = {.tokens_per_second = 1800, .max_seconds = 300};
  lengths_set ls = {0};
  sched_config cfg = {.cluster = {ranks, 8, 65536}};
  if (plan_input_load("bench_plan_share", spec, &lo, cost, &ls, &cfg)) return 1;
  // Calibrate the training stand-in alone (every process at once, before any planning).
  int64_t iters = 1 << 24;
  double t0 = time_now();
  volatile double calib = work(iters);  // (kept: the call must not be optimised away)
  (void)calib;
  double per_ms = (double)iters / (1e3 * (time_now() - t0));
  int64_t train_iters = (int64_t)(per_ms * train_ms);
  comm_barrier();

  sched_share share = {.rank = rank, .size = size, .planners = planners, .bcast = bcast};
  draw_ctx dc = {.ls = &ls, .clips = clips};
  sched_pipeline *pipe = NULL;
  double cpu0 = process_cpu_s(), w0 = time_now(), sink = 0;
  tsr_status st = sched_pipeline_open(&pipe, &cfg, clips, 0, steps, draw, &dc, planners > 0 ? &share : NULL);
  for (int s = 0; !st && s < steps; s++) {
    sched_batch b;
    if ((st = sched_pipeline_next(pipe, &b))) break;
    sink += work(train_iters) + b.res.predicted_s;  // "train" batch s
    if ((st = comm_barrier())) break;               // the step's gradient all-reduce
  }
  double wall = time_now() - w0, cpu = process_cpu_s() - cpu0;
  sched_pipeline_stats ps = {0};
  if (pipe) sched_pipeline_get_stats(pipe, &ps);
  sched_pipeline_close(&pipe);
  if (st) {
    fprintf(stderr, "bench_plan_share rank %d: %s\n", rank, err_msg());
    comm_abort(1);
  }
  // sums and maxima over the processes
  int64_t v[4] = {(int64_t)(1e6 * ps.plan_cpu_s), (int64_t)(1e6 * cpu), ps.planned_here,
                  ps.bcast_bytes};
  int64_t m[3] = {(int64_t)(1e6 * ps.plan_cpu_s), (int64_t)(1e6 * ps.wait_s), (int64_t)(1e6 * wall)};
  comm_allreduce_sum_i64(v, 4);
  comm_allreduce_max_i64(m, 3);
  if (rank == 0)
    printf("{\"processes\":%d,\"planners\":%d,\"ranks\":%d,\"clips\":%d,\"steps\":%d,"
           "\"train_ms\":%.0f,\"wall_s\":%.3f,\"wall_per_step_s\":%.4f,"
           "\"planner_cpu_s_all_processes\":%.3f,\"planner_cpu_s_max_process\":%.3f,"
           "\"cpu_s_all_processes\":%.3f,\"batches_planned_all_processes\":%lld,"
           "\"wait_s_max_process\":%.3f,\"bcast_bytes_all_processes\":%lld,\"sink\":%.3g}\n",
           size, planners, ranks, clips, steps, train_ms, 1e-6 * (double)m[2],
           1e-6 * (double)m[2] / steps, 1e-6 * (double)v[0], 1e-6 * (double)m[0],
           1e-6 * (double)v[1], (long long)v[2], 1e-6 * (double)m[1], (long long)v[3], sink);
  lengths_free(&ls);
  comm_finalize();
  return 0;
}
