// store/latent_file.c — reading, validating and writing latent files (latent_file.h).
#include "store/latent_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bf16.h"
#include "core/num.h"

float latent_value(const void *p, store_dtype dtype, size_t i) {
  if (dtype == STORE_DTYPE_BF16) {
    uint16_t h;
    memcpy(&h, (const char *)p + 2 * i, 2);
    return bf16_to_f32(h);
  }
  float f;
  memcpy(&f, (const char *)p + 4 * i, 4);
  return f;
}

// "A<sep>B<sep>C" of n positive integers <= hi into v; 0 on success.
static int parse_ints(const char *s, char sep, int n, int64_t hi, int *v) {
  char buf[64];
  if (strlen(s) >= sizeof buf) return 1;
  snprintf(buf, sizeof buf, "%s", s);
  char *p = buf;
  for (int i = 0; i < n; i++) {
    char *e = i + 1 < n ? strchr(p, sep) : NULL;
    if (i + 1 < n && !e) return 1;
    if (e) *e = 0;
    int64_t x;
    if (num_parse_i64(p, 1, hi, &x) != NUM_OK) return 1;
    v[i] = (int)x;
    p = e ? e + 1 : p + strlen(p);
  }
  return 0;
}

// The store dtype of a tensor's safetensors dtype (bf16, f32), or -1.
static int value_dtype(st_dtype d) {
  return d == ST_BF16 ? STORE_DTYPE_BF16 : d == ST_F32 ? STORE_DTYPE_F32 : -1;
}

// First non-finite value of n values of dtype at p: its index, or -1.
static int64_t first_nonfinite(const void *p, store_dtype dtype, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(latent_value(p, dtype, (size_t)i))) return i;
  return -1;
}

static tsr_status check_values(const latent_file *lf, const char *path);

static tsr_status check_latents(latent_file *lf, const char *path) {
  const st_tensor *t = st_find(lf->st, "latents");
  if (!t)
    return err_set(TSR_EFORMAT, "latent file %s: no tensor 'latents' (the VAE's (T, H, W, C) "
                   "output)", path);
  int dt = value_dtype(t->dtype);
  if (dt < 0)
    return err_set(TSR_EFORMAT, "latent file %s: tensor 'latents' is %s; write bf16 or f32 "
                   "(latents.to(torch.bfloat16))", path, st_dtype_name(t->dtype));
  if (t->ndim != 4)
    return err_set(TSR_EFORMAT, "latent file %s: tensor 'latents' has %d dimensions; it must be "
                   "(T, H, W, C): latent frames, rows, columns, channels", path, t->ndim);
  const int64_t lim[4] = {STORE_MAX_GRID, STORE_MAX_GRID, STORE_MAX_GRID, STORE_MAX_CHANNELS};
  const char *what[4] = {"T (frames)", "H (rows)", "W (columns)", "C (channels)"};
  for (int i = 0; i < 4; i++)
    if (t->shape[i] < 1 || t->shape[i] > lim[i])
      return err_set(TSR_EFORMAT, "latent file %s: tensor 'latents' has %s = %lld, outside "
                     "1..%lld", path, what[i], (long long)t->shape[i], (long long)lim[i]);
  lf->T = (int)t->shape[0], lf->H = (int)t->shape[1], lf->W = (int)t->shape[2];
  lf->C = (int)t->shape[3];
  lf->dtype = (store_dtype)dt;
  lf->latents = t->data;
  return check_values(lf, path);
}

// Every value of lf's (T, H, W, C) latents is finite.
static tsr_status check_values(const latent_file *lf, const char *path) {
  int64_t n = (int64_t)lf->T * lf->H * lf->W * lf->C, bad = first_nonfinite(lf->latents, lf->dtype, n);
  if (bad >= 0) {
    int64_t c = bad % lf->C, x = bad / lf->C % lf->W, y = bad / lf->C / lf->W % lf->H,
            f = bad / lf->C / lf->W / lf->H;
    float v = latent_value(lf->latents, lf->dtype, (size_t)bad);
    return err_set(TSR_EFORMAT, "latent file %s: tensor 'latents' has a non-finite value (%s) at "
                   "[t %lld, y %lld, x %lld, c %lld]: the encoder diverged or the file is "
                   "damaged", path, isnan(v) ? "NaN" : "Inf", (long long)f, (long long)y,
                   (long long)x, (long long)c);
  }
  return TSR_OK;
}

static tsr_status check_text_tensor(latent_file *lf, const char *path, const st_tensor *t,
                                    const char *caption);

static tsr_status check_text(latent_file *lf, const char *path) {
  tsr_status st = check_text_tensor(lf, path, st_find(lf->st, "text_emb"),
                                    st_meta(lf->st, "caption"));
  const char *ce = st_meta(lf->st, "caption_encoder");
  if (!st && ce && lf->text_tokens) lf->caption_encoder = ce;
  return st;
}

// The caption embedding t (NULL: none) and its text (NULL: none) into lf, checked.
static tsr_status check_text_tensor(latent_file *lf, const char *path, const st_tensor *t,
                                    const char *caption) {
  lf->caption = caption ? caption : "";
  lf->caption_encoder = "";
  if (!t) {
    if (lf->caption[0])
      return err_set(TSR_EFORMAT, "latent file %s: metadata 'caption' without a tensor "
                     "'text_emb': the model learns from the caption's embedding (write the text "
                     "encoder's output as text_emb)", path);
    return TSR_OK;
  }
  int dt = value_dtype(t->dtype);
  if (dt < 0)
    return err_set(TSR_EFORMAT, "latent file %s: tensor 'text_emb' is %s; write bf16 or f32",
                   path, st_dtype_name(t->dtype));
  if (t->ndim != 2 || t->shape[0] < 1 || t->shape[0] > STORE_MAX_CAPTION_TOKENS ||
      t->shape[1] < 1 || t->shape[1] > STORE_MAX_CAPTION_DIM)
    return err_set(TSR_EFORMAT, "latent file %s: tensor 'text_emb' must be (N, D), N tokens in "
                   "1..%d of width D in 1..%d; it has %d dimensions (%lld x %lld)", path,
                   STORE_MAX_CAPTION_TOKENS, STORE_MAX_CAPTION_DIM, t->ndim,
                   (long long)(t->ndim > 0 ? t->shape[0] : 0),
                   (long long)(t->ndim > 1 ? t->shape[1] : 0));
  lf->text_tokens = (int)t->shape[0], lf->text_dim = (int)t->shape[1];
  lf->text_dtype = (store_dtype)dt;
  lf->text = t->data;
  int64_t bad = first_nonfinite(t->data, lf->text_dtype, (int64_t)lf->text_tokens * lf->text_dim);
  if (bad >= 0)
    return err_set(TSR_EFORMAT, "latent file %s: tensor 'text_emb' has a non-finite value at "
                   "[token %lld, %lld]", path, (long long)(bad / lf->text_dim),
                   (long long)(bad % lf->text_dim));
  if (strlen(lf->caption) > STORE_MAX_CAPTION_BYTES)
    return err_set(TSR_EFORMAT, "latent file %s: metadata 'caption' has %zu bytes, more than %d",
                   path, strlen(lf->caption), STORE_MAX_CAPTION_BYTES);
  return TSR_OK;
}

static tsr_status check_meta(latent_file *lf, const char *path) {
  const char *fmt = st_meta(lf->st, "format");
  if (!fmt || strcmp(fmt, LATENT_FORMAT))
    return err_set(TSR_EFORMAT, "latent file %s: metadata 'format' is %s%s%s, not '%s': not a "
                   "tessera latent file (tools/reference/encode_latents.py writes them)", path,
                   fmt ? "'" : "", fmt ? fmt : "missing", fmt ? "'" : "", LATENT_FORMAT);
  const char *fps = st_meta(lf->st, "fps"), *vae = st_meta(lf->st, "vae_stride");
  int f[2] = {0, 1}, v[3] = {0, 0, 0};
  if (!fps || parse_ints(fps, '/', strchr(fps, '/') ? 2 : 1, 1000000, f) ||
      (int64_t)f[0] > (int64_t)STORE_MAX_FPS * f[1] || (int64_t)f[0] * 3600 < f[1])
    return err_set(TSR_EFORMAT, "latent file %s: metadata 'fps' is %s%s%s: give the frame rate of "
                   "the video frames the VAE encoded, \"N\" or \"N/D\" in 1/3600..%d", path,
                   fps ? "'" : "", fps ? fps : "missing", fps ? "'" : "", STORE_MAX_FPS);
  if (!vae || parse_ints(vae, 'x', 3, STORE_MAX_VAE_STRIDE, v) || v[1] != v[2])
    return err_set(TSR_EFORMAT, "latent file %s: metadata 'vae_stride' is %s%s%s: give the VAE's "
                   "compression \"TxSxS\" (video frames per latent frame, pixels per latent row "
                   "and column, each 1..%d, e.g. 4x8x8)", path, vae ? "'" : "",
                   vae ? vae : "missing", vae ? "'" : "", STORE_MAX_VAE_STRIDE);
  lf->fps_num = f[0], lf->fps_den = f[1], lf->vae_t = v[0], lf->vae_s = v[1];
  lf->source = st_meta(lf->st, "source") ? st_meta(lf->st, "source") : "";
  lf->label = st_meta(lf->st, "label");
  if (lf->label && (!lf->label[0] || strlen(lf->label) >= 256))
    return err_set(TSR_EFORMAT, "latent file %s: metadata 'label' must be 1 to 255 bytes", path);
  const char *start = st_meta(lf->st, "start_s");
  if (start && num_parse_double(start, 0, 1e9, &lf->start_s) != NUM_OK)
    return err_set(TSR_EFORMAT, "latent file %s: metadata 'start_s' = '%s' is not a time in "
                   "seconds >= 0", path, start);
  return TSR_OK;
}

// ---- musubi-tuner's Wan caches -------------------------------------------------------------
// A latent cache (musubi_tuner/dataset/cache_io.py save_latent_cache_wan): one tensor
// latents_FxHxW_DTYPE of shape (C, F, H, W), metadata architecture = "wan"; no frame rate or
// VAE stride (Wan's are 16 fps and the VAE's: 4x8x8 for 16 channels, Wan 2.1's, and 4x16x16
// for 48, Wan 2.2's); its caption in the text-encoder cache beside it, NAME_wan_te.safetensors
// (save_text_encoder_output_cache_wan): varlen_t5_DTYPE (N, D) and metadata caption1.

// The cache's latents tensor, or NULL when r has none.
static const st_tensor *musubi_latents(const st_reader *r) {
  for (int i = 0; i < st_count(r); i++) {
    int f, h, w, n = 0;
    const char *name = st_at(r, i)->name;
    if (sscanf(name, "latents_%dx%dx%d_%n", &f, &h, &w, &n) == 3 && n > 0) return st_at(r, i);
  }
  return NULL;
}

// The text-encoder cache of the latent cache at path, NAME[_POS-COUNT]_WxH_wan.safetensors:
// NAME_wan_te.safetensors in the same folder, into out (cap bytes).
static void musubi_te_path(const char *path, char *out, size_t cap) {
  size_t n = strlen(path), k = strlen("_wan.safetensors");
  n = n > k && !strcmp(path + n - k, "_wan.safetensors") ? n - k : n;
  int cut = 0;
  for (int part = 0; part < 2; part++) {  // _WxH, then _POS-COUNT (video caches)
    size_t u = n;
    while (u > 0 && path[u - 1] != '_' && path[u - 1] != '/') u--;
    int a, b, m = 0;
    char s[64];
    snprintf(s, sizeof s, "%.*s", (int)(n - u), path + u);
    if (u == 0 || path[u - 1] != '_' ||
        !(sscanf(s, part ? "%d-%d%n" : "%dx%d%n", &a, &b, &m) == 2 && (size_t)m == strlen(s)))
      break;
    n = u - 1, cut++;
  }
  snprintf(out, cap, "%.*s_wan_te.safetensors", (int)n, path);
  (void)cut;
}

// Element e of n at src in (C, F, H, W) order -> dst in (F, H, W, C) order (es bytes each).
static void musubi_transpose(const char *src, char *dst, int C, int F, int H, int W, size_t es) {
  size_t plane = (size_t)F * H * W;
  for (int c = 0; c < C; c++)
    for (size_t p = 0; p < plane; p++)
      memcpy(dst + (p * C + c) * es, src + ((size_t)c * plane + p) * es, es);
}

static tsr_status open_musubi(latent_file *lf, const char *path, const st_tensor *t) {
  const char *arch = st_meta(lf->st, "architecture");
  if (!arch || strcmp(arch, "wan"))
    return err_set(TSR_EFORMAT, "latent file %s: a musubi-tuner cache of architecture %s%s%s: "
                   "only Wan's (\"wan\") are read", path, arch ? "'" : "", arch ? arch : "(none)",
                   arch ? "'" : "");
  int dt = value_dtype(t->dtype);
  if (dt < 0 || t->ndim != 4)
    return err_set(TSR_EFORMAT, "latent file %s: musubi-tuner tensor '%s' must be bf16 or f32 "
                   "(C, F, H, W); it is %s with %d dimensions", path, t->name,
                   st_dtype_name(t->dtype), t->ndim);
  const int64_t lim[4] = {STORE_MAX_CHANNELS, STORE_MAX_GRID, STORE_MAX_GRID, STORE_MAX_GRID};
  for (int i = 0; i < 4; i++)
    if (t->shape[i] < 1 || t->shape[i] > lim[i])
      return err_set(TSR_EFORMAT, "latent file %s: tensor '%s' has dimension %d = %lld, outside "
                     "1..%lld", path, t->name, i, (long long)t->shape[i], (long long)lim[i]);
  lf->C = (int)t->shape[0], lf->T = (int)t->shape[1], lf->H = (int)t->shape[2];
  lf->W = (int)t->shape[3];
  if (lf->C != 16 && lf->C != 48)
    return err_set(TSR_EFORMAT, "latent file %s: %d channels: Wan's VAEs give 16 (Wan 2.1) or 48 "
                   "(Wan 2.2)", path, lf->C);
  lf->dtype = (store_dtype)dt;
  lf->fps_num = 16, lf->fps_den = 1, lf->vae_t = 4, lf->vae_s = lf->C == 16 ? 8 : 16;
  lf->source = "";
  size_t es = st_dtype_size(t->dtype);
  if (!(lf->owned = malloc((size_t)lf->C * lf->T * lf->H * lf->W * es)))
    return err_set(TSR_ENOMEM, "latent file %s: no memory", path);
  musubi_transpose(t->data, lf->owned, lf->C, lf->T, lf->H, lf->W, es);
  lf->latents = lf->owned;
  TSR_TRY(check_values(lf, path));
  char te[4200];
  musubi_te_path(path, te, sizeof te);
  if (access(te, F_OK)) return check_text_tensor(lf, path, NULL, NULL);  // no caption
  tsr_status st = st_open(&lf->te, te);
  if (st) return err_wrap(st, "the text-encoder cache of %s: ", path);
  const st_tensor *e = NULL;
  for (int i = 0; i < st_count(lf->te) && !e; i++)
    if (!strncmp(st_at(lf->te, i)->name, "varlen_t5_", 10)) e = st_at(lf->te, i);
  if (!e)
    return err_set(TSR_EFORMAT, "text-encoder cache %s: no tensor varlen_t5_* (Wan's umT5 "
                   "output)", te);
  return check_text_tensor(lf, te, e, st_meta(lf->te, "caption1"));
}

tsr_status latent_file_open(latent_file **out, const char *path) {
  *out = NULL;
  latent_file *lf = calloc(1, sizeof *lf);
  if (!lf) return err_set(TSR_ENOMEM, "out of memory opening %s", path);
  tsr_status st = st_open(&lf->st, path);
  if (st) err_wrap(st, "latent file: ");
  const st_tensor *mt = st ? NULL : musubi_latents(lf->st);
  if (!st && mt && !st_meta(lf->st, "format")) st = open_musubi(lf, path, mt);
  else {
    if (!st) st = check_meta(lf, path);
    if (!st) st = check_latents(lf, path);
    if (!st) st = check_text(lf, path);
  }
  if (st) {
    latent_file_close(&lf);
    return st;
  }
  *out = lf;
  return TSR_OK;
}

void latent_file_close(latent_file **plf) {
  latent_file *lf = *plf;
  if (!lf) return;
  st_close(&lf->st);
  st_close(&lf->te);
  free(lf->owned);
  free(lf);
  *plf = NULL;
}

tsr_status caption_file_open(latent_file **out, const char *path) {
  *out = NULL;
  latent_file *lf = calloc(1, sizeof *lf);
  if (!lf) return err_set(TSR_ENOMEM, "out of memory opening %s", path);
  tsr_status st = st_open(&lf->st, path);
  if (st) err_wrap(st, "caption file: ");
  if (!st && !st_find(lf->st, "text_emb"))
    st = err_set(TSR_EFORMAT, "caption file %s: no tensor 'text_emb' (the caption's (N, D) "
                 "embedding by a text encoder)", path);
  if (!st) st = check_text(lf, path);
  if (st) {
    latent_file_close(&lf);
    return st;
  }
  *out = lf;
  return TSR_OK;
}

tsr_status caption_file_read(const char *path, int text_dim, float **emb, int *tokens,
                             char *caption, size_t n) {
  *emb = NULL, *tokens = 0;
  if (n) caption[0] = 0;
  latent_file *lf = NULL;
  tsr_status st = caption_file_open(&lf, path);
  if (!st && lf->text_dim != text_dim)
    st = err_set(TSR_EMISMATCH, "caption file %s: text_emb is %d wide; the model takes "
                 "model.text_dim = %d (another text encoder?)", path, lf->text_dim, text_dim);
  float *e = NULL;
  size_t cnt = st ? 0 : (size_t)lf->text_tokens * (size_t)lf->text_dim;
  if (!st && !(e = malloc(cnt * sizeof(float))))
    st = err_set(TSR_ENOMEM, "caption file %s: no memory", path);
  for (size_t i = 0; !st && i < cnt; i++) e[i] = latent_value(lf->text, lf->text_dtype, i);
  if (!st) {
    *emb = e, *tokens = lf->text_tokens;
    if (n) snprintf(caption, n, "%s", lf->caption);
    e = NULL;
  }
  free(e);
  latent_file_close(&lf);
  return st;
}

tsr_status latent_file_write(const char *path, const float *latents, int T, int H, int W, int C,
                             int fps_num, int fps_den, int vae_t, int vae_s, const char *source,
                             const char *const *extra, int n_extra) {
  st_writer *w = NULL;
  char fps[48], vae[48];
  snprintf(fps, sizeof fps, "%d/%d", fps_num, fps_den);
  snprintf(vae, sizeof vae, "%dx%dx%d", vae_t, vae_s, vae_s);
  int64_t shape[4] = {T, H, W, C};
  tsr_status st = st_writer_new(&w);
  if (!st) st = st_writer_add(w, "latents", ST_F32, 4, shape, latents);
  if (!st) st = st_writer_meta(w, "format", LATENT_FORMAT);
  if (!st) st = st_writer_meta(w, "fps", fps);
  if (!st) st = st_writer_meta(w, "vae_stride", vae);
  if (!st && source) st = st_writer_meta(w, "source", source);
  for (int i = 0; !st && i < n_extra; i++) st = st_writer_meta(w, extra[2 * i], extra[2 * i + 1]);
  if (!st) st = st_writer_commit(w, path);
  st_writer_free(&w);
  return st ? err_wrap(st, "latent file %s: ", path) : TSR_OK;
}
