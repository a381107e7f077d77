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
