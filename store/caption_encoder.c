// store/caption_encoder.c — the store's caption encoder record (store/caption_encoder.h).
#include "store/caption_encoder.h"

#include <jansson.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/index_internal.h"

// One record from a parsed encoder.json (or a record): every key the script writes that
// changes the numbers; TSR_EFORMAT naming what and the key otherwise.
static tsr_status from_json(json_t *o, const char *what, caption_encoder *e) {
  memset(e, 0, sizeof *e);
  json_t *name = json_object_get(o, "encoder"), *dim = json_object_get(o, "dim");
  json_t *pooled = json_object_get(o, "pooled"), *pad = json_object_get(o, "pad_to");
  json_t *dt = json_object_get(o, "dtype"), *mdt = json_object_get(o, "model_dtype");
  json_t *clean = json_object_get(o, "clean"), *mt = json_object_get(o, "max_tokens");
  const char *bad = !json_is_string(name) ? "encoder"
                    : !json_is_integer(dim) || json_integer_value(dim) < 1 ||
                            json_integer_value(dim) > STORE_MAX_CAPTION_DIM ? "dim"
                    : !json_is_boolean(pooled) ? "pooled"
                    : !(json_is_null(pad) || !pad || (json_is_integer(pad) &&
                        json_integer_value(pad) >= 1 &&
                        json_integer_value(pad) <= STORE_MAX_CAPTION_TOKENS)) ? "pad_to"
                    : !json_is_string(dt) ? "dtype"
                    : mdt && !json_is_string(mdt) ? "model_dtype"
                    : clean && !json_is_boolean(clean) ? "clean"
                    : mt && !json_is_null(mt) && !(json_is_integer(mt) &&
                        json_integer_value(mt) >= 0 && json_integer_value(mt) <= INT_MAX) ? "max_tokens"
                    : NULL;
  if (!bad && (strlen(json_string_value(name)) >= sizeof e->name ||
               strlen(json_string_value(dt)) >= sizeof e->dtype ||
               (mdt && strlen(json_string_value(mdt)) >= sizeof e->model_dtype)))
    bad = "encoder, dtype or model_dtype (too long)";
  if (bad)
    return err_set(TSR_EFORMAT, "%s: not a caption encoder record (key '%s' missing or "
                   "invalid): make it with tools/embed_captions.py", what, bad);
  snprintf(e->name, sizeof e->name, "%s", json_string_value(name));
  e->dim = (int)json_integer_value(dim);
  e->pooled = json_is_true(pooled);
  e->pad_to = json_is_integer(pad) ? (int)json_integer_value(pad) : 0;
  snprintf(e->dtype, sizeof e->dtype, "%s", json_string_value(dt));
  snprintf(e->model_dtype, sizeof e->model_dtype, "%s", mdt ? json_string_value(mdt) : "f32");
  e->clean = clean && json_is_true(clean);
  e->max_tokens = json_is_integer(mt) ? (int)json_integer_value(mt) : 0;
  return TSR_OK;
}

tsr_status caption_encoder_format(const caption_encoder *e, char *out, size_t n) {
  json_t *o = json_pack("{sssisbsosssssbsi}", "encoder", e->name, "dim", e->dim, "pooled",
                        e->pooled, "pad_to",
                        e->pad_to > 0 ? json_integer(e->pad_to) : json_null(), "dtype",
                        e->dtype, "model_dtype", e->model_dtype, "clean", e->clean,
                        "max_tokens", e->max_tokens);
  char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  if (!s) return err_set(TSR_ENOMEM, "out of memory");
  tsr_status st = TSR_OK;
  if (strlen(s) >= n) st = err_set(TSR_EINVAL, "caption encoder record over %zu bytes", n);
  else snprintf(out, n, "%s", s);
  free(s);
  return st;
}

tsr_status caption_encoder_parse(const char *text, const char *what, caption_encoder *e) {
  json_error_t je;
  json_t *o = json_loads(text, 0, &je);
  tsr_status st = json_is_object(o) ? from_json(o, what, e)
                  : err_set(TSR_EFORMAT, "%s: caption encoder record is not a JSON object", what);
  json_decref(o);
  return st;
}

tsr_status caption_encoder_from_dir(const char *dir, char *out, size_t n) {
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/encoder.json", dir);
  out[0] = 0;
  FILE *f = fopen(p, "r");
  if (!f) return TSR_OK;  // no record: the encoder stays unknown
  json_error_t je;
  json_t *o = json_loadf(f, 0, &je);
  fclose(f);
  caption_encoder e;
  tsr_status st = json_is_object(o) ? from_json(o, p, &e)
                  : err_set(TSR_EFORMAT, "%s: not JSON (%s): remove the folder and embed "
                            "the captions again", p, je.text);
  json_decref(o);
  return st ? st : caption_encoder_format(&e, out, n);
}

tsr_status index_caption_encoder(store_index *ix, char *out, size_t n) {
  out[0] = 0;
  sqlite3_stmt *stmt = NULL;
  tsr_status st = index_prepare(ix, "SELECT value FROM settings WHERE key = '"
                                CAPTION_ENCODER_KEY "'", &stmt);
  if (st) return st;
  int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    const char *v = (const char *)sqlite3_column_text(stmt, 0);
    if (v && strlen(v) >= n)
      st = err_set(TSR_EINVAL, "index %s: its caption encoder record does not fit in %zu "
                   "bytes", ix->path, n);
    else snprintf(out, n, "%s", v ? v : "");
  } else if (rc != SQLITE_DONE) {
    st = index_sqlite_err(ix, rc, "read the caption encoder");
  }
  sqlite3_finalize(stmt);
  return st;
}

tsr_status index_set_caption_encoder(store_index *ix, const char *text) {
  if (!text || !*text) return TSR_OK;
  if (ix->readonly)
    return err_set(TSR_EIO, "index %s is open read-only: cannot record its caption encoder",
                   ix->path);
  char had[CAPTION_ENCODER_MAX_BYTES];
  tsr_status st = index_exec(ix, "BEGIN IMMEDIATE", "begin recording the caption encoder");
  if (!st) st = index_caption_encoder(ix, had, sizeof had);
  if (!st && *had && strcmp(had, text) != 0)
    st = err_set(TSR_EMISMATCH, "store index %s holds caption embeddings of the encoder %s; "
                 "these are of %s. One store holds the embeddings of one encoder: embed the "
                 "captions with the store's, or use another output store; nothing was written",
                 ix->path, had, text);
  if (!st && !*had)
    st = index_insert_setting(ix, CAPTION_ENCODER_KEY, text, "record the caption encoder");
  if (!st) st = index_exec(ix, "COMMIT", "commit the caption encoder");
  if (st) index_rollback(ix);
  return st;
}
