// model/io/checkpoint.c — training checkpoints in safetensors (model/io/checkpoint.h).
#include "model/io/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/fs.h"
#include "model/io/dit_io.h"
#include "model/lora.h"
#include "core/safetensors.h"

// The four tensor sets of a checkpoint: prefix and where they live in the state.
enum { SET_W, SET_EMA, SET_M, SET_V, NSETS };
static const char *const set_prefix[NSETS] = {"", "ema.", "adam_m.", "adam_v."};
// Metadata keys of each set's XXH3-64 over its flat host buffer (padding floats are 0),
// so flipped bits inside tensor data are caught, not only a damaged header.
static const char *const set_hash_key[NSETS] = {"xxh3_weights", "xxh3_ema", "xxh3_adam_m",
                                                "xxh3_adam_v"};

// The tensors the four sets are over: the model's, or (adapters, a LoRA run's checkpoint) its
// LoRA adapters', the base being frozen and recorded by its checksums only.
static int tab_count(const dit_model *m, int adapters) {
  return adapters ? dit_lora_num_tensors(m) : dit_num_tensors(m);
}
static const dit_tensor *tab_info(const dit_model *m, int adapters, int i) {
  return adapters ? dit_lora_tensor_info(m, i) : dit_tensor_info(m, i);
}
static int tab_find(const dit_model *m, int adapters, const char *name) {
  if (!adapters) return dit_find_tensor(m, name);
  for (int i = 0; i < dit_lora_num_tensors(m); i++)  // a few hundred names at most, once a load
    if (!strcmp(dit_lora_tensor_info(m, i)->name, name)) return i;
  return -1;
}

static float *set_buffer(const ckpt_state *cs, int s) {
  switch (s) {
  case SET_W: return cs->adapters ? dit_lora_params(cs->model)
                    : cs->weights      ? cs->weights : dit_params(cs->model);
  case SET_EMA: return cs->ema;
  case SET_M: return cs->adam_m;
  default: return cs->adam_v;
  }
}

void ckpt_meta_free(ckpt_meta *m) {
  for (int k = 0; k < m->n_labels; k++) free(m->labels[k]);
  free(m->labels);
  memset(m, 0, sizeof *m);
}

// ---- writing ------------------------------------------------------------------------------

static tsr_status meta_i64(st_writer *w, const char *key, int64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%" PRId64, v);
  return st_writer_meta(w, key, buf);
}

static tsr_status add_meta(st_writer *w, const ckpt_state *cs) {
  const store_settings *s = cs->store;
  char buf[128];
  char *ini = config_to_ini(cs->mc, cs->tc);
  json_t *labels = json_array();
  for (int k = 0; labels && k < cs->n_labels; k++)
    json_array_append_new(labels, json_string(cs->labels[k]));
  char *labels_s = labels ? json_dumps(labels, JSON_COMPACT) : NULL;
  json_decref(labels);
  tsr_status st = (!ini || !labels_s) ? err_set(TSR_ENOMEM, "checkpoint: no memory") : TSR_OK;
  if (!st) st = st_writer_meta(w, "format", CKPT_FORMAT);
  if (!st) st = meta_i64(w, "version", CKPT_VERSION);
  if (!st) st = meta_i64(w, "step", cs->step);
  if (!st) st = st_writer_meta(w, "backend", cs->model ? dit_backend(cs->model)->name : "none");
  if (!st) st = st_writer_meta(w, "config", ini);
  if (!st) st = meta_i64(w, "sampler_epoch", cs->sampler_epoch);
  if (!st) st = meta_i64(w, "sampler_pos", cs->sampler_pos);
  snprintf(buf, sizeof buf, "philox4x32-10 seed=%" PRId64, cs->tc->seed);
  if (!st) st = st_writer_meta(w, "rng", buf);
  snprintf(buf, sizeof buf, "%d/%d", s->fps_num, s->fps_den);
  if (!st) st = st_writer_meta(w, "store_fps", buf);
  if (!st) st = meta_i64(w, "store_short_side", s->short_side);
  snprintf(buf, sizeof buf, "%dx%dx%d", s->pt, s->ph, s->pw);
  if (!st) st = st_writer_meta(w, "store_patch", buf);
  if (!st) st = meta_i64(w, "store_channels", s->channels);
  if (!st) st = meta_i64(w, "store_dtype", s->dtype);
  snprintf(buf, sizeof buf, "%.17g", s->max_seconds);
  if (!st) st = st_writer_meta(w, "store_max_seconds", buf);
  if (!st) st = meta_i64(w, "store_vae_t", s->vae_t);
  if (!st) st = meta_i64(w, "store_vae_s", s->vae_s);
  if (!st) st = meta_i64(w, "clips", cs->store_clips);
  if (!st) st = st_writer_meta(w, "labels", labels_s);
  snprintf(buf, sizeof buf, "%016llx", (unsigned long long)cs->store_fingerprint);
  if (!st) st = st_writer_meta(w, "store_fingerprint", buf);
  if (!st && cs->plan_settings) st = st_writer_meta(w, "plan_settings", cs->plan_settings);
  if (!st && cs->caption_encoder && *cs->caption_encoder)
    st = st_writer_meta(w, "caption_encoder", cs->caption_encoder);
  if (!st && cs->sample_due) st = st_writer_meta(w, "sample_due", "1");
  free(ini);
  free(labels_s);
  return st;
}

// Tensor t's values (host) must be finite: the first that is not, named with its set, is
// TSR_EINVAL for a save (a diverged run writes no checkpoint) and TSR_EFORMAT for a load.
static tsr_status check_finite(const dit_tensor *t, const float *host, int set, tsr_status code,
                               const char *path) {
  size_t i = 0;
  while (i < t->numel && isfinite(host[i])) i++;
  if (i == t->numel) return TSR_OK;
  return err_set(code, "checkpoint %s: tensor %s%s has a non-finite value (%g at element %zu)%s",
                 path, set_prefix[set], t->name, host[i], i,
                 code == TSR_EINVAL ? ": not written (the run diverged)" : "");
}

// The zeros after tensor t in the canonical layout (params.c: 64-byte starts), which a set's
// checksum covers: the same for a model padded for ZeRO (shard_ranks) as for any other.
static size_t canon_pad(const dit_tensor *t) { return (t->numel + 15) / 16 * 16 - t->numel; }
static const float zeros16[16];

// A copy of the table the sets are over (the model's or its adapters'), n entries; free it.
static dit_tensor *table_copy(const dit_model *m, int adapters, int *n, size_t *most) {
  *n = tab_count(m, adapters);
  *most = 1;
  dit_tensor *t = malloc((size_t)(*n ? *n : 1) * sizeof *t);
  for (int i = 0; t && i < *n; i++) {
    t[i] = *tab_info(m, adapters, i);
    if (t[i].numel > *most) *most = t[i].numel;
  }
  return t;
}

tsr_status ckpt_base_sums(dit_model *m, uint64_t *tensor_sums, uint64_t *weights_sum) {
  const kernels_backend *kb = dit_backend(m);
  const int nt = dit_num_tensors(m);
  const size_t n = dit_num_params(m);
  if (!dit_params(m)) {  // no whole fp32 masters (dit_create_frozen_base): the load's sums
    const uint64_t *s = dit_weight_sums(m, weights_sum);
    if (!s)
      return err_set(TSR_EINVAL, "the base's checksums: its weights came from no checkpoint load "
                     "and the model keeps no fp32 copy of them to hash");
    if (tensor_sums) memcpy(tensor_sums, s, (size_t)nt * sizeof *tensor_sums);
    return TSR_OK;
  }
  // tensor i's span: its floats and the padding up to the next tensor (the set's hash covers
  // both); copied one at a time, so a large base needs its largest tensor on the host only
  size_t most = 0;
  for (int i = 0; i < nt; i++) {
    size_t end = i + 1 < nt ? dit_tensor_info(m, i + 1)->offset : n;
    if (end - dit_tensor_info(m, i)->offset > most) most = end - dit_tensor_info(m, i)->offset;
  }
  float *host = malloc((most ? most : 1) * sizeof(float));
  XXH3_state_t *h = XXH3_createState();
  tsr_status st = !host || !h || XXH3_64bits_reset(h) != XXH_OK
                      ? err_set(TSR_ENOMEM, "no memory hashing %zu weights", n)
                      : TSR_OK;
  for (int i = 0; !st && i < nt; i++) {
    const dit_tensor *t = dit_tensor_info(m, i);
    size_t span = (i + 1 < nt ? dit_tensor_info(m, i + 1)->offset : n) - t->offset;
    st = kb->to_host(kb, host, dit_params(m) + t->offset, span * sizeof(float));
    if (st) break;
    if (tensor_sums) tensor_sums[i] = XXH3_64bits(host, t->numel * sizeof(float));
    XXH3_64bits_update(h, host, span * sizeof(float));
  }
  if (!st) *weights_sum = XXH3_64bits_digest(h);
  XXH3_freeState(h);
  free(host);
  return st;
}

// A LoRA run's base, recorded by identity: its path, its weights set's checksum (what its own
// checkpoint records as xxh3_weights) and each of its tensors' (as xxh3:<name>), so that a
// resume on another base names the tensor that differs.
static tsr_status add_base_meta(st_writer *w, const ckpt_state *cs) {
  const int nt = dit_num_tensors(cs->model);
  uint64_t *sums = malloc((size_t)nt * sizeof *sums), all = cs->base_weights;
  tsr_status st = !sums ? err_set(TSR_ENOMEM, "checkpoint: no memory")
                  : cs->base_sums ? (memcpy(sums, cs->base_sums, (size_t)nt * sizeof *sums), TSR_OK)
                                  : ckpt_base_sums(cs->model, sums, &all);
  char key[300], hash[24];
  if (!st) st = st_writer_meta(w, CKPT_BASE_MODEL, cs->base_path ? cs->base_path : "");
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)all);
  if (!st) st = st_writer_meta(w, CKPT_BASE_WEIGHTS, hash);
  for (int i = 0; !st && i < nt; i++) {
    snprintf(key, sizeof key, CKPT_BASE_SUM_PREFIX "%s", dit_tensor_info(cs->model, i)->name);
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)sums[i]);
    st = st_writer_meta(w, key, hash);
  }
  free(sums);
  return st;
}

// ---- the streamed writer: the tensors of `nsets` sets, set by set in table order ---------

struct ckpt_weights_writer {
  st_writer *w;
  const dit_tensor *t;         // (n) the table every set is over
  int n, nsets;
  int set, next;               // the tensor ckpt_weights_tensor takes next
  XXH3_state_t *h;             // the current set's hash over its canonical flat buffer
};

static tsr_status writer_begin(ckpt_weights_writer **out, const char *path, const dit_tensor *t,
                               int n, int nsets, const ckpt_state *cs,
                               const char *const (*extra)[2], int n_extra) {
  ckpt_weights_writer *ww = calloc(1, sizeof *ww);
  *out = ww;
  if (!ww || !(ww->h = XXH3_createState()) || XXH3_64bits_reset(ww->h) != XXH_OK)
    return err_set(TSR_ENOMEM, "checkpoint %s: no memory", path);
  ww->t = t, ww->n = n, ww->nsets = nsets;
  tsr_status st = st_writer_new(&ww->w);
  char name[300];
  for (int s = 0; s < nsets; s++)
    for (int i = 0; !st && i < n; i++) {
      snprintf(name, sizeof name, "%s%s", set_prefix[s], t[i].name);
      st = st_writer_add(ww->w, name, ST_F32, t[i].ndim, t[i].shape, NULL);
    }
  if (!st) st = add_meta(ww->w, cs);
  // the sets' checksums, known at their ends: placeholders of their length
  for (int s = 0; !st && s < nsets; s++)
    st = st_writer_meta(ww->w, set_hash_key[s], "0000000000000000");
  for (int i = 0; !st && i < n_extra; i++) st = st_writer_meta(ww->w, extra[i][0], extra[i][1]);
  if (!st && cs->adapters && cs->model) st = add_base_meta(ww->w, cs);
  if (!st) st = st_writer_stream_begin(ww->w, path);
  return st ? err_wrap(st, "writing checkpoint %s: ", path) : TSR_OK;
}

tsr_status ckpt_weights_tensor(ckpt_weights_writer *ww, const float *data) {
  if (ww->set >= ww->nsets) return err_set(TSR_EINVAL, "checkpoint: more tensors than the model's");
  const dit_tensor *d = &ww->t[ww->next++];
  XXH3_64bits_update(ww->h, data, d->numel * sizeof(float));
  XXH3_64bits_update(ww->h, zeros16, canon_pad(d) * sizeof(float));
  tsr_status st = st_writer_stream(ww->w, data, d->numel * sizeof(float));
  if (!st && ww->next == ww->n) {  // the set is complete: its checksum
    char hash[24];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)XXH3_64bits_digest(ww->h));
    st = st_writer_meta_set(ww->w, set_hash_key[ww->set], hash);
    ww->set++, ww->next = 0;
    if (XXH3_64bits_reset(ww->h) != XXH_OK) st = err_set(TSR_ENOMEM, "checkpoint: hash reset");
  }
  return st;
}

tsr_status ckpt_weights_commit(ckpt_weights_writer *ww) {
  if (ww->set != ww->nsets)
    return err_set(TSR_EINVAL, "checkpoint: %d of the model's %d tensors written", ww->next,
                   ww->n);
  return st_writer_stream_commit(ww->w);
}

void ckpt_weights_free(ckpt_weights_writer **pww) {
  ckpt_weights_writer *ww = *pww;
  if (!ww) return;
  st_writer_free(&ww->w);  // removes the temporary file of an uncommitted stream
  XXH3_freeState(ww->h);
  free(ww);
  *pww = NULL;
}

tsr_status ckpt_weights_begin(ckpt_weights_writer **ww, const char *path, const dit_table *t,
                              const ckpt_state *cs, const char *const (*extra)[2], int n_extra) {
  return writer_begin(ww, path, t->t, t->n, 1, cs, extra, n_extra);
}

tsr_status ckpt_save(const char *path, const ckpt_state *cs) {
  const kernels_backend *kb = dit_backend(cs->model);
  int n;
  size_t most;
  dit_tensor *t = table_copy(cs->model, cs->adapters, &n, &most);
  float *host = malloc(most * sizeof(float));
  ckpt_weights_writer *ww = NULL;
  tsr_status st = t && host ? writer_begin(&ww, path, t, n, NSETS, cs, NULL, 0)
                            : err_set(TSR_ENOMEM, "checkpoint %s: no memory", path);
  for (int s = 0; !st && s < NSETS; s++) {
    const float *src = set_buffer(cs, s);
    for (int i = 0; !st && i < n; i++) {
      const float *at = src + t[i].offset;
      if ((s != SET_W || cs->weights) && cs->gather) st = cs->gather(cs->gather_ctx, src, i, &at);
      if (!st) st = kb->to_host(kb, host, at, t[i].numel * sizeof(float));
      if (!st) st = check_finite(&t[i], host, s, TSR_EINVAL, path);
      if (!st) st = ckpt_weights_tensor(ww, host);
    }
  }
  if (!st) st = ckpt_weights_commit(ww);
  ckpt_weights_free(&ww);
  free(host);
  free(t);
  return st ? err_wrap(st, "saving checkpoint %s: ", path) : TSR_OK;
}

tsr_status ckpt_save_follow(const ckpt_state *cs) {
  tsr_status st = TSR_OK;
  for (int s = cs->weights ? SET_W : SET_EMA; cs->gather && !st && s < NSETS; s++)
    for (int i = 0; !st && i < tab_count(cs->model, cs->adapters); i++) {
      const float *data;
      st = cs->gather(cs->gather_ctx, set_buffer(cs, s), i, &data);
    }
  return st;
}

// ---- reading ------------------------------------------------------------------------------

static tsr_status meta_get(const st_reader *r, const char *key, const char **v) {
  *v = st_meta(r, key);
  if (!*v)
    return err_set(TSR_EFORMAT, "checkpoint %s: metadata key '%s' is missing (not a tessera "
                   "training checkpoint?)", st_path(r), key);
  return TSR_OK;
}

static tsr_status meta_int(const st_reader *r, const char *key, int64_t lo, int64_t *out) {
  const char *v;
  tsr_status st = meta_get(r, key, &v);
  if (st) return st;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end || x < lo)
    return err_set(TSR_EFORMAT, "checkpoint %s: metadata '%s' = '%s' is not an integer >= %lld",
                   st_path(r), key, v, (long long)lo);
  *out = x;
  return TSR_OK;
}

static tsr_status read_labels(const st_reader *r, ckpt_meta *m) {
  const char *v;
  tsr_status st = meta_get(r, "labels", &v);
  if (st) return st;
  json_t *j = json_loads(v, 0, NULL);
  size_t n = json_is_array(j) ? json_array_size(j) : 0;
  if (!json_is_array(j) || n > CKPT_MAX_LABELS) {
    json_decref(j);
    return err_set(TSR_EFORMAT, "checkpoint %s: metadata 'labels' is not a JSON array of names",
                   st_path(r));
  }
  m->labels = calloc(n ? n : 1, sizeof *m->labels);
  for (size_t k = 0; m->labels && k < n; k++) {
    const char *s = json_string_value(json_array_get(j, k));
    if (!s || !(m->labels[k] = strdup(s))) {
      st = err_set(TSR_EFORMAT, "checkpoint %s: label %zu is not a string", st_path(r), k);
      break;
    }
    m->n_labels++;
  }
  if (!m->labels) st = err_set(TSR_ENOMEM, "no memory");
  json_decref(j);
  return st;
}

// Metadata values are untrusted like every file's (a crafted fps of 2^31-1/2^31-1 or an
// epoch of 2^63-1 overflowed signed arithmetic in the encoder and the sampler): each number
// is parsed whole, as an int where it is one, and then held to its limits.

// The int value of `key` in [lo, hi] into *out.
static tsr_status meta_int_in(const st_reader *r, const char *key, int lo, int hi, int *out) {
  int64_t v;
  tsr_status st = meta_int(r, key, lo, &v);
  if (!st && v > hi)
    st = err_set(TSR_EFORMAT, "checkpoint %s: metadata '%s' = %lld is above %d", st_path(r), key,
                 (long long)v, hi);
  if (!st) *out = (int)v;
  return st;
}

// n positive ints joined by `sep` ("8/1", "2x16x16") of `key` into out.
static tsr_status meta_ints(const st_reader *r, const char *key, char sep, int n, int *out) {
  const char *v;
  tsr_status st = meta_get(r, key, &v);
  const char *p = v;
  for (int i = 0; !st && i < n; i++) {
    char *end;
    errno = 0;
    long long x = strtoll(p, &end, 10);
    if (errno || end == p || x < 1 || x > INT_MAX || *end != (i + 1 < n ? sep : '\0'))
      return err_set(TSR_EFORMAT, "checkpoint %s: metadata '%s' = '%.40s' is not %d positive "
                     "integers joined by '%c'", st_path(r), key, v, n, sep);
    out[i] = (int)x;
    p = end + 1;
  }
  return st;
}

static tsr_status read_store(const st_reader *r, store_settings *s) {
  const char *maxs;
  int fps[2], patch[3], dtype = 0;
  tsr_status st = meta_ints(r, "store_fps", '/', 2, fps);
  if (!st) s->fps_num = fps[0], s->fps_den = fps[1];
  if (!st && !(st = meta_ints(r, "store_patch", 'x', 3, patch)))
    s->pt = patch[0], s->ph = patch[1], s->pw = patch[2];
  if (!st) st = meta_int_in(r, "store_short_side", 0, INT_MAX, &s->short_side);
  if (!st) st = meta_int_in(r, "store_channels", 1, INT_MAX, &s->channels);
  if (!st && !(st = meta_int_in(r, "store_dtype", 0, STORE_DTYPE_F32, &dtype)))
    s->dtype = (store_dtype)dtype;
  if (!st) st = meta_get(r, "store_max_seconds", &maxs);
  if (!st) {
    char *end;
    s->max_seconds = strtod(maxs, &end);
    if (end == maxs || *end)
      st = err_set(TSR_EFORMAT, "checkpoint %s: metadata 'store_max_seconds' = '%.40s' is not a "
                   "number", st_path(r), maxs);
  }
  // the VAE strides of a latent store: absent in checkpoints of pixel stores made before
  if (!st && st_meta(r, "store_vae_t")) st = meta_int_in(r, "store_vae_t", 0, INT_MAX, &s->vae_t);
  if (!st && st_meta(r, "store_vae_s")) st = meta_int_in(r, "store_vae_s", 0, INT_MAX, &s->vae_s);
  // the limits every store is held to (store/settings.h), which the encoder and the trainer
  // rely on
  if (!st && (st = store_settings_check(s)))
    st = err_wrap(TSR_EFORMAT, "checkpoint %s: metadata store_*: ", st_path(r));
  return st;
}

// The step and the sampler's position: a step within the schedule's limit, a position within
// the store's clips, and an epoch the run could have reached. A step draws at most
// 2 * clips + 1 times (train.c draw_batch: with --skip-bad-clips it redraws until a batch
// has a good clip or 2 * clips were drawn), each draw passing at most one epoch boundary.
static tsr_status check_position(const st_reader *r, const ckpt_meta *m) {
  int64_t most = CKPT_MAX_EPOCH, per_step;
  if (!__builtin_mul_overflow(m->clips, (int64_t)2, &per_step) &&
      !__builtin_mul_overflow(m->step, per_step + 1, &per_step) && per_step < most)
    most = per_step;
  if (m->step > CKPT_MAX_STEP)
    return err_set(TSR_EFORMAT, "checkpoint %s: metadata 'step' = %lld is above %lld",
                   st_path(r), (long long)m->step, (long long)CKPT_MAX_STEP);
  if (m->sampler_pos > m->clips)
    return err_set(TSR_EFORMAT, "checkpoint %s: metadata 'sampler_pos' = %lld is past the "
                   "store's %lld clips ('clips')", st_path(r), (long long)m->sampler_pos,
                   (long long)m->clips);
  if (m->sampler_epoch > most)
    return err_set(TSR_EFORMAT, "checkpoint %s: metadata 'sampler_epoch' = %lld: %lld steps over "
                   "%lld clips reach epoch %lld at most", st_path(r),
                   (long long)m->sampler_epoch, (long long)m->step, (long long)m->clips,
                   (long long)most);
  return TSR_OK;
}

// The keys a resume compares with the run it continues (absent in older files: then
// has_fingerprint = 0 and plan_settings "").
static tsr_status read_run_keys(const st_reader *r, ckpt_meta *m) {
  const char *fp = st_meta(r, "store_fingerprint"), *ps = st_meta(r, "plan_settings");
  if (fp) {
    if (strlen(fp) != 16 || strspn(fp, "0123456789abcdef") != 16)
      return err_set(TSR_EFORMAT, "checkpoint %s: metadata 'store_fingerprint' = '%.40s' is not "
                     "16 hex digits", st_path(r), fp);
    m->has_fingerprint = 1;
    m->store_fingerprint = strtoull(fp, NULL, 16);
  }
  if (ps) snprintf(m->plan_settings, sizeof m->plan_settings, "%s", ps);
  const char *ce = st_meta(r, "caption_encoder");
  if (ce && strlen(ce) >= sizeof m->caption_encoder)
    return err_set(TSR_EFORMAT, "checkpoint %s: metadata 'caption_encoder' over %zu bytes",
                   st_path(r), sizeof m->caption_encoder - 1);
  if (ce) snprintf(m->caption_encoder, sizeof m->caption_encoder, "%s", ce);
  const char *sd = st_meta(r, "sample_due");
  m->sample_due = sd && !strcmp(sd, "1");
  return TSR_OK;
}

// A LoRA run's checkpoint (lora.rank > 0 in its config) holds adapters and names its base;
// any other holds the model's weights and names none.
static tsr_status read_base_keys(const st_reader *r, ckpt_meta *m) {
  const char *base = st_meta(r, CKPT_BASE_MODEL), *sum = st_meta(r, CKPT_BASE_WEIGHTS);
  m->adapters = m->tc.lora_rank > 0;
  if (!m->adapters && (base || sum))
    return err_set(TSR_EFORMAT, "checkpoint %s: metadata '%s' of a run without lora.rank",
                   st_path(r), base ? CKPT_BASE_MODEL : CKPT_BASE_WEIGHTS);
  if (!m->adapters) return TSR_OK;
  tsr_status st = meta_get(r, CKPT_BASE_MODEL, &base);
  if (!st) st = meta_get(r, CKPT_BASE_WEIGHTS, &sum);
  if (!st && strlen(base) >= sizeof m->base_model)
    st = err_set(TSR_EFORMAT, "checkpoint %s: metadata '%s' is longer than %zu bytes",
                 st_path(r), CKPT_BASE_MODEL, sizeof m->base_model - 1);
  if (!st) snprintf(m->base_model, sizeof m->base_model, "%s", base);
  return st;
}

// An adapters file (model/io/lora_io.h) where a checkpoint is expected: sound, but another
// kind of file (TSR_EMISMATCH), named with the command that makes a checkpoint of it.
static tsr_status not_adapters(const st_reader *r) {
  if (!st_meta(r, "tessera.lora.rank") && !st_meta(r, "lora_adapter_metadata")) return TSR_OK;
  return err_set(TSR_EMISMATCH, "%s is a LoRA adapters file, not a checkpoint: fold it into "
                 "the base it was trained on with `tessera convert BASE --merge-lora %s --out "
                 "MERGED.safetensors` and give MERGED.safetensors (or, to train the adapters "
                 "further, give the base to --init with lora.rank > 0)", st_path(r),
                 st_path(r));
}

static tsr_status read_meta(const st_reader *r, ckpt_meta *m) {
  memset(m, 0, sizeof *m);
  const char *fmt, *ini;
  int64_t v;
  tsr_status st = not_adapters(r);
  if (!st) st = meta_get(r, "format", &fmt);
  if (!st && strcmp(fmt, CKPT_FORMAT))
    st = err_set(TSR_EFORMAT, "checkpoint %s: format '%s', expected '%s'", st_path(r), fmt,
                 CKPT_FORMAT);
  if (!st && !(st = meta_int(r, "version", 1, &v))) m->version = (int)v;
  if (!st && m->version > CKPT_VERSION)
    st = err_set(TSR_EFORMAT, "checkpoint %s: version %d, this tessera reads versions 1 to %d",
                 st_path(r), m->version, CKPT_VERSION);
  if (!st) st = meta_int(r, "step", 0, &m->step);
  if (!st) st = meta_int(r, "sampler_epoch", 0, &m->sampler_epoch);
  if (!st) st = meta_int(r, "sampler_pos", 0, &m->sampler_pos);
  if (!st) st = meta_int(r, "clips", 1, &m->clips);
  if (!st) st = check_position(r, m);
  if (!st) st = meta_get(r, "config", &ini);
  if (!st && (st = config_from_ini(ini, &m->mc, &m->tc)))
    st = err_wrap(st, "checkpoint %s: metadata 'config': ", st_path(r));
  if (!st && (st = config_validate(&m->mc, &m->tc)))
    st = err_wrap(st, "checkpoint %s: metadata 'config': ", st_path(r));
  if (!st) st = read_store(r, &m->store);
  if (!st) st = read_labels(r, m);
  if (!st) st = read_run_keys(r, m);
  if (!st) st = read_base_keys(r, m);
  if (st) ckpt_meta_free(m);
  return st;
}

// A damaged file's message with what to do about it (every load path: --resume, --init,
// sample). A newest checkpoint is not skipped silently (see checkpoint.h).
static tsr_status damaged(tsr_status st, const char *path) {
  if (st != TSR_EFORMAT) return st;
  char why[2048];
  const char *msg = err_msg();
  size_t pl = strlen(path);
  if (!strncmp(msg, "checkpoint ", 11) && !strncmp(msg + 11, path, pl) &&
      !strncmp(msg + 11 + pl, ": ", 2))
    msg += 11 + pl + 2;  // named below
  else if (!strncmp(msg, path, pl) && !strncmp(msg + pl, ": ", 2))
    msg += pl + 2;
  snprintf(why, sizeof why, "%s", msg);
  return err_set(st, "checkpoint %s is damaged: %s. Use an older checkpoint: for --resume move "
                 "this one aside (mv %s %s.damaged) and the newest remaining one is used; "
                 "for --init or sample give another file", path, why, path, path);
}

tsr_status ckpt_read_meta(const char *path, ckpt_meta *m) {
  st_reader *r = NULL;
  tsr_status st = st_open(&r, path);
  if (st) return damaged(st, path);
  st = read_meta(r, m);  // a value out of its limits is damage too (TSR_EFORMAT)
  st_close(&r);
  return damaged(st, path);
}

// A LoRA run's checkpoint holds adapters, not a model: it is not what --init or sample take,
// and a full run's is not what a LoRA run resumes from (TSR_EMISMATCH: the file is sound).
static tsr_status check_kind(const st_reader *r, int adapters) {
  const char *base = st_meta(r, CKPT_BASE_MODEL);
  if (adapters && !base)
    return err_set(TSR_EMISMATCH, "checkpoint %s holds a model's weights, not a LoRA run's "
                   "adapters (no '%s' in its metadata)", st_path(r), CKPT_BASE_MODEL);
  if (!adapters && base)
    return err_set(TSR_EMISMATCH, "checkpoint %s is a LoRA run's: it holds the adapters trained "
                   "on the base %s, not a model's weights; give that base (with `tessera "
                   "convert BASE --merge-lora RUN/lora-STEP.safetensors` for the weights with "
                   "the adapters folded in), or continue the run with --resume",
                   st_path(r), base);
  return TSR_OK;
}

// Every tensor of the file must be one the loader knows (a set prefix + a model tensor).
static tsr_status check_names(const st_reader *r, const dit_model *m, int adapters) {
  for (int i = 0; i < st_count(r); i++) {
    const char *name = st_at(r, i)->name;
    int known = 0;
    for (int s = 0; s < NSETS && !known; s++) {
      size_t pl = strlen(set_prefix[s]);
      if (!strncmp(name, set_prefix[s], pl)) known = tab_find(m, adapters, name + pl) >= 0;
    }
    if (!known)
      return err_set(TSR_EMISMATCH, "checkpoint %s: tensor '%s' is not a parameter of the "
                     "configured model%s (another model config?)", st_path(r), name,
                     adapters ? "'s adapters" : "");
  }
  return TSR_OK;
}

// Copies tensor t's values (host) to the set's backend buffer dst: at their own offsets, or
// with a shard only its elements, at the shard's offsets.
static tsr_status put_tensor(const kernels_backend *kb, const dit_tensor *t, const float *host,
                             float *dst, const ckpt_shard *shard) {
  if (!shard) return kb->to_device(kb, dst + t->offset, host, t->numel * sizeof(float));
  int64_t a = (int64_t)t->offset, e = a + (int64_t)t->numel;
  tsr_status st = TSR_OK;
  for (int k = 0; k < shard->n && !st; k++) {
    int64_t lo = a > shard->lo[k] ? a : shard->lo[k];
    int64_t hi = e < shard->lo[k] + shard->len[k] ? e : shard->lo[k] + shard->len[k];
    if (hi > lo)
      st = kb->to_device(kb, dst + shard->at[k] + (lo - shard->lo[k]), host + (lo - a),
                         (size_t)(hi - lo) * sizeof(float));
  }
  return st;
}

// Opens `path` and checks every checksum it records, whichever sets the caller loads: the
// structure and exact size (st_open), every tensor's own XXH3 (required from version 2 on),
// the names against the model, and the XXH3 of each tensor set present (its metadata key
// set_hash_key[s], over the canonical flat buffer). Tensor by tensor (host memory: the
// largest), the sets in `load` (bit s) are copied to dst[s] (backend memory of kb; the
// sets other than the weights as `shard` says, NULL: whole; the weights too when
// shard_weights). A failed check fails the load
// (the buffers then hold a part of the file). adapters: the sets are over m's LoRA
// adapters (a LoRA run's checkpoint), else its tensors. A model without whole fp32 masters
// (dst[SET_W] NULL: dit_create_frozen_base) takes the weights tensor by tensor
// (dit_put_tensor) and keeps their checksums (dit_set_weight_sums).
static tsr_status load_checked(const char *path, dit_model *m, int adapters,
                               const kernels_backend *kb, int load, float *const dst[NSETS],
                               const ckpt_shard *shard, int shard_weights) {
  st_reader *r = NULL;
  int64_t version = 0;
  int n;
  size_t most;
  dit_tensor *t = table_copy(m, adapters, &n, &most);
  float *host = malloc(most * sizeof(float));
  XXH3_state_t *h = XXH3_createState();
  const int put = !adapters && (load & 1 << SET_W) && !dst[SET_W];  // dit_put_tensor
  uint64_t *sums = put ? malloc((size_t)(n ? n : 1) * sizeof *sums) : NULL;
  tsr_status st = t && host && h && (!put || sums)
                      ? st_open(&r, path)
                      : err_set(TSR_ENOMEM, "no memory loading %s", path);
  if (!st) st = check_kind(r, adapters);
  if (!st) st = meta_int(r, "version", 1, &version);
  if (!st && version > CKPT_VERSION)
    st = err_set(TSR_EFORMAT, "checkpoint %s: version %lld, this tessera reads versions 1 to %d",
                 path, (long long)version, CKPT_VERSION);
  if (!st) st = check_names(r, m, adapters);
  if (!st) st = st_verify(r, version >= 2);  // version 1 files have set checksums only
  for (int s = 0; !st && s < NSETS; s++) {
    const char *want = st_meta(r, set_hash_key[s]);
    if (!want) {
      if (load >> s & 1) {
        char first[256];
        snprintf(first, sizeof first, "%s%s", set_prefix[s], t[0].name);
        st = s == SET_EMA ? err_set(TSR_EMISMATCH, "checkpoint %s has no EMA weights (%s): use "
                                    "--raw", path, first)
                          : err_set(TSR_EFORMAT, "checkpoint %s: metadata '%s' is missing",
                                    path, set_hash_key[s]);
      }
      continue;
    }
    if (XXH3_64bits_reset(h) != XXH_OK) st = err_set(TSR_ENOMEM, "no memory loading %s", path);
    char name[300];
    for (int i = 0; !st && i < n; i++) {
      snprintf(name, sizeof name, "%s%s", set_prefix[s], t[i].name);
      if ((st = st_read(r, name, ST_F32, t[i].ndim, t[i].shape, host))) break;
      XXH3_64bits_update(h, host, t[i].numel * sizeof(float));
      XXH3_64bits_update(h, zeros16, canon_pad(&t[i]) * sizeof(float));
      if (load >> s & 1) {
        st = check_finite(&t[i], host, s, TSR_EFORMAT, path);
        if (!st && s == SET_W && put) {
          st = dit_put_tensor(m, i, host);
          sums[i] = XXH3_64bits(host, t[i].numel * sizeof(float));
        } else if (!st) {
          st = put_tensor(kb, &t[i], host, dst[s], s == SET_W && !shard_weights ? NULL : shard);
        }
      }
      st_release(r, st_find(r, name));
    }
    char got[24];
    snprintf(got, sizeof got, "%016llx", (unsigned long long)XXH3_64bits_digest(h));
    if (!st && strcmp(want, got))
      st = err_set(TSR_EFORMAT, "the %stensors' checksum is %s, the metadata says %s",
                   s == SET_W ? "weight " : set_prefix[s], got, want);
    if (!st && s == SET_W && put) dit_set_weight_sums(m, sums, XXH3_64bits_digest(h));
  }
  st_close(&r);
  XXH3_freeState(h);
  free(host);
  free(sums);
  free(t);
  return damaged(st, path);
}

tsr_status ckpt_load(const char *path, const ckpt_state *cs, int what) {
  const int ad = cs->adapters;
  int sets = (what & CKPT_LOAD_WEIGHTS ? 1 << SET_W : 0) | (what & CKPT_LOAD_EMA ? 1 << SET_EMA : 0) |
             (what & CKPT_LOAD_OPTIM ? 1 << SET_M | 1 << SET_V : 0);
  float *dst[NSETS];
  for (int s = 0; s < NSETS; s++) dst[s] = set_buffer(cs, s);
  tsr_status st = load_checked(path, cs->model, ad, dit_backend(cs->model), sets, dst, cs->shard,
                               cs->weights != NULL);
  // the act-dtype working copy follows the loaded masters (the model's or the adapters')
  if (!st && (what & CKPT_LOAD_WEIGHTS))
    st = ad ? dit_lora_refresh(cs->model) : dit_refresh_weights(cs->model);
  return st;
}

// The first of m's tensors whose checksum differs from the one LoRA checkpoint r records
// for its base (TSR_EMISMATCH naming it), after the weights set's as a whole.
static tsr_status base_differs(const st_reader *r, dit_model *m, const uint64_t *sums,
                               uint64_t all) {
  const char *want = st_meta(r, CKPT_BASE_WEIGHTS), *base = st_meta(r, CKPT_BASE_MODEL);
  char got[24], key[300];
  snprintf(got, sizeof got, "%016llx", (unsigned long long)all);
  if (want && !strcmp(want, got)) return TSR_OK;
  for (int i = 0; i < dit_num_tensors(m); i++) {
    const char *name = dit_tensor_info(m, i)->name;
    snprintf(key, sizeof key, CKPT_BASE_SUM_PREFIX "%s", name);
    const char *w = st_meta(r, key);
    snprintf(got, sizeof got, "%016llx", (unsigned long long)sums[i]);
    if (!w || strcmp(w, got))
      return err_set(TSR_EMISMATCH, "the base's tensor %s differs from the one the adapters of "
                     "checkpoint %s were trained on (%s): XXH3 %s, recorded %s", name,
                     st_path(r), base ? base : "?", got, w ? w : "none");
  }
  return err_set(TSR_EMISMATCH, "the base's weights (XXH3 %s, padding included) differ from "
                 "those the adapters of checkpoint %s were trained on (%s, recorded %s)", got,
                 st_path(r), base ? base : "?", want ? want : "none");
}

tsr_status ckpt_check_base(const char *path, dit_model *m) {
  st_reader *r = NULL;
  const int nt = dit_num_tensors(m);
  uint64_t *sums = malloc((size_t)nt * sizeof *sums), all = 0;
  tsr_status st = sums ? st_open(&r, path) : err_set(TSR_ENOMEM, "no memory");
  if (!st) st = check_kind(r, 1);
  if (!st) st = ckpt_base_sums(m, sums, &all);
  if (!st) st = base_differs(r, m, sums, all);
  st_close(&r);
  free(sums);
  return damaged(st, path);
}

tsr_status ckpt_load_model(const char *path, dit_model *m, int ema) {
  float *dst[NSETS] = {0};
  int s = ema ? SET_EMA : SET_W;
  dst[s] = dit_params(m);
  tsr_status st = load_checked(path, m, 0, dit_backend(m), 1 << s, dst, NULL, 0);
  if (!st) st = dit_refresh_weights(m);
  return st;
}
