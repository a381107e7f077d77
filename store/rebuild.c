// store/rebuild.c — a store's index rebuilt from its shards (store/rebuild.h): every clip
// block of a version-2 shard carries its metadata trailer (clip_meta.h), so the clips and
// done sources of a store whose index is lost, emptied or damaged can be recorded again.
// Also the check that keeps ingest from "recovering" such a store by deleting its shards.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/rebuild.h"

#include "core/fs.h"
#include "core/log.h"
#include "store/clip.h"
#include "store/clip_meta.h"
#include "store/index.h"
#include "store/layout.h"
#include "store/settings.h"
#include "store/shard.h"
#include "store/shard_walk.h"

static int has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

// Sorted names of STORE/shards/*.tshard (malloc'ed; *n of them).
static tsr_status list_shards(const char *dir, char ***out, int *n) {
  *out = NULL;
  *n = 0;
  char sdir[PATH_MAX];
  snprintf(sdir, sizeof sdir, "%s/%s", dir, STORE_SHARD_DIR);
  DIR *d = opendir(sdir);
  if (!d) return errno == ENOENT ? TSR_OK : err_set(TSR_EIO, "list %s: %s", sdir, strerror(errno));
  char **v = NULL;
  int cnt = 0, cap = 0;
  struct dirent *e;
  tsr_status st = TSR_OK;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || !has_suffix(e->d_name, ".tshard")) continue;
    if (cnt == cap) {
      cap = cap ? 2 * cap : 16;
      char **w = realloc(v, sizeof *w * (size_t)cap);
      if (!w) { st = err_set(TSR_ENOMEM, "out of memory listing %s", sdir); break; }
      v = w;
    }
    if (!(v[cnt] = strdup(e->d_name))) {
      st = err_set(TSR_ENOMEM, "out of memory listing %s", sdir);
      break;
    }
    cnt++;
  }
  closedir(d);
  if (cnt) qsort(v, (size_t)cnt, sizeof *v, cmp_str);
  *out = v;
  *n = cnt;
  return st;
}

static void free_names(char **v, int n) {
  for (int i = 0; i < n; i++) free(v[i]);
  free(v);
}

// Name of the first shard whose first block is a valid clip block ("" if none): the
// store holds data that only its index can tell from garbage.
static tsr_status first_shard_with_data(const char *dir, char *name, size_t n) {
  name[0] = 0;
  char **v;
  int cnt;
  tsr_status st = list_shards(dir, &v, &cnt);
  if (st) return st;
  for (int i = 0; i < cnt && !name[0]; i++) {
    char path[PATH_MAX];
    shard_reader *sr = NULL;
    shard_block b;
    snprintf(path, sizeof path, "%s/%s/%s", dir, STORE_SHARD_DIR, v[i]);
    shard_caption cap;  // a source's blocks may start with its caption block
    if (shard_reader_open(&sr, path, NULL) == TSR_OK &&
        (shard_reader_block(sr, SHARD_HEADER_BYTES, 0, &b) == TSR_OK ||
         shard_reader_caption(sr, SHARD_HEADER_BYTES, 0, &cap) == TSR_OK))
      snprintf(name, n, "%s/%s", STORE_SHARD_DIR, v[i]);
    shard_reader_close(&sr);
  }
  free_names(v, cnt);
  err_clear();
  return TSR_OK;
}

// SQLite's file change counter (header bytes 24..28, big-endian; bumped by every commit in
// rollback-journal mode): 1 for an index that has committed nothing since its creation. An
// index with no clip and a counter of 1 is a store whose first ingest was interrupted (its
// blocks are garbage to cut); with more, rows were recorded and then lost.
static uint32_t change_counter(const char *path) {
  uint8_t b[4] = {0};
  int fd = -1;
  if (fs_open_regular(path, &fd)) return 0;  // a FIFO there would block (core/fs.h)
  ssize_t k = pread(fd, b, 4, 24);
  close(fd);
  return k == 4 ? (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3] : 0;
}

tsr_status store_index_state(const char *dir, char *why, size_t n) {
  why[0] = 0;
  char shard[PATH_MAX], path[PATH_MAX];
  tsr_status st = first_shard_with_data(dir, shard, sizeof shard);
  if (st || !shard[0]) return st;
  snprintf(path, sizeof path, "%s/%s", dir, STORE_INDEX_NAME);
  struct stat sb;
  if (stat(path, &sb) != 0) {
    snprintf(why, n, "it has no %s", STORE_INDEX_NAME);
    return TSR_OK;
  }
  if (sb.st_size == 0) {
    snprintf(why, n, "its %s is empty (0 bytes)", STORE_INDEX_NAME);
    return TSR_OK;
  }
  store_index *ix = NULL;
  store_totals t;
  if ((st = index_open(&ix, path, 0, NULL)) == TSR_OK) st = index_totals(ix, &t);
  index_close(&ix);
  if (st) snprintf(why, n, "its index is unusable (%s)", err_msg());
  else if (t.clips == 0 && change_counter(path) > 1)
    snprintf(why, n, "its index records no clip, though it has committed changes since it was "
             "made, while shard %s holds clip blocks", shard);
  err_clear();
  return TSR_OK;
}

// ---- rebuild --------------------------------------------------------------------------

typedef struct {
  int shard;          // index into the shard names
  int64_t offset;
  store_clip c;       // grid, bytes, checksum from the block; the rest from meta
  clip_meta *meta;    // NULL: no (usable) metadata trailer
} entry;

// A caption block found by the walk (its clips name it in their metadata).
typedef struct {
  int shard;
  int64_t offset;
  int tokens, dim;
  uint64_t checksum;
  char *text;         // malloc'ed, NUL-terminated
} caption_entry;

typedef struct {
  const char *dir;
  char **names;
  int nnames;
  entry *v;
  int64_t n, cap;
  caption_entry *caps;
  int64_t ncaps, capcaps;
  void (*say)(const char *, void *);
  void *ctx;
  store_rebuild_report *rep;
} rstate;

static void say(rstate *rb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(rstate *rb, const char *fmt, ...) {
  char line[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (rb->say) rb->say(line, rb->ctx);
  else log_info("%s", line);
}

static tsr_status oom(const rstate *rb) {
  return err_set(TSR_ENOMEM, "out of memory rebuilding the index of %s", rb->dir);
}

// v (n elements of `size` bytes, room for *cap) with room for one more: v itself, or v
// grown to twice its room (`first` elements at first) and *cap raised; NULL when out of
// memory (v is still valid then).
static void *room_for_one(void *v, int64_t n, int64_t *cap, size_t size, int64_t first) {
  if (n < *cap) return v;
  int64_t c = *cap ? 2 * *cap : first;
  void *w = realloc(v, size * (size_t)c);
  if (w) *cap = c;
  return w;
}

static tsr_status push(rstate *rb, const entry *e) {
  entry *v = room_for_one(rb->v, rb->n, &rb->cap, sizeof *v, 256);
  if (!v) return oom(rb);
  rb->v = v;
  rb->v[rb->n++] = *e;
  return TSR_OK;
}

static tsr_status push_caption(rstate *rb, int shard, int64_t offset, const shard_caption *c) {
  caption_entry *v = room_for_one(rb->caps, rb->ncaps, &rb->capcaps, sizeof *v, 64);
  if (!v) return oom(rb);
  rb->caps = v;
  char *text = malloc(c->text_bytes + 1);
  if (!text) return oom(rb);
  memcpy(text, c->text, c->text_bytes);
  text[c->text_bytes] = 0;
  rb->caps[rb->ncaps++] = (caption_entry){shard, offset, c->tokens, c->dim, c->checksum, text};
  return TSR_OK;
}

// The caption block at (shard, offset), by binary search: the walk meets them in shard
// order and, within a shard, in offset order, so rb->caps is sorted. (A clip of a manifest
// has its own caption: as many captions as clips, and a linear search per clip would make
// the rebuild quadratic in the store's size.)
static const caption_entry *find_caption(const rstate *rb, int shard, int64_t offset) {
  int64_t lo = 0, hi = rb->ncaps;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    const caption_entry *e = &rb->caps[mid];
    if (e->shard < shard || (e->shard == shard && e->offset < offset)) lo = mid + 1;
    else hi = mid;
  }
  const caption_entry *e = lo < rb->ncaps ? &rb->caps[lo] : NULL;
  return e && e->shard == shard && e->offset == offset ? e : NULL;
}

// One block of shard `shard` met by the walk (scan_shard), as the rebuild records it.
typedef struct {
  rstate *rb;
  int shard;
  const char *rel;
  int64_t size;
} scan_ctx;

static tsr_status scan_item(const shard_walk_item *it, void *vctx) {
  scan_ctx *x = vctx;
  rstate *rb = x->rb;
  if (it->kind == SHARD_WALK_DAMAGED) {
    if (it->end >= x->size) {  // nothing valid after it: an unfinished write or a cut file
      rb->rep->tail_bytes += it->end - it->offset;
      say(rb, "shard %s: %lld bytes from offset %lld are no complete block (an interrupted "
          "write or damage; recovery moves what holds a complete block into quarantine and cuts "
          "the rest): %s", x->rel, (long long)(it->end - it->offset), (long long)it->offset,
          it->why);
    } else {
      rb->rep->damaged_bytes += it->end - it->offset;
      say(rb, "shard %s: %lld damaged bytes from offset %lld (%s); the blocks after them are "
          "read on", x->rel, (long long)(it->end - it->offset), (long long)it->offset, it->why);
    }
    return TSR_OK;
  }
  if (it->kind == SHARD_WALK_CAPTION)  // a source's caption, before its clips
    return push_caption(rb, x->shard, it->offset, &it->caption);
  const shard_block *b = &it->clip;
  entry e = {.shard = x->shard, .offset = it->offset};
  e.c.T = b->T;
  e.c.H = b->H;
  e.c.W = b->W;
  e.c.tokens = (int64_t)b->T * b->H * b->W;
  e.c.bytes = b->bytes;
  e.c.checksum = b->checksum;
  if (b->meta) {
    if (!(e.meta = malloc(sizeof *e.meta))) return oom(rb);
    if (clip_meta_decode(b->meta, b->meta_bytes, e.meta) != TSR_OK) {
      say(rb, "shard %s: block at offset %lld: metadata unreadable (%s); recovered without "
          "its source", x->rel, (long long)it->offset, err_msg());
      clip_meta_release(e.meta);
      free(e.meta);
      e.meta = NULL;
    }
  }
  tsr_status st = push(rb, &e);
  if (st && e.meta) clip_meta_release(e.meta);
  if (st) free(e.meta);
  return st;
}

// Walks the blocks of shard i (past damaged stretches: shard_walk.h); settings of
// version-2 headers must agree (*have, *s).
static tsr_status scan_shard(rstate *rb, int i, store_settings *s, int *have) {
  char path[PATH_MAX], rel[PATH_MAX];
  snprintf(rel, sizeof rel, "%s/%s", STORE_SHARD_DIR, rb->names[i]);
  tsr_status st = store_shard_path(rb->dir, rel, path, sizeof path);
  if (st) {
    rb->rep->shards_unreadable++;
    say(rb, "shard %s: skipped: %s", rel, err_msg());
    return TSR_OK;
  }
  shard_reader *sr = NULL;
  if (shard_reader_open(&sr, path, NULL) != TSR_OK) {
    rb->rep->shards_unreadable++;
    say(rb, "shard %s: unreadable, kept as it is, no clip recovered from it: %s", rel, err_msg());
    return TSR_OK;
  }
  store_settings g;
  shard_reader_geometry(sr, &g);
  int v2 = shard_reader_version(sr) >= 2;
  char diff[512];
  if (v2 && *have && store_settings_diff(s, &g, diff, sizeof diff)) {
    shard_reader_close(&sr);
    return err_set(TSR_EMISMATCH, "store %s: shard %s was written with other settings than the "
                   "shards before it (%s): not one store; nothing changed", rb->dir, rel, diff);
  }
  if (v2 && !*have) *s = g, *have = 1;
  if (!v2) rb->rep->shards_v1++;
  rb->rep->shards++;
  scan_ctx x = {.rb = rb, .shard = i, .rel = rel, .size = shard_reader_size(sr)};
  st = shard_walk(sr, SHARD_HEADER_BYTES, 1, scan_item, &x);
  shard_reader_close(&sr);
  return st;
}

// Order: source path, newest ingest first, shard, clip index.
static int cmp_entry(const void *pa, const void *pb) {
  const entry *a = pa, *b = pb;
  if (!a->meta || !b->meta) {  // blocks without metadata first, by shard and offset
    if (a->meta || b->meta) return (a->meta != NULL) - (b->meta != NULL);
    if (a->shard != b->shard) return a->shard < b->shard ? -1 : 1;
    return a->offset < b->offset ? -1 : a->offset > b->offset;
  }
  int c = strcmp(a->meta->path, b->meta->path);
  if (c) return c;
  if (a->meta->ingested_at != b->meta->ingested_at)
    return a->meta->ingested_at < b->meta->ingested_at ? 1 : -1;
  if (a->shard != b->shard) return a->shard < b->shard ? -1 : 1;
  if (a->meta->c.clip_index != b->meta->c.clip_index)
    return a->meta->c.clip_index < b->meta->c.clip_index ? -1 : 1;
  return a->offset < b->offset ? -1 : a->offset > b->offset;
}

static int same_group(const entry *a, const entry *b) {
  return a->meta && b->meta && !strcmp(a->meta->path, b->meta->path) &&
         a->meta->ingested_at == b->meta->ingested_at && a->shard == b->shard;
}

// Commits one source from entries [lo, hi) of one group (clips 0..n-1 of one ingest).
static tsr_status commit_group(rstate *rb, store_index *ix, const store_settings *s,
                               entry *g, int64_t n, store_clip *buf) {
  const clip_meta *last = g[n - 1].meta;
  char rel[PATH_MAX];
  snprintf(rel, sizeof rel, "%s/%s", STORE_SHARD_DIR, rb->names[g[0].shard]);
  for (int64_t k = 0; k < n; k++) {
    store_clip c = g[k].meta->c;
    c.T = g[k].c.T;
    c.H = g[k].c.H;
    c.W = g[k].c.W;
    c.tokens = g[k].c.tokens;
    c.bytes = g[k].c.bytes;
    c.checksum = g[k].c.checksum;
    c.offset = g[k].offset;
    c.shard = rel;
    c.codec = g[k].meta->codec;
    c.pix_fmt = g[k].meta->pix_fmt;
    c.label = g[k].meta->has_label ? g[k].meta->label : NULL;
    // The caption block its metadata names, found by the walk: caption_back bytes before the
    // block (right in a tail copied elsewhere, too), else at the offset it was written at.
    if (c.caption_offset && g[k].meta->caption_back)
      c.caption_offset = g[k].offset - g[k].meta->caption_back;
    if (c.caption_offset) {
      const caption_entry *ce = find_caption(rb, g[k].shard, c.caption_offset);
      if (ce) {
        c.caption_tokens = ce->tokens, c.caption_dim = ce->dim;
        c.caption_checksum = ce->checksum, c.caption = ce->text;
      } else {
        say(rb, "source %s: clip %d in shard %s: its caption block at offset %lld is missing or "
            "damaged; recovered without its caption", last->path, c.clip_index, rel,
            (long long)c.caption_offset);
        c.caption_offset = 0;
      }
    }
    if (store_clip_check(s, &c) != TSR_OK) {
      say(rb, "source %s: clip %d in shard %s at offset %lld disagrees with its metadata (%s); "
          "source not recovered", last->path, c.clip_index, rel, (long long)c.offset, err_msg());
      rb->rep->blocks_left += n;
      return TSR_OK;
    }
    buf[k] = c;
  }
  store_source src = {.path = last->path, .size = last->size, .mtime = last->mtime,
                      .status = SOURCE_DONE, .error = last->note, .partial = last->partial,
                      .decoded_frames = last->source_decoded_frames,
                      .label = last->has_label ? last->label : NULL,
                      .has_scene_cuts = last->has_scene_cuts, .scene_cuts = last->scene_cuts,
                      .n_scene_cuts = last->n_scene_cuts,
                      .manifest_key = last->manifest_key[0] ? last->manifest_key : NULL};
  tsr_status st = index_commit_source(ix, &src, buf, (int)n);
  if (!st) {
    rb->rep->sources++;
    rb->rep->clips += n;
  }
  return st;
}

// Blocks without metadata (version-1 shards): one stand-in source per shard, so their
// clips stay in the store (and are not deleted as unreferenced) while saying what is lost.
static tsr_status commit_unknown(rstate *rb, store_index *ix, const store_settings *s,
                                 entry *g, int64_t n, store_clip *buf) {
  char rel[PATH_MAX], path[PATH_MAX + 64], note[PATH_MAX + 256];
  snprintf(rel, sizeof rel, "%s/%s", STORE_SHARD_DIR, rb->names[g[0].shard]);
  snprintf(path, sizeof path, "unknown-source:%s", rel);
  snprintf(note, sizeof note, "rebuilt by `tessera index recover` from %s, whose blocks carry no "
           "metadata (shard format 1): source path, size, mtime, start, source fps and size, "
           "rotation, aspect ratio, codec, frame counts and label are unknown", rel);
  for (int64_t k = 0; k < n; k++) {
    store_clip c = g[k].c;
    c.clip_index = (int)k;
    c.frames = (int64_t)c.T * s->pt;
    c.duration_s = (double)c.frames * s->fps_den / s->fps_num;
    c.sar_num = c.sar_den = 1;
    c.offset = g[k].offset;
    c.shard = rel;
    buf[k] = c;
  }
  store_source src = {.path = path, .status = SOURCE_DONE, .error = note};
  tsr_status st = index_commit_source(ix, &src, buf, (int)n);
  if (!st) {
    rb->rep->clips_unknown_source += n;
    rb->rep->clips += n;
    say(rb, "shard %s: %lld clips recovered without their source (%s)", rel, (long long)n,
        "format-1 blocks: path, times, codec, frame counts and label unknown; a rerun of "
        "ingest will ingest their sources again");
  }
  return st;
}

tsr_status store_rebuild(const char *dir, void (*sayfn)(const char *, void *), void *ctx,
                         store_rebuild_report *rep) {
  store_rebuild_report tmp;
  if (!rep) rep = &tmp;
  memset(rep, 0, sizeof *rep);
  rstate rb = {.dir = dir, .say = sayfn, .ctx = ctx, .rep = rep};
  store_settings s;
  int have = 0;
  store_index *ix = NULL;
  store_clip *buf = NULL;
  char path[PATH_MAX], aside[PATH_MAX + 64], j1[PATH_MAX + 64], j2[PATH_MAX + 96];
  fs_atomic a = {0};
  tsr_status st = list_shards(dir, &rb.names, &rb.nnames);
  for (int i = 0; !st && i < rb.nnames; i++) st = scan_shard(&rb, i, &s, &have);
  if (st) goto out;
  if (!have) {
    st = err_set(TSR_EFORMAT, "store %s: no shard records the store's settings (fps, short side, "
                 "max seconds): %s; the index cannot be rebuilt. Nothing was changed",
                 dir, rb.nnames ? "all are format-1 shards or unreadable" : "it has no shards");
    goto out;
  }
  if (rb.n) qsort(rb.v, (size_t)rb.n, sizeof *rb.v, cmp_entry);
  if (!(buf = malloc(sizeof *buf * (size_t)(rb.n ? rb.n : 1)))) {
    st = err_set(TSR_ENOMEM, "out of memory rebuilding the index of %s", dir);
    goto out;
  }
  // The new index is built beside the old one (core/fs.h fs_atomic: SQLite writes
  // index.sqlite.tmp) and renamed over it once complete and synced.
  snprintf(path, sizeof path, "%s/%s", dir, STORE_INDEX_NAME);
  if ((st = fs_atomic_name(&a, path))) goto out;
  snprintf(j1, sizeof j1, "%s-journal", a.tmp);
  unlink(a.tmp);
  unlink(j1);
  if ((st = index_open(&ix, a.tmp, 1, &s))) goto out;
  const char *done_path = NULL;  // path of the last source committed (newest ingest wins)
  for (int64_t i = 0; !st && i < rb.n;) {
    int64_t j = i + 1;
    if (!rb.v[i].meta) {  // unknown sources: grouped per shard (entries sort first)
      while (j < rb.n && !rb.v[j].meta && rb.v[j].shard == rb.v[i].shard) j++;
      st = commit_unknown(&rb, ix, &s, &rb.v[i], j - i, buf);
      i = j;
      continue;
    }
    while (j < rb.n && same_group(&rb.v[i], &rb.v[j])) j++;
    const clip_meta *m = rb.v[i].meta;
    int complete = rb.v[j - 1].meta->last;
    for (int64_t k = i; k < j && complete; k++)
      complete = rb.v[k].meta->c.clip_index == k - i && (rb.v[k].meta->last == (k == j - 1));
    if (done_path && !strcmp(done_path, m->path)) {
      rep->blocks_left += j - i;  // an older ingest of a source already recovered
    } else if (!complete) {
      rep->blocks_left += j - i;
      say(&rb, "source %s: %lld clips in shard %s without its last clip (an interrupted ingest; "
          "not recovered, a rerun of ingest does it again)", m->path, (long long)(j - i),
          rb.names[rb.v[i].shard]);
    } else {
      st = commit_group(&rb, ix, &s, &rb.v[i], j - i, buf);
      done_path = m->path;
    }
    i = j;
  }
  if (!st) st = index_order_settle(ix, NULL);  // the ids an ingest of these sources gives
  index_close(&ix);
  if (st) goto out;
  // Keep the old index (whatever it is) beside the store rather than delete it.
  struct stat sb;
  if (stat(path, &sb) == 0) {
    snprintf(aside, sizeof aside, "%s.unusable-%lld", path, (long long)time(NULL));
    if (rename(path, aside) != 0) {
      st = err_set(TSR_EIO, "store %s: move the unusable index aside to %s: %s", dir, aside,
                   strerror(errno));
      goto out;
    }
    rep->old_index_kept = 1;
    snprintf(rep->old_index, sizeof rep->old_index, "%s", aside);
  }
  // A journal of the old index must not be applied to the new one.
  snprintf(j1, sizeof j1, "%s-journal", path);
  snprintf(j2, sizeof j2, "%s-journal", aside);
  if (stat(j1, &sb) == 0 && rename(j1, j2) != 0) {
    st = err_set(TSR_EIO, "store %s: move %s aside: %s", dir, j1, strerror(errno));
    goto out;
  }
  st = fs_atomic_commit(&a);  // fsync, rename over index.sqlite, fsync of the store
  if (st) err_wrap(st, "store %s: ", dir);
out:
  index_close(&ix);
  fs_atomic_abort(&a);
  for (int64_t i = 0; i < rb.n; i++) {
    if (rb.v[i].meta) clip_meta_release(rb.v[i].meta);
    free(rb.v[i].meta);
  }
  free(rb.v);
  for (int64_t i = 0; i < rb.ncaps; i++) free(rb.caps[i].text);
  free(rb.caps);
  free(buf);
  free_names(rb.names, rb.nnames);
  return st;
}
