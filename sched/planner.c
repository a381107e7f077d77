// sched/planner.c — one global batch: checks, bound, baselines, dynamic plan, fallback.
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "sched/sched.h"

const char *sched_used_name(sched_used u) {
  switch (u) {
  case SCHED_USED_DYNAMIC: return "dynamic";
  case SCHED_USED_PACKING_ONLY: return "packing-only";
  case SCHED_USED_STATIC_BALANCED: return "static-balanced";
  }
  return "?";
}

// The largest group's capacity, K x M tokens (K the largest power of two <= N), for messages.
static int largest_group(const sched_cluster *cl) {
  int k = 1;
  while (2 * k <= cl->ranks) k *= 2;
  return k;
}
static int64_t cluster_capacity(const sched_cluster *cl) {
  return (int64_t)largest_group(cl) * cl->mem_tokens;
}

tsr_status sched_config_check(const sched_config *cfg) {
  tsr_status st = sched_cluster_check(&cfg->cluster);
  if (!st) st = cost_model_check(&cfg->cost);
  if (st) return st;
  if (cfg->max_clip_tokens < 0)
    return err_set(TSR_EINVAL, "max clip tokens = %lld: must be >= 0 (0: longest of the batch)",
                   (long long)cfg->max_clip_tokens);
  if (cfg->max_clip_tokens > 0 && !cost_min_cp(&cfg->cluster, cfg->max_clip_tokens))
    return err_set(TSR_EINVAL,
                   "max clip tokens = %lld: no group can hold such a clip (%d ranks x %lld "
                   "mem tokens = %lld); raise --mem-tokens or --ranks",
                   (long long)cfg->max_clip_tokens, largest_group(&cfg->cluster),
                   (long long)cfg->cluster.mem_tokens,
                   (long long)cluster_capacity(&cfg->cluster));
  return TSR_OK;
}

tsr_status sched_batch_check(const sched_config *cfg, const int64_t *tokens, int n) {
  if (n < 1) return err_set(TSR_EINVAL, "empty batch: a global batch needs at least one clip");
  if (n > SCHED_MAX_BATCH)
    return err_set(TSR_EINVAL, "batch of %d clips: at most %d", n, SCHED_MAX_BATCH);
  const sched_cluster *cl = &cfg->cluster;
  for (int i = 0; i < n; i++) {
    if (tokens[i] <= 0 || tokens[i] > SCHED_MAX_TOKENS)
      return err_set(TSR_EINVAL, "clip %d has %lld tokens; lengths must be > 0 and at most %lld (2^38)", i,
                     (long long)tokens[i], (long long)SCHED_MAX_TOKENS);
    if (!cost_min_cp(cl, tokens[i]))
      return err_set(TSR_EINVAL,
                     "clip %d has %lld tokens, more than any group can hold (%d ranks x %lld "
                     "mem tokens = %lld); raise --mem-tokens or --ranks, or cap clip length "
                     "(--max-seconds, --cap-tokens)",
                     i, (long long)tokens[i], largest_group(cl), (long long)cl->mem_tokens,
                     (long long)cluster_capacity(cl));
    if (cfg->max_clip_tokens > 0 && tokens[i] > cfg->max_clip_tokens)
      return err_set(TSR_EINVAL,
                     "clip %d has %lld tokens, more than max clip tokens %lld; raise "
                     "--max-clip-tokens or cap clip length",
                     i, (long long)tokens[i], (long long)cfg->max_clip_tokens);
  }
  return TSR_OK;
}

void sched_result_free(sched_result *r) { plan_free(&r->plan); }

// CPU seconds of the calling thread.
static double thread_cpu_s(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) return 0;
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The ring-only dynamic candidate of a planner whose cost model offers other modes, planned
// on a thread of its own beside the dynamic plan in every mode (the two are independent and
// deterministic, so the result is the same as planning them one after the other; on a
// machine with a free core the batch takes about the longer of the two instead of both).
typedef struct {
  sched_config cfg;          // cfg with cp_modes = ring
  const sched_config *full;  // the caller's: its modes are chosen for the plan's groups
  const int64_t *tokens;
  int n;
  plan *out;
  tsr_status st;
  double cpu_s;              // the thread's CPU time
  char msg[1024];            // its error message (err_msg is thread-local)
} ring_job;

static void *ring_main(void *arg) {
  ring_job *j = arg;
  double c0 = thread_cpu_s();
  j->st = sched_dynamic(&j->cfg, j->tokens, j->n, j->out);
  if (!j->st) plan_choose_modes(j->out, j->tokens, &j->full->cost, &j->full->cluster);
  if (j->st) snprintf(j->msg, sizeof j->msg, "%s", err_msg());
  j->cpu_s = thread_cpu_s() - c0;
  return NULL;
}

tsr_status sched_plan_batch(const sched_config *cfg, const int64_t *tokens, int n,
                            sched_result *out) {
  double t0 = time_now(), c0 = thread_cpu_s();
  memset(out, 0, sizeof *out);
  plan_init(&out->plan, cfg->cluster.ranks);
  tsr_status st = sched_config_check(cfg);
  if (!st) st = sched_batch_check(cfg, tokens, n);
  if (st) return st;
  sched_lower_bound(cfg, tokens, n, &out->lower_bound_s, &out->lower_bound_ref_s);
  out->static_cp = sched_static_cp(cfg, tokens, n);

  // Candidates in order of preference on ties: balanced, packing only, dynamic; when the
  // cost model offers other CP modes than ring, also the dynamic plan made in ring mode with
  // its groups' modes chosen afterwards: the planner is greedy, and a richer cost model can
  // lead it to a slower plan, while choosing modes for fixed groups only shortens them (a
  // plan's step time never grows when a group's time shrinks), so that candidate is never
  // slower than ring-only planning. Under ZeRO stage >= 2 every wave ends on all ranks
  // together (cost_zero_lockstep), which the dynamic planner's per-rank timelines do not
  // see: its plans' groups regrouped into waves, long with long (plan_rewave), join too.
  enum { NCAND = 6 };
  plan cand[NCAND];
  plan_sim sim[NCAND];
  const sched_used kind[NCAND] = {SCHED_USED_STATIC_BALANCED, SCHED_USED_PACKING_ONLY,
                                  SCHED_USED_DYNAMIC, SCHED_USED_DYNAMIC,
                                  SCHED_USED_DYNAMIC, SCHED_USED_DYNAMIC};
  const int nplanned = (cfg->cost.cp_modes & ~COST_MODES_RING) ? 4 : 3;
  const int ncand = cost_zero_lockstep(&cfg->cost, cfg->cluster.ranks) ? 2 * nplanned - 2
                                                                        : nplanned;
  for (int i = 0; i < NCAND; i++) plan_init(&cand[i], cfg->cluster.ranks);
  ring_job rj = {.cfg = *cfg, .full = cfg, .tokens = tokens, .n = n, .out = &cand[3]};
  rj.cfg.cost.cp_modes = COST_MODES_RING;
  pthread_t ring_thread;
  int threaded = nplanned > 3 && !pthread_create(&ring_thread, NULL, ring_main, &rj);
  st = sched_baseline_balanced(cfg, tokens, n, &cand[0]);
  if (!st) st = sched_baseline_packing(cfg, tokens, n, &cand[1]);
  if (!st) st = sched_dynamic(cfg, tokens, n, &cand[2]);
  if (nplanned > 3) {
    if (threaded) pthread_join(ring_thread, NULL);
    else ring_main(&rj);  // no thread to be had: the same work here
    if (!st && rj.st) st = err_set(rj.st, "%s", rj.msg);
  }
  for (int i = nplanned; !st && i < ncand; i++)  // the dynamic ones, rewaved
    st = plan_rewave(&cand[i - nplanned + 2], tokens, n, &cfg->cost, &cfg->cluster, &cand[i]);
  for (int i = 0; i < ncand && !st; i++)
    st = plan_simulate(&cand[i], tokens, &cfg->cost, &cfg->cluster, &sim[i], NULL, NULL);
  if (!st) {
    int best = 0;
    for (int i = 1; i < ncand; i++)
      if (sim[i].step_s < sim[best].step_s) best = i;
    out->static_balanced_s = sim[0].step_s;
    out->packing_only_s = sim[1].step_s;
    out->dynamic_s = sim[2].step_s;
    for (int i = 3; i < ncand; i++)
      if (sim[i].step_s < out->dynamic_s) out->dynamic_s = sim[i].step_s;
    out->predicted_s = sim[best].step_s;
    out->idle_frac = sim[best].idle_frac;
    out->zero_s = sim[best].zero_s;
    out->used = kind[best];
    plan tmp = out->plan;  // swap: the result owns the chosen plan
    out->plan = cand[best];
    cand[best] = tmp;
  }
  for (int m = 0; cfg->mode_baselines && m < COST_CP_NMODES && !st; m++) {  // static CP, one mode
    sched_config one = *cfg;
    one.cost.cp_modes = 1 << m;
    plan_sim sm;
    st = sched_baseline_balanced(&one, tokens, n, &cand[0]);
    if (!st) st = plan_simulate(&cand[0], tokens, &one.cost, &one.cluster, &sm, NULL, NULL);
    if (!st) out->static_mode_s[m] = sm.step_s;
  }
  for (int i = 0; i < NCAND; i++) plan_free(&cand[i]);
  out->plan_ms = 1e3 * (time_now() - t0);
  out->plan_cpu_ms = 1e3 * (thread_cpu_s() - c0 + (threaded ? rj.cpu_s : 0));
  return st;
}

void sched_totals_add(sched_totals *t, const sched_result *r) {
  t->steps++;
  t->predicted_s += r->predicted_s;
  t->dynamic_s += r->dynamic_s;
  t->packing_only_s += r->packing_only_s;
  t->static_balanced_s += r->static_balanced_s;
  for (int m = 0; m < COST_CP_NMODES; m++) t->static_mode_s[m] += r->static_mode_s[m];
  plan_mode_histogram(&r->plan, t->mode_clips);
  t->lower_bound_s += r->lower_bound_s;
  t->lower_bound_ref_s += r->lower_bound_ref_s;
  t->idle_s += r->idle_frac * r->predicted_s;
  t->zero_s += r->zero_s;
  t->plan_ms += r->plan_ms;
  if (r->plan_ms > t->plan_ms_max) t->plan_ms_max = r->plan_ms;
  t->plan_cpu_ms += r->plan_cpu_ms;
  if (r->plan_cpu_ms > t->plan_cpu_ms_max) t->plan_cpu_ms_max = r->plan_cpu_ms;
  plan_cp_histogram(&r->plan, t->cp_hist);
  t->used[r->used]++;
}
