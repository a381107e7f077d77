#include "ingest/sources.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"

int sources_is_video_name(const char *name) {
  static const char *ext[] = {"mp4", "m4v", "mov", "mkv", "webm", "avi", "ogv", "ogg", "flv",
                              "wmv", "mpg", "mpeg", "ts", "mts", "m2ts", "3gp", "y4m", "vob",
                              "mxf", "nut", "hevc", "h264", "264", "ivf"};
  const char *dot = strrchr(name, '.');
  if (!dot) return 0;
  for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
    if (!strcasecmp(dot + 1, ext[i])) return 1;
  return 0;
}

static tsr_status list_add(source_list *l, const char *path, const char *error) {
  if (l->n == l->cap) {
    int64_t cap = l->cap ? 2 * l->cap : 64;
    source_file *v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) return err_set(TSR_ENOMEM, "out of memory listing sources");
    l->v = v;
    l->cap = cap;
  }
  source_file *f = &l->v[l->n];
  memset(f, 0, sizeof *f);
  f->path = strdup(path);
  f->error = error ? strdup(error) : NULL;
  if (!f->path || (error && !f->error)) return err_set(TSR_ENOMEM, "out of memory listing sources");
  l->n++;
  return TSR_OK;
}

// Absolute form of `p` (relative to `base` when given), canonical if it exists.
static void absolute_path(const char *p, const char *base, char *out, size_t n) {
  char joined[PATH_MAX * 2];
  if (p[0] == '/') snprintf(joined, sizeof joined, "%s", p);
  else if (base) snprintf(joined, sizeof joined, "%s/%s", base, p);
  else {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, ".");
    snprintf(joined, sizeof joined, "%s/%s", cwd, p);
  }
  char real[PATH_MAX];
  const char *src = realpath(joined, real) ? real : joined;
  size_t len = strnlen(src, n - 1);  // over-long paths are cut; they then fail to open
  memcpy(out, src, len);
  out[len] = '\0';
}

typedef int (*name_filter)(const char *name);

static tsr_status add_path(source_list *l, const char *path, int from_dir, name_filter ok);

static tsr_status walk_dir(source_list *l, const char *dir, name_filter ok) {
  DIR *d = opendir(dir);
  if (!d) {
    char msg[512];
    snprintf(msg, sizeof msg, "cannot read directory: %s", strerror(errno));
    return list_add(l, dir, msg);
  }
  tsr_status st = TSR_OK;
  struct dirent *e;
  while (!st && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;  // ., .., hidden files
    char child[PATH_MAX];
    if (snprintf(child, sizeof child, "%s/%s", dir, e->d_name) >= (int)sizeof child) continue;
    st = add_path(l, child, 1, ok);
  }
  closedir(d);
  return st;
}

static tsr_status add_path(source_list *l, const char *path, int from_dir, name_filter ok) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    if (from_dir && !ok(path)) return TSR_OK;
    char msg[512];
    snprintf(msg, sizeof msg, "cannot access: %s", strerror(errno));
    return list_add(l, path, msg);
  }
  if (S_ISDIR(sb.st_mode)) return walk_dir(l, path, ok);
  if (from_dir && !ok(path)) return TSR_OK;
  if (!S_ISREG(sb.st_mode)) return list_add(l, path, "not a regular file");
  if (access(path, R_OK) != 0) {
    char msg[512];
    snprintf(msg, sizeof msg, "cannot read: %s", strerror(errno));
    return list_add(l, path, msg);
  }
  tsr_status st = list_add(l, path, NULL);
  if (!st) {
    l->v[l->n - 1].size = sb.st_size;
    l->v[l->n - 1].mtime = sb.st_mtime;
  }
  return st;
}

static tsr_status add_list_file(source_list *l, const char *listpath, name_filter ok) {
  int fd = -1;  // a regular file only (core/fs.h): a FIFO would hang the ingest
  tsr_status opened = fs_open_regular(listpath, &fd);
  if (opened) return err_wrap(opened, "source list @%s: ", listpath);
  FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return err_set(TSR_EIO, "cannot read source list %s: %s", listpath, strerror(errno));
  }
  char base[PATH_MAX];
  absolute_path(listpath, NULL, base, sizeof base);
  char *slash = strrchr(base, '/');
  if (slash) *slash = '\0';
  char line[PATH_MAX + 2];
  tsr_status st = TSR_OK;
  while (!st && fgets(line, sizeof line, f)) {
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ')) line[--n] = 0;
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (!*p || *p == '#') continue;
    char abs[PATH_MAX];
    absolute_path(p, base, abs, sizeof abs);
    st = add_path(l, abs, 0, ok);
  }
  fclose(f);
  return st;
}

static int by_path(const void *a, const void *b) {
  return strcmp(((const source_file *)a)->path, ((const source_file *)b)->path);
}

tsr_status sources_expand(char **args, int nargs, int (*accept)(const char *name),
                          source_list *out) {
  memset(out, 0, sizeof *out);
  name_filter ok = accept ? accept : sources_is_video_name;
  tsr_status st = TSR_OK;
  for (int i = 0; i < nargs && !st; i++) {
    if (args[i][0] == '@') {
      st = add_list_file(out, args[i] + 1, ok);
    } else {
      char abs[PATH_MAX];
      absolute_path(args[i], NULL, abs, sizeof abs);
      st = add_path(out, abs, 0, ok);
    }
  }
  if (st) {
    sources_free(out);
    return st;
  }
  qsort(out->v, (size_t)out->n, sizeof *out->v, by_path);
  int64_t w = 0;  // drop duplicates (same canonical path given twice)
  for (int64_t r = 0; r < out->n; r++) {
    if (w && !strcmp(out->v[w - 1].path, out->v[r].path)) {
      free(out->v[r].path);
      free(out->v[r].error);
      continue;
    }
    out->v[w++] = out->v[r];
  }
  out->n = w;
  return TSR_OK;
}

void sources_free(source_list *l) {
  for (int64_t i = 0; i < l->n; i++) {
    free(l->v[i].path);
    free(l->v[i].error);
  }
  free(l->v);
  memset(l, 0, sizeof *l);
}
