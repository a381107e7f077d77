// tests/ingest/make_latents.c — writes latent files (store/latent_file.h) for the tests,
// good ones and every kind of malformed one, with known values so that a test can check
// what ingest stored against what it wrote (no VAE, no Python).
//
// usage: make_latents OUT.safetensors [--shape T,H,W,C] [--dtype bf16|f32|i32]
//          [--fps F] [--vae TxSxS] [--seed S] [--value v0,v1,...] [--noise A]
//          [--text N,D] [--text-dtype bf16|f32] [--text-onehot K] [--text-words i,j,..]
//          [--caption TEXT] [--source PATH] [--label L] [--bad KIND]
//        make_latents --mean FILE    prints the mean of each channel of FILE's latents
// Values: latents[t, y, x, c] = value[c] (default 0) + noise * N(0, 1) from the counter
// RNG keyed by (seed, element index) (noise default 1; --value alone with --noise 0 gives
// constant channels). text_emb: N(0, 1) keyed by seed + 1, or with --text-onehot K every
// row the unit vector e_K, or with --text-words i,j,.. one row a word: e_i, e_j, .. (the
// one-hot "embedding" of a caption such as "a red clip"; needs --text N,D with N words).
// --bad: nan (a NaN at element 5), inf-text (an Inf in text_emb), ndim (latents 3-D),
//   text-ndim (text_emb 1-D), no-format, bad-fps, bad-vae, caption-only (caption, no
//   text_emb), no-latents (only text_emb).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf16.h"
#include "core/rng.h"
#include "core/safetensors.h"

static int fail(const char *msg) {
  fprintf(stderr, "make_latents: %s\n", msg);
  return 2;
}

// n float values into `dtype` storage (malloc'ed).
static void *store(const float *v, size_t n, st_dtype dtype) {
  void *out = malloc(n * 4 + 1);
  for (size_t i = 0; i < n; i++) {
    if (dtype == ST_BF16) {
      uint16_t h = bf16_from_f32(v[i]);
      memcpy((char *)out + 2 * i, &h, 2);
    } else if (dtype == ST_I32) {
      int32_t x = (int32_t)v[i];
      memcpy((char *)out + 4 * i, &x, 4);
    } else {
      memcpy((char *)out + 4 * i, &v[i], 4);
    }
  }
  return out;
}

static st_dtype parse_dtype(const char *s) {
  return !strcmp(s, "bf16") ? ST_BF16 : !strcmp(s, "i32") ? ST_I32 : ST_F32;
}

// The mean of each channel of a latent file's latents, one line "m0 m1 ...".
static int print_mean(const char *path) {
  st_reader *r = NULL;
  if (st_open(&r, path)) return fprintf(stderr, "make_latents: %s\n", err_msg()), 1;
  const st_tensor *t = st_find(r, "latents");
  if (!t || t->ndim != 4 || (t->dtype != ST_F32 && t->dtype != ST_BF16)) {
    st_close(&r);
    return fail("no (T, H, W, C) bf16/f32 tensor 'latents'");
  }
  int64_t C = t->shape[3], n = t->shape[0] * t->shape[1] * t->shape[2];
  for (int64_t c = 0; c < C; c++) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
      size_t e = (size_t)(i * C + c);
      float v;
      if (t->dtype == ST_F32) memcpy(&v, (const char *)t->data + 4 * e, 4);
      else {
        uint16_t h;
        memcpy(&h, (const char *)t->data + 2 * e, 2);
        v = bf16_to_f32(h);
      }
      sum += v;
    }
    printf("%s%.6f", c ? " " : "", sum / (double)n);
  }
  printf("\n");
  st_close(&r);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--mean")) return print_mean(argv[2]);
  if (argc < 2) return fail("usage: make_latents OUT.safetensors [options] (see the source)");
  const char *out = argv[1], *fps = "16", *vae = "4x8x8", *caption = NULL, *source = NULL;
  const char *label = NULL, *bad = "", *values = NULL, *words = NULL;
  int shape[4] = {4, 6, 8, 4}, text_n = 0, text_d = 0, onehot = -1;
  st_dtype dtype = ST_BF16, text_dtype = ST_F32;
  uint64_t seed = 1;
  double noise = 1.0;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) return fail("option without a value");
    i++;
    if (!strcmp(a, "--shape")) {
      if (sscanf(v, "%d,%d,%d,%d", &shape[0], &shape[1], &shape[2], &shape[3]) != 4)
        return fail("--shape T,H,W,C");
    } else if (!strcmp(a, "--dtype")) dtype = parse_dtype(v);
    else if (!strcmp(a, "--text-dtype")) text_dtype = parse_dtype(v);
    else if (!strcmp(a, "--fps")) fps = v;
    else if (!strcmp(a, "--vae")) vae = v;
    else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--value")) values = v;
    else if (!strcmp(a, "--noise")) noise = atof(v);
    else if (!strcmp(a, "--text")) {
      if (sscanf(v, "%d,%d", &text_n, &text_d) != 2) return fail("--text N,D");
    } else if (!strcmp(a, "--text-onehot")) onehot = atoi(v);
    else if (!strcmp(a, "--text-words")) words = v;
    else if (!strcmp(a, "--caption")) caption = v;
    else if (!strcmp(a, "--source")) source = v;
    else if (!strcmp(a, "--label")) label = v;
    else if (!strcmp(a, "--bad")) bad = v;
    else return fail("unknown option");
  }
  size_t n = (size_t)shape[0] * shape[1] * shape[2] * shape[3];
  float *lat = malloc(n * sizeof(float)), base[1024] = {0};
  if (values) {
    const char *p = values;
    for (int c = 0; c < shape[3] && c < 1024 && *p; c++) {
      base[c] = strtof(p, (char **)&p);
      if (*p == ',') p++;
    }
  }
  rng_key k = {.seed = seed, .stream = RNG_STREAM_SAMPLE};
  for (size_t i = 0; i < n; i++)
    lat[i] = base[i % (size_t)shape[3]] + (float)(noise * rng_normal(&k, i));
  if (!strcmp(bad, "nan")) lat[5] = NAN;
  size_t tn = (size_t)text_n * text_d;
  float *text = malloc((tn ? tn : 1) * sizeof(float));
  rng_key tk = {.seed = seed + 1, .stream = RNG_STREAM_SAMPLE};
  for (size_t i = 0; i < tn; i++)
    text[i] = onehot >= 0 ? (float)((int)(i % (size_t)text_d) == onehot) : (float)rng_normal(&tk, i);
  if (words) {  // row r = e_{word r}
    memset(text, 0, (tn ? tn : 1) * sizeof(float));
    const char *p = words;
    for (int r = 0; r < text_n && *p; r++) {
      int w = (int)strtol(p, (char **)&p, 10);
      if (w < 0 || w >= text_d) return fail("--text-words: a word index outside 0..D-1");
      text[(size_t)r * text_d + (size_t)w] = 1.0f;
      if (*p == ',') p++;
    }
  }
  if (!strcmp(bad, "inf-text") && tn) text[tn - 1] = INFINITY;

  st_writer *w = NULL;
  tsr_status st = st_writer_new(&w);
  void *ld = store(lat, n, dtype), *td = store(text, tn, text_dtype);
  int64_t sh4[4] = {shape[0], shape[1], shape[2], shape[3]};
  int64_t sh3[3] = {shape[0], shape[1], (int64_t)shape[2] * shape[3]};
  int64_t sh2[2] = {text_n, text_d}, sh1[1] = {(int64_t)tn};
  if (!st && strcmp(bad, "no-latents"))
    st = !strcmp(bad, "ndim") ? st_writer_add(w, "latents", dtype, 3, sh3, ld)
                              : st_writer_add(w, "latents", dtype, 4, sh4, ld);
  if (!st && tn && strcmp(bad, "caption-only"))
    st = !strcmp(bad, "text-ndim") ? st_writer_add(w, "text_emb", text_dtype, 1, sh1, td)
                                   : st_writer_add(w, "text_emb", text_dtype, 2, sh2, td);
  if (!st && strcmp(bad, "no-format")) st = st_writer_meta(w, "format", "tessera-latents");
  if (!st) st = st_writer_meta(w, "fps", !strcmp(bad, "bad-fps") ? "sixteen" : fps);
  if (!st) st = st_writer_meta(w, "vae_stride", !strcmp(bad, "bad-vae") ? "4x8x16" : vae);
  if (!st && (caption || !strcmp(bad, "caption-only")))
    st = st_writer_meta(w, "caption", caption ? caption : "a caption with no embedding");
  if (!st && source) st = st_writer_meta(w, "source", source);
  if (!st && label) st = st_writer_meta(w, "label", label);
  if (!st) st = st_writer_commit(w, out);
  st_writer_free(&w);
  free(lat), free(text), free(ld), free(td);
  if (st) {
    fprintf(stderr, "make_latents: %s\n", err_msg());
    return 1;
  }
  return 0;
}
