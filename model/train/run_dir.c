// model/train/run_dir.c — one writer per run directory (model/train/resume.h): RUN/lock,
// then the leftovers of a crashed run removed.
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/fs.h"
#include "model/io/checkpoint.h"
#include "model/io/ckpt_run.h"
#include "model/train/resume.h"

#define RUN_LOCK_NAME "lock"

// RUN/samples/*.tmp*: a sample whose write was cut by a crash (fs_atomic's temporary file).
static tsr_status clean_sample_tmp(const char *run_dir) {
  char dir[PATH_MAX], path[PATH_MAX + 256];
  if (snprintf(dir, sizeof dir, "%s/samples", run_dir) >= (int)sizeof dir)
    return err_set(TSR_EINVAL, "run directory path too long: %s", run_dir);
  DIR *d = opendir(dir);
  if (!d) return TSR_OK;  // no samples yet
  struct dirent *e;
  int removed = 0;
  tsr_status st = TSR_OK;
  while (!st && (e = readdir(d))) {
    if (!fs_is_atomic_tmp(e->d_name)) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (unlink(path) != 0 && errno != ENOENT)
      st = err_set(TSR_EIO, "remove the unfinished sample %s: %s", path, strerror(errno));
    else
      removed++;
  }
  closedir(d);
  return !st && removed ? fs_fsync_dir(dir) : st;
}

// Rank 0's part: the directory, its lock, the crash leftovers.
static tsr_status open_here(lockfile **lock, const char *run_dir) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/%s", run_dir, RUN_LOCK_NAME) >= (int)sizeof path)
    return err_set(TSR_EINVAL, "run directory path too long: %s", run_dir);
  tsr_status st = fs_mkdir_p(run_dir);
  if (!st) st = lockfile_take(lock, path, 0, LOCKFILE_EXCLUSIVE, 0);
  if (st) return err_wrap(st, "run directory %s: ", run_dir);
  if (!*lock) {
    char who[1024];
    lockfile_read_text(path, who, sizeof who);
    return err_set(TSR_EINVAL, "run directory %s is in use by another tessera train (%s); one run "
                   "writes a run directory (metrics.jsonl, checkpoints, samples) at a time: wait "
                   "for it to finish or stop it, or give another --out. Nothing was changed",
                   run_dir, who);
  }
  if (!(st = lockfile_write_self(*lock)) && !(st = ckpt_clean_tmp(run_dir)))
    st = clean_sample_tmp(run_dir);
  if (st) lockfile_release(lock);
  return st;
}

tsr_status train_run_dir_open(lockfile **lock, const char *run_dir) {
  *lock = NULL;
  char msg[2048] = "";
  int64_t failed = 0;
  if (comm_rank() == 0) {
    tsr_status st = open_here(lock, run_dir);
    if (st) {
      if (comm_size() == 1) return st;
      failed = st;
      snprintf(msg, sizeof msg, "%s", err_msg());
    }
  }
  if (comm_size() == 1) return TSR_OK;
  // The other ranks stop with rank 0's reason rather than wait in a later collective.
  tsr_status cst = comm_bcast(&failed, sizeof failed, 0);
  if (!cst) cst = comm_bcast(msg, sizeof msg, 0);
  if (cst) {
    lockfile_release(lock);
    return cst;
  }
  return failed ? err_set((tsr_status)failed, "%s", msg) : TSR_OK;
}
