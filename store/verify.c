// store/verify.c — `tessera index verify`: every shard header, every clip block
// and payload checksum, checked against the index (store/verify.h).
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/verify.h"

#include "core/fs.h"

#include "store/clip.h"
#include "store/index.h"
#include "store/layout.h"
#include "store/lock.h"
#include "store/settings.h"
#include "store/shard.h"
#include "store/store.h"

typedef struct {
  char *name;        // "shards/x.tshard"
  shard_reader *r;   // NULL if the header is bad
  char *error;       // why r is NULL
} shard_ent;

typedef struct {
  const char *dir;
  store_settings s;
  shard_ent *v;
  int n;
  void (*report)(const char *, int, void *);
  void *ctx;
  store_verify_result *res;
} vstate;

static void say(vstate *vs, int problem, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(vstate *vs, int problem, const char *fmt, ...) {
  if (!vs->report) return;
  char line[4096 + 1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  vs->report(line, problem, vs->ctx);
}

static int cmp_ent(const void *a, const void *b) {
  return strcmp(((const shard_ent *)a)->name, ((const shard_ent *)b)->name);
}

static shard_ent *find(vstate *vs, const char *name) {
  shard_ent key = {.name = (char *)name};
  return vs->n ? bsearch(&key, vs->v, (size_t)vs->n, sizeof key, cmp_ent) : NULL;
}

static int check_clip(const store_clip_row *row, void *ctx) {
  vstate *vs = ctx;
  const store_clip *c = &row->c;
  vs->res->clips++;
  char path[PATH_MAX];
  // Sizes in checked 64-bit and the shard path inside the store, before anything is opened.
  if (store_clip_check(&vs->s, c) != TSR_OK ||
      store_shard_path(vs->dir, c->shard, path, sizeof path) != TSR_OK) {
    vs->res->clips_bad++;
    say(vs, 1, "clip %lld (source %s) of store %s: index row invalid: %s", (long long)row->id,
        row->source, vs->dir, err_msg());
    return 0;
  }
  shard_ent *e = find(vs, c->shard);
  if (!e) {
    vs->res->clips_bad++;
    say(vs, 1, "clip %lld (source %s): shard %s offset %lld: shard file missing",
        (long long)row->id, row->source, c->shard, (long long)c->offset);
    return 0;
  }
  if (!e->r) {
    vs->res->clips_bad++;
    say(vs, 1, "clip %lld (source %s): shard %s offset %lld: shard unreadable (%s)",
        (long long)row->id, row->source, c->shard, (long long)c->offset, e->error);
    return 0;
  }
  shard_caption cap;
  if (shard_reader_clip(e->r, c->offset, c->bytes, c->checksum, 1, NULL) != TSR_OK ||
      (c->caption_offset && shard_reader_caption_of(e->r, c, 1, &cap) != TSR_OK)) {
    vs->res->clips_bad++;
    say(vs, 1, "clip %lld (source %s): %s", (long long)row->id, row->source, err_msg());
    return 0;
  }
  vs->res->bytes += c->bytes;
  return 0;
}

// A clip row the index cannot give (index_foreach_clip_checked): counted and reported.
static void bad_row(int64_t id, const char *why, void *ctx) {
  vstate *vs = ctx;
  vs->res->clips++;
  vs->res->clips_bad++;
  say(vs, 1, "clip %lld of store %s: index row damaged: %s (restore index.sqlite from a copy, "
      "or move it aside and rebuild it from the shards: `tessera index recover`)",
      (long long)id, vs->dir, why);
}

tsr_status store_verify(const char *dir, void (*report)(const char *, int, void *), void *ctx,
                        store_verify_result *res) {
  memset(res, 0, sizeof *res);
  store_index *ix = NULL;
  tsr_status st = store_open(&ix, dir, 0, NULL);
  if (st) return st;
  vstate vs = {.dir = dir, .report = report, .ctx = ctx, .res = res};
  index_settings(ix, &vs.s);
  char path[PATH_MAX];

  // Parts left by an interrupted multi-rank ingest.
  snprintf(path, sizeof path, "%s/%s", dir, STORE_PARTS_DIR);
  DIR *d = opendir(path);
  struct dirent *de;
  if (d) {
    while ((de = readdir(d)))
      if (fs_has_suffix(de->d_name, ".sqlite")) {
        res->parts++;
        say(&vs, 0, "note: %s/%s: unmerged part of an interrupted ingest (rerun the ingest or "
            "`tessera index recover`)", STORE_PARTS_DIR, de->d_name);
      }
    closedir(d);
  }

  // Shard headers.
  snprintf(path, sizeof path, "%s/%s", dir, STORE_SHARD_DIR);
  d = opendir(path);
  if (!d) {
    st = err_set(TSR_EIO, "store %s: cannot list %s: %s", dir, path, strerror(errno));
    goto out;
  }
  int cap = 0;
  while ((de = readdir(d))) {
    if (!fs_has_suffix(de->d_name, ".tshard")) continue;
    if (vs.n == cap) {
      cap = cap ? cap * 2 : 64;
      shard_ent *v = realloc(vs.v, sizeof *v * (size_t)cap);
      if (!v) {
        closedir(d);
        st = err_set(TSR_ENOMEM, "out of memory listing shards of %s", dir);
        goto out;
      }
      vs.v = v;
    }
    shard_ent *e = &vs.v[vs.n];
    memset(e, 0, sizeof *e);
    size_t len = strlen(STORE_SHARD_DIR) + 1 + strlen(de->d_name) + 1;
    if (!(e->name = malloc(len))) {
      closedir(d);
      st = err_set(TSR_ENOMEM, "out of memory listing shards of %s", dir);
      goto out;
    }
    snprintf(e->name, len, "%s/%s", STORE_SHARD_DIR, de->d_name);
    vs.n++;
  }
  closedir(d);
  if (vs.n) qsort(vs.v, (size_t)vs.n, sizeof *vs.v, cmp_ent);
  for (int i = 0; i < vs.n; i++) {
    shard_ent *e = &vs.v[i];
    res->shards++;
    snprintf(path, sizeof path, "%s/%s", dir, e->name);
    int64_t end = 0;
    int bad_end = 0;
    if ((st = store_shard_committed_end(ix, path, e->name, &end))) {
      if (st != TSR_EFORMAT) goto out;
      st = TSR_OK;  // damaged rows: a problem to report, not a reason to stop
      bad_end = 1;
      res->shards_bad++;
      say(&vs, 1, "shard %s of store %s: %s", e->name, dir, err_msg());
    }
    if (shard_reader_open(&e->r, path, &vs.s) != TSR_OK) {
      res->shards_bad++;
      e->error = strdup(err_msg());
      say(&vs, 1, "shard %s: %s", e->name, err_msg());
      continue;
    }
    int64_t size = shard_reader_size(e->r);
    if (bad_end) {
      // reported above; its clips are still checked one by one
    } else if (end == 0) {
      res->orphan_shards++;
      say(&vs, 0, "note: shard %s: no clip points at it (%lld bytes; recovery removes it)",
          e->name, (long long)size);
    } else if (size > end) {
      res->tail_bytes += size - end;
      say(&vs, 0, "note: shard %s: %lld bytes past its committed end %lld (uncommitted; recovery "
          "cuts them)", e->name, (long long)(size - end), (long long)end);
    }
  }

  // Clips.
  st = index_foreach_clip_checked(ix, check_clip, bad_row, &vs);
out:
  for (int i = 0; i < vs.n; i++) {
    shard_reader_close(&vs.v[i].r);
    free(vs.v[i].name);
    free(vs.v[i].error);
  }
  free(vs.v);
  index_close(&ix);
  return st;
}

tsr_status store_verify_as_reader(const char *dir,
                                  void (*report)(const char *, int, void *), void *ctx,
                                  store_verify_result *res) {
  char who[1024], note[sizeof who + 4096 + 160];  // the writer and the store's path
  if (store_lock_holder(dir, who, sizeof who) && report) {
    snprintf(note, sizeof note, "note: a writer is active on %s (%s): shard tails and parts "
             "it has not committed yet show as notes", dir, who);
    report(note, 0, ctx);
  }
  store_lock *rlock = NULL;
  tsr_status st = store_lock_read(&rlock, dir);
  if (!st) st = store_verify(dir, report, ctx, res);
  store_lock_release(&rlock);
  return st;
}
