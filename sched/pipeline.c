// sched/pipeline.c — draw batch s+1 and plan it in the background while batch s runs
// (sched/sched.h). Two batch buffers: the one handed out and the one being planned. With
// sharing, only the planner of a batch plans it and broadcasts the result.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "sched/sched.h"

struct sched_pipeline {
  sched_config cfg;
  int64_t max_batch, next_step, end;  // next_step: the batch in flight (or end)
  sched_draw_fn draw;
  void *ctx;
  int64_t *ids[2], *tokens[2], n[2];   // [cur]: handed out; [1 - cur]: in flight
  int cur;
  int in_flight;                       // batch next_step was drawn (and is being planned
                                       // here if pending != NULL)
  sched_async *pending;
  sched_result res;                    // the plan handed out last
  int shared;                          // 1: plans are shared (share below)
  sched_share share;
  void *buf;                           // broadcast buffer
  int64_t buf_cap;
  sched_pipeline_stats stats;
};

int sched_planner_of(const sched_share *share, int64_t s) {
  return (int)(s % share->planners) * (share->size / share->planners);
}

// Draws batch s into buffer i and starts its plan, here if this process plans it.
static tsr_status start(sched_pipeline *p, int64_t s, int i) {
  p->n[i] = 0;
  tsr_status st = p->draw(p->ctx, s, p->ids[i], p->tokens[i], &p->n[i]);
  if (!st && (p->n[i] < 0 || p->n[i] > p->max_batch))
    st = err_set(TSR_EINVAL, "batch %lld has %lld clips; at most %lld", (long long)s,
                 (long long)p->n[i], (long long)p->max_batch);
  if (!st && (!p->shared || sched_planner_of(&p->share, s) == p->share.rank))
    st = sched_async_start(&p->pending, &p->cfg, p->tokens[i], (int)p->n[i]);
  if (!st) p->in_flight = 1;
  return st;
}

tsr_status sched_pipeline_open(sched_pipeline **out, const sched_config *cfg, int64_t max_batch,
                               int64_t first, int64_t end, sched_draw_fn draw, void *ctx,
                               const sched_share *share) {
  *out = NULL;
  if (max_batch < 1 || max_batch > SCHED_MAX_BATCH || !draw)
    return err_set(TSR_EINVAL, "sched_pipeline: batches of %lld clips", (long long)max_batch);
  if (share && (share->size < 1 || share->rank < 0 || share->rank >= share->size ||
                share->planners < 1 || share->planners > share->size || !share->bcast))
    return err_set(TSR_EINVAL, "sched_pipeline: plan sharing of process %d of %d with %d "
                   "planner(s): planners must be in [1, %d] and a broadcast given",
                   share->rank, share->size, share->planners, share->size);
  sched_pipeline *p = calloc(1, sizeof *p);
  if (!p) return err_set(TSR_ENOMEM, "sched_pipeline: out of memory");
  *p = (sched_pipeline){.cfg = *cfg, .max_batch = max_batch, .next_step = first, .end = end,
                        .draw = draw, .ctx = ctx, .shared = share != NULL};
  if (share) p->share = *share;
  plan_init(&p->res.plan, cfg->cluster.ranks);
  tsr_status st = TSR_OK;
  for (int i = 0; i < 2 && !st; i++) {
    p->ids[i] = malloc((size_t)max_batch * sizeof *p->ids[i]);
    p->tokens[i] = malloc((size_t)max_batch * sizeof *p->tokens[i]);
    if (!p->ids[i] || !p->tokens[i])
      st = err_set(TSR_ENOMEM, "sched_pipeline: out of memory for batches of %lld clips",
                   (long long)max_batch);
  }
  if (!st && first < end) st = start(p, first, 1);
  if (st) {
    sched_pipeline_close(&p);
    return st;
  }
  *out = p;
  return TSR_OK;
}

// ---- the broadcast of a result ------------------------------------------------------------
// Header (fixed size), then the plan's arrays: wave_off (nwaves + 1), groups (ngroups),
// clip_index (nrefs). Every process runs the same binary, so the raw layout is shared.
typedef struct {
  int32_t status;                 // tsr_status of the planner
  int32_t used, static_cp, ranks;
  int32_t nwaves, ngroups, nrefs, pad;
  double predicted_s, dynamic_s, packing_only_s, static_balanced_s, lower_bound_s,
      lower_bound_ref_s, idle_frac, zero_s, plan_ms, plan_cpu_ms;
  char msg[1024];                 // the planner's error message
} share_header;

static int64_t share_payload(const share_header *h) {
  return (int64_t)(h->nwaves + 1) * (int64_t)sizeof(int32_t) +
         (int64_t)h->ngroups * (int64_t)sizeof(plan_group) +
         (int64_t)h->nrefs * (int64_t)sizeof(int32_t);
}

static tsr_status share_reserve(sched_pipeline *p, int64_t bytes) {
  if (bytes <= p->buf_cap) return TSR_OK;
  void *b = realloc(p->buf, (size_t)bytes);
  if (!b) return err_set(TSR_ENOMEM, "sched_pipeline: out of memory for a plan of %lld bytes",
                         (long long)bytes);
  p->buf = b;
  p->buf_cap = bytes;
  return TSR_OK;
}

// The planner's side: its status and result into the header and buffer.
static void share_pack(sched_pipeline *p, tsr_status planned, share_header *h) {
  const sched_result *r = &p->res;
  const plan *pl = &r->plan;
  memset(h, 0, sizeof *h);
  h->status = planned;
  if (planned) {
    snprintf(h->msg, sizeof h->msg, "%s", err_msg());
    return;
  }
  *h = (share_header){.status = TSR_OK, .used = r->used, .static_cp = r->static_cp,
                      .ranks = pl->ranks, .nwaves = pl->nwaves, .ngroups = pl->ngroups,
                      .nrefs = pl->nrefs, .predicted_s = r->predicted_s,
                      .dynamic_s = r->dynamic_s, .packing_only_s = r->packing_only_s,
                      .static_balanced_s = r->static_balanced_s,
                      .lower_bound_s = r->lower_bound_s, .lower_bound_ref_s = r->lower_bound_ref_s,
                      .idle_frac = r->idle_frac, .zero_s = r->zero_s, .plan_ms = r->plan_ms,
                      .plan_cpu_ms = r->plan_cpu_ms};
  tsr_status st = share_reserve(p, share_payload(h));
  if (st) {  // the others learn of it through the header
    h->status = st;
    snprintf(h->msg, sizeof h->msg, "%s", err_msg());
    return;
  }
  char *b = p->buf;
  size_t w = (size_t)(pl->nwaves + 1) * sizeof(int32_t);
  size_t g = (size_t)pl->ngroups * sizeof(plan_group);
  memcpy(b, pl->wave_off, w);
  if (g) memcpy(b + w, pl->groups, g);
  if (pl->nrefs) memcpy(b + w + g, pl->clip_index, (size_t)pl->nrefs * sizeof(int32_t));
}

// The others' side: the result from the header and buffer.
static tsr_status share_unpack(sched_pipeline *p, const share_header *h) {
  sched_result *r = &p->res;
  char *b = p->buf;
  size_t w = (size_t)(h->nwaves + 1) * sizeof(int32_t);
  size_t g = (size_t)h->ngroups * sizeof(plan_group);
  plan view = {.ranks = h->ranks, .nwaves = h->nwaves, .wave_off = (int32_t *)b,
               .ngroups = h->ngroups, .groups = (plan_group *)(b + w), .nrefs = h->nrefs,
               .clip_index = (int32_t *)(b + w + g)};
  tsr_status st = plan_copy(&r->plan, &view);
  if (st) return st;
  r->used = (sched_used)h->used;
  r->static_cp = h->static_cp;
  r->predicted_s = h->predicted_s;
  r->dynamic_s = h->dynamic_s;
  r->packing_only_s = h->packing_only_s;
  r->static_balanced_s = h->static_balanced_s;
  r->lower_bound_s = h->lower_bound_s;
  r->lower_bound_ref_s = h->lower_bound_ref_s;
  r->idle_frac = h->idle_frac;
  r->zero_s = h->zero_s;
  r->plan_ms = h->plan_ms;
  r->plan_cpu_ms = h->plan_cpu_ms;
  return TSR_OK;
}

// The result of batch s: joined here (the planner), then broadcast to every process.
static tsr_status share_result(sched_pipeline *p, int64_t s) {
  int root = sched_planner_of(&p->share, s);
  share_header h;
  if (root == p->share.rank) share_pack(p, sched_async_wait(&p->pending, &p->res), &h);
  tsr_status st = p->share.bcast(p->share.ctx, &h, (int64_t)sizeof h, root);
  if (st) return st;
  if (h.status)
    return err_set((tsr_status)h.status, "%s%s",
                   root == p->share.rank ? "" : "(from the planner) ", h.msg);
  int64_t bytes = share_payload(&h);
  // An allocation failure here leaves the broadcast below unmatched: the job stops on it.
  if ((st = share_reserve(p, bytes))) return st;
  if ((st = p->share.bcast(p->share.ctx, p->buf, bytes, root))) return st;
  p->stats.bcast_bytes += bytes + (int64_t)sizeof h;
  return root == p->share.rank ? TSR_OK : share_unpack(p, &h);
}

tsr_status sched_pipeline_next(sched_pipeline *p, sched_batch *b) {
  if (!p->in_flight) return err_set(TSR_EINVAL, "sched_pipeline: no batch left (step %lld)",
                                    (long long)p->next_step);
  sched_result_free(&p->res);
  int64_t s = p->next_step;
  int here = !p->shared || sched_planner_of(&p->share, s) == p->share.rank;
  double t0 = time_now();
  tsr_status st = p->shared ? share_result(p, s) : sched_async_wait(&p->pending, &p->res);
  p->stats.wait_s += time_now() - t0;
  p->in_flight = 0;
  if (st) return st;
  p->stats.batches++;
  if (here) {
    p->stats.planned_here++;
    p->stats.plan_cpu_s += 1e-3 * p->res.plan_cpu_ms;
  }
  p->cur = 1 - p->cur;
  p->next_step++;
  *b = (sched_batch){.step = s, .ids = p->ids[p->cur], .tokens = p->tokens[p->cur],
                     .n = p->n[p->cur], .res = p->res};
  if (p->next_step < p->end) st = start(p, p->next_step, 1 - p->cur);
  return st;
}

void sched_pipeline_get_stats(const sched_pipeline *p, sched_pipeline_stats *st) {
  *st = p->stats;
}

void sched_pipeline_close(sched_pipeline **pp) {
  sched_pipeline *p = *pp;
  if (!p) return;
  if (p->pending) {  // an error or an early stop left a planning in flight
    sched_result drop;
    sched_async_wait(&p->pending, &drop);
    sched_result_free(&drop);
  }
  sched_result_free(&p->res);
  for (int i = 0; i < 2; i++) {
    free(p->ids[i]);
    free(p->tokens[i]);
  }
  free(p->buf);
  free(p);
  *pp = NULL;
}
