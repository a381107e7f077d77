// model/io/wan_source.c — the files `tessera convert` reads a Wan transformer from, in
// diffusers' or the original naming (model/io/wan_source.h).
#include "model/io/wan_source.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"

#define DIF_WEIGHTS "diffusion_pytorch_model.safetensors"
#define DIF_INDEX "diffusion_pytorch_model.safetensors.index.json"
#define ORIG_PREFIX "model.diffusion_model."

void wan_source_close(wan_source *s) {
  for (int i = 0; i < s->n_files; i++) st_close(&s->files[i]);
  free(s->config);
  memset(s, 0, sizeof *s);
}

const st_tensor *wan_source_find(const wan_source *s, const char *name, const st_reader **f) {
  for (int i = 0; i < s->n_files; i++) {
    const st_tensor *t = st_find(s->files[i], name);
    if (t) return *f = s->files[i], t;
  }
  return NULL;
}

// The JSON of file `path` (NULL if it does not parse: je says why), read only if it is a
// regular file (core/fs.h: a FIFO named config.json hung convert).
static tsr_status load_json(const char *path, json_t **o, json_error_t *je) {
  int fd = -1;
  TSR_TRY(fs_open_regular(path, &fd));
  *o = json_loadfd(fd, 0, je);
  close(fd);
  return TSR_OK;
}

// 1 if an entry `path` exists (whatever it is: a FIFO is refused when it is opened).
static int present(const char *path) { return access(path, F_OK) == 0; }

// The shard files the index names (each once), opened into s.
static tsr_status open_shards(const char *dir, const char *index, wan_source *s) {
  json_error_t je = {0};
  json_t *o = NULL;
  TSR_TRY(load_json(index, &o, &je));
  json_t *map = json_object_get(o, "weight_map");
  tsr_status st = json_is_object(map) ? TSR_OK
               : err_set(TSR_EFORMAT, "%s: no 'weight_map' object (line %d: %s)", index, je.line,
                         je.text);
  const char *key;
  json_t *v;
  char opened[WAN_MAX_SHARDS][256];
  json_object_foreach(map, key, v) {
    const char *f = json_string_value(v);
    int seen = 0;
    for (int i = 0; f && i < s->n_files; i++) seen |= !strcmp(opened[i], f);
    if (st || seen) continue;
    char path[PATH_MAX];
    if (!f || strchr(f, '/') || strlen(f) >= sizeof opened[0])
      st = err_set(TSR_EFORMAT, "%s: tensor %s: file '%s' is not a file name in the folder",
                  index, key, f ? f : "(not a string)");
    else if (s->n_files == WAN_MAX_SHARDS)
      st = err_set(TSR_EINVAL, "%s: more than %d shard files", index, WAN_MAX_SHARDS);
    else if (!(st = fs_join(path, sizeof path, dir, f)) &&
             !(st = st_open(&s->files[s->n_files], path)))
      snprintf(opened[s->n_files++], sizeof opened[0], "%s", f);
  }
  json_decref(o);
  return st;
}

// Reads a JSON object file's text (compact) into *text.
static tsr_status read_text(const char *path, char **text) {
  json_error_t je = {0};
  json_t *o = NULL;
  TSR_TRY(load_json(path, &o, &je));
  if (!json_is_object(o)) {
    json_decref(o);
    return err_set(TSR_EFORMAT, "%s: not a JSON object (line %d: %s)", path, je.line, je.text);
  }
  *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  return *text ? TSR_OK : err_set(TSR_ENOMEM, "%s: no memory", path);
}

// Original tensor `name` (after the prefix) of ndim dims into shape; TSR_EMISMATCH naming it
// when absent or of another rank.
static tsr_status orig_shape(const wan_source *s, const char *name, int ndim, int64_t *shape) {
  char full[256];
  const st_reader *f;
  snprintf(full, sizeof full, "%s%s", s->prefix, name);
  const st_tensor *t = wan_source_find(s, full, &f);
  if (!t || t->ndim != ndim)
    return err_set(TSR_EMISMATCH, "original Wan checkpoint: tensor %s is %s (a %d-dim tensor "
                   "expected)", full, t ? "of another rank" : "missing", ndim);
  memcpy(shape, t->shape, sizeof(int64_t) * (size_t)ndim);
  return TSR_OK;
}

// The heads of an original checkpoint of hidden D (wan_source.h: config.json's num_heads,
// a model.heads override, or D / 128) into *H, and where they came from into s->heads_from.
static tsr_status orig_heads(wan_source *s, const char *cfg_text, char *const *ov, int n_ov,
                             int64_t D, int *H) {
  *H = 0;
  json_t *o = cfg_text ? json_loads(cfg_text, 0, NULL) : NULL;
  json_t *nh = json_object_get(o, "num_heads");
  json_int_t nhv = json_is_integer(nh) ? json_integer_value(nh) : 0;
  int given = nh && !json_is_null(nh);
  json_decref(o);
  if (given && (nhv < 1 || nhv > 1024))  // config.c's range of model.heads
    return err_set(TSR_EINVAL, "original Wan checkpoint: config.json's num_heads is %s: give "
                   "a whole number in [1, 1024], or remove the key (then hidden / 128)",
                   nhv ? "out of [1, 1024]" : "not a positive integer");
  *H = (int)nhv;
  if (*H > 0) return snprintf(s->heads_from, sizeof s->heads_from, "config.json num_heads"), TSR_OK;
  for (int i = 0; i < n_ov; i++)
    if (!strncmp(ov[i], "model.heads=", 12)) *H = atoi(ov[i] + 12);
  if (*H > 0) return snprintf(s->heads_from, sizeof s->heads_from, "--set model.heads"), TSR_OK;
  if (D % 128)
    return err_set(TSR_EINVAL, "original Wan checkpoint: hidden size %lld is no multiple of "
                   "128 (Wan's head dimension), and the heads are no tensor's shape: give "
                   "--set model.heads=N", (long long)D);
  *H = (int)(D / 128);
  snprintf(s->heads_from, sizeof s->heads_from, "hidden / 128");
  return TSR_OK;
}

// A diffusers config.json text for the original checkpoint in s, from its shapes.
static tsr_status orig_config(wan_source *s, const char *cfg_text, char *const *ov, int n_ov) {
  const char *i2v[] = {"img_emb.proj.0.weight", "blocks.0.cross_attn.k_img.weight"};
  for (size_t i = 0; i < sizeof i2v / sizeof *i2v; i++) {
    char full[128];
    const st_reader *f;
    snprintf(full, sizeof full, "%s%s", s->prefix, i2v[i]);
    if (wan_source_find(s, full, &f))
      return err_set(TSR_EINVAL, "%s: tensor %s: an image-to-video model, which tessera does "
                     "not run yet", st_path(f), full);
  }
  int64_t pe[5], te[2], tm[2], ffn[2], hd[2];
  TSR_TRY(orig_shape(s, "patch_embedding.weight", 5, pe));
  TSR_TRY(orig_shape(s, "text_embedding.0.weight", 2, te));
  TSR_TRY(orig_shape(s, "time_embedding.0.weight", 2, tm));
  TSR_TRY(orig_shape(s, "blocks.0.ffn.0.weight", 2, ffn));
  TSR_TRY(orig_shape(s, "head.head.weight", 2, hd));
  int64_t D = pe[0], C = pe[1], P = pe[1] * pe[2] * pe[3] * pe[4];
  for (int i = 0; i < 5; i++)  // a zero here divides by zero below (the heads: hidden / 128)
    if (pe[i] < 1)
      return err_set(TSR_EFORMAT, "original Wan checkpoint: tensor %spatch_embedding.weight has "
                     "shape (%lld, %lld, %lld, %lld, %lld): a size of 0 (hidden, channels, "
                     "patch) is no model", s->prefix, (long long)pe[0], (long long)pe[1],
                     (long long)pe[2], (long long)pe[3], (long long)pe[4]);
  if (hd[0] != P)
    return err_set(TSR_EINVAL, "original Wan checkpoint: head.head has %lld outputs, the patch "
                   "embedding %lld inputs (an image-to-video model's extra input channels: not "
                   "run by tessera yet)", (long long)hd[0], (long long)P);
  int depth = 0, H;
  for (;; depth++) {
    char name[64], full[128];
    const st_reader *f;
    snprintf(name, sizeof name, "blocks.%d.modulation", depth);
    snprintf(full, sizeof full, "%s%s", s->prefix, name);
    if (!wan_source_find(s, full, &f)) break;
  }
  if (depth == 0)
    return err_set(TSR_EMISMATCH, "original Wan checkpoint: no %sblocks.0.modulation",
                   s->prefix);
  TSR_TRY(orig_heads(s, cfg_text, ov, n_ov, D, &H));
  if (D % H)
    return err_set(TSR_EINVAL, "original Wan checkpoint: hidden size %lld is not divisible by "
                   "%d heads (%s)", (long long)D, H, s->heads_from);
  json_t *o = json_pack("{s:s, s:[I, I, I], s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:b, s:s, "
                        "s:f, s:n, s:n, s:i, s:n}",
                        "_class_name", "WanTransformer3DModel", "patch_size", pe[2], pe[3], pe[4],
                        "num_attention_heads", H, "attention_head_dim", D / H, "in_channels", C,
                        "out_channels", C, "text_dim", te[1], "freq_dim", tm[1], "ffn_dim",
                        ffn[0], "num_layers", depth, "cross_attn_norm", 1, "qk_norm",
                        "rms_norm_across_heads", "eps", 1e-6, "image_dim", "added_kv_proj_dim",
                        "rope_max_seq_len", 1024, "pos_embed_seq_len");
  s->config = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  return s->config ? TSR_OK : err_set(TSR_ENOMEM, "original Wan checkpoint: no memory");
}

// Which naming the opened files use (wan_source.h): sets s->orig and s->prefix.
static void detect_naming(wan_source *s) {
  const st_reader *f;
  if (wan_source_find(s, "head.modulation", &f)) s->orig = 1;
  else if (wan_source_find(s, ORIG_PREFIX "head.modulation", &f))
    s->orig = 1, snprintf(s->prefix, sizeof s->prefix, "%s", ORIG_PREFIX);
}

tsr_status wan_source_open(const char *src, char *const *overrides, int n_overrides,
                           wan_source *s) {
  memset(s, 0, sizeof *s);
  size_t n = strlen(src);
  if (n > 4 && !strcmp(src + n - 4, ".pth"))
    return err_set(TSR_EINVAL, "%s: a PyTorch pickle, which tessera does not read: save it as "
                   "safetensors first, e.g. python -c \"import torch, safetensors.torch as s; "
                   "s.save_file(torch.load('%s', map_location='cpu'), 'model.safetensors')\"",
                   src, src);
  char cfg[PATH_MAX], idx[PATH_MAX], one[PATH_MAX];
  char *cfg_text = NULL;
  tsr_status st = TSR_OK;
  if (!fs_check_regular(src)) {  // one file: the original naming
    if (!(st = st_open(&s->files[0], src))) s->n_files = 1;
    if (!st) detect_naming(s);
    if (!st && !s->orig)
      st = err_set(TSR_EINVAL, "%s: not an original Wan checkpoint (no head.modulation tensor); "
                  "a diffusers model is a folder with config.json", src);
  } else {
    st = fs_join(cfg, sizeof cfg, src, "config.json");
    if (!st) st = fs_join(idx, sizeof idx, src, DIF_INDEX);
    if (!st) st = fs_join(one, sizeof one, src, DIF_WEIGHTS);
    if (!st && !present(cfg) && !present(idx) && !present(one))
      st = err_set(TSR_EINVAL, "folder %s holds no model: neither %s (a diffusers transformer "
                  "folder) nor %s or %s", src, cfg, one, idx);
    else if (!st && present(idx)) st = open_shards(src, idx, s);
    else if (!st && !(st = st_open(&s->files[0], one))) s->n_files = 1;
    if (!st) detect_naming(s);
    // a diffusers folder needs its config.json; an original one's is optional (num_heads)
    if (!st && (!s->orig || present(cfg))) st = read_text(cfg, &cfg_text);
    if (st)
      st = err_wrap(st, "folder %s (config.json and %s, or its shards with %s): ", src,
                   DIF_WEIGHTS, DIF_INDEX);
  }
  if (!st && s->orig) st = orig_config(s, cfg_text, overrides, n_overrides);
  else if (!st) s->config = cfg_text, cfg_text = NULL;
  free(cfg_text);
  if (st) wan_source_close(s);
  return st;
}
