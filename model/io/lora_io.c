// model/io/lora_io.c — adapters to and from their own safetensors file (model/io/lora_io.h).
#include "model/io/lora_io.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf16.h"
#include "core/num.h"
#include "core/safetensors.h"
#include "model/io/checkpoint.h"
#include "model/io/dit_io.h"
#include "model/io/lora_layout.h"

#define PREFIX "transformer."  // diffusers' component prefix of a pipeline's LoRA file

// diffusers' lora_adapter_metadata: the LoraConfig fields under the component's prefix,
// targets as a list. Caller frees.
static char *diffusers_metadata(const lora_config *lc) {
  json_t *o = json_object(), *t = json_array();
  for (const char *s = lc->targets; *s;) {
    size_t l = strcspn(s, ",");
    json_array_append_new(t, json_stringn(s, l));
    s += l + (s[l] == ',');
  }
  json_object_set_new(o, PREFIX "r", json_integer(lc->rank));
  json_object_set_new(o, PREFIX "lora_alpha", json_real(lc->alpha));
  json_object_set_new(o, PREFIX "target_modules", t);
  char *txt = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
  json_decref(o);
  return txt;
}

// XXH3 of m's base weights, the flat buffer with its zero padding (%016llx): the checksum a
// checkpoint of these weights records for its weights set.
static tsr_status base_weights_hash(dit_model *m, char out[24]) {
  uint64_t h = 0;
  tsr_status st = ckpt_base_sums(m, NULL, &h);
  if (!st) snprintf(out, 24, "%016llx", (unsigned long long)h);
  return st;
}

// The adapters' caption encoder record (lora_save_as).
#define LORA_CAPTION_ENCODER_KEY "tessera.caption_encoder"

static tsr_status add_meta(st_writer *w, dit_model *m, const lora_config *lc,
                           const char *base_model, const uint64_t *base_weights,
                           lora_layout layout) {
  char num[32], hash[24];
  if (base_weights) snprintf(hash, sizeof hash, "%016llx", (unsigned long long)*base_weights);
  else TSR_TRY(base_weights_hash(m, hash));
  TSR_TRY(st_writer_meta(w, "tessera.base_weights", hash));
  snprintf(num, sizeof num, "%d", lc->rank);
  TSR_TRY(st_writer_meta(w, "tessera.lora.rank", num));
  snprintf(num, sizeof num, "%.9g", lc->alpha);
  TSR_TRY(st_writer_meta(w, "tessera.lora.alpha", num));
  TSR_TRY(st_writer_meta(w, "tessera.lora.targets", lc->targets));
  TSR_TRY(st_writer_meta(w, "tessera.base_model", base_model ? base_model : ""));
  TSR_TRY(st_writer_meta(w, "format", "pt"));  // what diffusers' own files say
  dit_config unused;
  train_config tc;  // the base's model section is what identifies it; train keys at defaults
  config_defaults(&unused, &tc);
  char *ini = config_to_ini(dit_get_config(m), &tc);
  char *dm = diffusers_metadata(lc);
  tsr_status st = ini && dm ? TSR_OK : err_set(TSR_ENOMEM, "lora_save: no memory");
  if (!st) st = st_writer_meta(w, "tessera.base_config", ini);
  // diffusers' metadata describes its own layout's keys; kohya's tools read ss_network_*
  if (!st && layout == LORA_LAYOUT_DIFFUSERS) st = st_writer_meta(w, "lora_adapter_metadata", dm);
  snprintf(num, sizeof num, "%d", lc->rank);
  if (!st && layout == LORA_LAYOUT_KOHYA) st = st_writer_meta(w, "ss_network_dim", num);
  snprintf(num, sizeof num, "%.9g", lc->alpha);
  if (!st && layout == LORA_LAYOUT_KOHYA) st = st_writer_meta(w, "ss_network_alpha", num);
  free(ini), free(dm);
  return st;
}

enum { MODULE_CAP = 256, KEY_CAP = 320 };

// The key of adapter tensor t in layout l (key: KEY_CAP bytes), with the name of its module
// (module: MODULE_CAP bytes) and its part.
static tsr_status tensor_key(lora_layout l, const dit_tensor *t, char *module, char *key,
                             lora_part *part) {
  TSR_TRY(lora_layout_split_tensor(t->name, module, MODULE_CAP, part));
  return lora_layout_key(l, module, *part, key, KEY_CAP);
}

// m's adapter tensors (host: their flat host copy) under layout's keys, with a scalar alpha
// (*alpha, which lives until commit) per module where the layout keeps one.
static tsr_status write_layout(const dit_model *m, st_writer *w, lora_layout layout,
                               const float *host, const float *alpha) {
  if (layout == LORA_LAYOUT_DIFFUSERS) return dit_lora_write_tensors(m, w, PREFIX, host);
  char module[MODULE_CAP], key[KEY_CAP];
  for (int i = 0; i < dit_lora_num_tensors(m); i++) {
    const dit_tensor *t = dit_lora_tensor_info(m, i);
    lora_part part;
    TSR_TRY(tensor_key(layout, t, module, key, &part));
    TSR_TRY(st_writer_add(w, key, ST_F32, t->ndim, t->shape, host + t->offset));
    if (part != LORA_PART_DOWN) continue;
    TSR_TRY(lora_layout_key(layout, module, LORA_PART_ALPHA, key, sizeof key));
    TSR_TRY(st_writer_add(w, key, ST_F32, 0, NULL, alpha));
  }
  return TSR_OK;
}

tsr_status lora_save(dit_model *m, const char *path, const char *base_model,
                     const uint64_t *base_weights) {
  return lora_save_as(m, path, base_model, base_weights, LORA_LAYOUT_DIFFUSERS, NULL);
}

tsr_status lora_save_as(dit_model *m, const char *path, const char *base_model,
                        const uint64_t *base_weights, lora_layout layout,
                        const char *caption_encoder) {
  const lora_config *lc = dit_lora_get_config(m);
  if (!lc) return err_set(TSR_EINVAL, "lora_save %s: the model has no adapters", path);
  const kernels_backend *kb = dit_backend(m);
  size_t n = dit_lora_num_params(m);
  float *host = malloc(sizeof(float) * (n ? n : 1));
  st_writer *w = NULL;
  if (!host) return err_set(TSR_ENOMEM, "lora_save %s: no memory", path);
  tsr_status st = kb->to_host(kb, host, dit_lora_params(m), sizeof(float) * n);
  if (!st) st = st_writer_new(&w);
  float alpha = lc->alpha;
  if (!st) st = write_layout(m, w, layout, host, &alpha);
  if (!st) st = add_meta(w, m, lc, base_model, base_weights, layout);
  if (!st && caption_encoder && *caption_encoder)
    st = st_writer_meta(w, LORA_CAPTION_ENCODER_KEY, caption_encoder);
  if (!st) st = st_writer_commit(w, path);
  st_writer_free(&w);
  free(host);
  return st ? err_wrap(st, "lora_save %s: ", path) : TSR_OK;
}

// The file's rank and alpha within lora.rank's and lora.alpha's ranges (model/config.h): a
// NaN or infinite alpha scales every adapter into non-finite weights.
// alpha_text: the metadata's text of alpha, or NULL (then the value is named).
static tsr_status check_config(const st_reader *r, const lora_config *lc, const char *alpha_text) {
  if (lc->rank < 1 || lc->rank > CONFIG_LORA_RANK_MAX)
    return err_set(TSR_EFORMAT, "%s: the LoRA rank in its metadata is not a whole number in "
                   "[1, %d]", st_path(r), CONFIG_LORA_RANK_MAX);
  if (lc->alpha >= (float)CONFIG_LORA_ALPHA_MIN && lc->alpha <= (float)CONFIG_LORA_ALPHA_MAX)
    return TSR_OK;
  char v[32];
  snprintf(v, sizeof v, "%g", lc->alpha);
  return err_set(TSR_EFORMAT, "%s: the LoRA alpha in its metadata is %.40s, not a finite number "
                 "in [%g, %g]", st_path(r), alpha_text ? alpha_text : v, CONFIG_LORA_ALPHA_MIN,
                 CONFIG_LORA_ALPHA_MAX);
}

// Every adapter value read from r (host: the adapters' flat buffer) is finite.
static tsr_status check_values(const dit_model *m, const st_reader *r, const float *host) {
  for (int j = 0; j < dit_lora_num_tensors(m); j++) {
    const dit_tensor *t = dit_lora_tensor_info(m, j);
    size_t bad = num_first_nonfinite(host + t->offset, t->numel);
    if (bad < t->numel)
      return err_set(TSR_EFORMAT, "%s: tensor %s%s has a non-finite value (%g at element %zu): "
                     "the adapters are damaged or their training diverged", st_path(r), PREFIX,
                     t->name, host[t->offset + bad], bad);
  }
  return TSR_OK;
}

// The value of a one-element F32 or BF16 tensor t of r (an alpha) into *v.
static tsr_status scalar_of(const st_reader *r, const st_tensor *t, float *v) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  if (n != 1 || (t->dtype != ST_F32 && t->dtype != ST_BF16))
    return err_set(TSR_EFORMAT, "%s: '%s' is no F32 or BF16 scalar", st_path(r), t->name);
  uint16_t h;
  if (t->dtype == ST_BF16) memcpy(&h, t->data, 2), *v = bf16_to_f32(h);
  else memcpy(v, t->data, 4);
  return TSR_OK;
}

// 1 if the comma-separated list has the entry name.
static int listed(const char *list, const char *name) {
  size_t l = strlen(name);
  for (const char *s = list; *s;) {
    size_t n = strcspn(s, ",");
    if (n == l && !strncmp(s, name, l)) return 1;
    s += n + (s[n] == ',');
  }
  return 0;
}

// The config of a wan or kohya file another tool wrote (no tessera.lora.* keys): the rank
// of its down matrices, its alpha (one for all: tessera's adapters share it; the rank where
// the file has none, kohya's convention, scale 1) and its modules as targets (a block's
// module by its name inside the block, so that one target matches it in every block).
static tsr_status derive_config(const st_reader *r, lora_layout l, lora_config *lc) {
  char module[256];
  size_t used = 0;
  int have_alpha = 0;
  for (int i = 0; i < st_count(r); i++) {
    const st_tensor *t = st_at(r, i);
    lora_part part;
    TSR_TRY(lora_layout_parse_key(l, t->name, module, sizeof module, &part));
    if (part == LORA_PART_ALPHA) {
      float a;
      TSR_TRY(scalar_of(r, t, &a));
      if (have_alpha && a != lc->alpha)
        return err_set(TSR_EFORMAT, "%s: alpha %g at '%s' but %g before: tessera's adapters "
                       "share one alpha", st_path(r), a, t->name, lc->alpha);
      lc->alpha = a, have_alpha = 1;
      continue;
    }
    if (part == LORA_PART_DOWN && (t->ndim != 2 || (lc->rank && lc->rank != t->shape[0])))
      return err_set(TSR_EFORMAT, "%s: '%s' is no (r, in) matrix of the file's rank %d",
                     st_path(r), t->name, lc->rank);
    if (part == LORA_PART_DOWN) lc->rank = (int)t->shape[0];
    int blk, off = 0;
    const char *tg = sscanf(module, "blocks.%d.%n", &blk, &off) == 1 && off ? module + off : module;
    if (listed(lc->targets, tg)) continue;
    used += (size_t)snprintf(lc->targets + used, used < sizeof lc->targets ? sizeof lc->targets - used : 0,
                             "%s%s", used ? "," : "", tg);
    if (used >= sizeof lc->targets)
      return err_set(TSR_EFORMAT, "%s: the modules make targets longer than %d bytes",
                     st_path(r), LORA_TARGETS_MAX - 1);
  }
  if (!lc->rank) return err_set(TSR_EFORMAT, "%s: no LoRA down matrix (%s layout)", st_path(r),
                                lora_layout_name(l));
  if (!have_alpha) lc->alpha = (float)lc->rank;
  return TSR_OK;
}

// tessera's keys, or (a file diffusers or PEFT wrote) its lora_adapter_metadata, or (a wan
// or kohya file of another tool) what its tensors say.
static tsr_status config_of(const st_reader *r, lora_layout l, lora_config *lc) {
  memset(lc, 0, sizeof *lc);
  const char *rank = st_meta(r, "tessera.lora.rank"), *alpha = st_meta(r, "tessera.lora.alpha");
  const char *tg = st_meta(r, "tessera.lora.targets"), *dm = st_meta(r, "lora_adapter_metadata");
  if (rank && alpha && tg) {
    int64_t rv = 0;
    double av = NAN;
    if (num_parse_i64(rank, 1, CONFIG_LORA_RANK_MAX, &rv)) rv = 0;
    if (num_parse_double(alpha, -HUGE_VAL, HUGE_VAL, &av)) av = NAN;  // range: as a float, below
    lc->rank = (int)rv, lc->alpha = (float)av;
    snprintf(lc->targets, sizeof lc->targets, "%s", tg);
    return check_config(r, lc, alpha);
  }
  if (l != LORA_LAYOUT_DIFFUSERS) {
    TSR_TRY(derive_config(r, l, lc));
    return check_config(r, lc, NULL);
  }
  json_t *o = dm ? json_loads(dm, 0, NULL) : NULL;
  json_t *jr = json_object_get(o, PREFIX "r"), *ja = json_object_get(o, PREFIX "lora_alpha");
  json_t *jt = json_object_get(o, PREFIX "target_modules");
  tsr_status st = TSR_OK;
  if (!json_is_integer(jr) || !json_is_number(ja) || !json_is_array(jt))
    st = err_set(TSR_EFORMAT, "%s: no LoRA config in the metadata (tessera.lora.* or "
                 "lora_adapter_metadata with r, lora_alpha, target_modules)", st_path(r));
  size_t i, used = 0;
  json_t *v;
  json_array_foreach(jt, i, v) {
    if (st || !json_is_string(v)) continue;
    used += (size_t)snprintf(lc->targets + used, used < sizeof lc->targets ? sizeof lc->targets - used : 0,
                             "%s%s", i ? "," : "", json_string_value(v));
  }
  if (!st && used >= sizeof lc->targets)
    st = err_set(TSR_EFORMAT, "%s: target_modules longer than %d bytes", st_path(r),
                 LORA_TARGETS_MAX - 1);
  if (!st) lc->rank = (int)json_integer_value(jr), lc->alpha = (float)json_number_value(ja);
  if (!st && !(json_integer_value(jr) >= 1 && json_integer_value(jr) <= CONFIG_LORA_RANK_MAX))
    lc->rank = 0;  // out of int's range: refused below as a rank of 0
  json_decref(o);
  return st ? st : check_config(r, lc, NULL);
}

tsr_status lora_read_config(const char *path, lora_config *lc, char *base, size_t cap) {
  st_reader *r;
  TSR_TRY(st_open(&r, path));
  tsr_status st = config_of(r, lora_layout_of(r), lc);
  const char *b = st_meta(r, "tessera.base_model");
  if (base && cap) snprintf(base, cap, "%s", b ? b : "");
  st_close(&r);
  return st;
}

// Adapters trained on other base weights than m's are refused (a file without
// tessera.base_weights, as PEFT writes it, is taken on trust).
static tsr_status same_base(dit_model *m, const st_reader *r) {
  const char *want = st_meta(r, "tessera.base_weights");
  char got[24];
  if (!want) return TSR_OK;
  TSR_TRY(base_weights_hash(m, got));
  if (strcmp(want, got))
    return err_set(TSR_EMISMATCH, "%s: the adapters were trained on base weights %s (%s), the "
                   "model's are %s", st_path(r), want,
                   st_meta(r, "tessera.base_model") ? st_meta(r, "tessera.base_model") : "?", got);
  return TSR_OK;
}

// 1 if m has the adapter tensor "<module><suffix>".
static int has_tensor(const dit_model *m, const char *module, const char *suffix) {
  char name[320];
  snprintf(name, sizeof name, "%s%s", module, suffix);
  for (int j = 0; j < dit_lora_num_tensors(m); j++)
    if (!strcmp(name, dit_lora_tensor_info(m, j)->name)) return 1;
  return 0;
}

// Every tensor of the file (layout l) is one of m's adapters, and each alpha it holds is the
// model's (the scale of the adapters it computes with).
static tsr_status no_strangers(const dit_model *m, const st_reader *r, lora_layout l) {
  char module[256];
  for (int i = 0; i < st_count(r); i++) {
    const st_tensor *t = st_at(r, i);
    lora_part part;
    float a;
    tsr_status st = lora_layout_parse_key(l, t->name, module, sizeof module, &part);
    const char *suffix = part == LORA_PART_UP ? ".lora_B.weight" : ".lora_A.weight";
    if (st || !has_tensor(m, module, suffix))
      return err_set(TSR_EMISMATCH, "%s: tensor '%s' is no adapter of the model's targets",
                     st_path(r), t->name);
    if (part != LORA_PART_ALPHA) continue;
    TSR_TRY(scalar_of(r, t, &a));
    if (a != dit_lora_get_config(m)->alpha)
      return err_set(TSR_EMISMATCH, "%s: '%s' is %g, the adapters' alpha %g", st_path(r),
                     t->name, a, dit_lora_get_config(m)->alpha);
  }
  return TSR_OK;
}

// Adapter tensor t of m from key of r into dst: F32 as it is, BF16 widened exactly.
static tsr_status read_tensor(const st_reader *r, const char *key, const dit_tensor *t, float *dst) {
  const st_tensor *s = st_find(r, key);
  if (!s) return err_set(TSR_EMISMATCH, "%s: no tensor '%s' (the adapter %s)", st_path(r), key, t->name);
  if (s->dtype != ST_BF16) return st_read(r, key, ST_F32, t->ndim, t->shape, dst);
  int same = s->ndim == t->ndim;
  for (int d = 0; same && d < t->ndim; d++) same = s->shape[d] == t->shape[d];
  if (!same)
    return err_set(TSR_EMISMATCH, "%s: tensor '%s' is not of the adapter's shape (%lld, %lld)",
                   st_path(r), key, (long long)t->shape[0], (long long)t->shape[1]);
  const uint16_t *h = s->data;
  for (size_t j = 0; j < t->numel; j++) {
    uint16_t v;
    memcpy(&v, h + j, 2);  // the mapping is aligned only as the file is
    dst[j] = bf16_to_f32(v);
  }
  return TSR_OK;
}

// Every adapter tensor of m from its key in layout l.
static tsr_status read_layout(const dit_model *m, const st_reader *r, lora_layout l, float *host) {
  char module[MODULE_CAP], key[KEY_CAP];
  for (int i = 0; i < dit_lora_num_tensors(m); i++) {
    const dit_tensor *t = dit_lora_tensor_info(m, i);
    lora_part part;
    TSR_TRY(tensor_key(l, t, module, key, &part));
    TSR_TRY(read_tensor(r, key, t, host + t->offset));
  }
  return TSR_OK;
}

static tsr_status read_adapters(dit_model *m, const st_reader *r, lora_layout l) {
  TSR_TRY(no_strangers(m, r, l));
  size_t n = dit_lora_num_params(m);
  float *host = calloc(n ? n : 1, sizeof(float));
  if (!host) return err_set(TSR_ENOMEM, "%s: no memory", st_path(r));
  tsr_status st = read_layout(m, r, l, host);
  if (!st) st = check_values(m, r, host);
  const kernels_backend *kb = dit_backend(m);
  if (!st) st = kb->to_device(kb, dit_lora_params(m), host, sizeof(float) * n);
  if (!st) st = dit_lora_refresh(m);
  free(host);
  return st;
}

tsr_status lora_load(dit_model *m, const char *path) {
  st_reader *r;
  TSR_TRY(st_open(&r, path));
  tsr_status st = st_verify(r, 0);
  if (!st) st = same_base(m, r);
  lora_config lc;
  lora_layout l = lora_layout_of(r);
  if (!st && !dit_lora_get_config(m) && !(st = config_of(r, l, &lc)))
    st = dit_lora_attach(m, &lc, 0);  // A and B are all read below: the seed is unused
  if (!st) st = read_adapters(m, r, l);
  st_close(&r);
  return st ? err_wrap(st, "lora_load %s: ", path) : TSR_OK;
}

// The metadata of a converted adapter file: src's tessera.* keys (the base's identity) but the
// config's, then the config as lc says in tessera's keys and the layout's own.
static tsr_status convert_meta(st_writer *w, const st_reader *src, const lora_config *lc,
                               lora_layout l) {
  static const char *const KEEP[] = {"tessera.base_weights", "tessera.base_model",
                                     "tessera.base_config", LORA_CAPTION_ENCODER_KEY};
  for (int i = 0; i < 4; i++)
    if (st_meta(src, KEEP[i])) TSR_TRY(st_writer_meta(w, KEEP[i], st_meta(src, KEEP[i])));
  char num[32];
  snprintf(num, sizeof num, "%d", lc->rank);
  TSR_TRY(st_writer_meta(w, "tessera.lora.rank", num));
  if (l == LORA_LAYOUT_KOHYA) TSR_TRY(st_writer_meta(w, "ss_network_dim", num));
  snprintf(num, sizeof num, "%.9g", lc->alpha);
  TSR_TRY(st_writer_meta(w, "tessera.lora.alpha", num));
  if (l == LORA_LAYOUT_KOHYA) TSR_TRY(st_writer_meta(w, "ss_network_alpha", num));
  TSR_TRY(st_writer_meta(w, "tessera.lora.targets", lc->targets));
  TSR_TRY(st_writer_meta(w, "format", "pt"));
  if (l != LORA_LAYOUT_DIFFUSERS) return TSR_OK;
  char *dm = diffusers_metadata(lc);
  tsr_status st = dm ? st_writer_meta(w, "lora_adapter_metadata", dm)
                     : err_set(TSR_ENOMEM, "no memory");
  free(dm);
  return st;
}

// src's tensors under layout l's keys (their dtype and bytes as they are) into w, an alpha
// scalar (*alpha, alive until commit) beside each down matrix where l keeps one.
static tsr_status convert_tensors(st_writer *w, const st_reader *src, lora_layout from,
                                  lora_layout l, const float *alpha) {
  char module[256], key[320];
  for (int i = 0; i < st_count(src); i++) {
    const st_tensor *t = st_at(src, i);
    lora_part part;
    TSR_TRY(lora_layout_parse_key(from, t->name, module, sizeof module, &part));
    if (part == LORA_PART_ALPHA) continue;  // the config's, written below
    TSR_TRY(lora_layout_key(l, module, part, key, sizeof key));
    TSR_TRY(st_writer_add(w, key, t->dtype, t->ndim, t->shape, t->data));
    if (part != LORA_PART_DOWN || l == LORA_LAYOUT_DIFFUSERS) continue;
    TSR_TRY(lora_layout_key(l, module, LORA_PART_ALPHA, key, sizeof key));
    TSR_TRY(st_writer_add(w, key, ST_F32, 0, NULL, alpha));
  }
  return TSR_OK;
}

tsr_status lora_convert_file(const char *src, const char *dst, lora_layout l) {
  st_reader *r;
  TSR_TRY(st_open(&r, src));
  lora_layout from = lora_layout_of(r);
  lora_config lc;
  st_writer *w = NULL;
  tsr_status st = st_verify(r, 0);
  if (!st) st = config_of(r, from, &lc);
  float alpha = lc.alpha;
  if (!st) st = st_writer_new(&w);
  if (!st) st = convert_tensors(w, r, from, l, &alpha);
  if (!st) st = convert_meta(w, r, &lc, l);
  if (!st) st = st_writer_commit(w, dst);
  st_writer_free(&w);
  st_close(&r);
  return st ? err_wrap(st, "LoRA %s -> %s (%s layout): ", src, dst, lora_layout_name(l)) : TSR_OK;
}

// The merged weights of m, tensor by tensor, as a weights-only checkpoint with cm's metadata.
// The merged checkpoint's caption encoder into out (n bytes): the adapters' (the run's
// store's: what the merged model now answers to), else the base's; "" when neither says.
static tsr_status merged_caption_encoder(const char *adapters, const ckpt_meta *cm, char *out,
                                         size_t n) {
  st_reader *a;
  TSR_TRY(st_open(&a, adapters));
  const char *ce = st_meta(a, LORA_CAPTION_ENCODER_KEY);
  if (!ce || !*ce) ce = cm->caption_encoder;
  tsr_status st = strlen(ce) < n ? TSR_OK
                  : err_set(TSR_EFORMAT, "%s: metadata '%s' over %zu bytes", adapters,
                            LORA_CAPTION_ENCODER_KEY, n - 1);
  if (!st) snprintf(out, n, "%s", ce);
  st_close(&a);
  return st;
}

static tsr_status write_merged(dit_model *m, const ckpt_meta *cm, const char *src,
                               const char *adapters, const char *dst) {
  char ce[sizeof cm->caption_encoder];
  TSR_TRY(merged_caption_encoder(adapters, cm, ce, sizeof ce));
  st_reader *r;
  TSR_TRY(st_open(&r, src));
  const char *dc = st_meta(r, "diffusers_config");
  char from[2048];
  snprintf(from, sizeof from, "%s with the LoRA adapters %s merged", src, adapters);
  const char *const extra[2][2] = {{"converted_from", from}, {"diffusers_config", dc ? dc : ""}};
  ckpt_state cs = {.mc = &cm->mc, .tc = &cm->tc, .store = &cm->store,
                   .store_clips = cm->clips, .labels = (const char *const *)cm->labels,
                   .n_labels = cm->n_labels, .store_fingerprint = cm->store_fingerprint,
                   .caption_encoder = ce};
  dit_table tab = {0};
  ckpt_weights_writer *ww = NULL;
  const kernels_backend *kb = dit_backend(m);
  size_t n = dit_num_params(m);
  float *host = malloc(sizeof(float) * n);
  tsr_status st = host ? TSR_OK : err_set(TSR_ENOMEM, "no memory for %zu weights", n);
  if (!st) st = kb->to_host(kb, host, dit_params(m), sizeof(float) * n);
  if (!st) st = dit_table_make(&cm->mc, &tab);
  if (!st) st = ckpt_weights_begin(&ww, dst, &tab, &cs, extra, dc ? 2 : 1);
  for (int i = 0; !st && i < tab.n; i++) {
    // finite adapters of a huge scale can still overflow a merged weight
    const dit_tensor *t = &tab.t[i];
    size_t bad = num_first_nonfinite(host + t->offset, t->numel);
    if (bad < t->numel)
      st = err_set(TSR_EINVAL, "merged tensor %s has a non-finite value (%g at element %zu): "
                   "the adapters of %s overflow the weights of %s; nothing was written",
                   t->name, host[t->offset + bad], bad, adapters, src);
    if (!st) st = ckpt_weights_tensor(ww, host + t->offset);
  }
  if (!st) st = ckpt_weights_commit(ww);
  ckpt_weights_free(&ww);
  free(host);
  dit_table_free(&tab);
  st_close(&r);
  return st;
}

tsr_status lora_merge_checkpoint(const kernels_backend *kb, const char *src, const char *adapters,
                                 const char *dst) {
  ckpt_meta cm;
  TSR_TRY(ckpt_read_meta(src, &cm));
  dit_model *m = NULL;
  tsr_status st = dit_create(&m, &cm.mc, kb, 1, 1);
  if (!st) st = ckpt_load_model(src, m, 0);
  if (!st) st = lora_load(m, adapters);
  if (!st) st = dit_lora_merge(m);
  if (!st) st = write_merged(m, &cm, src, adapters, dst);
  dit_free(&m);
  ckpt_meta_free(&cm);
  return st;
}
