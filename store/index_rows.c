// store/index_rows.c — reading the index's rows back (store/index.h): clips (checked as they
// are read: SQLite returns whatever a damaged or edited file holds), failed sources and
// clip lengths.
#include <errno.h>
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

static void copy_str(char *dst, size_t n, const unsigned char *s) {
  snprintf(dst, n, "%s", s ? (const char *)s : "");
}

// Column i as an int; *bad is set when the stored value does not fit (SQLite would
// otherwise truncate it silently: a T of 2^32 + 1 would read as 1).
static int col_int(sqlite3_stmt *stmt, int i, int *bad) {
  int64_t v = sqlite3_column_int64(stmt, i);
  if (v < INT32_MIN || v > INT32_MAX) *bad = 1;
  return (int)v;
}

// Columns of index_clip_columns: 30..35 are the manifest columns (NULL before version 3);
// the checked walk adds the clip's source id and its source row's id after them.
enum { COL_MROW = 30, COL_MSPAN, COL_SPAN_START, COL_SPAN_END, COL_SPAN_CUT, COL_SCORES,
       COL_SOURCE_ID, COL_SOURCE_ROW };

// Column i as a real, NaN when NULL; *bad is set for a value that is no number.
static double col_span(sqlite3_stmt *stmt, int i, int *bad) {
  int t = sqlite3_column_type(stmt, i);
  if (t == SQLITE_NULL) return NAN;
  if (t != SQLITE_INTEGER && t != SQLITE_FLOAT) *bad = 1;
  return sqlite3_column_double(stmt, i);
}

// The manifest columns and scores of a row into o (their rules: store_clip_check).
static tsr_status read_manifest(store_index *ix, sqlite3_stmt *stmt, store_clip_row *o) {
  store_clip *c = &o->c;
  int bad = 0;
  c->span_start = c->span_end = NAN;
  if (sqlite3_column_type(stmt, COL_MROW) != SQLITE_NULL) {
    bad = sqlite3_column_type(stmt, COL_MROW) != SQLITE_INTEGER ||
          sqlite3_column_type(stmt, COL_MSPAN) != SQLITE_INTEGER ||
          sqlite3_column_type(stmt, COL_SPAN_CUT) != SQLITE_INTEGER;
    c->manifest_row = sqlite3_column_int64(stmt, COL_MROW);
    c->manifest_span = col_int(stmt, COL_MSPAN, &bad);
    c->span_start = col_span(stmt, COL_SPAN_START, &bad);
    c->span_end = col_span(stmt, COL_SPAN_END, &bad);
    c->span_cut = col_int(stmt, COL_SPAN_CUT, &bad);
    if (bad || c->manifest_row < 1)
      return err_set(TSR_EFORMAT, "index %s: clip %" PRId64 " has a damaged manifest record (row "
                     "'%.32s', span '%.32s', span_cut '%.32s' must be integers, the row >= 1; "
                     "span times numbers or NULL): index damaged or edited; run `tessera index "
                     "verify`", ix->path, o->id, (const char *)sqlite3_column_text(stmt, COL_MROW),
                     (const char *)sqlite3_column_text(stmt, COL_MSPAN),
                     (const char *)sqlite3_column_text(stmt, COL_SPAN_CUT));
  }
  if (sqlite3_column_type(stmt, COL_SCORES) == SQLITE_NULL) return TSR_OK;
  const char *scores = (const char *)sqlite3_column_text(stmt, COL_SCORES);
  if (!scores) return err_set(TSR_EFORMAT, "index %s: clip %" PRId64 ": scores unreadable",
                              ix->path, o->id);
  if (strlen(scores) > STORE_MAX_SCORES_BYTES) {
    // its own check names the key at which it passes the limit; else only spaces make it long
    if (store_scores_check(scores) == TSR_OK)
      err_set(TSR_EFORMAT, "scores text of %zu bytes (at most %d)", strlen(scores),
              STORE_MAX_SCORES_BYTES);
    return err_wrap(TSR_EFORMAT, "index %s: clip %" PRId64 ": ", ix->path, o->id);
  }
  copy_str(o->scores_buf, sizeof o->scores_buf, (const unsigned char *)scores);
  c->scores = o->scores_buf;
  return TSR_OK;
}

// The caption columns (25..29) of a row into o (a NULL offset: no embedding; the text may
// still be there, alone).
static tsr_status read_caption(store_index *ix, sqlite3_stmt *stmt, store_clip_row *o) {
  store_clip *c = &o->c;
  int bad = 0;
  char *end = NULL;
  const unsigned char *text = sqlite3_column_text(stmt, 25);
  if (sqlite3_column_type(stmt, 26) == SQLITE_NULL) {  // no embedding; maybe a text alone
    if (!text) return TSR_OK;
    if (strlen((const char *)text) > STORE_MAX_CAPTION_BYTES)
      return err_set(TSR_EFORMAT, "index %s: clip %" PRId64 " has a caption text of more than %d "
                     "bytes: index damaged or edited; run `tessera index verify`", ix->path,
                     o->id, STORE_MAX_CAPTION_BYTES);
    copy_str(o->caption_buf, sizeof o->caption_buf, text);
    c->caption = o->caption_buf;
    return TSR_OK;
  }
  const unsigned char *csum = sqlite3_column_text(stmt, 29);
  c->caption_offset = sqlite3_column_int64(stmt, 26);
  c->caption_tokens = col_int(stmt, 27, &bad);
  c->caption_dim = col_int(stmt, 28, &bad);
  errno = 0;
  c->caption_checksum = csum ? strtoull((const char *)csum, &end, 16) : 0;
  if (!text || strlen((const char *)text) > STORE_MAX_CAPTION_BYTES || !csum || errno ||
      strlen((const char *)csum) != 16 || *end || bad || c->caption_offset == 0)
    return err_set(TSR_EFORMAT, "index %s: clip %" PRId64 " has a damaged caption record "
                   "(text, offset %lld, %d x %d, checksum): index damaged or edited; run "
                   "`tessera index verify`", ix->path, o->id, (long long)c->caption_offset,
                   c->caption_tokens, c->caption_dim);
  copy_str(o->caption_buf, sizeof o->caption_buf, text);
  c->caption = o->caption_buf;
  return TSR_OK;
}

static tsr_status read_row(store_index *ix, sqlite3_stmt *stmt, store_clip_row *o) {
  memset(o, 0, sizeof *o);
  int bad = 0;
  store_clip *c = &o->c;
  o->id = sqlite3_column_int64(stmt, 0);
  const unsigned char *src = sqlite3_column_text(stmt, 1);
  const unsigned char *shard = sqlite3_column_text(stmt, 20);
  const unsigned char *sum = sqlite3_column_text(stmt, 23);
  if (!src || !shard || !sum || strlen((const char *)src) >= sizeof o->source ||
      strlen((const char *)shard) >= sizeof o->shard_buf)
    return err_set(TSR_EFORMAT, "index %s: clip %" PRId64 " has a missing or too long source path "
                   "or shard name", ix->path, o->id);
  copy_str(o->source, sizeof o->source, src);
  c->clip_index = col_int(stmt, 2, &bad);
  c->start_s = sqlite3_column_double(stmt, 3);
  c->duration_s = sqlite3_column_double(stmt, 4);
  c->src_fps = sqlite3_column_double(stmt, 5);
  c->src_w = col_int(stmt, 6, &bad);
  c->src_h = col_int(stmt, 7, &bad);
  c->rotation = col_int(stmt, 8, &bad);
  c->sar_num = col_int(stmt, 9, &bad);
  c->sar_den = col_int(stmt, 10, &bad);
  copy_str(o->codec_buf, sizeof o->codec_buf, sqlite3_column_text(stmt, 11));
  copy_str(o->pix_fmt_buf, sizeof o->pix_fmt_buf, sqlite3_column_text(stmt, 12));
  c->decoded_frames = sqlite3_column_int64(stmt, 13);
  c->frames = sqlite3_column_int64(stmt, 14);
  c->dropped_frames = sqlite3_column_int64(stmt, 15);
  c->T = col_int(stmt, 16, &bad);
  c->H = col_int(stmt, 17, &bad);
  c->W = col_int(stmt, 18, &bad);
  c->tokens = sqlite3_column_int64(stmt, 19);
  copy_str(o->shard_buf, sizeof o->shard_buf, shard);
  c->offset = sqlite3_column_int64(stmt, 21);
  c->bytes = sqlite3_column_int64(stmt, 22);
  char *end = NULL;
  errno = 0;
  c->checksum = strtoull((const char *)sum, &end, 16);
  if (errno || strlen((const char *)sum) != 16 || *end)
    return err_set(TSR_EFORMAT, "index %s: clip %" PRId64 " has an invalid checksum '%s'",
                   ix->path, o->id, (const char *)sum);
  if (bad)
    return err_set(TSR_EFORMAT, "index %s: clip %" PRId64 " has a value out of range (grid "
                   "%lldx%lldx%lld, clip index %lld, source size %lldx%lld): index damaged or "
                   "edited; run `tessera index verify`", ix->path, o->id,
                   (long long)sqlite3_column_int64(stmt, 16),
                   (long long)sqlite3_column_int64(stmt, 17),
                   (long long)sqlite3_column_int64(stmt, 18),
                   (long long)sqlite3_column_int64(stmt, 2),
                   (long long)sqlite3_column_int64(stmt, 6),
                   (long long)sqlite3_column_int64(stmt, 7));
  int has_label = sqlite3_column_type(stmt, 24) != SQLITE_NULL;
  copy_str(o->label_buf, sizeof o->label_buf, sqlite3_column_text(stmt, 24));
  c->codec = o->codec_buf;
  c->pix_fmt = o->pix_fmt_buf;
  c->shard = o->shard_buf;
  c->label = has_label ? o->label_buf : NULL;
  tsr_status st = read_caption(ix, stmt, o);
  return st ? st : read_manifest(ix, stmt, o);
}

// The row of a clip whose source row is missing (bad != NULL: the walk reports it): s.id is
// NULL without a source.
static int no_source(sqlite3_stmt *stmt, int64_t *source_id) {
  *source_id = sqlite3_column_int64(stmt, COL_SOURCE_ID);
  return sqlite3_column_type(stmt, COL_SOURCE_ROW) == SQLITE_NULL;
}

// Every clip row in id order to fn (non-zero: stop). Without `bad`, only clips that have a
// source row, and the first row that cannot be read ends the walk with its error; with
// `bad`, every clip row, and a row that cannot be read (or has no source row) goes to
// bad(id, why, ctx) while the walk goes on.
static tsr_status foreach_rows(store_index *ix, int (*fn)(const store_clip_row *, void *),
                               void (*bad)(int64_t, const char *, void *), void *ctx) {
  char sql[1024];
  snprintf(sql, sizeof sql, "SELECT %s%s FROM clips c %s JOIN sources s ON s.id = c.source_id "
           "ORDER BY c.id", index_clip_columns(ix), bad ? ", c.source_id, s.id" : "",
           bad ? "LEFT" : "");
  sqlite3_stmt *stmt = NULL;
  tsr_status st = index_prepare(ix, sql, &stmt);
  if (st) return st;
  store_clip_row *row = malloc(sizeof *row);
  if (!row) {
    sqlite3_finalize(stmt);
    return err_set(TSR_ENOMEM, "out of memory reading index %s", ix->path);
  }
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    int64_t sid;
    if (bad && no_source(stmt, &sid)) {
      char why[128];
      snprintf(why, sizeof why, "its source row (source id %lld) is missing",
               (long long)sid);
      bad(sqlite3_column_int64(stmt, 0), why, ctx);
      continue;
    }
    if ((st = read_row(ix, stmt, row))) {
      if (!bad) break;
      bad(sqlite3_column_int64(stmt, 0), err_msg(), ctx);
      st = TSR_OK;
      continue;
    }
    if (fn(row, ctx)) break;
  }
  if (!st && rc != SQLITE_ROW && rc != SQLITE_DONE) st = index_sqlite_err(ix, rc, "read clips");
  free(row);
  sqlite3_finalize(stmt);
  return st;
}

tsr_status index_foreach_clip(store_index *ix, int (*fn)(const store_clip_row *, void *),
                              void *ctx) {
  return foreach_rows(ix, fn, NULL, ctx);
}

tsr_status index_foreach_clip_checked(store_index *ix,
                                      int (*fn)(const store_clip_row *, void *),
                                      void (*bad)(int64_t id, const char *why, void *),
                                      void *ctx) {
  return foreach_rows(ix, fn, bad, ctx);
}

tsr_status index_get_clip(store_index *ix, int64_t id, store_clip_row *out) {
  char sql[1024];
  snprintf(sql, sizeof sql, "SELECT %s FROM clips c JOIN sources s ON s.id = c.source_id "
           "WHERE c.id = ?", index_clip_columns(ix));
  sqlite3_stmt *stmt = NULL;
  tsr_status st = index_prepare(ix, sql, &stmt);
  if (st) return st;
  sqlite3_bind_int64(stmt, 1, id);
  int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW)
    st = read_row(ix, stmt, out);
  else if (rc == SQLITE_DONE)
    st = err_set(TSR_EINVAL, "index %s has no clip with id %" PRId64 " (see `tessera index stats`)",
                 ix->path, id);
  else
    st = index_sqlite_err(ix, rc, "read clip");
  sqlite3_finalize(stmt);
  return st;
}

tsr_status index_foreach_failed(store_index *ix,
                                int (*fn)(const char *, const char *, void *), void *ctx) {
  sqlite3_stmt *stmt = NULL;
  tsr_status st = index_prepare(
      ix, "SELECT path, error FROM sources WHERE status = 'failed' ORDER BY path", &stmt);
  if (st) return st;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const char *p = (const char *)sqlite3_column_text(stmt, 0);
    const char *e = (const char *)sqlite3_column_text(stmt, 1);
    if (fn(p ? p : "", e ? e : "(no reason recorded)", ctx)) break;
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) st = index_sqlite_err(ix, rc, "read failed sources");
  sqlite3_finalize(stmt);
  return st;
}

tsr_status index_clip_lengths(store_index *ix, int64_t **ids, int64_t **tokens, int64_t *n) {
  *ids = *tokens = NULL;
  *n = 0;
  int64_t cnt = 0;
  tsr_status st = index_query_int(ix, "SELECT count(*) FROM clips", 0, &cnt);
  if (st) return st;
  int64_t *a = malloc(sizeof *a * (size_t)(cnt ? cnt : 1));
  int64_t *b = malloc(sizeof *b * (size_t)(cnt ? cnt : 1));
  sqlite3_stmt *stmt = NULL;
  if (!a || !b) {
    st = err_set(TSR_ENOMEM, "out of memory for %" PRId64 " clip lengths", cnt);
    goto fail;
  }
  if ((st = index_prepare(ix, "SELECT id, tokens FROM clips ORDER BY id", &stmt))) goto fail;
  int64_t i = 0;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW && i < cnt) {
    a[i] = sqlite3_column_int64(stmt, 0);
    b[i] = sqlite3_column_int64(stmt, 1);
    i++;
  }
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
    st = index_sqlite_err(ix, rc, "read clip lengths");
    goto fail;
  }
  sqlite3_finalize(stmt);
  *ids = a;
  *tokens = b;
  *n = i;
  return TSR_OK;
fail:
  sqlite3_finalize(stmt);
  free(a);
  free(b);
  return st;
}

tsr_status index_source_caption(store_index *ix, const char *path, double *recorded_at,
                                int *has_caption) {
  *recorded_at = 0;
  *has_caption = 0;
  sqlite3_stmt *stmt = NULL;
  // a version-1 index has no caption columns: none of its clips has a caption
  tsr_status st = index_prepare(ix, ix->version >= 2
      ? "SELECT s.updated_at, EXISTS(SELECT 1 FROM clips c WHERE c.source_id = s.id AND "
        "c.caption_offset IS NOT NULL) FROM sources s WHERE s.path = ?"
      : "SELECT updated_at, 0 FROM sources WHERE path = ?", &stmt);
  if (st) return st;
  sqlite3_bind_text(stmt, 1, path, -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    *recorded_at = sqlite3_column_double(stmt, 0);
    *has_caption = sqlite3_column_int(stmt, 1) != 0;
  } else if (rc != SQLITE_DONE) {
    st = err_wrap(index_sqlite_err(ix, rc, "look up a source's caption"), "source %s: ", path);
  }
  sqlite3_finalize(stmt);
  return st;
}

// The text of column `col` of source `path` into *text (malloc'ed; NULL when NULL or no
// record); nothing before schema version 3, which has no such columns.
static tsr_status source_text(store_index *ix, const char *path, const char *col, char **text) {
  *text = NULL;
  if (ix->version < 3) return TSR_OK;
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT %s FROM sources WHERE path = ?", col);
  sqlite3_stmt *stmt = NULL;
  tsr_status st = index_prepare(ix, sql, &stmt);
  if (st) return st;
  sqlite3_bind_text(stmt, 1, path, -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(stmt);
  const char *v = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(stmt, 0) : NULL;
  if (v && !(*text = strdup(v))) st = err_set(TSR_ENOMEM, "out of memory reading %s", col);
  else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    st = err_wrap(index_sqlite_err(ix, rc, col), "source %s: ", path);
  sqlite3_finalize(stmt);
  return st;
}

tsr_status index_source_manifest_key(store_index *ix, const char *path, char *key, size_t n) {
  if (n) key[0] = 0;
  char *v = NULL;
  tsr_status st = source_text(ix, path, "manifest_key", &v);
  if (!st && v && store_manifest_key_check(v) != TSR_OK)
    st = err_wrap(TSR_EFORMAT, "index %s: source %s: ", ix->path, path);
  else if (!st && v && strlen(v) >= n)
    st = err_set(TSR_EINVAL, "index %s: source %s: its manifest key does not fit in %zu bytes",
                 ix->path, path, n);
  else if (!st && v)
    memcpy(key, v, strlen(v) + 1);
  free(v);
  return st;
}

tsr_status index_source_scene_cuts(store_index *ix, const char *path, double **cuts, int *n) {
  *cuts = NULL;
  *n = -1;
  char *v = NULL;
  tsr_status st = source_text(ix, path, "scene_cuts", &v);
  if (!st && v && (st = store_scene_cuts_parse(v, cuts, n)))
    err_wrap(st, "index %s: source %s: ", ix->path, path);
  if (st) *n = -1;
  free(v);
  return st;
}
