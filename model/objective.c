// model/objective.c — rectified-flow inputs from stored tokens and the clips' captions
// (formulas: objective.h).
#include "model/objective.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"


tsr_status objective_alloc(objective_batch *ob, int max_tokens, int max_clips, int P) {
  memset(ob, 0, sizeof *ob);
  if (max_tokens < 1 || max_clips < 1 || P < 1)
    return err_set(TSR_EINVAL, "objective_alloc: sizes %d tokens, %d clips, P %d must be >= 1",
                   max_tokens, max_clips, P);
  ob->max_tokens = max_tokens, ob->max_clips = max_clips, ob->P = P;
  size_t LP = (size_t)max_tokens * P;
  ob->cu_seqlens = calloc((size_t)max_clips + 1, sizeof(int32_t));
  ob->pos = calloc((size_t)max_tokens * 3, sizeof(int32_t));
  ob->t = calloc((size_t)max_clips, sizeof(float));
  ob->labels = calloc((size_t)max_clips, sizeof(int32_t));
  ob->x = calloc(LP, sizeof(float));
  ob->target = calloc(LP, sizeof(float));
  ob->loss_weight = calloc((size_t)max_clips, sizeof(float));
  ob->attn_cu = calloc((size_t)max_clips + 1, sizeof(int32_t));
  ob->seg = calloc((size_t)max_clips, sizeof(objective_clip));
  if (!ob->cu_seqlens || !ob->pos || !ob->t || !ob->labels || !ob->x || !ob->target ||
      !ob->loss_weight || !ob->attn_cu || !ob->seg) {
    objective_free(ob);
    return err_set(TSR_ENOMEM, "objective_alloc: no memory for %d tokens of %d values",
                   max_tokens, P);
  }
  return TSR_OK;
}

tsr_status objective_alloc_text(objective_batch *ob, int text_dim, int max_text) {
  if (text_dim < 1 || max_text < 1)
    return err_set(TSR_EINVAL, "objective_alloc_text: text_dim %d and max_text %d must be >= 1",
                   text_dim, max_text);
  free(ob->text), free(ob->cu_text);
  ob->text_dim = text_dim, ob->max_text = max_text;
  ob->text = calloc((size_t)max_text * text_dim, sizeof(float));
  ob->cu_text = calloc((size_t)ob->max_clips + 1, sizeof(int32_t));
  if (!ob->text || !ob->cu_text)
    return err_set(TSR_ENOMEM, "objective_alloc_text: no memory for %d caption tokens", max_text);
  return TSR_OK;
}

void objective_free(objective_batch *ob) {
  free(ob->cu_seqlens), free(ob->pos), free(ob->t), free(ob->labels), free(ob->x);
  free(ob->target), free(ob->loss_weight), free(ob->text), free(ob->cu_text);
  free(ob->attn_cu), free(ob->seg);
  memset(ob, 0, sizeof *ob);
}

kernels_t_dist objective_t_dist(const train_config *tc) {
  return (kernels_t_dist){.logit_mean = tc->t_logit_mean, .logit_std = tc->t_logit_std,
                          .shift_tokens = tc->t_shift_tokens, .t_min = tc->t_min,
                          .t_max = tc->t_max};
}

int objective_caption_kept(const train_config *tc, int64_t step, int64_t clip_id) {
  // the label's draw (objective_label): label and caption drop together at equal rates
  rng_key k = {(uint64_t)tc->seed, (uint64_t)step, (uint64_t)clip_id, RNG_STREAM_LABEL_DROP};
  return !(rng_uniform(&k, 0) < tc->caption_dropout);
}

double objective_timestep(const train_config *tc, int64_t step, int64_t clip_id,
                          int64_t total_tokens) {
  return objective_chunk_timestep(tc, step, clip_id, 0, total_tokens);
}

double objective_chunk_timestep(const train_config *tc, int64_t step, int64_t clip_id,
                                int64_t chunk, int64_t total_tokens) {
  // one definition, shared with the backends' objective_inputs entry
  kernels_t_dist td = objective_t_dist(tc);
  return kernels_objective_timestep((uint64_t)tc->seed, (uint64_t)step, clip_id, chunk,
                                    total_tokens, &td);
}

int objective_max_segments(const dit_config *mc, const train_config *tc, int max_tokens,
                           int max_clips) {
  if (!tc->noise_per_chunk) return max_clips;
  // a piece of a clip is cut at each chunk start strictly inside it, and chunk starts are
  // at least mask_chunk tokens apart (a frame has >= 1 token)
  int64_t s = (int64_t)max_clips + max_tokens / (mc->mask_chunk > 0 ? mc->mask_chunk : 1);
  int64_t most = max_tokens > max_clips ? max_tokens : max_clips;
  return (int)(s < most ? s : most);
}

// The conditioning clips of a microbatch: the clips themselves, or with train.noise_per_chunk
// each clip (or CP chunk) cut at the starts of its mask chunks into segments seg (cap of
// them), segment s of mask chunk seg[s].t_index; attn_cu (n_clips + 1) gets the clips' token
// offsets in the segments' packing (the clips of self-attention). *n_seg: segments.
static tsr_status split_segments(const dit_config *mc, const train_config *tc,
                                 const objective_clip *clips, int n_clips, objective_clip *seg,
                                 int cap, int32_t *attn_cu, int *n_seg) {
  if (n_clips < 1 || n_clips > cap)
    return err_set(TSR_EINVAL, "objective: %d clips (buffers hold 1 to %d)", n_clips, cap);
  int n = 0;
  attn_cu[0] = 0;
  for (int c = 0; c < n_clips; c++) {
    const objective_clip *k = &clips[c];
    int64_t cs = (int64_t)mc->mask_chunk * k->H * k->W, j = k->first_token,
            end = k->first_token + k->len;
    size_t row = (size_t)(mc->pt * mc->ph * mc->pw * mc->channels) *
                 kernels_tokens_size(k->tokens_dtype);
    do {
      if (n == cap)
        return err_set(TSR_EINVAL, "objective: train.noise_per_chunk cuts the microbatch's %d "
                       "clips into more than the %d chunks the buffers hold "
                       "(objective_max_segments)", n_clips, cap);
      int64_t e = (j / cs + 1) * cs;
      if (e > end) e = end;
      seg[n] = *k;
      seg[n].first_token = j, seg[n].len = (int)(e - j), seg[n].t_index = j / cs;
      if (k->tokens) seg[n].tokens = (const char *)k->tokens + (size_t)(j - k->first_token) * row;
      n++, j = e;
    } while (j < end);
    attn_cu[c + 1] = attn_cu[c] + k->len;
  }
  *n_seg = n;
  return TSR_OK;
}

int objective_label(const dit_config *mc, const train_config *tc, int64_t step, int64_t clip_id,
                    int label) {
  int nc = mc->num_classes;
  if (nc == 0) return 0;
  if (label < 0 || label >= nc) return nc;
  rng_key k = {(uint64_t)tc->seed, (uint64_t)step, (uint64_t)clip_id, RNG_STREAM_LABEL_DROP};
  return rng_uniform(&k, 0) < tc->class_dropout ? nc : label;
}

static tsr_status check_clip(const objective_clip *c, const dit_config *mc) {
  int nc = mc->num_classes;
  if (c->len < 0 || c->first_token < 0 || c->first_token + c->len > c->total_tokens)
    return err_set(TSR_EINVAL,
                   "objective: clip %lld: chunk [%lld, %lld) is outside its %lld tokens",
                   (long long)c->clip_id, (long long)c->first_token,
                   (long long)(c->first_token + c->len), (long long)c->total_tokens);
  if (c->T < 1 || c->H < 1 || c->W < 1 || (int64_t)c->T * c->H * c->W != c->total_tokens)
    return err_set(TSR_EINVAL, "objective: clip %lld: grid %dx%dx%d is not its %lld tokens",
                   (long long)c->clip_id, c->T, c->H, c->W, (long long)c->total_tokens);
  if (c->len > 0 && !c->tokens)
    return err_set(TSR_EINVAL, "objective: clip %lld: tokens is NULL", (long long)c->clip_id);
  if (nc > 0 && c->label >= nc)
    return err_set(TSR_EINVAL, "objective: clip %lld: label %d >= model.num_classes = %d",
                   (long long)c->clip_id, c->label, nc);
  if (!kernels_tokens_size(c->tokens_dtype))
    return err_set(TSR_EINVAL, "objective: clip %lld: unknown token dtype %d",
                   (long long)c->clip_id, (int)c->tokens_dtype);
  if (c->text && mc->text_dim > 0 &&
      (c->text_tokens < 0 || c->text_tokens > mc->text_len ||
       (c->text_dtype != KERNELS_TOKENS_BF16 && c->text_dtype != KERNELS_TOKENS_F32)))
    return err_set(TSR_EINVAL, "objective: clip %lld: caption of %d tokens (dtype %d); the model "
                   "takes 0 to model.text_len = %d tokens of bf16 or f32", (long long)c->clip_id,
                   c->text_tokens, (int)c->text_dtype, mc->text_len);
  return TSR_OK;
}

void objective_set_null_caption(objective_batch *ob, const float *emb, int tokens) {
  ob->null_text = emb, ob->null_tokens = emb ? tokens : 0;
}

void objective_device_set_null_caption(objective_device *d, const float *emb, int tokens) {
  d->null_text = emb, d->null_tokens = emb ? tokens : 0;
}

// The null caption of a batch: (n, text_dim) fp32 rows, or none.
typedef struct {
  const float *emb;
  int n;
} null_caption;

// The rows a clip's caption gives at this step: its caption (kept), else the null caption
// (none, or dropped), else nothing. *n: rows (0: none), *dt their dtype.
static const void *caption_src(const dit_config *mc, const train_config *tc, int64_t step,
                               const objective_clip *c, null_caption nul, int *n,
                               kernels_tokens *dt) {
  *n = 0, *dt = KERNELS_TOKENS_F32;
  if (mc->text_dim <= 0) return NULL;
  if (c->text && c->text_tokens > 0 && objective_caption_kept(tc, step, c->clip_id)) {
    *n = c->text_tokens, *dt = c->text_dtype;
    return c->text;
  }
  *n = nul.emb ? nul.n : 0;
  return nul.emb;
}

// Caption rows a clip attends to at this step: the kept rows, or with model.text_pad always
// text_len (the kept rows, then zero rows: Wan's padded umT5 output; a dropped caption is all
// zero rows, or the null caption's then zero rows).
static int caption_rows(const dit_config *mc, const train_config *tc, int64_t step,
                        const objective_clip *c, null_caption nul) {
  if (mc->text_dim <= 0) return 0;
  if (mc->text_pad) return mc->text_len;
  int n;
  kernels_tokens dt;
  caption_src(mc, tc, step, c, nul, &n, &dt);
  return n;
}

// The clean value x0 of token value q of a clip (kernels.h objective_inputs, same formula
// and float arithmetic as the backends').
static float token_x0(const objective_clip *c, size_t q) {
  switch (c->tokens_dtype) {
  case KERNELS_TOKENS_U8: return (float)((const uint8_t *)c->tokens)[q] * (2.0f / 255.0f) - 1.0f;
  case KERNELS_TOKENS_BF16: return kernels_bf16_to_f32(((const kernels_bf16 *)c->tokens)[q]);
  default: return ((const float *)c->tokens)[q];
  }
}

// 1 when entry c of clips continues the previous entry's clip (clip_of: objective_device_
// build_runs'; NULL: every entry is a clip of its own).
static int continues(const int *clip_of, int c) {
  return clip_of && c > 0 && clip_of[c] == clip_of[c - 1];
}

// The host part of a microbatch, shared by objective_build and objective_device_build:
// checks the clips, then fills cu_seqlens (C + 1), pos (L, 3), labels (C), loss_weight (C)
// and, when keys is not NULL, the clips' random-number keys (C), all per entry of clips; an
// entry that continues its clip (clip_of) has no caption rows of its own. *L_out: tokens,
// *max_out: the longest entry's, *Lt_out: caption tokens.
static tsr_status build_meta(const dit_config *mc, const train_config *tc, int64_t step,
                             int n_batch_clips, const objective_clip *clips, int n_clips,
                             const int *clip_of,
                             int max_tokens, int max_clips, int P_buf, int32_t *cu, int32_t *pos,
                             int32_t *labels, float *loss_weight, kernels_clip_key *keys,
                             int32_t *cu_text, int max_text, null_caption nul, int *L_out,
                             int *max_out, int *Lt_out) {
  int P = mc->pt * mc->ph * mc->pw * mc->channels;
  if (nul.emb && mc->text_dim > 0 && (nul.n < 1 || nul.n > mc->text_len))
    return err_set(TSR_EINVAL, "objective: the null caption has %d tokens; the model takes 1 to "
                   "model.text_len = %d", nul.n, mc->text_len);
  if (P != P_buf)
    return err_set(TSR_EINVAL, "objective: the model has %d values per token, the buffers %d", P,
                   P_buf);
  if (n_clips < 1 || n_clips > max_clips || n_batch_clips < 1)
    return err_set(TSR_EINVAL, "objective: %d clips (buffers hold 1 to %d), global batch %d",
                   n_clips, max_clips, n_batch_clips);
  int64_t L = 0, Lt = 0;
  int longest = 0;
  for (int c = 0; c < n_clips; c++) {
    tsr_status st = check_clip(&clips[c], mc);
    if (st) return st;
    L += clips[c].len;
    if (!continues(clip_of, c)) Lt += caption_rows(mc, tc, step, &clips[c], nul);
    if (clips[c].len > longest) longest = clips[c].len;
  }
  if (L > max_tokens)
    return err_set(TSR_EINVAL, "objective: %lld tokens, the buffers hold %d", (long long)L,
                   max_tokens);
  if (Lt > 0 && (!cu_text || Lt > max_text))
    return err_set(TSR_EINVAL, "objective: %lld caption tokens, the buffers hold %d",
                   (long long)Lt, cu_text ? max_text : 0);
  cu[0] = 0;
  if (cu_text) cu_text[0] = 0;
  for (int c = 0; c < n_clips; c++) {
    const objective_clip *k = &clips[c];
    int32_t r0 = cu[c];
    cu[c + 1] = r0 + k->len;
    if (cu_text)
      cu_text[c + 1] = cu_text[c] + (continues(clip_of, c) ? 0 : caption_rows(mc, tc, step, k, nul));
    labels[c] = objective_label(mc, tc, step, k->clip_id, k->label);
    loss_weight[c] = kernels_mse_weight(n_batch_clips, k->total_tokens, P);
    if (keys) keys[c] = (kernels_clip_key){k->clip_id, k->total_tokens, k->first_token, k->t_index};
    int64_t hw = (int64_t)k->H * k->W;
    for (int i = 0; i < k->len; i++) {
      int64_t j = k->first_token + i;
      size_t r = (size_t)(r0 + i);
      pos[3 * r] = (int32_t)(j / hw);
      pos[3 * r + 1] = (int32_t)((j / k->W) % k->H);
      pos[3 * r + 2] = (int32_t)(j % k->W);
    }
  }
  *L_out = (int)L;
  *max_out = longest;
  *Lt_out = (int)Lt;
  return TSR_OK;
}

// Copies n caption values of dtype dt to fp32.
static void text_to_f32(float *dst, const void *src, kernels_tokens dt, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = dt == KERNELS_TOKENS_BF16 ? kernels_bf16_to_f32(((const kernels_bf16 *)src)[i])
                                       : ((const float *)src)[i];
}

tsr_status objective_build(objective_batch *ob, const dit_config *mc, const train_config *tc,
                           int64_t step, int n_batch_clips, const objective_clip *clips,
                           int n_clips) {
  int L, longest, Lt, P = ob->P, n_in = n_clips;
  null_caption nul = {ob->null_text, ob->null_tokens};
  if (mc->text_dim > 0 && ob->text_dim != mc->text_dim)
    return err_set(TSR_EINVAL, "objective_build: the model takes captions of width %d, the "
                   "buffers %d (objective_alloc_text)", mc->text_dim, ob->text_dim);
  ob->attn_clips = 0;
  if (tc->noise_per_chunk) {
    TSR_TRY(split_segments(mc, tc, clips, n_clips, ob->seg, ob->max_clips, ob->attn_cu, &n_clips));
    clips = ob->seg;
  }
  tsr_status st = build_meta(mc, tc, step, n_batch_clips, clips, n_clips, NULL, ob->max_tokens,
                             ob->max_clips, ob->P, ob->cu_seqlens, ob->pos, ob->labels,
                             ob->loss_weight, NULL, mc->text_dim > 0 ? ob->cu_text : NULL,
                             ob->max_text, nul, &L, &longest, &Lt);
  if (st) return st;
  ob->n_clips = n_clips, ob->L = L, ob->max_len = longest, ob->Lt = Lt;
  if (tc->noise_per_chunk) {
    ob->attn_clips = n_in, ob->max_len = 0;
    for (int c = 0; c < n_in; c++)
      if (ob->attn_cu[c + 1] - ob->attn_cu[c] > ob->max_len)
        ob->max_len = ob->attn_cu[c + 1] - ob->attn_cu[c];
  }
  for (int c = 0; c < n_clips && Lt > 0; c++) {
    size_t n = (size_t)(ob->cu_text[c + 1] - ob->cu_text[c]), TD = (size_t)ob->text_dim;
    int kn;
    kernels_tokens dt;
    const void *src = caption_src(mc, tc, step, &clips[c], nul, &kn, &dt);
    size_t k = (size_t)kn;
    float *dst = ob->text + (size_t)ob->cu_text[c] * TD;
    if (k) text_to_f32(dst, src, dt, k * TD);
    memset(dst + k * TD, 0, (n - k) * TD * sizeof(float));  // model.text_pad's zero rows
  }
  for (int c = 0; c < n_clips; c++) {
    const objective_clip *k = &clips[c];
    int32_t r0 = ob->cu_seqlens[c];
    float t = (float)objective_chunk_timestep(tc, step, k->clip_id, k->t_index, k->total_tokens);
    ob->t[c] = t;
    rng_key nk = {(uint64_t)tc->seed, (uint64_t)step, (uint64_t)k->clip_id, RNG_STREAM_NOISE};
    for (int i = 0; i < k->len; i++) {
      int64_t j = k->first_token + i;
      size_t r = (size_t)(r0 + i);
      float *x = ob->x + r * P, *v = ob->target + r * P;
      for (int q = 0; q < P; q++) {
        float x0 = token_x0(k, (size_t)i * P + (size_t)q);
        float e = (float)rng_normal(&nk, (uint64_t)j * (uint64_t)P + (uint64_t)q);
        x[q] = (1.0f - t) * x0 + t * e;
        v[q] = e - x0;
      }
    }
  }
  return TSR_OK;
}

// The backend buffers of an objective_device, in this order, each 64-byte aligned.
enum { DEV_CU, DEV_POS, DEV_LABELS, DEV_T, DEV_LW, DEV_X, DEV_TARGET, DEV_KEYS, DEV_CU_TEXT,
       DEV_ATTN_CU, DEV_N };

static size_t dev_bytes_of(kernels_dtype act, size_t L, size_t C, size_t P, int part) {
  size_t LP = L * P;
  switch (part) {
  case DEV_CU: return sizeof(int32_t) * (C + 1);
  case DEV_POS: return sizeof(int32_t) * 3 * L;
  case DEV_LABELS: return sizeof(int32_t) * C;
  case DEV_T: case DEV_LW: return sizeof(float) * C;
  case DEV_X: case DEV_TARGET: return LP * kernels_dtype_size(act);
  case DEV_CU_TEXT: case DEV_ATTN_CU: return sizeof(int32_t) * (C + 1);
  default: return sizeof(kernels_clip_key) * C;
  }
}

static size_t dev_bytes(const objective_device *d, int part) {
  return dev_bytes_of(d->kb->act_dtype, (size_t)d->max_tokens, (size_t)d->max_clips,
                      (size_t)d->P, part);
}

size_t objective_device_bytes(kernels_dtype act, int max_tokens, int max_clips, int P) {
  size_t bytes = 0;
  for (int i = 0; i < DEV_N; i++)
    bytes += (dev_bytes_of(act, (size_t)max_tokens, (size_t)max_clips, (size_t)P, i) + 63) / 64 * 64;
  return bytes;
}

static void *dev_part(const objective_device *d, int part) {
  char *p = d->mem;
  for (int i = 0; i < part; i++) p += (dev_bytes(d, i) + 63) / 64 * 64;
  return p;
}

tsr_status objective_device_alloc(objective_device *d, const kernels_backend *kb, int max_tokens,
                                  int max_clips, int P) {
  memset(d, 0, sizeof *d);
  d->kb = kb, d->max_tokens = max_tokens, d->max_clips = max_clips, d->P = P;
  size_t bytes = objective_device_bytes(kb->act_dtype, max_tokens, max_clips, P);
  size_t C = (size_t)max_clips;
  d->cu_h = calloc(C + 1, sizeof(int32_t));
  d->pos_h = calloc((size_t)max_tokens * 3, sizeof(int32_t));
  d->labels_h = calloc(C, sizeof(int32_t));
  d->lw_h = calloc(C, sizeof(float));
  d->keys_h = calloc(C, sizeof(kernels_clip_key));
  d->cu_text_h = calloc(C + 1, sizeof(int32_t));
  d->attn_cu_h = calloc(C + 1, sizeof(int32_t));
  d->seg = calloc(C, sizeof(objective_clip));
  if (!d->cu_h || !d->pos_h || !d->labels_h || !d->lw_h || !d->keys_h || !d->cu_text_h ||
      !d->attn_cu_h || !d->seg) {
    objective_device_free(d);
    return err_set(TSR_ENOMEM, "objective_device_alloc: no memory for %d tokens", max_tokens);
  }
  tsr_status st = kb->alloc(kb, &d->mem, bytes);
  if (st) objective_device_free(d);
  return st;
}

// d->batch pointing at the backend buffers for C clips, L tokens (max_len the longest
// clip's), A clips of attention (0: the C clips) and Lt caption tokens (text: with_text =
// the model's text_dim > 0).
static void set_batch(objective_device *d, int C, int L, int max_len, int num_classes,
                      int with_text, int Lt, int A) {
  d->batch = (dit_batch){.n_clips = C, .L = L, .max_len = max_len,
                         .cu_seqlens = dev_part(d, DEV_CU),
                         .attn_cu = A ? dev_part(d, DEV_ATTN_CU) : NULL, .attn_clips = A,
                         .pos = dev_part(d, DEV_POS),
                         .labels = num_classes > 0 ? dev_part(d, DEV_LABELS) : NULL,
                         .t = dev_part(d, DEV_T), .loss_weight = dev_part(d, DEV_LW),
                         .x = dev_part(d, DEV_X), .target = dev_part(d, DEV_TARGET),
                         .Lt = with_text ? Lt : 0,
                         .cu_text = with_text ? dev_part(d, DEV_CU_TEXT) : NULL,
                         .text = with_text ? d->text : NULL};
}

// Grows a backend buffer to at least `bytes` (contents not kept).
static tsr_status grow(const kernels_backend *kb, void **p, size_t *cap, size_t bytes) {
  if (bytes <= *cap && *p) return TSR_OK;
  kb->free(kb, *p);
  *p = NULL, *cap = 0;
  tsr_status st = kb->alloc(kb, p, bytes ? bytes : 1);
  if (!st) *cap = bytes;
  return st;
}

// Caption buffers (raw and act dtype) for Lt tokens of width text_dim.
static tsr_status grow_text(objective_device *d, int Lt, int text_dim) {
  const kernels_backend *kb = d->kb;
  if ((size_t)Lt <= d->text_cap && d->text) return TSR_OK;
  size_t cap = (size_t)Lt + (size_t)Lt / 2 + 16, raw = 0, act = 0;
  d->text_cap = 0;
  tsr_status st = grow(kb, &d->text_raw, &raw, cap * (size_t)text_dim * sizeof(float));
  if (!st) st = grow(kb, &d->text, &act, kernels_act_bytes(kb, cap * (size_t)text_dim));
  if (!st) d->text_cap = cap;
  return st;
}

tsr_status objective_upload(objective_device *d, const objective_batch *ob, int num_classes) {
  if (ob->L > d->max_tokens || ob->n_clips > d->max_clips || ob->P != d->P)
    return err_set(TSR_EINVAL, "objective_upload: batch of %d tokens, %d clips, P %d exceeds the "
                               "device buffers (%d, %d, %d)",
                   ob->L, ob->n_clips, ob->P, d->max_tokens, d->max_clips, d->P);
  const kernels_backend *kb = d->kb;
  if (kb->act_dtype != KERNELS_F32)
    return err_set(TSR_EINVAL, "objective_upload: the host batch is fp32 but backend %s computes "
                   "in %s; build the batch on the backend with objective_device_build", kb->name,
                   kernels_dtype_name(kb->act_dtype));
  int C = ob->n_clips, L = ob->L;
  size_t LP = (size_t)L * ob->P;
  struct {
    int part;
    const void *src;
    size_t bytes;
  } parts[] = {
      {DEV_CU, ob->cu_seqlens, sizeof(int32_t) * ((size_t)C + 1)},
      {DEV_POS, ob->pos, sizeof(int32_t) * 3 * (size_t)L},
      {DEV_LABELS, ob->labels, sizeof(int32_t) * (size_t)C},
      {DEV_T, ob->t, sizeof(float) * (size_t)C},
      {DEV_LW, ob->loss_weight, sizeof(float) * (size_t)C},
      {DEV_X, ob->x, sizeof(float) * LP},
      {DEV_TARGET, ob->target, sizeof(float) * LP},
  };
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    tsr_status st = kb->to_device(kb, dev_part(d, parts[i].part), parts[i].src, parts[i].bytes);
    if (st) return st;
  }
  int with_text = ob->text_dim > 0;
  if (with_text) {
    tsr_status st = kb->to_device(kb, dev_part(d, DEV_CU_TEXT), ob->cu_text,
                                  sizeof(int32_t) * ((size_t)C + 1));
    if (!st) st = grow_text(d, ob->Lt, ob->text_dim);
    if (!st && ob->Lt)
      st = kb->to_device(kb, d->text, ob->text, sizeof(float) * (size_t)ob->Lt * ob->text_dim);
    if (st) return st;
  }
  if (ob->attn_clips) {
    tsr_status st = kb->to_device(kb, dev_part(d, DEV_ATTN_CU), ob->attn_cu,
                                  sizeof(int32_t) * ((size_t)ob->attn_clips + 1));
    if (st) return st;
  }
  set_batch(d, C, L, ob->max_len, num_classes, with_text, ob->Lt, ob->attn_clips);
  return TSR_OK;
}

// Runs c of clip_of's clips (host staging per run) made into the batch's clips: cu_h,
// labels_h, lw_h and cu_text_h compacted to one entry a clip (a clip's labels and weights
// are its first run's), uploaded, and each clip's t' copied from its first run's. Returns
// the clips; *longest: the longest clip's tokens.
static tsr_status merge_runs(objective_device *d, const int *clip_of, int n_runs, int with_text,
                             int *n_out, int *longest) {
  const kernels_backend *kb = d->kb;
  float *t = dev_part(d, DEV_T);
  int n = 0;
  tsr_status st = TSR_OK;
  *longest = 0;
  for (int r = 0; r < n_runs && !st; r++) {
    if (continues(clip_of, r)) {
      d->cu_h[n] = d->cu_h[r + 1];
      if (with_text) d->cu_text_h[n] = d->cu_text_h[r + 1];
    } else {
      // t'[n] <- t'[r]: r >= n, and a later clip reads a later run, so none is overwritten
      if (r != n) st = kb->copy(kb, t + n, t + r, sizeof(float));
      d->labels_h[n] = d->labels_h[r], d->lw_h[n] = d->lw_h[r];
      d->cu_h[++n] = d->cu_h[r + 1];
      if (with_text) d->cu_text_h[n] = d->cu_text_h[r + 1];
    }
    if (d->cu_h[n] - d->cu_h[n - 1] > *longest) *longest = d->cu_h[n] - d->cu_h[n - 1];
  }
  *n_out = n;
  return st;
}

// Placed runs under train.noise_per_chunk: the runs of one clip (clip_of) are one clip of
// attention, and each of their segments a conditioning clip of its own, as the segments of a
// CP chunk are (the same t', label, caption and loss weight as the whole clip's segment of
// that mask chunk). attn_cu (n_runs + 1: the runs' offsets, split_segments') is compacted
// in place to the clips' offsets; returns the clips.
static int attention_clips(int32_t *attn_cu, const int *clip_of, int n_runs) {
  int n = 0;
  for (int r = 0; r < n_runs; r++) {
    if (!continues(clip_of, r)) n++;
    attn_cu[n] = attn_cu[r + 1];
  }
  return n;
}

// objective_device_build over entries `clips`, one clip each (clip_of NULL) or consecutive
// runs of one clip (clip_of: objective_device_build_runs).
static tsr_status device_build(objective_device *d, const dit_config *mc, const train_config *tc,
                               int64_t step, int n_batch_clips, const objective_clip *clips,
                               int n_clips, const int *clip_of) {
  const kernels_backend *kb = d->kb;
  int L, longest, Lt, with_text = mc->text_dim > 0, n_in = n_clips;
  null_caption nul = {d->null_text, d->null_tokens};
  if (tc->noise_per_chunk) {
    TSR_TRY(split_segments(mc, tc, clips, n_clips, d->seg, d->max_clips, d->attn_cu_h, &n_clips));
    clips = d->seg;
    if (clip_of) n_in = attention_clips(d->attn_cu_h, clip_of, n_in), clip_of = NULL;
  }
  int max_text = with_text ? n_clips * mc->text_len : 0;
  tsr_status st = build_meta(mc, tc, step, n_batch_clips, clips, n_clips, clip_of, d->max_tokens,
                             d->max_clips, d->P, d->cu_h, d->pos_h, d->labels_h, d->lw_h,
                             d->keys_h, with_text ? d->cu_text_h : NULL, max_text, nul, &L,
                             &longest, &Lt);
  if (st) return st;
  for (int c = 1; c < n_clips; c++)
    if (clips[c].tokens_dtype != clips[0].tokens_dtype)
      return err_set(TSR_EINVAL, "objective: clips %lld and %lld of one microbatch have tokens of "
                     "different dtypes", (long long)clips[0].clip_id, (long long)clips[c].clip_id);
  kernels_tokens tdt = clips[0].tokens_dtype;
  size_t C = (size_t)n_clips, P = (size_t)d->P, tsz = kernels_tokens_size(tdt);
  struct {
    int part;
    const void *src;
    size_t bytes;
  } parts[] = {
      {DEV_CU, d->cu_h, sizeof(int32_t) * (C + 1)},
      {DEV_POS, d->pos_h, sizeof(int32_t) * 3 * (size_t)L},
      {DEV_KEYS, d->keys_h, sizeof(kernels_clip_key) * C},
      {DEV_ATTN_CU, d->attn_cu_h, tc->noise_per_chunk ? sizeof(int32_t) * ((size_t)n_in + 1) : 0},
  };
  for (size_t i = 0; !st && i < sizeof parts / sizeof parts[0]; i++)
    if (parts[i].bytes) st = kb->to_device(kb, dev_part(d, parts[i].part), parts[i].src, parts[i].bytes);
  // the tokens as stored: a chunk's tokens are contiguous in its clip
  if (!st) st = grow(kb, &d->tok, &d->tok_cap, (size_t)d->max_tokens * P * tsz);
  char *tok = d->tok;
  for (int c = 0; !st && c < n_clips; c++)
    if (clips[c].len)
      st = kb->to_device(kb, tok + (size_t)d->cu_h[c] * P * tsz, clips[c].tokens,
                         (size_t)clips[c].len * P * tsz);
  if (!st)
    st = kb->objective_inputs(kb, dev_part(d, DEV_T), dev_part(d, DEV_X),
                              dev_part(d, DEV_TARGET), tok, tdt, dev_part(d, DEV_KEYS),
                              dev_part(d, DEV_CU), n_clips, L, d->P, (uint64_t)tc->seed,
                              (uint64_t)step, objective_t_dist(tc));
  // kept (or null) captions: uploaded as stored, then cast to the act dtype clip by clip
  if (!st && with_text) {
    if (!st) st = grow_text(d, Lt, mc->text_dim);
    size_t TD = (size_t)mc->text_dim;
    float *zeros = NULL;  // model.text_pad's rows after a caption, sent as fp32 zeros
    for (int c = 0; !st && c < n_clips; c++) {
      if (continues(clip_of, c)) continue;  // its clip's caption came with its first run
      size_t r0 = (size_t)d->cu_text_h[c], n = (size_t)(d->cu_text_h[c + 1] - d->cu_text_h[c]);
      int kn;
      kernels_tokens dt;
      const void *src = caption_src(mc, tc, step, &clips[c], nul, &kn, &dt);
      size_t k = (size_t)kn, es = kernels_tokens_size(dt);
      char *raw = (char *)d->text_raw + r0 * TD * sizeof(float);
      if (k) st = kb->to_device(kb, raw, src, k * TD * es);
      if (!st && k)
        st = kb->cast(kb, kernels_act_at(kb, d->text, r0 * TD), kb->act_dtype, raw,
                      dt == KERNELS_TOKENS_BF16 ? KERNELS_BF16 : KERNELS_F32, k * TD);
      if (st || n == k) continue;
      if (!zeros && !(zeros = calloc((size_t)mc->text_len * TD, sizeof(float))))
        st = err_set(TSR_ENOMEM, "objective: no memory for the caption padding");
      raw = (char *)d->text_raw + (r0 + k) * TD * sizeof(float);
      if (!st) st = kb->to_device(kb, raw, zeros, (n - k) * TD * sizeof(float));
      if (!st)
        st = kb->cast(kb, kernels_act_at(kb, d->text, (r0 + k) * TD), kb->act_dtype, raw,
                      KERNELS_F32, (n - k) * TD);
    }
    free(zeros);
  }
  // the objective's keys and offsets were per run; the model's arrays are per clip
  if (!st && clip_of) {
    if (!(st = merge_runs(d, clip_of, n_clips, with_text, &n_clips, &longest)))
      st = kb->to_device(kb, dev_part(d, DEV_CU), d->cu_h, sizeof(int32_t) * ((size_t)n_clips + 1));
    C = (size_t)n_clips;
  }
  struct {
    int part;
    const void *src;
    size_t bytes;
  } clip_parts[] = {
      {DEV_LABELS, d->labels_h, sizeof(int32_t) * C},
      {DEV_LW, d->lw_h, sizeof(float) * C},
      {DEV_CU_TEXT, d->cu_text_h, sizeof(int32_t) * (C + 1)},
  };
  for (size_t i = 0; !st && i < sizeof clip_parts / sizeof clip_parts[0]; i++)
    if (clip_parts[i].part != DEV_CU_TEXT || with_text)
      st = kb->to_device(kb, dev_part(d, clip_parts[i].part), clip_parts[i].src, clip_parts[i].bytes);
  if (st) return st;
  int A = tc->noise_per_chunk ? n_in : 0;
  for (int c = 0; c < A; c++)  // the longest clip of attention bounds the kernels' plans
    if (d->attn_cu_h[c + 1] - d->attn_cu_h[c] > longest) longest = d->attn_cu_h[c + 1] - d->attn_cu_h[c];
  set_batch(d, n_clips, L, longest, mc->num_classes, with_text, Lt, A);
  return TSR_OK;
}

tsr_status objective_device_build(objective_device *d, const dit_config *mc,
                                  const train_config *tc, int64_t step, int n_batch_clips,
                                  const objective_clip *clips, int n_clips) {
  return device_build(d, mc, tc, step, n_batch_clips, clips, n_clips, NULL);
}

tsr_status objective_device_build_runs(objective_device *d, const dit_config *mc,
                                       const train_config *tc, int64_t step, int n_batch_clips,
                                       const objective_clip *runs, const int *clip_of,
                                       int n_runs) {
  for (int r = 0; r < n_runs; r++) {
    int step_of = r ? clip_of[r] - clip_of[r - 1] : clip_of[0] + 1;
    if (step_of != 0 && step_of != 1)
      return err_set(TSR_EINVAL, "objective: run %d belongs to clip %d after clip %d: clips are "
                     "numbered from 0 in order", r, clip_of[r], r ? clip_of[r - 1] : -1);
    if (step_of == 0 && (runs[r].clip_id != runs[r - 1].clip_id ||
                         runs[r].first_token < runs[r - 1].first_token + runs[r - 1].len))
      return err_set(TSR_EINVAL, "objective: run %d continues clip %lld out of token order or "
                     "from another clip (%lld)", r, (long long)runs[r - 1].clip_id,
                     (long long)runs[r].clip_id);
  }
  return device_build(d, mc, tc, step, n_batch_clips, runs, n_runs, clip_of);
}

void objective_device_free(objective_device *d) {
  if (d->kb) {
    d->kb->free(d->kb, d->mem);
    d->kb->free(d->kb, d->tok);
    d->kb->free(d->kb, d->text_raw);
    d->kb->free(d->kb, d->text);
  }
  free(d->cu_h), free(d->pos_h), free(d->labels_h), free(d->lw_h), free(d->keys_h);
  free(d->cu_text_h), free(d->attn_cu_h), free(d->seg);
  memset(d, 0, sizeof *d);
}
