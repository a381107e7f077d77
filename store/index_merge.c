// store/index_merge.c — one index merged into another in one transaction
// (index_merge_from, store/index.h): what `tessera index merge` and the merge of a
// multi-rank ingest's parts do with the rows. Rules: docs/store-format.md "Merge semantics".
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "store/caption_encoder.h"
#include "store/index_internal.h"

// One merge: the attached index is "src"; its statements, prepared once.
typedef struct {
  store_index *ix;
  const char *from_path, *prefix;
  sqlite3_stmt *ls;    // src's sources
  sqlite3_stmt *look;  // main's record of a path
  sqlite3_stmt *ins;   // a source into main
  sqlite3_stmt *cp;    // a source's clips into main
  int64_t merged, skipped;
} merge_run;

// The columns a version of the schema lacks are read as NULL (index_open upgrades only the
// indexes it writes, and reads `src` without changing it).
static tsr_status merge_prepare(merge_run *m, int64_t from_ver) {
  char ls_sql[512], cp_sql[2048];
  snprintf(ls_sql, sizeof ls_sql, "SELECT id, path, size, mtime, status, error, partial, "
           "decoded_frames, label, clips, updated_at, %s FROM src.sources ORDER BY id",
           from_ver >= 3 ? "scene_cuts, manifest_key" : "NULL, NULL");
  // Shard names get the prefix in front of their file name: "shards/x" -> "shards/<p>x".
  // rtrim(shard, <shard without '/'>) is the directory part including its last '/'.
  snprintf(cp_sql, sizeof cp_sql,
           "INSERT INTO main.clips(source_id, clip_index, start_s, duration_s, src_fps, src_w, "
           "src_h, rotation, sar_num, sar_den, codec, pix_fmt, decoded_frames, frames, "
           "dropped_frames, T, H, W, tokens, shard, offset, bytes, checksum, label, caption, "
           "caption_offset, caption_tokens, caption_dim, caption_checksum, manifest_row, "
           "manifest_span, span_start, span_end, span_cut, scores) "
           "SELECT ?1, clip_index, start_s, duration_s, src_fps, src_w, src_h, rotation, "
           "sar_num, sar_den, codec, pix_fmt, decoded_frames, frames, dropped_frames, T, H, W, "
           "tokens, rtrim(shard, replace(shard, '/', '')) || ?2 || "
           "substr(shard, length(rtrim(shard, replace(shard, '/', ''))) + 1), "
           "offset, bytes, checksum, label, %s, %s FROM src.clips WHERE source_id = ?3 "
           "ORDER BY id",
           from_ver >= 2 ? "caption, caption_offset, caption_tokens, caption_dim, "
                           "caption_checksum" : "NULL, NULL, NULL, NULL, NULL",
           from_ver >= 3 ? "manifest_row, manifest_span, span_start, span_end, span_cut, scores"
                         : "NULL, NULL, NULL, NULL, NULL, NULL");
  tsr_status st;
  if ((st = index_prepare(m->ix, ls_sql, &m->ls)) ||
      (st = index_prepare(m->ix, "SELECT status, size, mtime, updated_at FROM main.sources "
                          "WHERE path = ?", &m->look)) ||
      (st = index_prepare(m->ix, "INSERT INTO main.sources(path, size, mtime, status, error, "
                          "partial, decoded_frames, label, clips, updated_at, scene_cuts, "
                          "manifest_key) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)", &m->ins)))
    return st;
  return index_prepare(m->ix, cp_sql, &m->cp);
}

static void merge_finalize(merge_run *m) {
  sqlite3_finalize(m->ls);
  sqlite3_finalize(m->look);
  sqlite3_finalize(m->ins);
  sqlite3_finalize(m->cp);
  m->ls = m->look = m->ins = m->cp = NULL;
}

// A settings key that is not part of store_settings (the filters, the caption encoder):
// main takes src's when it records none; two different ones: TSR_EMISMATCH, `what` naming
// the key's meaning and `one` why one store holds one of them.
static tsr_status merge_setting(merge_run *m, const char *key, const char *what,
                                const char *one) {
  sqlite3_stmt *stmt = NULL;
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT s.value, m.value FROM src.settings s LEFT JOIN "
           "main.settings m ON m.key = s.key WHERE s.key = '%s'", key);
  tsr_status st = index_prepare(m->ix, sql, &stmt);
  if (st) return st;
  int rc = sqlite3_step(stmt);
  snprintf(sql, sizeof sql, "INSERT INTO main.settings(key, value) SELECT key, value FROM "
           "src.settings WHERE key = '%s'", key);
  if (rc == SQLITE_ROW && sqlite3_column_type(stmt, 1) == SQLITE_NULL)
    st = index_exec(m->ix, sql, "take the settings");
  else if (rc == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(stmt, 0),
                                      (const char *)sqlite3_column_text(stmt, 1)) != 0)
    st = err_set(TSR_EMISMATCH, "its %s '%s' differ from the %s '%s' of %s: %s; nothing was "
                 "written", what, (const char *)sqlite3_column_text(stmt, 0), what,
                 (const char *)sqlite3_column_text(stmt, 1), m->ix->path, one);
  else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    st = index_sqlite_err(m->ix, rc, "read the settings");
  sqlite3_finalize(stmt);
  return st;
}

// Whether main's record of `path` stays (*keep): a done record does, unless src has a newer
// done record of a changed file (other size or mtime).
static tsr_status keeps_record(merge_run *m, const char *path, int64_t size, int64_t mtime,
                               const char *status, double updated, int *keep) {
  *keep = 0;
  sqlite3_reset(m->look);
  index_bind_text(m->look, 1, path);
  int rc = sqlite3_step(m->look);
  if (rc == SQLITE_DONE) return TSR_OK;
  if (rc != SQLITE_ROW) return index_sqlite_err(m->ix, rc, "look up source");
  const char *ts = (const char *)sqlite3_column_text(m->look, 0);
  int done = ts && !strcmp(ts, "done");
  int changed = sqlite3_column_int64(m->look, 1) != size ||
                sqlite3_column_int64(m->look, 2) != mtime;
  int newer = updated > sqlite3_column_double(m->look, 3);
  *keep = done && !(changed && newer && !strcmp(status, "done"));
  return TSR_OK;
}

// The source at m->ls's current row, with its clips, unless main keeps its own record.
static tsr_status merge_source(merge_run *m) {
  sqlite3_stmt *ls = m->ls, *ins = m->ins;
  int64_t oid = sqlite3_column_int64(ls, 0);
  const char *path = (const char *)sqlite3_column_text(ls, 1);
  int64_t size = sqlite3_column_int64(ls, 2), mtime = sqlite3_column_int64(ls, 3);
  const char *status = (const char *)sqlite3_column_text(ls, 4);
  double updated = sqlite3_column_double(ls, 10);
  int keep = 0;
  if (!path || !status)
    return err_set(TSR_EFORMAT, "merge %s: source %" PRId64 " has no path or status",
                   m->from_path, oid);
  tsr_status st = keeps_record(m, path, size, mtime, status, updated, &keep);
  if (st) return st;
  if (keep) {
    m->skipped++;
    return TSR_OK;
  }
  if ((st = index_delete_source(m->ix, "main", path))) return st;
  sqlite3_reset(ins);
  index_bind_text(ins, 1, path);
  sqlite3_bind_int64(ins, 2, size);
  sqlite3_bind_int64(ins, 3, mtime);
  index_bind_text(ins, 4, status);
  for (int k = 5; k <= 9; k++) sqlite3_bind_value(ins, k, sqlite3_column_value(ls, k));
  sqlite3_bind_double(ins, 10, updated);
  sqlite3_bind_value(ins, 11, sqlite3_column_value(ls, 11));
  sqlite3_bind_value(ins, 12, sqlite3_column_value(ls, 12));
  int rc = sqlite3_step(ins);
  if (rc != SQLITE_DONE) return index_sqlite_err(m->ix, rc, "insert source");
  sqlite3_reset(m->cp);
  sqlite3_bind_int64(m->cp, 1, sqlite3_last_insert_rowid(m->ix->db));
  index_bind_text(m->cp, 2, m->prefix);
  sqlite3_bind_int64(m->cp, 3, oid);
  if ((rc = sqlite3_step(m->cp)) != SQLITE_DONE)
    return err_wrap(index_sqlite_err(m->ix, rc, "copy clips"), "source %s: ", path);
  m->merged += sqlite3_changes(m->ix->db);
  return TSR_OK;
}

// The merge inside its transaction, src attached.
static tsr_status merge_all(merge_run *m) {
  int64_t from_ver = 1;
  tsr_status st = index_query_int(m->ix, "PRAGMA src.user_version", 1, &from_ver);
  if (!st) st = merge_prepare(m, from_ver);
  if (!st)
    st = merge_setting(m, "filters", "filters", "one store holds the clips of one filter set");
  if (!st)
    st = merge_setting(m, CAPTION_ENCODER_KEY, "caption encoder", "one store holds the caption "
                      "embeddings of one encoder");
  if (!st) st = index_order_note(m->ix);
  int rc = SQLITE_DONE;
  while (!st && (rc = sqlite3_step(m->ls)) == SQLITE_ROW) st = merge_source(m);
  if (!st && rc != SQLITE_DONE) st = index_sqlite_err(m->ix, rc, "read sources");
  merge_finalize(m);
  return st;
}

tsr_status index_merge_from(store_index *ix, const char *from_path, const char *shard_prefix,
                            int64_t *merged_clips, int64_t *skipped) {
  if (merged_clips) *merged_clips = 0;
  if (skipped) *skipped = 0;
  if (ix->readonly) return err_set(TSR_EIO, "index %s is read-only: cannot merge into it", ix->path);
  struct stat a, b;
  if (stat(ix->path, &a) == 0 && stat(from_path, &b) == 0 && a.st_dev == b.st_dev &&
      a.st_ino == b.st_ino)
    return err_set(TSR_EINVAL, "cannot merge index %s into itself", from_path);
  // Validates the other index (and rolls back a hot journal it may have) and its settings,
  // without upgrading it: the input of a merge is not changed.
  store_index *from = NULL;
  tsr_status st = index_open_as_is(&from, from_path, &ix->settings);
  index_close(&from);
  if (st) return err_wrap(st, "merge %s into %s: ", from_path, ix->path);

  sqlite3_stmt *att = NULL;
  if ((st = index_prepare(ix, "ATTACH DATABASE ? AS src", &att))) return st;
  index_bind_text(att, 1, from_path);
  int rc = sqlite3_step(att);
  sqlite3_finalize(att);
  if (rc != SQLITE_DONE)
    return err_wrap(index_sqlite_err(ix, rc, "attach"), "merge %s: ", from_path);
  merge_run m = {.ix = ix, .from_path = from_path, .prefix = shard_prefix ? shard_prefix : ""};
  if (!(st = index_exec(ix, "BEGIN IMMEDIATE", "begin merge")) && !(st = merge_all(&m)) &&
      !(st = index_exec(ix, "COMMIT", "commit merge"))) {
    if ((st = index_exec(ix, "DETACH DATABASE src", "detach"))) return st;
    if (merged_clips) *merged_clips = m.merged;
    if (skipped) *skipped = m.skipped;
    return TSR_OK;
  }
  index_rollback(ix);
  sqlite3_exec(ix->db, "DETACH DATABASE src", NULL, NULL, NULL);
  return err_wrap(st, "merge %s into %s: ", from_path, ix->path);
}
