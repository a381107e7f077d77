// store/index_order.c — clip ids in the order of the clips' sources (index.h
// index_order_settle; the mark: index_internal.h index_order_note): ids key the training noise, the validation split
// and a run's store fingerprint, so two ingests of the same files must number them alike,
// whatever order their workers and ranks finished in. Rules: docs/store-format.md.
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>

#include "store/index_internal.h"

// The settings key holding the largest clip id before the first unsettled commit.
#define ORDER_KEY "order_from"

// The recorded mark into *from (*has 0 when none). In the caller's transaction.
static tsr_status read_mark(store_index *ix, int64_t *from, int *has) {
  int64_t v = -1;
  tsr_status st = index_query_int(
      ix, "SELECT CAST(value AS INTEGER) FROM settings WHERE key = '" ORDER_KEY "'", -1, &v);
  *has = !st && v >= 0;
  *from = *has ? v : 0;
  return st;
}

tsr_status index_order_note(store_index *ix) {
  return index_exec(ix, "INSERT OR IGNORE INTO settings(key, value) SELECT '" ORDER_KEY "', "
                    "coalesce(max(id), 0) FROM clips", "mark the clip order");
}

// The clips above `from` into the temporary table order_map(old, new): new ids from+1..
// in the order (manifest row, source path, clip index). Returns how many change in *moved.
static tsr_status map_order(store_index *ix, int64_t from, int64_t *moved) {
  static const char *sql =
      "INSERT INTO temp.order_map(old, new) SELECT c.id, ?1 + ROW_NUMBER() OVER (ORDER BY "
      "c.manifest_row, s.path, c.clip_index, c.id) FROM clips c LEFT JOIN sources s ON "
      "s.id = c.source_id WHERE c.id > ?1";
  tsr_status st = index_exec(ix, "CREATE TEMP TABLE IF NOT EXISTS order_map(old INTEGER "
                             "PRIMARY KEY, new INTEGER NOT NULL); DELETE FROM temp.order_map",
                             "make the clip order map");
  sqlite3_stmt *stmt = NULL;
  if (!st) st = index_prepare(ix, sql, &stmt);
  if (st) return st;
  sqlite3_bind_int64(stmt, 1, from);
  int rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return index_sqlite_err(ix, rc, "order the clips");
  return index_query_int(ix, "SELECT count(*) FROM temp.order_map WHERE old <> new", 0, moved);
}

tsr_status index_order_settle(store_index *ix, int64_t *renumbered) {
  if (renumbered) *renumbered = 0;
  if (ix->readonly)
    return err_set(TSR_EIO, "index %s is open read-only: cannot settle its clip order", ix->path);
  int64_t from = 0, moved = 0;
  int has = 0;
  tsr_status st = index_exec(ix, "BEGIN IMMEDIATE", "begin settling the clip order");
  if (!st) st = read_mark(ix, &from, &has);
  if (!st && has) st = map_order(ix, from, &moved);
  // Through negative ids, so no id is held by two rows on the way.
  if (!st && moved)
    st = index_exec(ix, "UPDATE clips SET id = -id WHERE id IN (SELECT old FROM temp.order_map "
                    "WHERE old <> new); UPDATE clips SET id = (SELECT new FROM temp.order_map "
                    "WHERE old = -clips.id) WHERE id < 0", "renumber the clips");
  if (!st && has)
    st = index_exec(ix, "DELETE FROM settings WHERE key = '" ORDER_KEY "'; DROP TABLE "
                    "temp.order_map", "clear the clip order mark");
  if (!st) st = index_exec(ix, "COMMIT", "commit the clip order");
  if (st) {
    index_rollback(ix);
    return st;
  }
  if (renumbered) *renumbered = moved;
  return TSR_OK;
}
