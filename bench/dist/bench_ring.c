// bench/dist/bench_ring.c — how much of CP attention's communication is exposed? (not a test)
//
//   mpirun -np K bench_ring [--config FILE] [--set KEY=VALUE ...] [--tokens L] [--clips C]
//                           [--reps N] [--backend B] [--comm C] [--json FILE]
//                           [--mode ring|ulysses|hybrid] [--gpus-per-node U] [--cost FILE]
//                           [--vs-chunks C]
//
// --mode: the group's CP mode (hybrid: Ulysses over blocks of U ranks, ring across them);
// --cost: also print the cost model's time of the microbatch in that mode (sched/cost.h,
// cost_group_time_mode with the model's heads) beside the measured one. --vs-chunks C: also
// time, interleaved with the other two, the real exchange with train.ulysses_chunks = C (the
// Ulysses pipeline's baseline, e.g. 1: blocking; bench/dist/overlap.sh) and report the
// microbatch's ratio against it (with / baseline).
//
// One CP-K microbatch: C clips of L tokens in one group of all K ranks (each rank holds
// L/K tokens of every clip), run as the trainer runs it (model/dist/dist_step.h: objective,
// forward and backward with ring attention, then the bucketed gradient all-reduce),
// timed with the real communication backend (--comm, as `tessera train --comm`) and with
// the baseline: the very same compute with a backend that moves nothing ("none": every
// ring exchange and all-reduce returns at once and leaves the buffers as they are; the
// kernels run on the same sizes). Reps alternate between the two (each going first in
// turn); each rep's time is the slowest rank's (a step waits for it), the median over reps
// is reported:
//   microbatch_s  dist_step_run (the ring's exchanges, forward and backward)
//   step_s        microbatch + dist_step_reduce (the gradient all-reduce left after backward)
// and the exposed communication = with - without (ratio with / without), and the seconds
// the host spent inside the real backend's entries per step (host_in_comm_s: on the CPU
// the communication not hidden, waiting for the peer included). Output: one line
// per backend and a JSON object (--json; bench/dist/ring.sh adds the device and the commit).
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/log.h"
#include "model/config.h"
#include "model/dist/dist_step.h"
#include "model/dit.h"
#include "sched/cost.h"
#include "sched/plan.h"
#include "tools/backend.h"
#include "tools/parse.h"

#ifndef TESSERA_SOURCE_DIR
#define TESSERA_SOURCE_DIR "."
#endif

// ---- the baseline communication backend: moves nothing ---------------------------------
static int none_token;  // every request (non-NULL, as the contract asks)
static tsr_status none_reduce(const comm_backend *cb, comm_group *g, float *x, int64_t n) {
  return TSR_OK;
}
static tsr_status none_allgather(const comm_backend *cb, comm_group *g, const void *s, void *r,
                                 int64_t bytes) {
  return TSR_OK;
}
static tsr_status none_bcast(const comm_backend *cb, comm_group *g, void *b, int64_t n, int root) {
  return TSR_OK;
}
static tsr_status none_reduce_scatter(const comm_backend *cb, comm_group *g, const float *s,
                                      float *r, int64_t n) {
  return TSR_OK;
}
static tsr_status none_alltoallv(const comm_backend *cb, comm_group *g, const void *s,
                                 const int64_t *sb, const int64_t *sd, void *r, const int64_t *rb,
                                 const int64_t *rd) {
  return TSR_OK;
}
static tsr_status none_ialltoallv(const comm_backend *cb, comm_group *g, const void *s,
                                  const int64_t *sb, const int64_t *sd, void *r, const int64_t *rb,
                                  const int64_t *rd, comm_request **req) {
  *req = (comm_request *)&none_token;
  return TSR_OK;
}
static tsr_status none_iallgather(const comm_backend *cb, comm_group *g, const void *s, void *r,
                                  int64_t bytes, comm_request **req) {
  *req = (comm_request *)&none_token;
  return TSR_OK;
}
static tsr_status none_ireduce_scatter(const comm_backend *cb, comm_group *g, const float *s,
                                       float *r, int64_t n, comm_request **req) {
  *req = (comm_request *)&none_token;
  return TSR_OK;
}
static tsr_status none_barrier(const comm_backend *cb, comm_group *g) { return TSR_OK; }
static tsr_status none_ring(const comm_backend *cb, comm_group *g, const void *s, void *r,
                            int64_t bytes, comm_request **req) {
  *req = (comm_request *)&none_token;
  return TSR_OK;
}
static tsr_status none_ireduce(const comm_backend *cb, comm_group *g, float *x, int64_t n,
                               comm_request **req) {
  *req = (comm_request *)&none_token;
  return TSR_OK;
}
static tsr_status none_test(const comm_backend *cb, comm_request *req, int *done) {
  *done = 1;
  return TSR_OK;
}
static tsr_status none_wait(const comm_backend *cb, comm_request **req) {
  *req = NULL;
  return TSR_OK;
}
static comm_backend none_like(const comm_backend *real) {
  return (comm_backend){.name = "none", .mem = real->mem, .stream = real->stream,
                        .allreduce_sum_f32 = none_reduce, .allgather = none_allgather,
                        .iallgather = none_iallgather,
                        .reduce_scatter_sum_f32 = none_reduce_scatter,
                        .ireduce_scatter_sum_f32 = none_ireduce_scatter,
                        .alltoallv = none_alltoallv, .ialltoallv = none_ialltoallv,
                        .bcast = none_bcast, .barrier = none_barrier, .ring_start = none_ring,
                        .iallreduce_sum_f32 = none_ireduce, .test = none_test,
                        .wait = none_wait};
}

// ---- the real backend, timed: seconds the host spends inside its entries ----------------
// On a host backend (mpi) that is the communication the compute does not hide (waiting for
// a peer included), a figure that does not depend on how the other ranks are scheduled; on
// a device backend the host is not blocked (the with/without comparison is the measure).
static const comm_backend *timed_real;
static double timed_s;
#define TIMED(call)                            \
  do {                                         \
    double t0_ = time_now();                   \
    tsr_status st_ = (call);                   \
    timed_s += time_now() - t0_;               \
    return st_;                                \
  } while (0)
static tsr_status t_reduce(const comm_backend *cb, comm_group *g, float *x, int64_t n) {
  TIMED(timed_real->allreduce_sum_f32(timed_real, g, x, n));
}
static tsr_status t_allgather(const comm_backend *cb, comm_group *g, const void *s, void *r,
                              int64_t bytes) {
  TIMED(timed_real->allgather(timed_real, g, s, r, bytes));
}
static tsr_status t_iallgather(const comm_backend *cb, comm_group *g, const void *s, void *r,
                               int64_t bytes, comm_request **req) {
  TIMED(timed_real->iallgather(timed_real, g, s, r, bytes, req));
}
static tsr_status t_reduce_scatter(const comm_backend *cb, comm_group *g, const float *s,
                                   float *r, int64_t n) {
  TIMED(timed_real->reduce_scatter_sum_f32(timed_real, g, s, r, n));
}
static tsr_status t_ireduce_scatter(const comm_backend *cb, comm_group *g, const float *s,
                                    float *r, int64_t n, comm_request **req) {
  TIMED(timed_real->ireduce_scatter_sum_f32(timed_real, g, s, r, n, req));
}
static tsr_status t_alltoallv(const comm_backend *cb, comm_group *g, const void *s,
                              const int64_t *sb, const int64_t *sd, void *r, const int64_t *rb,
                              const int64_t *rd) {
  TIMED(timed_real->alltoallv(timed_real, g, s, sb, sd, r, rb, rd));
}
static tsr_status t_ialltoallv(const comm_backend *cb, comm_group *g, const void *s,
                               const int64_t *sb, const int64_t *sd, void *r, const int64_t *rb,
                               const int64_t *rd, comm_request **req) {
  TIMED(timed_real->ialltoallv(timed_real, g, s, sb, sd, r, rb, rd, req));
}
static tsr_status t_bcast(const comm_backend *cb, comm_group *g, void *b, int64_t n, int root) {
  TIMED(timed_real->bcast(timed_real, g, b, n, root));
}
static tsr_status t_barrier(const comm_backend *cb, comm_group *g) {
  TIMED(timed_real->barrier(timed_real, g));
}
static tsr_status t_ring(const comm_backend *cb, comm_group *g, const void *s, void *r,
                         int64_t bytes, comm_request **req) {
  TIMED(timed_real->ring_start(timed_real, g, s, r, bytes, req));
}
static tsr_status t_ireduce(const comm_backend *cb, comm_group *g, float *x, int64_t n,
                            comm_request **req) {
  TIMED(timed_real->iallreduce_sum_f32(timed_real, g, x, n, req));
}
static tsr_status t_test(const comm_backend *cb, comm_request *req, int *done) {
  TIMED(timed_real->test(timed_real, req, done));
}
static tsr_status t_wait(const comm_backend *cb, comm_request **req) {
  TIMED(timed_real->wait(timed_real, req));
}
static comm_backend timed_like(const comm_backend *real) {
  timed_real = real;
  return (comm_backend){.name = real->name, .mem = real->mem, .stream = real->stream,
                        .allreduce_sum_f32 = t_reduce, .allgather = t_allgather,
                        .iallgather = t_iallgather, .reduce_scatter_sum_f32 = t_reduce_scatter,
                        .ireduce_scatter_sum_f32 = t_ireduce_scatter, .alltoallv = t_alltoallv,
                        .ialltoallv = t_ialltoallv,
                        .bcast = t_bcast, .barrier = t_barrier, .ring_start = t_ring,
                        .iallreduce_sum_f32 = t_ireduce, .test = t_test, .wait = t_wait};
}

// ---- one side of the comparison ---------------------------------------------------------
typedef struct {
  dit_model *m;
  dist_step *ds;
  double *mb, *step;  // (reps) seconds
  double *in_comm;    // (reps) seconds inside the backend's entries (the slowest rank's)
} side;

static tsr_status side_make(side *s, const comm_backend *cb, const kernels_backend *kb,
                            const dit_config *mc, const train_config *tc, int max_tokens,
                            int clips, int reps) {
  memset(s, 0, sizeof *s);
  s->mb = calloc((size_t)reps, sizeof *s->mb);
  s->step = calloc((size_t)reps, sizeof *s->step);
  s->in_comm = calloc((size_t)reps, sizeof *s->in_comm);
  if (!s->mb || !s->step || !s->in_comm) return err_set(TSR_ENOMEM, "bench: out of memory");
  tsr_status st = dit_create(&s->m, mc, kb, max_tokens, clips);
  if (!st) st = dit_init(s->m, 1);
  if (!st) st = dist_step_create(&s->ds, s->m, cb, mc, tc, max_tokens, clips);
  return st;
}

static void side_free(side *s) {
  dist_step_free(&s->ds);
  dit_free(&s->m);
  free(s->mb);
  free(s->step);
  free(s->in_comm);
}

// One rep: the slowest rank's microbatch and step seconds.
static tsr_status side_run(side *s, const kernels_backend *kb, const plan *p,
                           const dist_clip *clips, int n, int rep) {
  tsr_status st = comm_barrier();
  timed_s = 0;
  double loss = 0, t0 = time_now();
  if (!st) st = dit_zero_grad(s->m);
  if (!st) st = dist_step_run(s->ds, p, clips, n, rep, &loss, NULL);  // ends waiting for the losses
  double t1 = time_now();
  if (!st) st = dist_step_reduce(s->ds, &loss);
  if (!st) st = kb->sync(kb);
  double t2 = time_now();
  int64_t ns[3] = {(int64_t)((t1 - t0) * 1e9), (int64_t)((t2 - t0) * 1e9),
                   (int64_t)(timed_s * 1e9)};
  if (!st) st = comm_allreduce_max_i64(ns, 3);
  s->mb[rep] = (double)ns[0] * 1e-9;
  s->step[rep] = (double)ns[1] * 1e-9;
  s->in_comm[rep] = (double)ns[2] * 1e-9;
  return st;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
  if (comm_init(&argc, &argv)) {
    fprintf(stderr, "bench_ring: %s\n", err_msg());
    return 1;
  }
  log_set_rank(comm_rank(), comm_size());
  const char *config = TESSERA_SOURCE_DIR "/configs/model/tiny.conf", *json_path = NULL;
  const char *backend = "auto", *comm = "auto";
  char *sets[64];
  int nsets = 0, reps = 5, nclips = 1, mode = COST_CP_RING, per_node = 0;
  const char *cost_path = NULL;
  int64_t L = 4096;
  int vs_chunks = 0;  // --vs-chunks: 0, no baseline side
  enum { O_CONFIG = 1, O_SET, O_TOKENS, O_CLIPS, O_REPS, O_BACKEND, O_COMM, O_JSON, O_MODE,
         O_GPN, O_COST, O_VS };
  static const struct option opts[] = {
      {"config", required_argument, 0, O_CONFIG}, {"set", required_argument, 0, O_SET},
      {"tokens", required_argument, 0, O_TOKENS}, {"clips", required_argument, 0, O_CLIPS},
      {"reps", required_argument, 0, O_REPS},     {"backend", required_argument, 0, O_BACKEND},
      {"comm", required_argument, 0, O_COMM},     {"json", required_argument, 0, O_JSON},
      {"mode", required_argument, 0, O_MODE},     {"gpus-per-node", required_argument, 0, O_GPN},
      {"cost", required_argument, 0, O_COST},     {"vs-chunks", required_argument, 0, O_VS},
      {0, 0, 0, 0}};
  tsr_status st = TSR_OK;
  int c;
  opterr = 0;
  while (!st && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case O_CONFIG: config = optarg; break;
    case O_SET:
      if (nsets == 64) st = err_set(TSR_EINVAL, "--set: at most 64");
      else sets[nsets++] = optarg;
      break;
    case O_TOKENS: st = parse_i64("--tokens", optarg, 1, 1 << 24, &L); break;
    case O_CLIPS: st = parse_int("--clips", optarg, 1, 1024, &nclips); break;
    case O_REPS: st = parse_int("--reps", optarg, 1, 1000, &reps); break;
    case O_BACKEND: backend = optarg; break;
    case O_COMM: comm = optarg; break;
    case O_JSON: json_path = optarg; break;
    case O_MODE:
      mode = !strcmp(optarg, "ring") ? COST_CP_RING : !strcmp(optarg, "ulysses") ? COST_CP_ULYSSES
             : !strcmp(optarg, "hybrid") ? COST_CP_HYBRID : -1;
      if (mode < 0) st = err_set(TSR_EINVAL, "--mode %s: ring, ulysses or hybrid", optarg);
      break;
    case O_GPN: st = parse_int("--gpus-per-node", optarg, 1, 1 << 20, &per_node); break;
    case O_COST: cost_path = optarg; break;
    case O_VS: st = parse_int("--vs-chunks", optarg, 1, 64, &vs_chunks); break;
    default: st = err_set(TSR_EINVAL, "unknown option or missing value '%s'", argv[optind - 1]);
    }
  }
  dit_config mc;
  train_config tc;
  backend_choice bc;
  const kernels_backend *kb = NULL;
  const comm_backend *cb = NULL;
  char *defaults = NULL;
  if (!st) st = config_load(config, sets, nsets, &mc, &tc, &defaults);
  free(defaults);
  if (!st) st = backend_choose(backend, &bc);
  if (!st) st = backend_for_precision(&bc, tc.precision, &kb);
  if (!st) st = backend_comm_open(comm, &bc, per_node, &cb);  // hybrid: blocks of per_node
  cost_model cm = {0};
  if (!st && cost_path) st = cost_model_load(cost_path, &cm);
  cm.heads = mc.heads;
  cm.a2a_chunks = tc.ulysses_chunks;
  const int K = comm_size(), P = mc.pt * mc.ph * mc.pw * mc.channels;
  // the clips: L tokens each on a T x 1 x 1 grid (positions do not change the cost)
  dist_clip *clips = calloc((size_t)nclips, sizeof *clips);
  uint8_t *tok = malloc((size_t)L * P);
  if (!st && (!clips || !tok)) st = err_set(TSR_ENOMEM, "bench: out of memory");
  for (int64_t i = 0; !st && i < L * P; i++) tok[i] = (uint8_t)((uint64_t)i * 2654435761u >> 24);
  for (int i = 0; !st && i < nclips; i++)
    clips[i] = (dist_clip){.id = 1 + i, .T = (int)L, .H = 1, .W = 1, .label = -1, .tokens = tok};
  plan p;
  plan_init(&p, K);
  int idx[1024];
  for (int i = 0; i < nclips; i++) idx[i] = i;
  if (!st) st = plan_wave_begin(&p);
  if (!st) st = plan_add_group(&p, 0, K, idx, nclips);
  if (!st) st = plan_wave_end(&p);
  if (!st) p.groups[0].mode = mode;  // the group of all K ranks, in the mode asked
  comm_backend none = cb ? none_like(cb) : (comm_backend){0};
  comm_backend timed = cb ? timed_like(cb) : (comm_backend){0};
  side with = {0}, without = {0}, base = {0};
  train_config tc_base = tc;  // --vs-chunks: the same exchange, another pipeline
  tc_base.ulysses_chunks = vs_chunks;
  const int max_tokens = (int)(nclips * ((L + K - 1) / K));
  if (!st) st = side_make(&with, &timed, kb, &mc, &tc, max_tokens, nclips, reps);
  if (!st) st = side_make(&without, &none, kb, &mc, &tc, max_tokens, nclips, reps);
  if (!st && vs_chunks) st = side_make(&base, &timed, kb, &mc, &tc_base, max_tokens, nclips, reps);
  side *sides[3] = {&with, &without, &base};
  const int nsides = vs_chunks ? 3 : 2;
  for (int r = -1; r < reps && !st; r++) {  // r = -1: warm-up of all
    int rr = r < 0 ? 0 : r;
    for (int i = 0; i < nsides && !st; i++)  // each side first in turn (ABBA with two)
      st = side_run(sides[(i + rr) % nsides], kb, &p, clips, nclips, rr);
  }
  if (st) {
    log_error("bench_ring: %s", err_msg());
    comm_abort(1);
  }
  double mb_w = median(with.mb, reps), mb_0 = median(without.mb, reps);
  double st_w = median(with.step, reps), st_0 = median(without.step, reps);
  double in_comm = median(with.in_comm, reps);
  double mb_b = vs_chunks ? median(base.mb, reps) : -1;
  // the cost model's microbatch time and exposed communication in this mode (--cost)
  const int G = per_node > 0 ? per_node : K;
  const double s1 = (double)nclips * (double)L, s2 = (double)nclips * (double)L * (double)L;
  double pred = cost_path ? cost_group_time_mode(&cm, G, K, nclips, s1, s2, (cost_cp_mode)mode) : -1;
  double pred_x = cost_path ? cost_group_exposed(&cm, G, K, s1, s2, (cost_cp_mode)mode) : -1;
  cost_model cm_b = cm;
  cm_b.a2a_chunks = vs_chunks;
  double pred_xb = cost_path && vs_chunks ? cost_group_exposed(&cm_b, G, K, s1, s2, (cost_cp_mode)mode) : -1;
  if (comm_rank() == 0) {
    printf("bench_ring: CP-%d %s, %d clip(s) of %lld tokens, %s/%s, comm %s: microbatch %.4f s with "
           "the exchange, %.4f s without (exposed %.4f s, x%.3f); step %.4f vs %.4f s (exposed "
           "%.4f s, x%.3f); host inside the backend %.4f s per step", K,
           cost_cp_mode_name((cost_cp_mode)mode), nclips, (long long)L,
           kb->name, tc.precision ? "bf16" : "fp32", cb->name, mb_w, mb_0, mb_w - mb_0,
           mb_w / mb_0, st_w, st_0, st_w - st_0, st_w / st_0, in_comm);
    if (cost_path) printf("; the cost model predicts %.4f s (exposed %.4f s)", pred, pred_x);
    if (vs_chunks)
      printf("; against train.ulysses_chunks = %d: microbatch %.4f s (exposed %.4f s), x%.3f",
             vs_chunks, mb_b, mb_b - mb_0, mb_w / mb_b);
    if (vs_chunks && cost_path) printf(" (its model's exposed %.4f s)", pred_xb);
    printf("\n");
    if (json_path) {
      json_t *o = json_pack("{s:s, s:s, s:f, s:f, s:i, s:s, s:s, s:s, s:I, s:i, s:i, s:i, s:f, s:f, s:f, "
                            "s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:i, s:f, s:f, s:f, s:f}",
                            "bench", "ring", "mode", cost_cp_mode_name((cost_cp_mode)mode),
                            "predicted_microbatch_s", pred, "predicted_exposed_s", pred_x,
                            "ranks", K, "backend", kb->name, "comm", cb->name,
                            "config", config, "tokens_per_clip", (json_int_t)L, "clips", nclips,
                            "reps", reps, "hidden", mc.hidden, "microbatch_s", mb_w,
                            "microbatch_without_s", mb_0, "exposed_ring_s", mb_w - mb_0,
                            "ratio_microbatch", mb_w / mb_0, "step_s", st_w,
                            "step_without_s", st_0, "exposed_step_s", st_w - st_0,
                            "ratio_step", st_w / st_0, "host_in_comm_s", in_comm,
                            "ulysses_chunks", tc.ulysses_chunks, "base_chunks", vs_chunks,
                            "microbatch_base_s", mb_b, "exposed_base_s", vs_chunks ? mb_b - mb_0 : -1.0,
                            "ratio_vs_base", vs_chunks ? mb_w / mb_b : -1.0,
                            "predicted_exposed_base_s", pred_xb);
      if (!o || json_dump_file(o, json_path, JSON_INDENT(2)) != 0)
        log_error("bench_ring: cannot write %s", json_path);
      json_decref(o);
    }
  }
  side_free(&with);
  side_free(&without);
  side_free(&base);
  plan_free(&p);
  comm_close(&cb);
  free(clips);
  free(tok);
  comm_finalize();
  return 0;
}
