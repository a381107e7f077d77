// store/index_schema.c — the index file: opening and creating it, its schema and upgrades,
// the settings table, and the SQLite helpers the other index files share
// (store/index_internal.h). Schema and rules: docs/store-format.md.
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/index_internal.h"

#include "store/settings.h"

#define INDEX_APP_ID 0x54535258  // "TSRX" in the SQLite header's application_id
// PRAGMA user_version and settings.schema_version: the last version of ADDED below. An index
// of an earlier version is upgraded when opened for writing (its missing columns added,
// NULL in every row) and read as it is otherwise (NULL for them: index_clip_columns).
#define INDEX_SCHEMA_VERSION 3
#define INDEX_FORMAT "tessera-store-index"
#define BUSY_TIMEOUT_MS 60000

// The tables of version 1. Later versions only add columns (ADDED), so a new index is made
// as version 1 and upgraded in the same transaction: one path to every version.
static const char *SCHEMA_V1 =
    "CREATE TABLE settings(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE sources("
    " id INTEGER PRIMARY KEY,"
    " path TEXT NOT NULL UNIQUE,"
    " size INTEGER NOT NULL,"
    " mtime INTEGER NOT NULL,"
    " status TEXT NOT NULL CHECK(status IN ('done','failed')),"
    " error TEXT,"
    " partial INTEGER NOT NULL DEFAULT 0,"
    " decoded_frames INTEGER NOT NULL DEFAULT 0,"
    " label TEXT,"
    " clips INTEGER NOT NULL DEFAULT 0,"
    " updated_at REAL NOT NULL);"
    "CREATE TABLE clips("
    " id INTEGER PRIMARY KEY,"
    " source_id INTEGER NOT NULL REFERENCES sources(id),"
    " clip_index INTEGER NOT NULL,"
    " start_s REAL NOT NULL, duration_s REAL NOT NULL, src_fps REAL NOT NULL,"
    " src_w INTEGER NOT NULL, src_h INTEGER NOT NULL, rotation INTEGER NOT NULL,"
    " sar_num INTEGER NOT NULL, sar_den INTEGER NOT NULL,"
    " codec TEXT, pix_fmt TEXT,"
    " decoded_frames INTEGER NOT NULL, frames INTEGER NOT NULL, dropped_frames INTEGER NOT NULL,"
    " T INTEGER NOT NULL, H INTEGER NOT NULL, W INTEGER NOT NULL, tokens INTEGER NOT NULL,"
    " shard TEXT NOT NULL, offset INTEGER NOT NULL, bytes INTEGER NOT NULL,"
    " checksum TEXT NOT NULL,"
    " label TEXT,"
    " UNIQUE(source_id, clip_index),"
    " UNIQUE(shard, offset));"
    "CREATE INDEX clips_source ON clips(source_id);";

// The columns each version added (all NULL-able: NULL in the rows of an upgraded index).
static const struct {
  int version;
  const char *table, *column;
} ADDED[] = {
    // 2: a clip's caption (NULL: none)
    {2, "clips", "caption TEXT"},
    {2, "clips", "caption_offset INTEGER"},
    {2, "clips", "caption_tokens INTEGER"},
    {2, "clips", "caption_dim INTEGER"},
    {2, "clips", "caption_checksum TEXT"},
    // 3: where a clip came from in a manifest and its scores; a source's scene cuts and
    // manifest key (NULL: not from a manifest, detection off)
    {3, "clips", "manifest_row INTEGER"},
    {3, "clips", "manifest_span INTEGER"},
    {3, "clips", "span_start REAL"},
    {3, "clips", "span_end REAL"},
    {3, "clips", "span_cut INTEGER"},
    {3, "clips", "scores TEXT"},
    {3, "sources", "scene_cuts TEXT"},
    {3, "sources", "manifest_key TEXT"},
};

#define CLIP_COLS_V1                                                                     \
  "c.id, s.path, c.clip_index, c.start_s, c.duration_s, c.src_fps, c.src_w, c.src_h, "   \
  "c.rotation, c.sar_num, c.sar_den, c.codec, c.pix_fmt, c.decoded_frames, c.frames, "    \
  "c.dropped_frames, c.T, c.H, c.W, c.tokens, c.shard, c.offset, c.bytes, c.checksum, c.label"
#define CLIP_COLS_V2 ", c.caption, c.caption_offset, c.caption_tokens, c.caption_dim, " \
                     "c.caption_checksum"
#define CLIP_COLS_V3 ", c.manifest_row, c.manifest_span, c.span_start, c.span_end, "    \
                     "c.span_cut, c.scores"
#define NULLS_V2 ", NULL, NULL, NULL, NULL, NULL"
#define NULLS_V3 ", NULL, NULL, NULL, NULL, NULL, NULL"
const char *index_clip_columns(const store_index *ix) {
  if (ix->version >= 3) return CLIP_COLS_V1 CLIP_COLS_V2 CLIP_COLS_V3;
  return ix->version == 2 ? CLIP_COLS_V1 CLIP_COLS_V2 NULLS_V3 : CLIP_COLS_V1 NULLS_V2 NULLS_V3;
}

double index_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Records an SQLite error of `db` with what was being done; returns the status.
static tsr_status db_err(sqlite3 *db, const char *path, int rc, const char *what) {
  int ext = db ? sqlite3_extended_errcode(db) : rc;
  const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if (rc == SQLITE_NOTADB || ext == SQLITE_NOTADB)
    return err_set(TSR_EFORMAT, "index %s: %s: not a tessera index (%s)", path, what, msg);
  if (rc == SQLITE_CORRUPT || (ext & 0xff) == SQLITE_CORRUPT)
    return err_set(TSR_EFORMAT, "index %s: %s: database corrupt (%s)", path, what, msg);
  if (rc == SQLITE_BUSY || (ext & 0xff) == SQLITE_BUSY || rc == SQLITE_LOCKED)
    return err_set(TSR_EDB, "index %s: %s: %s (another process held the lock for %d s; is another "
                   "tessera running on this store?)", path, what, msg, BUSY_TIMEOUT_MS / 1000);
  if (rc == SQLITE_READONLY || (ext & 0xff) == SQLITE_READONLY || rc == SQLITE_CANTOPEN ||
      rc == SQLITE_FULL || rc == SQLITE_IOERR || (ext & 0xff) == SQLITE_IOERR)
    return err_set(TSR_EIO, "index %s: %s: %s", path, what, msg);
  return err_set(TSR_EDB, "index %s: %s: %s", path, what, msg);
}

tsr_status index_sqlite_err(store_index *ix, int rc, const char *what) {
  return db_err(ix->db, ix->path, rc, what);
}

tsr_status index_exec(store_index *ix, const char *sql, const char *what) {
  int rc = sqlite3_exec(ix->db, sql, NULL, NULL, NULL);
  return rc == SQLITE_OK ? TSR_OK : index_sqlite_err(ix, rc, what);
}

tsr_status index_prepare(store_index *ix, const char *sql, sqlite3_stmt **stmt) {
  int rc = sqlite3_prepare_v2(ix->db, sql, -1, stmt, NULL);
  return rc == SQLITE_OK ? TSR_OK : index_sqlite_err(ix, rc, "prepare statement");
}

void index_rollback(store_index *ix) {
  if (!sqlite3_get_autocommit(ix->db)) sqlite3_exec(ix->db, "ROLLBACK", NULL, NULL, NULL);
}

int index_bind_text(sqlite3_stmt *stmt, int i, const char *s) {
  return s ? sqlite3_bind_text(stmt, i, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(stmt, i);
}

tsr_status index_insert_setting(store_index *ix, const char *key, const char *text,
                                const char *what) {
  sqlite3_stmt *stmt = NULL;
  tsr_status st = index_prepare(ix, "INSERT INTO settings(key, value) VALUES(?, ?)", &stmt);
  if (st) return st;
  index_bind_text(stmt, 1, key);
  index_bind_text(stmt, 2, text);
  int rc = sqlite3_step(stmt);
  if (rc != SQLITE_DONE) st = index_sqlite_err(ix, rc, what);
  sqlite3_finalize(stmt);
  return st;
}

tsr_status index_query_int(store_index *ix, const char *sql, int64_t def, int64_t *out) {
  sqlite3_stmt *stmt = NULL;
  tsr_status s = index_prepare(ix, sql, &stmt);
  if (s) return s;
  int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW)
    *out = sqlite3_column_type(stmt, 0) == SQLITE_NULL ? def : sqlite3_column_int64(stmt, 0);
  else if (rc == SQLITE_DONE)
    *out = def;
  else
    s = index_sqlite_err(ix, rc, sql);
  sqlite3_finalize(stmt);
  return s;
}

static tsr_status write_settings(store_index *ix, const store_settings *s) {
  enum { NSET = 13 };
  char v[NSET][64];
  const char *k[NSET] = {"format",   "schema_version", "fps_num", "fps_den",
                         "short_side", "pt",           "ph",      "pw",
                         "channels", "dtype",          "max_seconds", "vae_t", "vae_s"};
  snprintf(v[0], 64, "%s", INDEX_FORMAT);
  snprintf(v[1], 64, "%d", INDEX_SCHEMA_VERSION);
  snprintf(v[2], 64, "%d", s->fps_num);
  snprintf(v[3], 64, "%d", s->fps_den);
  snprintf(v[4], 64, "%d", s->short_side);
  snprintf(v[5], 64, "%d", s->pt);
  snprintf(v[6], 64, "%d", s->ph);
  snprintf(v[7], 64, "%d", s->pw);
  snprintf(v[8], 64, "%d", s->channels);
  snprintf(v[9], 64, "%s", store_dtype_name(s->dtype));
  snprintf(v[10], 64, "%.17g", s->max_seconds);
  snprintf(v[11], 64, "%d", s->vae_t);
  snprintf(v[12], 64, "%d", s->vae_s);
  sqlite3_stmt *stmt = NULL;
  tsr_status st = index_prepare(ix, "INSERT INTO settings(key, value) VALUES(?, ?)", &stmt);
  if (st) return st;
  for (int i = 0; i < NSET && !st; i++) {
    sqlite3_reset(stmt);
    index_bind_text(stmt, 1, k[i]);
    index_bind_text(stmt, 2, v[i]);
    int rc = sqlite3_step(stmt);
    if (rc != SQLITE_DONE) st = index_sqlite_err(ix, rc, "write settings");
  }
  sqlite3_finalize(stmt);
  return st;
}

static tsr_status read_settings(store_index *ix, store_settings *s) {
  sqlite3_stmt *stmt = NULL;
  tsr_status st = index_prepare(ix, "SELECT key, value FROM settings", &stmt);
  if (st) return st;
  memset(s, 0, sizeof *s);
  unsigned seen = 0;
  int rc;
  char format[64] = "";
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const char *k = (const char *)sqlite3_column_text(stmt, 0);
    const char *v = (const char *)sqlite3_column_text(stmt, 1);
    if (!k || !v) continue;
    int iv = atoi(v);
    if (!strcmp(k, "format")) snprintf(format, sizeof format, "%s", v), seen |= 1;
    else if (!strcmp(k, "fps_num")) s->fps_num = iv, seen |= 2;
    else if (!strcmp(k, "fps_den")) s->fps_den = iv, seen |= 4;
    else if (!strcmp(k, "short_side")) s->short_side = iv, seen |= 8;
    else if (!strcmp(k, "pt")) s->pt = iv, seen |= 16;
    else if (!strcmp(k, "ph")) s->ph = iv, seen |= 32;
    else if (!strcmp(k, "pw")) s->pw = iv, seen |= 64;
    else if (!strcmp(k, "channels")) s->channels = iv, seen |= 128;
    else if (!strcmp(k, "dtype")) {
      seen |= 256;
      if (!store_dtype_from_name(v, &s->dtype)) seen |= 1u << 30;
    } else if (!strcmp(k, "max_seconds")) s->max_seconds = strtod(v, NULL), seen |= 512;
    // vae_t, vae_s: since latent stores; an index made before has none (a pixel store)
    else if (!strcmp(k, "vae_t")) s->vae_t = iv;
    else if (!strcmp(k, "vae_s")) s->vae_s = iv;
  }
  if (rc != SQLITE_DONE) st = index_sqlite_err(ix, rc, "read settings");
  sqlite3_finalize(stmt);
  if (st) return st;
  if (strcmp(format, INDEX_FORMAT) != 0)
    return err_set(TSR_EFORMAT, "index %s: settings table has no format '%s': not a tessera index",
                   ix->path, INDEX_FORMAT);
  if (seen != 1023 || s->fps_num <= 0 || s->fps_den <= 0 || store_token_bytes(s) <= 0)
    return err_set(TSR_EFORMAT, "index %s: settings are missing or invalid (index damaged)",
                   ix->path);
  return TSR_OK;
}

// Adds the columns of the versions after `from` and sets the version, inside the caller's
// transaction.
static tsr_status add_columns(store_index *ix, int64_t from) {
  char sql[256];
  tsr_status st = TSR_OK;
  for (size_t i = 0; !st && i < sizeof ADDED / sizeof ADDED[0]; i++) {
    if (ADDED[i].version <= from) continue;
    snprintf(sql, sizeof sql, "ALTER TABLE %s ADD COLUMN %s", ADDED[i].table, ADDED[i].column);
    st = index_exec(ix, sql, "add the columns of the schema's later versions");
  }
  snprintf(sql, sizeof sql, "PRAGMA user_version=%d; UPDATE settings SET value = '%d' WHERE "
           "key = 'schema_version'", INDEX_SCHEMA_VERSION, INDEX_SCHEMA_VERSION);
  return st ? st : index_exec(ix, sql, "set the schema version");
}

// Makes the schema in an empty database (in one transaction), unless another process made
// it between the caller's check and the lock: *created says whether this one did.
static tsr_status create_schema(store_index *ix, const store_settings *settings, int *created) {
  int64_t ntables;
  tsr_status st = index_exec(ix, "BEGIN IMMEDIATE", "begin schema creation");
  if (st) return st;
  if ((st = index_query_int(ix, "SELECT count(*) FROM sqlite_master", 0, &ntables))) goto fail;
  if (ntables == 0) {
    char sql[128];
    snprintf(sql, sizeof sql, "PRAGMA application_id=%d", INDEX_APP_ID);
    if ((st = index_exec(ix, sql, "set the application id"))) goto fail;
    if ((st = index_exec(ix, SCHEMA_V1, "create schema"))) goto fail;
    if ((st = write_settings(ix, settings))) goto fail;
    if ((st = add_columns(ix, 1))) goto fail;
    snprintf(sql, sizeof sql, "INSERT INTO settings VALUES('created_at', '%.3f')", index_now());
    if ((st = index_exec(ix, sql, "write settings"))) goto fail;
    *created = 1;
  }
  if ((st = index_exec(ix, "COMMIT", "commit schema creation"))) goto fail;
  return TSR_OK;
fail:
  index_rollback(ix);
  return st;
}

// Upgrades an index of an earlier schema version in one transaction.
static tsr_status upgrade_schema(store_index *ix) {
  int64_t ver;
  tsr_status st = index_exec(ix, "BEGIN IMMEDIATE", "begin schema upgrade");
  if (st) return st;
  if ((st = index_query_int(ix, "PRAGMA user_version", 0, &ver))) goto fail;
  // another process may have upgraded it in between
  if (ver < INDEX_SCHEMA_VERSION && (st = add_columns(ix, ver))) goto fail;
  if ((st = index_exec(ix, "COMMIT", "commit schema upgrade"))) goto fail;
  ix->version = INDEX_SCHEMA_VERSION;
  return TSR_OK;
fail:
  index_rollback(ix);
  return err_wrap(st, "index %s: upgrade from schema version %d to %d: ", ix->path, ix->version,
                  INDEX_SCHEMA_VERSION);
}

// Checks that the open database is a tessera index, creating the schema if it is empty and
// `create`, upgrading it when it is of an earlier version and may be written. *created is
// set when the schema was made here.
static tsr_status check_or_create(store_index *ix, int create, const store_settings *settings,
                                  int *created) {
  *created = 0;
  int64_t app, ver, ntables;
  tsr_status st = index_query_int(ix, "PRAGMA application_id", 0, &app);
  if (st) return st;
  if (app == 0) {
    st = index_query_int(ix, "SELECT count(*) FROM sqlite_master", 0, &ntables);
    if (st) return st;
    if (ntables != 0)
      return err_set(TSR_EFORMAT, "%s is an SQLite database but not a tessera index (it has other "
                     "tables); give a store directory made by `tessera ingest`", ix->path);
    if (!create)
      return err_set(TSR_EFORMAT, "%s is an empty database, not a tessera index", ix->path);
    if ((st = create_schema(ix, settings, created))) return st;
    if ((st = index_query_int(ix, "PRAGMA application_id", 0, &app))) return st;
  }
  if (app != INDEX_APP_ID)
    return err_set(TSR_EFORMAT, "%s is an SQLite database but not a tessera index "
                   "(application_id %#" PRIx64 ")", ix->path, (uint64_t)app);
  if ((st = index_query_int(ix, "PRAGMA user_version", 0, &ver))) return st;
  if (ver < 1 || ver > INDEX_SCHEMA_VERSION)
    return err_set(TSR_EFORMAT, "index %s has schema version %" PRId64 ", this build reads versions "
                   "1 to %d%s", ix->path, ver, INDEX_SCHEMA_VERSION,
                   ver > INDEX_SCHEMA_VERSION ? ": update tessera" : "");
  ix->version = (int)ver;
  return ver < INDEX_SCHEMA_VERSION && !ix->readonly ? upgrade_schema(ix) : TSR_OK;
}

// index_open, and with `as_is` index_open_as_is: the handle is then read-only (no upgrade),
// though the file is opened for writing so that SQLite can roll back a hot journal.
static tsr_status open_index(store_index **out, const char *path, int create, int as_is,
                             const store_settings *settings) {
  *out = NULL;
  struct stat sb;
  int exists = stat(path, &sb) == 0;
  if (!exists && errno != ENOENT)
    return err_set(TSR_EIO, "index %s: %s", path, strerror(errno));
  if (!exists && !create)
    return err_set(TSR_EIO, "index %s does not exist (not a tessera store, or nothing ingested "
                   "yet)", path);
  if (exists && !S_ISREG(sb.st_mode))
    return err_set(TSR_EFORMAT, "index %s is not a regular file", path);
  if (create) {
    if (!settings) return err_set(TSR_EINVAL, "index %s: creating an index needs settings", path);
    tsr_status st = store_settings_check(settings);
    if (st) return err_wrap(st, "index %s: ", path);
  }
  store_index *ix = calloc(1, sizeof *ix);
  if (!ix || !(ix->path = strdup(path))) {
    free(ix);
    return err_set(TSR_ENOMEM, "out of memory opening index %s", path);
  }
  int flags = SQLITE_OPEN_READWRITE;
  if (!exists) flags |= SQLITE_OPEN_CREATE;
  else if (!create && access(path, W_OK) != 0) flags = SQLITE_OPEN_READONLY, ix->readonly = 1;
  if (as_is) ix->readonly = 1;
  // An index written through a link would change a file outside the store (core/fs.h)
  if (flags & SQLITE_OPEN_READWRITE) flags |= SQLITE_OPEN_NOFOLLOW;
  int rc = sqlite3_open_v2(path, &ix->db, flags, NULL);
  if (rc == SQLITE_CANTOPEN && ix->db && sqlite3_extended_errcode(ix->db) == SQLITE_CANTOPEN_SYMLINK) {
    sqlite3_close(ix->db);
    free(ix->path);
    free(ix);
    return err_set(TSR_EINVAL, "index %s is a symbolic link: tessera does not write through a "
                   "link inside a store (it could point at any file): remove it", path);
  }
  tsr_status st = TSR_OK;
  if (rc != SQLITE_OK) {
    st = rc == SQLITE_CANTOPEN
             ? err_set(TSR_EIO, "cannot open index %s: %s (check that the directory exists and is "
                       "writable)", path, ix->db ? sqlite3_errmsg(ix->db) : sqlite3_errstr(rc))
             : index_sqlite_err(ix, rc, "open");
    goto fail;
  }
  sqlite3_extended_result_codes(ix->db, 1);
  if ((rc = sqlite3_busy_timeout(ix->db, BUSY_TIMEOUT_MS)) != SQLITE_OK) {
    st = index_sqlite_err(ix, rc, "set busy timeout");
    goto fail;
  }
  // Rollback journal (not WAL: WAL needs shared memory, unsafe on network file systems),
  // every commit fsync'ed. These pragmas change the connection, not the file.
  if ((st = index_exec(ix, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON", "set pragmas")))
    goto fail;
  int created = 0;
  if ((st = check_or_create(ix, create, settings, &created))) goto fail;
  if ((st = read_settings(ix, &ix->settings))) goto fail;
  if (settings && !created) {
    char diff[1024];
    if (store_settings_diff(&ix->settings, settings, diff, sizeof diff)) {
      st = err_set(TSR_EMISMATCH, "store index %s was made with other settings (store vs "
                   "requested): %s. Use the store's settings, or another output store; nothing "
                   "was written", path, diff);
      goto fail;
    }
  }
  *out = ix;
  return TSR_OK;
fail:
  index_close(&ix);
  return st;
}

tsr_status index_open(store_index **out, const char *path, int create,
                      const store_settings *settings) {
  return open_index(out, path, create, 0, settings);
}

tsr_status index_open_as_is(store_index **out, const char *path, const store_settings *settings) {
  return open_index(out, path, 0, 1, settings);
}

void index_close(store_index **pix) {
  store_index *ix = *pix;
  if (!ix) return;
  if (ix->db) sqlite3_close_v2(ix->db);
  free(ix->path);
  free(ix);
  *pix = NULL;
}

tsr_status index_settings(store_index *ix, store_settings *out) {
  *out = ix->settings;
  return TSR_OK;
}

const char *index_path(const store_index *ix) { return ix->path; }

// The recorded filters (settings key "filters") into out (n bytes); *recorded 0 when none.
static tsr_status read_filters(store_index *ix, char *out, size_t n, int *recorded) {
  out[0] = 0;
  *recorded = 0;
  sqlite3_stmt *stmt = NULL;
  tsr_status st = index_prepare(ix, "SELECT value FROM settings WHERE key = 'filters'", &stmt);
  if (st) return st;
  int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    const char *v = (const char *)sqlite3_column_text(stmt, 0);
    *recorded = 1;
    if (v && strlen(v) >= n)
      st = err_set(TSR_EINVAL, "index %s: its filters (%zu bytes) do not fit in %zu bytes",
                   ix->path, strlen(v), n);
    else
      snprintf(out, n, "%s", v ? v : "");
  } else if (rc != SQLITE_DONE) {
    st = index_sqlite_err(ix, rc, "read the filters");
  }
  sqlite3_finalize(stmt);
  return st;
}

tsr_status index_filters(store_index *ix, char *out, size_t n, int *recorded) {
  int had;
  return read_filters(ix, out, n, recorded ? recorded : &had);
}

tsr_status index_set_filters(store_index *ix, const char *text) {
  if (ix->readonly) return err_set(TSR_EIO, "index %s is open read-only: cannot record filters",
                                   ix->path);
  if (!text || strlen(text) > STORE_MAX_FILTERS_BYTES)
    return err_set(TSR_EINVAL, "index %s: filters of more than %d bytes", ix->path,
                   STORE_MAX_FILTERS_BYTES);
  char *had = malloc(STORE_MAX_FILTERS_BYTES + 1);
  if (!had) return err_set(TSR_ENOMEM, "out of memory reading the filters of %s", ix->path);
  int recorded = 0;
  tsr_status st = index_exec(ix, "BEGIN IMMEDIATE", "begin recording the filters");
  if (!st) st = read_filters(ix, had, STORE_MAX_FILTERS_BYTES + 1, &recorded);
  if (!st && recorded && strcmp(had, text) != 0)
    st = err_set(TSR_EMISMATCH, "store index %s was ingested with the filters '%s'; this ingest "
                 "has '%s'. One store holds the clips of one filter set: use the store's filters, "
                 "or another output store; nothing was written", ix->path, had, text);
  if (!st && !recorded) st = index_insert_setting(ix, "filters", text, "record the filters");
  if (!st) st = index_exec(ix, "COMMIT", "commit the filters");
  if (st) index_rollback(ix);
  free(had);
  return st;
}
