#include "core/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

tsr_status fs_fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return err_set(TSR_EIO, "open directory %s to sync: %s", dir, strerror(errno));
  int rc = fsync(fd), e = errno;
  close(fd);
  if (rc != 0) return err_set(TSR_EIO, "fsync directory %s: %s", dir, strerror(e));
  return TSR_OK;
}

tsr_status fs_fsync_parent(const char *path) {
  char dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  if (!slash) return fs_fsync_dir(".");
  if (slash == path) return fs_fsync_dir("/");
  size_t n = (size_t)(slash - path);
  if (n >= sizeof dir) return err_set(TSR_EINVAL, "path too long: %s", path);
  memcpy(dir, path, n);
  dir[n] = 0;
  return fs_fsync_dir(dir);
}

tsr_status fs_mkdir_p(const char *dir) {
  char buf[PATH_MAX];
  if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
    return err_set(TSR_EINVAL, "path too long: %s", dir);
  for (char *p = buf + 1;; p++) {
    if (*p != '/' && *p != 0) continue;
    char c = *p;
    *p = 0;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
      return err_set(TSR_EIO, "cannot create directory %s: %s (choose a writable location)", buf,
                     strerror(errno));
    struct stat sb;
    if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode))
      return err_set(TSR_EIO, "cannot create directory %s: a file of that name exists", buf);
    *p = c;
    if (c == 0) break;
  }
  return TSR_OK;
}

// ---- atomic file writes ------------------------------------------------------------------

static const char *disk_full_hint(int e) {
  return e == ENOSPC || e == EDQUOT ? " (disk full: free space or write elsewhere)" : "";
}

tsr_status fs_atomic_name(fs_atomic *a, const char *path) {
  memset(a, 0, sizeof *a);
  if (!path || !*path) return err_set(TSR_EINVAL, "no file name to write");
  if ((size_t)snprintf(a->path, sizeof a->path, "%s", path) >= sizeof a->path ||
      (size_t)snprintf(a->tmp, sizeof a->tmp, "%s.tmp", path) >= sizeof a->tmp)
    return err_set(TSR_EINVAL, "path too long: %s", path);
  a->live = 1;
  return TSR_OK;
}

tsr_status fs_atomic_open(fs_atomic *a, const char *path) {
  tsr_status st = fs_atomic_name(a, path);
  if (st) return st;
  FILE *f = fopen(a->tmp, "wb");
  if (!f) {
    int e = errno;
    a->live = 0;
    return err_set(TSR_EIO, "create %s: %s%s", a->tmp, strerror(e), disk_full_hint(e));
  }
  a->f = f;
  return TSR_OK;
}

tsr_status fs_atomic_commit(fs_atomic *a) {
  if (!a->live) return err_set(TSR_EINVAL, "fs_atomic_commit: nothing open for %s", a->path);
  if (a->f) {
    FILE *f = a->f;
    a->f = NULL;
    int bad = fflush(f) != 0, e = errno;
    if (fclose(f) != 0 && !bad) bad = 1, e = errno;
    if (bad) return err_set(TSR_EIO, "write %s: %s%s", a->tmp, strerror(e), disk_full_hint(e));
  }
  int fd = open(a->tmp, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err_set(TSR_EIO, "open %s to sync: %s", a->tmp, strerror(errno));
  int rc = fsync(fd), e = errno;
  close(fd);
  if (rc != 0) return err_set(TSR_EIO, "fsync %s: %s%s", a->tmp, strerror(e), disk_full_hint(e));
  if (rename(a->tmp, a->path) != 0)
    return err_set(TSR_EIO, "rename %s to %s: %s", a->tmp, a->path, strerror(errno));
  a->live = 0;
  return fs_fsync_parent(a->path);
}

void fs_atomic_abort(fs_atomic *a) {
  if (a->f) fclose(a->f);
  a->f = NULL;
  if (a->live) unlink(a->tmp);
  a->live = 0;
}
