// store/index_internal.h — what the files of the SQLite index share (index_schema.c: the
// file, its schema and settings, the SQLite helpers; index.c: writing rows; index_rows.c:
// reading them; index_merge.c: merging indexes; index_order.c: the clips' order). Not a public header: other modules use
// store/index.h.
#ifndef TESSERA_STORE_INDEX_INTERNAL_H
#define TESSERA_STORE_INDEX_INTERNAL_H

#include <sqlite3.h>
#include <stdint.h>

#include "store/index.h"
#include "store/settings.h"

struct store_index {
  sqlite3 *db;
  char *path;
  store_settings settings;
  int readonly;  // nothing is written through this handle: a file this process may not write,
                 // or index_open_as_is
  int version;   // schema version of the file (below the current one: read-only handles only,
                 // which read NULL for the columns it lacks)
};

// sqlite3_prepare_v2 with an error naming the index.
tsr_status index_prepare(store_index *ix, const char *sql, sqlite3_stmt **stmt);
// sqlite3_exec of `sql` (no rows), an error saying `what` was being done.
tsr_status index_exec(store_index *ix, const char *sql, const char *what);
// The error of SQLite result `rc` while doing `what`, naming the index (TSR_EFORMAT for a
// damaged or foreign file, TSR_EDB / TSR_EIO otherwise).
tsr_status index_sqlite_err(store_index *ix, int rc, const char *what);
// Rolls back the open transaction (if any) after an error, keeping the error's message.
void index_rollback(store_index *ix);
// Binds text s (NULL: SQL NULL) to parameter i.
int index_bind_text(sqlite3_stmt *stmt, int i, const char *s);
// Inserts the settings row (key, text) in the open transaction, an error saying `what` was
// being done.
tsr_status index_insert_setting(store_index *ix, const char *key, const char *text,
                                const char *what);
// First column of the first row of `sql` as an integer (`def` if no row or NULL).
tsr_status index_query_int(store_index *ix, const char *sql, int64_t def, int64_t *out);
// Wall-clock time, Unix seconds (sources.updated_at).
double index_now(void);
// The column list the row reader takes, for this file's schema version (a version-1 index
// has no caption columns: NULL for them).
const char *index_clip_columns(const store_index *ix);
// Deletes the record (source and clips) of `path` in database `db` ("main") inside the
// current transaction.
tsr_status index_delete_source(store_index *ix, const char *db, const char *path);
// In the open transaction, before clips are inserted: records the largest clip id as the
// clip order's mark unless a mark is recorded (index.h index_order_settle).
tsr_status index_order_note(store_index *ix);

#endif
