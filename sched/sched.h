// sched/sched.h — the Dynamic-CP scheduler: plans one global batch of clips on a cluster,
// beside the static-CP baselines and a lower bound, synchronously or on a background
// thread. Pure: clip lengths and a cost model in, plans and predicted times out.
//
// Batch: n clips of tokens (n), named by their index 0..n-1 in every plan.
// Times are seconds under the reference model of sched/cost.h, simulated by
// plan_simulate (sched/plan.h). All functions are deterministic: the same config and
// lengths give the same plan, on any thread.
#ifndef TESSERA_SCHED_SCHED_H
#define TESSERA_SCHED_SCHED_H

#include <stdint.h>
#include "core/err.h"
#include "sched/cost.h"
#include "sched/plan.h"

typedef struct {
  sched_cluster cluster;
  cost_model cost;
  int64_t max_clip_tokens;  // longest clip the job may see: fixes the static CP size
                            // k_s of the baselines (0: the longest clip of each batch)
  int mode_baselines;       // 1: each result also times static CP in every CP mode
                            // (static_mode_s, `tessera plan`'s report); 0 (the trainer): not
} sched_config;

// Checks cluster, cost model and max_clip_tokens (it must fit the cluster: N*M).
tsr_status sched_config_check(const sched_config *cfg);
// Checks a batch: n >= 1, every clip > 0 tokens and holdable by some group
// (ceil(L/K) <= M, K the largest power of two <= N), and <= max_clip_tokens when that is set. Errors name the clip.
tsr_status sched_batch_check(const sched_config *cfg, const int64_t *tokens, int n);

// ---- lower bound (sched/bound.c) ------------------------------------------------------
// lb: a true lower bound on the step time of any plan:
//   max( (sum(a*L + b*L^2) + ovh * ceil(sum L / M)) / N,  max over clips of the clip's
//        best time alone over its feasible k )  + allreduce
//   + cost_zero_step + cost_zero_min_wave (ZeRO: every plan has a wave).
// Every group of k ranks spends k*T >= its clips' a*L + b*L^2 plus k*ovh rank-seconds,
// and holds at most k*M tokens; a group's time is never below that of its longest clip
// alone (docs/plan.md). lb_ref: the per-clip form of the issue, where each clip is
// charged its least k*T over feasible k, ovh and exposed ring steps included; packing
// clips into one group shares those, so lb_ref can exceed a real plan's time for batches
// of tiny clips. It is reported beside lb. Either pointer may be NULL.
void sched_lower_bound(const sched_config *cfg, const int64_t *tokens, int n, double *lb,
                       double *lb_ref);

// ---- static baselines (sched/baseline.c) ----------------------------------------------
// Static CP size: smallest power of two k_s <= N with ceil(max_clip_tokens / k_s) <= M, where
// max_clip_tokens is the config's or, if 0, the batch's longest clip. The baselines run
// floor(N / k_s) groups: k_s divides N whenever some power of two dividing N holds the
// longest clip; otherwise (N = 24 and k_s = 16, say) the N mod k_s ranks past the last
// whole block idle in the baselines.
int sched_static_cp(const sched_config *cfg, const int64_t *tokens, int n);
// (1) packing only: clips in batch (sampler) order packed greedily into microbatches that
// fit a rank of a k_s group (sum ceil(L/k_s) <= M, i.e. about k_s*M tokens), dealt
// round-robin to the floor(N/k_s) groups; wave w runs microbatch w of every group.
// out: initialised by the caller (plan_init), overwritten.
tsr_status sched_baseline_packing(const sched_config *cfg, const int64_t *tokens, int n,
                                  plan *out);
// (2) static balanced: the same groups; clips longest first, each onto the group whose
// predicted time is least, first-fit into that group's microbatches by memory.
tsr_status sched_baseline_balanced(const sched_config *cfg, const int64_t *tokens, int n,
                                   plan *out);

// ---- dynamic planner (sched/dynamic.c) ------------------------------------------------
// Dynamic-CP: per clip a CP size and an aligned rank block, packing clips of a block
// into one group where that is faster; the algorithm is in docs/plan.md. The plan is
// valid (plan_validate) but may be slower than a baseline; sched_plan_batch falls back.
tsr_status sched_dynamic(const sched_config *cfg, const int64_t *tokens, int n, plan *out);
// The same planner finding every placement by scanning all blocks and open groups of every
// CP size (O(clips x ranks) per run) instead of through its trees: the reference that the
// tests hold sched_dynamic to (the same plan, bitwise).
tsr_status sched_dynamic_reference(const sched_config *cfg, const int64_t *tokens, int n,
                                   plan *out);

// ---- one batch, with fallback (sched/planner.c) ---------------------------------------
typedef enum {
  SCHED_USED_DYNAMIC = 0,
  SCHED_USED_PACKING_ONLY,
  SCHED_USED_STATIC_BALANCED
} sched_used;
const char *sched_used_name(sched_used u);  // "dynamic", "packing-only", "static-balanced"

typedef struct {
  plan plan;                // the plan to run: the dynamic one or the better baseline
  sched_used used;
  double predicted_s;       // step time of `plan` (<= both baselines)
  double dynamic_s;         // step time of the dynamic planner's own plan
  double packing_only_s;    // baseline (1)
  double static_balanced_s; // baseline (2)
  double static_mode_s[COST_CP_NMODES];  // baseline (2) with every group in one mode
                            // (hybrid: Ulysses in groups inside a node); with
                            // cfg->mode_baselines only, else 0
  double lower_bound_s;     // lb of sched_lower_bound
  double lower_bound_ref_s; // lb_ref of sched_lower_bound
  double idle_frac;         // of `plan` (plan_sim.idle_frac)
  double zero_s;            // of `plan`: ZeRO's exposed communication (plan_sim.zero_s),
                            // inside predicted_s; 0 at train.zero = 0
  int static_cp;            // k_s of the baselines
  double plan_ms;           // wall time of sched_plan_batch (all of the above)
  double plan_cpu_ms;       // CPU time of the threads that ran it (the caller's, and with
                            // CP modes besides ring the ring-only candidate's: the same work;
                            // unlike the wall time, not stretched by other processes)
} sched_result;

// Plans one batch: checks it, runs bound, both baselines and the dynamic planner,
// simulates all and keeps the fastest, preferring a baseline on ties. With CP modes
// besides ring, the ring-only dynamic candidate is planned on a second thread meanwhile
// (the same result as in turn: every candidate is deterministic). *out is
// overwritten; free it with sched_result_free. On error *out holds an empty plan.
tsr_status sched_plan_batch(const sched_config *cfg, const int64_t *tokens, int n,
                            sched_result *out);
void sched_result_free(sched_result *r);

// Sums over the steps of a run, for reports (the CLI's total line and JSON).
enum { SCHED_MAX_LEVELS = 32 };
typedef struct {
  int steps;
  double predicted_s, dynamic_s, packing_only_s, static_balanced_s;
  double static_mode_s[COST_CP_NMODES];
  double lower_bound_s, lower_bound_ref_s;
  double idle_s;                    // sum of idle_frac * predicted_s
  double zero_s;                    // ZeRO's exposed communication
  double plan_ms, plan_ms_max;
  double plan_cpu_ms, plan_cpu_ms_max;
  int64_t cp_hist[SCHED_MAX_LEVELS];// clips run at CP size 2^l, over all steps
  int64_t mode_clips[COST_CP_NMODES];// clips run in groups of CP > 1 in each mode
  int used[3];                      // steps per sched_used
} sched_totals;
void sched_totals_add(sched_totals *t, const sched_result *r);

// ---- background planning (sched/async.c) ----------------------------------------------
// sched_async_start copies cfg and tokens (n) and runs sched_plan_batch on a new thread,
// so batch n+1 is planned while batch n trains; sched_async_wait joins it, moves the
// result into *out (free with sched_result_free) and returns its status. The result is
// identical to sched_plan_batch on the calling thread (plan_ms aside). Each started
// handle must be waited for exactly once.
typedef struct sched_async sched_async;
tsr_status sched_async_start(sched_async **h, const sched_config *cfg, const int64_t *tokens,
                             int n);
tsr_status sched_async_wait(sched_async **h, sched_result *out);

// ---- draw-and-plan pipeline (sched/pipeline.c) ------------------------------------------
// The loop of the trainer and of `tessera plan`: batch s+1 is drawn and planned in the
// background while the caller runs batch s. draw(ctx, s, ids, tokens, &n) fills batch s
// (at most max_batch clips; ids: (max_batch), tokens: (max_batch)); it is called on the
// caller's thread, in step order, once per step, batch s+1 right after the plan of batch
// s is handed out. Steps run from `first` to `end` - 1.
typedef tsr_status (*sched_draw_fn)(void *ctx, int64_t s, int64_t *ids, int64_t *tokens,
                                    int64_t *n);
typedef struct {
  int64_t step;                 // s
  const int64_t *ids, *tokens;  // (n) batch s, valid until the next sched_pipeline_next
  int64_t n;
  sched_result res;             // its plan; owned by the pipeline (freed by the next call)
} sched_batch;

// Planning once per job instead of once per process. The `size` processes of a job (each
// running the same pipeline, drawing the same batches) share their plans: batch s is
// planned, in the background as above, only by process sched_planner_of(share, s) — the
// `planners` processes (size / planners) apart take the steps in turn — which broadcasts
// the result when every process asks for batch s; the others plan nothing and wait in
// that broadcast only if the plan is late. Every process gets the result bitwise as if it
// had planned the batch itself (the planner is deterministic; the plan and every number
// are copied, plan_ms and plan_cpu_ms are the planner's). An error of the planner (its
// message included) reaches every process. bcast(ctx, buf, bytes, root) must broadcast
// `bytes` of buf from process `root` to all (a collective: comm/comm.h comm_bcast); it is
// called on the caller's thread, from sched_pipeline_next, in step order.
typedef struct {
  int rank, size;   // this process, the job's processes
  int planners;     // processes that plan, in [1, size]
  tsr_status (*bcast)(void *ctx, void *buf, int64_t bytes, int root);
  void *ctx;
} sched_share;
// The process that plans batch s: (s mod planners) * (size / planners).
int sched_planner_of(const sched_share *share, int64_t s);

// What a pipeline cost this process (for reports and benchmarks).
typedef struct {
  int64_t batches;        // handed out
  int64_t planned_here;   // of those, planned by this process
  double plan_cpu_s;      // CPU seconds this process spent planning them
  double wait_s;          // wall seconds sched_pipeline_next waited for plans (thread join
                          // and broadcast)
  int64_t bcast_bytes;    // plan bytes broadcast (sent or received)
} sched_pipeline_stats;

typedef struct sched_pipeline sched_pipeline;
// Draws batch `first` and starts planning it (nothing when first >= end). share: NULL
// (this process plans every batch itself) or the job's plan sharing, checked here.
tsr_status sched_pipeline_open(sched_pipeline **p, const sched_config *cfg, int64_t max_batch,
                               int64_t first, int64_t end, sched_draw_fn draw, void *ctx,
                               const sched_share *share);
// Waits for the plan of the next batch into *b, then draws the batch after it and starts
// its plan (if it is before `end`). TSR_EINVAL when every step was handed out.
tsr_status sched_pipeline_next(sched_pipeline *p, sched_batch *b);
void sched_pipeline_get_stats(const sched_pipeline *p, sched_pipeline_stats *st);
// Waits for a plan still in flight and frees everything; *p = NULL. With sharing, close
// every process's pipeline at the same step (the broadcasts are collectives).
void sched_pipeline_close(sched_pipeline **p);

#endif
