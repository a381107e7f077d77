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

#include <fcntl.h>
#include <jansson.h>
#include <unistd.h>

#include "comm/comm.h"
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
  tsr_status st = dit_create_frozen_base(&tr->sample_model, &smc, tr->kb, tokens, clips);
  if (!st) st = dit_copy_weights(tr->sample_model, tr->model);
  if (!st) st = dit_lora_attach_frozen(tr->sample_model, &lc, (uint64_t)tr->tc.seed);
  if (st) dit_free(&tr->sample_model);  // made again, whole, at the next samples
  return st;
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
  tsr_status st = tr->kb->copy(tr->kb, lora ? dit_lora_params(sm) : dit_params(sm),
                               tr->tc.zero > 0 ? tr->ema_whole : tr->ema,
                               (lora ? dit_lora_num_params(sm) : tr->n_params) * sizeof(float));
  if (!st) st = lora ? dit_lora_refresh(sm) : dit_refresh_weights(sm);
  return st;
}

// Appends the record of one sample file to RUN/samples/samples.jsonl with one write(2)
// (O_APPEND): a crash leaves whole lines and at most a torn last one, which readers skip.
// sp: (n) the file's clips, left to right; prompt: its prompt (the k-th of n_prompts), or
// NULL.
static tsr_status record_sample_at(const char *dir, int64_t step, const char *written,
                                   const sample_params *sp, const dit_config *mc, int n,
                                   const char *prompt, int k, int n_prompts) {
  const char *slash = strrchr(written, '/');
  json_t *o = json_pack("{sIsssisisisisf}", "step", (json_int_t)step, "file",
                        slash ? slash + 1 : written, "frames", sp->T * mc->pt,
                        "height", sp->H * mc->ph, "width", sp->W * mc->pw, "steps", sp->steps,
                        "cfg", (double)sp->cfg);
  json_t *a = json_array();
  for (int i = 0; o && a && i < n; i++)
    json_array_append_new(a, json_integer(sp[i].label >= 0 ? sp[i].label : (json_int_t)sp[i].seed));
  if (o && a) {
    if (prompt) {
      json_object_set_new(o, "prompt", json_string(prompt));
      json_object_set_new(o, "prompt_index", json_integer(k));
      json_object_set_new(o, "prompts", json_integer(n_prompts));
      json_object_set_new(o, "seed", json_integer((json_int_t)sp->seed));
      json_decref(a);
    } else {
      json_object_set_new(o, sp->label >= 0 ? "labels" : "seeds", a);
      if (sp->label >= 0) json_object_set_new(o, "seed", json_integer((json_int_t)sp->seed));
    }
    a = NULL;
  }
  json_decref(a);
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/samples.jsonl", dir);
  char *line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  if (!line) return err_set(TSR_ENOMEM, "samples: out of memory");
  size_t len = strlen(line);
  line[len] = '\n';  // the line's end in place of the terminator: len + 1 bytes written
  int fd = -1;
  tsr_status st = fs_open_nofollow(path, O_WRONLY | O_CREAT | O_APPEND, &fd);
  if (!st && write(fd, line, len + 1) != (ssize_t)(len + 1))
    st = err_set(TSR_EIO, "%s: a sample's record was not written whole", path);
  if (fd >= 0) close(fd);
  free(line);
  return st;
}

// One sample file: the clips of sp (n of them) side by side, written at base (plus the
// writer's extension, into written), shown in TensorBoard and recorded; prompt: the file's
// prompt (the k-th), or NULL for a row of labels or seeds.
static tsr_status write_one(trainer *tr, const train_options *o, const char *dir,
                            const char *base, sample_params *sp, int n, const char *prompt,
                            int k, char *written, size_t cap) {
  sample_result res;
  tsr_status st = sample_row(tr->sample_model, sp, n, 1, !store_is_latent(data_settings(tr->data)),
                             &res);
  if (st) return st;
  res.store = *data_settings(tr->data);
  if (prompt) snprintf(res.caption, sizeof res.caption, "%s", prompt);
  st = o->write_video(base, &res, written, cap);
  char tag[32];
  snprintf(tag, sizeof tag, prompt ? "samples/prompt_%d" : "samples/frames", k);
  if (!st && tr->tb) st = tb_write_sample(tr->tb, tr->step, &res, tag, prompt);
  sample_result_free(&res);
  if (!st) st = record_sample_at(dir, tr->step, written, sp, &tr->mc, n, prompt, k, tr->prompts.n);
  return st;
}

tsr_status train_write_samples(trainer *tr, const train_options *o) {
  if (!o->write_video)
    return err_set(TSR_EINVAL, "train.sample_every = %d but this program cannot write video "
                   "(no writer given); set train.sample_every = 0", tr->tc.sample_every);
  double t0 = time_now();
  int T = 0, H = 0, W = 0;
  tsr_status st = sample_grid(tr, &T, &H, &W);
  if (st) return st;
  const train_prompts *pr = &tr->prompts;
  int labels = tr->mc.num_classes > 0 && !pr->n ? data_num_labels(tr->data) : 0;
  int n = pr->n ? pr->n
          : labels ? (labels < SAMPLE_MAX_LABELS ? labels : SAMPLE_MAX_LABELS) : SAMPLE_UNLABELLED;
  sample_params sp[SAMPLE_MAX_LABELS];
  int guided = 0;
  for (int i = 0; i < (pr->n ? 1 : n); i++) {
    sp[i] = (sample_params){.T = T, .H = H, .W = W, .label = labels ? i : -1,
                            .cfg = labels || pr->n ? tr->tc.sample_cfg : 1.0f,
                            .steps = tr->tc.sample_steps,
                            .seed = labels || pr->n ? 0 : (uint64_t)i,
                            .t_shift_tokens = tr->tc.t_shift_tokens};
    guided |= sp[i].cfg != 1.0f;
  }
  int64_t N = (int64_t)T * H * W;
  if (!tr->sample_model) st = sample_model_make(tr, (int)((guided ? 2 : 1) * N), guided ? 2 : 1);
  if (!st) st = sample_model_load_ema(tr);
  if (st) return err_wrap(st, "samples at step %lld: ", (long long)tr->step);
  char dir[PATH_MAX], base[PATH_MAX], written[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s/samples", o->run_dir) >= (int)sizeof dir ||
      snprintf(base, sizeof base, "%s/sample-%lld", dir, (long long)tr->step) >= (int)sizeof base - 16)
    st = err_set(TSR_EINVAL, "run directory path too long: %s", o->run_dir);
  if (!st) st = fs_dir_nofollow(dir, 1);  // RUN/samples: never a link out of the run
  // with prompts one file each, RUN/samples/sample-STEP-K (K from 1, the file's order)
  for (int k = 0; !st && pr->n && k < pr->n; k++) {
    char bk[PATH_MAX + 16];
    snprintf(bk, sizeof bk, "%s-%d", base, k + 1);
    sp[0].text = pr->emb[k], sp[0].text_tokens = pr->tokens[k];
    st = write_one(tr, o, dir, bk, sp, 1, pr->text[k], k + 1, written, sizeof written);
    if (!st)
      log_info("train: step %lld: sample of prompt %d of %d (seed 0, %d Euler steps, %dx%dx%d "
               "tokens) in %s: %s", (long long)tr->step, k + 1, pr->n, tr->tc.sample_steps, T,
               H, W, written, pr->text[k]);
  }
  if (!st && !pr->n) st = write_one(tr, o, dir, base, sp, n, NULL, 0, written, sizeof written);
  if (st) return err_wrap(st, "samples at step %lld: ", (long long)tr->step);
  char what[64];
  if (pr->n) snprintf(what, sizeof what, "%d prompts", pr->n);
  else if (labels) snprintf(what, sizeof what, "%d labels", n);
  else snprintf(what, sizeof what, "seeds 0-%d", n - 1);
  log_info("train: step %lld: samples of the EMA %s (%s, %d Euler steps, %dx%dx%d tokens "
           "each) in %s (%.1f s)", (long long)tr->step,
           tr->tc.lora_rank > 0 ? "adapters on the base" : "weights", what, tr->tc.sample_steps,
           T, H, W, pr->n ? dir : written, time_now() - t0);
  return TSR_OK;
}

int train_sample_exists(const char *run_dir, int64_t step, int n_prompts) {
  static const char *const exts[] = {"mp4", "y4m"};  // video_write's: with media, without
  for (int k = n_prompts ? 1 : 0; k <= n_prompts; k++) {
    int found = 0;
    for (int e = 0; e < 2 && !found; e++) {
      char path[PATH_MAX];
      struct stat sb;
      char K[16] = "";
      if (k) snprintf(K, sizeof K, "-%d", k);
      snprintf(path, sizeof path, "%s/samples/sample-%lld%s.%s", run_dir, (long long)step, K,
               exts[e]);
      found = stat(path, &sb) == 0;
    }
    if (!found) return 0;
  }
  return 1;
}

void train_prompts_free(train_prompts *p) {
  for (int i = 0; i < p->n; i++) {
    if (p->text) free(p->text[i]);
    if (p->emb) free(p->emb[i]);
  }
  free(p->text), free(p->emb), free(p->tokens);
  memset(p, 0, sizeof *p);
}

tsr_status train_samples_prepare(trainer *tr, const train_options *o) {
  const char *file = tr->tc.sample_prompts;
  if (tr->tc.sample_every <= 0 || !file[0]) return TSR_OK;
  tsr_status st = TSR_OK;
  if (comm_rank() == 0) {
    if (!o->embed_prompts)
      st = err_set(TSR_EINVAL, "train.sample_prompts = %s: this program cannot embed text (no "
                   "encoder given); leave train.sample_prompts empty", file);
    else
      st = o->embed_prompts(file, data_caption_encoder(tr->data), data_dir(tr->data),
                            tr->mc.text_dim, &tr->prompts);
    for (int i = 0; !st && i < tr->prompts.n; i++)
      if (tr->prompts.tokens[i] > tr->mc.text_len)
        st = err_set(TSR_EINVAL, "train.sample_prompts = %s: prompt %d has %d tokens, the model "
                     "takes at most model.text_len = %d: shorten it", file, i + 1,
                     tr->prompts.tokens[i], tr->mc.text_len);
    if (st) st = err_wrap(st, "train.sample_prompts: "), train_prompts_free(&tr->prompts);
    else
      log_info("train: %d sample prompts from %s, embedded with the store's encoder",
               tr->prompts.n, file);
  }
  // every rank starts, or none: rank 0's verdict is shared
  int64_t bad = st != TSR_OK;
  if (comm_size() > 1) {
    tsr_status c = comm_allreduce_max_i64(&bad, 1);
    if (!st) st = c;
    if (!st && bad)
      st = err_set(TSR_EINVAL, "train.sample_prompts: rank 0 could not embed the prompts (its "
                   "error says why)");
  }
  return st;
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
