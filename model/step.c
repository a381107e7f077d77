// model/step.c — one global batch: this rank's waves of the plan -> microbatches ->
// objective -> forward/backward (gradients accumulate) -> global-norm clipping -> AdamW
// -> EMA (model/train.h).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/objective.h"
#include "model/train.h"

// Microbatch buffers: host inputs from the objective and their backend copy.
struct train_scratch {
  int max_tokens, max_clips;
  objective_batch host;
  objective_device dev;
  objective_clip *clips;  // (max_clips) the microbatch's clips
};

static void scratch_free(struct train_scratch *s) {
  if (!s) return;
  objective_free(&s->host);
  objective_device_free(&s->dev);
  free(s->clips);
  free(s);
}

static tsr_status scratch_new(const kernels_backend *kb, int L, int C, int P,
                              struct train_scratch **out) {
  struct train_scratch *s = calloc(1, sizeof *s);
  if (!s) return err_set(TSR_ENOMEM, "trainer: no memory for microbatch buffers");
  s->max_tokens = L;
  s->max_clips = C;
  tsr_status r = objective_alloc(&s->host, L, C, P);
  if (!r) r = objective_device_alloc(&s->dev, kb, L, C, P);
  if (!r && !(s->clips = calloc((size_t)C, sizeof *s->clips)))
    r = err_set(TSR_ENOMEM, "trainer: no memory for microbatch buffers");
  if (r) {
    scratch_free(s);
    return r;
  }
  *out = s;
  return TSR_OK;
}

tsr_status trainer_setup(trainer *tr) {
  tr->kb = kernels_cpu();
  const kernels_backend *kb = tr->kb;
  int64_t L = tr->tc.mem_tokens;
  int64_t C = tr->tc.global_batch < L ? tr->tc.global_batch : L;
  if (L > INT32_MAX / 4)
    return err_set(TSR_EINVAL, "train.mem_tokens = %lld is too large", (long long)L);
  tsr_status r = dit_create(&tr->model, &tr->mc, kb, (int)L, (int)C);
  if (r) return err_wrap(r, "trainer: ");
  tr->n_params = dit_num_params(tr->model);
  size_t bytes = tr->n_params * sizeof(float);
  if ((r = kb->alloc(kb, (void **)&tr->adam_m, bytes)) ||
      (r = kb->alloc(kb, (void **)&tr->adam_v, bytes)) ||
      (r = kb->alloc(kb, (void **)&tr->ema, bytes)))
    return err_wrap(r, "trainer: optimizer state of %zu parameters: ", tr->n_params);
  int nt = dit_num_tensors(tr->model);
  if (!(tr->decay_mask = calloc((size_t)nt, 1)))
    return err_set(TSR_ENOMEM, "trainer: no memory");
  // Weight decay on matrices only; not on biases, norm weights or the label table.
  for (int i = 0; i < nt; i++) {
    const dit_tensor *t = dit_tensor_info(tr->model, i);
    tr->decay_mask[i] = t->ndim == 2 && strncmp(t->name, "y_embed", 7) != 0;
  }
  int P = tr->mc.pt * tr->mc.ph * tr->mc.pw * tr->mc.channels;
  return scratch_new(kb, (int)L, (int)C, P, &tr->scratch);
}

void trainer_free(trainer *tr) {
  if (tr->kb) {
    scratch_free(tr->scratch);
    tr->kb->free(tr->kb, tr->adam_m);
    tr->kb->free(tr->kb, tr->adam_v);
    tr->kb->free(tr->kb, tr->ema);
  }
  dit_free(&tr->model);
  free(tr->decay_mask);
  data_sampler_free(&tr->sampler);
  data_close(&tr->data);
  memset(tr, 0, sizeof *tr);
}

tsr_status train_ema_reset(trainer *tr) {
  return tr->kb->copy(tr->kb, tr->ema, dit_params(tr->model), tr->n_params * sizeof(float));
}

// The group of wave w that holds this rank, or NULL.
static const plan_group *my_group(const plan *p, int w, int rank) {
  for (int g = p->wave_off[w]; g < p->wave_off[w + 1]; g++) {
    const plan_group *pg = &p->groups[g];
    if (rank >= pg->first_rank && rank < pg->first_rank + pg->size) return pg;
  }
  return NULL;
}

// Builds, uploads and runs (forward + backward) the microbatch of group g.
static tsr_status run_group(trainer *tr, const plan *p, const plan_group *g,
                            const int64_t *batch, int n, double *loss, int64_t *tokens) {
  struct train_scratch *s = tr->scratch;
  if (g->size > 1)
    return err_set(TSR_EINVAL, "step %lld: the plan splits clips over %d ranks; context "
                   "parallelism across ranks is not implemented yet (issue 5)",
                   (long long)tr->step, g->size);
  if (g->nclips > s->max_clips)
    return err_set(TSR_EINVAL, "step %lld: a microbatch of %d clips exceeds the %d the model was "
                   "sized for", (long long)tr->step, g->nclips, s->max_clips);
  int64_t L = 0;
  for (int j = 0; j < g->nclips; j++) {
    int32_t bi = p->clip_index[g->clip_off + j];
    if (bi < 0 || bi >= n)
      return err_set(TSR_EINVAL, "step %lld: plan names clip %d of a batch of %d",
                     (long long)tr->step, bi, n);
    const data_clip *dc = data_clip_at(tr->data, batch[bi]);
    const uint8_t *tok;
    tsr_status r = data_clip_tokens(tr->data, batch[bi], 0, &tok);
    if (r) return err_wrap(r, "step %lld: ", (long long)tr->step);
    // Whole clip on this rank (CP size 1): the chunk starting at token 0.
    s->clips[j] = (objective_clip){.clip_id = dc->id, .total_tokens = dc->tokens,
                                   .first_token = 0, .len = (int)dc->tokens, .T = dc->T,
                                   .H = dc->H, .W = dc->W, .label = dc->label, .tokens = tok};
    L += dc->tokens;
  }
  if (L > s->max_tokens)
    return err_set(TSR_EINVAL, "step %lld: a microbatch of %lld tokens exceeds train.mem_tokens "
                   "= %d", (long long)tr->step, (long long)L, s->max_tokens);
  tsr_status r = objective_build(&s->host, &tr->mc, &tr->tc, tr->step, n, s->clips, g->nclips);
  if (!r) r = objective_upload(&s->dev, &s->host, tr->mc.num_classes);
  double l = 0;
  if (!r) r = dit_forward(tr->model, &s->dev.batch, NULL, &l);
  if (!r) r = dit_backward(tr->model, &s->dev.batch);
  if (r) return err_wrap(r, "step %lld: ", (long long)tr->step);
  *loss += l;
  *tokens += L;
  return TSR_OK;
}

// AdamW over each tensor (weight decay per the mask), then the EMA of all weights.
static tsr_status optimize(trainer *tr, double lr, float grad_scale) {
  const kernels_backend *kb = tr->kb;
  float *w = dit_params(tr->model), *g = dit_grads(tr->model);
  const train_config *c = &tr->tc;
  for (int i = 0; i < dit_num_tensors(tr->model); i++) {
    const dit_tensor *t = dit_tensor_info(tr->model, i);
    size_t o = t->offset;
    tsr_status r = kb->adamw_update(kb, w + o, g + o, tr->adam_m + o, tr->adam_v + o, t->numel,
                                    (float)lr, c->beta1, c->beta2, c->adam_eps,
                                    tr->decay_mask[i] ? c->weight_decay : 0.0f, tr->step + 1,
                                    grad_scale);
    if (r) return err_wrap(r, "step %lld: AdamW on %s: ", (long long)tr->step, t->name);
  }
  return kb->ema_update(kb, tr->ema, w, tr->n_params, c->ema_decay);
}

tsr_status train_step(trainer *tr, const int64_t *batch, int n, const plan *p,
                      train_step_stats *st) {
  double t0 = time_now();
  memset(st, 0, sizeof *st);
  tsr_status r = dit_zero_grad(tr->model);
  double loss = 0;
  int64_t tokens = 0;
  for (int w = 0; !r && w < p->nwaves; w++) {
    const plan_group *g = my_group(p, w, tr->rank);
    if (!g || g->nclips == 0) continue;
    r = run_group(tr, p, g, batch, n, &loss, &tokens);
    st->microbatches++;
  }
  if (r) return r;
  // Multi-rank (issue 5): all-reduce gradients, loss and token counts here.
  double sumsq = 0;
  if ((r = tr->kb->sumsq(tr->kb, &sumsq, dit_grads(tr->model), tr->n_params))) return r;
  if (!isfinite(loss) || !isfinite(sumsq))
    return err_set(TSR_EINVAL, "step %lld: loss or gradient is not finite (loss %g, |g|^2 %g); "
                   "lower train.lr or raise train.warmup", (long long)tr->step, loss, sumsq);
  st->lr = lr_schedule(&tr->tc, tr->step);
  if ((r = optimize(tr, st->lr, kernels_clip_scale(sumsq, tr->tc.grad_clip)))) return r;
  tr->step++;
  st->loss = loss;
  st->grad_norm = sqrt(sumsq);
  st->clips = n;
  st->tokens = tokens;
  st->step_s = time_now() - t0;
  st->tokens_per_s = st->step_s > 0 ? (double)tokens / st->step_s : 0;
  return TSR_OK;
}
