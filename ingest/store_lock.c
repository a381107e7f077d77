// ingest/store_lock.c — one writer per store: an open-file-description lock on STORE/lock
// (store.h). OFD locks (fcntl F_OFD_SETLK) rather than flock: they are dropped by the
// kernel when the process dies (kill -9 included), they work on NFS (as POSIX locks, which
// flock is emulated with there), and F_OFD_GETLK lets a reader ask whether a writer is
// active without taking a lock itself (a shared flock taken by `index verify` would make
// a writer starting at that moment be refused).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "ingest/store.h"

struct store_lock {
  int fd;
  char *path;
};

// The holder's description as the lock file holds it ("" if none yet), one line.
static void read_holder(int fd, char *out, size_t n) {
  out[0] = 0;
  ssize_t k = pread(fd, out, n - 1, 0);
  out[k > 0 ? k : 0] = 0;
  char *nl = strchr(out, '\n');
  if (nl) *nl = 0;
  if (!out[0]) snprintf(out, n, "a process that has not written its details yet");
}

// "pid P on host H, command 'C', since YYYY-MM-DD HH:MM:SS UTC (unix T)".
static void describe_self(char *out, size_t n) {
  char host[256] = "?", cmd[512] = "";
  gethostname(host, sizeof host);
  host[sizeof host - 1] = 0;
  FILE *f = fopen("/proc/self/cmdline", "rb");
  if (f) {
    size_t k = fread(cmd, 1, sizeof cmd - 1, f);
    fclose(f);
    for (size_t i = 0; i + 1 < k; i++)
      if (cmd[i] == 0 || cmd[i] == '\n') cmd[i] = ' ';
    cmd[k] = 0;
  }
  time_t now = time(NULL);
  struct tm tm;
  char when[64] = "?";
  if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  snprintf(out, n, "pid %d on host %s, command '%s', since %s (unix %lld)", (int)getpid(), host,
           cmd[0] ? cmd : "?", when, (long long)now);
}

tsr_status store_lock_acquire(store_lock **out, const char *dir, int create) {
  *out = NULL;
  char path[PATH_MAX], idx[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/%s", dir, STORE_LOCK_NAME) >= (int)sizeof path ||
      snprintf(idx, sizeof idx, "%s/%s", dir, STORE_INDEX_NAME) >= (int)sizeof idx)
    return err_set(TSR_EINVAL, "path too long: %s", dir);
  struct stat sb;
  if (stat(dir, &sb) != 0) {
    if (!create) return err_set(TSR_EIO, "store %s does not exist: %s", dir, strerror(errno));
    tsr_status r = fs_mkdir_p(dir);
    if (r) return err_wrap(r, "store %s: ", dir);
  } else if (!S_ISDIR(sb.st_mode)) {
    return err_set(TSR_EINVAL, "store %s is not a directory (a store is a directory made by "
                   "`tessera ingest`)", dir);
  } else if (stat(idx, &sb) != 0 && store_dir_has_foreign_entries(dir)) {
    // Do not drop a lock file into someone else's directory.
    return err_set(TSR_EINVAL, "directory %s exists and is not a tessera store (no %s, other "
                   "files present); give a new or empty directory", dir, STORE_INDEX_NAME);
  }
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return err_set(TSR_EIO, "store %s: cannot open its lock file %s: %s (a writer needs write "
                   "access to the store)", dir, path, strerror(errno));
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
  if (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    int e = errno;
    char who[1024];
    read_holder(fd, who, sizeof who);
    close(fd);
    if (e == EAGAIN || e == EACCES)
      return err_set(TSR_EINVAL, "store %s is being written by another process (%s); a store has "
                     "one writer at a time: wait for it to finish or stop it, then run again. "
                     "Nothing was changed", dir, who);
    return err_set(TSR_EIO, "store %s: cannot lock %s: %s", dir, path, strerror(e));
  }
  char me[1024];
  describe_self(me, sizeof me);
  size_t len = strlen(me);
  me[len++] = '\n';
  if (ftruncate(fd, 0) != 0 || pwrite(fd, me, len, 0) != (ssize_t)len) {
    int e = errno;
    close(fd);
    return err_set(TSR_EIO, "store %s: cannot write the lock holder into %s: %s", dir, path,
                   strerror(e));
  }
  store_lock *l = calloc(1, sizeof *l);
  if (!l || !(l->path = strdup(path))) {
    free(l);
    close(fd);
    return err_set(TSR_ENOMEM, "out of memory locking store %s", dir);
  }
  l->fd = fd;
  *out = l;
  return TSR_OK;
}

void store_lock_release(store_lock **pl) {
  store_lock *l = *pl;
  if (!l) return;
  // The description is left for the next holder to overwrite; an unlocked file says
  // nothing (store_lock_holder asks the kernel, not the file).
  close(l->fd);  // drops the OFD lock
  free(l->path);
  free(l);
  *pl = NULL;
}

int store_lock_holder(const char *dir, char *who, size_t n) {
  if (n) who[0] = 0;
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/%s", dir, STORE_LOCK_NAME) >= (int)sizeof path) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
  int held = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
  if (held && n) read_holder(fd, who, n);
  close(fd);
  return held;
}
