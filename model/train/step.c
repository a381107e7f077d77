// model/train/step.c — one global batch: this rank's part of the plan (model/dist/dist_step.h:
// chunks, objective, forward/backward with ring attention) -> gradients summed over the
// world -> global-norm clipping -> AdamW -> EMA (model/train/step.h).
#include "model/train/step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/lora.h"
#include "model/objective.h"
#include "store/latent_file.h"
#include "model/train/lr.h"

int train_decays(const dit_tensor *t) {
  return t->ndim == 2 && strncmp(t->name, "y_embed", 7) != 0;
}

// What the optimizer trains: the adapters with lora.rank > 0 (the base frozen), else every
// weight of the model.
float *train_params(trainer *tr) {
  return tr->tc.lora_rank > 0 ? dit_lora_params(tr->model) : dit_params(tr->model);
}
float *train_grads(trainer *tr) {
  return tr->tc.lora_rank > 0 ? dit_lora_grads(tr->model) : dit_grads(tr->model);
}

// lora.rank > 0: the config's adapters on the model, A drawn from train.seed.
static tsr_status lora_setup(trainer *tr) {
  lora_config lc = train_lora_config(&tr->tc);
  lc.shard_ranks = tr->tc.zero > 0 ? comm_size() : 0;  // ZeRO: the adapters' state sharded
  tsr_status st = dit_lora_attach(tr->model, &lc, (uint64_t)tr->tc.seed);
  if (st) return err_wrap(st, "trainer: lora.rank = %d: ", lc.rank);
  tr->n_params = dit_lora_num_params(tr->model);
  return TSR_OK;
}

tsr_status train_segments_upload(const kernels_backend *kb, const kernels_param_segment *h, int n,
                                 kernels_param_segment **segs, int *n_segs) {
  size_t bytes = (size_t)(n ? n : 1) * sizeof *h;
  tsr_status st = kb->alloc(kb, (void **)segs, bytes);
  if (!st && n && (st = kb->to_device(kb, *segs, h, (size_t)n * sizeof *h))) {
    kb->free(kb, *segs);
    *segs = NULL;
  }
  if (!st) *n_segs = n;
  return st;
}

static int segment_cmp(const void *a, const void *b) {
  int64_t x = ((const kernels_param_segment *)a)->offset;
  int64_t y = ((const kernels_param_segment *)b)->offset;
  return (x > y) - (x < y);
}

// The AdamW segment table of n tensors described by info(m, i) (what: for messages), made
// in backend memory: one segment per tensor, decaying as train_decays says.
static tsr_status adamw_segments_of(dit_model *m, int n,
                                    const dit_tensor *(*info)(const dit_model *, int),
                                    const char *what, kernels_param_segment **segs,
                                    int *n_segs) {
  kernels_param_segment *h = calloc((size_t)n, sizeof *h);
  if (!h) return err_set(TSR_ENOMEM, "AdamW: no memory for the segments of %d %s", n, what);
  for (int i = 0; i < n; i++) {
    const dit_tensor *ti = info(m, i);
    h[i] = (kernels_param_segment){(int64_t)ti->offset, (int64_t)ti->numel, train_decays(ti), 0};
  }
  // adamw_update_multi takes them by increasing offset; the adapters' table is in module
  // order, their buffer is not (a group's A's first, model/lora.c)
  qsort(h, (size_t)n, sizeof *h, segment_cmp);
  tsr_status st = train_segments_upload(dit_backend(m), h, n, segs, n_segs);
  free(h);
  return st;
}

// train.null_caption's embedding (docs/train.md), read once and given to the distributed
// step, which builds every wave's captions with it.
static tsr_status trainer_null_caption(trainer *tr) {
  const char *path = tr->tc.null_caption;
  if (!path[0]) return TSR_OK;
  if (tr->mc.text_dim == 0)
    return err_set(TSR_EINVAL, "train.null_caption = %s: the model has no captions "
                   "(model.text_dim = 0); leave the key empty", path);
  char text[64];
  free(tr->null_text);
  tr->null_text = NULL;
  tsr_status st = caption_file_read(path, tr->mc.text_dim, &tr->null_text, &tr->null_tokens, text,
                                    sizeof text);
  if (st) return err_wrap(st, "train.null_caption: ");
  if (tr->null_tokens > tr->mc.text_len)
    return err_set(TSR_EINVAL, "train.null_caption = %s: %d tokens, the model takes at most "
                   "model.text_len = %d", path, tr->null_tokens, tr->mc.text_len);
  dist_step_set_null_caption(tr->dist, tr->null_text, tr->null_tokens);
  return TSR_OK;
}

// train.zero: the AdamW segments of this rank's shard, in backend memory.
static tsr_status zero_adamw_segments(trainer *tr) {
  kernels_param_segment *h = NULL;
  int n = 0;
  tsr_status st = tr->tc.lora_rank > 0
                     ? zero_segments_of(&tr->zero, tr->model, dit_lora_num_tensors(tr->model),
                                        dit_lora_tensor_info, train_decays, &h, &n)
                     : zero_segments(&tr->zero, tr->model, train_decays, &h, &n);
  if (!st) qsort(h, (size_t)n, sizeof *h, segment_cmp);  // the adapters' table is not in order
  if (!st) st = train_segments_upload(tr->kb, h, n, &tr->adam_segs, &tr->n_adam_segs);
  free(h);
  return st;
}

tsr_status trainer_setup(trainer *tr) {
  const kernels_backend *kb = tr->kb;
  if (!kb) return err_set(TSR_EINVAL, "trainer: no compute backend (train_run picks it)");
  // a blockwise placement may put up to 5% more than the planner's limit on a rank
  int64_t L = dist_step_placed_tokens(&tr->mc, &tr->tc, tr->tc.mem_tokens);
  int64_t C = tr->tc.global_batch < tr->tc.mem_tokens ? tr->tc.global_batch : tr->tc.mem_tokens;
  if (L > INT32_MAX / 4)
    return err_set(TSR_EINVAL, "train.mem_tokens = %lld is too large", (long long)L);
  // train.noise_per_chunk: the model conditions every chunk of a clip apart (a segment each)
  C = objective_max_segments(&tr->mc, &tr->tc, (int)L, (int)C);
  // ZeRO: every gradient bucket splits into equal slices, one per rank (model/train/zero.h)
  // (a LoRA run's base is frozen and whole: its adapters are sharded, lora_setup)
  tr->mc.shard_ranks = tr->tc.zero > 0 && tr->tc.lora_rank == 0 ? comm_size() : 0;
  // LoRA trains adapters on a frozen base: no base gradient is computed or held
  // ZeRO 2 keeps no whole gradient: each bucket is reduce-scattered from a bucket buffer;
  // ZeRO 3 no whole weights either: each bucket is gathered into a bucket buffer before use
  // (and with bf16 activations holds its linear weights in bf16 only: dit_create_frozen_base)
  tsr_status st = tr->tc.lora_rank > 0 ? dit_create_frozen_base(&tr->model, &tr->mc, kb, (int)L, (int)C)
                 : tr->tc.zero == 3 ? dit_create_sharded(&tr->model, &tr->mc, kb, (int)L, (int)C)
                 : tr->tc.zero == 2 ? dit_create_bucket_grads(&tr->model, &tr->mc, kb, (int)L, (int)C)
                                    : dit_create(&tr->model, &tr->mc, kb, (int)L, (int)C);
  if (st) return err_wrap(st, "trainer: ");
  tr->n_params = dit_num_params(tr->model);
  if (tr->tc.lora_rank > 0 && (st = lora_setup(tr))) return st;
  size_t state = tr->n_params;  // floats of each optimizer buffer: all, or this rank's shard
  if (tr->tc.zero > 0) {
    if ((st = tr->tc.lora_rank > 0
                 ? zero_layout_flat(&tr->zero, (int64_t)tr->n_params, tr->tc.zero, comm_size(),
                                    comm_rank())
                 : zero_layout_make(&tr->zero, tr->model, tr->tc.zero, comm_size(), comm_rank())))
      return st;
    state = (size_t)tr->zero.shard;
  }
  size_t bytes = state * sizeof(float);
  if ((st = kb->alloc(kb, (void **)&tr->adam_m, bytes)) ||
      (st = kb->alloc(kb, (void **)&tr->adam_v, bytes)) ||
      (st = kb->alloc(kb, (void **)&tr->ema, bytes)) ||
      (tr->tc.zero > 0 && ((st = kb->alloc(kb, (void **)&tr->master, bytes)) ||
                           (st = kb->alloc(kb, (void **)&tr->gshard, bytes)) ||
                           (st = kb->alloc(kb, (void **)&tr->zero_buf,
                                           zero_largest_bucket(&tr->zero) * sizeof(float))) ||
                           (st = zero_adamw_segments(tr)))) ||
      (tr->tc.zero == 0 &&
       (st = tr->tc.lora_rank > 0
                ? train_lora_adamw_segments(tr->model, &tr->adam_segs, &tr->n_adam_segs)
                : train_adamw_segments(tr->model, &tr->adam_segs, &tr->n_adam_segs))))
    return err_wrap(st, "trainer: optimizer state of %zu parameters: ", state);
  if (!(tr->clips = calloc((size_t)tr->tc.global_batch, sizeof *tr->clips)) ||
      !(tr->clip_bad = calloc((size_t)data_num_clips(tr->data), 1)))
    return err_set(TSR_ENOMEM, "trainer: no memory");
  st = dist_step_create(&tr->dist, tr->model, tr->cb, &tr->mc, &tr->tc, (int)L, (int)C);
  // stage 2: each bucket's reduce-scatter sums into this rank's gradient shard
  if (!st && tr->tc.zero >= 2 && tr->tc.lora_rank == 0)
    st = dist_step_set_shard(tr->dist, tr->gshard, comm_size());
  // stage 3: each bucket's weights gathered from the ranks' masters before use
  if (!st && tr->tc.zero == 3) st = dist_step_set_weights(tr->dist, tr->master);
  if (st) return st;
  return trainer_null_caption(tr);
}


void trainer_free(trainer *tr) {
  if (tr->kb) {
    dist_step_free(&tr->dist);
    tr->kb->free(tr->kb, tr->adam_m);
    tr->kb->free(tr->kb, tr->adam_v);
    tr->kb->free(tr->kb, tr->ema);
    tr->kb->free(tr->kb, tr->adam_segs);
    tr->kb->free(tr->kb, tr->master);
    tr->kb->free(tr->kb, tr->gshard);
    tr->kb->free(tr->kb, tr->zero_buf);
  }
  zero_layout_free(&tr->zero);
  dit_free(&tr->model);
  free(tr->clips);
  free(tr->clip_bad);
  free(tr->null_text);
  data_sampler_free(&tr->sampler);
  data_close(&tr->data);
  memset(tr, 0, sizeof *tr);
}

tsr_status train_ema_reset(trainer *tr) {
  if (tr->tc.zero > 0)
    return tr->kb->copy(tr->kb, tr->ema, tr->master, (size_t)tr->zero.shard * sizeof(float));
  return tr->kb->copy(tr->kb, tr->ema, train_params(tr), tr->n_params * sizeof(float));
}

tsr_status train_weights_set(trainer *tr) {
  // stage 3: the masters are the only weights (a load put them there)
  return tr->tc.zero > 0 && tr->tc.zero < 3
             ? zero_take(&tr->zero, tr->kb, tr->master, train_params(tr)) : TSR_OK;
}

tsr_status train_weights_init(trainer *tr, uint64_t seed) {
  if (tr->tc.zero < 3) {
    tsr_status st = dit_init(tr->model, seed);
    return st ? st : train_weights_set(tr);
  }
  // this rank's slices of the initial weights, one bucket at a time (the rest never exists)
  float *host = malloc(zero_largest_bucket(&tr->zero) / (size_t)tr->zero.world * sizeof(float) + 4);
  if (!host) return err_set(TSR_ENOMEM, "train.zero = 3: no memory to initialise a shard");
  tsr_status st = TSR_OK;
  for (int b = 0; !st && b < tr->zero.n_buckets; b++) {
    dit_init_range(tr->model, seed, (size_t)tr->zero.lo[b], (size_t)tr->zero.len[b], host);
    st = tr->kb->to_device(tr->kb, tr->master + tr->zero.at[b], host,
                           (size_t)tr->zero.len[b] * sizeof(float));
  }
  free(host);
  return st;
}

tsr_status train_ema_full(trainer *tr, const float **ema) {
  *ema = tr->ema;
  if (tr->tc.zero == 0) return TSR_OK;
  if (!train_grads(tr))
    return err_set(TSR_EINVAL, "train.zero = %d keeps no whole gradient buffer to put the EMA "
                   "together in (samples during training: train.zero <= 1)", tr->tc.zero);
  *ema = train_grads(tr);
  return zero_gather(&tr->zero, tr->cb, train_grads(tr), tr->ema);
}

// The batch's clips for the plan: ids, grids, labels and their mapped tokens.
static tsr_status batch_clips(trainer *tr, const int64_t *batch, int n, int64_t *tokens) {
  if (n > tr->tc.global_batch)
    return err_set(TSR_EINVAL, "step %lld: a batch of %d clips, more than train.global_batch",
                   (long long)tr->step, n);
  *tokens = 0;
  for (int i = 0; i < n; i++) {
    const data_clip *dc = data_clip_at(tr->data, batch[i]);
    const uint8_t *tok;
    // verify: the batch was hashed when it was drawn (train.c), so this is a cached verdict
    const void *text = NULL;
    int text_tokens = 0;
    store_dtype text_dtype = STORE_DTYPE_F32;
    tsr_status st = data_clip_tokens(tr->data, batch[i], 1, &tok);
    if (!st && tr->mc.text_dim > 0)
      st = data_clip_caption(tr->data, batch[i], 1, &text, &text_tokens, &text_dtype);
    if (st) return err_wrap(st, "step %lld: ", (long long)tr->step);
    tr->clips[i] = (dist_clip){.id = dc->id, .T = dc->T, .H = dc->H, .W = dc->W,
                               .label = dc->label, .tokens = tok,
                               .tokens_dtype = (kernels_tokens)data_settings(tr->data)->dtype,
                               .text = text, .text_tokens = text_tokens,
                               .text_dtype = (kernels_tokens)text_dtype};
    *tokens += dc->tokens;
  }
  return TSR_OK;
}

tsr_status train_adamw_segments(dit_model *m, kernels_param_segment **segs, int *n_segs) {
  return adamw_segments_of(m, dit_num_tensors(m), dit_tensor_info, "tensors", segs, n_segs);
}

tsr_status train_adamw(dit_model *m, const train_config *c, float *adam_m, float *adam_v,
                       const kernels_param_segment *segs, int n_segs, double lr, int64_t t,
                       float grad_scale) {
  const kernels_backend *kb = dit_backend(m);
  // the act-dtype working copy follows the masters in the same pass
  tsr_status st = kb->adamw_update_multi(kb, dit_params(m), dit_grads(m), adam_m, adam_v,
                                         dit_weights_work(m), dit_num_params(m), segs, n_segs,
                                         (float)lr, c->beta1, c->beta2, c->adam_eps,
                                         c->weight_decay, t, grad_scale);
  return st ? err_wrap(st, "AdamW step %lld: ", (long long)t) : TSR_OK;
}

lora_config train_lora_config(const train_config *c) {
  lora_config lc = {.rank = c->lora_rank, .alpha = c->lora_alpha};
  snprintf(lc.targets, sizeof lc.targets, "%s", c->lora_targets);
  return lc;
}

tsr_status train_lora_adamw_segments(dit_model *m, kernels_param_segment **segs, int *n_segs) {
  return adamw_segments_of(m, dit_lora_num_tensors(m), dit_lora_tensor_info, "adapters", segs,
                           n_segs);
}

tsr_status train_lora_adamw(dit_model *m, const train_config *c, float *adam_m, float *adam_v,
                            const kernels_param_segment *segs, int n_segs, double lr, int64_t t,
                            float grad_scale) {
  const kernels_backend *kb = dit_backend(m);
  // their act-dtype working copy follows in the same pass
  tsr_status st = kb->adamw_update_multi(kb, dit_lora_params(m), dit_lora_grads(m), adam_m,
                                         adam_v, dit_lora_work(m), dit_lora_num_params(m), segs,
                                         n_segs, (float)lr, c->beta1, c->beta2, c->adam_eps,
                                         c->weight_decay, t, grad_scale);
  return st ? err_wrap(st, "AdamW step %lld (adapters): ", (long long)t) : TSR_OK;
}

// What a step that went non-finite says: the values that steer the update, and what to do.
static tsr_status not_finite(const trainer *tr, const char *what, double a, double b) {
  return err_set(TSR_EINVAL, "step %lld: %s is not finite (%g, %g) with train.lr = %g, warmup "
                 "%lld, adam_eps = %g, grad_clip = %g: the run stops here and no checkpoint of "
                 "this step is written; lower train.lr, raise train.warmup or set "
                 "train.grad_clip, and resume from the last checkpoint (or check the data: "
                 "`tessera index verify`)", (long long)tr->step, what, a, b, tr->tc.lr,
                 (long long)tr->tc.warmup, tr->tc.adam_eps, tr->tc.grad_clip);
}

// train.zero >= 1: AdamW and the EMA on this rank's shard, the masters all-gathered into the
// model's weights and its working copy refreshed; the finiteness check over the world.
static tsr_status optimize_shard(trainer *tr, double lr, float grad_scale) {
  const kernels_backend *kb = tr->kb;
  const train_config *c = &tr->tc;
  size_t S = (size_t)tr->zero.shard;
  // the masters are a shard: the working copy is refreshed after their all-gather
  tsr_status st = kb->adamw_update_multi(kb, tr->master, tr->gshard, tr->adam_m, tr->adam_v,
                                         NULL, S, tr->adam_segs, tr->n_adam_segs, (float)lr,
                                         c->beta1, c->beta2, c->adam_eps, c->weight_decay,
                                         tr->step + 1, grad_scale);
  if (!st) st = kb->ema_update(kb, tr->ema, tr->master, S, (float)ema_decay_at(c, tr->step));
  // stages 1-2: the whole weights from the masters; stage 3 gathers them block by block
  if (!st && c->zero < 3) st = zero_gather(&tr->zero, tr->cb, train_params(tr), tr->master);
  if (!st) st = tr->tc.lora_rank > 0 ? dit_lora_refresh(tr->model) : dit_refresh_weights(tr->model);
  double w = 0, e = 0;
  if (!st) st = zero_sumsq(&tr->zero, kb, tr->master, &w);
  if (!st) st = zero_sumsq(&tr->zero, kb, tr->ema, &e);
  if (!st && !(isfinite(w) && isfinite(e)))
    st = not_finite(tr, "the AdamW update (|weights|^2, |EMA|^2)", w, e);
  return st;
}

// AdamW (step count step + 1), then the EMA of all weights. A finite gradient can still
// give non-finite weights (a config the checks let through, a backend fault): they are
// checked before the step counts, so no checkpoint ever holds them.
static tsr_status optimize(trainer *tr, double lr, float grad_scale) {
  const kernels_backend *kb = tr->kb;
  const train_config *c = &tr->tc;
  tsr_status st;
  if (c->zero > 0) return optimize_shard(tr, lr, grad_scale);
  if (c->lora_rank > 0)
    st = train_lora_adamw(tr->model, c, tr->adam_m, tr->adam_v, tr->adam_segs, tr->n_adam_segs,
                          lr, tr->step + 1, grad_scale);
  else
    st = train_adamw(tr->model, c, tr->adam_m, tr->adam_v, tr->adam_segs, tr->n_adam_segs, lr,
                     tr->step + 1, grad_scale);
  if (!st) st = kb->ema_update(kb, tr->ema, train_params(tr), tr->n_params,
                               (float)ema_decay_at(&tr->tc, tr->step));
  double w = 0, e = 0;
  if (!st) st = kb->sumsq(kb, &w, train_params(tr), tr->n_params);
  if (!st) st = kb->sumsq(kb, &e, tr->ema, tr->n_params);
  if (!st && !(isfinite(w) && isfinite(e)))
    st = not_finite(tr, "the AdamW update (|weights|^2, |EMA|^2)", w, e);
  return st;
}

// A LoRA run's adapter gradients summed over the world: all-reduced (train.zero <= 1), or at
// stage 2 reduce-scattered into this rank's shard (one bucket: the whole buffer).
static tsr_status lora_reduce(trainer *tr) {
  comm_group *world = comm_group_get(comm_size());
  if (tr->tc.zero >= 2)
    return tr->cb->reduce_scatter_sum_f32(tr->cb, world, train_grads(tr), tr->gshard,
                                          tr->zero.shard);
  if (comm_size() == 1) return TSR_OK;
  return tr->cb->allreduce_sum_f32(tr->cb, world, train_grads(tr), (int64_t)tr->n_params);
}

tsr_status train_step(trainer *tr, const int64_t *batch, int n, const plan *p,
                      train_step_stats *stats) {
  double t0 = time_now();
  memset(stats, 0, sizeof *stats);
  // with adapters the base is frozen: no gradient of it to zero or reduce (dit_create_frozen)
  tsr_status st = dit_zero_grad(tr->model);
  if (!st && tr->tc.lora_rank > 0) st = dit_lora_zero_grad(tr->model);
  double loss = 0;
  int64_t tokens = 0;
  if (!st) st = batch_clips(tr, batch, n, &tokens);
  if (!st) st = dist_step_run(tr->dist, p, tr->clips, n, tr->step, &loss, &stats->microbatches);
  if (!st) st = dist_step_reduce(tr->dist, &loss);  // every rank now holds the batch's gradient
  if (!st && dist_step_placed(&tr->mc, &tr->tc) && comm_size() > 1) {
    int64_t v[3];
    dist_step_placed_kv(tr->dist, &v[0], &v[1]);
    v[2] = v[0] != v[1];
    st = comm_allreduce_sum_i64(v, 3);
    stats->placed = 1, stats->kv_bytes = v[0], stats->kv_plan_bytes = v[1];
    stats->kv_ranks_off = v[2];
  }
  if (!st && tr->tc.lora_rank > 0) st = lora_reduce(tr);  // ... and the adapters' (the only ones)
  if (st) return err_wrap(st, "step %lld: ", (long long)tr->step);
  double sumsq = 0;  // of the whole gradient: with train.zero, the shards' summed over the world
  if (tr->tc.zero == 1) st = zero_take(&tr->zero, tr->kb, tr->gshard, train_grads(tr));
  if (!st) st = tr->tc.zero > 0 ? zero_sumsq(&tr->zero, tr->kb, tr->gshard, &sumsq)
                              : tr->kb->sumsq(tr->kb, &sumsq, train_grads(tr), tr->n_params);
  if (st) return st;
  if (!isfinite(loss) || !isfinite(sumsq))
    return not_finite(tr, "the loss or the gradient (loss, |g|^2)", loss, sumsq);
  stats->lr = lr_schedule(&tr->tc, tr->step);
  if ((st = optimize(tr, stats->lr, kernels_clip_scale(sumsq, tr->tc.grad_clip)))) return st;
  tr->step++;
  stats->loss = loss;
  stats->grad_norm = sqrt(sumsq);
  stats->clips = n;
  stats->tokens = tokens;
  stats->step_s = time_now() - t0;
  stats->tokens_per_s = stats->step_s > 0 ? (double)tokens / stats->step_s : 0;
  return TSR_OK;
}
