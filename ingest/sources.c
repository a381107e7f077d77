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
#include "core/term.h"

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

// The directories a walk has entered, by device and inode: an open-addressing hash set, so a
// link back to a directory above (a loop: once 41 copies of one video) or a second link to a
// directory is not walked again, in O(1) a directory however many there are.
typedef struct {
  uint64_t (*slot)[2];  // (cap) dev + 1, ino; {0, 0}: empty
  int64_t n, cap;
} dir_set;

// 1 if (dev, ino) was in the set, 0 if it is now added; -1 out of memory.
static int dir_set_add(dir_set *d, uint64_t dev, uint64_t ino) {
  if (2 * (d->n + 1) > d->cap) {  // grow at half full: probes stay short
    int64_t cap = d->cap ? 2 * d->cap : 64;
    uint64_t(*v)[2] = calloc((size_t)cap, sizeof *v);
    if (!v) return -1;
    for (int64_t i = 0; i < d->cap; i++) {
      if (!d->slot[i][0]) continue;
      uint64_t h = (d->slot[i][0] * 0x9e3779b97f4a7c15ull ^ d->slot[i][1]) & (uint64_t)(cap - 1);
      while (v[h][0]) h = (h + 1) & (uint64_t)(cap - 1);
      v[h][0] = d->slot[i][0], v[h][1] = d->slot[i][1];
    }
    free(d->slot);
    d->slot = v, d->cap = cap;
  }
  uint64_t key = dev + 1;  // 0 marks an empty slot
  uint64_t h = (key * 0x9e3779b97f4a7c15ull ^ ino) & (uint64_t)(d->cap - 1);
  for (; d->slot[h][0]; h = (h + 1) & (uint64_t)(d->cap - 1))
    if (d->slot[h][0] == key && d->slot[h][1] == ino) return 1;
  d->slot[h][0] = key, d->slot[h][1] = ino;
  d->n++;
  return 0;
}

typedef struct {
  source_list *l;
  name_filter ok;
  dir_set dirs;
} walker;

static tsr_status add_path(walker *w, const char *path, int from_dir);

static int visible(const struct dirent *e) { return e->d_name[0] != '.'; }  // no ., .., hidden
static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

// The entries of `dir` in name order (the same walk on every rank and every run).
static tsr_status walk_dir(walker *w, const char *dir) {
  struct dirent **names = NULL;
  int n = scandir(dir, &names, visible, by_name);
  if (n < 0) {
    char msg[512];
    snprintf(msg, sizeof msg, "cannot read directory: %s", strerror(errno));
    return list_add(w->l, dir, msg);
  }
  tsr_status st = TSR_OK;
  for (int i = 0; i < n; i++) {
    char child[PATH_MAX];
    if (!st && snprintf(child, sizeof child, "%s/%s", dir, names[i]->d_name) < (int)sizeof child)
      st = add_path(w, child, 1);
    free(names[i]);
  }
  free(names);
  return st;
}

static tsr_status add_failed(source_list *l, const char *path, const char *what, int e) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(e));
  return list_add(l, path, msg);
}

static tsr_status add_path(walker *w, const char *path, int from_dir) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    if (from_dir && !w->ok(path)) return TSR_OK;
    return add_failed(w->l, path, "cannot access", errno);
  }
  if (S_ISDIR(sb.st_mode)) {
    int seen = dir_set_add(&w->dirs, (uint64_t)sb.st_dev, (uint64_t)sb.st_ino);
    if (seen < 0) return err_set(TSR_ENOMEM, "out of memory listing sources");
    return seen ? TSR_OK : walk_dir(w, path);  // a loop or a second link: walked already
  }
  if (from_dir && !w->ok(path)) return TSR_OK;
  // The index and the shards' metadata hold paths as UTF-8 text: this source fails alone.
  if (!term_is_utf8(path))
    return list_add(w->l, path, "its path is not valid UTF-8: rename it (tessera records source "
                    "paths as UTF-8 text)");
  if (!S_ISREG(sb.st_mode)) return list_add(w->l, path, "not a regular file");
  if (access(path, R_OK) != 0) return add_failed(w->l, path, "cannot read", errno);
  tsr_status st = list_add(w->l, path, NULL);
  if (!st) {
    source_file *f = &w->l->v[w->l->n - 1];
    f->size = sb.st_size;
    f->mtime = sb.st_mtime;
    f->dev = (uint64_t)sb.st_dev;
    f->ino = (uint64_t)sb.st_ino;
  }
  return st;
}

static tsr_status add_list_file(walker *w, const char *listpath) {
  int fd = -1;  // a regular file or a pipe (core/fs.h): a named FIFO would hang the ingest
  tsr_status opened = fs_open_input(listpath, FS_PIPE_OK, &fd);
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
    st = add_path(w, abs, 0);
  }
  fclose(f);
  return st;
}

static int by_path(const void *a, const void *b) {
  return strcmp(((const source_file *)a)->path, ((const source_file *)b)->path);
}

// Drops entry r of l (its strings freed).
static void drop(source_list *l, int64_t r) {
  free(l->v[r].path);
  free(l->v[r].error);
  l->v[r].path = NULL;
}

// Keeps the first of each run of equal paths (the same canonical path named twice).
static void drop_same_paths(source_list *l) {
  int64_t w = 0;
  for (int64_t r = 0; r < l->n; r++) {
    if (w && !strcmp(l->v[w - 1].path, l->v[r].path)) {
      drop(l, r);
      continue;
    }
    l->v[w++] = l->v[r];
  }
  l->n = w;
}

typedef struct {
  uint64_t dev, ino;
  int64_t at;  // position in the path-sorted list
} file_id;

static int by_id(const void *a, const void *b) {
  const file_id *x = a, *y = b;
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
  return x->at < y->at ? -1 : x->at > y->at;
}

// Keeps one name of each file (device, inode): the first in path order, so every rank and
// every rerun picks the same. Entries that failed (no identity) are kept as they are.
static tsr_status drop_links(source_list *l) {
  file_id *ids = malloc((size_t)(l->n ? l->n : 1) * sizeof *ids);
  if (!ids) return err_set(TSR_ENOMEM, "out of memory listing sources");
  int64_t m = 0;
  for (int64_t i = 0; i < l->n; i++)
    if (!l->v[i].error) ids[m++] = (file_id){l->v[i].dev, l->v[i].ino, i};
  qsort(ids, (size_t)m, sizeof *ids, by_id);
  for (int64_t k = 1; k < m; k++)
    if (ids[k].dev == ids[k - 1].dev && ids[k].ino == ids[k - 1].ino) {
      drop(l, ids[k].at);
      l->links++;
    }
  free(ids);
  int64_t w = 0;
  for (int64_t r = 0; r < l->n; r++)
    if (l->v[r].path) l->v[w++] = l->v[r];
  l->n = w;
  return TSR_OK;
}

tsr_status sources_expand(char **args, int nargs, int (*accept)(const char *name),
                          source_list *out) {
  memset(out, 0, sizeof *out);
  walker w = {.l = out, .ok = accept ? accept : sources_is_video_name};
  tsr_status st = TSR_OK;
  for (int i = 0; i < nargs && !st; i++) {
    if (args[i][0] == '@') {
      st = add_list_file(&w, args[i] + 1);
    } else {
      char abs[PATH_MAX];
      absolute_path(args[i], NULL, abs, sizeof abs);
      st = add_path(&w, abs, 0);
    }
  }
  free(w.dirs.slot);
  if (!st) {
    qsort(out->v, (size_t)out->n, sizeof *out->v, by_path);
    drop_same_paths(out);
    st = drop_links(out);
  }
  if (st) sources_free(out);
  return st;
}

void sources_free(source_list *l) {
  for (int64_t i = 0; i < l->n; i++) {
    free(l->v[i].path);
    free(l->v[i].error);
  }
  free(l->v);
  memset(l, 0, sizeof *l);
}
