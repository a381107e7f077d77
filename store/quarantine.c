// store/quarantine.c — recovery reads before it cuts, and moves what it may not cut
// into the store's quarantine folder (store/quarantine.h).
#define _GNU_SOURCE
#include "store/quarantine.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "store/clip_meta.h"
#include "store/layout.h"
#include "store/shard.h"
#include "store/shard_walk.h"

// ---- the verdict -------------------------------------------------------------------------

typedef struct {
  store_index *ix;
  int keep_blocks;
  int v1;          // a format-1 shard: no block has metadata, only the index tells
                   // garbage from data
  int keep;
  char *why;
  size_t n;
  clip_meta meta;  // scratch: a block's decoded trailer
} verdict_ctx;

// Records why the range is data; the status it returns ends the walk (one reason is
// enough), and store_range_verdict does not pass it on as an error.
static tsr_status keep_because(verdict_ctx *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static tsr_status keep_because(verdict_ctx *x, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->why, x->n, fmt, ap);
  va_end(ap);
  x->keep = 1;
  return TSR_EINVAL;
}

// One block of the range: is it data the index does not hold elsewhere?
static tsr_status verdict_item(const shard_walk_item *it, void *vctx) {
  verdict_ctx *x = vctx;
  if (it->kind != SHARD_WALK_CLIP) return TSR_OK;  // unfinished bytes, or a caption alone
  const shard_block *b = &it->clip;
  if (x->keep_blocks)
    return keep_because(x, "a complete clip block at offset %lld, which `index recover` of a "
                        "damaged store keeps", (long long)it->offset);
  // Every block ingest writes into a shard of format 2 or later has a trailer, so one
  // without is no clip of a source (a test's or a torn writer's); in a format-1 shard none
  // has one, and such a block may be any source's.
  if (!b->meta && !x->v1) return TSR_OK;
  if (!b->meta)
    return keep_because(x, "a clip block at offset %lld of a format-1 shard (no metadata): the "
                        "index cannot tell it from data", (long long)it->offset);
  tsr_status dr = clip_meta_decode(b->meta, b->meta_bytes, &x->meta);
  clip_meta_release(&x->meta);  // only its path, size, mtime and last are read below
  if (dr != TSR_OK) {
    err_clear();
    return keep_because(x, "a clip block at offset %lld whose metadata this tessera cannot "
                        "read (a newer format?)", (long long)it->offset);
  }
  if (!x->meta.last) return TSR_OK;  // a source's last clip decides for its ingest
  source_status ss;
  int same = 0;
  tsr_status st = index_source_lookup(x->ix, x->meta.path, x->meta.size, x->meta.mtime, &ss, &same);
  if (st) return st;
  if (ss == SOURCE_DONE) return TSR_OK;  // superseded: the index records the source
  return keep_because(x, "a complete ingest of source %s (its last clip at offset %lld) that the "
                      "index does not record", x->meta.path, (long long)it->offset);
}

// A shard no row points at must be one of this store's before its bytes can be garbage.
static int other_settings(shard_reader *sr, const store_settings *s, char *why, size_t n) {
  store_settings g;
  char diff[512];
  shard_reader_geometry(sr, &g);
  if (shard_reader_version(sr) >= 2 && store_settings_diff(s, &g, diff, sizeof diff)) {
    snprintf(why, n, "it was written with other settings than the store's (%s)", diff);
    return 1;
  }
  if (g.pt != s->pt || g.ph != s->ph || g.pw != s->pw || g.channels != s->channels ||
      g.dtype != s->dtype) {
    snprintf(why, n, "its tokens have another geometry than the store's");
    return 1;
  }
  return 0;
}

tsr_status store_range_verdict(store_index *ix, const store_settings *s, const char *path,
                               int64_t from, int keep_blocks, int *keep, char *why, size_t n) {
  *keep = 0;
  why[0] = 0;
  shard_reader *sr = NULL;
  if (shard_reader_open(&sr, path, NULL) != TSR_OK) {
    struct stat sb;
    // shorter than a header: a shard whose creation was interrupted holds nothing
    if (stat(path, &sb) == 0 && sb.st_size < SHARD_HEADER_BYTES) return err_clear(), TSR_OK;
    *keep = 1;
    snprintf(why, n, "its header is unreadable (%s)", err_msg());
    err_clear();
    return TSR_OK;
  }
  if (from <= SHARD_HEADER_BYTES && other_settings(sr, s, why, n)) {
    *keep = 1;
    shard_reader_close(&sr);
    return TSR_OK;
  }
  verdict_ctx x = {.ix = ix, .keep_blocks = keep_blocks, .v1 = shard_reader_version(sr) < 2,
                   .why = why, .n = n};
  tsr_status st = shard_walk(sr, from, 1, verdict_item, &x);
  shard_reader_close(&sr);
  *keep = x.keep;
  if (x.keep) return err_clear(), TSR_OK;  // the walk was ended on purpose
  return st;
}

// ---- moving -------------------------------------------------------------------------------

// The quarantine folder of this recovery, made on first use.
static tsr_status quarantine_dir(const char *dir, store_quarantined *q) {
  if (q->dir[0]) return TSR_OK;
  time_t now = time(NULL);
  struct tm tm;
  char when[32] = "time";
  if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y%m%dT%H%M%S", &tm);
  char path[sizeof q->dir];
  if (snprintf(path, sizeof path, "%s/%s/%s-%d", dir, STORE_QUARANTINE_DIR, when,
               (int)getpid()) >= (int)sizeof path)
    return err_set(TSR_EINVAL, "path too long: %s", dir);
  char top[sizeof q->dir];  // STORE/quarantine: a real folder, never a link out of the store
  tsr_status st = fs_join(top, sizeof top, dir, STORE_QUARANTINE_DIR);
  if (!st) st = fs_dir_nofollow(top, 1);
  if (!st) st = fs_dir_nofollow(path, 1);
  if (!st) st = fs_fsync_parent(path);
  if (st) return err_wrap(st, "store %s: quarantine folder: ", dir);
  snprintf(q->dir, sizeof q->dir, "%s", path);
  return TSR_OK;
}

tsr_status store_quarantine_shard(const char *dir, const char *path, const char *name,
                                  store_quarantined *q) {
  tsr_status st = quarantine_dir(dir, q);
  if (st) return st;
  char dst[PATH_MAX + 256];
  snprintf(dst, sizeof dst, "%s/%s", q->dir, name);
  if (rename(path, dst) != 0)
    return err_set(TSR_EIO, "store %s: move shard %s into the quarantine folder %s: %s", dir, path,
                   q->dir, strerror(errno));
  if (!(st = fs_fsync_dir(q->dir))) st = fs_fsync_parent(path);
  if (st) return st;
  q->shards++;
  return TSR_OK;
}

// Appends src's bytes [from, to) to fd (at its end).
static tsr_status copy_range(int src, int fd, int64_t from, int64_t to, const char *spath,
                             const char *dpath) {
  char buf[1 << 16];
  for (int64_t at = from; at < to;) {
    size_t want = to - at < (int64_t)sizeof buf ? (size_t)(to - at) : sizeof buf;
    ssize_t k = pread(src, buf, want, at);
    if (k <= 0)
      return err_set(TSR_EIO, "read %s at offset %lld: %s", spath, (long long)at,
                     k < 0 ? strerror(errno) : "unexpected end of file");
    for (ssize_t done = 0; done < k;) {
      ssize_t w = write(fd, buf + done, (size_t)(k - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return err_set(TSR_EIO, "write %s: %s (disk full?)", dpath, strerror(errno));
      done += w;
    }
    at += k;
  }
  return TSR_OK;
}

tsr_status store_quarantine_tail(const char *dir, const char *path, const char *name,
                                 int64_t from, int64_t size, store_quarantined *q) {
  tsr_status st = quarantine_dir(dir, q);
  if (st) return st;
  char dst[PATH_MAX + 256];
  const char *dot = strrchr(name, '.');
  int stem = dot ? (int)(dot - name) : (int)strlen(name);
  snprintf(dst, sizeof dst, "%s/%.*s-tail-%lld.tshard", q->dir, stem, name,
           (long long)from);
  int src = -1;  // a regular file only (core/fs.h)
  if ((st = fs_open_regular(path, &src))) return err_wrap(st, "store %s: shard: ", dir);
  int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    st = err_set(TSR_EIO, "store %s: create %s in the quarantine folder: %s", dir, dst,
                 strerror(errno));
    close(src);
    return st;
  }
  // the header first: the copy is a shard whose blocks are the tail's (from is aligned)
  st = copy_range(src, fd, 0, SHARD_HEADER_BYTES, path, dst);
  if (!st) st = copy_range(src, fd, from, size, path, dst);
  if (!st && fsync(fd) != 0) st = err_set(TSR_EIO, "fsync %s: %s", dst, strerror(errno));
  close(fd);
  close(src);
  if (!st) st = fs_fsync_dir(q->dir);
  if (st) {
    unlink(dst);  // the shard is not cut then: its bytes are still where they were
    return err_wrap(st, "store %s: shard %s: ", dir, name);
  }
  q->tails++;
  q->bytes += size - from;
  return TSR_OK;
}
