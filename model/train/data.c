// model/train/data.c — clip table, labels and shard readers of a token store (model/train/data.h).
#include "model/train/data.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/rng.h"
#include "model/train/mix.h"
#include "store/shard.h"
#include "store/lock.h"
#include "store/caption_encoder.h"
#include "store/store.h"

struct data_store {
  char dir[PATH_MAX];
  store_settings settings;
  data_clip *clips;
  int64_t n, cap;
  char **shards;             // (n_shards) paths relative to the store
  shard_reader **readers;    // (n_shards) opened on first use
  int32_t n_shards, cap_shards;
  char **labels;             // (n_labels) sorted
  int n_labels, cap_labels;
  char **clip_label;         // (n) label string of each clip while loading, else NULL
  int64_t max_tokens;
  uint8_t *verified;         // (n) 1: payload hashed and found good by this process
  uint8_t *caption_verified; // (n) 1: caption embedding hashed and found good
  int64_t n_captions;        // clips with a caption
  int caption_dim;           // widest caption (all must be the model's text_dim)
  int caption_max_tokens;    // longest caption
  store_lock *reader;        // the store's reader lock, held until the shards are unmapped
  char caption_encoder[CAPTION_ENCODER_MAX_BYTES];  // the store's record ("" unknown)
  int skip_bad;              // data_open_with: unreadable clips are marked, not fatal
  char **shard_error;        // (n_shards) skip_bad: why the shard could not be opened
  uint8_t *unusable;         // (n) skip_bad: 1: the clip cannot be read (see clip_unusable)
  int64_t n_unusable;
  // a mix (model/train/mix.h): its stores, opened alone; the fields above hold the joined
  // clip table and labels, and no shard of its own
  mix_spec *mix;
  data_store **parts;        // (n_parts)
  int n_parts;
  int64_t *part_start;       // (n_parts + 1) first table position of each store's clips
};

static int grow(void **p, int64_t *cap, int64_t need, size_t elem) {
  if (need <= *cap) return 0;
  int64_t c = *cap ? *cap * 2 : 64;
  while (c < need) c *= 2;
  void *q = realloc(*p, (size_t)c * elem);
  if (!q) return 1;
  *p = q;
  *cap = c;
  return 0;
}

static int32_t shard_slot(data_store *d, const char *rel) {
  for (int32_t i = d->n_shards - 1; i >= 0; i--)  // clips of one shard are mostly adjacent
    if (!strcmp(d->shards[i], rel)) return i;
  int64_t cap = d->cap_shards;
  if (grow((void **)&d->shards, &cap, d->n_shards + 1, sizeof *d->shards)) return -1;
  d->cap_shards = (int32_t)cap;
  if (!(d->shards[d->n_shards] = strdup(rel))) return -1;
  return d->n_shards++;
}

typedef struct {
  data_store *d;
  tsr_status st;
} load_ctx;

static int load_clip(const store_clip_row *row, void *vctx) {
  load_ctx *x = vctx;
  data_store *d = x->d;
  const store_clip *c = &row->c;
  // Rows are untrusted (store/clip.h): sizes checked in 64-bit, the shard path kept inside the
  // store; open_shard joins the checked path.
  char shard_path[PATH_MAX];
  tsr_status bad = store_clip_check(&d->settings, c);
  if (!bad) bad = store_shard_path(d->dir, c->shard, shard_path, sizeof shard_path);
  if (bad) {
    x->st = err_wrap(TSR_EFORMAT, "store %s: clip %lld (shard '%.64s', offset %lld): ", d->dir,
                     (long long)row->id, c->shard ? c->shard : "", (long long)c->offset);
    return 1;
  }
  if (grow((void **)&d->clips, &d->cap, d->n + 1, sizeof *d->clips)) {
    x->st = err_set(TSR_ENOMEM, "store %s: out of memory reading the clip table", d->dir);
    return 1;
  }
  char **cl = realloc(d->clip_label, (size_t)d->cap * sizeof *cl);
  int32_t sh = shard_slot(d, c->shard ? c->shard : "");
  if (!cl || sh < 0) {
    if (cl) d->clip_label = cl;
    x->st = err_set(TSR_ENOMEM, "store %s: out of memory reading the clip table", d->dir);
    return 1;
  }
  d->clip_label = cl;
  d->clip_label[d->n] = (c->label && c->label[0]) ? strdup(c->label) : NULL;
  d->clips[d->n] = (data_clip){.id = row->id, .T = c->T, .H = c->H, .W = c->W,
                               .tokens = c->tokens, .shard = sh, .offset = c->offset,
                               .bytes = c->bytes, .checksum = c->checksum, .label = -1,
                               .caption_offset = c->caption_offset,
                               .caption_tokens = c->caption_tokens,
                               .caption_dim = c->caption_dim,
                               .caption_checksum = c->caption_checksum};
  if (c->tokens > d->max_tokens) d->max_tokens = c->tokens;
  if (c->caption_offset) {
    d->n_captions++;
    if (c->caption_dim > d->caption_dim) d->caption_dim = c->caption_dim;
    if (c->caption_tokens > d->caption_max_tokens) d->caption_max_tokens = c->caption_tokens;
  }
  d->n++;
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

// Sorted distinct labels, then every clip's class id by binary search.
static tsr_status build_labels(data_store *d) {
  char **all = malloc((size_t)(d->n ? d->n : 1) * sizeof *all);
  if (!all) return err_set(TSR_ENOMEM, "store %s: out of memory (labels)", d->dir);
  int64_t m = 0;
  for (int64_t i = 0; i < d->n; i++)
    if (d->clip_label[i]) all[m++] = d->clip_label[i];
  qsort(all, (size_t)m, sizeof *all, cmp_str);
  d->labels = malloc((size_t)(m ? m : 1) * sizeof *d->labels);
  if (!d->labels) {
    free(all);
    return err_set(TSR_ENOMEM, "store %s: out of memory (labels)", d->dir);
  }
  for (int64_t i = 0; i < m; i++)
    if (i == 0 || strcmp(all[i], all[i - 1])) d->labels[d->n_labels++] = strdup(all[i]);
  free(all);
  for (int k = 0; k < d->n_labels; k++)
    if (!d->labels[k]) return err_set(TSR_ENOMEM, "store %s: out of memory (labels)", d->dir);
  for (int64_t i = 0; i < d->n; i++) {
    if (!d->clip_label[i]) continue;
    char **hit = bsearch(&d->clip_label[i], d->labels, (size_t)d->n_labels, sizeof *d->labels,
                         cmp_str);
    d->clips[i].label = (int32_t)(hit - d->labels);
    free(d->clip_label[i]);
    d->clip_label[i] = NULL;
  }
  free(d->clip_label);
  d->clip_label = NULL;
  return TSR_OK;
}

// Opens shard i (header checked against the store's settings). With skip_bad a shard that
// fails is remembered (its clips become unusable) instead of failing the open.
static tsr_status open_shard(data_store *d, int32_t i) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/%s", d->dir, d->shards[i]) >= (int)sizeof path)
    return err_set(TSR_EINVAL, "store %s: shard path too long", d->dir);
  tsr_status st = shard_reader_open(&d->readers[i], path, &d->settings);
  if (st && d->skip_bad && st != TSR_ENOMEM) {
    if (!(d->shard_error[i] = strdup(err_msg())))
      return err_set(TSR_ENOMEM, "out of memory opening store %s", d->dir);
    err_clear();
    return TSR_OK;
  }
  return st ? err_wrap(st, "store %s: ", d->dir) : TSR_OK;
}

// Why the clip at position i cannot be read (data_open_with skip_bad), as an error naming
// the clip, its shard and offset: the same kind of message as a failed checksum, so the
// trainer's skipping reports it alike.
static tsr_status clip_unusable(const data_store *d, int64_t i) {
  const data_clip *c = &d->clips[i];
  if (d->shard_error[c->shard])
    return err_set(TSR_EFORMAT, "clip %lld of store %s (offset %lld) is in a shard that cannot "
                   "be read: %s", (long long)c->id, d->dir, (long long)c->offset,
                   d->shard_error[c->shard]);
  return err_set(TSR_EFORMAT, "store %s: clip %lld lies past the end of shard %s: its block at "
                 "offset %lld (%d header + %lld payload bytes) ends past the shard's %lld bytes "
                 "(shard truncated or index row damaged)", d->dir, (long long)c->id,
                 d->shards[c->shard], (long long)c->offset, SHARD_BLOCK_HEADER_BYTES,
                 (long long)c->bytes, (long long)shard_reader_size(d->readers[c->shard]));
}

// Every clip's block (header + payload) must lie inside its shard file: an index row that
// points past the end (a truncated shard, a damaged row) fails here, at start, not at the
// step that draws the clip. Index numbers and file sizes only: no block is read.
// With skip_bad such a clip (or one of a shard that could not be opened) is marked unusable.
static tsr_status check_bounds(data_store *d) {
  for (int64_t i = 0; i < d->n; i++) {
    const data_clip *c = &d->clips[i];
    int bad = d->shard_error[c->shard] != NULL;
    if (!bad) {
      int64_t size = shard_reader_size(d->readers[c->shard]);
      // offset >= SHARD_HEADER_BYTES and bytes >= 0 (load_clip), so no term below wraps
      bad = c->offset > size - SHARD_BLOCK_HEADER_BYTES ||
            c->bytes > size - c->offset - SHARD_BLOCK_HEADER_BYTES;
    }
    if (!bad) continue;
    if (!d->skip_bad) {
      char why[2048];
      clip_unusable(d, i);
      snprintf(why, sizeof why, "%s", err_msg());
      return err_set(TSR_EFORMAT, "%s; run `tessera index verify %s` to list every bad clip, or "
                     "train without the clips that cannot be read: --skip-bad-clips", why, d->dir);
    }
    d->unusable[i] = 1;
    d->n_unusable++;
  }
  return TSR_OK;
}

tsr_status data_open(data_store **out, const char *dir) { return data_open_with(out, dir, NULL); }

static tsr_status data_open_mix(data_store **out, const char *path, const data_open_opts *o);

tsr_status data_open_with(data_store **out, const char *dir, const data_open_opts *o) {
  *out = NULL;
  if (mix_is_spec(dir)) return data_open_mix(out, dir, o);
  data_store *d = calloc(1, sizeof *d);
  if (!d) return err_set(TSR_ENOMEM, "out of memory opening store %s", dir);
  snprintf(d->dir, sizeof d->dir, "%s", dir);
  d->skip_bad = o && o->skip_bad;
  store_index *ix = NULL;
  tsr_status st = store_open(&ix, dir, 0, NULL);
  // the reader lock before the rows are read: no writer cuts a block they point at
  if (!st) st = store_lock_read(&d->reader, dir);
  if (!st) st = index_settings(ix, &d->settings);
  if (!st) st = index_caption_encoder(ix, d->caption_encoder, sizeof d->caption_encoder);
  if (!st) {
    load_ctx x = {d, TSR_OK};
    st = index_foreach_clip(ix, load_clip, &x);
    if (!st) st = x.st;
  }
  index_close(&ix);
  if (!st && d->n == 0)
    st = err_set(TSR_EINVAL, "store %s has no clips: ingest videos into it first "
                 "(`tessera ingest SRC --out %s`)", dir, dir);
  if (!st) st = build_labels(d);
  if (!st) {
    size_t ns = (size_t)(d->n_shards ? d->n_shards : 1);
    d->readers = calloc(ns, sizeof *d->readers);
    d->shard_error = calloc(ns, sizeof *d->shard_error);
    if (!d->readers || !d->shard_error || !(d->verified = calloc((size_t)d->n, 1)) ||
        !(d->caption_verified = calloc((size_t)d->n, 1)) ||
        !(d->unusable = calloc((size_t)d->n, 1)))
      st = err_set(TSR_ENOMEM, "out of memory opening store %s", dir);
  }
  for (int32_t i = 0; !st && i < d->n_shards; i++) st = open_shard(d, i);  // headers checked now
  if (!st) st = check_bounds(d);
  if (!st && d->n_unusable && comm_rank() == 0) {
    int64_t first = 0;
    while (!d->unusable[first]) first++;
    clip_unusable(d, first);
    log_warn("store %s: %lld of its %lld clips cannot be read and will be skipped "
             "(--skip-bad-clips), the first: %s", dir, (long long)d->n_unusable,
             (long long)d->n, err_msg());
    err_clear();
  }
  if (st) {
    data_close(&d);
    return st;
  }
  *out = d;
  return TSR_OK;
}

// ---- mixes ------------------------------------------------------------------------------

// Store p of the mix must hold the tokens store 0 holds (the model reads one patch, channel
// count and value type); frame rate, size and cut are each store's own.
static tsr_status mix_check_part(const data_store *d, int p) {
  const store_settings *a = &d->parts[0]->settings, *b = &d->parts[p]->settings;
  const mix_store *s0 = &d->mix->store[0], *sp = &d->mix->store[p];
  if (a->pt != b->pt || a->ph != b->ph || a->pw != b->pw)
    return err_set(TSR_EMISMATCH, "mix %s: store '%s' (%s) has patch %dx%dx%d but store '%s' "
                   "(%s) has %dx%dx%d: the stores of a mix must share the patch (re-ingest "
                   "'%s' with --patch %dx%dx%d)", d->dir, sp->name, sp->path, b->pt, b->ph,
                   b->pw, s0->name, s0->path, a->pt, a->ph, a->pw, sp->name, a->pt, a->ph, a->pw);
  if (a->channels != b->channels || a->dtype != b->dtype)
    return err_set(TSR_EMISMATCH, "mix %s: store '%s' (%s) has %d channels of %s but store '%s' "
                   "(%s) has %d of %s: the stores of a mix must hold the same kind of tokens",
                   d->dir, sp->name, sp->path, b->channels, store_dtype_name(b->dtype), s0->name,
                   s0->path, a->channels, store_dtype_name(a->dtype));
  return TSR_OK;
}

// The mix's clip table: every store's clips in store order, ids moved to the store's range,
// labels by name (build_labels numbers the union).
static tsr_status mix_join(data_store *d) {
  int64_t n = 0;
  if (!(d->part_start = malloc((size_t)(d->n_parts + 1) * sizeof *d->part_start)))
    return err_set(TSR_ENOMEM, "out of memory opening mix %s", d->dir);
  for (int p = 0; p < d->n_parts; p++) d->part_start[p] = n, n += d->parts[p]->n;
  d->part_start[d->n_parts] = n;
  d->clips = malloc((size_t)n * sizeof *d->clips);
  d->clip_label = calloc((size_t)n, sizeof *d->clip_label);
  if (!d->clips || !d->clip_label) return err_set(TSR_ENOMEM, "out of memory opening mix %s", d->dir);
  d->n = d->cap = n;
  for (int p = 0; p < d->n_parts; p++) {
    const data_store *s = d->parts[p];
    for (int64_t i = 0; i < s->n; i++) {
      data_clip c = s->clips[i];
      if (c.id < 0 || c.id >= (int64_t)1 << MIX_ID_SHIFT)
        return err_set(TSR_EINVAL, "mix %s: clip %lld of store '%s' (%s) has an id outside "
                       "0..2^%d-1, which a mix cannot key apart from the other stores'", d->dir, (long long)c.id,
                       d->mix->store[p].name, s->dir, MIX_ID_SHIFT);
      c.id |= (int64_t)p << MIX_ID_SHIFT;
      int64_t k = d->part_start[p] + i;
      if (c.label >= 0 && !(d->clip_label[k] = strdup(s->labels[c.label])))
        return err_set(TSR_ENOMEM, "out of memory opening mix %s", d->dir);
      c.label = -1;
      d->clips[k] = c;
      if (c.tokens > d->max_tokens) d->max_tokens = c.tokens;
    }
    d->n_captions += s->n_captions;
    if (s->caption_dim > d->caption_dim) d->caption_dim = s->caption_dim;
    if (s->caption_max_tokens > d->caption_max_tokens) d->caption_max_tokens = s->caption_max_tokens;
    d->n_unusable += s->n_unusable;
  }
  return build_labels(d);
}

static tsr_status data_open_mix(data_store **out, const char *path, const data_open_opts *o) {
  data_store *d = calloc(1, sizeof *d);
  if (!d || !(d->mix = calloc(1, sizeof *d->mix))) {
    free(d);
    return err_set(TSR_ENOMEM, "out of memory opening mix %s", path);
  }
  snprintf(d->dir, sizeof d->dir, "%s", path);
  tsr_status st = mix_read(path, d->mix);
  if (st)  // a store is a folder: a file given for one is read as a mix, and that may be why
    st = err_wrap(st, "%s is a file, so it was read as a dataset mix (DATASET.ini, docs/train.md "
                  "\"Dataset mixes\"): ", path);
  if (!st && !(d->parts = calloc((size_t)d->mix->n, sizeof *d->parts)))
    st = err_set(TSR_ENOMEM, "out of memory opening mix %s", path);
  for (int p = 0; !st && p < d->mix->n; p++) {
    const mix_store *s = &d->mix->store[p];
    if (mix_is_spec(s->path))
      st = err_set(TSR_EINVAL, "mix %s: store '%s' names the file %s: a mix lists store folders, "
                   "not other mixes", path, s->name, s->path);
    else if ((st = data_open_with(&d->parts[p], s->path, o)))
      st = err_wrap(st, "mix %s, store '%s': ", path, s->name);
    else d->n_parts = p + 1;
    if (!st) st = mix_check_part(d, p);
  }
  if (!st) {
    d->settings = d->parts[0]->settings;
    st = mix_join(d);
  }
  if (st) {
    data_close(&d);
    return st;
  }
  *out = d;
  return TSR_OK;
}

int data_num_parts(const data_store *d) { return d->n_parts; }
const data_store *data_part(const data_store *d, int p) { return d->parts[p]; }
int64_t data_part_start(const data_store *d, int p) { return d->part_start[p]; }
const struct mix_spec *data_mix(const data_store *d) { return d->mix; }

// The store of the mix that holds table position i (0 <= i < n).
static int mix_part_of(const data_store *d, int64_t i) {
  int lo = 0, hi = d->n_parts - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (d->part_start[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

void data_close(data_store **pd) {
  data_store *d = *pd;
  if (!d) return;
  for (int p = 0; p < d->n_parts; p++) data_close(&d->parts[p]);
  free(d->parts);
  free(d->part_start);
  if (d->mix) mix_free(d->mix);
  free(d->mix);
  for (int32_t i = 0; i < d->n_shards; i++) {
    if (d->readers) shard_reader_close(&d->readers[i]);
    if (d->shard_error) free(d->shard_error[i]);
    free(d->shards[i]);
  }
  store_lock_release(&d->reader);  // every shard is unmapped now
  if (d->clip_label)
    for (int64_t i = 0; i < d->n; i++) free(d->clip_label[i]);
  for (int k = 0; k < d->n_labels; k++) free(d->labels[k]);
  free(d->clip_label);
  free(d->labels);
  free(d->readers);
  free(d->shards);
  free(d->clips);
  free(d->verified);
  free(d->caption_verified);
  free(d->shard_error);
  free(d->unusable);
  free(d);
  *pd = NULL;
}

const char *data_dir(const data_store *d) { return d->dir; }
const store_settings *data_settings(const data_store *d) { return &d->settings; }
int64_t data_num_clips(const data_store *d) { return d->n; }
const data_clip *data_clip_at(const data_store *d, int64_t i) { return &d->clips[i]; }
int data_num_labels(const data_store *d) { return d->n_labels; }
const char *data_caption_encoder(const data_store *d) { return d->caption_encoder; }
const char *data_label_name(const data_store *d, int k) { return d->labels[k]; }
int64_t data_max_tokens(const data_store *d) { return d->max_tokens; }

int64_t data_find(const data_store *d, int64_t id) {
  int64_t lo = 0, hi = d->n - 1;  // ids are in increasing order (index_foreach_clip)
  while (lo <= hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (d->clips[mid].id == id) return mid;
    if (d->clips[mid].id < id) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

tsr_status data_clip_tokens(data_store *d, int64_t i, int verify, const uint8_t **tokens) {
  *tokens = NULL;
  if (i < 0 || i >= d->n)
    return err_set(TSR_EINVAL, "store %s: clip position %lld out of range (%lld clips)", d->dir,
                   (long long)i, (long long)d->n);
  if (d->n_parts) {
    int p = mix_part_of(d, i);
    return data_clip_tokens(d->parts[p], i - d->part_start[p], verify, tokens);
  }
  if (d->unusable[i]) return clip_unusable(d, i);
  const data_clip *c = &d->clips[i];
  int hash = verify && !d->verified[i];
  tsr_status st = shard_reader_clip(d->readers[c->shard], c->offset, c->bytes, c->checksum, hash,
                                    tokens);
  // the shard reader's error names the shard and the offset
  if (st) return err_wrap(st, "clip %lld of store %s: ", (long long)c->id, d->dir);
  if (hash) d->verified[i] = 1;
  return TSR_OK;
}

tsr_status data_clip_caption(data_store *d, int64_t i, int verify, const void **emb,
                             int *tokens, store_dtype *dtype) {
  *emb = NULL, *tokens = 0, *dtype = STORE_DTYPE_F32;
  if (i < 0 || i >= d->n)
    return err_set(TSR_EINVAL, "store %s: clip position %lld out of range (%lld clips)", d->dir,
                   (long long)i, (long long)d->n);
  if (d->n_parts) {
    int p = mix_part_of(d, i);
    return data_clip_caption(d->parts[p], i - d->part_start[p], verify, emb, tokens, dtype);
  }
  const data_clip *c = &d->clips[i];
  if (!c->caption_offset) return TSR_OK;
  if (d->unusable[i]) return clip_unusable(d, i);
  store_clip row = {.caption_offset = c->caption_offset, .caption_tokens = c->caption_tokens,
                    .caption_dim = c->caption_dim, .caption_checksum = c->caption_checksum};
  int hash = verify && !d->caption_verified[i];
  shard_caption cap;
  tsr_status st = shard_reader_caption_of(d->readers[c->shard], &row, hash, &cap);
  if (st) return err_wrap(st, "caption of clip %lld of store %s: ", (long long)c->id, d->dir);
  if (hash) d->caption_verified[i] = 1;
  *emb = cap.emb, *tokens = cap.tokens, *dtype = cap.dtype;
  return TSR_OK;
}

tsr_status data_clip_verify(data_store *d, int64_t i) {
  const uint8_t *tok;
  const void *emb;
  int n;
  store_dtype dt;
  tsr_status st = data_clip_tokens(d, i, 1, &tok);
  return st ? st : data_clip_caption(d, i, 1, &emb, &n, &dt);
}

int64_t data_num_unusable(const data_store *d) { return d->n_unusable; }

uint64_t data_fingerprint(const data_store *d) {
  uint64_t h = hash_fnv1a(HASH_FNV1A_INIT, &d->n, sizeof d->n);
  for (int64_t i = 0; i < d->n; i++) {
    const data_clip *c = &d->clips[i];
    int64_t v[9] = {c->id, c->T, c->H, c->W, c->bytes, (int64_t)c->checksum,
                    c->caption_offset != 0, c->caption_tokens * (int64_t)c->caption_dim,
                    (int64_t)c->caption_checksum};
    h = hash_fnv1a(h, v, sizeof v);
    const char *label = c->label >= 0 ? d->labels[c->label] : "";
    h = hash_fnv1a(h, label, strlen(label) + 1);  // the NUL ends it: "a"+"b" != "ab"+""
  }
  // a mix: also what each store draws and the settings it keeps (frame rate, size)
  for (int p = 0; p < d->n_parts; p++) {
    const mix_store *m = &d->mix->store[p];
    const store_settings *st = &d->parts[p]->settings;
    int64_t v[7] = {m->repeat, st->fps_num, st->fps_den, st->short_side, st->vae_t, st->vae_s,
                    d->parts[p]->n};
    h = hash_fnv1a(h, v, sizeof v);
    h = hash_fnv1a(h, &m->weight, sizeof m->weight);
    h = hash_fnv1a(h, m->name, strlen(m->name) + 1);
  }
  return h;
}

void data_clip_line(const data_store *d, int64_t i, char *out, size_t n) {
  const data_clip *c = &d->clips[i];
  int k = snprintf(out, n, "%lld %d %d %d %lld %016llx %016llx ", (long long)c->id, c->T, c->H,
                   c->W, (long long)c->bytes, (unsigned long long)c->checksum,
                   (unsigned long long)c->caption_checksum);
  size_t len = k > 0 && (size_t)k < n ? (size_t)k : n - 1;
  for (const unsigned char *p = (const unsigned char *)(c->label >= 0 ? d->labels[c->label] : "");
       *p && len + 5 < n; p++) {
    if (*p == '\\') len += (size_t)snprintf(out + len, n - len, "\\\\");
    else if (*p == '\t') len += (size_t)snprintf(out + len, n - len, "\\t");
    else if (*p == '\n') len += (size_t)snprintf(out + len, n - len, "\\n");
    else if (*p < 0x20 || *p == 0x7f) len += (size_t)snprintf(out + len, n - len, "\\x%02x", *p);
    else out[len++] = (char)*p;
  }
  out[len] = 0;
}

int64_t data_num_captions(const data_store *d) { return d->n_captions; }
int data_caption_dim(const data_store *d) { return d->caption_dim; }
int data_caption_max_tokens(const data_store *d) { return d->caption_max_tokens; }

double data_caption_mean_tokens(const data_store *d) {
  double sum = 0;
  for (int64_t i = 0; i < d->n; i++) sum += d->clips[i].caption_offset ? d->clips[i].caption_tokens : 0;
  return d->n ? sum / (double)d->n : 0;
}

// ---- sampler ---------------------------------------------------------------------------

void data_epoch_permutation(uint64_t seed, int64_t epoch, int64_t n, int64_t *perm) {
  data_shuffle(seed, epoch, 0, n, perm);
}

void data_shuffle(uint64_t seed, int64_t epoch, uint64_t lane, int64_t n, int64_t *perm) {
  rng_key key = {.seed = seed, .step = (uint64_t)epoch, .clip = lane, .stream = RNG_STREAM_SAMPLER};
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {  // Fisher-Yates; draw i uses counter i
    uint32_t w[4];
    rng_philox(&key, (uint64_t)i, w);
    uint64_t r = ((uint64_t)w[0] << 32 | w[1]) % (uint64_t)(i + 1);  // bias < 2^-30
    int64_t t = perm[i];
    perm[i] = perm[r];
    perm[r] = t;
  }
}

tsr_status data_sampler_init(data_sampler *s, int64_t n, uint64_t seed) {
  *s = (data_sampler){.seed = seed, .n = n};
  if (n < 1) return err_set(TSR_EINVAL, "sampler: no clips to sample");
  if (!(s->perm = malloc((size_t)n * sizeof *s->perm)))
    return err_set(TSR_ENOMEM, "sampler: out of memory for %lld clips", (long long)n);
  data_epoch_permutation(seed, 0, n, s->perm);
  return TSR_OK;
}

void data_sampler_free(data_sampler *s) {
  free(s->perm);
  free(s->part_lo);
  free(s->quota);
  free(s->scratch);
  s->perm = s->part_lo = s->quota = s->scratch = NULL;
}

// One epoch of a mix, a pure function of (seed, epoch): out (sum of quota) entries, store
// s's clips being entries lo[s]..lo[s+1]-1 (lo: (n + 1)). Store s gives quota / m full
// passes over its m clips plus the first quota % m of them in the order of its own lane
// (data_shuffle lane s + 1); the whole list then goes in the order of the plain sampler's
// permutation of its length, so a one-store mix of quota m is the plain sampler.
// scratch: (total + the largest store's m).
static void mix_epoch_order(uint64_t seed, int64_t epoch, int n, const int64_t *lo,
                            const int64_t *quota, int64_t *out, int64_t *scratch) {
  int64_t total = 0;
  for (int s = 0; s < n; s++) total += quota[s];
  int64_t *list = scratch, *part = scratch + total, k = 0;
  for (int s = 0; s < n; s++) {
    int64_t m = lo[s + 1] - lo[s], full = quota[s] / m, rest = quota[s] % m;
    for (int64_t f = 0; f < full; f++)
      for (int64_t i = 0; i < m; i++) list[k++] = lo[s] + i;
    if (rest) {  // a draw of the store's clips without repeats (its own lane of the epoch)
      data_shuffle(seed, epoch, (uint64_t)s + 1, m, part);
      for (int64_t i = 0; i < rest; i++) list[k++] = lo[s] + part[i];
    }
  }
  data_epoch_permutation(seed, epoch, total, out);
  for (int64_t i = 0; i < total; i++) out[i] = list[out[i]];
}

// The order of epoch `epoch` into s->perm: the plain permutation, or the mix's draws.
static void sampler_epoch(data_sampler *s, int64_t epoch) {
  if (s->n_parts)
    mix_epoch_order(s->seed, epoch, s->n_parts, s->part_lo, s->quota, s->perm, s->scratch);
  else
    data_epoch_permutation(s->seed, epoch, s->n, s->perm);
}

tsr_status data_sampler_init_mix(data_sampler *s, int n_parts, const int64_t *lo,
                                 const int64_t *quota, uint64_t seed) {
  *s = (data_sampler){.seed = seed, .n_parts = n_parts};
  int64_t most = 0;
  if (n_parts < 1) return err_set(TSR_EINVAL, "sampler: a mix of no store");
  for (int p = 0; p < n_parts; p++) {
    if (lo[p + 1] - lo[p] < 1 || quota[p] < 1 || quota[p] > INT64_MAX / 4 - s->n)
      return err_set(TSR_EINVAL, "sampler: store %d of the mix: %lld clips, %lld draws an epoch",
                     p, (long long)(lo[p + 1] - lo[p]), (long long)quota[p]);
    if (lo[p + 1] - lo[p] > most) most = lo[p + 1] - lo[p];
    s->n += quota[p];
  }
  s->part_lo = malloc((size_t)(n_parts + 1) * sizeof *s->part_lo);
  s->quota = malloc((size_t)n_parts * sizeof *s->quota);
  s->perm = malloc((size_t)s->n * sizeof *s->perm);
  s->scratch = malloc((size_t)(s->n + most) * sizeof *s->scratch);
  if (!s->part_lo || !s->quota || !s->perm || !s->scratch) {
    data_sampler_free(s);
    return err_set(TSR_ENOMEM, "sampler: out of memory for an epoch of %lld draws", (long long)s->n);
  }
  memcpy(s->part_lo, lo, (size_t)(n_parts + 1) * sizeof *lo);
  memcpy(s->quota, quota, (size_t)n_parts * sizeof *quota);
  sampler_epoch(s, 0);
  return TSR_OK;
}

tsr_status data_sampler_init_split(data_sampler *s, const data_store *d, const data_split *sp,
                                   uint64_t seed) {
  if (!d->n_parts) return data_sampler_init(s, sp->n_train, seed);
  int64_t clips[MIX_MAX_STORES], lo[MIX_MAX_STORES + 1], quota[MIX_MAX_STORES], k = 0;
  // sp->train is ascending and each store's clips are a run of the table: so are its
  // training clips of the training list
  for (int p = 0; p <= d->n_parts; p++) {
    while (k < sp->n_train && sp->train[k] < d->part_start[p]) k++;
    lo[p] = k;
  }
  for (int p = 0; p < d->n_parts; p++)
    if ((clips[p] = lo[p + 1] - lo[p]) < 1)
      return err_set(TSR_EINVAL, "mix %s: store '%s' has no clip left to train on "
                     "(train.val_clips holds out all of its clips): lower train.val_clips",
                     d->dir, d->mix->store[p].name);
  tsr_status st = mix_quotas(d->mix, clips, quota);
  return st ? st : data_sampler_init_mix(s, d->n_parts, lo, quota, seed);
}

tsr_status data_sampler_seek(data_sampler *s, int64_t epoch, int64_t pos) {
  // epochs are counted up one by one (data_sampler_next): one near INT64_MAX would overflow
  if (epoch < 0 || epoch > INT64_MAX / 2 || pos < 0 || pos > s->n)
    return err_set(TSR_EINVAL, "sampler position (epoch %lld, clip %lld) out of range for %lld "
                   "clips", (long long)epoch, (long long)pos, (long long)s->n);
  if (epoch != s->epoch) sampler_epoch(s, epoch);
  s->epoch = epoch;
  s->pos = pos;
  return TSR_OK;
}

tsr_status data_sampler_next(data_sampler *s, int64_t B, int64_t *out, int64_t *count) {
  *count = 0;
  if (B < 1) return err_set(TSR_EINVAL, "sampler: batch size %lld < 1", (long long)B);
  if (s->pos >= s->n) {
    s->epoch++;
    s->pos = 0;
    sampler_epoch(s, s->epoch);
  }
  int64_t k = s->n - s->pos < B ? s->n - s->pos : B;
  memcpy(out, s->perm + s->pos, (size_t)k * sizeof *out);
  s->pos += k;
  *count = k;
  return TSR_OK;
}
