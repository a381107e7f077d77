// sched/cost.c — the reference cost model and its key = value file loader (inih).
#include "sched/cost.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const cost_key_names[COST_NKEYS] = {"a",        "b",   "kv",  "bw_intra",
                                                "bw_inter", "lat", "ovh", "allreduce"};

static double *cost_field(cost_model *cm, int i) {
  double *f[COST_NKEYS] = {&cm->a,        &cm->b,   &cm->kv,  &cm->bw_intra,
                           &cm->bw_inter, &cm->lat, &cm->ovh, &cm->allreduce};
  return f[i];
}

double cost_model_get(const cost_model *cm, int i) { return *cost_field((cost_model *)cm, i); }

double cost_group_time(const cost_model *cm, int gpus_per_node, int k, int m, double s1,
                       double s2) {
  if (m == 0) return 0.0;
  double kk = (double)k;
  double bw = k <= gpus_per_node ? cm->bw_intra : cm->bw_inter;
  double exposed = cm->kv * s1 / kk / bw + cm->lat - cm->b * s2 / (kk * kk);
  if (exposed < 0) exposed = 0;
  return (cm->a * s1 + cm->b * s2) / kk + (kk - 1) * exposed + cm->ovh;
}

double cost_clip_time(const cost_model *cm, int gpus_per_node, int k, int64_t L) {
  double l = (double)L;
  return cost_group_time(cm, gpus_per_node, k, 1, l, l * l);
}

int cost_min_cp(const sched_cluster *cl, int64_t L) {
  for (int k = 1; k <= cl->ranks; k *= 2)
    if (cost_chunk_tokens(L, k) <= cl->mem_tokens) return k;
  return 0;
}

static tsr_status cost_value_check(const char *where, const char *key, double v) {
  int is_bw = !strcmp(key, "bw_intra") || !strcmp(key, "bw_inter");
  if (!isfinite(v) || v < 0 || (is_bw && v <= 0))
    return err_set(TSR_EFORMAT, "%s: key '%s' = %g must be %s", where, key, v,
                   is_bw ? "a bandwidth > 0 (bytes/s)" : "finite and >= 0");
  return TSR_OK;
}

tsr_status cost_model_check(const cost_model *cm) {
  for (int i = 0; i < COST_NKEYS; i++) {
    tsr_status st = cost_value_check("cost model", cost_key_names[i], cost_model_get(cm, i));
    if (st) return st;
  }
  return TSR_OK;
}

tsr_status sched_cluster_check(const sched_cluster *cl) {
  if (cl->ranks < 1 || (cl->ranks & (cl->ranks - 1)))
    return err_set(TSR_EINVAL, "ranks = %d: the number of ranks must be a power of two >= 1",
                   cl->ranks);
  if (cl->gpus_per_node < 1)
    return err_set(TSR_EINVAL, "gpus per node = %d: must be >= 1", cl->gpus_per_node);
  if (cl->mem_tokens < 1)
    return err_set(TSR_EINVAL, "mem tokens = %lld: must be >= 1", (long long)cl->mem_tokens);
  return TSR_OK;
}

typedef struct {
  const char *path;
  cost_model *cm;
  int seen[COST_NKEYS];
  tsr_status st;  // first error, with its message already set
} cost_parse;

static int cost_handler(void *user, const char *section, const char *name, const char *value) {
  cost_parse *p = user;
  if (p->st) return 0;
  int i = 0;
  while (i < COST_NKEYS && strcmp(name, cost_key_names[i])) i++;
  if (i == COST_NKEYS) {
    p->st = err_set(TSR_EFORMAT,
                    "%s: unknown key '%s' (keys: a, b, kv, bw_intra, bw_inter, lat, ovh, "
                    "allreduce)",
                    p->path, name);
    return 0;
  }
  if (p->seen[i]) {
    p->st = err_set(TSR_EFORMAT, "%s: key '%s' given twice", p->path, name);
    return 0;
  }
  char *end;
  errno = 0;
  double v = strtod(value, &end);
  while (*end == ' ' || *end == '\t') end++;
  if (end == value || *end || errno) {
    p->st = err_set(TSR_EFORMAT, "%s: key '%s': '%s' is not a number", p->path, name, value);
    return 0;
  }
  tsr_status st = cost_value_check(p->path, name, v);
  if (st) {
    p->st = st;
    return 0;
  }
  *cost_field(p->cm, i) = v;
  p->seen[i] = 1;
  return 1;
}

tsr_status cost_model_load(const char *path, cost_model *out) {
  cost_model cm = {0};
  cost_parse p = {.path = path, .cm = &cm};
  int rc = ini_parse(path, cost_handler, &p);
  if (p.st) return p.st;
  if (rc == -1)
    return err_set(TSR_EIO, "cost file %s: cannot open (%s); presets are in configs/cost/",
                   path, strerror(errno));
  if (rc == -2) return err_set(TSR_ENOMEM, "cost file %s: out of memory while parsing", path);
  if (rc > 0)
    return err_set(TSR_EFORMAT, "%s:%d: not a 'key = value' line", path, rc);
  for (int i = 0; i < COST_NKEYS; i++)
    if (!p.seen[i])
      return err_set(TSR_EFORMAT, "%s: missing key '%s' (every key of docs/plan.md is required)",
                     path, cost_key_names[i]);
  *out = cm;
  return TSR_OK;
}
