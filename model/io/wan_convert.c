// model/io/wan_convert.c — diffusers' WanTransformer3DModel folder <-> tessera checkpoint
// (model/io/wan_convert.h): the name map, the layout changes, the source folder, both ways.
#include "model/io/wan_convert.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/bf16.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/num.h"
#include "core/safetensors.h"
#include "model/dit.h"
#include "model/io/checkpoint.h"
#include "model/io/wan_source.h"

#define WAN_TEXT_LEN 512      // the pipeline pads every caption to 512 umT5 tokens
#define DIF_WEIGHTS "diffusion_pytorch_model.safetensors"

// ---- the name map -----------------------------------------------------------------------
// How a tensor's values move between the two layouts.
typedef enum {
  K_COPY,    // same values, same order (biases, norm weights)
  K_LINEAR,  // tessera (in, out) = diffusers (out, in) transposed
  K_PATCH,   // tessera (P, D), P in (t, y, x, c) order = Conv3d (D, C, pt, ph, pw)
  K_TABLE,   // tessera (k D) = diffusers (1, k, D): the modulation tables
} map_kind;

// Name prefixes: tessera's, diffusers', the original Wan checkpoint's (wan_source.h; the same
// shapes as diffusers'; the original's norm3 is diffusers' norm2).
typedef struct {
  const char *tsr, *name[2];  // name[0] diffusers, name[1] original
} prefix_map;

static const prefix_map TOP[] = {
    {"x_embed.", {"patch_embedding.", "patch_embedding."}},
    {"t_embed.fc1.", {"condition_embedder.time_embedder.linear_1.", "time_embedding.0."}},
    {"t_embed.fc2.", {"condition_embedder.time_embedder.linear_2.", "time_embedding.2."}},
    {"time_proj.", {"condition_embedder.time_proj.", "time_projection.1."}},
    {"text_embed.fc1.", {"condition_embedder.text_embedder.linear_1.", "text_embedding.0."}},
    {"text_embed.fc2.", {"condition_embedder.text_embedder.linear_2.", "text_embedding.2."}},
    {"final.modulation", {"scale_shift_table", "head.modulation"}},
    {"final.linear.", {"proj_out.", "head.head."}},
};
// Inside "blocks.{i}." on every side.
static const prefix_map BLOCK[] = {
    {"modulation", {"scale_shift_table", "modulation"}},
    {"q.", {"attn1.to_q.", "self_attn.q."}},
    {"k.", {"attn1.to_k.", "self_attn.k."}},
    {"v.", {"attn1.to_v.", "self_attn.v."}},
    {"q_norm.", {"attn1.norm_q.", "self_attn.norm_q."}},
    {"k_norm.", {"attn1.norm_k.", "self_attn.norm_k."}},
    {"proj.", {"attn1.to_out.0.", "self_attn.o."}},
    {"fc1.", {"ffn.net.0.proj.", "ffn.0."}},
    {"fc2.", {"ffn.net.2.", "ffn.2."}},
    {"cross.norm.", {"norm2.", "norm3."}},
    {"cross.q.", {"attn2.to_q.", "cross_attn.q."}},
    {"cross.k.", {"attn2.to_k.", "cross_attn.k."}},
    {"cross.v.", {"attn2.to_v.", "cross_attn.v."}},
    {"cross.q_norm.", {"attn2.norm_q.", "cross_attn.norm_q."}},
    {"cross.k_norm.", {"attn2.norm_k.", "cross_attn.norm_k."}},
    {"cross.proj.", {"attn2.to_out.0.", "cross_attn.o."}},
};

// rest with prefix map[i].tsr replaced by map[i].name[side] into out; 0 if no prefix matches.
static int map_prefix(const prefix_map *map, int n, int side, const char *rest, const char *head,
                      char *out, size_t cap) {
  for (int i = 0; i < n; i++) {
    size_t l = strlen(map[i].tsr);
    if (!strncmp(rest, map[i].tsr, l))
      return (size_t)snprintf(out, cap, "%s%s%s", head, map[i].name[side], rest + l) < cap;
  }
  return 0;
}

// Module (a name without ".weight") `module` of naming `from` (0 diffusers, 1 original; with
// flat, the original's with every '.' a '_', as kohya's keys spell it) in naming `to` into out.
static int module_between(const char *module, int from, int flat, int to, char *out, size_t cap) {
  int blk, used = 0;
  const prefix_map *map = TOP;
  int n = (int)(sizeof TOP / sizeof TOP[0]);
  const char *rest = module;
  char head[32] = "";
  if (sscanf(module, flat ? "blocks_%d_%n" : "blocks.%d.%n", &blk, &used) == 1 && used > 0) {
    map = BLOCK, n = (int)(sizeof BLOCK / sizeof BLOCK[0]), rest = module + used;
    snprintf(head, sizeof head, "blocks.%d.", blk);
  }
  for (int i = 0; i < n; i++) {
    const char *f = map[i].name[from];
    size_t l = strlen(f) - 1;  // without the closing '.'
    if (f[l] != '.' || strlen(rest) != l) continue;
    int same = 1;
    for (size_t j = 0; j < l && same; j++) same = rest[j] == (flat && f[j] == '.' ? '_' : f[j]);
    const char *t = map[i].name[to];
    if (same) return (size_t)snprintf(out, cap, "%s%.*s", head, (int)strlen(t) - 1, t) < cap;
  }
  return 0;
}

tsr_status wan_module_to_original(const char *module, char *out, size_t cap) {
  if (module_between(module, 0, 0, 1, out, cap)) return TSR_OK;
  return err_set(TSR_EINVAL, "module %s has no name in the original Wan checkpoint (only the "
                 "Wan family's linear layers have one)", module);
}

tsr_status wan_module_from_original(const char *module, int flat, char *out, size_t cap) {
  if (module_between(module, 1, flat, 0, out, cap)) return TSR_OK;
  return err_set(TSR_EINVAL, "'%s' is no module of the original Wan checkpoint", module);
}

// The name of tessera tensor t on `side` (0 diffusers, 1 original, after `prefix`) into out
// (cap bytes) and how its values move (the same for both: their shapes are the same).
static tsr_status side_name(const dit_tensor *t, int side, const char *prefix, char *out,
                            size_t cap, map_kind *kind) {
  int blk, used = 0, ok;
  char head[64];
  if (sscanf(t->name, "blocks.%d.%n", &blk, &used) == 1 && used > 0) {
    snprintf(head, sizeof head, "%sblocks.%d.", prefix, blk);
    ok = map_prefix(BLOCK, (int)(sizeof BLOCK / sizeof BLOCK[0]), side, t->name + used, head,
                    out, cap);
  } else {
    ok = map_prefix(TOP, (int)(sizeof TOP / sizeof TOP[0]), side, t->name, prefix, out, cap);
  }
  if (!ok)
    return err_set(TSR_EINVAL, "wan convert: tensor %s has no diffusers name (not a Wan "
                   "model: model.family = wan?)", t->name);
  *kind = !strcmp(t->name, "x_embed.weight") ? K_PATCH
        : strstr(t->name, "modulation")      ? K_TABLE
        : t->ndim == 2                       ? K_LINEAR
                                             : K_COPY;
  return TSR_OK;
}

// The diffusers name of tessera tensor t.
static tsr_status dif_name(const dit_tensor *t, char *out, size_t cap, map_kind *kind) {
  return side_name(t, 0, "", out, cap, kind);
}

// The name of tessera tensor t in source s (its naming and prefix).
static tsr_status src_name(const wan_source *s, const dit_tensor *t, char *out, size_t cap,
                           map_kind *kind) {
  return side_name(t, s->orig, s->prefix, out, cap, kind);
}

// The diffusers shape of tessera tensor t (kind k) of config c into shape; its dims.
static int dif_shape(const dit_tensor *t, map_kind k, const dit_config *c, int64_t *shape) {
  int64_t D = c->hidden;
  switch (k) {
  case K_LINEAR: shape[0] = t->shape[1], shape[1] = t->shape[0]; return 2;
  case K_TABLE: shape[0] = 1, shape[1] = (int64_t)t->numel / D, shape[2] = D; return 3;
  case K_PATCH:
    shape[0] = D, shape[1] = c->channels, shape[2] = c->pt, shape[3] = c->ph, shape[4] = c->pw;
    return 5;
  default: shape[0] = t->shape[0]; return 1;
  }
}

// ---- values -----------------------------------------------------------------------------
static float elem(const void *src, st_dtype dt, size_t i) {
  if (dt == ST_BF16) {
    uint16_t h;
    memcpy(&h, (const char *)src + 2 * i, sizeof h);  // mmap data is 2-byte aligned at most
    return bf16_to_f32(h);
  }
  float f;
  memcpy(&f, (const char *)src + 4 * i, sizeof f);
  return f;
}

// Conv3d (D, C, pt, ph, pw) index of tessera x_embed row p (t, y, x, c order), column d.
static size_t patch_index(const dit_config *c, size_t p, size_t d) {
  size_t C = (size_t)c->channels, pw = (size_t)c->pw, ph = (size_t)c->ph, pt = (size_t)c->pt;
  size_t ch = p % C, x = p / C % pw, y = p / C / pw % ph, t = p / C / pw / ph;
  return (((d * C + ch) * pt + t) * ph + y) * pw + x;
}

// dst (tessera layout, t->numel floats) from src (diffusers layout, dtype dt).
static void to_tessera(const dit_tensor *t, map_kind k, const dit_config *c, const void *src,
                       st_dtype dt, float *dst) {
  size_t K = (size_t)t->shape[0], N = t->ndim == 2 ? (size_t)t->shape[1] : 1;
  if (k == K_LINEAR) {  // tiles of 32 x 32: both sides stay in cache
    for (size_t i0 = 0; i0 < K; i0 += 32)
      for (size_t o0 = 0; o0 < N; o0 += 32)
        for (size_t i = i0; i < K && i < i0 + 32; i++)
          for (size_t o = o0; o < N && o < o0 + 32; o++) dst[i * N + o] = elem(src, dt, o * K + i);
  } else if (k == K_PATCH) {
    for (size_t p = 0; p < K; p++)
      for (size_t d = 0; d < N; d++) dst[p * N + d] = elem(src, dt, patch_index(c, p, d));
  } else {
    for (size_t i = 0; i < t->numel; i++) dst[i] = elem(src, dt, i);
  }
}

// dst (diffusers layout, fp32) from src (tessera layout): the inverse of to_tessera.
static void to_diffusers(const dit_tensor *t, map_kind k, const dit_config *c, const float *src,
                         float *dst) {
  size_t K = (size_t)t->shape[0], N = t->ndim == 2 ? (size_t)t->shape[1] : 1;
  if (k == K_LINEAR) {
    for (size_t o0 = 0; o0 < N; o0 += 32)
      for (size_t i0 = 0; i0 < K; i0 += 32)
        for (size_t o = o0; o < N && o < o0 + 32; o++)
          for (size_t i = i0; i < K && i < i0 + 32; i++) dst[o * K + i] = src[i * N + o];
  } else if (k == K_PATCH) {
    for (size_t p = 0; p < K; p++)
      for (size_t d = 0; d < N; d++) dst[patch_index(c, p, d)] = src[p * N + d];
  } else {
    memcpy(dst, src, t->numel * sizeof(float));
  }
}

// ---- the config ---------------------------------------------------------------------------
// Integer `key` of object o into *v (absent or null: def, or an error when def < 0).
static tsr_status json_int(const json_t *o, const char *key, int def, int *v, const char *where) {
  json_t *j = json_object_get(o, key);
  if ((!j || json_is_null(j)) && def >= 0) return *v = def, TSR_OK;
  if (!json_is_integer(j) || json_integer_value(j) < 1 || json_integer_value(j) > INT_MAX)
    return err_set(TSR_EFORMAT, "%s: '%s' is %s, not a positive integer", where, key,
                   j ? "something else" : "missing");
  *v = (int)json_integer_value(j);
  return TSR_OK;
}

// Refuses what tessera does not run: image-to-video inputs, other norms.
static tsr_status check_supported(const json_t *o, const char *where) {
  const char *nulls[] = {"image_dim", "added_kv_proj_dim", "pos_embed_seq_len"};
  for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++) {
    json_t *j = json_object_get(o, nulls[i]);
    if (j && !json_is_null(j))
      return err_set(TSR_EINVAL, "%s: '%s' is set: an image-to-video model, which tessera does "
                     "not run yet (text-to-video and TI2V's text path only)", where, nulls[i]);
  }
  const char *cls = json_string_value(json_object_get(o, "_class_name"));
  if (cls && strcmp(cls, "WanTransformer3DModel"))
    return err_set(TSR_EINVAL, "%s: _class_name is %s, not WanTransformer3DModel", where, cls);
  const char *qk = json_string_value(json_object_get(o, "qk_norm"));
  if (json_object_get(o, "qk_norm") && (!qk || strcmp(qk, "rms_norm_across_heads")))
    return err_set(TSR_EINVAL, "%s: qk_norm is not rms_norm_across_heads", where);
  json_t *xn = json_object_get(o, "cross_attn_norm");
  if (xn && !json_is_true(xn))
    return err_set(TSR_EINVAL, "%s: cross_attn_norm false: tessera's Wan family has the "
                   "cross-attention's affine LayerNorm", where);
  return TSR_OK;
}

// The shape keys of config object o as tessera overrides into ov (n of them, text in buf).
static tsr_status shape_overrides(const json_t *o, const char *where, char ov[][64], int *n) {
  int H, Dh, cin, cout, tdim, fdim, ffn, depth, pt, ph, pw;
  json_t *ps = json_object_get(o, "patch_size");
  if (!json_is_array(ps) || json_array_size(ps) != 3)
    return err_set(TSR_EFORMAT, "%s: 'patch_size' is not a list of 3 integers", where);
  pt = (int)json_integer_value(json_array_get(ps, 0));
  ph = (int)json_integer_value(json_array_get(ps, 1));
  pw = (int)json_integer_value(json_array_get(ps, 2));
  tsr_status st = json_int(o, "num_attention_heads", 40, &H, where);
  if (!st) st = json_int(o, "attention_head_dim", 128, &Dh, where);
  if (!st) st = json_int(o, "in_channels", 16, &cin, where);
  if (!st) st = json_int(o, "out_channels", cin, &cout, where);
  if (!st) st = json_int(o, "text_dim", 4096, &tdim, where);
  if (!st) st = json_int(o, "freq_dim", 256, &fdim, where);
  if (!st) st = json_int(o, "ffn_dim", 13824, &ffn, where);
  if (!st) st = json_int(o, "num_layers", 40, &depth, where);
  if (!st && cout != cin)
    st = err_set(TSR_EINVAL, "%s: out_channels %d != in_channels %d (an image-to-video model's "
                "extra inputs: not run by tessera yet)", where, cout, cin);
  if (st) return st;
  json_t *e = json_object_get(o, "eps");
  double eps = json_is_number(e) ? json_number_value(e) : 1e-6;
  int k = 0;
#define OV(...) snprintf(ov[k++], 64, __VA_ARGS__)
  OV("model.family=wan"), OV("model.hidden=%lld", (long long)H * Dh), OV("model.heads=%d", H);
  OV("model.depth=%d", depth), OV("model.ffn_dim=%d", ffn), OV("model.pt=%d", pt);
  OV("model.ph=%d", ph), OV("model.pw=%d", pw), OV("model.channels=%d", cin);
  OV("model.freq_dim=%d", fdim), OV("model.text_dim=%d", tdim);
  OV("model.text_len=%d", WAN_TEXT_LEN), OV("model.num_classes=0"), OV("model.rope_theta=10000");
  OV("model.text_pad=1");
  OV("model.ln_eps=%.17g", eps), OV("model.rms_eps=%.17g", eps), OV("model.recompute=1");
#undef OV
  *n = k;
  return TSR_OK;
}

tsr_status wan_config_from_json(const char *json_text, const char *where,
                                char *const *overrides, int n_overrides, dit_config *mc,
                                train_config *tc) {
  json_error_t je;
  json_t *o = json_loads(json_text, 0, &je);
  if (!json_is_object(o)) {
    json_decref(o);
    return err_set(TSR_EFORMAT, "%s: not a JSON object (line %d: %s)", where, je.line, je.text);
  }
  char ov[24][64];
  int n = 0;
  tsr_status st = check_supported(o, where);
  if (!st) st = shape_overrides(o, where, ov, &n);
  json_decref(o);
  if (st) return st;
  char **all = malloc(sizeof(char *) * (size_t)(n + n_overrides + 1));
  if (!all) return err_set(TSR_ENOMEM, "%s: no memory", where);
  for (int i = 0; i < n; i++) all[i] = ov[i];
  for (int i = 0; i < n_overrides; i++) all[n + i] = overrides[i];  // the user's win
  st = config_load(NULL, all, n + n_overrides, mc, tc, NULL);
  free(all);
  return st ? err_wrap(st, "%s: ", where) : TSR_OK;
}

// ---- the source ------------------------------------------------------------------------
static void shape_text(char *buf, size_t n, int nd, const int64_t *sh) {
  size_t u = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < nd && u < n; i++) u += (size_t)snprintf(buf + u, n - u, "%s%lld", i ? ", " : "", (long long)sh[i]);
  if (u < n) snprintf(buf + u, n - u, ")");
}

// Checks that source tensor `got` (file f) is tessera tensor t's: dtype F32/BF16, shape.
static tsr_status check_tensor(const wan_source *s, const st_reader *f, const st_tensor *got,
                               const dit_tensor *t, const dit_config *c) {
  map_kind k;
  char dn[256], want_s[96], got_s[96];
  int64_t want[5];
  tsr_status st = src_name(s, t, dn, sizeof dn, &k);
  if (st) return st;
  int nd = dif_shape(t, k, c, want);
  if (got->dtype != ST_F32 && got->dtype != ST_BF16)
    return err_set(TSR_EFORMAT, "%s: tensor %s is %s, not F32 or BF16", st_path(f), dn,
                   st_dtype_name(got->dtype));
  int same = got->ndim == nd;
  for (int i = 0; same && i < nd; i++) same = got->shape[i] == want[i];
  if (same) return TSR_OK;
  shape_text(want_s, sizeof want_s, nd, want), shape_text(got_s, sizeof got_s, got->ndim, got->shape);
  return err_set(TSR_EMISMATCH, "%s: tensor %s has shape %s, the config's model has %s",
                 st_path(f), dn, got_s, want_s);
}

// Every tensor of the model in the folder with its shape and a dtype tessera reads, and no
// other tensor in it (named if there is one); *max_numel: the largest tensor.
static tsr_status check_source(const wan_source *s, const dit_table *tab, const dit_config *c,
                               size_t *max_numel) {
  int64_t found = 0, total = 0;
  *max_numel = 1;
  for (int i = 0; i < tab->n; i++) {
    const dit_tensor *t = &tab->t[i];
    char dn[256];
    map_kind k;
    const st_reader *f = NULL;
    TSR_TRY(src_name(s, t, dn, sizeof dn, &k));
    const st_tensor *got = wan_source_find(s, dn, &f);
    if (!got)
      return err_set(TSR_EMISMATCH, "tensor %s (tessera %s) is not in the source (another "
                     "model, or a damaged download?)", dn, t->name);
    TSR_TRY(check_tensor(s, f, got, t, c));
    found++;
    if (t->numel > *max_numel) *max_numel = t->numel;
  }
  for (int i = 0; i < s->n_files; i++) total += st_count(s->files[i]);
  if (total == found) return TSR_OK;
  for (int i = 0; i < s->n_files; i++)  // name the tensor no model tensor maps to
    for (int j = 0; j < st_count(s->files[i]); j++) {
      const char *name = st_at(s->files[i], j)->name;
      int known = 0;
      for (int k = 0; k < tab->n && !known; k++) {
        char dn[256];
        map_kind kind;
        known = !src_name(s, &tab->t[k], dn, sizeof dn, &kind) && !strcmp(dn, name);
      }
      if (!known)
        return err_set(TSR_EMISMATCH, "%s: tensor %s is not part of the configured Wan model "
                       "(image-to-video, VACE or LoRA weights are not converted)",
                       st_path(s->files[i]), name);
    }
  return err_set(TSR_EFORMAT, "the folder's files hold %lld tensors, the model %lld: one is "
                 "in two shards", (long long)total, (long long)found);
}

// The store a converted checkpoint describes: latents of Wan's VAE (4x temporal; 8x spatial
// with 16 channels, Wan 2.2's 16x with 48), 16 fps, bf16. Informative: --init checks the
// model's tensors, not the store.
static store_settings wan_store(const dit_config *c) {
  return (store_settings){.fps_num = 16, .fps_den = 1, .short_side = 0, .pt = c->pt,
                          .ph = c->ph, .pw = c->pw, .channels = c->channels,
                          .dtype = STORE_DTYPE_BF16, .max_seconds = 0, .vae_t = 4,
                          .vae_s = c->channels == 48 ? 16 : 8};
}

// Streams every tensor of the folder into the checkpoint writer in table order.
static tsr_status stream_to_tessera(const wan_source *s, const dit_table *tab,
                                    const dit_config *c, float *buf, ckpt_weights_writer *ww,
                                    wan_convert_stats *st) {
  for (int i = 0; i < tab->n; i++) {
    const dit_tensor *t = &tab->t[i];
    char dn[256];
    map_kind k;
    const st_reader *f;
    TSR_TRY(src_name(s, t, dn, sizeof dn, &k));
    const st_tensor *src = wan_source_find(s, dn, &f);
    to_tessera(t, k, c, src->data, src->dtype, buf);
    st_release(f, src);  // the resident set stays one tensor, whatever the file's size
    // a NaN or infinity would make a checkpoint that every later load calls damaged
    size_t bad = num_first_nonfinite(buf, t->numel);
    if (bad < t->numel)
      return err_set(TSR_EFORMAT, "%s: tensor %s has a non-finite value (%g, element %zu of "
                     "tessera's layout): the source model is damaged or diverged; nothing "
                     "was written", st_path(f), dn, buf[bad], bad);
    TSR_TRY(ckpt_weights_tensor(ww, buf));
    st->tensors++, st->params += (int64_t)t->numel;
    st->bytes_in += (int64_t)src->nbytes, st->bytes_out += (int64_t)(t->numel * sizeof(float));
  }
  return TSR_OK;
}

tsr_status wan_from_diffusers(const char *src_dir, const char *dst, char *const *overrides,
                              int n_overrides, wan_convert_stats *stats) {
  memset(stats, 0, sizeof *stats);
  wan_source s;
  TSR_TRY(wan_source_open(src_dir, overrides, n_overrides, &s));
  dit_config mc;
  train_config tc;
  dit_table tab = {0};
  ckpt_weights_writer *ww = NULL;
  float *buf = NULL;
  size_t max_numel = 0;
  char where[PATH_MAX + 64];
  if (s.orig) snprintf(where, sizeof where, "%s (the config from its shapes)", src_dir);
  else snprintf(where, sizeof where, "%s/config.json", src_dir);
  tsr_status st = wan_config_from_json(s.config, where, overrides, n_overrides, &mc, &tc);
  if (!st) st = dit_table_make(&mc, &tab);
  if (!st) st = check_source(&s, &tab, &mc, &max_numel);
  if (!st && !(buf = malloc(max_numel * sizeof(float))))
    st = err_set(TSR_ENOMEM, "no memory for a tensor of %zu values", max_numel);
  store_settings store = wan_store(&mc);
  ckpt_state cs = {.mc = &mc, .tc = &tc, .store = &store, .store_clips = 1};
  char from[PATH_MAX + 64];
  snprintf(from, sizeof from, "%s %s", s.orig ? "original Wan checkpoint" : "diffusers "
           "WanTransformer3DModel", src_dir);
  if (!st && s.orig)
    log_info("convert: %s: the original Wan naming%s%s; the config from the tensors' shapes, "
             "model.heads = %d from %s", src_dir, s.prefix[0] ? " under " : "", s.prefix,
             mc.heads, s.heads_from);
  const char *const extra[2][2] = {{"converted_from", from}, {"diffusers_config", s.config}};
  if (!st) st = ckpt_weights_begin(&ww, dst, &tab, &cs, extra, 2);
  if (!st) st = stream_to_tessera(&s, &tab, &mc, buf, ww, stats);
  if (!st) st = ckpt_weights_commit(ww);
  stats->files_in = s.n_files;
  ckpt_weights_free(&ww);
  free(buf);
  dit_table_free(&tab);
  wan_source_close(&s);
  return st;
}

// ---- tessera -> diffusers ---------------------------------------------------------------
// The checkpoint's tensor prefix + t->name: F32 of t's shape (checked at open time too).
static tsr_status ckpt_tensor(const st_reader *r, const char *prefix, const dit_tensor *t,
                              const st_tensor **out) {
  char name[256];
  snprintf(name, sizeof name, "%s%s", prefix, t->name);
  const st_tensor *s = st_find(r, name);
  int ok = s && s->dtype == ST_F32 && s->ndim == t->ndim;
  for (int i = 0; ok && i < t->ndim; i++) ok = s->shape[i] == t->shape[i];
  if (!ok)
    return err_set(TSR_EMISMATCH, "checkpoint %s: tensor %s is %s (want F32 of the config's "
                   "shape)", st_path(r), name, s ? "of another dtype or shape" : "missing");
  *out = s;
  return TSR_OK;
}

// The checksum the checkpoint records for tensor s against its data.
static tsr_status verify_sum(const st_reader *r, const st_tensor *s) {
  char key[300], got[24];
  snprintf(key, sizeof key, "%s%s", ST_SUM_PREFIX, s->name);
  const char *want = st_meta(r, key);
  snprintf(got, sizeof got, "%016llx", (unsigned long long)XXH3_64bits(s->data, s->nbytes));
  if (want && !strcmp(want, got)) return TSR_OK;
  return err_set(TSR_EFORMAT, "checkpoint %s: tensor %s: %s", st_path(r), s->name,
                 want ? "its checksum differs from the recorded one (damaged file)"
                      : "no recorded checksum (not a tessera checkpoint?)");
}

// Declares every tensor of the model in w under its diffusers name, shape and dtype.
static tsr_status declare_diffusers(st_writer *w, const dit_table *tab, const dit_config *c,
                                    int bf16) {
  for (int i = 0; i < tab->n; i++) {
    char dn[256];
    map_kind k;
    int64_t shape[5];
    TSR_TRY(dif_name(&tab->t[i], dn, sizeof dn, &k));
    int nd = dif_shape(&tab->t[i], k, c, shape);
    TSR_TRY(st_writer_add(w, dn, bf16 ? ST_BF16 : ST_F32, nd, shape, NULL));
  }
  return st_writer_meta(w, "format", "pt");  // what torch's writers record
}

// Streams every tensor of the checkpoint, in diffusers' layout, into w (streaming). tmp:
// the largest tensor's floats; h: as many bf16 values, or NULL for F32 output.
static tsr_status stream_to_diffusers(const st_reader *r, const char *prefix,
                                      const dit_table *tab, const dit_config *c, float *tmp,
                                      uint16_t *h, st_writer *w, wan_convert_stats *st) {
  int bf16 = h != NULL;
  for (int i = 0; i < tab->n; i++) {
    const dit_tensor *t = &tab->t[i];
    const st_tensor *s;
    map_kind k;
    char dn[256];
    TSR_TRY(dif_name(t, dn, sizeof dn, &k));
    TSR_TRY(ckpt_tensor(r, prefix, t, &s));
    TSR_TRY(verify_sum(r, s));
    to_diffusers(t, k, c, s->data, tmp);
    st_release(r, s);
    if (bf16)
      for (size_t j = 0; j < t->numel; j++) h[j] = bf16_from_f32(tmp[j]);
    size_t nb = t->numel * (bf16 ? 2 : 4);
    TSR_TRY(st_writer_stream(w, bf16 ? (const void *)h : (const void *)tmp, nb));
    st->tensors++, st->params += (int64_t)t->numel;
    st->bytes_in += (int64_t)s->nbytes, st->bytes_out += (int64_t)nb;
  }
  return TSR_OK;
}

// config.json of config c into dir: the checkpoint's diffusers_config (orig: when it came from
// diffusers, so keys tessera does not use come back as they were) with every shape key set
// from c.
static tsr_status write_config(const char *dir, const dit_config *c, const char *orig) {
  json_t *o = orig ? json_loads(orig, 0, NULL) : NULL;
  if (!json_is_object(o)) json_decref(o), o = json_object();
  double eps = json_number_value(json_object_get(o, "eps"));
  if ((float)eps != c->ln_eps) eps = c->ln_eps;  // keep the file's spelling of the same float
  json_t *rope = json_object_get(o, "rope_max_seq_len");
  int64_t rope_len = json_is_integer(rope) ? json_integer_value(rope) : 1024;
  int F = c->ffn_dim > 0 ? c->ffn_dim : c->mlp_ratio * c->hidden;
  json_object_set_new(o, "_class_name", json_string("WanTransformer3DModel"));
  json_object_set_new(o, "patch_size", json_pack("[i, i, i]", c->pt, c->ph, c->pw));
  json_object_set_new(o, "num_attention_heads", json_integer(c->heads));
  json_object_set_new(o, "attention_head_dim", json_integer(c->hidden / c->heads));
  json_object_set_new(o, "in_channels", json_integer(c->channels));
  json_object_set_new(o, "out_channels", json_integer(c->channels));
  json_object_set_new(o, "text_dim", json_integer(c->text_dim));
  json_object_set_new(o, "freq_dim", json_integer(c->freq_dim));
  json_object_set_new(o, "ffn_dim", json_integer(F));
  json_object_set_new(o, "num_layers", json_integer(c->depth));
  json_object_set_new(o, "cross_attn_norm", json_true());
  json_object_set_new(o, "qk_norm", json_string("rms_norm_across_heads"));
  json_object_set_new(o, "eps", json_real(eps));
  json_object_set_new(o, "image_dim", json_null());
  json_object_set_new(o, "added_kv_proj_dim", json_null());
  json_object_set_new(o, "rope_max_seq_len", json_integer(rope_len));
  json_object_set_new(o, "pos_embed_seq_len", json_null());
  char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(o);
  char path[PATH_MAX];
  fs_atomic a;
  tsr_status st = text ? fs_join(path, sizeof path, dir, "config.json")
                      : err_set(TSR_ENOMEM, "config.json: no memory");
  if (!st) st = fs_atomic_open(&a, path);
  if (!st && fprintf(a.f, "%s\n", text) < 0)
    st = err_set(TSR_EIO, "write %s: %s", a.tmp, strerror(errno));
  if (!st) st = fs_atomic_commit(&a);
  if (text) fs_atomic_abort(&a);
  free(text);
  return st;
}

// The config of checkpoint r (family wan, one eps), its table and diffusers_config text.
static tsr_status ckpt_config(const st_reader *r, dit_config *mc, dit_table *tab) {
  const char *ini = st_meta(r, "config");
  train_config tc;
  if (!ini) return err_set(TSR_EFORMAT, "checkpoint %s has no config", st_path(r));
  TSR_TRY(config_from_ini(ini, mc, &tc));
  if (mc->family != DIT_FAMILY_WAN)
    return err_set(TSR_EINVAL, "checkpoint %s: model.family = %s: only the Wan family has a "
                   "diffusers counterpart", st_path(r), config_family_name(mc->family));
  if (mc->ln_eps != mc->rms_eps)
    return err_set(TSR_EINVAL, "checkpoint %s: ln_eps %g != rms_eps %g: Wan has one eps",
                   st_path(r), mc->ln_eps, mc->rms_eps);
  return dit_table_make(mc, tab);
}

// 1 for the names of a diffusers model folder's own files, of either layout (one file, or
// shards and their index) and its config: an export replaces them all, so no stale shard or
// index of an earlier model survives beside the new one.
static int diffusers_file(const char *name) {
  return !strcmp(name, "config.json") || !strncmp(name, "diffusion_pytorch_model", 23);
}

tsr_status wan_to_diffusers(const char *src, const char *dst_dir, int bf16, int ema,
                            wan_convert_stats *stats) {
  memset(stats, 0, sizeof *stats);
  st_reader *r = NULL;
  dit_config mc;
  dit_table tab = {0};
  st_writer *w = NULL;
  float *tmp = NULL;
  uint16_t *h = NULL;
  const char *prefix = ema ? "ema." : "";
  char out[PATH_MAX];
  fs_atomic_dir dir = {0};
  tsr_status st = st_open(&r, src);
  if (!st) st = ckpt_config(r, &mc, &tab);
  size_t most = 1;
  for (int i = 0; !st && i < tab.n; i++) {  // every tensor there before anything is written
    const st_tensor *s;
    st = ckpt_tensor(r, prefix, &tab.t[i], &s);
    if (tab.t[i].numel > most) most = tab.t[i].numel;
  }
  if (!st && (!(tmp = malloc(most * sizeof(float))) || (bf16 && !(h = malloc(most * 2)))))
    st = err_set(TSR_ENOMEM, "no memory for a tensor of %zu values", most);
  if (!st) st = fs_atomic_dir_open(&dir, dst_dir);  // written whole, swapped in at the end
  if (!st) st = fs_join(out, sizeof out, dir.tmp, DIF_WEIGHTS);
  if (!st) st = st_writer_new(&w);
  if (!st) st = declare_diffusers(w, &tab, &mc, bf16);
  if (!st) st = st_writer_stream_begin(w, out);
  if (!st) st = stream_to_diffusers(r, prefix, &tab, &mc, tmp, h, w, stats);
  if (!st) st = st_writer_stream_commit(w);
  if (!st) st = write_config(dir.tmp, &mc, st_meta(r, "diffusers_config"));
  if (!st) st = fs_atomic_dir_commit(&dir, diffusers_file);
  fs_atomic_dir_abort(&dir);
  stats->files_in = 1;
  st_writer_free(&w);
  free(tmp), free(h);
  dit_table_free(&tab);
  st_close(&r);
  return st;
}
