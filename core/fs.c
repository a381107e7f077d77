#define _GNU_SOURCE  // renameat2
#include "core/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <dirent.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
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

static const char *disk_full_hint(int e) {
  return e == ENOSPC || e == EDQUOT ? " (disk full: free space or write elsewhere)" : "";
}

// ---- inside a store or run directory: no link followed ------------------------------------

static tsr_status link_refused(const char *path) {
  return err_set(TSR_EINVAL, "%s is a symbolic link: tessera does not write through a link "
                 "inside a store or run directory (it could point at any file): remove it, or "
                 "use a copy of the folder without links", path);
}

tsr_status fs_open_nofollow(const char *path, int oflags, int *fd) {
  *fd = -1;
  int f = open(path, oflags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
  struct stat sb;
  if (f < 0) {
    int e = errno;
    if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) return link_refused(path);
    if (e == ENXIO && lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode))  // a FIFO, no reader
      return not_regular(path, sb.st_mode, "writes and replaces");
    tsr_status st = err_set(TSR_EIO, "open %s: %s%s", path, strerror(e), disk_full_hint(e));
    errno = e;  // for a caller that tries another way (lockfile's read-only fallback)
    return st;
  }
  int fl = fcntl(f, F_GETFL);
  if (fstat(f, &sb) != 0 || !S_ISREG(sb.st_mode) || fl < 0 ||
      fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int e = errno, reg = S_ISREG(sb.st_mode);
    close(f);
    if (!reg) return not_regular(path, sb.st_mode, (oflags & O_ACCMODE) == O_RDONLY ? "reads"
                                 : "writes and replaces");
    return err_set(TSR_EIO, "open %s: %s", path, strerror(e));
  }
  *fd = f;
  return TSR_OK;
}

tsr_status fs_fopen_nofollow(const char *path, const char *mode, FILE **out) {
  *out = NULL;
  int fd = -1;
  int fl = O_WRONLY | O_CREAT | (mode[0] == 'a' ? O_APPEND : O_TRUNC);
  tsr_status st = fs_open_nofollow(path, fl, &fd);
  if (st) return st;
  FILE *f = fdopen(fd, mode[0] == 'a' ? "a" : "w");
  if (!f) {
    close(fd);
    return err_set(TSR_EIO, "open %s: %s", path, strerror(errno));
  }
  *out = f;
  return TSR_OK;
}

tsr_status fs_dir_nofollow(const char *path, int create) {
  struct stat sb;
  if (lstat(path, &sb) != 0) {
    if (errno != ENOENT) return err_set(TSR_EIO, "%s: %s", path, strerror(errno));
    if (!create) return TSR_OK;
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
      return err_set(TSR_EIO, "cannot create directory %s: %s", path, strerror(errno));
    if (lstat(path, &sb) != 0) return err_set(TSR_EIO, "%s: %s", path, strerror(errno));
  }
  if (S_ISLNK(sb.st_mode)) return link_refused(path);
  if (!S_ISDIR(sb.st_mode))
    return err_set(TSR_EINVAL, "%s is %s where tessera keeps a folder: remove or rename it",
                   path, file_kind(sb.st_mode));
  return TSR_OK;
}

tsr_status fs_refuse_links(const char *dir, const char *const *names, int n) {
  char p[PATH_MAX];
  for (int i = 0; i < n; i++) {
    struct stat sb;
    tsr_status st = fs_join(p, sizeof p, dir, names[i]);
    if (st) return st;
    if (lstat(p, &sb) == 0 && S_ISLNK(sb.st_mode)) return link_refused(p);
  }
  return TSR_OK;
}

// ---- atomic file writes ------------------------------------------------------------------

// A name no other writer picks: PATH.tmp.PID.RAND (RAND from the kernel's generator, else
// the clock), made with O_EXCL so that even a clash is an error rather than a shared file.
static void tmp_name(fs_atomic *a, unsigned attempt) {
  unsigned long long rnd = 0;
  if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    rnd = (unsigned long long)ts.tv_nsec * 2654435761u ^ (unsigned long long)ts.tv_sec;
  }
  snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld.%08llx", a->path, (long)getpid(),
           (rnd ^ attempt) & 0xffffffffull);
}

// Creates a->tmp, a new regular file of this writer's alone (O_EXCL: never a link, FIFO or
// another writer's file); *fd open on it for writing.
static tsr_status create_tmp(fs_atomic *a, int *fd) {
  for (unsigned attempt = 0;; attempt++) {
    tmp_name(a, attempt);
    *fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0644);
    if (*fd >= 0) return TSR_OK;
    if (errno != EEXIST || attempt >= 8)
      return err_set(TSR_EIO, "create %s: %s%s", a->tmp, strerror(errno), disk_full_hint(errno));
  }
}

// The checks of PATH, then its temporary file made: *fd open on it.
static tsr_status begin(fs_atomic *a, const char *path, int *fd) {
  memset(a, 0, sizeof *a);
  if (!path || !*path) return err_set(TSR_EINVAL, "no file name to write");
  if ((size_t)snprintf(a->path, sizeof a->path, "%s", path) >= sizeof a->path - 32)
    return err_set(TSR_EINVAL, "path too long: %s", path);
  tsr_status st = fs_check_output(path);
  if (!st) st = create_tmp(a, fd);
  if (!st) a->live = 1;
  return st;
}

tsr_status fs_atomic_name(fs_atomic *a, const char *path) {
  int fd = -1;
  tsr_status st = begin(a, path, &fd);
  if (!st) close(fd);  // the library opens it again by name (O_TRUNC): the name is ours alone
  return st;
}

tsr_status fs_atomic_open(fs_atomic *a, const char *path) {
  int fd = -1;
  tsr_status st = begin(a, path, &fd);
  if (st) return st;
  if (!(a->f = fdopen(fd, "wb"))) {
    int e = errno;
    close(fd);
    fs_atomic_abort(a);
    return err_set(TSR_EIO, "create %s: %s", a->tmp, strerror(e));
  }
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
  int fd = open(a->tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
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

int fs_is_atomic_tmp(const char *name) {
  const char *t = strstr(name, ".tmp");
  while (t && t[4] != 0 && t[4] != '.') t = strstr(t + 4, ".tmp");
  return t != NULL;
}

// ---- atomic folder writes ----------------------------------------------------------------

tsr_status fs_atomic_dir_open(fs_atomic_dir *d, const char *path) {
  memset(d, 0, sizeof *d);
  if (!path || !*path) return err_set(TSR_EINVAL, "no folder name to write");
  struct stat sb;
  char real[PATH_MAX];
  if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) {  // a link to a folder: the folder
    if (!realpath(path, real)) return err_set(TSR_EIO, "%s: %s", path, strerror(errno));
    path = real;
  }
  if (stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode))
    return err_set(TSR_EINVAL, "%s is %s, not a folder: give a folder to write the model into",
                   path, file_kind(sb.st_mode));
  if ((size_t)snprintf(d->path, sizeof d->path, "%s", path) >= sizeof d->path - 32)
    return err_set(TSR_EINVAL, "path too long: %s", path);
  size_t n = strlen(d->path);
  while (n > 1 && d->path[n - 1] == '/') d->path[--n] = 0;  // "out/" names the folder "out"
  char parent[PATH_MAX];
  snprintf(parent, sizeof parent, "%s", d->path);
  char *slash = strrchr(parent, '/');
  if (slash && slash != parent) {  // the folder's missing parents, as a plain mkdir -p would
    *slash = 0;
    tsr_status st = fs_mkdir_p(parent);
    if (st) return st;
  }
  fs_atomic f = {0};
  snprintf(f.path, sizeof f.path, "%s", d->path);
  for (unsigned attempt = 0;; attempt++) {  // a fresh folder of this writer's alone
    tmp_name(&f, attempt);
    if (mkdir(f.tmp, 0755) == 0) break;
    if (errno != EEXIST || attempt >= 8)
      return err_set(TSR_EIO, "create folder %s: %s%s", f.tmp, strerror(errno),
                     disk_full_hint(errno));
  }
  snprintf(d->tmp, sizeof d->tmp, "%s", f.tmp);
  d->live = 1;
  return TSR_OK;
}

// Removes the entries of folder `name` that `replaced` names and moves the others into
// folder `into` (into NULL: removes them all); then the folder `name` itself.
static tsr_status empty_old(const char *name, int (*replaced)(const char *), const char *into) {
  DIR *dir = opendir(name);
  if (!dir) return err_set(TSR_EIO, "open %s: %s", name, strerror(errno));
  int fd = dirfd(dir), to = into ? open(into, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  tsr_status st = into && to < 0 ? err_set(TSR_EIO, "open %s: %s", into, strerror(errno)) : TSR_OK;
  for (struct dirent *e; !st && (e = readdir(dir));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (to >= 0 && !replaced(e->d_name) &&
        renameat2(fd, e->d_name, to, e->d_name, RENAME_NOREPLACE) == 0)
      continue;  // not part of the output: kept in the new folder
    if (unlinkat(fd, e->d_name, 0) != 0 && errno != ENOENT)
      st = err_set(TSR_EIO, "remove %s/%s: %s", name, e->d_name, strerror(errno));
  }
  closedir(dir);
  if (to >= 0) close(to);
  if (!st && rmdir(name) != 0) st = err_set(TSR_EIO, "remove %s: %s", name, strerror(errno));
  return st;
}

// 1 if renameat2 failed for want of support of its flag (a file system without it).
static int no_flag(int e) { return e == EINVAL || e == ENOSYS || e == EOPNOTSUPP; }

// rename of folder `from` to `to` only if `to` is absent (or, where the file system has no
// RENAME_NOREPLACE, an empty folder): -1 with errno EEXIST when `to` holds something.
static int rename_new(const char *from, const char *to) {
  if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
  if (!no_flag(errno)) return -1;
  if (rename(from, to) == 0) return 0;
  if (errno == ENOTEMPTY) errno = EEXIST;
  return -1;
}

// Swaps folder d->tmp in for d->path, whose old contents end under `old` (a name to empty).
static tsr_status swap_in(fs_atomic_dir *d, char *old, size_t n) {
  snprintf(old, n, "%s", d->tmp);
  // One step, which a reader or a crash sees before or after, never between.
  if (renameat2(AT_FDCWD, d->tmp, AT_FDCWD, d->path, RENAME_EXCHANGE) == 0) return TSR_OK;
  if (!no_flag(errno))
    return err_set(TSR_EIO, "swap %s in for %s: %s", d->tmp, d->path, strerror(errno));
  // No exchange on this file system: the old folder is moved aside first, so a reader may
  // find no folder for a moment, but never a mix of the two.
  fs_atomic f = {0};
  if ((size_t)snprintf(f.path, sizeof f.path, "%s.old", d->path) >= sizeof f.path)
    return err_set(TSR_EINVAL, "path too long: %s", d->path);
  tmp_name(&f, 0);
  snprintf(old, n, "%s", f.tmp);
  if (rename(d->path, old) != 0 && errno != ENOENT)
    return err_set(TSR_EIO, "move %s aside to %s: %s", d->path, old, strerror(errno));
  if (rename_new(d->tmp, d->path) != 0) {  // another writer came first: the old one back
    int e = errno;
    (void)rename_new(old, d->path);  // fails if the other's folder is in place: old stays aside
    return err_set(TSR_EIO, "rename %s to %s: %s (another writer of it at once?)", d->tmp,
                   d->path, strerror(e));
  }
  return TSR_OK;
}

tsr_status fs_atomic_dir_commit(fs_atomic_dir *d, int (*replaced)(const char *name)) {
  if (!d->live) return err_set(TSR_EINVAL, "fs_atomic_dir_commit: nothing open for %s", d->path);
  tsr_status st = fs_fsync_dir(d->tmp);
  if (st) return st;
  if (rename_new(d->tmp, d->path) == 0) {
    d->live = 0;
    return fs_fsync_parent(d->path);
  }
  if (errno != EEXIST)
    return err_set(TSR_EIO, "rename %s to %s: %s", d->tmp, d->path, strerror(errno));
  // The folder exists: the new one swapped in whole, then the old one emptied.
  char old[sizeof d->tmp];
  if ((st = swap_in(d, old, sizeof old))) return st;
  d->live = 0;
  if ((st = fs_fsync_parent(d->path))) return st;
  struct stat sb;
  if (lstat(old, &sb) != 0) return fs_fsync_dir(d->path);  // nothing was there to empty
  st = empty_old(old, replaced, d->path);
  return st ? st : fs_fsync_dir(d->path);
}

void fs_atomic_dir_abort(fs_atomic_dir *d) {
  if (d->live) {  // keeps the caller's message: the cleanup's own error would hide it
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", err_msg());
    if (empty_old(d->tmp, NULL, NULL)) err_set(TSR_EIO, "%s", msg);
  }
  d->live = 0;
}
