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

tsr_status objective_build(objective_batch *ob, const dit_config *mc, const train_config *tc,
                           int64_t step, int n_batch_clips, const objective_clip *clips,
                           int n_clips) {
  int P = mc->pt * mc->ph * mc->pw * mc->channels;
  if (P != ob->P)
    return err_set(TSR_EINVAL, "objective: the model has %d values per token, the buffers %d", P,
                   ob->P);
  if (n_clips < 1 || n_clips > ob->max_clips || n_batch_clips < 1)
    return err_set(TSR_EINVAL, "objective: %d clips (buffers hold 1 to %d), global batch %d",
                   n_clips, ob->max_clips, n_batch_clips);
  int64_t L = 0;
  for (int c = 0; c < n_clips; c++) {
    tsr_status st = check_clip(&clips[c], mc->num_classes);
    if (st) return st;
    L += clips[c].len;
  }
  if (L > ob->max_tokens)
    return err_set(TSR_EINVAL, "objective: %lld tokens, the buffers hold %d", (long long)L,
                   ob->max_tokens);
  ob->n_clips = n_clips, ob->L = (int)L;
  ob->cu_seqlens[0] = 0;
  const float a = 2.0f / 255.0f;
  for (int c = 0; c < n_clips; c++) {
    const objective_clip *k = &clips[c];
    int32_t r0 = ob->cu_seqlens[c];
    ob->cu_seqlens[c + 1] = r0 + k->len;
    float t = (float)objective_timestep(tc, step, k->clip_id, k->total_tokens);
    ob->t[c] = t;
    ob->labels[c] = objective_label(mc, tc, step, k->clip_id, k->label);
    ob->loss_weight[c] = kernels_mse_weight(n_batch_clips, k->total_tokens, P);
    rng_key nk = {(uint64_t)tc->seed, (uint64_t)step, (uint64_t)k->clip_id, RNG_STREAM_NOISE};
    int64_t hw = (int64_t)k->H * k->W;
    for (int i = 0; i < k->len; i++) {
      int64_t j = k->first_token + i;
      size_t r = (size_t)(r0 + i);
      ob->pos[3 * r] = (int32_t)(j / hw);
      ob->pos[3 * r + 1] = (int32_t)((j / k->W) % k->H);
      ob->pos[3 * r + 2] = (int32_t)(j % k->W);
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

tsr_status objective_device_alloc(objective_device *d, const kernels_backend *kb, int max_tokens,
                                  int max_clips, int P) {
  memset(d, 0, sizeof *d);
  d->kb = kb, d->max_tokens = max_tokens, d->max_clips = max_clips, d->P = P;
  size_t bytes = sizeof(int32_t) * ((size_t)max_clips * 2 + 1 + (size_t)max_tokens * 3) +
                 sizeof(float) * ((size_t)max_clips * 2 + (size_t)max_tokens * P * 2) + 64 * 8;
  return kb->alloc(kb, &d->mem, bytes);
}

tsr_status objective_upload(objective_device *d, const objective_batch *ob, int num_classes) {
  if (ob->L > d->max_tokens || ob->n_clips > d->max_clips || ob->P != d->P)
    return err_set(TSR_EINVAL, "objective_upload: batch of %d tokens, %d clips, P %d exceeds the "
                               "device buffers (%d, %d, %d)",
                   ob->L, ob->n_clips, ob->P, d->max_tokens, d->max_clips, d->P);
  const kernels_backend *kb = d->kb;
  int C = ob->n_clips, L = ob->L;
  size_t LP = (size_t)L * ob->P;
  struct {
    const void *src;
    size_t bytes, cap;
  } parts[] = {
      {ob->cu_seqlens, sizeof(int32_t) * ((size_t)C + 1), sizeof(int32_t) * ((size_t)d->max_clips + 1)},
      {ob->pos, sizeof(int32_t) * 3 * (size_t)L, sizeof(int32_t) * 3 * (size_t)d->max_tokens},
      {ob->labels, sizeof(int32_t) * (size_t)C, sizeof(int32_t) * (size_t)d->max_clips},
      {ob->t, sizeof(float) * (size_t)C, sizeof(float) * (size_t)d->max_clips},
      {ob->loss_weight, sizeof(float) * (size_t)C, sizeof(float) * (size_t)d->max_clips},
      {ob->x, sizeof(float) * LP, sizeof(float) * (size_t)d->max_tokens * d->P},
      {ob->target, sizeof(float) * LP, sizeof(float) * (size_t)d->max_tokens * d->P},
  };
  void *dst[7];
  char *p = d->mem;
  for (int i = 0; i < 7; i++) {
    dst[i] = p;
    p += (parts[i].cap + 63) / 64 * 64;
    tsr_status st = kb->to_device(kb, dst[i], parts[i].src, parts[i].bytes);
    if (st) return st;
  }
  d->batch = (dit_batch){.n_clips = C, .L = L, .cu_seqlens = dst[0], .pos = dst[1],
                         .labels = num_classes > 0 ? dst[2] : NULL, .t = dst[3],
                         .loss_weight = dst[4], .x = dst[5], .target = dst[6]};
  return TSR_OK;
}

void objective_device_free(objective_device *d) {
  if (d->kb) d->kb->free(d->kb, d->mem);
  memset(d, 0, sizeof *d);
}

tsr_status objective_write_tensors(const objective_batch *ob, st_writer *w, const char *prefix) {
  int64_t C = ob->n_clips, L = ob->L, P = ob->P;
  struct {
    const char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[2];
    const void *data;
  } parts[] = {
      {"x", ST_F32, 2, {L, P}, ob->x},
      {"target", ST_F32, 2, {L, P}, ob->target},
      {"t", ST_F32, 1, {C}, ob->t},
      {"labels", ST_I32, 1, {C}, ob->labels},
      {"loss_weight", ST_F32, 1, {C}, ob->loss_weight},
      {"pos", ST_I32, 2, {L, 3}, ob->pos},
      {"cu_seqlens", ST_I32, 1, {C + 1}, ob->cu_seqlens},
  };
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    char name[256];
    if (snprintf(name, sizeof name, "%s%s", prefix, parts[i].name) >= (int)sizeof name)
      return err_set(TSR_EINVAL, "objective_write_tensors: prefix '%s' is too long", prefix);
    tsr_status st = st_writer_add(w, name, parts[i].dtype, parts[i].ndim, parts[i].shape,
                                  parts[i].data);
    if (st) return st;
  }
  return TSR_OK;
}
