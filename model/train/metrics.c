// model/train/metrics.c — RUN/metrics.jsonl (model/train/metrics.h).
#include "model/train/metrics.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"
#include "model/train/step.h"
#include "model/train/val.h"

// Rewrites `path` keeping lines whose "step" is <= keep (atomically: core/fs.h).
static tsr_status metrics_cut(const char *path, int64_t keep) {
  if (access(path, F_OK) != 0 && errno == ENOENT) return TSR_OK;  // no metrics yet
  int fd = -1;  // a regular file only (core/fs.h): a FIFO would hang the resume
  tsr_status st = fs_open_regular(path, &fd);
  if (st) return st;
  FILE *in = fdopen(fd, "r");
  if (!in) {
    close(fd);
    return err_set(TSR_EIO, "open %s: %s", path, strerror(errno));
  }
  fs_atomic a;
  st = fs_atomic_open(&a, path);
  if (st) {
    fclose(in);
    return st;
  }
  FILE *out = a.f;
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, in)) > 0) {
    json_t *j = json_loads(line, 0, NULL);
    json_t *s = j ? json_object_get(j, "step") : NULL;
    int keep_line = s && json_is_integer(s) && json_integer_value(s) <= keep;
    json_decref(j);
    if (keep_line) fwrite(line, 1, (size_t)len, out);  // a torn last line is dropped
  }
  free(line);
  fclose(in);
  st = fs_atomic_commit(&a);
  fs_atomic_abort(&a);
  return st ? err_wrap(st, "rewriting %s: ", path) : TSR_OK;
}

tsr_status metrics_open(FILE **f, const char *run_dir, int64_t resume_step) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir) >= (int)sizeof path)
    return err_set(TSR_EINVAL, "run directory path too long: %s", run_dir);
  const char *name = "metrics.jsonl";
  tsr_status st = fs_refuse_links(run_dir, &name, 1);  // before the cut reads it
  if (!st && resume_step >= 0) st = metrics_cut(path, resume_step);
  // appended to, not replaced: a regular file, not a link (a FIFO would block the run, a
  // link would send the lines elsewhere)
  if (!st) st = fs_fopen_nofollow(path, resume_step >= 0 ? "a" : "w", f);
  return st;
}

// Adds the validation fields to j.
static int put_val(json_t *j, const train_val_stats *v) {
  json_t *lv = json_object(), *bk = json_object();
  int bad = !lv || !bk;
  for (int k = 0; !bad && k < TRAIN_VAL_LEVELS; k++) {
    char key[16];
    snprintf(key, sizeof key, "%g", train_val_levels[k]);
    bad |= json_object_set_new(lv, key, json_real(v->level[k]));
  }
  for (int b = 0; !bad && b < DATA_BUCKETS; b++)  // a bucket without held-out clips: null
    bad |= json_object_set_new(bk, data_bucket_names[b],
                               isnan(v->bucket[b]) ? json_null() : json_real(v->bucket[b]));
  bad |= json_object_set_new(j, "val_loss", json_real(v->loss));
  bad |= json_object_set_new(j, "val_t", lv);
  bad |= json_object_set_new(j, "val_bucket", bk);
  bad |= json_object_set_new(j, "val_clips", json_integer((json_int_t)v->clips));
  bad |= json_object_set_new(j, "val_s", json_real(v->seconds));
  return bad;
}

// Adds "plan_ms", "cp" ({"1": clips at CP size 1, "2": ..., sizes with clips only}) and
// "cp_modes" ({"ring": clips in ring groups of CP > 1, "ulysses": ..., modes used only}),
// and under a blockwise placement "placed_kv" ({"bytes", "plan_bytes", "ranks_off"}: the
// step's train_step_stats kv_*).
static int put_plan(json_t *j, const train_step_stats *st) {
  json_t *cp = json_object(), *modes = json_object();
  int bad = !cp || !modes;
  for (int m = 0; !bad && m < COST_CP_NMODES; m++)
    if (st->mode_clips[m])
      bad |= json_object_set_new(modes, cost_cp_mode_name((cost_cp_mode)m),
                                 json_integer((json_int_t)st->mode_clips[m]));
  bad |= json_object_set_new(j, "cp_modes", modes);
  for (int l = 0; !bad && l < SCHED_MAX_LEVELS; l++) {
    if (!st->cp_clips[l]) continue;
    char key[24];
    snprintf(key, sizeof key, "%lld", 1LL << l);
    bad |= json_object_set_new(cp, key, json_integer((json_int_t)st->cp_clips[l]));
  }
  bad |= json_object_set_new(j, "plan_ms", json_real(st->plan_ms));
  bad |= json_object_set_new(j, "cp", cp);
  if (!bad && st->placed)
    bad |= json_object_set_new(j, "placed_kv",
                               json_pack("{sI sI sI}", "bytes", (json_int_t)st->kv_bytes,
                                         "plan_bytes", (json_int_t)st->kv_plan_bytes,
                                         "ranks_off", (json_int_t)st->kv_ranks_off));
  return bad;
}

void metrics_interval_add(metrics_interval *iv, const train_step_stats *st) {
  iv->loss += st->loss;
  iv->grad_norm += st->grad_norm;
  iv->tokens += (double)st->tokens;
  iv->step_s += st->step_s;
  iv->n++;
}

void metrics_interval_line(metrics_interval *iv, const train_step_stats *st,
                           train_step_stats *line) {
  *line = *st;
  line->loss_step = st->loss, line->grad_norm_step = st->grad_norm;
  line->tokens_per_s_step = st->tokens_per_s;
  line->interval_steps = iv->n;
  if (iv->n > 0) {
    line->loss = iv->loss / (double)iv->n;
    line->grad_norm = iv->grad_norm / (double)iv->n;
    line->tokens_per_s = iv->step_s > 0 ? iv->tokens / iv->step_s : st->tokens_per_s;
  }
  *iv = (metrics_interval){0};
}

tsr_status metrics_write(FILE *f, int64_t step, const train_step_stats *st,
                         const train_val_stats *val) {
  json_t *j = st ? json_pack("{sI sf sf sf sI sI sf sf sf ss sI ss ss}", "step", (json_int_t)step,
                             "loss", st->loss, "lr", st->lr, "grad_norm", st->grad_norm, "clips",
                             (json_int_t)st->clips, "tokens", (json_int_t)st->tokens, "step_s",
                             st->step_s, "tokens_per_s", st->tokens_per_s, "predicted_s",
                             st->predicted_s, "plan", st->plan ? st->plan : "", "bad_clips",
                             (json_int_t)st->bad_clips, "backend", st->backend ? st->backend : "",
                             "precision", st->precision ? st->precision : "")
                 : json_pack("{sI}", "step", (json_int_t)step);
  if (j && st && put_plan(j, st)) json_decref(j), j = NULL;
  if (j && st &&
      (json_object_set_new(j, "steps", json_integer((json_int_t)st->interval_steps)) ||
       json_object_set_new(j, "loss_step", json_real(st->loss_step)) ||
       json_object_set_new(j, "grad_norm_step", json_real(st->grad_norm_step)) ||
       json_object_set_new(j, "tokens_per_s_step", json_real(st->tokens_per_s_step))))
    json_decref(j), j = NULL;
  if (j && val && put_val(j, val)) json_decref(j), j = NULL;
  if (!j) return err_set(TSR_ENOMEM, "metrics: cannot build JSON for step %lld", (long long)step);
  // Losses are printed with 17 significant digits so runs can be compared bitwise.
  char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
  json_decref(j);
  if (!s) return err_set(TSR_ENOMEM, "metrics: cannot format step %lld", (long long)step);
  int bad = fprintf(f, "%s\n", s) < 0 || fflush(f);
  free(s);
  return bad ? err_set(TSR_EIO, "metrics.jsonl: write failed at step %lld: %s", (long long)step,
                       strerror(errno))
             : TSR_OK;
}
