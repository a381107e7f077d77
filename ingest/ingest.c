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
#include "ingest/manifest_jobs.h"
#include "store/caption_encoder.h"
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
  pthread_mutex_t lock;      // guards ix, next, counters, caption_encoder
  char caption_encoder[STORE_MAX_CAPTION_ENCODER_BYTES];  // the record ix holds ("": none seen)
  source_file **todo;        // this rank's sources, largest first
  int64_t ntodo, next;
  manifest_jobs *jobs;       // a manifest ingest: the units instead of todo
  int workers_left;          // workers still running
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
  // The source's caption (a caption file): its clips' text comes with its block. A manifest
  // span's text is the reader's (with or without an embedding).
  if (!wk->unit) c->caption = c->caption_offset ? txt->caption : NULL;
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

// The next source of this rank (*sf NULL at the end): the next of the list, or of a manifest
// ingest the next unit still to do (its video's file in *usf). Under r->lock.
static tsr_status next_source(run *r, manifest_unit *unit, source_file *usf, source_file **sf) {
  *sf = NULL;
  if (!r->jobs) {
    if (r->next < r->ntodo) *sf = r->todo[r->next++];
    return TSR_OK;
  }
  int got = 0;
  tsr_status st = manifest_jobs_next(r->jobs, unit, usf, &got);
  if (!st && got) {
    *sf = usf;
    r->ntodo++;
    r->bytes_total += usf->size;
  }
  return st;
}

// A stop of the worker: the error (with its message) that ends its work.
static void worker_stop(worker *wk, tsr_status st) {
  wk->fatal = st;
  snprintf(wk->fatal_msg, sizeof wk->fatal_msg, "%s", err_msg());
}

// The encoder record `raw` of caption or latent file `what`'s caption (metadata
// caption_encoder) recorded in r->ix, canonical (store/caption_encoder.h): a store already
// holding another is TSR_EMISMATCH, naming the file. Under r->lock.
static tsr_status record_caption_encoder(run *r, const char *what, const char *raw) {
  caption_encoder e;
  char text[STORE_MAX_CAPTION_ENCODER_BYTES];
  tsr_status st = caption_encoder_parse(raw, what, &e);
  if (!st) st = caption_encoder_format(&e, text, sizeof text);
  if (!st && !strcmp(text, r->caption_encoder)) return TSR_OK;  // recorded already
  if (!st) st = index_set_caption_encoder(r->ix, text);
  if (st) return err_wrap(st, "the caption of %s: ", what);
  snprintf(r->caption_encoder, sizeof r->caption_encoder, "%s", text);
  return TSR_OK;
}

// Commits a source read by the worker (its shard bytes already durable) and counts it.
// Under r->lock.
static tsr_status commit_source(run *r, const source_file *sf, const store_source *src,
                                const ingest_clips *clips, const ingest_text *txt) {
  tsr_status st = src->status == SOURCE_DONE && txt->caption_encoder[0]
                  ? record_caption_encoder(r, sf->path, txt->caption_encoder) : TSR_OK;
  if (!st) st = index_commit_source(r->ix, src, clips->v, clips->n);
  if (st) return st;
  if (src->status == SOURCE_DONE) {
    r->res.sources_done++;
    r->res.sources_partial += src->partial;
    r->res.clips += clips->n;
    r->res.decoded_frames += src->decoded_frames;
    for (int c = 0; c < clips->n; c++) {
      r->res.tokens += clips->v[c].tokens;
      r->res.output_frames += clips->v[c].frames;
    }
  } else {
    r->res.sources_failed++;
  }
  r->bytes_done += sf->size;
  return TSR_OK;
}

static void *worker_main(void *arg) {
  worker *wk = arg;
  run *r = wk->r;
  ingest_clips clips = {0};
  ingest_text txt = {0};
  manifest_unit unit = {0};
  source_file unit_sf;
  for (;;) {
    source_file *sf = NULL;
    pthread_mutex_lock(&r->lock);
    tsr_status st = next_source(r, &unit, &unit_sf, &sf);
    if (st) worker_stop(wk, st);
    pthread_mutex_unlock(&r->lock);
    if (!sf) break;
    wk->unit = r->jobs ? &unit : NULL;
    store_source src;
    clips.n = 0;
    wk->frac = 0;
    wk->cur_size = sf->size;
    free(txt.caption);
    txt.caption = NULL;
    txt.caption_encoder[0] = 0;
    txt.ncuts = 0;
    st = r->o->reader->source(wk, sf, &src, &clips, &txt);
    if (!st && clips.n) st = shard_writer_sync(wk->w);  // durable before the index row
    if (!st) {
      pthread_mutex_lock(&r->lock);
      st = commit_source(r, sf, &src, &clips, &txt);
      wk->frac = 0;
      pthread_mutex_unlock(&r->lock);
    }
    if (st) {
      worker_stop(wk, st);
      break;
    }
    if (src.status == SOURCE_FAILED) log_warn("failed: %s", src.error);
    else if (src.partial) log_warn("partial: %s: %s", src.path, src.error);
  }
  free(clips.v);
  free(txt.caption);
  free(txt.cuts);
  manifest_unit_free(&unit);
  wk->unit = NULL;
  shard_writer_close(&wk->w);
  pthread_mutex_lock(&r->lock);
  r->workers_left--;
  pthread_mutex_unlock(&r->lock);
  return NULL;
}

// ---- the run --------------------------------------------------------------------------

static int by_size_desc(const void *a, const void *b) {
  const source_file *x = *(source_file *const *)a, *y = *(source_file *const *)b;
  if (x->size != y->size) return x->size < y->size ? 1 : -1;
  return strcmp(x->path, y->path);
}

// A manifest ingest's filter, recorded in the store (one store, one filter): a store made
// with another is refused, naming both.
static tsr_status record_filters(store_index *ix, const manifest_filter *f) {
  char text[STORE_MAX_FILTERS_BYTES];
  tsr_status st = manifest_filter_format(f, text, sizeof text);
  if (!st) st = index_set_filters(ix, text);
  if (st == TSR_EMISMATCH)
    return err_wrap(st, "the store was made with other manifest filters (make a new store for "
                    "these, then `tessera index merge` if both are wanted): ");
  return st;
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
    if (!st && r->o->manifest) st = record_filters(ix, &r->o->manifest->filter);
    if (!st && r->o->caption_encoder) st = index_set_caption_encoder(ix, r->o->caption_encoder);
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

// The caption file of a video (ingest_opts.caption_path; ingest_internal.h).
void ingest_caption_path(const ingest_opts *o, const char *video, char *out, size_t cap) {
  if (o->caption_path) o->caption_path(o->caption_ctx, video, out, cap);
  else snprintf(out, cap, "%s.caption.safetensors", video);
}

// --captions: whether the caption file beside a done video (VIDEO.caption.safetensors) was
// added or changed since the video's record was committed (*news = 1: the video is ingested
// again, with it) or removed (*news = -1: reported; its clips keep the caption the store
// has). A change is seen by the file's mtime (a copy that keeps an older mtime is not).
static tsr_status caption_news(const ingest_opts *o, store_index *ix, const char *video,
                               int *news) {
  *news = 0;
  char cpath[PATH_MAX + 32];
  ingest_caption_path(o, video, cpath, sizeof cpath);
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

// File sources: every rank reads the same index to decide what is left (the list is sorted
// the same everywhere), then takes its share, balancing bytes: largest first onto the
// least-loaded rank (deterministic).
static tsr_status plan_files(run *r, store_index *main_ix, source_list *list,
                             ingest_result *res) {
  const ingest_opts *o = r->o;
  const int world = comm_size();
  r->todo = calloc((size_t)list->n + 1, sizeof *r->todo);
  source_file **pending = calloc((size_t)list->n + 1, sizeof *pending);
  int64_t *load = calloc((size_t)world, sizeof *load);
  int64_t npending = 0, cap_added = 0, cap_removed = 0;
  const char *cap_first[2] = {"", ""};
  tsr_status st = TSR_OK;
  if (!r->todo || !pending || !load) st = err_set(TSR_ENOMEM, "out of memory");
  for (int64_t i = 0; !st && i < list->n; i++) {
    source_status ss;
    int same = 0, news = 0;
    st = index_source_lookup(main_ix, list->v[i].path, list->v[i].size, list->v[i].mtime, &ss,
                             &same);
    if (!st && same && ss == SOURCE_DONE && o->captions)
      st = caption_news(o, main_ix, list->v[i].path, &news);
    if (st) break;
    if (news > 0 && !cap_added++) cap_first[0] = list->v[i].path;
    if (news < 0 && !cap_removed++) cap_first[1] = list->v[i].path;
    if (news > 0) same = 0;  // taken again, with its caption
    if (same && (ss == SOURCE_DONE || (ss == SOURCE_FAILED && !o->retry_failed))) {
      res->sources_skipped++;
      res->sources_failed_kept += ss == SOURCE_FAILED;
      continue;
    }
    pending[npending++] = &list->v[i];
  }
  res->sources_total = list->n;
  if (!st) caption_report(cap_added, cap_first[0], cap_removed, cap_first[1]);
  if (!st) qsort(pending, (size_t)npending, sizeof *pending, by_size_desc);
  for (int64_t i = 0; !st && i < npending; i++) {
    int best = 0;
    for (int k = 1; k < world; k++)
      if (load[k] < load[best]) best = k;
    load[best] += pending[i]->size + 1;
    if (best == r->rank) {
      r->todo[r->ntodo++] = pending[i];
      r->bytes_total += pending[i]->size;
    }
  }
  free(load);
  free(pending);
  return st;
}

// Starts the workers (*started of them): the --workers asked for, else one per core, no
// more than the sources of a file list.
static tsr_status start_workers(run *r, worker **wk, pthread_t **th, int *started) {
  int cores = comm_local_cores();
  int nw = r->o->workers > 0 ? r->o->workers : cores;
  if (!r->jobs && nw > r->ntodo) nw = (int)(r->ntodo ? r->ntodo : 1);
  r->threads_per_decoder = cores / nw > 1 ? cores / nw : 1;
  *started = 0;
  *wk = calloc((size_t)nw, sizeof **wk);
  *th = calloc((size_t)nw, sizeof **th);
  if (!*wk || !*th) return err_set(TSR_ENOMEM, "out of memory");
  if (!r->jobs && !r->ntodo) return TSR_OK;
  if (r->ntodo)
    log_info("ingest: %lld sources to do (%lld already in the store), %d workers",
             (long long)r->ntodo, (long long)r->res.sources_skipped, nw);
  r->workers_left = nw;
  for (int i = 0; i < nw; i++) {
    (*wk)[i] = (worker){.r = r, .o = r->o, .id = i, .threads = r->threads_per_decoder};
    if (pthread_create(&(*th)[i], NULL, worker_main, &(*wk)[i])) {
      pthread_mutex_lock(&r->lock);
      r->workers_left -= nw - i;
      pthread_mutex_unlock(&r->lock);
      return err_set(TSR_EIO, "cannot start worker thread");
    }
    (*started)++;
  }
  return TSR_OK;
}

// The progress line until every worker is done (or one stopped on an error).
static void watch_workers(run *r, worker *wk, int started, double t0) {
  progress pg;
  progress_begin(&pg, "ingest");
  for (;;) {
    pthread_mutex_lock(&r->lock);
    double frac_bytes = (double)r->bytes_done;  // finished sources + share of those in flight
    for (int i = 0; i < started; i++)
      frac_bytes += (wk[i].frac > 1 ? 1 : wk[i].frac) * (double)wk[i].cur_size;
    int64_t done = r->res.sources_done + r->res.sources_failed, frames = r->res.output_frames;
    int64_t dec = r->res.decoded_frames, todo = r->ntodo;
    int left = r->workers_left, fatal = 0;
    for (int i = 0; i < started; i++) fatal |= wk[i].fatal != TSR_OK;
    pthread_mutex_unlock(&r->lock);
    double el = time_now() - t0;
    if (r->o->progress)
      progress_update(&pg, frac_bytes, (double)(r->bytes_total ? r->bytes_total : 1), 0,
                      "sources %lld/%lld%s | %.0f source frames/s | %.0f tokens-frames/s",
                      (long long)done, (long long)todo, r->jobs && left ? "+" : "",
                      el > 0 ? dec / el : 0, el > 0 ? frames / el : 0);
    if (left <= 0 || fatal) break;
    usleep(100000);
  }
  if (r->o->progress && r->ntodo) progress_end(&pg);
}

// The manifest's counts (moving its tallies) and this rank's units into res.
static void manifest_counts(manifest_jobs *j, ingest_result *res) {
  manifest_jobs_counts c;
  manifest_units_stats *s = manifest_jobs_stats(j, &c);
  res->rows = s->rows;
  res->spans_kept = s->kept;
  res->spans_filtered += s->filtered;
  res->errors += s->errors;
  res->filtered_by = s->filtered_by;
  res->errors_by = s->errors_by;
  s->filtered_by = (manifest_tally){0};
  s->errors_by = (manifest_tally){0};
  res->sources_total = c.taken + c.skipped + c.failed_kept;
  res->sources_skipped = c.skipped + c.failed_kept;
  res->sources_failed_kept = c.failed_kept;
}

// This rank's workers' span counts and reasons into res.
static void add_worker_counts(worker *wk, int n, ingest_result *res) {
  for (int i = 0; i < n; i++) {
    res->spans_filtered += wk[i].spans_filtered;
    res->spans_failed += wk[i].spans_failed;
    res->scene_cuts += wk[i].scene_cuts;
    manifest_tally_merge(&res->filtered_by, &wk[i].filtered_by);
    manifest_tally_merge(&res->errors_by, &wk[i].failed_by);
    manifest_tally_free(&wk[i].filtered_by);
    manifest_tally_free(&wk[i].failed_by);
  }
}

// The counts of every rank into res (sums; a manifest's rows and reasons are rank 0's,
// which read them all like every rank).
static tsr_status sum_counts(run *r, ingest_result *res) {
  int64_t c[15] = {r->res.sources_done, r->res.sources_failed, r->res.sources_partial,
                   r->res.clips, r->res.tokens, r->res.decoded_frames, r->res.output_frames,
                   res->spans_filtered - r->res.spans_filtered, res->spans_failed,
                   res->scene_cuts, 0, 0, 0, 0, 0};
  if (r->jobs) {
    c[10] = res->sources_total;
    c[11] = res->sources_skipped;
    c[12] = res->sources_failed_kept;
  }
  tsr_status st = comm_allreduce_sum_i64(c, 15);
  res->sources_done = c[0];
  res->sources_failed = c[1];
  res->sources_partial = c[2];
  res->clips = c[3];
  res->tokens = c[4];
  res->decoded_frames = c[5];
  res->output_frames = c[6];
  res->spans_filtered = r->res.spans_filtered + c[7];
  res->spans_failed = c[8];
  res->scene_cuts = c[9];
  if (r->jobs) {
    res->sources_total = c[10];
    res->sources_skipped = c[11];
    res->sources_failed_kept = c[12];
  }
  return st;
}

// After the workers: every rank learns whether one failed; rank 0 merges the parts of a
// multi-rank job into the main index and numbers the job's clips in their sources' order
// (index_order_settle; a job that failed leaves that to the next).
static tsr_status finish_ranks(run *r, tsr_status st) {
  int64_t failed = st ? 1 : 0;
  tsr_status cst = comm_allreduce_max_i64(&failed, 1);
  if (cst && !st) st = cst;
  if (!st && failed) st = err_set(TSR_EIO, "another rank stopped with an error (see its log)");
  if (!st && r->rank == 0) {
    store_index *ix = NULL;
    st = store_open(&ix, r->dir, 0, &r->o->settings);
    if (!st && comm_size() > 1) st = store_recover(r->dir, ix);
    if (!st) st = index_order_settle(ix, NULL);
    index_close(&ix);
  }
  return st;
}

// Where this rank commits: the main index alone, or its part of a multi-rank job (the
// main index then stays open for a manifest's lookups of what is done).
static tsr_status open_commit_index(run *r, store_index **main_ix) {
  if (comm_size() == 1) {
    r->ix = *main_ix;
    *main_ix = NULL;
    return TSR_OK;
  }
  if (!r->jobs) index_close(main_ix);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s/rank-%d-%s.sqlite", r->dir, STORE_PARTS_DIR, r->rank,
           r->runid);
  return index_open(&r->ix, path, 1, &r->o->settings);
}

tsr_status ingest_run(const char *out, char **srcs, int nsrcs, const ingest_opts *o,
                      ingest_result *res) {
  run r = {.dir = out, .o = o, .rank = comm_rank()};
  source_list list = {0};
  store_index *main_ix = NULL;
  worker *wk = NULL;
  pthread_t *th = NULL;
  int started = 0;
  tsr_status st;
  double t0 = time_now();
  memset(res, 0, sizeof *res);
  pthread_mutex_init(&r.lock, NULL);

  if (!o->reader) {
    st = err_set(TSR_EINVAL, "ingest: no source reader given (videos or latent files)");
    goto out;
  }
  if (!o->manifest && (st = sources_expand(srcs, nsrcs, o->reader->accept_name, &list)))
    goto out;
  if (list.links && r.rank == 0)
    log_info("ingest: %lld path%s named a file listed under another name (a link): each file "
             "is ingested once", (long long)list.links, list.links == 1 ? "" : "s");
  if ((st = open_store_all(&r))) goto out;
  if ((st = store_open(&main_ix, out, 0, &o->settings))) goto out;
  const ingest_manifest *mf = o->manifest;
  st = mf ? manifest_jobs_open(&r.jobs, mf->path, &mf->opts, &mf->filter, mf->embeddings, r.rank,
                               comm_size(), main_ix, o->retry_failed)
          : plan_files(&r, main_ix, &list, res);
  r.res.sources_skipped = res->sources_skipped;
  if (!st) st = open_commit_index(&r, &main_ix);
  if (!st) st = start_workers(&r, &wk, &th, &started);
  if (started) watch_workers(&r, wk, started, t0);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < started && !st; i++)
    if (wk[i].fatal) st = err_set(wk[i].fatal, "%s", wk[i].fatal_msg);
  index_close(&r.ix);
  index_close(&main_ix);
  if (r.jobs) manifest_counts(r.jobs, res);
  r.res.spans_filtered = res->spans_filtered;  // the manifest's own: not summed over ranks
  add_worker_counts(wk, started, res);
  st = finish_ranks(&r, st);
  tsr_status cst = sum_counts(&r, res);
  if (!st) st = cst;
  if (!st) st = comm_barrier();
out:
  res->seconds = time_now() - t0;
  manifest_jobs_close(&r.jobs);
  free(wk);
  free(th);
  free(r.todo);
  sources_free(&list);
  store_lock_release(&r.writer);
  pthread_mutex_destroy(&r.lock);
  return st;
}

void ingest_result_free(ingest_result *res) {
  manifest_tally_free(&res->filtered_by);
  manifest_tally_free(&res->errors_by);
}

tsr_status ingest_check_sources(char **srcs, int n) {
  for (int i = 0; i < n; i++) {
    const char *p = srcs[i][0] == '@' ? srcs[i] + 1 : srcs[i];
    struct stat sb;
    if (stat(p, &sb))
      return err_set(TSR_EIO, "%s%s: %s; nothing was ingested and no store was created or "
                     "changed", srcs[i][0] == '@' ? "source list " : "source ", p,
                     strerror(errno));
  }
  return TSR_OK;
}
