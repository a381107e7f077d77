// store/store.c — the store directory: creation and opening, shard ends, clip lengths.
// Rules: store/store.h and docs/store-format.md.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"

#include "core/fs.h"
#include "core/log.h"
#include "store/index.h"
#include "store/layout.h"
#include "store/settings.h"
#include "store/shard.h"

int store_dir_has_foreign_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  struct dirent *e;
  int foreign = 0;
  while ((e = readdir(d))) {
    const char *n = e->d_name;
    if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, STORE_SHARD_DIR) ||
        !strcmp(n, STORE_PARTS_DIR) || !strcmp(n, STORE_LOCK_NAME) ||
        !strcmp(n, STORE_READERS_DIR) || !strcmp(n, STORE_QUARANTINE_DIR) ||
        !strncmp(n, STORE_INDEX_NAME, strlen(STORE_INDEX_NAME)))
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
  tsr_status st = fs_join(path, sizeof path, dir, STORE_INDEX_NAME);
  if (st) return st;
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
    st = index_open(ix, path, 0, settings);
    return st ? err_wrap(st, "store %s: ", dir) : TSR_OK;
  }
  int index_exists = stat(path, &sb) == 0;
  if (index_exists) {
    // Check the existing index (settings) before making anything.
    if ((st = index_open(ix, path, 1, settings))) return err_wrap(st, "store %s: ", dir);
  } else if (dir_exists && store_dir_has_foreign_entries(dir)) {
    return err_set(TSR_EINVAL, "directory %s exists and is not a tessera store (no %s, other "
                   "files present); give a new or empty directory", dir, STORE_INDEX_NAME);
  }
  if (!(st = fs_mkdir_p(dir)) && !(st = fs_join(sub, sizeof sub, dir, STORE_SHARD_DIR)) &&
      !(st = fs_mkdir_p(sub)) && !(st = fs_join(sub, sizeof sub, dir, STORE_PARTS_DIR)))
    st = fs_mkdir_p(sub);
  if (!st && !index_exists) {
    if (!(st = index_open(ix, path, 1, settings))) st = fs_fsync_dir(dir);
  }
  if (st) {
    index_close(ix);
    return err_wrap(st, "store %s: ", dir);
  }
  return TSR_OK;
}
tsr_status store_shard_committed_end(store_index *ix, const char *path, const char *rel,
                                     int64_t *end) {
  *end = 0;
  int64_t last = 0;
  tsr_status st = index_shard_last_block(ix, rel, &last);
  if (st || last == 0) return st;
  shard_reader *sr = NULL;
  shard_block b;
  if (shard_reader_open(&sr, path, NULL) == TSR_OK && shard_reader_block(sr, last, 0, &b) == TSR_OK) {
    *end = b.end;
    shard_reader_close(&sr);
    return TSR_OK;
  }
  shard_reader_close(&sr);
  st = index_shard_end(ix, rel, end);  // damaged block: what the rows say
  // Rows are untrusted: sizes near 2^63 wrap in SQL (the fuzzer found an end of -2^63).
  if (!st && (*end < SHARD_HEADER_BYTES + SHARD_ALIGN || *end > (1LL << 62) ||
              *end % SHARD_ALIGN != 0)) {
    st = err_set(TSR_EFORMAT, "shard %s: its rows give an invalid committed end %lld (last block "
                 "offset %lld); the index is damaged: run `tessera index verify`", rel,
                 (long long)*end, (long long)last);
    *end = 0;
  }
  return st;
}

tsr_status store_clip_lengths(const char *dir, int64_t **ids, int64_t **tokens, int64_t *n) {
  *ids = *tokens = NULL;
  *n = 0;
  store_index *ix = NULL;
  tsr_status st = store_open(&ix, dir, 0, NULL);
  if (st) return st;
  st = index_clip_lengths(ix, ids, tokens, n);
  index_close(&ix);
  return st;
}
