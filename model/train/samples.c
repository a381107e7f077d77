// model/train/samples.c — sample videos of the EMA weights (or adapters) during training
// (model/train/samples.h).
#include "model/train/samples.h"
#include "model/train/tensorboard.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "core/log.h"
#include "model/lora.h"
#include "model/train/options.h"
#include "model/train/step.h"

enum { SAMPLE_MAX_LABELS = 8, SAMPLE_UNLABELLED = 4 };

typedef struct {
  int T, H, W;
} grid;

static int grid_cmp(const void *a, const void *b) {
  const grid *x = a, *y = b;
  int64_t nx = (int64_t)x->T * x->H * x->W, ny = (int64_t)y->T * y->H * y->W;
  if (nx != ny) return nx < ny ? -1 : 1;
  if (x->T != y->T) return x->T < y->T ? -1 : 1;
  return x->H != y->H ? (x->H < y->H ? -1 : 1) : (x->W > y->W) - (x->W < y->W);
}

// The store's most common clip grid (ties: the one of fewer tokens), with frames cut so
// that a guided pair fits mem_tokens.
static tsr_status sample_grid(const trainer *tr, int *T, int *H, int *W) {
  int64_t n = data_num_clips(tr->data);
  grid *g = malloc((size_t)n * sizeof *g);
  if (!g) return err_set(TSR_ENOMEM, "samples: out of memory");
  for (int64_t i = 0; i < n; i++) {
    const data_clip *c = data_clip_at(tr->data, i);
    g[i] = (grid){c->T, c->H, c->W};
  }
  qsort(g, (size_t)n, sizeof *g, grid_cmp);
  int64_t best = 0, best_run = 0;
  for (int64_t i = 0, j; i < n; i = j) {  // runs of equal grids, in token order
    for (j = i + 1; j < n && !grid_cmp(&g[i], &g[j]); j++) {}
    if (j - i > best_run) best = i, best_run = j - i;
  }
  *T = g[best].T, *H = g[best].H, *W = g[best].W;
  free(g);
  int64_t cap = tr->tc.mem_tokens / 2, hw = (int64_t)*H * *W;
  if ((int64_t)*T * hw > cap) *T = hw <= cap ? (int)(cap / hw) : 1;
  return TSR_OK;
}

// The sampling model, forward only (frozen: no gradient buffer). It keeps one block's
// activations (whole-block recompute changes only what the backward re-runs: the forward's
// bits are the same); the memory model (model/train/memory.c) counts it so. A LoRA run's
// gets the frozen base's weights once (they never change) and the run's adapters, forward
// only (no gradient buffer), whose weights sample_model_load_ema overwrites (the seed is
// irrelevant).
static tsr_status sample_model_make(trainer *tr, int tokens, int clips) {
  dit_config smc = tr->mc;
  smc.recompute = DIT_RECOMPUTE_BLOCK;
  if (tr->tc.lora_rank == 0) return dit_create_frozen(&tr->sample_model, &smc, tr->kb, tokens, clips);
  lora_config lc = train_lora_config(&tr->tc);  // the base as the training model holds it
  tsr_status r = dit_create_frozen_base(&tr->sample_model, &smc, tr->kb, tokens, clips);
  if (!r) r = dit_copy_weights(tr->sample_model, tr->model);
  if (!r) r = dit_lora_attach_frozen(tr->sample_model, &lc, (uint64_t)tr->tc.seed);
  if (r) dit_free(&tr->sample_model);  // made again, whole, at the next samples
  return r;
}

// The EMA of what trains into the sampling model: the weights (same config: same flat
// layout), or with lora.rank > 0 the adapters (same config and targets: same layout).
static tsr_status sample_model_load_ema(trainer *tr) {
  dit_model *sm = tr->sample_model;
  int lora = tr->tc.lora_rank > 0;
  if (tr->tc.zero > 0 && !tr->ema_whole)
    return err_set(TSR_EINVAL, "samples: train.zero = %d holds a shard of the EMA only and it was "
                   "not put together (train_ema_full)", tr->tc.zero);
  // (the sampling model's adapters are not padded for ZeRO: the same offsets, fewer floats)
  tsr_status r = tr->kb->copy(tr->kb, lora ? dit_lora_params(sm) : dit_params(sm),
                              tr->tc.zero > 0 ? tr->ema_whole : tr->ema,
                              (lora ? dit_lora_num_params(sm) : tr->n_params) * sizeof(float));
  if (!r) r = lora ? dit_lora_refresh(sm) : dit_refresh_weights(sm);
  return r;
}

tsr_status train_write_samples(trainer *tr, const train_options *o) {
  if (!o->write_video)
    return err_set(TSR_EINVAL, "train.sample_every = %d but this program cannot write video "
                   "(no writer given); set train.sample_every = 0", tr->tc.sample_every);
  double t0 = time_now();
  int T = 0, H = 0, W = 0;
  tsr_status r = sample_grid(tr, &T, &H, &W);
  if (r) return r;
  int labels = tr->mc.num_classes > 0 ? data_num_labels(tr->data) : 0;
  int n = labels ? (labels < SAMPLE_MAX_LABELS ? labels : SAMPLE_MAX_LABELS) : SAMPLE_UNLABELLED;
  sample_params sp[SAMPLE_MAX_LABELS];
  int guided = 0;
  for (int i = 0; i < n; i++) {
    sp[i] = (sample_params){.T = T, .H = H, .W = W, .label = labels ? i : -1,
                            .cfg = labels ? tr->tc.sample_cfg : 1.0f, .steps = tr->tc.sample_steps,
                            .seed = labels ? 0 : (uint64_t)i,
                            .t_shift_tokens = tr->tc.t_shift_tokens};
    guided |= sp[i].cfg != 1.0f && sp[i].label >= 0;
  }
  int64_t N = (int64_t)T * H * W;
  if (!tr->sample_model) r = sample_model_make(tr, (int)((guided ? 2 : 1) * N), guided ? 2 : 1);
  if (!r) r = sample_model_load_ema(tr);
  sample_result res;
  if (!r) r = sample_row(tr->sample_model, sp, n, 1, !store_is_latent(data_settings(tr->data)), &res);
  if (r) return err_wrap(r, "samples at step %lld: ", (long long)tr->step);
  res.store = *data_settings(tr->data);
  char dir[PATH_MAX], base[PATH_MAX], written[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s/samples", o->run_dir) >= (int)sizeof dir ||
      snprintf(base, sizeof base, "%s/sample-%lld", dir, (long long)tr->step) >= (int)sizeof base)
    r = err_set(TSR_EINVAL, "run directory path too long: %s", o->run_dir);
  if (!r) r = fs_dir_nofollow(dir, 1);  // RUN/samples: never a link out of the run
  if (!r) r = o->write_video(base, &res, written, sizeof written);
  if (!r && tr->tb) r = tb_write_sample(tr->tb, tr->step, &res);
  sample_result_free(&res);
  if (r) return err_wrap(r, "samples at step %lld: ", (long long)tr->step);
  char what[64];
  if (labels) snprintf(what, sizeof what, "%d labels", n);
  else snprintf(what, sizeof what, "seeds 0-%d", n - 1);
  log_info("train: step %lld: samples of the EMA %s (%s, %d Euler steps, %dx%dx%d tokens "
           "each) in %s (%.1f s)", (long long)tr->step,
           tr->tc.lora_rank > 0 ? "adapters on the base" : "weights", what, tr->tc.sample_steps,
           T, H, W, written, time_now() - t0);
  return TSR_OK;
}

int train_sample_exists(const char *run_dir, int64_t step) {
  static const char *const exts[] = {"mp4", "y4m"};  // video_write's: with media, without
  for (int k = 0; k < 2; k++) {
    char path[PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof path, "%s/samples/sample-%lld.%s", run_dir, (long long)step, exts[k]);
    if (stat(path, &sb) == 0) return 1;
  }
  return 0;
}

void train_samples_step(trainer *tr, const train_options *o) {
  if (!train_write_samples(tr, o)) return;
  // Samples are a view of the run, not its state: a full disk, a bad path or a missing
  // encoder must not cost the checkpoint that follows (nor the steps after it).
  tr->samples_failed++;
  log_warn("train: %s; training goes on: the checkpoint of this step records the samples as "
           "due, and a --resume from it writes them", err_msg());
  err_clear();
}
