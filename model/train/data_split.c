// model/train/data_split.c — held-out validation clips and length buckets (model/train/data.h).
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "model/train/data.h"
#include "model/train/mix.h"

const char *const data_bucket_names[DATA_BUCKETS] = {"short", "medium", "long"};

typedef struct {
  int64_t pos, tokens, id;
  uint64_t hash;
} split_row;

static int by_length(const void *a, const void *b) {
  const split_row *x = a, *y = b;
  if (x->tokens != y->tokens) return x->tokens < y->tokens ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int by_hash(const void *a, const void *b) {
  const split_row *x = a, *y = b;
  if (x->hash != y->hash) return x->hash < y->hash ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

void data_split_free(data_split *s) {
  free(s->train);
  free(s->val);
  free(s->bucket);
  memset(s, 0, sizeof *s);
}

static tsr_status split_mix(const data_store *d, int64_t n_val, data_split *out);

tsr_status data_split_make(const data_store *d, int64_t n_val, data_split *out) {
  memset(out, 0, sizeof *out);
  if (data_num_parts(d)) return split_mix(d, n_val, out);
  int64_t n = data_num_clips(d);
  if (n_val < 0 || n_val >= n)
    return err_set(TSR_EINVAL, "train.val_clips = %lld holds out %s of the %lld clips of store "
                   "%s: keep at least one to train on (lower train.val_clips, or 0 for no "
                   "validation)", (long long)n_val, n_val >= n ? "all" : "a negative number",
                   (long long)n, data_dir(d));
  split_row *rows = malloc((size_t)n * sizeof *rows);
  uint8_t *held = calloc((size_t)n, 1);
  out->train = malloc((size_t)n * sizeof *out->train);
  out->val = malloc((size_t)(n_val ? n_val : 1) * sizeof *out->val);
  out->bucket = malloc((size_t)n);
  if (!rows || !held || !out->train || !out->val || !out->bucket) {
    free(rows);
    free(held);
    data_split_free(out);
    return err_set(TSR_ENOMEM, "validation split: out of memory for %lld clips", (long long)n);
  }
  for (int64_t i = 0; i < n; i++) {
    const data_clip *c = data_clip_at(d, i);
    rows[i] = (split_row){.pos = i, .tokens = c->tokens, .id = c->id,
                          .hash = hash_fnv1a(HASH_FNV1A_INIT, &c->id, sizeof c->id)};
  }
  qsort(rows, (size_t)n, sizeof *rows, by_length);
  int64_t start[DATA_BUCKETS + 1];  // bucket b is rows [start[b], start[b + 1])
  for (int b = 0; b <= DATA_BUCKETS; b++) start[b] = b == DATA_BUCKETS ? n : n * b / DATA_BUCKETS;
  for (int b = 0; b < DATA_BUCKETS; b++) {
    out->bucket_tokens[b][0] = start[b] < start[b + 1] ? rows[start[b]].tokens : 0;
    out->bucket_tokens[b][1] = start[b] < start[b + 1] ? rows[start[b + 1] - 1].tokens : 0;
    for (int64_t r = start[b]; r < start[b + 1]; r++) out->bucket[rows[r].pos] = (int8_t)b;
    qsort(rows + start[b], (size_t)(start[b + 1] - start[b]), sizeof *rows, by_hash);
  }
  // round robin over the buckets, each in hash order
  int64_t next[DATA_BUCKETS];
  for (int b = 0; b < DATA_BUCKETS; b++) next[b] = start[b];
  for (int64_t k = 0; k < n_val;) {
    for (int b = 0; b < DATA_BUCKETS && k < n_val; b++) {
      if (next[b] == start[b + 1]) continue;
      held[rows[next[b]++].pos] = 1;
      out->bucket_val[b]++;
      k++;
    }
  }
  // held-out clips listed by bucket, then table position (so plans are reproducible)
  out->n_val = 0;
  for (int b = 0; b < DATA_BUCKETS; b++)
    for (int64_t i = 0; i < n; i++)
      if (held[i] && out->bucket[i] == b) out->val[out->n_val++] = i;
  for (int64_t i = 0; i < n; i++)
    if (!held[i]) out->train[out->n_train++] = i;
  free(rows);
  free(held);
  return TSR_OK;
}

// A mix: each store split alone (its share of n_val, mix_val_counts), the positions moved to
// the mix's table; held-out clips by bucket (a clip's bucket is its own store's), then
// table position; the buckets' token ranges over every store's.
static tsr_status split_mix(const data_store *d, int64_t n_val, data_split *out) {
  const mix_spec *m = data_mix(d);
  int64_t n = data_num_clips(d), clips[MIX_MAX_STORES], val[MIX_MAX_STORES];
  if (n_val < 0 || n_val >= n)
    return err_set(TSR_EINVAL, "train.val_clips = %lld holds out %s of the %lld clips of mix "
                   "%s: keep at least one to train on (lower train.val_clips, or 0 for no "
                   "validation)", (long long)n_val, n_val >= n ? "all" : "a negative number",
                   (long long)n, data_dir(d));
  for (int p = 0; p < m->n; p++) clips[p] = data_num_clips(data_part(d, p));
  tsr_status st = mix_val_counts(m, clips, n_val, val);
  if (st) return st;
  out->train = malloc((size_t)n * sizeof *out->train);
  out->val = malloc((size_t)(n_val ? n_val : 1) * sizeof *out->val);
  out->bucket = malloc((size_t)n);
  if (!out->train || !out->val || !out->bucket) {
    data_split_free(out);
    return err_set(TSR_ENOMEM, "validation split: out of memory for %lld clips", (long long)n);
  }
  int have[DATA_BUCKETS] = {0};
  for (int p = 0; p < m->n && !st; p++) {
    data_split one;
    int64_t at = data_part_start(d, p);
    if ((st = data_split_make(data_part(d, p), val[p], &one))) {
      st = err_wrap(st, "mix %s, store '%s': ", data_dir(d), m->store[p].name);
      break;
    }
    for (int64_t i = 0; i < one.n_train; i++) out->train[out->n_train++] = at + one.train[i];
    memcpy(out->bucket + at, one.bucket, (size_t)clips[p]);
    for (int b = 0; b < DATA_BUCKETS; b++) {
      out->bucket_val[b] += one.bucket_val[b];
      if (!one.bucket_tokens[b][1]) continue;  // an empty bucket (a store of < 3 clips)
      if (!have[b] || one.bucket_tokens[b][0] < out->bucket_tokens[b][0])
        out->bucket_tokens[b][0] = one.bucket_tokens[b][0];
      if (!have[b] || one.bucket_tokens[b][1] > out->bucket_tokens[b][1])
        out->bucket_tokens[b][1] = one.bucket_tokens[b][1];
      have[b] = 1;
    }
    for (int64_t i = 0; i < one.n_val; i++) out->val[out->n_val++] = at + one.val[i];
    data_split_free(&one);
  }
  if (st) {
    data_split_free(out);
    return st;
  }
  // by bucket, then table position: a stable pass per bucket over the stores' lists
  int64_t *by = malloc((size_t)(out->n_val ? out->n_val : 1) * sizeof *by), k = 0;
  if (!by) {
    data_split_free(out);
    return err_set(TSR_ENOMEM, "validation split: out of memory");
  }
  for (int b = 0; b < DATA_BUCKETS; b++)
    for (int64_t i = 0; i < out->n_val; i++)
      if (out->bucket[out->val[i]] == b) by[k++] = out->val[i];
  memcpy(out->val, by, (size_t)out->n_val * sizeof *by);
  free(by);
  return TSR_OK;
}
