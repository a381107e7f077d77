// model/train/train_state.c — the checkpoint's view of a trainer, and a run's start from a
// checkpoint (model/train/train_state.h).
#include "model/train/train_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/lora.h"
#include "model/train/resume.h"
#include "model/train/run_config.h"
#include "model/train/samples.h"
#include "model/train/zero.h"

// A resumed run must train the same model the same way; only the ckpt/log/validation/
// sample cadence, train.mem_tokens, cp_mode, ulysses_chunks, placement, precision and zero
// may change (run_config_key_safe): memory per rank, the CP modes and the placement shape
// the plans, and plans do not change the losses (plan invariance), so a run may resume on
// another cluster.
// train.val_clips may not: it decides which clips train.
static tsr_status check_resume_config(const ckpt_meta *cm, const trainer *tr, const char *path) {
  char key[384], was[384], now[384];
  if (!run_config_unsafe_diff(&cm->mc, &cm->tc, &tr->mc, &tr->tc, key, was, now, sizeof key))
    return TSR_OK;
  return err_set(TSR_EMISMATCH, "--resume: the config differs from checkpoint %s's: %s = %s "
                 "there, %s now; resume with the same config (only train.ckpt_every, ckpt_keep, "
                 "log_every, tensorboard, mem_tokens, cp_mode, ulysses_chunks, placement, precision, "
                 "zero, val_every and sample_* may change) or start a new run", path, key, was, now);
}

// ckpt_state.gather of a sharded state (train.zero >= 1): tensor i of a set, from its bucket
// put together out of every rank's shard in tr->zero_buf (one bucket at a time; collective).
// A LoRA run's sets are its adapters', one bucket (zero_layout_flat).
static tsr_status gather_tensor(void *ctx, const float *shard, int i, const float **data) {
  trainer *tr = ctx;
  const int lora = tr->tc.lora_rank > 0;
  const dit_tensor *t = lora ? dit_lora_tensor_info(tr->model, i) : dit_tensor_info(tr->model, i);
  int b = 0;
  while (!lora && b + 1 < dit_num_buckets(tr->model) &&
         !(t->offset >= dit_get_bucket(tr->model, b).offset &&
           t->offset < dit_get_bucket(tr->model, b).offset + dit_get_bucket(tr->model, b).numel))
    b++;
  dit_bucket k = lora ? (dit_bucket){0, (size_t)tr->zero.n} : dit_get_bucket(tr->model, b);
  tsr_status st = TSR_OK;
  if (tr->zero_buf_set != shard || tr->zero_buf_bucket != b) {
    st = zero_gather_bucket(&tr->zero, tr->cb, b, tr->zero_buf, shard);
    tr->zero_buf_set = st ? NULL : shard;
    tr->zero_buf_bucket = b;
  }
  *data = tr->zero_buf + (t->offset - k.offset);
  return st;
}

tsr_status train_ckpt_state(const trainer *tr, const data_sampler *pos, int plan_kind,
                            int sample_due, const char *base, ckpt_state *cs,
                            const char ***names, char *plan, ckpt_shard *sh) {
  int n = data_num_labels(tr->data);
  if (!(*names = malloc((size_t)(n ? n : 1) * sizeof **names)))
    return err_set(TSR_ENOMEM, "checkpoint: no memory");
  for (int k = 0; k < n; k++) (*names)[k] = data_label_name(tr->data, k);
  *cs = (ckpt_state){.model = tr->model, .ema = tr->ema, .adam_m = tr->adam_m,
                     .adam_v = tr->adam_v, .mc = &tr->mc, .tc = &tr->tc, .step = tr->step,
                     .sampler_epoch = pos->epoch, .sampler_pos = pos->pos,
                     .store = data_settings(tr->data), .store_clips = data_num_clips(tr->data),
                     .labels = *names, .n_labels = n,
                     .store_fingerprint = data_fingerprint(tr->data), .plan_settings = plan,
                     .caption_encoder = data_caption_encoder(tr->data),
                     .sample_due = sample_due, .adapters = tr->tc.lora_rank > 0,
                     .base_path = base, .weights = tr->tc.zero == 3 ? tr->master : NULL};
  if (tr->tc.zero > 0) {  // the sharded sets: loaded by shard, saved through gathers
    *sh = (ckpt_shard){tr->zero.n_buckets, tr->zero.lo, tr->zero.len, tr->zero.at};
    cs->shard = sh;
    cs->gather = gather_tensor;
    cs->gather_ctx = (void *)tr;
  }
  train_plan_settings(tr, plan_kind, plan, 256);
  return TSR_OK;
}

// What a resume checks before it loads anything: the config (a resume given the config
// file again, whose train.lr_schedule_steps is 0, keeps the schedule the fresh run's --steps
// set: run_config_schedule) and the store against the checkpoint's; whether it is bitwise.
static tsr_status resume_checks(const ckpt_meta *cm, trainer *tr, const train_options *o,
                                const char *path) {
  if (tr->tc.lr_schedule_steps == 0) tr->tc.lr_schedule_steps = cm->tc.lr_schedule_steps;
  tsr_status st = check_resume_config(cm, tr, path);
  if (!st) st = train_resume_check_store(cm, tr, path, o->run_dir);
  if (!st) train_resume_check_plan(cm, tr, o->plan_kind, path);
  return st;
}

tsr_status train_resume_peek(trainer *tr, const train_options *o, const char *path) {
  ckpt_meta cm = {0};
  tsr_status st = ckpt_read_meta(path, &cm);
  if (!st) st = resume_checks(&cm, tr, o, path);
  if (!st) {
    tr->step = cm.step;
    st = data_sampler_seek(&tr->sampler, cm.sampler_epoch, cm.sampler_pos);
  }
  ckpt_meta_free(&cm);
  return st;
}

tsr_status train_start_from(trainer *tr, const train_options *o, const char *path, int resume,
                            char *base, size_t cap) {
  ckpt_meta cm = {0};
  tsr_status st = ckpt_read_meta(path, &cm);
  if (!st && resume) st = resume_checks(&cm, tr, o, path);
  if (!st && resume && cm.adapters) st = train_resume_base(tr, &cm, path, o->init_ckpt, base, cap);
  if (!st && !resume && tr->tc.lora_rank > 0) snprintf(base, cap, "%s", path);
  ckpt_state cs;
  ckpt_shard sh;
  const char **names = NULL;
  char plan[256];
  if (!st) st = train_ckpt_state(tr, &tr->sampler, o->plan_kind, 0, base, &cs, &names, plan, &sh);
  if (!st) cs.adapters = cs.adapters && resume;  // --init loads a base's weights
  if (!st) st = ckpt_load(path, &cs, resume ? CKPT_LOAD_WEIGHTS | CKPT_LOAD_EMA | CKPT_LOAD_OPTIM
                                          : CKPT_LOAD_WEIGHTS);
  free(names);
  if (!st && resume && cm.tc.precision != tr->tc.precision && tr->rank == 0)
    log_info("train: checkpoint %s was trained with train.precision=%s, continuing in %s (the "
             "fp32 weights and optimizer state carry over)", path,
             config_precision_name(cm.tc.precision), config_precision_name(tr->tc.precision));
  if (!st && resume) {
    tr->step = cm.step;
    st = data_sampler_seek(&tr->sampler, cm.sampler_epoch, cm.sampler_pos);
    // a sample the checkpoint says was due, lost to a failed write: written first
    tr->sample_pending = tr->rank == 0 && cm.sample_due && tr->tc.sample_every > 0 &&
                         !train_sample_exists(o->run_dir, cm.step, tr->prompts.n);
  }
  if (!st) st = train_weights_set(tr);  // train.zero: this rank's masters from the weights
  if (!st && !resume) st = train_ema_reset(tr);
  ckpt_meta_free(&cm);
  if (st && !resume) return err_wrap(st, "--init (weights of the configured model, shapes checked): ");
  return st;
}

