// core/lockfile.c — OFD byte locks with the holder's description (core/lockfile.h).
#define _GNU_SOURCE
#include "core/lockfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"

struct lockfile {
  int fd;
  int writable;  // fd was opened read-write (lockfile_write_self needs it)
  char *path;
};

// Opens path for a lock of `mode`: read-write (created if missing) when possible; a
// shared lock falls back to read-only, so a reader of a store it may not write still
// takes its lock (F_RDLCK needs only read access). Never through a link (core/fs.h
// fs_open_nofollow): a lock planted as a link to a file outside had that file truncated
// and overwritten with the holder's line.
static tsr_status open_for(const char *path, lockfile_mode mode, int *fd, int *writable) {
  tsr_status st = fs_open_nofollow(path, O_RDWR | O_CREAT, fd);
  *writable = !st;
  if (st && mode == LOCKFILE_SHARED && (errno == EACCES || errno == EROFS || errno == EPERM))
    st = fs_open_nofollow(path, O_RDONLY, fd);
  return st;
}

tsr_status lockfile_take(lockfile **out, const char *path, int byte, lockfile_mode mode,
                         int wait) {
  *out = NULL;
  int writable = 0, fd = -1;
  tsr_status st = open_for(path, mode, &fd, &writable);
  if (st) return err_wrap(st, "the lock file: ");
  struct flock fl = {.l_type = mode == LOCKFILE_EXCLUSIVE ? F_WRLCK : F_RDLCK,
                     .l_whence = SEEK_SET, .l_start = byte, .l_len = 1};
  int rc;
  do {
    rc = fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl);
  } while (rc != 0 && errno == EINTR);  // a signal (SIGCONT, a profiler) interrupts the wait
  if (rc != 0) {
    int e = errno;
    close(fd);
    if (!wait && (e == EAGAIN || e == EACCES)) return TSR_OK;  // held by another: *out NULL
    return err_set(TSR_EIO, "cannot lock %s: %s", path, strerror(e));
  }
  lockfile *l = calloc(1, sizeof *l);
  if (!l || !(l->path = strdup(path))) {
    free(l);
    close(fd);
    return err_set(TSR_ENOMEM, "out of memory locking %s", path);
  }
  l->fd = fd;
  l->writable = writable;
  *out = l;
  return TSR_OK;
}

void lockfile_release(lockfile **pl) {
  lockfile *l = *pl;
  if (!l) return;
  close(l->fd);  // drops every OFD lock of this descriptor
  free(l->path);
  free(l);
  *pl = NULL;
}

const char *lockfile_path(const lockfile *l) { return l->path; }

void lockfile_describe_self(char *out, size_t n) {
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

tsr_status lockfile_write_self(lockfile *l) {
  char me[1024];
  lockfile_describe_self(me, sizeof me - 1);
  size_t len = strlen(me);
  me[len++] = '\n';
  if (!l->writable)
    return err_set(TSR_EIO, "cannot write the lock holder into %s: the file is read-only here",
                   l->path);
  if (ftruncate(l->fd, 0) != 0 || pwrite(l->fd, me, len, 0) != (ssize_t)len)
    return err_set(TSR_EIO, "cannot write the lock holder into %s: %s", l->path, strerror(errno));
  return TSR_OK;
}

int lockfile_conflicts(const char *path, int byte, lockfile_mode mode) {
  // F_OFD_GETLK checks no access mode (only setting a lock does): a read-only descriptor
  // asks about either mode, also in a store this process may not write. A regular file
  // only (core/fs.h): a FIFO put there would block the open.
  int fd = -1;
  if (fs_open_regular(path, &fd)) return 0;
  struct flock fl = {.l_type = mode == LOCKFILE_EXCLUSIVE ? F_WRLCK : F_RDLCK,
                     .l_whence = SEEK_SET, .l_start = byte, .l_len = 1};
  int held = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
  close(fd);
  return held;
}

void lockfile_read_text(const char *path, char *out, size_t n) {
  if (!n) return;
  out[0] = 0;
  int fd = -1;
  if (fs_open_regular(path, &fd)) return;  // a FIFO there would block the read
  ssize_t k = pread(fd, out, n - 1, 0);
  close(fd);
  out[k > 0 ? k : 0] = 0;
  char *nl = strchr(out, '\n');
  if (nl) *nl = 0;
  if (!out[0]) snprintf(out, n, "a process that has not written its details yet");
}
