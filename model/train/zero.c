// model/train/zero.c — the shard layout of ZeRO and its collectives (model/train/zero.h).
#include "model/train/zero.h"

#include <stdlib.h>
#include <string.h>


void zero_layout_free(zero_layout *z) {
  free(z->lo), free(z->len), free(z->at);
  memset(z, 0, sizeof *z);
}

tsr_status zero_layout_make(zero_layout *z, dit_model *m, int stage, int world, int rank) {
  memset(z, 0, sizeof *z);
  int nb = dit_num_buckets(m);
  if (world < 1 || rank < 0 || rank >= world || nb < 1)
    return err_set(TSR_EINVAL, "train.zero: rank %d of %d ranks, %d gradient buckets", rank,
                   world, nb);
  *z = (zero_layout){.stage = stage, .world = world, .rank = rank,
                     .n = (int64_t)dit_num_params(m), .n_buckets = nb};
  z->shard = z->n / world;
  z->lo = calloc((size_t)nb, sizeof *z->lo);
  z->len = calloc((size_t)nb, sizeof *z->len);
  z->at = calloc((size_t)nb, sizeof *z->at);
  if (!z->lo || !z->len || !z->at) {
    zero_layout_free(z);
    return err_set(TSR_ENOMEM, "train.zero: no memory");
  }
  for (int b = 0; b < nb; b++) {
    dit_bucket k = dit_get_bucket(m, b);
    if (k.numel % (16 * (size_t)world) || k.offset % (16 * (size_t)world)) {
      zero_layout_free(z);
      return err_set(TSR_EINVAL, "train.zero: gradient bucket %d ([%zu, +%zu)) is not a multiple "
                     "of 16 x %d floats: the model was not made with shard_ranks = %d", b,
                     k.offset, k.numel, world, world);
    }
    z->len[b] = (int64_t)k.numel / world;
    z->lo[b] = (int64_t)k.offset + rank * z->len[b];
    z->at[b] = (int64_t)k.offset / world;
  }
  return TSR_OK;
}

tsr_status zero_layout_flat(zero_layout *z, int64_t n, int stage, int world, int rank) {
  memset(z, 0, sizeof *z);
  if (world < 1 || rank < 0 || rank >= world || n < 0 || n % (16 * (int64_t)world))
    return err_set(TSR_EINVAL, "train.zero: a buffer of %lld floats on rank %d of %d: not a "
                   "multiple of 16 x %d (made without shard_ranks = %d)", (long long)n, rank,
                   world, world, world);
  *z = (zero_layout){.stage = stage, .world = world, .rank = rank, .n = n, .n_buckets = 1,
                     .shard = n / world};
  z->lo = malloc(sizeof *z->lo), z->len = malloc(sizeof *z->len), z->at = malloc(sizeof *z->at);
  if (!z->lo || !z->len || !z->at) {
    zero_layout_free(z);
    return err_set(TSR_ENOMEM, "train.zero: no memory");
  }
  z->len[0] = z->shard, z->lo[0] = rank * z->shard, z->at[0] = 0;
  return TSR_OK;
}

size_t zero_largest_bucket(const zero_layout *z) {
  int64_t most = 0;
  for (int b = 0; b < z->n_buckets; b++)
    if (z->len[b] > most) most = z->len[b];
  return (size_t)(most * z->world);
}

tsr_status zero_segments(const zero_layout *z, const dit_model *m,
                         int (*decays)(const dit_tensor *t), kernels_param_segment **segs,
                         int *n_segs) {
  return zero_segments_of(z, m, dit_num_tensors(m), dit_tensor_info, decays, segs, n_segs);
}

tsr_status zero_segments_of(const zero_layout *z, const dit_model *m, int nt,
                            const dit_tensor *(*info)(const dit_model *m, int i),
                            int (*decays)(const dit_tensor *t), kernels_param_segment **segs,
                            int *n_segs) {
  int cap = nt + z->n_buckets, n = 0;
  kernels_param_segment *h = calloc((size_t)cap, sizeof *h);
  if (!h) return err_set(TSR_ENOMEM, "train.zero: no memory for the AdamW segments");
  // a tensor lies in one bucket, so it meets this rank's slices at most once
  for (int i = 0; i < nt; i++) {
    const dit_tensor *t = info(m, i);
    int64_t a = (int64_t)t->offset, e = a + (int64_t)t->numel;
    for (int b = 0; b < z->n_buckets && n < cap; b++) {
      int64_t end = z->lo[b] + z->len[b];
      int64_t lo = a > z->lo[b] ? a : z->lo[b], hi = e < end ? e : end;
      if (hi > lo)
        h[n++] = (kernels_param_segment){z->at[b] + (lo - z->lo[b]), hi - lo, decays(t), 0};
    }
  }
  *segs = h;
  *n_segs = n;
  return TSR_OK;
}

tsr_status zero_take(const zero_layout *z, const kernels_backend *kb, float *shard,
                     const float *full) {
  tsr_status st = TSR_OK;
  for (int b = 0; b < z->n_buckets && !st; b++)
    st = kb->copy(kb, shard + z->at[b], full + z->lo[b], (size_t)z->len[b] * sizeof(float));
  return st;
}

tsr_status zero_gather(const zero_layout *z, const comm_backend *cb, float *full,
                       const float *shard) {
  comm_group *world = comm_group_get(z->world);
  if (!world) return err_set(TSR_EINVAL, "train.zero: the group set is not initialised");
  tsr_status st = TSR_OK;
  for (int b = 0; b < z->n_buckets && !st; b++)
    st = cb->allgather(cb, world, shard + z->at[b], full + (z->lo[b] - z->rank * z->len[b]),
                       z->len[b] * (int64_t)sizeof(float));
  return st ? err_wrap(st, "train.zero: all-gather of the weights: ") : TSR_OK;
}

tsr_status zero_gather_bucket(const zero_layout *z, const comm_backend *cb, int b, float *dst,
                              const float *shard) {
  comm_group *world = comm_group_get(z->world);
  if (!world) return err_set(TSR_EINVAL, "train.zero: the group set is not initialised");
  tsr_status st = cb->allgather(cb, world, shard + z->at[b], dst, z->len[b] * (int64_t)sizeof(float));
  return st ? err_wrap(st, "train.zero: all-gather of bucket %d: ", b) : TSR_OK;
}

tsr_status zero_sumsq(const zero_layout *z, const kernels_backend *kb, const float *shard,
                      double *out) {
  tsr_status st = kb->sumsq(kb, out, shard, (size_t)z->shard);
  if (!st && z->world > 1) st = comm_allreduce_sum_f64(out, 1);
  return st;
}
