// store/index_merge.c — one index merged into another in one transaction
// (index_merge_from, store/index.h): what `tessera index merge` and the merge of a
// multi-rank ingest's parts do with the rows. Rules: docs/store-format.md "Merge semantics".
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "store/index_internal.h"

tsr_status index_merge_from(store_index *ix, const char *from_path, const char *shard_prefix,
                            int64_t *merged_clips, int64_t *skipped) {
  int64_t merged = 0, skip = 0;
  if (merged_clips) *merged_clips = 0;
  if (skipped) *skipped = 0;
  if (!shard_prefix) shard_prefix = "";
  if (ix->readonly) return err_set(TSR_EIO, "index %s is read-only: cannot merge into it", ix->path);
  struct stat a, b;
  if (stat(ix->path, &a) == 0 && stat(from_path, &b) == 0 && a.st_dev == b.st_dev &&
      a.st_ino == b.st_ino)
    return err_set(TSR_EINVAL, "cannot merge index %s into itself", from_path);
  // Validates the other index (and rolls back a hot journal it may have) and its settings.
  store_index *from = NULL;
  tsr_status r = index_open(&from, from_path, 0, &ix->settings);
  index_close(&from);
  if (r) return err_wrap(r, "merge %s into %s: ", from_path, ix->path);

  sqlite3_stmt *att = NULL, *ls = NULL, *look = NULL, *ins = NULL, *cp = NULL;
  if ((r = index_prepare(ix, "ATTACH DATABASE ? AS src", &att))) return r;
  index_bind_text(att, 1, from_path);
  int rc = sqlite3_step(att);
  sqlite3_finalize(att);
  if (rc != SQLITE_DONE) return err_wrap(index_sqlite_err(ix, rc, "attach"), "merge %s: ", from_path);

  if ((r = index_exec(ix, "BEGIN IMMEDIATE", "begin merge"))) goto fail;
  if ((r = index_prepare(ix, "SELECT id, path, size, mtime, status, error, partial, decoded_frames, "
                   "label, clips, updated_at FROM src.sources ORDER BY id", &ls)) ||
      (r = index_prepare(ix, "SELECT status, size, mtime, updated_at FROM main.sources WHERE path = ?",
                   &look)) ||
      (r = index_prepare(ix, "INSERT INTO main.sources(path, size, mtime, status, error, partial, "
                   "decoded_frames, label, clips, updated_at) VALUES(?,?,?,?,?,?,?,?,?,?)", &ins)))
    goto fail;
  // Shard names get the prefix in front of their file name: "shards/x" -> "shards/<p>x".
  // rtrim(shard, <shard without '/'>) is the directory part including its last '/'.
  // A version-1 index has no caption columns (index_open upgrades only what it writes).
  int64_t from_ver = 1;
  if ((r = index_query_int(ix, "PRAGMA src.user_version", 1, &from_ver))) goto fail;
  char cp_sql[2048];
  snprintf(cp_sql, sizeof cp_sql,
          "INSERT INTO main.clips(source_id, clip_index, start_s, duration_s, src_fps, src_w, "
          "src_h, rotation, sar_num, sar_den, codec, pix_fmt, decoded_frames, frames, "
          "dropped_frames, T, H, W, tokens, shard, offset, bytes, checksum, label, caption, "
          "caption_offset, caption_tokens, caption_dim, caption_checksum) "
          "SELECT ?1, clip_index, start_s, duration_s, src_fps, src_w, src_h, rotation, sar_num, "
          "sar_den, codec, pix_fmt, decoded_frames, frames, dropped_frames, T, H, W, tokens, "
          "rtrim(shard, replace(shard, '/', '')) || ?2 || "
          "substr(shard, length(rtrim(shard, replace(shard, '/', ''))) + 1), "
          "offset, bytes, checksum, label, %s FROM src.clips WHERE source_id = ?3 ORDER BY id",
          from_ver >= 2 ? "caption, caption_offset, caption_tokens, caption_dim, caption_checksum"
                        : "NULL, NULL, NULL, NULL, NULL");
  if ((r = index_prepare(ix, cp_sql, &cp))) goto fail;
  while ((rc = sqlite3_step(ls)) == SQLITE_ROW) {
    int64_t oid = sqlite3_column_int64(ls, 0);
    const char *path = (const char *)sqlite3_column_text(ls, 1);
    int64_t size = sqlite3_column_int64(ls, 2), mtime = sqlite3_column_int64(ls, 3);
    const char *status = (const char *)sqlite3_column_text(ls, 4);
    double updated = sqlite3_column_double(ls, 10);
    if (!path || !status) {
      r = err_set(TSR_EFORMAT, "merge %s: source %" PRId64 " has no path or status", from_path, oid);
      goto fail;
    }
    sqlite3_reset(look);
    index_bind_text(look, 1, path);
    rc = sqlite3_step(look);
    if (rc == SQLITE_ROW) {
      const char *ts = (const char *)sqlite3_column_text(look, 0);
      int done = ts && !strcmp(ts, "done");
      int changed = sqlite3_column_int64(look, 1) != size || sqlite3_column_int64(look, 2) != mtime;
      int newer = updated > sqlite3_column_double(look, 3);
      // A done record stays, unless `from` has a newer done record of a changed file.
      if (done && !(changed && newer && !strcmp(status, "done"))) {
        skip++;
        continue;
      }
    } else if (rc != SQLITE_DONE) {
      r = index_sqlite_err(ix, rc, "look up source");
      goto fail;
    }
    if ((r = index_delete_source(ix, "main", path))) goto fail;
    sqlite3_reset(ins);
    index_bind_text(ins, 1, path);
    sqlite3_bind_int64(ins, 2, size);
    sqlite3_bind_int64(ins, 3, mtime);
    index_bind_text(ins, 4, status);
    sqlite3_bind_value(ins, 5, sqlite3_column_value(ls, 5));
    sqlite3_bind_value(ins, 6, sqlite3_column_value(ls, 6));
    sqlite3_bind_value(ins, 7, sqlite3_column_value(ls, 7));
    sqlite3_bind_value(ins, 8, sqlite3_column_value(ls, 8));
    sqlite3_bind_value(ins, 9, sqlite3_column_value(ls, 9));
    sqlite3_bind_double(ins, 10, updated);
    if ((rc = sqlite3_step(ins)) != SQLITE_DONE) {
      r = index_sqlite_err(ix, rc, "insert source");
      goto fail;
    }
    int64_t nid = sqlite3_last_insert_rowid(ix->db);
    sqlite3_reset(cp);
    sqlite3_bind_int64(cp, 1, nid);
    index_bind_text(cp, 2, shard_prefix);
    sqlite3_bind_int64(cp, 3, oid);
    if ((rc = sqlite3_step(cp)) != SQLITE_DONE) {
      r = index_sqlite_err(ix, rc, "copy clips");
      err_wrap(r, "source %s: ", path);
      goto fail;
    }
    merged += sqlite3_changes(ix->db);
  }
  if (rc != SQLITE_DONE) {
    r = index_sqlite_err(ix, rc, "read sources");
    goto fail;
  }
  sqlite3_finalize(ls);
  sqlite3_finalize(look);
  sqlite3_finalize(ins);
  sqlite3_finalize(cp);
  ls = look = ins = cp = NULL;
  if ((r = index_exec(ix, "COMMIT", "commit merge"))) goto fail;
  if ((r = index_exec(ix, "DETACH DATABASE src", "detach"))) return r;
  if (merged_clips) *merged_clips = merged;
  if (skipped) *skipped = skip;
  return TSR_OK;
fail:
  sqlite3_finalize(ls);
  sqlite3_finalize(look);
  sqlite3_finalize(ins);
  sqlite3_finalize(cp);
  index_rollback(ix);
  sqlite3_exec(ix->db, "DETACH DATABASE src", NULL, NULL, NULL);
  return err_wrap(r, "merge %s into %s: ", from_path, ix->path);
}

