// sched/pipeline.c — draw batch s+1 and plan it in the background while batch s runs
// (sched/sched.h). Two batch buffers: the one handed out and the one being planned.
#include <stdlib.h>

#include "sched/sched.h"

struct sched_pipeline {
  sched_config cfg;
  int64_t max_batch, next_step, end;  // next_step: the batch in flight (or end)
  sched_draw_fn draw;
  void *ctx;
  int64_t *ids[2], *tokens[2], n[2];   // [cur]: handed out; [1 - cur]: in flight
  int cur;
  sched_async *pending;
  sched_result res;                    // the plan handed out last
};

// Draws batch s into buffer i and starts its plan.
static tsr_status start(sched_pipeline *p, int64_t s, int i) {
  p->n[i] = 0;
  tsr_status st = p->draw(p->ctx, s, p->ids[i], p->tokens[i], &p->n[i]);
  if (!st && (p->n[i] < 0 || p->n[i] > p->max_batch))
    st = err_set(TSR_EINVAL, "batch %lld has %lld clips; at most %lld", (long long)s,
                 (long long)p->n[i], (long long)p->max_batch);
  if (!st) st = sched_async_start(&p->pending, &p->cfg, p->tokens[i], (int)p->n[i]);
  return st;
}

tsr_status sched_pipeline_open(sched_pipeline **out, const sched_config *cfg, int64_t max_batch,
                               int64_t first, int64_t end, sched_draw_fn draw, void *ctx) {
  *out = NULL;
  if (max_batch < 1 || max_batch > SCHED_MAX_BATCH || !draw)
    return err_set(TSR_EINVAL, "sched_pipeline: batches of %lld clips", (long long)max_batch);
  sched_pipeline *p = calloc(1, sizeof *p);
  if (!p) return err_set(TSR_ENOMEM, "sched_pipeline: out of memory");
  *p = (sched_pipeline){.cfg = *cfg, .max_batch = max_batch, .next_step = first, .end = end,
                        .draw = draw, .ctx = ctx};
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

tsr_status sched_pipeline_next(sched_pipeline *p, sched_batch *b) {
  if (!p->pending) return err_set(TSR_EINVAL, "sched_pipeline: no batch left (step %lld)",
                                  (long long)p->next_step);
  sched_result_free(&p->res);
  tsr_status st = sched_async_wait(&p->pending, &p->res);
  if (st) return st;
  p->cur = 1 - p->cur;
  int64_t s = p->next_step++;
  *b = (sched_batch){.step = s, .ids = p->ids[p->cur], .tokens = p->tokens[p->cur],
                     .n = p->n[p->cur], .res = p->res};
  if (p->next_step < p->end) st = start(p, p->next_step, 1 - p->cur);
  return st;
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
  free(p);
  *pp = NULL;
}
