// model/objective.c — rectified-flow inputs from uint8 tokens (formulas: objective.h).
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
  if (!ob->cu_seqlens || !ob->pos || !ob->t || !ob->labels || !ob->x || !ob->target ||
      !ob->loss_weight) {
    objective_free(ob);
    return err_set(TSR_ENOMEM, "objective_alloc: no memory for %d tokens of %d values",
                   max_tokens, P);
  }
  return TSR_OK;
}

void objective_free(objective_batch *ob) {
  free(ob->cu_seqlens), free(ob->pos), free(ob->t), free(ob->labels), free(ob->x);
  free(ob->target), free(ob->loss_weight);
  memset(ob, 0, sizeof *ob);
}

double objective_timestep(const train_config *tc, int64_t step, int64_t clip_id,
                          int64_t total_tokens) {
  // one definition, shared with the backends' objective_inputs entry
  return kernels_objective_timestep((uint64_t)tc->seed, (uint64_t)step, clip_id, total_tokens,
                                    tc->t_logit_mean, tc->t_logit_std, tc->t_shift_tokens);
}

int objective_label(const dit_config *mc, const train_config *tc, int64_t step, int64_t clip_id,
                    int label) {
  int nc = mc->num_classes;
  if (nc == 0) return 0;
  if (label < 0 || label >= nc) return nc;
  rng_key k = {(uint64_t)tc->seed, (uint64_t)step, (uint64_t)clip_id, RNG_STREAM_LABEL_DROP};
  return rng_uniform(&k, 0) < tc->class_dropout ? nc : label;
}

static tsr_status check_clip(const objective_clip *c, int nc) {
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
  return TSR_OK;
}

// The host part of a microbatch, shared by objective_build and objective_device_build:
// checks the clips, then fills cu_seqlens (C + 1), pos (L, 3), labels (C), loss_weight (C)
// and, when keys is not NULL, the clips' random-number keys (C). *L_out: tokens.
static tsr_status build_meta(const dit_config *mc, const train_config *tc, int64_t step,
                             int n_batch_clips, const objective_clip *clips, int n_clips,
                             int max_tokens, int max_clips, int P_buf, int32_t *cu, int32_t *pos,
                             int32_t *labels, float *loss_weight, kernels_clip_key *keys,
                             int *L_out) {
  int P = mc->pt * mc->ph * mc->pw * mc->channels;
  if (P != P_buf)
    return err_set(TSR_EINVAL, "objective: the model has %d values per token, the buffers %d", P,
                   P_buf);
  if (n_clips < 1 || n_clips > max_clips || n_batch_clips < 1)
    return err_set(TSR_EINVAL, "objective: %d clips (buffers hold 1 to %d), global batch %d",
                   n_clips, max_clips, n_batch_clips);
  int64_t L = 0;
  for (int c = 0; c < n_clips; c++) {
    tsr_status st = check_clip(&clips[c], mc->num_classes);
    if (st) return st;
    L += clips[c].len;
  }
  if (L > max_tokens)
    return err_set(TSR_EINVAL, "objective: %lld tokens, the buffers hold %d", (long long)L,
                   max_tokens);
  cu[0] = 0;
  for (int c = 0; c < n_clips; c++) {
    const objective_clip *k = &clips[c];
    int32_t r0 = cu[c];
    cu[c + 1] = r0 + k->len;
    labels[c] = objective_label(mc, tc, step, k->clip_id, k->label);
    loss_weight[c] = kernels_mse_weight(n_batch_clips, k->total_tokens, P);
    if (keys) keys[c] = (kernels_clip_key){k->clip_id, k->total_tokens, k->first_token};
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
  return TSR_OK;
}

tsr_status objective_build(objective_batch *ob, const dit_config *mc, const train_config *tc,
                           int64_t step, int n_batch_clips, const objective_clip *clips,
                           int n_clips) {
  int L, P = ob->P;
  tsr_status st = build_meta(mc, tc, step, n_batch_clips, clips, n_clips, ob->max_tokens,
                             ob->max_clips, ob->P, ob->cu_seqlens, ob->pos, ob->labels,
                             ob->loss_weight, NULL, &L);
  if (st) return st;
  ob->n_clips = n_clips, ob->L = L;
  const float a = 2.0f / 255.0f;
  for (int c = 0; c < n_clips; c++) {
    const objective_clip *k = &clips[c];
    int32_t r0 = ob->cu_seqlens[c];
    float t = (float)objective_timestep(tc, step, k->clip_id, k->total_tokens);
    ob->t[c] = t;
    rng_key nk = {(uint64_t)tc->seed, (uint64_t)step, (uint64_t)k->clip_id, RNG_STREAM_NOISE};
    for (int i = 0; i < k->len; i++) {
      int64_t j = k->first_token + i;
      size_t r = (size_t)(r0 + i);
      const uint8_t *u = k->tokens + (size_t)i * P;
      float *x = ob->x + r * P, *v = ob->target + r * P;
      for (int q = 0; q < P; q++) {
        float x0 = (float)u[q] * a - 1.0f;
        float e = (float)rng_normal(&nk, (uint64_t)j * (uint64_t)P + (uint64_t)q);
        x[q] = (1.0f - t) * x0 + t * e;
        v[q] = e - x0;
      }
    }
  }
  return TSR_OK;
}

// The backend buffers of an objective_device, in this order, each 64-byte aligned.
enum { DEV_CU, DEV_POS, DEV_LABELS, DEV_T, DEV_LW, DEV_X, DEV_TARGET, DEV_TOKENS, DEV_KEYS, DEV_N };

static size_t dev_bytes_of(kernels_dtype act, size_t L, size_t C, size_t P, int part) {
  size_t LP = L * P;
  switch (part) {
  case DEV_CU: return sizeof(int32_t) * (C + 1);
  case DEV_POS: return sizeof(int32_t) * 3 * L;
  case DEV_LABELS: return sizeof(int32_t) * C;
  case DEV_T: case DEV_LW: return sizeof(float) * C;
  case DEV_X: case DEV_TARGET: return LP * kernels_dtype_size(act);
  case DEV_TOKENS: return LP;
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
  if (!d->cu_h || !d->pos_h || !d->labels_h || !d->lw_h || !d->keys_h) {
    objective_device_free(d);
    return err_set(TSR_ENOMEM, "objective_device_alloc: no memory for %d tokens", max_tokens);
  }
  tsr_status st = kb->alloc(kb, &d->mem, bytes);
  if (st) objective_device_free(d);
  return st;
}

// d->batch pointing at the backend buffers for C clips and L tokens.
static void set_batch(objective_device *d, int C, int L, int num_classes) {
  d->batch = (dit_batch){.n_clips = C, .L = L, .cu_seqlens = dev_part(d, DEV_CU),
                         .pos = dev_part(d, DEV_POS),
                         .labels = num_classes > 0 ? dev_part(d, DEV_LABELS) : NULL,
                         .t = dev_part(d, DEV_T), .loss_weight = dev_part(d, DEV_LW),
                         .x = dev_part(d, DEV_X), .target = dev_part(d, DEV_TARGET)};
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
  set_batch(d, C, L, num_classes);
  return TSR_OK;
}

tsr_status objective_device_build(objective_device *d, const dit_config *mc,
                                  const train_config *tc, int64_t step, int n_batch_clips,
                                  const objective_clip *clips, int n_clips) {
  const kernels_backend *kb = d->kb;
  int L;
  tsr_status st = build_meta(mc, tc, step, n_batch_clips, clips, n_clips, d->max_tokens,
                             d->max_clips, d->P, d->cu_h, d->pos_h, d->labels_h, d->lw_h,
                             d->keys_h, &L);
  if (st) return st;
  size_t C = (size_t)n_clips, P = (size_t)d->P;
  struct {
    int part;
    const void *src;
    size_t bytes;
  } parts[] = {
      {DEV_CU, d->cu_h, sizeof(int32_t) * (C + 1)},
      {DEV_POS, d->pos_h, sizeof(int32_t) * 3 * (size_t)L},
      {DEV_LABELS, d->labels_h, sizeof(int32_t) * C},
      {DEV_LW, d->lw_h, sizeof(float) * C},
      {DEV_KEYS, d->keys_h, sizeof(kernels_clip_key) * C},
  };
  for (size_t i = 0; !st && i < sizeof parts / sizeof parts[0]; i++)
    st = kb->to_device(kb, dev_part(d, parts[i].part), parts[i].src, parts[i].bytes);
  // the tokens as stored (uint8): a chunk's tokens are contiguous in its clip
  uint8_t *tok = dev_part(d, DEV_TOKENS);
  for (int c = 0; !st && c < n_clips; c++)
    if (clips[c].len)
      st = kb->to_device(kb, tok + (size_t)d->cu_h[c] * P, clips[c].tokens, (size_t)clips[c].len * P);
  if (!st)
    st = kb->objective_inputs(kb, dev_part(d, DEV_T), dev_part(d, DEV_X),
                              dev_part(d, DEV_TARGET), tok, dev_part(d, DEV_KEYS),
                              dev_part(d, DEV_CU), n_clips, L, d->P, (uint64_t)tc->seed,
                              (uint64_t)step, tc->t_logit_mean, tc->t_logit_std,
                              tc->t_shift_tokens);
  if (st) return st;
  set_batch(d, n_clips, L, mc->num_classes);
  return TSR_OK;
}

void objective_device_free(objective_device *d) {
  if (d->kb) d->kb->free(d->kb, d->mem);
  free(d->cu_h), free(d->pos_h), free(d->labels_h), free(d->lw_h), free(d->keys_h);
  memset(d, 0, sizeof *d);
}
