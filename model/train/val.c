// model/train/val.c — validation on the held-out clips at fixed noise levels with fixed
// noise (model/train/val.h).
#include "model/train/val.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/fs.h"
#include "core/log.h"
#include "model/train/plan_choice.h"
#include "model/train/step.h"

const double train_val_levels[TRAIN_VAL_LEVELS] = {0.1, 0.3, 0.5, 0.7, 0.9};

// The training objective with t fixed at `t`: the logit-normal draw of t collapses to
// sigmoid(logit(t)) (std 0), without the length shift, so every clip is scored at the
// same noise level whatever its length, outside train.t_min..t_max too (the levels are
// absolute, so runs on different ranges compare); labels are kept (no dropout).
static train_config level_config(const train_config *tc, double t) {
  train_config v = *tc;
  v.t_logit_mean = (float)log(t / (1.0 - t));
  v.t_logit_std = 0.0f;
  v.t_shift_tokens = 0;
  v.t_min = 0.0f, v.t_max = 1.0f;
  v.class_dropout = 0.0f;
  // every chunk at this one level: the per-clip batch (dist_step_eval scores clips, not segments)
  v.noise_per_chunk = 0;
  return v;
}

tsr_status train_val_write_list(const trainer *tr, const char *run_dir) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/val_clips.txt", run_dir) >= (int)sizeof path)
    return err_set(TSR_EINVAL, "run directory path too long: %s", run_dir);
  fs_atomic a;
  tsr_status st = fs_atomic_open(&a, path);
  if (!st) {
    FILE *f = a.f;
    fprintf(f, "# clips held out of training for validation (train.val_clips = %lld): id, "
            "length bucket, tokens\n", (long long)tr->tc.val_clips);
    for (int64_t i = 0; i < tr->split.n_val; i++) {
      const data_clip *c = data_clip_at(tr->data, tr->split.val[i]);
      fprintf(f, "%lld %s %lld\n", (long long)c->id,
              data_bucket_names[tr->split.bucket[tr->split.val[i]]], (long long)c->tokens);
    }
    st = ferror(f) ? err_set(TSR_EIO, "writing %s failed", path) : fs_atomic_commit(&a);
  }
  fs_atomic_abort(&a);
  return st;
}

tsr_status train_val_check(trainer *tr, int skip) {
  data_split *sp = &tr->split;
  int64_t n = sp->n_val;
  if (!n) return TSR_OK;
  int64_t *bad = calloc((size_t)n, sizeof *bad);
  if (!bad) return err_set(TSR_ENOMEM, "validation: out of memory");
  for (int64_t i = 0; i < n; i++) {
    const uint8_t *tok;
    bad[i] = data_clip_tokens(tr->data, sp->val[i], 1, &tok) != TSR_OK;
  }
  tsr_status st = comm_size() > 1 ? comm_allreduce_max_i64(bad, (int)n) : TSR_OK;
  int64_t kept = 0;
  for (int64_t i = 0; !st && i < n; i++) {
    if (!bad[i]) {
      sp->val[kept++] = sp->val[i];
      continue;
    }
    const data_clip *c = data_clip_at(tr->data, sp->val[i]);
    const uint8_t *tok;
    char why[1024];
    if (data_clip_tokens(tr->data, sp->val[i], 1, &tok)) snprintf(why, sizeof why, "%s", err_msg());
    else snprintf(why, sizeof why, "clip %lld is good here but failed its checksum on another "
                  "rank", (long long)c->id);
    if (!skip)
      st = err_set(TSR_EFORMAT, "validation clip: %s; run `tessera index verify %s` to list "
                   "every bad clip (or train without them: --skip-bad-clips)", why,
                   data_dir(tr->data));
    else if (tr->rank == 0)
      log_warn("train: leaving bad clip %lld out of validation (--skip-bad-clips): %s",
               (long long)c->id, why);
    if (!st) sp->bucket_val[sp->bucket[sp->val[i]]]--;
  }
  if (!st) sp->n_val = kept;
  free(bad);
  return st;
}

tsr_status train_validate(trainer *tr, int plan_kind, train_val_stats *out) {
  double t0 = time_now();
  const data_split *sp = &tr->split;
  const int64_t n = sp->n_val, B = tr->tc.global_batch;
  const dit_config *mc = &tr->mc;
  const double P = (double)mc->pt * mc->ph * mc->pw * mc->channels;
  memset(out, 0, sizeof *out);
  out->step = tr->step;
  out->clips = n;
  if (n == 0) return err_set(TSR_EINVAL, "validation: no held-out clips (train.val_clips = 0)");
  int64_t cap = n < B ? n : B;
  double *sse = calloc((size_t)(n * TRAIN_VAL_LEVELS), sizeof *sse);  // [level][clip]
  dist_clip *dc = malloc((size_t)cap * sizeof *dc);
  int64_t *tok = malloc((size_t)cap * sizeof *tok);
  plan alt;
  plan_init(&alt, tr->sched.cluster.ranks);
  tsr_status st = sse && dc && tok ? TSR_OK : err_set(TSR_ENOMEM, "validation: out of memory");
  // batches of at most global_batch clips, planned for every rank like a training batch
  for (int64_t c0 = 0; !st && c0 < n; c0 += cap) {
    int64_t m = n - c0 < cap ? n - c0 : cap;
    for (int64_t i = 0; !st && i < m; i++) {
      const data_clip *c = data_clip_at(tr->data, sp->val[c0 + i]);
      const uint8_t *t;
      st = data_clip_tokens(tr->data, sp->val[c0 + i], 1, &t);  // hashed once, at start
      dc[i] = (dist_clip){.id = c->id, .T = c->T, .H = c->H, .W = c->W, .label = c->label,
                          .tokens = t};
      tok[i] = c->tokens;
    }
    sched_result res;
    if (!st) st = sched_plan_batch(&tr->sched, tok, (int)m, &res);
    else break;
    const plan *run = NULL;
    double predicted;
    const char *name;
    if (!st) st = train_choose_plan(&tr->sched, plan_kind, tok, m, &res, &alt, &run, &predicted, &name);
    for (int k = 0; !st && k < TRAIN_VAL_LEVELS; k++) {
      train_config lc = level_config(&tr->tc, train_val_levels[k]);
      st = dist_step_eval(tr->dist, run, dc, (int)m, &lc, TRAIN_VAL_KEY_STEP, sse + k * n + c0);
    }
    sched_result_free(&res);
  }
  if (!st && comm_size() > 1) st = comm_allreduce_sum_f64(sse, (int)(n * TRAIN_VAL_LEVELS));
  if (!st) {
    double bsum[DATA_BUCKETS] = {0};
    int64_t bn[DATA_BUCKETS] = {0};
    for (int k = 0; k < TRAIN_VAL_LEVELS; k++) {
      double sum = 0;
      for (int64_t i = 0; i < n; i++) {
        double mse = sse[k * n + i] / ((double)data_clip_at(tr->data, sp->val[i])->tokens * P);
        int b = sp->bucket[sp->val[i]];
        sum += mse;
        bsum[b] += mse;
        bn[b]++;
      }
      out->level[k] = sum / (double)n;
      out->loss += out->level[k] / TRAIN_VAL_LEVELS;
    }
    for (int b = 0; b < DATA_BUCKETS; b++) out->bucket[b] = bn[b] ? bsum[b] / (double)bn[b] : NAN;
  }
  out->seconds = time_now() - t0;
  free(sse);
  free(dc);
  free(tok);
  plan_free(&alt);
  return st;
}
