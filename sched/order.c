// sched/order.c — deterministic descending orders.
#include "sched/order.h"

#include <stdlib.h>

typedef struct {
  double key;
  int32_t idx;
} keyed;

static int keyed_cmp(const void *pa, const void *pb) {
  const keyed *a = pa, *b = pb;
  if (a->key != b->key) return a->key > b->key ? -1 : 1;
  return (a->idx > b->idx) - (a->idx < b->idx);
}

tsr_status sched_order_desc(const double *key, int n, int32_t *order) {
  keyed *k = malloc(((size_t)n + 1) * sizeof *k);
  if (!k) return err_set(TSR_ENOMEM, "sched: out of memory sorting %d clips", n);
  for (int i = 0; i < n; i++) k[i] = (keyed){key[i], i};
  qsort(k, (size_t)n, sizeof *k, keyed_cmp);
  for (int i = 0; i < n; i++) order[i] = k[i].idx;
  free(k);
  return TSR_OK;
}
