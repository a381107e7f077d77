// store/index.c — writing the index's rows: a source and its clips committed atomically,
// and the sums read over them (committed shard ends, totals). Rules: docs/store-format.md.
#include <inttypes.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/index_internal.h"

#include "store/clip.h"
#include "store/json_cols.h"
#include "store/settings.h"
#include "store/shard_format.h"

tsr_status index_source_lookup(store_index *ix, const char *path, int64_t size, int64_t mtime,
                               source_status *status, int *same_file) {
  *status = SOURCE_NEW;
  if (same_file) *same_file = 0;
  sqlite3_stmt *stmt = NULL;
  tsr_status st =
      index_prepare(ix, "SELECT status, size, mtime FROM sources WHERE path = ?", &stmt);
  if (st) return st;
  index_bind_text(stmt, 1, path);
  int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    const char *s = (const char *)sqlite3_column_text(stmt, 0);
    *status = s && !strcmp(s, "done") ? SOURCE_DONE : SOURCE_FAILED;
    if (same_file)
      *same_file = sqlite3_column_int64(stmt, 1) == size && sqlite3_column_int64(stmt, 2) == mtime;
  } else if (rc != SQLITE_DONE) {
    st = index_sqlite_err(ix, rc, "look up source");
    err_wrap(st, "source %s: ", path);
  }
  sqlite3_finalize(stmt);
  return st;
}

static tsr_status check_clip(store_index *ix, const store_source *src, const store_clip *c, int i) {
  char path[512];
  tsr_status st = store_clip_check(&ix->settings, c);
  if (!st) st = store_shard_path(".", c->shard, path, sizeof path);
  if (st)
    return err_wrap(TSR_EINVAL, "index %s: source %s clip %d (index %d) is inconsistent: ",
                    ix->path, src->path, i, c->clip_index);
  return TSR_OK;
}

tsr_status index_delete_source(store_index *ix, const char *db, const char *path) {
  char sql[256];
  sqlite3_stmt *stmt = NULL;
  snprintf(sql, sizeof sql,
           "DELETE FROM %s.clips WHERE source_id IN (SELECT id FROM %s.sources WHERE path = ?1);"
           , db, db);
  tsr_status st = index_prepare(ix, sql, &stmt);
  if (st) return st;
  index_bind_text(stmt, 1, path);
  int rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return index_sqlite_err(ix, rc, "delete earlier clips");
  snprintf(sql, sizeof sql, "DELETE FROM %s.sources WHERE path = ?1", db);
  if ((st = index_prepare(ix, sql, &stmt))) return st;
  index_bind_text(stmt, 1, path);
  rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return index_sqlite_err(ix, rc, "delete earlier source record");
  return TSR_OK;
}

// The source's own fields: status, scene cuts (their canonical text into *cuts_text,
// malloc'ed; NULL when detection was off) and manifest key.
static tsr_status check_source(store_index *ix, const store_source *src, char **cuts_text) {
  *cuts_text = NULL;
  tsr_status st = TSR_OK;
  if (!src->path || (src->status != SOURCE_DONE && src->status != SOURCE_FAILED))
    st = err_set(TSR_EINVAL, "status must be done or failed");
  else if (src->has_scene_cuts)
    st = store_scene_cuts_format(src->scene_cuts, src->n_scene_cuts, cuts_text);
  if (!st && src->manifest_key) st = store_manifest_key_check(src->manifest_key);
  if (st)
    return err_wrap(TSR_EINVAL, "index %s: commit of source %s: ", ix->path,
                    src->path ? src->path : "(null)");
  return TSR_OK;
}

static tsr_status insert_source(store_index *ix, const store_source *src, int nclips,
                                const char *cuts_text, int64_t *sid) {
  sqlite3_stmt *ss = NULL;
  tsr_status st = index_prepare(ix, "INSERT INTO sources(path, size, mtime, status, error, "
                                "partial, decoded_frames, label, clips, updated_at, scene_cuts, "
                                "manifest_key) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)", &ss);
  if (st) return st;
  index_bind_text(ss, 1, src->path);
  sqlite3_bind_int64(ss, 2, src->size);
  sqlite3_bind_int64(ss, 3, src->mtime);
  index_bind_text(ss, 4, src->status == SOURCE_DONE ? "done" : "failed");
  index_bind_text(ss, 5, src->error);
  sqlite3_bind_int(ss, 6, src->partial ? 1 : 0);
  sqlite3_bind_int64(ss, 7, src->decoded_frames);
  index_bind_text(ss, 8, src->label);
  sqlite3_bind_int(ss, 9, nclips);
  sqlite3_bind_double(ss, 10, index_now());
  index_bind_text(ss, 11, cuts_text);
  index_bind_text(ss, 12, src->manifest_key);
  int rc = sqlite3_step(ss);
  sqlite3_finalize(ss);
  if (rc != SQLITE_DONE) return index_sqlite_err(ix, rc, "insert source");
  *sid = sqlite3_last_insert_rowid(ix->db);
  return TSR_OK;
}

// Binds the caption and manifest columns (25..35) of clip c; scores is its canonical text.
// A caption without an embedding has its text and NULL for the block's columns.
static void bind_clip_extras(sqlite3_stmt *cs, const store_clip *c, const char *scores) {
  if (c->caption_offset) {
    char csum[17];
    snprintf(csum, sizeof csum, "%016" PRIx64, c->caption_checksum);
    index_bind_text(cs, 25, c->caption ? c->caption : "");
    sqlite3_bind_int64(cs, 26, c->caption_offset);
    sqlite3_bind_int(cs, 27, c->caption_tokens);
    sqlite3_bind_int(cs, 28, c->caption_dim);
    index_bind_text(cs, 29, csum);
  } else {  // a caption's text alone (a manifest span's, no embedding), or none
    if (c->caption) index_bind_text(cs, 25, c->caption);
    else sqlite3_bind_null(cs, 25);
    for (int k = 26; k <= 29; k++) sqlite3_bind_null(cs, k);
  }
  if (c->manifest_row > 0) {  // NaN spans: open, NULL (SQLite stores a NaN as NULL too)
    sqlite3_bind_int64(cs, 30, c->manifest_row);
    sqlite3_bind_int(cs, 31, c->manifest_span);
    if (isnan(c->span_start)) sqlite3_bind_null(cs, 32);
    else sqlite3_bind_double(cs, 32, c->span_start);
    if (isnan(c->span_end)) sqlite3_bind_null(cs, 33);
    else sqlite3_bind_double(cs, 33, c->span_end);
    sqlite3_bind_int(cs, 34, c->span_cut);
  } else {
    for (int k = 30; k <= 34; k++) sqlite3_bind_null(cs, k);
  }
  index_bind_text(cs, 35, scores);
}

static tsr_status insert_clip(store_index *ix, sqlite3_stmt *cs, int64_t sid, const store_clip *c) {
  char sum[17], scores[STORE_MAX_SCORES_BYTES + 1];
  tsr_status st = c->scores ? store_scores_canon(c->scores, scores, sizeof scores) : TSR_OK;
  if (st) return st;  // store_clip_check passed: not reached
  snprintf(sum, sizeof sum, "%016" PRIx64, c->checksum);
  sqlite3_reset(cs);
  sqlite3_bind_int64(cs, 1, sid);
  sqlite3_bind_int(cs, 2, c->clip_index);
  sqlite3_bind_double(cs, 3, c->start_s);
  sqlite3_bind_double(cs, 4, c->duration_s);
  sqlite3_bind_double(cs, 5, c->src_fps);
  sqlite3_bind_int(cs, 6, c->src_w);
  sqlite3_bind_int(cs, 7, c->src_h);
  sqlite3_bind_int(cs, 8, c->rotation);
  sqlite3_bind_int(cs, 9, c->sar_num);
  sqlite3_bind_int(cs, 10, c->sar_den);
  index_bind_text(cs, 11, c->codec);
  index_bind_text(cs, 12, c->pix_fmt);
  sqlite3_bind_int64(cs, 13, c->decoded_frames);
  sqlite3_bind_int64(cs, 14, c->frames);
  sqlite3_bind_int64(cs, 15, c->dropped_frames);
  sqlite3_bind_int(cs, 16, c->T);
  sqlite3_bind_int(cs, 17, c->H);
  sqlite3_bind_int(cs, 18, c->W);
  sqlite3_bind_int64(cs, 19, c->tokens);
  index_bind_text(cs, 20, c->shard);
  sqlite3_bind_int64(cs, 21, c->offset);
  sqlite3_bind_int64(cs, 22, c->bytes);
  index_bind_text(cs, 23, sum);
  index_bind_text(cs, 24, c->label);
  bind_clip_extras(cs, c, c->scores ? scores : NULL);
  int rc = sqlite3_step(cs);
  if (rc == SQLITE_DONE) return TSR_OK;
  return err_wrap(index_sqlite_err(ix, rc, "insert clip"), "clip %d (%s offset %lld): ",
                  c->clip_index, c->shard, (long long)c->offset);
}

tsr_status index_commit_source(store_index *ix, const store_source *src,
                               const store_clip *clips, int nclips) {
  char *cuts = NULL;
  if (ix->readonly)
    return err_set(TSR_EIO, "index %s is open read-only: cannot record source %s", ix->path,
                   src->path ? src->path : "(null)");
  tsr_status st = nclips < 0 ? err_set(TSR_EINVAL, "index %s: %d clips", ix->path, nclips)
                             : check_source(ix, src, &cuts);
  for (int i = 0; !st && i < nclips; i++) st = check_clip(ix, src, &clips[i], i);
  if (st) {
    free(cuts);
    return st;
  }
  sqlite3_stmt *cs = NULL;
  int64_t sid = 0;
  if ((st = index_exec(ix, "BEGIN IMMEDIATE", "begin transaction"))) goto fail;
  if ((st = index_delete_source(ix, "main", src->path))) goto fail;
  if (nclips && (st = index_order_note(ix))) goto fail;
  if ((st = insert_source(ix, src, nclips, cuts, &sid))) goto fail;
  if ((st = index_prepare(ix, "INSERT INTO clips(source_id, clip_index, start_s, duration_s, "
                          "src_fps, src_w, src_h, rotation, sar_num, sar_den, codec, pix_fmt, "
                          "decoded_frames, frames, dropped_frames, T, H, W, tokens, shard, offset, "
                          "bytes, checksum, label, caption, caption_offset, caption_tokens, "
                          "caption_dim, caption_checksum, manifest_row, manifest_span, "
                          "span_start, span_end, span_cut, scores) VALUES(?,?,?,?,?,?,?,?,?,?,?,"
                          "?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", &cs)))
    goto fail;
  for (int i = 0; !st && i < nclips; i++) st = insert_clip(ix, cs, sid, &clips[i]);
  sqlite3_finalize(cs);
  cs = NULL;
  if (!st) st = index_exec(ix, "COMMIT", "commit");
  if (!st) {
    free(cuts);
    return TSR_OK;
  }
fail:
  sqlite3_finalize(cs);
  index_rollback(ix);
  free(cuts);
  return err_wrap(st, "commit source %s: ", src->path);
}

// *out = the one integer `sql` selects for the shard (its one parameter), 0 when it selects
// NULL (no clip in the shard); `what` names it in the error.
static tsr_status shard_max(store_index *ix, const char *sql, const char *shard, const char *what,
                            int64_t *out) {
  *out = 0;
  sqlite3_stmt *stmt = NULL;
  tsr_status st = index_prepare(ix, sql, &stmt);
  if (st) return st;
  index_bind_text(stmt, 1, shard);
  int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    if (sqlite3_column_type(stmt, 0) != SQLITE_NULL) *out = sqlite3_column_int64(stmt, 0);
  } else {
    st = index_sqlite_err(ix, rc, what);
    err_wrap(st, "shard %s: ", shard);
  }
  sqlite3_finalize(stmt);
  return st;
}

tsr_status index_shard_end(store_index *ix, const char *shard, int64_t *end) {
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT max(offset + (%d + bytes + %d) / %d * %d) FROM clips WHERE shard = ?",
           SHARD_BLOCK_HEADER_BYTES, SHARD_ALIGN - 1, SHARD_ALIGN, SHARD_ALIGN);
  return shard_max(ix, sql, shard, "committed end of shard", end);
}

tsr_status index_shard_last_block(store_index *ix, const char *shard, int64_t *offset) {
  return shard_max(ix, "SELECT max(offset) FROM clips WHERE shard = ?", shard,
                   "last block of shard", offset);
}

tsr_status index_totals(store_index *ix, store_totals *t) {
  memset(t, 0, sizeof *t);
  sqlite3_stmt *stmt = NULL;
  tsr_status st = index_prepare(ix,
      "SELECT (SELECT count(*) FROM sources WHERE status = 'done'),"
      " (SELECT count(*) FROM sources WHERE status = 'failed'),"
      " (SELECT count(*) FROM sources WHERE status = 'done' AND partial != 0),"
      " count(*), total(tokens), total(frames), total(dropped_frames), total(duration_s)"
      " FROM clips", &stmt);
  if (st) return st;
  int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    t->sources_done = sqlite3_column_int64(stmt, 0);
    t->sources_failed = sqlite3_column_int64(stmt, 1);
    t->sources_partial = sqlite3_column_int64(stmt, 2);
    t->clips = sqlite3_column_int64(stmt, 3);
    // total() is a double; a damaged row can make it exceed int64 (converting such a
    // value is undefined: found by fuzz_index), so it is range-checked first.
    double tot[3] = {sqlite3_column_double(stmt, 4), sqlite3_column_double(stmt, 5),
                     sqlite3_column_double(stmt, 6)};
    int64_t *dst[3] = {&t->tokens, &t->frames, &t->dropped_frames};
    for (int i = 0; i < 3; i++) {
      if (!(tot[i] > -9.2e18 && tot[i] < 9.2e18)) {
        st = err_set(TSR_EFORMAT, "index %s: totals of tokens/frames out of range (%g): a clip "
                     "row is damaged; run `tessera index verify`", ix->path, tot[i]);
        break;
      }
      *dst[i] = (int64_t)tot[i];
    }
    t->seconds = sqlite3_column_double(stmt, 7);
  } else {
    st = index_sqlite_err(ix, rc, "totals");
  }
  sqlite3_finalize(stmt);
  return st;
}
