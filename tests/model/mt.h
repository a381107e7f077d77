// tests/model/mt.h — helpers for the model tests: a tiny config, parameter perturbation
// (TEST-ONLY: adaLN and final.linear start at zero, which would make most gradients
// zero; adding small counter-based noise to every tensor makes every gradient
// non-trivial) and a packed batch of clips built on the host and copied to the backend.
#ifndef TESSERA_TESTS_MODEL_MT_H
#define TESSERA_TESTS_MODEL_MT_H

#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/dit.h"

// D = 16, depth 2, 2 heads (Dh = 8), patch 1x2x2x3 (P = 12), 3 classes.
static inline dit_config mt_config(void) {
  dit_config c;
  train_config t;
  config_defaults(&c, &t);
  c.hidden = 16, c.depth = 2, c.heads = 2, c.mlp_ratio = 2, c.pt = 1, c.ph = 2, c.pw = 2;
  c.channels = 3, c.freq_dim = 16, c.num_classes = 3;
  return c;
}

// params += scale * N(0, 1) for every tensor (counter-based from seed).
static inline tsr_status mt_perturb(dit_model *m, uint64_t seed, float scale) {
  const kernels_backend *kb = dit_backend(m);
  size_t n = dit_num_params(m);
  float *h = malloc(n * sizeof(float));
  if (!h) return TSR_ENOMEM;
  tsr_status st = kb->to_host(kb, h, dit_params(m), n * sizeof(float));
  for (int i = 0; !st && i < dit_num_tensors(m); i++) {
    const dit_tensor *t = dit_tensor_info(m, i);
    rng_key key = {seed, 1, (uint64_t)i, RNG_STREAM_INIT};
    for (size_t j = 0; j < t->numel; j++) h[t->offset + j] += scale * (float)rng_normal(&key, j);
  }
  if (!st) st = kb->to_device(kb, dit_params(m), h, n * sizeof(float));
  if (!st) st = dit_refresh_weights(m);  // the act-dtype working copy follows the masters
  free(h);
  return st;
}

typedef struct {
  int T, H, W, label;
  float t;
} mt_clip;

// A packed batch in host memory plus its backend copy (b points at the latter).
typedef struct {
  int C, L, P;
  int32_t *cu, *pos, *labels;
  float *t, *x, *target, *w;
  void *dev[7];
  dit_batch b;
  // captions (mt_batch_text)
  int Lt, text_dim;
  int32_t *cu_text;
  float *text;
  void *tdev[2];
} mt_batch;

// The text model of mt_config: captions of width 5, at most 4 tokens a clip.
static inline dit_config mt_text_config(void) {
  dit_config c = mt_config();
  c.text_dim = 5, c.text_len = 4;
  return c;
}

// The Wan family of the same sizes: captions of width 5, no labels, an MLP of 20 (no
// multiple of D).
static inline dit_config mt_wan_config(void) {
  dit_config c = mt_text_config();
  c.family = DIT_FAMILY_WAN, c.num_classes = 0, c.ffn_dim = 20;
  return c;
}

// Captions for the batch's clips: clip c gets n_tokens[c] rows (0: none) of N(0, 1) keyed
// by its id (so a clip alone gets the same caption as packed).
static inline tsr_status mt_batch_text(mt_batch *mb, const int *n_tokens, int text_dim,
                                       uint64_t seed, const int *clip_ids) {
  const kernels_backend *kb = kernels_cpu();
  mb->text_dim = text_dim;
  mb->cu_text = calloc((size_t)mb->C + 1, sizeof(int32_t));
  for (int c = 0; c < mb->C; c++) mb->cu_text[c + 1] = mb->cu_text[c] + n_tokens[c];
  mb->Lt = mb->cu_text[mb->C];
  mb->text = calloc((size_t)mb->Lt * text_dim + 1, sizeof(float));
  for (int c = 0; c < mb->C; c++) {
    rng_key k = {seed, 2, (uint64_t)clip_ids[c], RNG_STREAM_NOISE};
    for (int j = 0; j < n_tokens[c] * text_dim; j++)
      mb->text[(size_t)mb->cu_text[c] * text_dim + j] = (float)rng_normal(&k, (uint64_t)j);
  }
  size_t sz[2] = {sizeof(int32_t) * ((size_t)mb->C + 1),
                  sizeof(float) * ((size_t)mb->Lt * text_dim + 1)};
  void *src[2] = {mb->cu_text, mb->text};
  for (int i = 0; i < 2; i++) {
    tsr_status st = kb->alloc(kb, &mb->tdev[i], sz[i]);
    if (!st) st = kb->to_device(kb, mb->tdev[i], src[i], sz[i]);
    if (st) return st;
  }
  mb->b.Lt = mb->Lt, mb->b.cu_text = mb->tdev[0], mb->b.text = mb->tdev[1];
  return TSR_OK;
}

// Clips of the given grids; x and target N(0, 1) from `seed`, weights of a global batch
// of n_batch_clips clips. first_clip: the index the noise is keyed by (so a clip alone
// gets the same data as in a packed batch).
static inline tsr_status mt_batch_make(mt_batch *mb, const mt_clip *clips, int C, int P,
                                       int n_batch_clips, uint64_t seed, const int *clip_ids) {
  const kernels_backend *kb = kernels_cpu();
  memset(mb, 0, sizeof *mb);
  mb->C = C, mb->P = P;
  mb->cu = calloc((size_t)C + 1, sizeof(int32_t));
  int longest = 0;
  for (int c = 0; c < C; c++) {
    int n = clips[c].T * clips[c].H * clips[c].W;
    mb->cu[c + 1] = mb->cu[c] + n;
    if (n > longest) longest = n;
  }
  int L = mb->L = mb->cu[C];
  mb->pos = calloc((size_t)L * 3 + 1, sizeof(int32_t));
  mb->labels = calloc((size_t)C, sizeof(int32_t));
  mb->t = calloc((size_t)C, sizeof(float));
  mb->w = calloc((size_t)C, sizeof(float));
  mb->x = calloc((size_t)L * P + 1, sizeof(float));
  mb->target = calloc((size_t)L * P + 1, sizeof(float));
  for (int c = 0; c < C; c++) {
    int n = mb->cu[c + 1] - mb->cu[c];
    mb->labels[c] = clips[c].label, mb->t[c] = clips[c].t;
    mb->w[c] = kernels_mse_weight(n_batch_clips, n, P);
    rng_key kx = {seed, 0, (uint64_t)clip_ids[c], RNG_STREAM_NOISE};
    rng_key ky = {seed, 1, (uint64_t)clip_ids[c], RNG_STREAM_NOISE};
    for (int j = 0; j < n; j++) {
      int r = mb->cu[c] + j;
      mb->pos[3 * r] = j / (clips[c].H * clips[c].W);
      mb->pos[3 * r + 1] = (j / clips[c].W) % clips[c].H;
      mb->pos[3 * r + 2] = j % clips[c].W;
      for (int v = 0; v < P; v++) {
        mb->x[(size_t)r * P + v] = (float)rng_normal(&kx, (uint64_t)j * P + v);
        mb->target[(size_t)r * P + v] = (float)rng_normal(&ky, (uint64_t)j * P + v);
      }
    }
  }
  size_t sz[7] = {sizeof(int32_t) * (C + 1), sizeof(int32_t) * (L * 3 + 1), sizeof(int32_t) * C,
                  sizeof(float) * C, sizeof(float) * ((size_t)L * P + 1),
                  sizeof(float) * ((size_t)L * P + 1), sizeof(float) * C};
  void *src[7] = {mb->cu, mb->pos, mb->labels, mb->t, mb->x, mb->target, mb->w};
  for (int i = 0; i < 7; i++) {
    tsr_status st = kb->alloc(kb, &mb->dev[i], sz[i]);
    if (!st) st = kb->to_device(kb, mb->dev[i], src[i], sz[i]);
    if (st) return st;
  }
  mb->b = (dit_batch){.n_clips = C, .L = L, .max_len = longest, .cu_seqlens = mb->dev[0],
                      .pos = mb->dev[1],
                      .labels = mb->dev[2], .t = mb->dev[3], .x = mb->dev[4],
                      .target = mb->dev[5], .loss_weight = mb->dev[6]};
  return TSR_OK;
}

static inline void mt_batch_free(mt_batch *mb) {
  const kernels_backend *kb = kernels_cpu();
  for (int i = 0; i < 7; i++) kb->free(kb, mb->dev[i]);
  for (int i = 0; i < 2; i++) kb->free(kb, mb->tdev[i]);
  free(mb->cu), free(mb->pos), free(mb->labels), free(mb->t), free(mb->w), free(mb->x);
  free(mb->target), free(mb->cu_text), free(mb->text);
}

#endif
