// tools/sidecar.c — caption text files beside videos, embedded in one pass (tools/sidecar.h).
#include "tools/sidecar.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/term.h"
#include "ingest/sources.h"
#include "tools/pyscript.h"

#define SIDECAR_MAX_BYTES (1 << 20)

// The text file of video path with extension ext: the name without its extension + ".ext".
static void text_path(const char *video, const char *ext, char *out, size_t cap) {
  const char *slash = strrchr(video, '/'), *dot = strrchr(video, '.');
  int stem = dot && (!slash || dot > slash + 1) ? (int)(dot - video) : (int)strlen(video);
  snprintf(out, cap, "%.*s.%s", stem, video, ext);
}

// The text of file p (malloc'ed, NUL-terminated, trailing white space cut) into *text; NULL
// when there is no such file.
static tsr_status read_text(const char *p, char **text) {
  *text = NULL;
  if (access(p, F_OK)) return TSR_OK;
  int fd;
  tsr_status st = fs_open_regular(p, &fd);
  if (st) return st;
  char *b = malloc(SIDECAR_MAX_BYTES + 1);
  size_t n = 0;
  ssize_t k = 1;
  while (b && n <= SIDECAR_MAX_BYTES && (k = read(fd, b + n, SIDECAR_MAX_BYTES + 1 - n)) > 0)
    n += (size_t)k;
  close(fd);
  if (!b) return err_set(TSR_ENOMEM, "out of memory");
  if (k < 0) st = err_set(TSR_EIO, "caption %s: %s", p, strerror(errno));
  else if (n > SIDECAR_MAX_BYTES)
    st = err_set(TSR_EINVAL, "caption %s: over %d bytes: not a caption?", p, SIDECAR_MAX_BYTES);
  b[n < SIDECAR_MAX_BYTES ? n : SIDECAR_MAX_BYTES] = 0;
  if (!st && strlen(b) != n) st = err_set(TSR_EINVAL, "caption %s: has a NUL byte", p);
  if (!st && !term_is_utf8(b)) st = err_set(TSR_EINVAL, "caption %s: not UTF-8 text", p);
  while (!st && n && strchr(" \t\r\n", b[n - 1])) b[--n] = 0;
  if (st) free(b);
  else *text = b;
  return st;
}

// The span key of a video: its path's FNV-1a hash in 53 bits (a JSON integer exactly).
static long long key_of(const char *video) {
  return (long long)(hash_fnv1a(HASH_FNV1A_INIT, video, strlen(video)) >> 11);
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

// Two videos whose keys collide (2^-53 a pair) would share a caption file: refused by name.
static tsr_status distinct_files(const sidecar_map *map) {
  char **f = malloc(((size_t)map->n + 1) * sizeof *f);
  if (!f) return err_set(TSR_ENOMEM, "out of memory");
  memcpy(f, map->file, (size_t)map->n * sizeof *f);
  qsort(f, (size_t)map->n, sizeof *f, by_name);
  tsr_status st = TSR_OK;
  for (int64_t i = 1; !st && i < map->n; i++)
    if (!strcmp(f[i - 1], f[i]))
      st = err_set(TSR_EINVAL, "two videos have the caption file %s (a hash collision of "
                   "their paths): rename one", f[i]);
  free(f);
  return st;
}

// map's videos with a text, their caption files in dir, and (jsonl, rank 0) the spans.
static tsr_status collect(const source_list *l, const char *ext, const char *dir, FILE *jsonl,
                          sidecar_map *map) {
  map->video = calloc((size_t)l->n + 1, sizeof *map->video);
  map->file = calloc((size_t)l->n + 1, sizeof *map->file);
  if (!map->video || !map->file) return err_set(TSR_ENOMEM, "out of memory");
  char tp[PATH_MAX + 64], cf[PATH_MAX + 64];
  for (int64_t i = 0; i < l->n; i++) {
    char *text = NULL;
    if (l->v[i].error) continue;  // ingest records it as failed
    text_path(l->v[i].path, ext, tp, sizeof tp);
    tsr_status rt = read_text(tp, &text);
    if (rt) return rt;
    if (!text || !*text) {
      free(text);
      continue;
    }
    long long k = key_of(l->v[i].path);
    snprintf(cf, sizeof cf, "%s/%lld-0.caption.safetensors", dir, k);
    tsr_status st = TSR_OK;
    if (jsonl) {
      json_t *o = json_pack("{sIsiss}", "row", (json_int_t)k, "span", 0, "caption", text);
      char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
      if (!line || fprintf(jsonl, "%s\n", line) < 0) st = err_set(TSR_EIO, "writing the spans");
      free(line);
      json_decref(o);
    }
    free(text);
    if (st) return st;
    if (!(map->video[map->n] = strdup(l->v[i].path)) || !(map->file[map->n] = strdup(cf)))
      return err_set(TSR_ENOMEM, "out of memory");
    map->n++;
  }
  return distinct_files(map);
}

// Rank 0: the spans file dir/sidecar-spans.jsonl, then the script over it into dir.
static tsr_status embed(const source_list *l, const char *ext, const char *encoder,
                        const char *dir, int quiet, sidecar_map *map) {
  char spans[PATH_MAX + 32], enc[PATH_MAX + 16];
  snprintf(spans, sizeof spans, "%s/sidecar-spans.jsonl", dir);
  snprintf(enc, sizeof enc, "%s", encoder);
  FILE *f = fopen(spans, "w");
  if (!f) return err_set(TSR_EIO, "%s: %s", spans, strerror(errno));
  tsr_status st = collect(l, ext, dir, f, map);
  if (fclose(f) && !st) st = err_set(TSR_EIO, "%s: %s", spans, strerror(errno));
  if (st || !map->n) return st;
  char *args[] = {spans, "--out", (char *)dir, "--encoder", enc, quiet ? "--quiet" : NULL, NULL};
  return pyscript_run_venv("embed_captions.py", args);
}

tsr_status sidecar_embed(char **srcs, int nsrcs, const char *ext, const char *encoder,
                         const char *dir, int quiet, sidecar_map *map) {
  memset(map, 0, sizeof *map);
  source_list l = {0};
  tsr_status st = sources_expand(srcs, nsrcs, NULL, &l);
  if (!st && comm_rank() == 0 && !(st = fs_mkdir_p(dir)))
    st = embed(&l, ext, encoder, dir, quiet, map);
  // every rank waits for rank 0's files, and fails with it
  int32_t bad = st != TSR_OK;
  tsr_status cst = comm_size() > 1 ? comm_bcast(&bad, sizeof bad, 0) : TSR_OK;
  if (!st && bad) st = err_set(TSR_EIO, "rank 0 could not embed the captions");
  if (!st && cst) st = cst;
  if (!st && comm_rank() != 0) st = collect(&l, ext, dir, NULL, map);
  sources_free(&l);
  if (st) sidecar_free(map);
  return st ? err_wrap(st, "--captions-from %s: ", ext) : TSR_OK;
}

void sidecar_caption_path(void *ctx, const char *video, char *out, size_t cap) {
  const sidecar_map *m = ctx;
  *out = 0;
  for (int64_t lo = 0, hi = m->n - 1; lo <= hi;) {
    int64_t mid = lo + (hi - lo) / 2;
    int c = strcmp(video, m->video[mid]);
    if (!c) {
      snprintf(out, cap, "%s", m->file[mid]);
      return;
    }
    if (c < 0) hi = mid - 1;
    else lo = mid + 1;
  }
}

void sidecar_free(sidecar_map *map) {
  for (int64_t i = 0; map->video && i < map->n; i++) free(map->video[i]);
  for (int64_t i = 0; map->file && i < map->n; i++) free(map->file[i]);
  free(map->video), free(map->file);
  memset(map, 0, sizeof *map);
}
