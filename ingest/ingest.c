// ingest/ingest.c — the ingest driver (ingest.h): sources, skip of done ones, ranks,
// workers, shards and index commits; the source readers (ingest_internal.h) turn each
// source into clip blocks.
#include "ingest/ingest.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/log.h"
#include "ingest/ingest_internal.h"
#include "store/layout.h"
#include "store/lock.h"
#include "store/rebuild.h"
#include "store/recover.h"
#include "store/store.h"

// A shard is closed and a new one started, between sources, once it passes this size. All
// clips of a source go to one shard (the one open when its first clip starts), so a
// source's clips are made durable by one sync and name one shard; shards can therefore
// exceed this by a source's size.
#define SHARD_ROLL_BYTES (1LL << 30)

typedef ingest_run_state run;
typedef ingest_worker worker;

struct ingest_run_state {
  const char *dir;
  const ingest_opts *o;
  char runid[64];
  int rank;
  store_index *ix;           // where this rank commits (main index or its part)
  store_lock *writer;        // rank 0: the store's writer lock, held for the whole job
  pthread_mutex_t lock;      // guards ix, next, counters
  source_file **todo;        // this rank's sources, largest first
  int64_t ntodo, next;
  int64_t bytes_total, bytes_done;
  ingest_result res;
  int threads_per_decoder;
};

static tsr_status clips_push(ingest_clips *c, const store_clip *x) {
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 8;
    store_clip *v = realloc(c->v, (size_t)cap * sizeof *v);
    if (!v) return err_set(TSR_ENOMEM, "out of memory");
    c->v = v;
    c->cap = cap;
  }
  c->v[c->n++] = *x;
  return TSR_OK;
}

// Shard size at which a worker starts a new shard: SHARD_ROLL_BYTES, or
// TESSERA_SHARD_ROLL_BYTES (tests use a tiny value to exercise rolling).
static int64_t shard_roll_bytes(void) {
  const char *e = getenv("TESSERA_SHARD_ROLL_BYTES");
  long long v = e ? atoll(e) : 0;
  return v > 0 ? (int64_t)v : SHARD_ROLL_BYTES;
}

tsr_status ingest_open_shard(worker *wk) {
  run *r = wk->r;
  if (wk->w && shard_writer_size(wk->w) < shard_roll_bytes()) return TSR_OK;
  shard_writer_close(&wk->w);
  snprintf(wk->shard, sizeof wk->shard, "%s/%s-r%d-w%d-%04d.tshard", STORE_SHARD_DIR, r->runid,
           r->rank, wk->id, wk->seq++);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", r->dir, wk->shard);
  return shard_writer_create(&wk->w, path, &r->o->settings);
}

tsr_status ingest_end_source(worker *wk, const store_source *src, int open_clip,
                             int64_t first_block, ingest_clips *clips, tsr_status io) {
  if (open_clip && wk->w) shard_writer_abort_clip(wk->w);
  if (src->status != SOURCE_DONE && first_block >= 0 && wk->w && !io) {
    io = shard_writer_rewind(wk->w, first_block);
    clips->n = 0;
  }
  if (io) clips->n = 0;
  return io;
}

void ingest_label_of(const char *path, int enabled, char *out, size_t n) {
  out[0] = 0;
  if (!enabled) return;
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", path);
  snprintf(out, n, "%s", basename(dirname(tmp)));
}

double ingest_wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

tsr_status ingest_end_clip(worker *wk, store_clip *c, double frame_s, clip_meta *meta,
                           const ingest_text *txt, ingest_clips *clips, int last, int dropped) {
  const store_settings *s = &wk->r->o->settings;
  c->clip_index = clips->n;
  c->duration_s = (double)c->T * s->pt * frame_s;
  c->codec = txt->codec;  // txt outlives the commit of the source's rows; meta does not
  c->pix_fmt = txt->pix_fmt;
  c->frames = (int64_t)c->T * s->pt;
  c->dropped_frames = dropped;
  c->tokens = (int64_t)c->T * c->H * c->W;
  c->bytes = c->tokens * store_token_bytes(s);
  c->shard = wk->shard;
  c->label = txt->label[0] ? txt->label : NULL;
  c->caption = c->caption_offset ? txt->caption : NULL;
  meta->c = *c;
  meta->last = last;
  char *json = NULL;
  size_t n = 0;
  tsr_status st = clip_meta_encode(meta, &json, &n);
  if (st && meta->note[0]) {  // too long: keep the clip, drop the note
    meta->note[0] = 0;
    st = clip_meta_encode(meta, &json, &n);
  }
  if (st) return st;
  st = shard_writer_end_clip_meta(wk->w, c->T, json, n, &c->checksum);
  free(json);
  if (!st) st = clips_push(clips, c);
  return st;
}


// ---- workers --------------------------------------------------------------------------

static void *worker_main(void *arg) {
  worker *wk = arg;
  run *r = wk->r;
  ingest_clips clips = {0};
  ingest_text txt = {0};
  for (;;) {
    pthread_mutex_lock(&r->lock);
    int64_t i = r->next < r->ntodo ? r->next++ : -1;
    pthread_mutex_unlock(&r->lock);
    if (i < 0) break;
    source_file *sf = r->todo[i];
    store_source src;
    clips.n = 0;
    wk->frac = 0;
    wk->cur_size = sf->size;
    free(txt.caption);
    txt.caption = NULL;
    tsr_status st = r->o->reader->source(wk, sf, &src, &clips, &txt);
    if (!st && clips.n) st = shard_writer_sync(wk->w);  // durable before the index row
    if (st) {
      wk->fatal = st;
      snprintf(wk->fatal_msg, sizeof wk->fatal_msg, "%s", err_msg());
      break;
    }
    pthread_mutex_lock(&r->lock);
    st = index_commit_source(r->ix, &src, clips.v, clips.n);
    if (st) {
      wk->fatal = st;
      snprintf(wk->fatal_msg, sizeof wk->fatal_msg, "%s", err_msg());
    } else if (src.status == SOURCE_DONE) {
      r->res.sources_done++;
      r->res.sources_partial += src.partial;
      r->res.clips += clips.n;
      r->res.decoded_frames += src.decoded_frames;
      for (int c = 0; c < clips.n; c++) {
        r->res.tokens += clips.v[c].tokens;
        r->res.output_frames += clips.v[c].frames;
      }
    } else {
      r->res.sources_failed++;
    }
    r->bytes_done += sf->size;
    wk->frac = 0;
    pthread_mutex_unlock(&r->lock);
    if (st) break;
    if (src.status == SOURCE_FAILED) log_warn("failed: %s", src.error);
    else if (src.partial) log_warn("partial: %s: %s", src.path, src.error);
  }
  free(clips.v);
  free(txt.caption);
  shard_writer_close(&wk->w);
  return NULL;
}

// ---- the run --------------------------------------------------------------------------

static int by_size_desc(const void *a, const void *b) {
  const source_file *x = *(source_file *const *)a, *y = *(source_file *const *)b;
  if (x->size != y->size) return x->size < y->size ? 1 : -1;
  return strcmp(x->path, y->path);
}

// Rank 0 opens (creating) and recovers the store; the others learn the outcome, so every
// rank fails together with rank 0's message.
static tsr_status open_store_all(run *r) {
  char msg[1024] = "";
  int64_t code = 0;
  if (r->rank == 0) {
    store_index *ix = NULL;
    char why[1024];
    // One writer per store (store/lock.h); the other ranks write only what rank 0 arranges.
    tsr_status st = store_lock_acquire(&r->writer, r->dir, 1);
    if (!st) st = store_index_state(r->dir, why, sizeof why);
    if (!st && why[0])
      st = err_set(TSR_EFORMAT, "store %s has clips in its shards but %s. Ingest would treat "
                   "them as garbage and delete them, so it stops here; nothing was changed. "
                   "Run `tessera index recover %s` to rebuild the index from the shards",
                   r->dir, why, r->dir);
    if (!st) st = store_open(&ix, r->dir, 1, &r->o->settings);
    if (!st) st = store_recover(r->dir, ix);
    index_close(&ix);
    code = st;
    if (st) snprintf(msg, sizeof msg, "%s", err_msg());
    snprintf(r->runid, sizeof r->runid, "%lx-%x", (unsigned long)time(NULL), (unsigned)getpid());
  }
  tsr_status cst = comm_bcast(&code, sizeof code, 0);
  if (!cst) cst = comm_bcast(msg, sizeof msg, 0);
  if (!cst) cst = comm_bcast(r->runid, sizeof r->runid, 0);
  if (cst) return cst;
  if (code) return err_set((tsr_status)code, "%s", msg);
  return TSR_OK;
}

// --captions: whether the caption file beside a done video (VIDEO.caption.safetensors) was
// added or changed since the video's record was committed (*news = 1: the video is ingested
// again, with it) or removed (*news = -1: reported; its clips keep the caption the store
// has). A change is seen by the file's mtime (a copy that keeps an older mtime is not).
static tsr_status caption_news(store_index *ix, const char *video, int *news) {
  *news = 0;
  char cpath[PATH_MAX + 32];
  snprintf(cpath, sizeof cpath, "%s.caption.safetensors", video);
  double at = 0;
  int has = 0;
  tsr_status st = index_source_caption(ix, video, &at, &has);
  if (st) return st;
  struct stat sb;
  if (stat(cpath, &sb) != 0) {
    if (has) *news = -1;
    return TSR_OK;
  }
  double mt = (double)sb.st_mtim.tv_sec + 1e-9 * (double)sb.st_mtim.tv_nsec;
  if (!has || mt > at) *news = 1;
  return TSR_OK;
}

// Rank 0's note of the sources that caption_news found (counts, and the first of each).
static void caption_report(int64_t added, const char *first_added, int64_t removed,
                           const char *first_removed) {
  if (comm_rank() != 0) return;
  if (added)
    log_info("ingest: %lld source%s ingested again: a caption file (VIDEO.caption.safetensors) "
             "was added or changed after %s ingested (first: %s)", (long long)added,
             added == 1 ? " is" : "s are", added == 1 ? "it was" : "they were", first_added);
  if (removed)
    log_warn("ingest: %lld source%s a caption in the store but no caption file any more (first: "
             "%s): %s the stored caption (ingest into a new store to leave it out)",
             (long long)removed, removed == 1 ? " has" : "s have", first_removed,
             removed == 1 ? "its clips keep" : "their clips keep");
}

tsr_status ingest_run(const char *out, char **srcs, int nsrcs, const ingest_opts *o,
                      ingest_result *res) {
  run r = {.dir = out, .o = o, .rank = comm_rank()};
  const int world = comm_size();
  source_list list = {0};
  worker *wk = NULL;
  pthread_t *th = NULL;
  tsr_status st;
  double t0 = time_now();
  memset(res, 0, sizeof *res);
  pthread_mutex_init(&r.lock, NULL);

  if (!o->reader) {
    st = err_set(TSR_EINVAL, "ingest: no source reader given (videos or latent files)");
    goto out;
  }
  if ((st = sources_expand(srcs, nsrcs, o->reader->accept_name, &list))) goto out;
  if (list.links && r.rank == 0)
    log_info("ingest: %lld path%s named a file listed under another name (a link): each file "
             "is ingested once", (long long)list.links, list.links == 1 ? "" : "s");
  if ((st = open_store_all(&r))) goto out;

  // Every rank reads the same index to decide what is left, then takes its share.
  store_index *main_ix = NULL;
  char path[PATH_MAX];
  if ((st = store_open(&main_ix, out, 0, &o->settings))) goto out;
  r.todo = calloc((size_t)list.n + 1, sizeof *r.todo);
  source_file **pending = calloc((size_t)list.n + 1, sizeof *pending);
  int64_t npending = 0;
  if (!r.todo || !pending) {
    free(pending);
    index_close(&main_ix);
    st = err_set(TSR_ENOMEM, "out of memory");
    goto out;
  }
  int64_t cap_added = 0, cap_removed = 0;
  const char *cap_first[2] = {"", ""};
  for (int64_t i = 0; i < list.n; i++) {
    source_status ss;
    int same = 0, news = 0;
    st = index_source_lookup(main_ix, list.v[i].path, list.v[i].size, list.v[i].mtime, &ss, &same);
    if (!st && same && ss == SOURCE_DONE && o->captions)
      st = caption_news(main_ix, list.v[i].path, &news);
    if (st) {
      free(pending);
      index_close(&main_ix);
      goto out;
    }
    if (news > 0 && !cap_added++) cap_first[0] = list.v[i].path;
    if (news < 0 && !cap_removed++) cap_first[1] = list.v[i].path;
    if (news > 0) same = 0;  // taken again, with its caption
    if (same && (ss == SOURCE_DONE || (ss == SOURCE_FAILED && !o->retry_failed))) {
      res->sources_skipped++;
      res->sources_failed_kept += ss == SOURCE_FAILED;
      continue;
    }
    pending[npending++] = &list.v[i];
  }
  res->sources_total = list.n;
  caption_report(cap_added, cap_first[0], cap_removed, cap_first[1]);
  // Balance bytes across ranks: largest first onto the least-loaded rank (deterministic).
  qsort(pending, (size_t)npending, sizeof *pending, by_size_desc);
  int64_t *load = calloc((size_t)world, sizeof *load);
  for (int64_t i = 0; i < npending && load; i++) {
    int best = 0;
    for (int k = 1; k < world; k++)
      if (load[k] < load[best]) best = k;
    load[best] += pending[i]->size + 1;
    if (best == r.rank) {
      r.todo[r.ntodo++] = pending[i];
      r.bytes_total += pending[i]->size;
    }
  }
  free(load);
  free(pending);
  if (world > 1) {  // each rank commits to its own part; rank 0 merges them at the end
    index_close(&main_ix);
    snprintf(path, sizeof path, "%s/%s/rank-%d-%s.sqlite", out, STORE_PARTS_DIR, r.rank, r.runid);
    if ((st = index_open(&r.ix, path, 1, &o->settings))) goto out;
  } else {
    r.ix = main_ix;
  }

  int cores = comm_local_cores();
  int nw = o->workers > 0 ? o->workers : cores;
  if (nw > r.ntodo) nw = (int)(r.ntodo ? r.ntodo : 1);
  r.threads_per_decoder = cores / nw > 1 ? cores / nw : 1;
  wk = calloc((size_t)nw, sizeof *wk);
  th = calloc((size_t)nw, sizeof *th);
  if (!wk || !th) {
    st = err_set(TSR_ENOMEM, "out of memory");
    goto out;
  }
  if (r.ntodo)
    log_info("ingest: %lld sources to do (%lld already in the store), %d workers", (long long)r.ntodo,
             (long long)res->sources_skipped, nw);
  int started = 0;
  for (int i = 0; i < nw && r.ntodo; i++, started++) {
    wk[i] = (worker){.r = &r, .o = o, .id = i, .threads = r.threads_per_decoder};
    if (pthread_create(&th[i], NULL, worker_main, &wk[i])) {
      st = err_set(TSR_EIO, "cannot start worker thread");
      break;
    }
  }
  progress pg;
  progress_begin(&pg, "ingest");
  for (int running = started; running;) {
    pthread_mutex_lock(&r.lock);
    double frac_bytes = (double)r.bytes_done;  // finished sources + share of those in flight
    for (int i = 0; i < started; i++)
      frac_bytes += (wk[i].frac > 1 ? 1 : wk[i].frac) * (double)wk[i].cur_size;
    int64_t done = r.res.sources_done + r.res.sources_failed, frames = r.res.output_frames;
    int64_t dec = r.res.decoded_frames;
    pthread_mutex_unlock(&r.lock);
    double el = time_now() - t0;
    if (o->progress)
      progress_update(&pg, frac_bytes, (double)(r.bytes_total ? r.bytes_total : 1), 0,
                      "sources %lld/%lld | %.0f source frames/s | %.0f tokens-frames/s",
                      (long long)done, (long long)r.ntodo, el > 0 ? dec / el : 0,
                      el > 0 ? frames / el : 0);
    if (done >= r.ntodo) break;
    int fatal = 0;
    for (int i = 0; i < started; i++) fatal |= wk[i].fatal != TSR_OK;
    if (fatal) break;
    usleep(100000);
  }
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  if (o->progress && r.ntodo) progress_end(&pg);
  for (int i = 0; i < started && !st; i++)
    if (wk[i].fatal) st = err_set(wk[i].fatal, "%s", wk[i].fatal_msg);
  index_close(&r.ix);

  // Collect the parts into the main index (rank 0) and the counts (everyone).
  {
    int64_t failed = st ? 1 : 0;
    tsr_status cst = comm_allreduce_max_i64(&failed, 1);
    if (cst && !st) st = cst;
    if (!st && failed) st = err_set(TSR_EIO, "another rank stopped with an error (see its log)");
  }
  if (!st && world > 1 && r.rank == 0) {
    store_index *ix = NULL;
    if (!(st = store_open(&ix, out, 0, &o->settings))) st = store_recover(out, ix);
    index_close(&ix);
  }
  int64_t counts[8] = {r.res.sources_done, r.res.sources_failed, r.res.sources_partial,
                       r.res.clips, r.res.tokens, r.res.decoded_frames, r.res.output_frames, 0};
  tsr_status cst = comm_allreduce_sum_i64(counts, 8);
  if (!st) st = cst;
  res->sources_done = counts[0];
  res->sources_failed = counts[1];
  res->sources_partial = counts[2];
  res->clips = counts[3];
  res->tokens = counts[4];
  res->decoded_frames = counts[5];
  res->output_frames = counts[6];
  if (!st) st = comm_barrier();
out:
  res->seconds = time_now() - t0;
  free(wk);
  free(th);
  free(r.todo);
  sources_free(&list);
  store_lock_release(&r.writer);
  pthread_mutex_destroy(&r.lock);
  return st;
}
