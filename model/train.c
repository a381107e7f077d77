// model/train.c — `tessera train`'s run: inputs checked up front, then the step loop
// with background planning, metrics, progress and checkpoints (model/train.h).
#include "model/train.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/comm.h"
#include "core/log.h"
#include "model/checkpoint.h"

// Cost model of the one-rank plan. With one rank the plan is a packing of the batch into
// microbatches of at most mem_tokens tokens and only a, b and ovh steer it; these are the
// tiny model's CPU costs measured on a 2-core machine (docs/train.md). Multi-rank runs
// will load a calibrated file (issue 5).
static const cost_model cpu_cost = {.a = 2e-5, .b = 2e-9, .kv = 1024, .bw_intra = 1e10,
                                    .bw_inter = 1e9, .lat = 1e-5, .ovh = 2e-3,
                                    .allreduce = 0};

static tsr_status mkdir_p(const char *dir) {
  char buf[PATH_MAX];
  if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
    return err_set(TSR_EINVAL, "path too long: %s", dir);
  for (char *p = buf + 1;; p++) {
    if (*p == '/' || !*p) {
      char c = *p;
      *p = 0;
      if (mkdir(buf, 0777) && errno != EEXIST)
        return err_set(TSR_EIO, "create directory %s: %s", buf, strerror(errno));
      *p = c;
      if (!c) break;
    }
  }
  struct stat sb;
  if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
    return err_set(TSR_EIO, "run directory %s is not a directory", dir);
  return TSR_OK;
}

// The store must hold what the config's model reads: same tubelet and channels, uint8
// pixels, labels that fit num_classes, clips that fit one rank's memory.
static tsr_status check_store(const trainer *tr, int ranks) {
  const store_settings *s = data_settings(tr->data);
  const dit_config *m = &tr->mc;
  const char *dir = data_dir(tr->data);
  if (s->pt != m->pt || s->ph != m->ph || s->pw != m->pw)
    return err_set(TSR_EMISMATCH,
                   "store %s has patch %dx%dx%d but the config's model.pt/ph/pw is %dx%dx%d: "
                   "set the config (--set model.pt=%d --set model.ph=%d --set model.pw=%d) or "
                   "ingest with --patch %dx%dx%d", dir, s->pt, s->ph, s->pw, m->pt, m->ph, m->pw,
                   s->pt, s->ph, s->pw, m->pt, m->ph, m->pw);
  if (s->channels != m->channels)
    return err_set(TSR_EMISMATCH, "store %s has %d channels but model.channels is %d", dir,
                   s->channels, m->channels);
  if (s->dtype != STORE_DTYPE_U8)
    return err_set(TSR_EMISMATCH, "store %s holds non-uint8 tokens (latents); the trainer reads "
                   "uint8 pixel tubelets only for now", dir);
  if (m->num_classes > 0 && data_num_labels(tr->data) > m->num_classes)
    return err_set(TSR_EMISMATCH, "store %s has %d labels but model.num_classes is %d: set "
                   "model.num_classes >= %d (or 0 for an unconditional model)", dir,
                   data_num_labels(tr->data), m->num_classes, data_num_labels(tr->data));
  int64_t mem = tr->tc.mem_tokens;
  for (int64_t i = 0; i < data_num_clips(tr->data); i++) {
    const data_clip *c = data_clip_at(tr->data, i);
    if (c->tokens > mem)  // ranks > 1 will split it across a CP group (issue 5)
      return err_set(TSR_EINVAL,
                     "clip %lld of store %s has %lld tokens, more than train.mem_tokens = %lld "
                     "that one rank may hold (%d rank%s; splitting a clip across ranks comes "
                     "with multi-rank training): raise train.mem_tokens, or re-ingest with "
                     "--max-seconds to cut long videos", (long long)c->id, dir,
                     (long long)c->tokens, (long long)mem, ranks, ranks == 1 ? "" : "s");
  }
  return TSR_OK;
}

// A resumed run must train the same model the same way; only ckpt/log cadence may change.
static tsr_status check_resume_config(const ckpt_meta *cm, const trainer *tr, const char *path) {
  train_config t = cm->tc;
  t.ckpt_every = tr->tc.ckpt_every;
  t.ckpt_keep = tr->tc.ckpt_keep;
  t.log_every = tr->tc.log_every;
  char *a = config_to_ini(&cm->mc, &t), *b = config_to_ini(&tr->mc, &tr->tc);
  tsr_status r = TSR_OK;
  if (!a || !b) {
    r = err_set(TSR_ENOMEM, "out of memory comparing configs");
  } else if (strcmp(a, b)) {
    const char *p = a, *q = b;  // first differing line
    while (*p && *p == *q) p++, q++;
    while (p > a && p[-1] != '\n') p--, q--;
    int lp = (int)strcspn(p, "\n"), lq = (int)strcspn(q, "\n");
    r = err_set(TSR_EMISMATCH, "--resume: the config differs from checkpoint %s's: '%.*s' there, "
                "'%.*s' now; resume with the same config (only train.ckpt_every, ckpt_keep and "
                "log_every may change) or start a new run", path, lp, p, lq, q);
  }
  free(a);
  free(b);
  return r;
}

static tsr_status check_resume_store(const ckpt_meta *cm, const trainer *tr, const char *path) {
  char diff[512];
  if (store_settings_diff(&cm->store, data_settings(tr->data), diff, sizeof diff))
    return err_set(TSR_EMISMATCH, "--resume: store %s's settings differ from those checkpoint %s "
                   "was trained on: %s", data_dir(tr->data), path, diff);
  if (cm->clips != data_num_clips(tr->data))
    return err_set(TSR_EMISMATCH, "--resume: store %s has %lld clips, checkpoint %s was trained "
                   "on %lld: the sampler's order would change; resume on the same store or "
                   "fine-tune with --init", data_dir(tr->data),
                   (long long)data_num_clips(tr->data), path, (long long)cm->clips);
  return TSR_OK;
}

// Restores the state of `path` (resume) or its weights only (init).
static tsr_status start_from(trainer *tr, const char *path, int resume) {
  ckpt_meta cm = {0};
  tsr_status r = ckpt_read_meta(path, &cm);
  if (!r && resume) r = check_resume_config(&cm, tr, path);
  if (!r && resume) r = check_resume_store(&cm, tr, path);
  if (!r) r = ckpt_load(path, tr, resume ? CKPT_LOAD_WEIGHTS | CKPT_LOAD_EMA | CKPT_LOAD_OPTIM
                                         : CKPT_LOAD_WEIGHTS);
  if (!r && resume) {
    tr->step = cm.step;
    r = data_sampler_seek(&tr->sampler, cm.sampler_epoch, cm.sampler_pos);
  }
  if (!r && !resume) r = train_ema_reset(tr);
  ckpt_meta_free(&cm);
  if (r && !resume) return err_wrap(r, "--init (weights of the configured model, shapes checked): ");
  return r;
}

// Tokens of each clip of a batch (n), for the planner.
static void batch_tokens(const trainer *tr, const int64_t *batch, int64_t n, int64_t *tokens) {
  for (int64_t i = 0; i < n; i++) tokens[i] = data_clip_at(tr->data, batch[i])->tokens;
}

static tsr_status train_loop(trainer *tr, const train_options *o, int64_t stop) {
  int64_t B = tr->tc.global_batch;
  int64_t *cur = malloc((size_t)B * sizeof *cur), *next = malloc((size_t)B * sizeof *next);
  int64_t *tok = malloc((size_t)B * sizeof *tok);
  FILE *mf = NULL;
  sched_async *pending = NULL;
  sched_result res = {0};
  int64_t ncur = 0, nnext = 0, start = tr->step;
  tsr_status r = (!cur || !next || !tok) ? err_set(TSR_ENOMEM, "out of memory (batch)") : TSR_OK;
  if (!r) r = metrics_open(&mf, o->run_dir, o->resume ? tr->step : -1);
  // Batch s and its plan; batch s+1 is drawn and planned while s trains.
  if (!r) r = data_sampler_next(&tr->sampler, B, next, &nnext);
  if (!r) batch_tokens(tr, next, nnext, tok), r = sched_async_start(&pending, &tr->sched, tok, (int)nnext);
  progress pg;
  progress_begin(&pg, "train");
  double loss0 = -1, loss_last = -1;
  while (!r && tr->step < stop) {
    int64_t *t = cur; cur = next; next = t;
    ncur = nnext;
    data_sampler saved = tr->sampler;  // position after batch s: what a checkpoint records
    r = sched_async_wait(&pending, &res);
    if (r) break;
    if (tr->step + 1 < stop) {
      r = data_sampler_next(&tr->sampler, B, next, &nnext);
      if (!r) batch_tokens(tr, next, nnext, tok), r = sched_async_start(&pending, &tr->sched, tok, (int)nnext);
      if (r) break;
    }
    train_step_stats st;
    r = train_step(tr, cur, (int)ncur, &res.plan, &st);
    sched_result_free(&res);
    if (r) break;
    if (loss0 < 0) loss0 = st.loss;
    loss_last = st.loss;
    if (tr->tc.log_every > 0 && (tr->step % tr->tc.log_every == 0 || tr->step == stop))
      r = metrics_write(mf, tr->step, &st);
    progress_update(&pg, (double)(tr->step - start), (double)(stop - start), tr->step == stop,
                    "step %lld/%lld loss %.4f lr %.2e |g| %.3f %.0f tok/s", (long long)tr->step,
                    (long long)stop, st.loss, st.lr, st.grad_norm, st.tokens_per_s);
    if (!r && ((tr->tc.ckpt_every > 0 && tr->step % tr->tc.ckpt_every == 0) || tr->step == stop)) {
      data_sampler ahead = tr->sampler;
      tr->sampler = saved;
      r = ckpt_save_run(o->run_dir, tr, tr->tc.ckpt_keep);
      tr->sampler = ahead;
    }
  }
  progress_end(&pg);
  if (pending) {
    sched_result drop = {0};
    sched_async_wait(&pending, &drop);
    sched_result_free(&drop);
  }
  if (!r && loss0 >= 0)
    log_info("train: %lld steps done, loss %.4f -> %.4f; checkpoint %s/ckpt-%lld.safetensors",
             (long long)tr->step, loss0, loss_last, o->run_dir, (long long)tr->step);
  if (mf) fclose(mf);
  free(cur);
  free(next);
  free(tok);
  return r;
}

tsr_status train_run(const train_options *o) {
  trainer tr = {0};
  tsr_status r = config_load(o->config_path, o->overrides, o->n_overrides, &tr.mc, &tr.tc);
  if (!r) r = config_validate(&tr.mc, &tr.tc);
  if (!r) r = data_open(&tr.data, o->data_dir);
  int ranks = comm_size();
  if (!r) r = check_store(&tr, ranks);
  if (!r && o->init_ckpt) {
    struct stat sb;
    if (stat(o->init_ckpt, &sb))
      r = err_set(TSR_EIO, "--init %s: %s", o->init_ckpt, strerror(errno));
  }
  if (!r) r = mkdir_p(o->run_dir);
  if (!r) r = ckpt_clean_tmp(o->run_dir);
  char latest[PATH_MAX] = "";
  int64_t latest_step = -1;
  if (!r) {
    tsr_status lr = ckpt_latest(o->run_dir, latest, sizeof latest, &latest_step);
    if (o->resume && lr)
      r = err_set(TSR_EINVAL, "--resume: no checkpoint (ckpt-STEP.safetensors) in %s; start "
                  "without --resume", o->run_dir);
    else if (!o->resume && !lr)
      r = err_set(TSR_EINVAL, "%s already holds checkpoints (newest %s): continue it with "
                  "--resume, or give another --out", o->run_dir, latest);
  }
  if (!r) {
    tr.sched.cluster = (sched_cluster){.ranks = ranks, .gpus_per_node = ranks,
                                       .mem_tokens = tr.tc.mem_tokens};
    tr.sched.cost = cpu_cost;
    tr.rank = comm_rank();
    r = sched_config_check(&tr.sched);
  }
  if (!r) r = data_sampler_init(&tr.sampler, data_num_clips(tr.data), (uint64_t)tr.tc.seed);
  if (!r) r = trainer_setup(&tr);
  if (!r) {
    if (o->resume) r = start_from(&tr, latest, 1);
    else if (o->init_ckpt) r = start_from(&tr, o->init_ckpt, 0);
    else if (!(r = dit_init(tr.model, (uint64_t)tr.tc.seed))) r = train_ema_reset(&tr);
  }
  int64_t stop = o->stop_step > 0 ? o->stop_step : tr.tc.steps;
  if (!r) {
    log_info("train: %zu parameters, %lld clips (%d labels), batch %lld, mem_tokens %lld, "
             "steps %lld -> %lld of %lld%s%s", tr.n_params, (long long)data_num_clips(tr.data),
             data_num_labels(tr.data), (long long)tr.tc.global_batch,
             (long long)tr.tc.mem_tokens, (long long)tr.step, (long long)stop,
             (long long)tr.tc.steps, o->init_ckpt ? ", weights from " : "",
             o->init_ckpt ? o->init_ckpt : "");
    if (tr.step >= stop) log_info("train: %lld steps already done, nothing to do", (long long)tr.step);
    else r = train_loop(&tr, o, stop);
  }
  trainer_free(&tr);
  return r;
}
