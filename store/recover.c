// store/recover.c — crash recovery of a store directory: leftover parts merged, shard
// tails cut or quarantined, unreferenced shards removed. Rules: store/recover.h and
// docs/store-format.md.
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/recover.h"

#include "core/fs.h"
#include "core/log.h"
#include "store/index.h"
#include "store/layout.h"
#include "store/lock.h"
#include "store/quarantine.h"
#include "store/rebuild.h"
#include "store/settings.h"
#include "store/shard.h"
#include "store/store.h"


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

// 1. Per-rank parts: merge (one transaction each), then delete. A crash between the two
// leaves a part whose sources are all done in the index: merging it again skips them, so
// nothing is duplicated. Parts are never mapped by readers: this needs no reader lock.
static tsr_status merge_parts(const char *dir, store_index *ix, store_recovery *rep) {
  char pdir[PATH_MAX], path[PATH_MAX], journal[PATH_MAX + 16];
  tsr_status st = fs_join(pdir, sizeof pdir, dir, STORE_PARTS_DIR);
  name_list l;
  int removed = 0;
  if (st || (st = list_dir(pdir, &l))) return st;
  for (int i = 0; i < l.n && !st; i++) {
    if (!fs_has_suffix(l.v[i], ".sqlite")) continue;
    if ((st = fs_join(path, sizeof path, pdir, l.v[i]))) break;
    snprintf(journal, sizeof journal, "%s-journal", path);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
    if (sb.st_size > 0) {
      int64_t clips = 0, skipped = 0;
      if ((st = index_merge_from(ix, path, "", &clips, &skipped))) {
        err_wrap(st, "recover store %s: part %s: ", dir, l.v[i]);
        break;
      }
      rep->parts_merged++;
      rep->clips_merged += clips;
      rep->sources_skipped += skipped;
      log_info("store %s: merged part %s (%lld clips; %lld sources already done)", dir, l.v[i],
               (long long)clips, (long long)skipped);
    }
    // An empty part never committed anything (schema creation is one transaction).
    if (!(st = unlink_if_exists(path))) st = unlink_if_exists(journal);
    removed++;
  }
  names_free(&l);
  // (a store made of shards alone, e.g. of a quarantine folder, has no parts/ to sync)
  return st || !removed ? st : fs_fsync_dir(pdir);
}

// A shard no row points at (file `path`, `name` in shards/): deleted when reading it finds
// nothing the index lacks, else moved into the quarantine folder.
static tsr_status drop_shard(const char *dir, store_index *ix, const store_settings *s,
                             const store_recover_opts *o, const char *path, const char *name,
                             store_recovery *rep) {
  int keep = 0;
  char why[1024];
  tsr_status st = store_range_verdict(ix, s, path, SHARD_HEADER_BYTES, o->keep_blocks, &keep, why,
                                     sizeof why);
  if (st) return err_wrap(st, "recover store %s: shard %s: ", dir, name);
  if (!keep) {
    if (!(st = unlink_if_exists(path))) rep->shards_removed++;
    return st;
  }
  if ((st = store_quarantine_shard(dir, path, name, &rep->quarantined))) return st;
  log_warn("store %s: shard %s has no index rows but %s: moved into the quarantine folder %s, "
           "not deleted (look at it with `tessera index recover` on a store made of it)", dir,
           name, why, rep->quarantined.dir);
  return TSR_OK;
}

// Bytes [end, size) past a shard's committed end: cut, after moving them into the
// quarantine folder when reading them finds data the index lacks.
static tsr_status cut_tail(const char *dir, store_index *ix, const store_settings *s,
                           const store_recover_opts *o, const char *path, const char *name,
                           int64_t end, int64_t size, store_recovery *rep) {
  int keep = 0;
  char why[1024];
  tsr_status st = store_range_verdict(ix, s, path, end, o->keep_blocks, &keep, why, sizeof why);
  if (!st && keep && !(st = store_quarantine_tail(dir, path, name, end, size, &rep->quarantined)))
    log_warn("store %s: the %lld bytes of shard %s past its last indexed clip hold %s: copied "
             "into the quarantine folder %s before the shard is cut", dir,
             (long long)(size - end), name, why, rep->quarantined.dir);
  if (!st) st = shard_truncate(path, end);
  if (st) return err_wrap(st, "recover store %s: ", dir);
  rep->shards_truncated++;
  rep->bytes_cut += size - end;
  return TSR_OK;
}

// 2. Shards: cut uncommitted tails, remove shards no clip points at and temp files, each
// read first (drop_shard, cut_tail). The caller holds the readers out.
static tsr_status tidy_shards(const char *dir, store_index *ix, const store_recover_opts *o,
                              store_recovery *rep) {
  char sdir[PATH_MAX], path[PATH_MAX], rel[PATH_MAX];
  store_settings s;
  name_list l;
  tsr_status st = fs_join(sdir, sizeof sdir, dir, STORE_SHARD_DIR);
  if (!st) st = index_settings(ix, &s);
  if (st || (st = list_dir(sdir, &l))) return st;
  for (int i = 0; i < l.n && !st; i++) {
    if ((st = fs_join(path, sizeof path, sdir, l.v[i]))) break;
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
    if (fs_is_atomic_tmp(l.v[i])) {  // a merge's copy in progress: a copy of data elsewhere
      if (!(st = unlink_if_exists(path))) rep->tmp_removed++;
      continue;
    }
    if (!fs_has_suffix(l.v[i], ".tshard")) continue;
    if ((st = fs_join(rel, sizeof rel, STORE_SHARD_DIR, l.v[i]))) break;
    int64_t end = 0;
    if ((st = store_shard_committed_end(ix, path, rel, &end))) break;
    if (end == 0)
      st = drop_shard(dir, ix, &s, o, path, l.v[i], rep);
    else if (sb.st_size > end && sb.st_nlink > 1)
      log_info("store %s: shard %s is shared (hard link), its %lld uncommitted bytes are kept",
               dir, l.v[i], (long long)(sb.st_size - end));
    else if (sb.st_size != end)
      st = cut_tail(dir, ix, &s, o, path, l.v[i], end, sb.st_size, rep);
  }
  names_free(&l);
  if (!st && (rep->shards_removed || rep->tmp_removed || rep->quarantined.shards))
    st = fs_fsync_dir(sdir);
  return st;
}

tsr_status store_recover_with(const char *dir, store_index *ix, const store_recover_opts *o,
                              store_recovery *rep) {
  static const store_recover_opts defaults = {0};
  store_recovery tmp;
  if (!rep) rep = &tmp;
  if (!o) o = &defaults;
  *rep = (store_recovery){0};
  tsr_status st = merge_parts(dir, ix, rep);
  if (st) return st;
  // No byte a reader may have mapped is cut: with readers active the shard pass waits
  // for a recovery without them (their rows stay valid; the garbage is harmless).
  store_lock *guard = NULL;
  if (!o->readers_excluded) {
    if ((st = store_lock_exclude_readers(&guard, dir, rep->readers, sizeof rep->readers)))
      return st;
    if (!guard) {
      rep->deferred = 1;
      log_info("store %s: is being read by %s: its uncommitted shard tails and unreferenced "
               "shards are left for a later recovery (appending only)", dir, rep->readers);
      return TSR_OK;
    }
  }
  st = tidy_shards(dir, ix, o, rep);
  store_lock_release(&guard);
  if (!st && (rep->shards_truncated || rep->shards_removed || rep->tmp_removed))
    log_info("store %s: recovered: %lld shard tails cut (%lld bytes), %lld unreferenced shards "
             "and %lld temporary files removed", dir, (long long)rep->shards_truncated,
             (long long)rep->bytes_cut, (long long)rep->shards_removed,
             (long long)rep->tmp_removed);
  if (!st && rep->quarantined.dir[0])
    log_warn("store %s: %lld shards and %lld shard tails (%lld bytes) moved into the quarantine "
             "folder %s", dir, (long long)rep->quarantined.shards,
             (long long)rep->quarantined.tails, (long long)rep->quarantined.bytes,
             rep->quarantined.dir);
  return st;
}

tsr_status store_recover_report(const char *dir, store_index *ix, store_recovery *rep) {
  return store_recover_with(dir, ix, NULL, rep);
}

tsr_status store_recover(const char *dir, store_index *ix) {
  return store_recover_with(dir, ix, NULL, NULL);
}


// Rebuilds an unusable index, saying why first (store_repair).
static tsr_status rebuild_if_unusable(const char *dir, void (*say)(const char *, void *),
                                      void *ctx, store_repair_report *rep) {
  char why[1024] = "", line[sizeof why + 4096 + 128];  // why and the store's path
  TSR_TRY(store_index_state(dir, why, sizeof why));
  if (!why[0]) return TSR_OK;
  snprintf(line, sizeof line, "store %s has clips in its shards but %s: rebuilding the index "
           "from the shards", dir, why);
  if (say) say(line, ctx);
  else log_warn("%s", line);
  TSR_TRY(store_rebuild(dir, say, ctx, &rep->rebuild));
  rep->rebuilt = 1;
  return TSR_OK;
}

tsr_status store_repair(const char *dir, void (*say)(const char *line, void *ctx), void *ctx,
                        store_repair_report *rep) {
  *rep = (store_repair_report){0};
  store_lock *lock = NULL, *guard = NULL;
  store_index *ix = NULL;
  char readers[1024] = "";
  tsr_status st = store_lock_acquire(&lock, dir, 0);
  // Readers stay out for the whole repair: it may cut and remove shard bytes, and a process
  // that maps them would die of SIGBUS. With readers active nothing is done.
  if (!st) st = store_lock_exclude_readers(&guard, dir, readers, sizeof readers);
  if (!st && !guard)
    st = err_set(TSR_EINVAL, "store %s is being read by %s; recovery may cut and remove shard "
                 "bytes such a process has mapped: wait for it to finish or stop it, then run "
                 "again. Nothing was changed", dir, readers);
  if (!st) st = rebuild_if_unusable(dir, say, ctx, rep);
  // After a rebuild the store was damaged: no complete block is known to be garbage.
  store_recover_opts ro = {.keep_blocks = rep->rebuilt, .readers_excluded = 1};
  if (!st) st = store_open(&ix, dir, 0, NULL);
  if (!st) st = store_recover_with(dir, ix, &ro, &rep->recovery);
  index_close(&ix);
  store_lock_release(&guard);
  store_lock_release(&lock);
  return st;
}
