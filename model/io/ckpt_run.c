// model/io/ckpt_run.c — a run directory's checkpoints (model/io/ckpt_run.h).
#include "model/io/ckpt_run.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"

// Steps of RUN's files KIND-STEP.safetensors (kind "ckpt": the checkpoints, "lora": a LoRA
// run's adapter files), ascending; *n of them.
static tsr_status list_steps(const char *dir, const char *kind, int64_t **steps, int *n) {
  *steps = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return err_set(TSR_EIO, "open run directory %s: %s", dir, strerror(errno));
  int cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    long long st;
    int used = 0;
    size_t kl = strlen(kind);
    if (strncmp(e->d_name, kind, kl) || e->d_name[kl] != '-' ||
        sscanf(e->d_name + kl, "-%lld.safetensors%n", &st, &used) != 1 || e->d_name[kl + used] ||
        st < 0)
      continue;
    if (*n == cap) {
      cap = cap ? cap * 2 : 16;
      int64_t *p = realloc(*steps, (size_t)cap * sizeof *p);
      if (!p) {
        closedir(d);
        return err_set(TSR_ENOMEM, "no memory listing %s", dir);
      }
      *steps = p;
    }
    (*steps)[(*n)++] = st;
  }
  closedir(d);
  for (int i = 1; i < *n; i++)  // insertion sort: a handful of files
    for (int j = i; j > 0 && (*steps)[j - 1] > (*steps)[j]; j--) {
      int64_t t = (*steps)[j];
      (*steps)[j] = (*steps)[j - 1];
      (*steps)[j - 1] = t;
    }
  return TSR_OK;
}

static void kind_path(char *buf, size_t n, const char *dir, const char *kind, int64_t step) {
  snprintf(buf, n, "%s/%s-%" PRId64 ".safetensors", dir, kind, step);
}
static void ckpt_path(char *buf, size_t n, const char *dir, int64_t step) {
  kind_path(buf, n, dir, "ckpt", step);
}

// Removes all but the newest `keep` of RUN's KIND-STEP.safetensors (never step `now`'s);
// *removed counts them.
static tsr_status prune(const char *run_dir, const char *kind, int keep, int64_t now,
                        int *removed) {
  int64_t *steps;
  int n;
  tsr_status st = list_steps(run_dir, kind, &steps, &n);
  if (st) return st;
  for (int i = 0; i + keep < n; i++) {
    if (steps[i] == now) continue;
    char path[PATH_MAX];
    kind_path(path, sizeof path, run_dir, kind, steps[i]);
    if (unlink(path) && errno != ENOENT) {
      st = err_set(TSR_EIO, "remove old %s %s: %s", strcmp(kind, "ckpt") ? "adapter file" :
                  "checkpoint", path, strerror(errno));
      break;
    }
    (*removed)++;
  }
  free(steps);
  return st;
}

tsr_status ckpt_save_run(const char *run_dir, const ckpt_state *cs, int keep) {
  char path[PATH_MAX];
  ckpt_path(path, sizeof path, run_dir, cs->step);
  tsr_status st = ckpt_save(path, cs);
  if (st) return st;
  if (keep < 1) keep = 1;
  int removed = 0;
  st = prune(run_dir, "ckpt", keep, cs->step, &removed);
  // a LoRA run's adapter files (written beside each checkpoint, model/train/train.c) go with
  // them: the newest `keep` stay
  if (!st && cs->adapters) st = prune(run_dir, "lora", keep, cs->step, &removed);
  return !st && removed ? fs_fsync_dir(run_dir) : st;
}

tsr_status ckpt_latest(const char *run_dir, char *path, size_t n, int64_t *step) {
  int64_t *steps;
  int k;
  tsr_status st = list_steps(run_dir, "ckpt", &steps, &k);
  if (st) return st;
  if (k == 0) {
    free(steps);
    return err_set(TSR_EINVAL, "no checkpoint in %s", run_dir);
  }
  *step = steps[k - 1];
  ckpt_path(path, n, run_dir, *step);
  free(steps);
  return TSR_OK;
}

tsr_status ckpt_clean_tmp(const char *run_dir) {
  DIR *d = opendir(run_dir);
  if (!d) return err_set(TSR_EIO, "open run directory %s: %s", run_dir, strerror(errno));
  struct dirent *e;
  int removed = 0;
  tsr_status st = TSR_OK;
  while ((e = readdir(d))) {
    // a LoRA run's adapter files (lora-STEP.safetensors) are written beside its checkpoints
    if ((strncmp(e->d_name, "ckpt-", 5) && strncmp(e->d_name, "lora-", 5)) ||
        !strstr(e->d_name, ".safetensors.tmp"))
      continue;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", run_dir, e->d_name);
    if (unlink(path) && errno != ENOENT) {
      st = err_set(TSR_EIO, "remove stale %s: %s", path, strerror(errno));
      break;
    }
    removed++;
  }
  closedir(d);
  return !st && removed ? fs_fsync_dir(run_dir) : st;
}
