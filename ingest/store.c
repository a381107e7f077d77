// ingest/store.c — the store directory: creation, crash recovery, clip lengths.
// Rules: store.h and docs/store-format.md.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "ingest/shard.h"
#include "core/fs.h"
#include "ingest/store.h"

static tsr_status join(char *out, size_t n, const char *a, const char *b) {
  int k = snprintf(out, n, "%s/%s", a, b);
  if (k < 0 || (size_t)k >= n) return err_set(TSR_EINVAL, "path too long: %s/%s", a, b);
  return TSR_OK;
}

static int has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

int store_dir_has_foreign_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  struct dirent *e;
  int foreign = 0;
  while ((e = readdir(d))) {
    const char *n = e->d_name;
    if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, STORE_SHARD_DIR) ||
        !strcmp(n, STORE_PARTS_DIR) || !strcmp(n, STORE_LOCK_NAME) || !strncmp(n, STORE_INDEX_NAME, strlen(STORE_INDEX_NAME)))
      continue;
    foreign = 1;
    break;
  }
  closedir(d);
  return foreign;
}

tsr_status store_open(store_index **ix, const char *dir, int create,
                      const store_settings *settings) {
  *ix = NULL;
  char path[PATH_MAX], sub[PATH_MAX];
  tsr_status r = join(path, sizeof path, dir, STORE_INDEX_NAME);
  if (r) return r;
  struct stat sb;
  int dir_exists = stat(dir, &sb) == 0;
  if (dir_exists && !S_ISDIR(sb.st_mode))
    return err_set(TSR_EINVAL, "store %s is not a directory (a store is a directory made by "
                   "`tessera ingest`)", dir);
  if (!create) {
    if (!dir_exists)
      return err_set(TSR_EIO, "store %s does not exist: %s", dir, strerror(errno));
    if (stat(path, &sb) != 0)
      return err_set(TSR_EINVAL, "%s is not a tessera store: it has no %s", dir, STORE_INDEX_NAME);
    r = index_open(ix, path, 0, settings);
    return r ? err_wrap(r, "store %s: ", dir) : TSR_OK;
  }
  int index_exists = stat(path, &sb) == 0;
  if (index_exists) {
    // Check the existing index (settings) before making anything.
    if ((r = index_open(ix, path, 1, settings))) return err_wrap(r, "store %s: ", dir);
  } else if (dir_exists && store_dir_has_foreign_entries(dir)) {
    return err_set(TSR_EINVAL, "directory %s exists and is not a tessera store (no %s, other "
                   "files present); give a new or empty directory", dir, STORE_INDEX_NAME);
  }
  if (!(r = fs_mkdir_p(dir)) && !(r = join(sub, sizeof sub, dir, STORE_SHARD_DIR)) &&
      !(r = fs_mkdir_p(sub)) && !(r = join(sub, sizeof sub, dir, STORE_PARTS_DIR)))
    r = fs_mkdir_p(sub);
  if (!r && !index_exists) {
    if (!(r = index_open(ix, path, 1, settings))) r = fs_fsync_dir(dir);
  }
  if (r) {
    index_close(ix);
    return err_wrap(r, "store %s: ", dir);
  }
  return TSR_OK;
}

// Sorted names of regular files in `dir` ending with one of the suffixes.
typedef struct {
  char **v;
  int n, cap;
} name_list;

static void names_free(name_list *l) {
  for (int i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  *l = (name_list){0};
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static tsr_status list_dir(const char *dir, name_list *l) {
  *l = (name_list){0};
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) return TSR_OK;
    return err_set(TSR_EIO, "list %s: %s", dir, strerror(errno));
  }
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    if (l->n == l->cap) {
      int cap = l->cap ? 2 * l->cap : 16;
      char **v = realloc(l->v, sizeof *v * (size_t)cap);
      if (!v) break;
      l->v = v;
      l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(e->d_name))) break;
    l->n++;
  }
  int err = errno;
  closedir(d);
  if (e) {
    names_free(l);
    return err_set(TSR_ENOMEM, "out of memory listing %s (%s)", dir, strerror(err));
  }
  if (l->n) qsort(l->v, (size_t)l->n, sizeof *l->v, cmp_names);
  return TSR_OK;
}

static tsr_status unlink_if_exists(const char *path) {
  if (unlink(path) != 0 && errno != ENOENT)
    return err_set(TSR_EIO, "remove %s: %s", path, strerror(errno));
  return TSR_OK;
}

tsr_status store_shard_committed_end(store_index *ix, const char *path, const char *rel,
                                     int64_t *end) {
  *end = 0;
  int64_t last = 0;
  tsr_status r = index_shard_last_block(ix, rel, &last);
  if (r || last == 0) return r;
  shard_reader *sr = NULL;
  shard_block b;
  if (shard_reader_open(&sr, path, NULL) == TSR_OK && shard_reader_block(sr, last, 0, &b) == TSR_OK) {
    *end = b.end;
    shard_reader_close(&sr);
    return TSR_OK;
  }
  shard_reader_close(&sr);
  r = index_shard_end(ix, rel, end);  // damaged block: what the rows say
  // Rows are untrusted: sizes near 2^63 wrap in SQL (the fuzzer found an end of -2^63).
  if (!r && (*end < SHARD_HEADER_BYTES + SHARD_ALIGN || *end > (1LL << 62) ||
             *end % SHARD_ALIGN != 0)) {
    r = err_set(TSR_EFORMAT, "shard %s: its rows give an invalid committed end %lld (last block "
                "offset %lld); the index is damaged: run `tessera index verify`", rel,
                (long long)*end, (long long)last);
    *end = 0;
  }
  return r;
}

tsr_status store_recover_report(const char *dir, store_index *ix, store_recovery *rep) {
  store_recovery tmp;
  if (!rep) rep = &tmp;
  *rep = (store_recovery){0};
  char pdir[PATH_MAX], sdir[PATH_MAX], path[PATH_MAX], journal[PATH_MAX + 16];
  tsr_status r;
  if ((r = join(pdir, sizeof pdir, dir, STORE_PARTS_DIR)) ||
      (r = join(sdir, sizeof sdir, dir, STORE_SHARD_DIR)))
    return r;
  name_list l;

  // 1. Per-rank parts: merge (one transaction each), then delete. A crash between the
  //    two leaves a part whose sources are all done in the index: merging it again skips
  //    them, so nothing is duplicated.
  if ((r = list_dir(pdir, &l))) return r;
  for (int i = 0; i < l.n && !r; i++) {
    if (!has_suffix(l.v[i], ".sqlite")) continue;
    if ((r = join(path, sizeof path, pdir, l.v[i]))) break;
    snprintf(journal, sizeof journal, "%s-journal", path);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
    if (sb.st_size > 0) {
      int64_t clips = 0, skipped = 0;
      if ((r = index_merge_from(ix, path, "", &clips, &skipped))) {
        err_wrap(r, "recover store %s: part %s: ", dir, l.v[i]);
        break;
      }
      rep->parts_merged++;
      rep->clips_merged += clips;
      rep->sources_skipped += skipped;
      log_info("store %s: merged part %s (%lld clips; %lld sources already done)", dir, l.v[i],
               (long long)clips, (long long)skipped);
    }
    // An empty part never committed anything (schema creation is one transaction).
    if (!(r = unlink_if_exists(path))) r = unlink_if_exists(journal);
  }
  names_free(&l);
  if (!r) r = fs_fsync_dir(pdir);
  if (r) return r;

  // 2. Shards: cut uncommitted tails, remove shards no clip points at and temp files.
  if ((r = list_dir(sdir, &l))) return r;
  for (int i = 0; i < l.n && !r; i++) {
    if ((r = join(path, sizeof path, sdir, l.v[i]))) break;
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
    if (has_suffix(l.v[i], ".tmp")) {
      if (!(r = unlink_if_exists(path))) rep->tmp_removed++;
      continue;
    }
    if (!has_suffix(l.v[i], ".tshard")) continue;
    char rel[PATH_MAX];
    if ((r = join(rel, sizeof rel, STORE_SHARD_DIR, l.v[i]))) break;
    int64_t end = 0;
    if ((r = store_shard_committed_end(ix, path, rel, &end))) break;
    if (end == 0) {
      if (!(r = unlink_if_exists(path))) rep->shards_removed++;
    } else if (sb.st_size > end && sb.st_nlink > 1) {
      log_info("store %s: shard %s is shared (hard link), its %lld uncommitted bytes are kept",
               dir, l.v[i], (long long)(sb.st_size - end));
    } else if (sb.st_size != end) {
      if ((r = shard_truncate(path, end))) {
        err_wrap(r, "recover store %s: ", dir);
        break;
      }
      rep->shards_truncated++;
      rep->bytes_cut += sb.st_size - end;
    }
  }
  names_free(&l);
  if (!r && (rep->shards_removed || rep->tmp_removed)) r = fs_fsync_dir(sdir);
  if (!r && (rep->shards_truncated || rep->shards_removed || rep->tmp_removed))
    log_info("store %s: recovered: %lld shard tails cut (%lld bytes), %lld unreferenced shards "
             "and %lld temporary files removed", dir, (long long)rep->shards_truncated,
             (long long)rep->bytes_cut, (long long)rep->shards_removed,
             (long long)rep->tmp_removed);
  return r;
}

tsr_status store_recover(const char *dir, store_index *ix) {
  return store_recover_report(dir, ix, NULL);
}

tsr_status store_clip_lengths(const char *dir, int64_t **ids, int64_t **tokens, int64_t *n) {
  *ids = *tokens = NULL;
  *n = 0;
  store_index *ix = NULL;
  tsr_status r = store_open(&ix, dir, 0, NULL);
  if (r) return r;
  r = index_clip_lengths(ix, ids, tokens, n);
  index_close(&ix);
  return r;
}
