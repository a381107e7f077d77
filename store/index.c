// store/index.c — the store's SQLite index: schema, settings check, sources and clips,
// atomic per-source commits, merges. Schema and rules: docs/store-format.md.
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

#include "store/clip.h"
#include "store/settings.h"
#include "store/shard_format.h"

#define INDEX_APP_ID 0x54535258  // "TSRX" in the SQLite header's application_id
// PRAGMA user_version and settings.schema_version. 2: clips have caption columns; an
// index of version 1 is upgraded when opened for writing (the columns added, NULL: no
// caption) and read as it is otherwise.
#define INDEX_SCHEMA_VERSION 2
#define INDEX_FORMAT "tessera-store-index"
#define BUSY_TIMEOUT_MS 60000


// The caption columns of clips (schema version 2; NULL: no caption).
#define CAPTION_COLUMNS                                                                   \
  " caption TEXT, caption_offset INTEGER, caption_tokens INTEGER, caption_dim INTEGER,"  \
  " caption_checksum TEXT"

static const char *SCHEMA =
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
    CAPTION_COLUMNS ","
    " UNIQUE(source_id, clip_index),"
    " UNIQUE(shard, offset));"
    "CREATE INDEX clips_source ON clips(source_id);";

#define CLIP_COLS_V1                                                                     \
  "c.id, s.path, c.clip_index, c.start_s, c.duration_s, c.src_fps, c.src_w, c.src_h, "   \
  "c.rotation, c.sar_num, c.sar_den, c.codec, c.pix_fmt, c.decoded_frames, c.frames, "    \
  "c.dropped_frames, c.T, c.H, c.W, c.tokens, c.shard, c.offset, c.bytes, c.checksum, c.label"
// The columns read_row reads; a version-1 index has no caption columns: NULL for them.
static const char *clip_cols(const store_index *ix) {
  return ix->version >= 2 ? CLIP_COLS_V1 ", c.caption, c.caption_offset, c.caption_tokens, "
                                         "c.caption_dim, c.caption_checksum"
                          : CLIP_COLS_V1 ", NULL, NULL, NULL, NULL, NULL";
}

static double now_unix(void) {
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

static tsr_status ix_err(store_index *ix, int rc, const char *what) {
  return db_err(ix->db, ix->path, rc, what);
}

static tsr_status exec(store_index *ix, const char *sql, const char *what) {
  int rc = sqlite3_exec(ix->db, sql, NULL, NULL, NULL);
  return rc == SQLITE_OK ? TSR_OK : ix_err(ix, rc, what);
}

static tsr_status prepare(store_index *ix, const char *sql, sqlite3_stmt **st) {
  int rc = sqlite3_prepare_v2(ix->db, sql, -1, st, NULL);
  return rc == SQLITE_OK ? TSR_OK : ix_err(ix, rc, "prepare statement");
}

// Rolls back after an error, keeping the error's message.
static void rollback(store_index *ix) {
  if (!sqlite3_get_autocommit(ix->db)) sqlite3_exec(ix->db, "ROLLBACK", NULL, NULL, NULL);
}

static int bind_text(sqlite3_stmt *st, int i, const char *s) {
  return s ? sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

// Single-integer query (first column of first row; `def` if no row or NULL).
static tsr_status query_int(store_index *ix, const char *sql, int64_t def, int64_t *out) {
  sqlite3_stmt *st = NULL;
  tsr_status s = prepare(ix, sql, &st);
  if (s) return s;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW)
    *out = sqlite3_column_type(st, 0) == SQLITE_NULL ? def : sqlite3_column_int64(st, 0);
  else if (rc == SQLITE_DONE)
    *out = def;
  else
    s = ix_err(ix, rc, sql);
  sqlite3_finalize(st);
  return s;
}

// The helpers above for the row readers of index_rows.c (index_internal.h).
tsr_status index_prepare(store_index *ix, const char *sql, sqlite3_stmt **st) {
  return prepare(ix, sql, st);
}
tsr_status index_sqlite_err(store_index *ix, int rc, const char *what) {
  return ix_err(ix, rc, what);
}
const char *index_clip_columns(const store_index *ix) { return clip_cols(ix); }
tsr_status index_query_int(store_index *ix, const char *sql, int64_t def, int64_t *out) {
  return query_int(ix, sql, def, out);
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
  sqlite3_stmt *st = NULL;
  tsr_status r = prepare(ix, "INSERT INTO settings(key, value) VALUES(?, ?)", &st);
  if (r) return r;
  for (int i = 0; i < NSET && !r; i++) {
    sqlite3_reset(st);
    bind_text(st, 1, k[i]);
    bind_text(st, 2, v[i]);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) r = ix_err(ix, rc, "write settings");
  }
  sqlite3_finalize(st);
  return r;
}

static tsr_status read_settings(store_index *ix, store_settings *s) {
  sqlite3_stmt *st = NULL;
  tsr_status r = prepare(ix, "SELECT key, value FROM settings", &st);
  if (r) return r;
  memset(s, 0, sizeof *s);
  unsigned seen = 0;
  int rc;
  char format[64] = "";
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *k = (const char *)sqlite3_column_text(st, 0);
    const char *v = (const char *)sqlite3_column_text(st, 1);
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
      if (!strcmp(v, "u8")) s->dtype = STORE_DTYPE_U8;
      else if (!strcmp(v, "bf16")) s->dtype = STORE_DTYPE_BF16;
      else if (!strcmp(v, "f32")) s->dtype = STORE_DTYPE_F32;
      else seen |= 1u << 30;
    } else if (!strcmp(k, "max_seconds")) s->max_seconds = strtod(v, NULL), seen |= 512;
    // vae_t, vae_s: since latent stores; an index made before has none (a pixel store)
    else if (!strcmp(k, "vae_t")) s->vae_t = iv;
    else if (!strcmp(k, "vae_s")) s->vae_s = iv;
  }
  if (rc != SQLITE_DONE) r = ix_err(ix, rc, "read settings");
  sqlite3_finalize(st);
  if (r) return r;
  if (strcmp(format, INDEX_FORMAT) != 0)
    return err_set(TSR_EFORMAT, "index %s: settings table has no format '%s': not a tessera index",
                   ix->path, INDEX_FORMAT);
  if (seen != 1023 || s->fps_num <= 0 || s->fps_den <= 0 || store_token_bytes(s) <= 0)
    return err_set(TSR_EFORMAT, "index %s: settings are missing or invalid (index damaged)",
                   ix->path);
  return TSR_OK;
}

// Checks that the open database is a tessera index, creating the schema if it is empty and
// `create`. *created is set when the schema was made here.
static tsr_status check_or_create(store_index *ix, int create, const store_settings *settings,
                                  int *created) {
  *created = 0;
  int64_t app, ver, ntables;
  tsr_status r = query_int(ix, "PRAGMA application_id", 0, &app);
  if (r) return r;
  if (app == 0) {
    r = query_int(ix, "SELECT count(*) FROM sqlite_master", 0, &ntables);
    if (r) return r;
    if (ntables != 0)
      return err_set(TSR_EFORMAT, "%s is an SQLite database but not a tessera index (it has other "
                     "tables); give a store directory made by `tessera ingest`", ix->path);
    if (!create)
      return err_set(TSR_EFORMAT, "%s is an empty database, not a tessera index", ix->path);
    if ((r = exec(ix, "BEGIN IMMEDIATE", "begin schema creation"))) return r;
    // Another process may have created it between our check and the lock.
    if ((r = query_int(ix, "SELECT count(*) FROM sqlite_master", 0, &ntables))) goto fail;
    if (ntables == 0) {
      char pragma[128];
      snprintf(pragma, sizeof pragma, "PRAGMA application_id=%d; PRAGMA user_version=%d;",
               INDEX_APP_ID, INDEX_SCHEMA_VERSION);
      if ((r = exec(ix, pragma, "set schema version"))) goto fail;
      if ((r = exec(ix, SCHEMA, "create schema"))) goto fail;
      if ((r = write_settings(ix, settings))) goto fail;
      char when[64];
      snprintf(when, sizeof when, "INSERT INTO settings VALUES('created_at', '%.3f')", now_unix());
      if ((r = exec(ix, when, "write settings"))) goto fail;
      *created = 1;
    }
    if ((r = exec(ix, "COMMIT", "commit schema creation"))) goto fail;
    if ((r = query_int(ix, "PRAGMA application_id", 0, &app))) return r;
  }
  if (app != INDEX_APP_ID)
    return err_set(TSR_EFORMAT, "%s is an SQLite database but not a tessera index "
                   "(application_id %#" PRIx64 ")", ix->path, (uint64_t)app);
  if ((r = query_int(ix, "PRAGMA user_version", 0, &ver))) return r;
  if (ver < 1 || ver > INDEX_SCHEMA_VERSION)
    return err_set(TSR_EFORMAT, "index %s has schema version %" PRId64 ", this build reads versions "
                   "1 to %d%s", ix->path, ver, INDEX_SCHEMA_VERSION,
                   ver > INDEX_SCHEMA_VERSION ? ": update tessera" : "");
  ix->version = (int)ver;
  if (ver == 1 && !ix->readonly) {  // add the caption columns, in one transaction
    if ((r = exec(ix, "BEGIN IMMEDIATE", "begin schema upgrade"))) return r;
    if ((r = query_int(ix, "PRAGMA user_version", 0, &ver))) goto fail;
    if (ver == 1) {  // another process may have upgraded it in between
      char sql[512];
      static const char *const cols[] = {"caption TEXT", "caption_offset INTEGER",
                                         "caption_tokens INTEGER", "caption_dim INTEGER",
                                         "caption_checksum TEXT"};
      for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        snprintf(sql, sizeof sql, "ALTER TABLE clips ADD COLUMN %s", cols[i]);
        if ((r = exec(ix, sql, "upgrade schema to version 2"))) goto fail;
      }
      snprintf(sql, sizeof sql, "PRAGMA user_version=%d; UPDATE settings SET value = '%d' WHERE "
               "key = 'schema_version'", INDEX_SCHEMA_VERSION, INDEX_SCHEMA_VERSION);
      if ((r = exec(ix, sql, "upgrade schema to version 2"))) goto fail;
    }
    if ((r = exec(ix, "COMMIT", "commit schema upgrade"))) goto fail;
    ix->version = INDEX_SCHEMA_VERSION;
  }
  return TSR_OK;
fail:
  rollback(ix);
  return r;
}

tsr_status index_open(store_index **out, const char *path, int create,
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
    tsr_status r = store_settings_check(settings);
    if (r) return err_wrap(r, "index %s: ", path);
  }
  store_index *ix = calloc(1, sizeof *ix);
  if (!ix || !(ix->path = strdup(path))) {
    free(ix);
    return err_set(TSR_ENOMEM, "out of memory opening index %s", path);
  }
  int flags = SQLITE_OPEN_READWRITE;
  if (!exists) flags |= SQLITE_OPEN_CREATE;
  else if (!create && access(path, W_OK) != 0) flags = SQLITE_OPEN_READONLY, ix->readonly = 1;
  int rc = sqlite3_open_v2(path, &ix->db, flags, NULL);
  tsr_status r = TSR_OK;
  if (rc != SQLITE_OK) {
    r = rc == SQLITE_CANTOPEN
            ? err_set(TSR_EIO, "cannot open index %s: %s (check that the directory exists and is "
                      "writable)", path, ix->db ? sqlite3_errmsg(ix->db) : sqlite3_errstr(rc))
            : ix_err(ix, rc, "open");
    goto fail;
  }
  sqlite3_extended_result_codes(ix->db, 1);
  if ((rc = sqlite3_busy_timeout(ix->db, BUSY_TIMEOUT_MS)) != SQLITE_OK) {
    r = ix_err(ix, rc, "set busy timeout");
    goto fail;
  }
  // Rollback journal (not WAL: WAL needs shared memory, unsafe on network file systems),
  // every commit fsync'ed. These pragmas change the connection, not the file.
  if ((r = exec(ix, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON", "set pragmas"))) goto fail;
  int created = 0;
  if ((r = check_or_create(ix, create, settings, &created))) goto fail;
  if ((r = read_settings(ix, &ix->settings))) goto fail;
  if (settings && !created) {
    char diff[1024];
    if (store_settings_diff(&ix->settings, settings, diff, sizeof diff)) {
      r = err_set(TSR_EMISMATCH, "store index %s was made with other settings (store vs "
                  "requested): %s. Use the store's settings, or another output store; nothing "
                  "was written", path, diff);
      goto fail;
    }
  }
  *out = ix;
  return TSR_OK;
fail:
  index_close(&ix);
  return r;
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

tsr_status index_source_lookup(store_index *ix, const char *path, int64_t size, int64_t mtime,
                               source_status *status, int *same_file) {
  *status = SOURCE_NEW;
  if (same_file) *same_file = 0;
  sqlite3_stmt *st = NULL;
  tsr_status r = prepare(ix, "SELECT status, size, mtime FROM sources WHERE path = ?", &st);
  if (r) return r;
  bind_text(st, 1, path);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    const char *s = (const char *)sqlite3_column_text(st, 0);
    *status = s && !strcmp(s, "done") ? SOURCE_DONE : SOURCE_FAILED;
    if (same_file)
      *same_file = sqlite3_column_int64(st, 1) == size && sqlite3_column_int64(st, 2) == mtime;
  } else if (rc != SQLITE_DONE) {
    r = ix_err(ix, rc, "look up source");
    err_wrap(r, "source %s: ", path);
  }
  sqlite3_finalize(st);
  return r;
}

static tsr_status check_clip(store_index *ix, const store_source *src, const store_clip *c, int i) {
  char path[512];
  tsr_status r = store_clip_check(&ix->settings, c);
  if (!r) r = store_shard_path(".", c->shard, path, sizeof path);
  if (r)
    return err_wrap(TSR_EINVAL, "index %s: source %s clip %d (index %d) is inconsistent: ",
                    ix->path, src->path, i, c->clip_index);
  return TSR_OK;
}

// Deletes the record (source and clips) of `path` in the current transaction.
static tsr_status delete_source(store_index *ix, const char *db, const char *path) {
  char sql[256];
  sqlite3_stmt *st = NULL;
  snprintf(sql, sizeof sql,
           "DELETE FROM %s.clips WHERE source_id IN (SELECT id FROM %s.sources WHERE path = ?1);"
           , db, db);
  tsr_status r = prepare(ix, sql, &st);
  if (r) return r;
  bind_text(st, 1, path);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return ix_err(ix, rc, "delete earlier clips");
  snprintf(sql, sizeof sql, "DELETE FROM %s.sources WHERE path = ?1", db);
  if ((r = prepare(ix, sql, &st))) return r;
  bind_text(st, 1, path);
  rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return ix_err(ix, rc, "delete earlier source record");
  return TSR_OK;
}

tsr_status index_commit_source(store_index *ix, const store_source *src,
                               const store_clip *clips, int nclips) {
  if (!src->path || (src->status != SOURCE_DONE && src->status != SOURCE_FAILED) || nclips < 0)
    return err_set(TSR_EINVAL, "index %s: commit of source %s: status must be done or failed",
                   ix->path, src->path ? src->path : "(null)");
  for (int i = 0; i < nclips; i++) {
    tsr_status r = check_clip(ix, src, &clips[i], i);
    if (r) return r;
  }
  sqlite3_stmt *ss = NULL, *cs = NULL;
  tsr_status r = exec(ix, "BEGIN IMMEDIATE", "begin transaction");
  if (r) return err_wrap(r, "commit source %s: ", src->path);
  if ((r = delete_source(ix, "main", src->path))) goto fail;
  if ((r = prepare(ix, "INSERT INTO sources(path, size, mtime, status, error, partial, "
                   "decoded_frames, label, clips, updated_at) VALUES(?,?,?,?,?,?,?,?,?,?)", &ss)))
    goto fail;
  bind_text(ss, 1, src->path);
  sqlite3_bind_int64(ss, 2, src->size);
  sqlite3_bind_int64(ss, 3, src->mtime);
  bind_text(ss, 4, src->status == SOURCE_DONE ? "done" : "failed");
  bind_text(ss, 5, src->error);
  sqlite3_bind_int(ss, 6, src->partial ? 1 : 0);
  sqlite3_bind_int64(ss, 7, src->decoded_frames);
  bind_text(ss, 8, src->label);
  sqlite3_bind_int(ss, 9, nclips);
  sqlite3_bind_double(ss, 10, now_unix());
  int rc = sqlite3_step(ss);
  if (rc != SQLITE_DONE) {
    r = ix_err(ix, rc, "insert source");
    goto fail;
  }
  int64_t sid = sqlite3_last_insert_rowid(ix->db);
  if ((r = prepare(ix, "INSERT INTO clips(source_id, clip_index, start_s, duration_s, src_fps, "
                   "src_w, src_h, rotation, sar_num, sar_den, codec, pix_fmt, decoded_frames, "
                   "frames, dropped_frames, T, H, W, tokens, shard, offset, bytes, checksum, "
                   "label, caption, caption_offset, caption_tokens, caption_dim, "
                   "caption_checksum) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                   "?,?)", &cs)))
    goto fail;
  for (int i = 0; i < nclips; i++) {
    const store_clip *c = &clips[i];
    char sum[17];
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
    bind_text(cs, 11, c->codec);
    bind_text(cs, 12, c->pix_fmt);
    sqlite3_bind_int64(cs, 13, c->decoded_frames);
    sqlite3_bind_int64(cs, 14, c->frames);
    sqlite3_bind_int64(cs, 15, c->dropped_frames);
    sqlite3_bind_int(cs, 16, c->T);
    sqlite3_bind_int(cs, 17, c->H);
    sqlite3_bind_int(cs, 18, c->W);
    sqlite3_bind_int64(cs, 19, c->tokens);
    bind_text(cs, 20, c->shard);
    sqlite3_bind_int64(cs, 21, c->offset);
    sqlite3_bind_int64(cs, 22, c->bytes);
    bind_text(cs, 23, sum);
    bind_text(cs, 24, c->label);
    if (c->caption_offset) {
      char csum[17];
      snprintf(csum, sizeof csum, "%016" PRIx64, c->caption_checksum);
      bind_text(cs, 25, c->caption ? c->caption : "");
      sqlite3_bind_int64(cs, 26, c->caption_offset);
      sqlite3_bind_int(cs, 27, c->caption_tokens);
      sqlite3_bind_int(cs, 28, c->caption_dim);
      bind_text(cs, 29, csum);
    } else {
      for (int k = 25; k <= 29; k++) sqlite3_bind_null(cs, k);
    }
    rc = sqlite3_step(cs);
    if (rc != SQLITE_DONE) {
      r = ix_err(ix, rc, "insert clip");
      err_wrap(r, "clip %d (%s offset %lld): ", c->clip_index, c->shard, (long long)c->offset);
      goto fail;
    }
  }
  sqlite3_finalize(ss);
  sqlite3_finalize(cs);
  ss = cs = NULL;
  if ((r = exec(ix, "COMMIT", "commit"))) goto fail;
  return TSR_OK;
fail:
  sqlite3_finalize(ss);
  sqlite3_finalize(cs);
  rollback(ix);
  return err_wrap(r, "commit source %s: ", src->path);
}

tsr_status index_shard_end(store_index *ix, const char *shard, int64_t *end) {
  *end = 0;
  sqlite3_stmt *st = NULL;
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT max(offset + (%d + bytes + %d) / %d * %d) FROM clips WHERE shard = ?",
           SHARD_BLOCK_HEADER_BYTES, SHARD_ALIGN - 1, SHARD_ALIGN, SHARD_ALIGN);
  tsr_status r = prepare(ix, sql, &st);
  if (r) return r;
  bind_text(st, 1, shard);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    if (sqlite3_column_type(st, 0) != SQLITE_NULL) *end = sqlite3_column_int64(st, 0);
  } else {
    r = ix_err(ix, rc, "committed end of shard");
    err_wrap(r, "shard %s: ", shard);
  }
  sqlite3_finalize(st);
  return r;
}

tsr_status index_shard_last_block(store_index *ix, const char *shard, int64_t *offset) {
  *offset = 0;
  sqlite3_stmt *st = NULL;
  tsr_status r = prepare(ix, "SELECT max(offset) FROM clips WHERE shard = ?", &st);
  if (r) return r;
  bind_text(st, 1, shard);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    if (sqlite3_column_type(st, 0) != SQLITE_NULL) *offset = sqlite3_column_int64(st, 0);
  } else {
    r = ix_err(ix, rc, "last block of shard");
    err_wrap(r, "shard %s: ", shard);
  }
  sqlite3_finalize(st);
  return r;
}

tsr_status index_totals(store_index *ix, store_totals *t) {
  memset(t, 0, sizeof *t);
  sqlite3_stmt *st = NULL;
  tsr_status r = prepare(ix,
      "SELECT (SELECT count(*) FROM sources WHERE status = 'done'),"
      " (SELECT count(*) FROM sources WHERE status = 'failed'),"
      " (SELECT count(*) FROM sources WHERE status = 'done' AND partial != 0),"
      " count(*), total(tokens), total(frames), total(dropped_frames), total(duration_s)"
      " FROM clips", &st);
  if (r) return r;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    t->sources_done = sqlite3_column_int64(st, 0);
    t->sources_failed = sqlite3_column_int64(st, 1);
    t->sources_partial = sqlite3_column_int64(st, 2);
    t->clips = sqlite3_column_int64(st, 3);
    // total() is a double; a damaged row can make it exceed int64 (converting such a
    // value is undefined: found by fuzz_index), so it is range-checked first.
    double tot[3] = {sqlite3_column_double(st, 4), sqlite3_column_double(st, 5),
                     sqlite3_column_double(st, 6)};
    int64_t *dst[3] = {&t->tokens, &t->frames, &t->dropped_frames};
    for (int i = 0; i < 3; i++) {
      if (!(tot[i] > -9.2e18 && tot[i] < 9.2e18)) {
        r = err_set(TSR_EFORMAT, "index %s: totals of tokens/frames out of range (%g): a clip "
                    "row is damaged; run `tessera index verify`", ix->path, tot[i]);
        break;
      }
      *dst[i] = (int64_t)tot[i];
    }
    t->seconds = sqlite3_column_double(st, 7);
  } else {
    r = ix_err(ix, rc, "totals");
  }
  sqlite3_finalize(st);
  return r;
}

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
  if ((r = prepare(ix, "ATTACH DATABASE ? AS src", &att))) return r;
  bind_text(att, 1, from_path);
  int rc = sqlite3_step(att);
  sqlite3_finalize(att);
  if (rc != SQLITE_DONE) return err_wrap(ix_err(ix, rc, "attach"), "merge %s: ", from_path);

  if ((r = exec(ix, "BEGIN IMMEDIATE", "begin merge"))) goto fail;
  if ((r = prepare(ix, "SELECT id, path, size, mtime, status, error, partial, decoded_frames, "
                   "label, clips, updated_at FROM src.sources ORDER BY id", &ls)) ||
      (r = prepare(ix, "SELECT status, size, mtime, updated_at FROM main.sources WHERE path = ?",
                   &look)) ||
      (r = prepare(ix, "INSERT INTO main.sources(path, size, mtime, status, error, partial, "
                   "decoded_frames, label, clips, updated_at) VALUES(?,?,?,?,?,?,?,?,?,?)", &ins)))
    goto fail;
  // Shard names get the prefix in front of their file name: "shards/x" -> "shards/<p>x".
  // rtrim(shard, <shard without '/'>) is the directory part including its last '/'.
  // A version-1 index has no caption columns (index_open upgrades only what it writes).
  int64_t from_ver = 1;
  if ((r = query_int(ix, "PRAGMA src.user_version", 1, &from_ver))) goto fail;
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
  if ((r = prepare(ix, cp_sql, &cp))) goto fail;
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
    bind_text(look, 1, path);
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
      r = ix_err(ix, rc, "look up source");
      goto fail;
    }
    if ((r = delete_source(ix, "main", path))) goto fail;
    sqlite3_reset(ins);
    bind_text(ins, 1, path);
    sqlite3_bind_int64(ins, 2, size);
    sqlite3_bind_int64(ins, 3, mtime);
    bind_text(ins, 4, status);
    sqlite3_bind_value(ins, 5, sqlite3_column_value(ls, 5));
    sqlite3_bind_value(ins, 6, sqlite3_column_value(ls, 6));
    sqlite3_bind_value(ins, 7, sqlite3_column_value(ls, 7));
    sqlite3_bind_value(ins, 8, sqlite3_column_value(ls, 8));
    sqlite3_bind_value(ins, 9, sqlite3_column_value(ls, 9));
    sqlite3_bind_double(ins, 10, updated);
    if ((rc = sqlite3_step(ins)) != SQLITE_DONE) {
      r = ix_err(ix, rc, "insert source");
      goto fail;
    }
    int64_t nid = sqlite3_last_insert_rowid(ix->db);
    sqlite3_reset(cp);
    sqlite3_bind_int64(cp, 1, nid);
    bind_text(cp, 2, shard_prefix);
    sqlite3_bind_int64(cp, 3, oid);
    if ((rc = sqlite3_step(cp)) != SQLITE_DONE) {
      r = ix_err(ix, rc, "copy clips");
      err_wrap(r, "source %s: ", path);
      goto fail;
    }
    merged += sqlite3_changes(ix->db);
  }
  if (rc != SQLITE_DONE) {
    r = ix_err(ix, rc, "read sources");
    goto fail;
  }
  sqlite3_finalize(ls);
  sqlite3_finalize(look);
  sqlite3_finalize(ins);
  sqlite3_finalize(cp);
  ls = look = ins = cp = NULL;
  if ((r = exec(ix, "COMMIT", "commit merge"))) goto fail;
  if ((r = exec(ix, "DETACH DATABASE src", "detach"))) return r;
  if (merged_clips) *merged_clips = merged;
  if (skipped) *skipped = skip;
  return TSR_OK;
fail:
  sqlite3_finalize(ls);
  sqlite3_finalize(look);
  sqlite3_finalize(ins);
  sqlite3_finalize(cp);
  rollback(ix);
  sqlite3_exec(ix->db, "DETACH DATABASE src", NULL, NULL, NULL);
  return err_wrap(r, "merge %s into %s: ", from_path, ix->path);
}
