// model/train/data_split.c — held-out validation clips and length buckets (model/train/data.h).
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "model/train/data.h"

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

tsr_status data_split_make(const data_store *d, int64_t n_val, data_split *out) {
  memset(out, 0, sizeof *out);
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
