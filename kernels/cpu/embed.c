// kernels/cpu/embed.c — sinusoidal timestep embedding and label embedding rows.
#include <math.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/cpu/cpu.h"

// out: (n, dim), t: (n)
tsr_status kcpu_timestep_embedding(kb_t *kb, float *out, const float *t, int n, int dim,
                                   float max_period) {
  tsr_status st = kernels_check_timestep_embedding(out, t, n, dim, max_period);
  if (st || n == 0 || dim == 0) return st;
  int half = dim / 2;
  for (int i = 0; i < n; i++) {
    float *o = out + (size_t)i * dim;
    for (int j = 0; j < half; j++) {
      double arg = (double)t[i] * exp(-log((double)max_period) * j / half);
      o[j] = (float)cos(arg);
      o[half + j] = (float)sin(arg);
    }
    if (dim % 2) o[dim - 1] = 0.0f;
  }
  return TSR_OK;
}

static tsr_status check_ids(const char *op, const int32_t *ids, int n, int V) {
  for (int i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= V)
      return err_set(TSR_EINVAL, "%s: ids[%d] = %d is outside the table of %d rows", op, i, ids[i], V);
  return TSR_OK;
}

// out: (n, D), table: (V, D), ids: (n)
tsr_status kcpu_embedding_forward(kb_t *kb, float *out, const float *table, const int32_t *ids,
                                  int n, int V, int D) {
  tsr_status st = kernels_check_embedding_forward(out, table, ids, n, V, D);
  if (st || n == 0) return st;
  st = check_ids("embedding_forward", ids, n, V);
  if (st) return st;
  for (int i = 0; i < n; i++)
    memcpy(out + (size_t)i * D, table + (size_t)ids[i] * D, (size_t)D * sizeof(float));
  return TSR_OK;
}

// dtable: (V, D) accumulated, dout: (n, D), ids: (n)
tsr_status kcpu_embedding_backward(kb_t *kb, float *dtable, const float *dout, const int32_t *ids,
                                   int n, int V, int D) {
  tsr_status st = kernels_check_embedding_backward(dtable, dout, ids, n, V, D);
  if (st || n == 0 || !dtable) return st;
  st = check_ids("embedding_backward", ids, n, V);
  if (st) return st;
  for (int i = 0; i < n; i++) {
    float *d = dtable + (size_t)ids[i] * D;
    const float *g = dout + (size_t)i * D;
    for (int j = 0; j < D; j++) d[j] += g[j];
  }
  return TSR_OK;
}
