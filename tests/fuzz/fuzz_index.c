// fuzz_index: index rows as every reader gets them. The input bytes drive the values of
// one source row and one clip row (every column, any SQLite type: integers of any size,
// reals, text, NULL) inserted with SQL into a fresh index with the real schema, beside a
// real shard; then every reader of rows runs on it: index_foreach_clip and index_get_clip
// (read_row), the row checks (store_clip_check, store_shard_path, the scores' parser
// store_scores_each), index_totals, index_clip_lengths, the source lookups of a manifest
// ingest (index_source_manifest_key, index_source_scene_cuts, index_filters), store_verify,
// the recovery that trusts rows (store_recover: committed shard ends), the check of a lost
// index (store_index_state) and the training data loader (model/train/data.c data_open,
// which opens shards through store_shard_path). The manifest columns (schema version 3) come
// after the others in the input, so the seeds of the columns before them still apply.
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"
#include "store/shard.h"
#include "store/clip.h"
#include "store/index.h"
#include "store/json_cols.h"
#include "store/rebuild.h"
#include "store/recover.h"
#include "store/settings.h"
#include "store/verify.h"
#include "model/train/data.h"

static const store_settings S = {4, 1, 32, 1, 4, 4, 3, STORE_DTYPE_U8, 2};  // 48-byte tokens

// Input bytes, consumed from the front.
typedef struct {
  const uint8_t *p;
  size_t n;
} in_t;

static uint64_t take(in_t *in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes && in->n; i++, in->p++, in->n--) v |= (uint64_t)*in->p << (8 * i);
  return v;
}

// Binds column value i from the input: a selector byte picks the type, then the value.
// Near-valid values are likely (the real row's value, small edits), so the checks past
// the first one are reached.
static void bind_value(sqlite3_stmt *st, int i, in_t *in, int64_t real, const char *real_text) {
  uint8_t sel = (uint8_t)take(in, 1);
  char buf[300];
  switch (sel % 8) {
    case 0: case 1: case 2:  // the real value
      if (real_text) sqlite3_bind_text(st, i, real_text, -1, SQLITE_TRANSIENT);
      else sqlite3_bind_int64(st, i, real);
      break;
    case 3: sqlite3_bind_int64(st, i, real + (int8_t)take(in, 1)); break;
    case 4: sqlite3_bind_int64(st, i, (int64_t)take(in, 8)); break;
    case 5: sqlite3_bind_double(st, i, (double)(int64_t)take(in, 8) / 3.0); break;
    case 6: {  // text from the input, or the real text with a few bytes replaced
      size_t len = take(in, 1);
      if (len > sizeof buf - 1) len = sizeof buf - 1;
      if (real_text && (sel & 8)) {
        snprintf(buf, sizeof buf, "%s", real_text);
        for (size_t k = 0; k < len % 4 && buf[0]; k++) buf[take(in, 1) % strlen(buf)] = (char)take(in, 1);
      } else {
        size_t k = 0;
        for (; k < len && in->n; k++) buf[k] = (char)take(in, 1);
        buf[k] = 0;
      }
      sqlite3_bind_text(st, i, buf, -1, SQLITE_TRANSIENT);
      break;
    }
    default: sqlite3_bind_null(st, i); break;
  }
}

static int noop_score(const char *name, double v, void *ctx) {
  (void)name;
  *(double *)ctx += v;
  return 0;
}

static int noop_clip(const store_clip_row *row, void *ctx) {
  int64_t *n = ctx;
  char path[512];
  double sum = 0;
  (void)store_clip_check(&S, &row->c);
  if (row->c.scores) (void)store_scores_each(row->c.scores, noop_score, &sum);
  (void)store_shard_path(".", row->c.shard, path, sizeof path);
  (*n)++;
  return 0;
}

static void noop_line(const char *line, int problem, void *ctx) {
  (void)line;
  (void)problem;
  (void)ctx;
}

// The real shard (one block of 2x2x2 tokens with its trailer), written once; its bytes
// are kept to rewrite it after recovery may have cut it.
static uint8_t *shard_bytes;
static size_t shard_len;
static char dir[600], ipath[700], spath[700], rel[64], sum_hex[17];
static int64_t block_off;
static uint8_t *index_bytes;  // a fresh index with the real schema, made once
static size_t index_len;

static uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  struct stat sb;
  uint8_t *b = NULL;
  if (!f || stat(path, &sb) != 0 || !(b = malloc((size_t)sb.st_size + 1)) ||
      fread(b, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size)
    abort();
  fclose(f);
  *n = (size_t)sb.st_size;
  return b;
}

static void setup(void) {
  snprintf(dir, sizeof dir, "%s", fuzz_scratch_path(".store"));
  char sub[700];
  mkdir(dir, 0755);
  snprintf(sub, sizeof sub, "%s/shards", dir);
  mkdir(sub, 0755);
  snprintf(sub, sizeof sub, "%s/parts", dir);
  mkdir(sub, 0755);
  snprintf(rel, sizeof rel, "shards/f.tshard");
  snprintf(spath, sizeof spath, "%s/%s", dir, rel);
  snprintf(ipath, sizeof ipath, "%s/index.sqlite", dir);
  unlink(spath);
  shard_writer *w = NULL;
  uint8_t pay[8 * 48];
  for (size_t i = 0; i < sizeof pay; i++) pay[i] = (uint8_t)(i * 7);
  uint64_t sum = 0;
  const char meta[] = "{\"v\":1}";
  if (shard_writer_create(&w, spath, &S) || shard_writer_begin_clip(w, 2, 2, &block_off) ||
      shard_writer_append(w, pay, sizeof pay) ||
      shard_writer_end_clip_meta(w, 2, meta, sizeof meta - 1, &sum) || shard_writer_sync(w)) {
    fprintf(stderr, "fuzz_index setup: %s\n", err_msg());
    abort();
  }
  shard_writer_close(&w);
  snprintf(sum_hex, sizeof sum_hex, "%016llx", (unsigned long long)sum);
  shard_bytes = slurp(spath, &shard_len);
  store_index *ix = NULL;
  unlink(ipath);
  if (index_open(&ix, ipath, 1, &S) != TSR_OK) abort();  // a fresh real schema must open
  index_close(&ix);
  index_bytes = slurp(ipath, &index_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) setup();
  in_t in = {data, size};
  fuzz_write_file(spath, shard_bytes, shard_len);
  fuzz_write_file(ipath, index_bytes, index_len);
  store_index *ix = NULL;

  sqlite3 *db = NULL;
  if (sqlite3_open(ipath, &db) != SQLITE_OK) abort();
  sqlite3_exec(db, "PRAGMA synchronous=OFF", NULL, NULL, NULL);  // scratch: no fsync needed
  sqlite3_stmt *st = NULL;
  // The source row: path, size, mtime, status, error, partial, decoded_frames, label, clips.
  sqlite3_prepare_v2(db, "INSERT INTO sources(path, size, mtime, status, error, partial, "
                     "decoded_frames, label, clips, updated_at) VALUES(?,?,?,?,?,?,?,?,?,0)", -1,
                     &st, NULL);
  bind_value(st, 1, &in, 0, "/videos/a.mp4");
  bind_value(st, 2, &in, 1000, NULL);
  bind_value(st, 3, &in, 1700000000, NULL);
  bind_value(st, 4, &in, 0, (take(&in, 1) & 1) ? "done" : "failed");
  bind_value(st, 5, &in, 0, "");
  bind_value(st, 6, &in, 0, NULL);
  bind_value(st, 7, &in, 16, NULL);
  bind_value(st, 8, &in, 0, "cats");
  bind_value(st, 9, &in, 1, NULL);
  int ok = sqlite3_step(st) == SQLITE_DONE;
  sqlite3_finalize(st);
  // The clip row, every column.
  sqlite3_prepare_v2(db, "INSERT INTO clips(source_id, clip_index, start_s, duration_s, src_fps, "
                     "src_w, src_h, rotation, sar_num, sar_den, codec, pix_fmt, decoded_frames, "
                     "frames, dropped_frames, T, H, W, tokens, shard, offset, bytes, checksum, "
                     "label) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st,
                     NULL);
  const int64_t real[24] = {1, 0, 0, 1, 25, 320, 240, 0, 1, 1, 0, 0, 8, 2, 0, 2, 2, 2, 8, 0,
                            block_off, 8 * 48, 0, 0};
  const char *text[24] = {[10] = "h264", [11] = "yuv420p", [19] = rel, [22] = sum_hex,
                          [23] = "cats"};
  for (int i = 0; i < 24; i++) bind_value(st, i + 1, &in, real[i], text[i]);
  ok = ok && sqlite3_step(st) == SQLITE_DONE;
  sqlite3_finalize(st);
  // The manifest columns: the clip's, then the source's.
  sqlite3_prepare_v2(db, "UPDATE clips SET manifest_row = ?, manifest_span = ?, span_start = ?, "
                     "span_end = ?, span_cut = ?, scores = ?", -1, &st, NULL);
  const int64_t mreal[6] = {3, 1, 0, 2, 1, 0};
  const char *mtext[6] = {[5] = "{\"aesthetic\":4.5,\"motion\":0.25}"};
  for (int i = 0; i < 6; i++) bind_value(st, i + 1, &in, mreal[i], mtext[i]);
  (void)sqlite3_step(st);
  sqlite3_finalize(st);
  sqlite3_prepare_v2(db, "UPDATE sources SET scene_cuts = ?, manifest_key = ?", -1, &st, NULL);
  bind_value(st, 1, &in, 0, "[0.5,1.25]");
  bind_value(st, 2, &in, 0, "xxh3:00ff");
  (void)sqlite3_step(st);
  sqlite3_finalize(st);
  sqlite3_close(db);
  (void)ok;  // a row the schema rejects still leaves a valid index to read

  if (index_open(&ix, ipath, 0, NULL) == TSR_OK) {
    int64_t n = 0, *ids = NULL, *tok = NULL, cnt = 0;
    store_clip_row *row = malloc(sizeof *row);
    store_totals t;
    (void)index_foreach_clip(ix, noop_clip, &n);
    if (row) (void)index_get_clip(ix, 1, row);
    free(row);
    (void)index_totals(ix, &t);
    if (index_clip_lengths(ix, &ids, &tok, &cnt) == TSR_OK) {
      free(ids);
      free(tok);
    }
    char key[STORE_MAX_MANIFEST_KEY + 1], filters[64];
    double *cuts = NULL;
    int ncuts = 0;
    (void)index_source_manifest_key(ix, "/videos/a.mp4", key, sizeof key);
    if (index_source_scene_cuts(ix, "/videos/a.mp4", &cuts, &ncuts) == TSR_OK) free(cuts);
    (void)index_filters(ix, filters, sizeof filters, NULL);
    index_close(&ix);
  }
  store_verify_result vr;
  (void)store_verify(dir, noop_line, NULL, &vr);
  data_store *d = NULL;
  if (data_open(&d, dir) == TSR_OK) {
    const uint8_t *tokens = NULL;
    (void)data_clip_tokens(d, 0, 1, &tokens);
    data_close(&d);
  }
  char why[512];
  (void)store_index_state(dir, why, sizeof why);
  if (index_open(&ix, ipath, 0, NULL) == TSR_OK) {
    (void)store_recover(dir, ix);  // trusts rows: committed ends, shards to keep
    index_close(&ix);
  }
  err_clear();
  return 0;
}
