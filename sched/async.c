// sched/async.c — sched_plan_batch on a background thread.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched.h"

struct sched_async {
  pthread_t thread;
  sched_config cfg;
  int64_t *tokens;  // (n) private copy
  int n;
  sched_result result;
  tsr_status status;
  char msg[1024];   // the worker's error message (err_msg is thread-local)
};

static void *sched_async_main(void *arg) {
  sched_async *h = arg;
  h->status = sched_plan_batch(&h->cfg, h->tokens, h->n, &h->result);
  if (h->status) snprintf(h->msg, sizeof h->msg, "%s", err_msg());
  return NULL;
}

tsr_status sched_async_start(sched_async **out, const sched_config *cfg, const int64_t *tokens,
                             int n) {
  *out = NULL;
  sched_async *h = calloc(1, sizeof *h);
  if (!h) return err_set(TSR_ENOMEM, "sched_async: out of memory");
  h->cfg = *cfg;
  h->n = n;
  h->tokens = malloc(((size_t)(n > 0 ? n : 0) + 1) * sizeof *h->tokens);
  if (!h->tokens) {
    free(h);
    return err_set(TSR_ENOMEM, "sched_async: out of memory for %d clips", n);
  }
  if (n > 0) memcpy(h->tokens, tokens, (size_t)n * sizeof *tokens);
  int rc = pthread_create(&h->thread, NULL, sched_async_main, h);
  if (rc) {
    free(h->tokens);
    free(h);
    return err_set(TSR_ENOMEM, "sched_async: cannot start a planner thread (%s)", strerror(rc));
  }
  *out = h;
  return TSR_OK;
}

tsr_status sched_async_wait(sched_async **hp, sched_result *out) {
  sched_async *h = *hp;
  if (!h) return err_set(TSR_EINVAL, "sched_async_wait: no planning in flight");
  pthread_join(h->thread, NULL);
  tsr_status st = h->status;
  *out = h->result;
  if (st) err_set(st, "%s", h->msg);
  free(h->tokens);
  free(h);
  *hp = NULL;
  return st;
}
