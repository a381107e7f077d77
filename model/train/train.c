// model/train/train.c — `tessera train`'s run: inputs checked up front, then the step loop
// with background planning, metrics, progress and checkpoints (model/train/train.h).
#include "model/train/train.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "comm/comm.h"
#include "core/fs.h"
#include "core/log.h"
#include "model/io/checkpoint.h"
#include "model/io/ckpt_run.h"
#include "model/train/dry_run.h"
#include "model/train/eta.h"
#include "model/train/lr.h"
#include "model/train/memory.h"
#include "model/train/metrics.h"
#include "model/train/tensorboard.h"
#include "model/train/plan_choice.h"
#include "model/io/lora_io.h"
#include "model/lora.h"
#include "model/train/zero_cost.h"
#include "model/train/resume.h"
#include "model/train/run_config.h"
#include "model/train/samples.h"
#include "model/train/step.h"
#include "model/train/train_checks.h"
#include "model/train/train_state.h"
#include "model/train/val.h"

// Peak resident memory of this process (getrusage), GiB.
static double train_peak_rss_gib(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) ? 0 : (double)ru.ru_maxrss / (1 << 20);  // kB on Linux
}

// Tokens of each clip of a batch (n), for the planner.
static void batch_tokens(const trainer *tr, const int64_t *batch, int64_t n, int64_t *tokens) {
  for (int64_t i = 0; i < n; i++) tokens[i] = data_clip_at(tr->data, batch[i])->tokens;
}

// The next global batch for step `step` (out: store positions, *count), with every clip's
// payload checksum verified on every rank and the verdicts agreed (model/train/train.h, "Clip
// checksums"). bad: (global_batch) scratch. A bad clip stops the run, or with `skip` is
// left out; a batch left empty is replaced by the next one (2n draws cover a full epoch:
// if none of them is good, no clip is).
static tsr_status draw_batch(trainer *tr, int skip, int64_t step, int64_t *out, int64_t *count,
                             int64_t *bad) {
  double t0 = time_now();
  const char *dir = data_dir(tr->data);
  int64_t n = tr->sampler.n, drawn = 0;  // draws an epoch: the training clips, or a mix's
  tsr_status st = TSR_OK;
  while (!st) {
    if ((st = data_sampler_next(&tr->sampler, tr->tc.global_batch, out, count))) break;
    drawn += *count;
    for (int64_t i = 0; i < *count; i++) {
      out[i] = tr->split.train[out[i]];  // the sampler draws over the training clips only
      bad[i] = data_clip_verify(tr->data, out[i]) != TSR_OK;
    }
    if (comm_size() > 1 && (st = comm_allreduce_max_i64(bad, (int)*count))) break;
    int64_t kept = 0;
    for (int64_t i = 0; !st && i < *count; i++) {
      if (!bad[i]) {
        out[kept++] = out[i];
        continue;
      }
      const data_clip *c = data_clip_at(tr->data, out[i]);
      char why[1024];  // this rank's verdict again, for the message (bad clips are rare)
      if (data_clip_verify(tr->data, out[i]))
        snprintf(why, sizeof why, "%s", err_msg());
      else
        snprintf(why, sizeof why, "clip %lld of store %s (offset %lld) is good here but failed "
                 "its checksum on another rank: do the ranks read different copies of the "
                 "store?", (long long)c->id, dir, (long long)c->offset);
      if (!skip) {
        st = err_set(TSR_EFORMAT, "step %lld: %s; run `tessera index verify %s` to list every "
                     "bad clip, then re-ingest their sources (or train without them: "
                     "--skip-bad-clips)", (long long)step, why, dir);
      } else if (!tr->clip_bad[out[i]]) {  // reported once per clip
        tr->clip_bad[out[i]] = 1;
        tr->bad_clips++;
        if (tr->rank == 0)
          log_warn("train: skipping bad clip %lld (--skip-bad-clips): %s; `tessera index "
                   "verify %s` lists every bad clip", (long long)c->id, why, dir);
      }
    }
    if (st || (*count = kept) > 0) break;
    if (drawn >= 2 * n)
      st = err_set(TSR_EFORMAT, "step %lld: every clip of store %s failed its checksum: run "
                   "`tessera index verify %s`", (long long)step, dir, dir);
  }
  tr->verify_s += time_now() - t0;
  return st;
}

// The draw side of the pipeline (sched_draw_fn): batch s of the sampler, checked, with its
// token counts. It also keeps the sampler's position from before the draw of batch s,
// which is the position after batch s - 1: what a checkpoint after step s - 1 records.
typedef struct {
  trainer *tr;
  int skip;
  int64_t *bad;                 // (global_batch) scratch of draw_batch
  data_sampler before_draw;     // sampler position before the draw of batch `drawn_step`
  int64_t drawn_step;
} train_draw;

static tsr_status train_draw_fn(void *ctx, int64_t s, int64_t *ids, int64_t *tokens, int64_t *n) {
  train_draw *x = ctx;
  x->before_draw = x->tr->sampler;
  x->drawn_step = s;
  tsr_status st = draw_batch(x->tr, x->skip, s, ids, n, x->bad);
  if (!st) batch_tokens(x->tr, ids, *n, tokens);
  return st;
}

// "0.1 0.52, 0.3 0.41, ..." of a validation, for the log.
static void val_levels_text(const train_val_stats *v, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = '\0';
  for (int k = 0; k < TRAIN_VAL_LEVELS && len < n; k++)
    len += (size_t)snprintf(buf + len, n - len, "%st=%g %.4f", k ? ", " : "", train_val_levels[k],
                            v->level[k]);
}

static void val_buckets_text(const trainer *tr, const train_val_stats *v, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = '\0';
  for (int b = 0; b < DATA_BUCKETS && len < n; b++)
    if (tr->split.bucket_val[b])
      len += (size_t)snprintf(buf + len, n - len, "%s%s %.4f", len ? ", " : "",
                              data_bucket_names[b], v->bucket[b]);
}

// sched_share's broadcast: the world control plane (MPI) of comm/comm.h.
static tsr_status plan_bcast(void *ctx, void *buf, int64_t bytes, int root) {
  (void)ctx;
  return comm_bcast(buf, bytes, root);
}

// The step loop's state: what opens before the first step and closes after the last.
typedef struct {
  trainer *tr;
  const train_options *o;
  int64_t start, stop;
  int lead;                    // rank 0 writes metrics, checkpoints and samples
  int validate;                // the split holds validation clips
  int world;
  train_draw dx;               // the draw side of the pipeline (its address is kept)
  sched_share share;           // plan sharing of the pipeline (its address is kept)
  plan alt;                    // a plan of --plan other than the scheduler's choice
  FILE *mf;                    // metrics.jsonl (rank 0)
  tb_writer *tb;               // train.tensorboard: its event file (rank 0)
  sched_pipeline *pipe;
  progress pg;
  train_val_stats val_first, val_last;
  double loss0, loss_last;     // first and last step's loss (-1: none yet)
  metrics_interval iv;         // the steps since the last metrics line
  train_eta eta;               // what the steps, validations, samples and saves took
  const char *base;            // a LoRA run's base checkpoint (its checkpoints record it)
  uint64_t *base_sums;         // (dit_num_tensors) its tensors' XXH3, rank 0 of a LoRA run:
  uint64_t base_weights;       //   read once a run for every save (it never changes)
} train_loop_state;

// Opens what the loop needs; a fresh run is validated once before its first step, where
// the curve starts.
static tsr_status loop_open(train_loop_state *L) {
  trainer *tr = L->tr;
  const train_options *o = L->o;
  int64_t B = tr->tc.global_batch;
  L->dx = (train_draw){.tr = tr, .skip = o->skip_bad_clips,
                       .bad = malloc((size_t)B * sizeof(int64_t)), .drawn_step = -1};
  plan_init(&L->alt, tr->sched.cluster.ranks);
  L->start = tr->step;
  L->lead = tr->rank == 0;
  L->validate = tr->split.n_val > 0;
  L->val_first = L->val_last = (train_val_stats){.step = -1};
  L->loss0 = L->loss_last = -1;
  tsr_status st = !L->dx.bad ? err_set(TSR_ENOMEM, "out of memory (batch)") : TSR_OK;
  if (!st && L->lead) st = metrics_open(&L->mf, o->run_dir, o->resume ? tr->step : -1);
  if (!st && L->lead && tr->tc.lora_rank > 0) {  // the frozen base's identity, for every save
    L->base_sums = malloc(sizeof *L->base_sums * (size_t)dit_num_tensors(tr->model));
    st = L->base_sums ? ckpt_base_sums(tr->model, L->base_sums, &L->base_weights)
                     : err_set(TSR_ENOMEM, "out of memory (base checksums)");
  }
  if (!st && L->lead && tr->tc.tensorboard)
    st = tb_open(&L->tb, o->run_dir, o->resume ? tr->step : -1);
  tr->tb = L->tb;  // the samples' images
  if (!st && L->validate && tr->step == 0 && !o->resume) {
    st = train_validate(tr, o->plan_kind, &L->val_last);
    if (!st) L->val_first = L->val_last;
    if (!st) L->eta.val_s += L->val_last.seconds, L->eta.vals++;
    if (!st && L->lead) st = metrics_write(L->mf, 0, NULL, &L->val_last);
    if (!st && L->tb) st = tb_write(L->tb, 0, NULL, &L->val_last);
    if (!st && L->lead)
      log_info("train: validation before training: loss %.4f (%.1f s)", L->val_last.loss,
               L->val_last.seconds);
  }
  // Batch s and its plan; batch s+1 is drawn and planned while s trains, by one of
  // o->planners ranks in turn, which broadcasts it (0: by every rank for itself).
  L->world = comm_size();
  L->share = (sched_share){.rank = tr->rank, .size = L->world,
                           .planners = o->planners < L->world ? o->planners : L->world,
                           .bcast = plan_bcast};
  if (!st)
    st = sched_pipeline_open(&L->pipe, &tr->sched, B, tr->step, L->stop, train_draw_fn, &L->dx,
                             L->world > 1 && o->planners > 0 ? &L->share : NULL);
  return st;
}

// Trains batch b on the plan --plan asks for; st: the step's statistics, filled with the
// plan and run facts even when the step fails.
static tsr_status loop_train(train_loop_state *L, const sched_batch *b, train_step_stats *stats) {
  trainer *tr = L->tr;
  const plan *run;
  double predicted;
  const char *name;
  tsr_status st = train_choose_plan(&tr->sched, L->o->plan_kind, b->tokens, b->n, &b->res, &L->alt, &run,
                                    &predicted, &name);
  if (!st) st = train_step(tr, b->ids, (int)b->n, run, stats);
  stats->predicted_s = predicted;
  stats->plan = name;
  stats->plan_ms = b->res.plan_ms;
  memset(stats->cp_clips, 0, sizeof stats->cp_clips);
  plan_cp_histogram(run, stats->cp_clips);
  memset(stats->mode_clips, 0, sizeof stats->mode_clips);
  plan_mode_histogram(run, stats->mode_clips);
  stats->bad_clips = tr->bad_clips;
  stats->backend = tr->kb->name;
  stats->precision = config_precision_name(tr->tc.precision);
  return st;
}

// After a step: validation (every rank: collective), metrics and the progress line.
// stopping: a signal ends the run after this step: its metrics line is written, its
// validation only when one is due anyway.
static tsr_status loop_report_step(train_loop_state *L, const train_step_stats *stats, int last,
                                   int stopping) {
  trainer *tr = L->tr;
  const train_val_stats *val = NULL;
  tsr_status st = TSR_OK;
  if (L->validate && (tr->step % tr->tc.val_every == 0 || (last && !stopping))) {
    if ((st = train_validate(tr, L->o->plan_kind, &L->val_last))) return st;
    if (L->val_first.step < 0) L->val_first = L->val_last;
    val = &L->val_last;
  }
  metrics_interval_add(&L->iv, stats);
  L->eta.step_s += stats->step_s, L->eta.steps++;
  if (val) L->eta.val_s += val->seconds, L->eta.vals++;
  if (L->lead && (val || (tr->tc.log_every > 0 && (tr->step % tr->tc.log_every == 0 || last ||
                                                   stopping)))) {
    train_step_stats line;  // the interval's means, the step's own values beside them
    metrics_interval_line(&L->iv, stats, &line);
    st = metrics_write(L->mf, tr->step, &line, val);
    if (!st && L->tb) st = tb_write(L->tb, tr->step, &line, val);
  }
  char vtext[48] = "";
  if (L->val_last.step >= 0)
    snprintf(vtext, sizeof vtext, " val %.4f@%lld", L->val_last.loss,
             (long long)L->val_last.step);
  if (L->lead) progress_set_eta(&L->pg, train_eta_left(&L->eta, &tr->tc, tr->step, L->stop,
                                                        L->validate));
  if (L->lead)
    progress_update(&L->pg, (double)(tr->step - L->start), (double)(L->stop - L->start),
                    last || val, "step %lld/%lld loss %.4f%s lr %.2e |g| %.3f %.0f tok/s",
                    (long long)tr->step, (long long)L->stop, stats->loss, vtext, stats->lr,
                    stats->grad_norm, stats->tokens_per_s);
  return st;
}

// A LoRA run's adapters: RUN/lora-STEP.safetensors, the adapters (not their EMA) as a LoRA
// file in lora.format's layout (model/io/lora_io.h; diffusers/PEFT's by default) with the
// base's identity. Written
// before the step's checkpoint, the resumable state: a crash between the two resumes from
// the checkpoint before, which writes this file again (the same bytes).
static tsr_status save_adapters(trainer *tr, const train_options *o, const char *base,
                                const uint64_t *base_weights) {
  char path[4200];
  snprintf(path, sizeof path, "%s/lora-%lld.safetensors", o->run_dir, (long long)tr->step);
  return lora_save_as(tr->model, path, base, base_weights, (lora_layout)tr->tc.lora_format,
                      data_caption_encoder(tr->data));
}

// Samples and the checkpoint a step owes. Samples read the EMA weights only, on a model of
// their own: the training state and its randomness (keyed by seed, step and clip) are
// untouched, so resume stays bitwise. They come before the step's checkpoint, which
// records them as due: a crash between the two resumes from the checkpoint before and
// writes them again; a failed write is a warning and the checkpoint still follows
// (train_samples_step). saved: the sampler's position after this step's batch.
// stopping: a signal ends the run after this step: its checkpoint is written, its samples
// only when they are due anyway (the time left before a preemption goes to the checkpoint).
static tsr_status loop_save(train_loop_state *L, const data_sampler *saved, int last,
                            int stopping) {
  trainer *tr = L->tr;
  const train_options *o = L->o;
  // the same on every rank: with train.zero the ranks take part in gathering the EMA and the
  // checkpoint's sharded sets (ckpt_save_follow); rank 0 writes
  const int due_all = tr->tc.sample_every > 0 &&
                      (tr->step % tr->tc.sample_every == 0 || (last && !stopping));
  const int sample_due = L->lead && due_all;
  tsr_status st = TSR_OK;
  if (due_all && tr->tc.zero > 0 && (st = train_ema_full(tr, &tr->ema_whole))) return st;
  if (sample_due) {
    double t0 = time_now();
    train_samples_step(tr, o);
    L->eta.sample_s += time_now() - t0, L->eta.samples++;
  }
  tr->ema_whole = NULL;
  if (!((tr->tc.ckpt_every > 0 && tr->step % tr->tc.ckpt_every == 0) || last || stopping))
    return TSR_OK;
  if (!L->lead && tr->tc.zero == 0) return TSR_OK;
  if (L->lead && tr->tc.lora_rank > 0) st = save_adapters(tr, o, L->base, &L->base_weights);
  ckpt_state cs;
  ckpt_shard sh;
  const char **names = NULL;
  char plan[256];
  tr->zero_buf_set = NULL;  // train.zero: every bucket gathered afresh for this save
  if (!st) st = train_ckpt_state(tr, saved, o->plan_kind, sample_due, L->base, &cs, &names, plan, &sh);
  cs.base_sums = L->base_sums, cs.base_weights = L->base_weights;
  double t0 = time_now();
  if (!st) st = L->lead ? ckpt_save_run(o->run_dir, &cs, tr->tc.ckpt_keep) : ckpt_save_follow(&cs);
  L->eta.ckpt_s += time_now() - t0, L->eta.ckpts++;
  free(names);
  return st;
}

// The run's summary on rank 0: planning, losses, validation, samples and bad clips.
static void loop_summary(const train_loop_state *L, const sched_pipeline_stats *ps) {
  const trainer *tr = L->tr;
  const train_options *o = L->o;
  if (ps->batches)
    log_info("train: planning: rank 0 planned %lld of %lld batches (%.3f s CPU) and waited "
             "%.3f s for plans%s", (long long)ps->planned_here, (long long)ps->batches,
             ps->plan_cpu_s, ps->wait_s,
             L->world > 1 && o->planners > 0 ? " (plans shared: --planners)" : "");
  if (L->loss0 >= 0)
    log_info("train: %lld steps done, loss %.4f -> %.4f; %s %s/%s-%lld.safetensors; "
             "%.3f s drawing batches and verifying clip checksums", (long long)tr->step,
             L->loss0, L->loss_last, tr->tc.lora_rank > 0 ? "adapters" : "checkpoint",
             o->run_dir, tr->tc.lora_rank > 0 ? "lora" : "ckpt", (long long)tr->step,
             tr->verify_s);
  if (L->val_last.step >= 0) {
    char lv[256], bk[256];
    val_levels_text(&L->val_last, lv, sizeof lv);
    val_buckets_text(tr, &L->val_last, bk, sizeof bk);
    log_info("train: validation loss %.4f at step %lld -> %.4f at step %lld (%lld held-out clips; "
             "by noise level: %s; by length: %s)", L->val_first.loss, (long long)L->val_first.step,
             L->val_last.loss, (long long)L->val_last.step, (long long)L->val_last.clips, lv, bk);
  }
  if (tr->samples_failed)
    log_warn("train: %lld sample writes failed (see the warnings above); the checkpoints record "
             "them, and a --resume from a checkpoint whose samples are missing writes them",
             (long long)tr->samples_failed);
  if (tr->bad_clips)
    log_warn("train: %lld bad clips skipped (--skip-bad-clips); run `tessera index verify %s`",
             (long long)tr->bad_clips, data_dir(tr->data));
}

// After a step: whether a signal asks the run to stop (*sig: its number, 0 if none). The
// ranks max-reduce their flags, so one rank's signal stops all after the same step.
static tsr_status loop_signal(const train_options *o, int64_t *sig) {
  *sig = o->stop_signal ? (int64_t)*o->stop_signal : 0;
  if (!o->stop_signal || comm_size() == 1) return TSR_OK;
  return comm_allreduce_max_i64(sig, 1);
}

static tsr_status train_loop(trainer *tr, const train_options *o, int64_t stop,
                             const char *base) {
  train_loop_state L = {.tr = tr, .o = o, .stop = stop, .base = base};
  tsr_status st = loop_open(&L);
  progress_begin(&L.pg, "train");
  while (!st && tr->step < stop) {
    sched_batch b;
    if ((st = sched_pipeline_next(L.pipe, &b))) break;
    // position after batch s: from before the draw of s + 1, or now if s is the last
    data_sampler saved = L.dx.drawn_step == b.step + 1 ? L.dx.before_draw : tr->sampler;
    train_step_stats stats;
    if ((st = loop_train(&L, &b, &stats))) break;
    if (L.loss0 < 0) L.loss0 = stats.loss;
    L.loss_last = stats.loss;
    const int last = tr->step == stop;
    int64_t sig = 0;
    if ((st = loop_signal(o, &sig))) break;
    const int stopping = sig && !last;
    if ((st = loop_report_step(&L, &stats, last, stopping))) break;
    if ((st = loop_save(&L, &saved, last, stopping)) || !stopping) continue;
    if (L.lead)
      log_warn("train: stopped by signal %lld (%s) after step %lld of %lld: checkpoint "
               "%s/ckpt-%lld.safetensors written; continue with `tessera train --resume %s`",
               (long long)sig, strsignal((int)sig), (long long)tr->step, (long long)stop,
               o->run_dir, (long long)tr->step, o->run_dir);
    if (o->stopped) *o->stopped = (int)sig;
    break;
  }
  if (L.lead) progress_end(&L.pg);
  sched_pipeline_stats ps = {0};
  if (L.pipe) sched_pipeline_get_stats(L.pipe, &ps);
  sched_pipeline_close(&L.pipe);
  if (!st && L.lead) loop_summary(&L, &ps);
  if (L.mf) fclose(L.mf);
  tr->tb = NULL;
  tb_close(&L.tb);
  free(L.dx.bad), free(L.base_sums);
  plan_free(&L.alt);
  return st;
}

// What train_run sets up around the trainer and releases after it.
typedef struct {
  train_memory_counter counter;  // the backend, counting its allocations
  train_memory mem;              // the memory model's view of one rank
  size_t capacity;               // the memory a rank has, from cap_source
  const char *cap_source;
  size_t dev_free0, dev_total;   // device memory before setup (0: not a device backend)
  lockfile *run_lock;            // RUN, held for the whole run
  char latest[PATH_MAX];         // RUN's newest checkpoint ("" if none)
  char base[PATH_MAX];           // a LoRA run's base checkpoint ("" otherwise)
  FILE *log;                     // rank 0: RUN/train.log, a copy of the log (log_copy_to)
  train_options eff;             // the caller's options, a resume's filled from RUN/config.ini
  run_config rc;                 // RUN/config.ini as a resume read it (found = 0: not read)
  dit_config mc0;                // the config as loaded, before train.mem_tokens is derived:
  train_config tc0;              //   what RUN/config.ini records
  int schedule_from_steps;       // --steps set train.lr_schedule_steps (run_config_schedule)
} train_setup;

// The config, the backend and the store, and train.mem_tokens from the memory model (0:
// derived), the same on every rank. The backend is wrapped in the allocation counter.
// A resume without --config takes the config, the store and the options the run started
// with from RUN/config.ini (su->eff: the options from here on).
static tsr_status setup_config(trainer *tr, const train_options *given, train_setup *su) {
  tsr_status st = comm_groups_init();  // Dynamic-CP groups; refuses a non-power-of-two world
  char *defaults = NULL;
  if (!st) st = run_config_resolve(given, &su->eff, &su->rc, &tr->mc, &tr->tc, &defaults);
  const train_options *o = &su->eff;
  if (!st && defaults && comm_rank() == 0)
    log_info("config: %d keys at their defaults (docs/config.md; RUN/config.ini holds every "
             "value)", config_list_count(defaults));
  free(defaults);
  su->schedule_from_steps = !st && run_config_schedule(o, &tr->tc);
  su->mc0 = tr->mc, su->tc0 = tr->tc;
  if (!st) st = config_validate(&tr->mc, &tr->tc);
  if (!st) st = backend_for_precision(o->backend, tr->tc.precision, &tr->kb);
  // the store first: its value dtype is part of the memory model (host memory only)
  data_open_opts dopt = {.skip_bad = o->skip_bad_clips};
  if (!st) st = data_open_with(&tr->data, o->data_dir, &dopt);
  if (!st)
    st = train_memory_limit_run(tr, o, store_dtype_size(data_settings(tr->data)->dtype), &su->mem,
                                &su->capacity, &su->cap_source);
  if (st) return st;
  if (tr->kb->device_memory && tr->kb->mem_info)
    tr->kb->mem_info(tr->kb, &su->dev_free0, &su->dev_total);
  // The device memory this run takes is the model's count, not all that is free: its
  // allocations and attention workspace, and half of its reserve for the backend's own
  // workspaces (cuBLASLt's) and what the model does not count; the other half stays out
  // for the CUDA libraries. The rest of the device stays free for the processes beside it.
  if (tr->kb->device_memory && tr->kb->reserve &&
      (st = tr->kb->reserve(tr->kb, su->mem.allocated + su->mem.attention + su->mem.reserve / 2)))
    return err_wrap(st, "train: the memory model's %.3f GiB on the device: ",
                    (double)su->mem.total / (1 << 30));
  train_memory_counter_init(&su->counter, tr->kb);
  tr->kb = &su->counter.kb;
  return TSR_OK;
}

// Rank 0: the log from here on also in RUN/train.log (appended to by a resume, so it
// holds every start of the run), beginning with the memory model's count.
static tsr_status open_run_log(const train_options *o, train_setup *su) {
  if (comm_rank() != 0) return TSR_OK;
  char path[PATH_MAX];
  tsr_status st = fs_join(path, sizeof path, o->run_dir, "train.log");
  if (!st) st = fs_fopen_nofollow(path, o->resume ? "a" : "w", &su->log);  // never a link's file
  if (st) return st;
  log_copy_to(su->log);
  char what[768];  // train_memory_format's line
  train_memory_format(&su->mem, what, sizeof what);
  log_info("train: memory per rank (model): %s; of %.3f GiB (%s)", what,
           (double)su->capacity / (1 << 30), su->cap_source);
  return TSR_OK;
}

// RUN locked (one run writes it at a time, before anything in it is touched), its
// checkpoints as the start asks (--resume needs one, a fresh run none), its log opened.
// RUN's checkpoints as the start asks: --resume needs one (su->latest), a fresh run none.
static tsr_status check_run_checkpoints(const train_options *o, train_setup *su) {
  int64_t latest_step = -1;
  const int found = ckpt_latest(o->run_dir, su->latest, sizeof su->latest, &latest_step) == TSR_OK;
  if (!found) err_clear();
  if (o->resume && !found)
    return err_set(TSR_EINVAL, "--resume: no checkpoint (ckpt-STEP.safetensors) in %s; start "
                   "without --resume", o->run_dir);
  if (!o->resume && found)
    return err_set(TSR_EINVAL, "%s already holds checkpoints (newest %s): continue it with "
                   "--resume, or give another --out", o->run_dir, su->latest);
  return TSR_OK;
}

static tsr_status setup_run_dir(const train_options *o, train_setup *su) {
  tsr_status st = train_run_dir_open(&su->run_lock, o->run_dir);
  if (!st) st = check_run_checkpoints(o, su);
  // after the refusals: a refused start leaves RUN's log alone
  return st ? st : open_run_log(o, su);
}

// train.placement = blockwise places clips by the mask's blocks of one frame grid: every
// clip of the store has the longest one's H x W tokens a frame, or the run is refused.
static tsr_status same_grid(const data_store *d, const data_clip *longest) {
  for (int64_t i = 0; i < data_num_clips(d); i++) {
    const data_clip *c = data_clip_at(d, i);
    if (c->H != longest->H || c->W != longest->W)
      return err_set(TSR_EINVAL, "train.placement = blockwise: the store %s has clips of %d x %d "
                     "and %d x %d tokens a frame (clips %lld and %lld); the placement needs one "
                     "frame grid: train on one resolution, or set train.placement = contiguous",
                     data_dir(d), longest->H, longest->W, c->H, c->W, (long long)longest->id,
                     (long long)c->id);
  }
  return TSR_OK;
}

// The scheduler's cluster and cost model: cost_model_cpu (sched/cost.h) unless --cost names
// a file.
static tsr_status setup_sched(trainer *tr, const train_options *o, int ranks) {
  tr->sched.cluster = (sched_cluster){
      .ranks = ranks, .gpus_per_node = o->gpus_per_node > 0 ? o->gpus_per_node : ranks,
      .mem_tokens = tr->tc.mem_tokens};
  tr->sched.cost = cost_model_cpu;
  tsr_status st = o->cost_path ? cost_model_load(o->cost_path, &tr->sched.cost) : TSR_OK;
  // captions: the cross-attention the planner prices (sched/cost.h text_a, text_c)
  if (tr->mc.text_dim > 0) tr->sched.cost.text_tokens = data_caption_mean_tokens(tr->data);
  // ring or Ulysses per CP group (train.cp_mode), Ulysses splitting the model's heads
  tr->sched.cost.cp_modes = config_cost_modes(tr->tc.cp_mode);
  // under a mask a clip's attention is priced as its mask's area over frames of the longest
  // clip's grid (the clips that dominate the attention work), in every CP mode
  if (tr->mc.attn_mask != KERNELS_MASK_FULL) {
    const data_clip *longest = NULL;
    for (int64_t i = 0; i < data_num_clips(tr->data); i++) {
      const data_clip *c = data_clip_at(tr->data, i);
      if (!longest || c->tokens > longest->tokens) longest = c;
    }
    if (longest) tr->sched.cost.mask = config_cost_mask(&tr->mc, longest->H, longest->W);
    // a blockwise placement prices a ring group by its most loaded rank, as it runs
    // (model/dist/dist_step.h), which needs one frame grid for every clip
    tr->sched.cost.mask.place = config_cost_place(tr->tc.placement);
    tr->sched.cost.mask.pin = config_cost_pin(tr->tc.placement);
    if (!st && longest && dist_step_placed(&tr->mc, &tr->tc) && ranks > 1)
      st = same_grid(tr->data, longest);
  }
  tr->sched.cost.heads = tr->mc.heads;
  tr->sched.cost.a2a_chunks = tr->tc.ulysses_chunks;  // its all-to-alls pipelined so
  // train.zero: the world collectives of the shards, priced per step and wave
  if (!st) st = train_zero_cost(&tr->mc, &tr->tc, ranks, &tr->sched.cost.zero);
  tr->rank = comm_rank();
  if (!st) st = sched_config_check(&tr->sched);
  return st;
}

// The validation split and the sampler, and what the start needs besides the model (also
// what a dry run checks).
static tsr_status setup_data(trainer *tr, const train_options *o) {
  tsr_status st = data_split_make(tr->data, tr->tc.val_clips, &tr->split);
  if (!st) st = train_val_check(tr, o->skip_bad_clips);
  if (!st) st = data_sampler_init_split(&tr->sampler, tr->data, &tr->split, (uint64_t)tr->tc.seed);
  tr->cb = o->comm;
  if (!st && !tr->cb) st = err_set(TSR_EINVAL, "train: no communication backend given");
  if (!st && tr->tc.lora_rank > 0 && !o->resume && !o->init_ckpt)
    st = err_set(TSR_EINVAL, "lora.rank = %d: adapters train on a frozen base: give it with "
                 "--init CKPT", tr->tc.lora_rank);
  return st;
}

// The trainer's state: the validation split, the sampler, the model, then its weights from
// RUN's newest checkpoint (--resume), a checkpoint's weights (--init) or the seed.
static tsr_status setup_trainer(trainer *tr, const train_options *o, train_setup *su) {
  tsr_status st = setup_data(tr, o);
  if (!st) st = train_samples_prepare(tr, o);  // before a resume looks for its samples
  if (!st && tr->split.n_val && comm_rank() == 0) st = train_val_write_list(tr, o->run_dir);
  if (!st) st = trainer_setup(tr);
  if (!st) {
    if (o->resume) st = train_start_from(tr, o, su->latest, 1, su->base, sizeof su->base);
    else if (o->init_ckpt) st = train_start_from(tr, o, o->init_ckpt, 0, su->base, sizeof su->base);
    else if (!(st = train_weights_init(tr, (uint64_t)tr->tc.seed)))
      st = train_ema_reset(tr);
  }
  // the store this run trained on, for a resume to say what changed (kept on a resume)
  if (!st && comm_rank() == 0) st = train_store_record(tr, o->run_dir, !o->resume);
  // the resumed checkpoint's samples, lost to a failed write; train.zero: every rank puts
  // the EMA together (rank 0's sample_pending is shared)
  int64_t pending = tr->sample_pending;
  if (!st && tr->tc.zero > 0 && comm_size() > 1) st = comm_allreduce_max_i64(&pending, 1);
  if (!st && pending && tr->tc.zero > 0) st = train_ema_full(tr, &tr->ema_whole);
  if (!st && tr->sample_pending) {
    log_info("train: the samples of step %lld are missing: writing them first",
             (long long)tr->step);
    train_samples_step(tr, o);
  }
  tr->ema_whole = NULL;
  return st;
}

static void log_run_schedule(const trainer *tr, int64_t stop, int from_steps);

// --dry-run: the start's checks that need no model and no RUN written (the same errors as a
// run's start: RUN's checkpoints, the cost model, the split, a resume's checkpoint metadata),
// then the report (model/train/dry_run.h) on stdout.
static tsr_status train_dry(trainer *tr, const train_options *o, train_setup *su, int ranks) {
  tsr_status st = o->run_dir ? check_run_checkpoints(o, su) : TSR_OK;
  if (!st) st = setup_sched(tr, o, ranks);
  if (!st) st = setup_data(tr, o);
  if (!st) st = train_samples_prepare(tr, o);  // the prompts' errors are the start's too
  if (!st && o->resume) st = train_resume_peek(tr, o, su->latest);
  su->tc0.lr_schedule_steps = tr->tc.lr_schedule_steps;
  int64_t stop = o->stop_step > 0 ? o->stop_step : tr->tc.steps;
  train_dry_run_view v = {.prev = &su->rc, .mc = &su->mc0, .tc = &su->tc0, .mem = &su->mem,
                          .capacity = su->capacity, .cap_source = su->cap_source,
                          .stop = stop, .batches = 3};
  if (!st && comm_rank() == 0) {
    log_run_schedule(tr, stop, su->schedule_from_steps);
    st = train_dry_run_print(tr, o, &v, stdout);
    fflush(stdout);
  }
  return st;
}

// What rank 0 says before the first step: backend, sizes, validation and samples.
static void log_run_start(const trainer *tr, const train_options *o, int64_t stop) {
  log_info("train: backend %s, precision %s (%s activations, fp32 weights and optimizer), "
           "comm %s", tr->kb->name, config_precision_name(tr->tc.precision),
           kernels_dtype_name(tr->kb->act_dtype), tr->cb->name);
  log_info("train: %zu parameters, %lld clips (%d labels), batch %lld, mem_tokens %lld, "
           "steps %lld -> %lld of %lld%s%s", tr->n_params, (long long)data_num_clips(tr->data),
           data_num_labels(tr->data), (long long)tr->tc.global_batch,
           (long long)tr->tc.mem_tokens, (long long)tr->step, (long long)stop,
           (long long)tr->tc.steps, o->init_ckpt ? ", weights from " : "",
           o->init_ckpt ? o->init_ckpt : "");
  if (tr->split.n_val) {
    char b[256] = "";
    size_t len = 0;
    for (int k = 0; k < DATA_BUCKETS; k++)
      len += (size_t)snprintf(b + len, sizeof b - len, "%s%lld %s (%lld-%lld tokens)",
                              k ? ", " : "", (long long)tr->split.bucket_val[k],
                              data_bucket_names[k], (long long)tr->split.bucket_tokens[k][0],
                              (long long)tr->split.bucket_tokens[k][1]);
    log_info("train: validation on %lld held-out clips (%s) every %d steps, at t = 0.1, 0.3, "
             "0.5, 0.7, 0.9 with fixed noise; %lld clips train", (long long)tr->split.n_val, b,
             tr->tc.val_every, (long long)tr->split.n_train);
  }
  if (tr->tc.sample_every > 0)
    log_info("train: samples of the EMA %s every %d steps in %s/samples/",
             tr->tc.lora_rank > 0 ? "adapters on the base" : "weights", tr->tc.sample_every,
             o->run_dir);
  if (tr->step >= stop)
    log_info("train: %lld steps already done, nothing to do", (long long)tr->step);
}

// The schedule, in the first lines: its length and where it came from, and a warning when
// the run stops before its end (the learning rate there) or never leaves the warm-up.
static void log_run_schedule(const trainer *tr, int64_t stop, int from_steps) {
  const train_config *t = &tr->tc;
  int64_t S = lr_schedule_length(t);
  log_info("train: learning rate: warm-up %lld steps to %g, cosine to %g at step %lld (%s)",
           (long long)t->warmup, (double)t->lr, (double)t->min_lr, (long long)S,
           from_steps ? "the length of --steps; train.lr_schedule_steps sets another"
           : t->lr_schedule_steps > 0 ? "train.lr_schedule_steps" : "train.steps");
  if (stop < S)
    log_warn("train: this run stops at step %lld, before the schedule's end at %lld: the "
             "learning rate is then %.3g, not min_lr = %g%s; give train.lr_schedule_steps = "
             "%lld (or --steps %lld) for a schedule that ends with the run", (long long)stop,
             (long long)S, lr_schedule(t, stop - 1), (double)t->min_lr,
             stop <= t->warmup ? ", still in the warm-up" : "", (long long)stop, (long long)S);
  else if (S <= t->warmup)
    log_warn("train: the schedule's %lld steps are all warm-up (train.warmup = %lld): the "
             "learning rate never reaches %g; lower train.warmup", (long long)S,
             (long long)t->warmup, (double)t->lr);
}

// The memory the run used against the memory model's count (rank 0, after the last step).
static void log_run_memory(const trainer *tr, const train_setup *su) {
  size_t dev_free1 = 0, dev_total = su->dev_total;
  if (su->dev_free0 && tr->kb->mem_info(tr->kb, &dev_free1, &dev_total)) dev_free1 = 0;
  if (comm_rank() != 0 || !su->counter.peak) return;
  char dev[160] = "";
  size_t fell = su->dev_free0 > dev_free1 ? su->dev_free0 - dev_free1 : 0;
  if (su->dev_free0 && dev_free1)
    snprintf(dev, sizeof dev, "; device free memory fell by %.4f GiB (%zu bytes; the model's "
             "total %.4f GiB)", (double)fell / (1 << 30), fell, (double)su->mem.total / (1 << 30));
  log_info("train: memory per rank: backend allocations peaked at %.4f GiB (%zu bytes), the "
           "model counts %.4f GiB (%zu bytes, ring buffers %zu) of them: measured / model = "
           "%.4f; process peak RSS %.3f GiB%s", (double)su->counter.peak / (1 << 30),
           su->counter.peak, (double)su->mem.allocated / (1 << 30), su->mem.allocated,
           su->mem.ring, (double)su->counter.peak / (double)su->mem.allocated,
           train_peak_rss_gib(), dev);
}

tsr_status train_run(const train_options *given) {
  trainer tr = {0};
  train_setup su = {.cap_source = "", .eff = *given};
  tsr_status st = setup_config(&tr, given, &su);
  const train_options *o = &su.eff;
  int ranks = comm_size();
  if (!st) st = train_check_store(&tr, ranks);
  if (!st) st = setup_sched(&tr, o, ranks);  // before the check: it compares the planner's inputs
  if (!st) st = train_check_ranks_agree(&tr, o);
  // a LoRA run's base is the one checkpoint --resume reads besides RUN's (it may have moved)
  if (!st && o->resume && o->init_ckpt && tr.tc.lora_rank == 0)
    st = err_set(TSR_EINVAL, "--resume and --init exclude each other: --resume continues RUN, "
                 "--init starts a new run from a checkpoint's weights (with lora.rank > 0, "
                 "--resume --init BASE gives the frozen base's new place)");
  if (!st && o->init_ckpt) {
    struct stat sb;
    if (stat(o->init_ckpt, &sb))
      st = err_set(TSR_EIO, "--init %s: %s", o->init_ckpt, strerror(errno));
  }
  if (!st && o->dry_run) {
    st = train_dry(&tr, o, &su, ranks);
    goto done;
  }
  if (!st) st = setup_run_dir(o, &su);
  if (!st) st = setup_trainer(&tr, o, &su);
  su.tc0.lr_schedule_steps = tr.tc.lr_schedule_steps;  // a resume may take the checkpoint's
  if (!st && comm_rank() == 0)  // what a resume from the run alone reads
    st = run_config_write(o->run_dir, o, &su.rc, &su.mc0, &su.tc0, tr.tc.mem_tokens);
  int64_t stop = o->stop_step > 0 ? o->stop_step : tr.tc.steps;
  if (!st && comm_rank() == 0) log_run_start(&tr, o, stop);
  if (!st && comm_rank() == 0) log_run_schedule(&tr, stop, su.schedule_from_steps);
  if (!st && tr.step < stop) st = train_loop(&tr, o, stop, su.base);
  if (!st) log_run_memory(&tr, &su);
done:
  data_split_free(&tr.split);
  dit_free(&tr.sample_model);
  train_prompts_free(&tr.prompts);
  trainer_free(&tr);
  train_memory_counter_free(&su.counter);
  if (su.log) {
    if (st) fprintf(su.log, "error: %s\n", err_msg());  // why the run stopped (the CLI prints it)
    log_copy_to(NULL);
    fclose(su.log);
  }
  run_config_free(&su.rc);
  lockfile_release(&su.run_lock);  // last: RUN is complete
  return st;
}
