#include "core/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
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

tsr_status fs_join(char *out, size_t n, const char *a, const char *b) {
  int k = snprintf(out, n, "%s/%s", a, b);
  if (k < 0 || (size_t)k >= n) return err_set(TSR_EINVAL, "path too long: %s/%s", a, b);
  return TSR_OK;
}

int fs_has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

int fs_has_suffix_nocase(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcasecmp(s + n - m, suffix);
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

// ---- regular files only ------------------------------------------------------------------

// What a file of mode `m` is, for messages.
static const char *file_kind(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

// use: "reads" or "writes and replaces"
static tsr_status not_regular(const char *path, mode_t m, const char *use) {
  return err_set(TSR_EINVAL, "%s is %s, not a regular file: tessera %s only regular files "
                 "(give %s)", path, file_kind(m), use,
                 use[0] == 'r' ? "the path of the file itself" : "a new file name");
}

// 1 if open descriptor f is an anonymous pipe (its /proc/self/fd link reads "pipe:[N]"),
// whose writer made it and holds it (a named FIFO is a file system node instead).
static int anonymous_pipe(int f) {
  char link[64], target[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", f);
  ssize_t n = readlink(link, target, sizeof target - 1);
  return n > 5 && !strncmp(target, "pipe:", 5);
}

tsr_status fs_open_input(const char *path, int flags, int *fd) {
  *fd = -1;
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
  int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (f < 0) return err_set(TSR_EIO, "%s: cannot open (%s)", path, strerror(errno));
  struct stat sb;
  if (fstat(f, &sb) != 0) {
    int e = errno;
    close(f);
    return err_set(TSR_EIO, "%s: cannot stat (%s)", path, strerror(e));
  }
  int pipe_ok = (flags & FS_PIPE_OK) && S_ISFIFO(sb.st_mode) && anonymous_pipe(f);
  if (!S_ISREG(sb.st_mode) && !pipe_ok) {
    close(f);
    return not_regular(path, sb.st_mode, "reads");
  }
  int fl = fcntl(f, F_GETFL);  // reads block as usual from here on
  if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(f);
    return err_set(TSR_EIO, "%s: cannot open (%s)", path, strerror(e));
  }
  *fd = f;
  return TSR_OK;
}

tsr_status fs_open_regular(const char *path, int *fd) { return fs_open_input(path, 0, fd); }

tsr_status fs_check_regular(const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0) return err_set(TSR_EIO, "%s: cannot open (%s)", path, strerror(errno));
  return S_ISREG(sb.st_mode) ? TSR_OK : not_regular(path, sb.st_mode, "reads");
}

tsr_status fs_check_output(const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    if (errno == ENOENT) return TSR_OK;  // a new file (or a dangling link the rename replaces)
    return err_set(TSR_EIO, "cannot write %s: %s", path, strerror(errno));
  }
  return S_ISREG(sb.st_mode) ? TSR_OK : not_regular(path, sb.st_mode, "writes and replaces");
}

// PATH.tmp is tessera's own name: a stale one is a regular file the next writer overwrites;
// anything else there (a FIFO would block the writer, a link would send the bytes elsewhere)
// is refused, not followed.
static tsr_status check_tmp(const char *tmp) {
  struct stat sb;
  if (lstat(tmp, &sb) != 0)
    return errno == ENOENT ? TSR_OK : err_set(TSR_EIO, "cannot write %s: %s", tmp, strerror(errno));
  if (S_ISREG(sb.st_mode)) return TSR_OK;
  return err_set(TSR_EINVAL, "%s is %s where tessera writes its temporary file: remove it, or "
                 "write elsewhere", tmp, file_kind(sb.st_mode));
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
  tsr_status st = fs_check_output(path);
  if (!st) st = check_tmp(a->tmp);
  if (st) return st;
  a->live = 1;
  return TSR_OK;
}

tsr_status fs_atomic_open(fs_atomic *a, const char *path) {
  tsr_status st = fs_atomic_name(a, path);
  if (st) return st;
  // No link followed, no wait on a FIFO put there since check_tmp; the result is checked on
  // the opened file.
  int fd = open(a->tmp,
                O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0644);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    a->live = 0;
    return err_set(TSR_EIO, "create %s: %s%s", a->tmp, strerror(e), disk_full_hint(e));
  }
  int fl = fcntl(fd, F_GETFL);
  FILE *f = S_ISREG(sb.st_mode) && fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0
                ? fdopen(fd, "wb") : NULL;
  if (!f) {
    int e = errno;
    close(fd);
    a->live = 0;
    if (!S_ISREG(sb.st_mode)) return not_regular(a->tmp, sb.st_mode, "writes and replaces");
    return err_set(TSR_EIO, "create %s: %s", a->tmp, strerror(e));
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
