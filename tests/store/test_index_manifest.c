// The index's manifest columns (schema version 3): every clip and source column committed
// and read back against literal values (canonical scores and scene-cut text included),
// NULLs for what a clip or source does not have, the refusals of store_clip_check and of a
// source's scene cuts and manifest key (nothing written), the scores and scene-cut helpers
// and their limits (the key that passes 4 KiB is named), the filters of the settings table,
// the upgrade of version-1 and -2 indexes (read as they are by index_open_as_is; one
// transaction to version 3 when opened for writing), merges (new columns copied, NULL from
// an older input, which stays as it was; filters taken or refused), and damaged values
// listed by the checked walk, each once.
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "store/clip.h"
#include "store/index.h"
#include "store/json_cols.h"
#include "store/settings.h"

static const store_settings S = {8, 1, 64, 2, 4, 4, 3, STORE_DTYPE_U8, 30, 0, 0};
#define TB 96

static char dir[256];

static store_clip mk_clip(int idx, int64_t offset, int T) {
  store_clip c = {.clip_index = idx, .start_s = idx * 2.0, .duration_s = T * 2 / 8.0,
                  .src_fps = 25, .src_w = 640, .src_h = 480, .sar_num = 1, .sar_den = 1,
                  .codec = "h264", .pix_fmt = "yuv420p", .decoded_frames = T * 6,
                  .frames = T * 2, .T = T, .H = 2, .W = 3, .tokens = T * 6,
                  .shard = "shards/m.tshard", .offset = offset, .bytes = T * 6 * TB,
                  .checksum = 0x1234 + (uint64_t)offset};
  return c;
}

// The first column of the first row of `q` on database `path` as text into out ("NULL").
static void sql1(const char *path, const char *q, char *out, size_t n) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  snprintf(out, n, "(error)");
  if (sqlite3_open(path, &db) == SQLITE_OK &&
      sqlite3_prepare_v2(db, q, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    const char *t = (const char *)sqlite3_column_text(st, 0);
    snprintf(out, n, "%s", t ? t : "NULL");
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static int sql_exec(const char *path, const char *q) {
  sqlite3 *db = NULL;
  int ok = sqlite3_open(path, &db) == SQLITE_OK &&
           sqlite3_exec(db, q, NULL, NULL, NULL) == SQLITE_OK;
  sqlite3_close(db);
  return ok;
}

typedef struct {
  int n;
  store_clip_row rows[12];
} collect;

static int collect_fn(const store_clip_row *r, void *ctx) {
  collect *c = ctx;
  if (c->n < 12) {
    store_clip_row *o = &c->rows[c->n];
    *o = *r;  // the copy's strings point into the copy
    o->c.codec = o->codec_buf, o->c.pix_fmt = o->pix_fmt_buf, o->c.shard = o->shard_buf;
    o->c.scores = r->c.scores ? o->scores_buf : NULL;
  }
  c->n++;
  return 0;
}

static const double CUTS[3] = {2.5, 4.7, 121.0 / 12};
#define CUTS_TEXT "[2.5,4.7,10.083333333333334]"

// Source /v/m.mp4: three clips of manifest rows 7 (spans 0, 1) and 8, cuts and a key.
static void commit_manifest_source(store_index *ix, store_clip c[3]) {
  c[0] = mk_clip(0, 4096, 2);
  c[0].manifest_row = 7, c[0].manifest_span = 0, c[0].span_start = 1.5, c[0].span_end = 4;
  c[0].scores = "{ \"aesthetic_score\" : 4.7, \"matching_score\": 0.41 }";
  c[1] = mk_clip(1, 8192, 3);
  c[1].manifest_row = 7, c[1].manifest_span = 1, c[1].span_start = 10, c[1].span_end = NAN;
  c[1].span_cut = 1;
  c[2] = mk_clip(2, 12288, 1);
  c[2].manifest_row = 8, c[2].span_start = NAN, c[2].span_end = 3.25;
  c[2].scores = "{\"b\":1e300,\"a\":-0.0,\"q\\\"x\":12}";
  store_source src = {.path = "/v/m.mp4", .size = 10, .mtime = 5, .status = SOURCE_DONE,
                      .has_scene_cuts = 1, .scene_cuts = CUTS, .n_scene_cuts = 3,
                      .manifest_key = "xxh3:00ff17aa"};
  CHECK_OK(index_commit_source(ix, &src, c, 3));
}

static void test_round_trip(const char *path) {
  store_index *ix = NULL;
  CHECK_OK(index_open(&ix, path, 1, &S));
  store_clip c[3], plain = mk_clip(0, 16384, 2);
  commit_manifest_source(ix, c);
  plain.shard = "shards/p.tshard";
  store_source ps = {.path = "/v/plain.mp4", .status = SOURCE_DONE, .has_scene_cuts = 1};
  CHECK_OK(index_commit_source(ix, &ps, &plain, 1));
  store_source fs = {.path = "/v/failed.mp4", .status = SOURCE_FAILED, .error = "no video"};
  CHECK_OK(index_commit_source(ix, &fs, NULL, 0));

  collect col = {0};
  CHECK_OK(index_foreach_clip(ix, collect_fn, &col));
  CHECK(col.n == 4, "4 clips, got %d", col.n);
  const store_clip *r = &col.rows[0].c;
  CHECK(r->manifest_row == 7 && r->manifest_span == 0 && r->span_start == 1.5 &&
        r->span_end == 4 && r->span_cut == 0, "clip 0 manifest fields");
  CHECK(r->scores && !strcmp(r->scores, "{\"aesthetic_score\":4.7,\"matching_score\":0.41}"),
        "clip 0 scores in canonical text: %s", r->scores ? r->scores : "NULL");
  r = &col.rows[1].c;
  CHECK(r->manifest_row == 7 && r->manifest_span == 1 && r->span_start == 10 &&
        isnan(r->span_end) && r->span_cut == 1 && !r->scores, "clip 1: open end, cut, no scores");
  r = &col.rows[2].c;
  CHECK(r->manifest_row == 8 && isnan(r->span_start) && r->span_end == 3.25, "clip 2: open start");
  CHECK(r->scores && !strcmp(r->scores, "{\"b\":1e+300,\"a\":-0,\"q\\\"x\":12}"),
        "clip 2 scores: order kept, -0 kept, quote escaped: %s", r->scores ? r->scores : "NULL");
  r = &col.rows[3].c;
  CHECK(r->manifest_row == 0 && r->manifest_span == 0 && isnan(r->span_start) &&
        isnan(r->span_end) && r->span_cut == 0 && !r->scores, "plain clip: no manifest fields");
  char got[256];
  sql1(path, "SELECT count(*) FROM clips WHERE manifest_row IS NULL AND manifest_span IS NULL "
       "AND span_start IS NULL AND span_end IS NULL AND span_cut IS NULL AND scores IS NULL",
       got, sizeof got);
  CHECK(!strcmp(got, "1"), "the plain clip's six columns are NULL (%s)", got);
  sql1(path, "SELECT typeof(span_end) || typeof(span_start) FROM clips WHERE clip_index = 1 AND "
       "manifest_row = 7", got, sizeof got);
  CHECK(!strcmp(got, "nullreal"), "an open end is NULL: %s", got);
  sql1(path, "SELECT scene_cuts || ' ' || manifest_key FROM sources WHERE path = '/v/m.mp4'", got,
       sizeof got);
  CHECK(!strcmp(got, CUTS_TEXT " xxh3:00ff17aa"), "source columns: %s", got);
  sql1(path, "SELECT coalesce(scene_cuts, 'NULL') || ' ' || coalesce(manifest_key, 'NULL') FROM "
       "sources WHERE path = '/v/failed.mp4'", got, sizeof got);
  CHECK(!strcmp(got, "NULL NULL"), "failed source: %s", got);

  char key[STORE_MAX_MANIFEST_KEY + 1] = "x";
  CHECK_OK(index_source_manifest_key(ix, "/v/m.mp4", key, sizeof key));
  CHECK(!strcmp(key, "xxh3:00ff17aa"), "manifest key: %s", key);
  CHECK_OK(index_source_manifest_key(ix, "/v/plain.mp4", key, sizeof key));
  CHECK(!strcmp(key, ""), "no key: '%s'", key);
  CHECK_OK(index_source_manifest_key(ix, "/v/none.mp4", key, sizeof key));
  CHECK(!strcmp(key, ""), "no source: '%s'", key);
  CHECK(index_source_manifest_key(ix, "/v/m.mp4", key, 5) == TSR_EINVAL, "small buffer refused");
  double *cuts = NULL;
  int n = 0;
  CHECK_OK(index_source_scene_cuts(ix, "/v/m.mp4", &cuts, &n));
  CHECK(n == 3 && cuts && cuts[0] == CUTS[0] && cuts[1] == CUTS[1] && cuts[2] == CUTS[2],
        "scene cuts read back bit for bit (%d)", n);
  free(cuts);
  CHECK_OK(index_source_scene_cuts(ix, "/v/plain.mp4", &cuts, &n));
  CHECK(n == 0 && !cuts, "detection on, no cut: %d", n);
  CHECK_OK(index_source_scene_cuts(ix, "/v/failed.mp4", &cuts, &n));
  CHECK(n == -1 && !cuts, "detection off: %d", n);
  CHECK_OK(index_source_scene_cuts(ix, "/v/none.mp4", &cuts, &n));
  CHECK(n == -1, "no record: %d", n);
  index_close(&ix);
}

// A commit of source `path` with clip c (and the source fields of *src) is refused with a
// message holding `want`, and nothing is recorded.
static void refused(store_index *ix, store_source src, store_clip c, const char *want,
                    const char *what) {
  source_status ss;
  int same;
  src.path = "/v/bad.mp4";
  src.status = SOURCE_DONE;
  CHECK(index_commit_source(ix, &src, &c, 1) == TSR_EINVAL && strstr(err_msg(), want) &&
            strstr(err_msg(), "/v/bad.mp4"), "%s: %s", what, err_msg());
  CHECK_OK(index_source_lookup(ix, "/v/bad.mp4", 0, 0, &ss, &same));
  CHECK(ss == SOURCE_NEW, "%s: nothing recorded", what);
}

static void test_refusals(const char *path) {
  store_index *ix = NULL;
  CHECK_OK(index_open(&ix, path, 0, &S));
  store_source none = {0};
  store_clip c = mk_clip(0, 40960, 1);
  c.manifest_row = 3, c.span_start = 2, c.span_end = 2;
  refused(ix, none, c, "is not a span", "end = start");
  c.span_start = 2, c.span_end = 1;
  refused(ix, none, c, "is not a span", "end before start");
  c.span_start = -1, c.span_end = NAN;
  refused(ix, none, c, "is not a span", "negative start");
  c.span_start = 0, c.span_end = INFINITY;
  refused(ix, none, c, "is not a span", "infinite end");
  c.span_end = 5, c.manifest_span = -1;
  refused(ix, none, c, "span -1 is negative", "negative span");
  c.manifest_span = 0, c.span_cut = 2;
  refused(ix, none, c, "span_cut 2", "span_cut 2");
  c.span_cut = 0, c.manifest_row = -4;
  refused(ix, none, c, "manifest row -4", "negative row");
  c.manifest_row = 3, c.scores = "[1, 2]";
  refused(ix, none, c, "not a JSON object", "scores an array");
  c.scores = "{\"aesthetic\": \"high\"}";
  refused(ix, none, c, "key 'aesthetic' is not a finite number", "a text score");
  c.scores = "{\"a\": 1, \"a\": 2}";
  refused(ix, none, c, "not JSON", "a key twice");
  c.scores = "{\"a\": 1e999}";
  refused(ix, none, c, "not JSON", "an infinite score");
  c.scores = NULL;
  store_source s = {.has_scene_cuts = 1, .scene_cuts = (const double[]){1, 1}, .n_scene_cuts = 2};
  refused(ix, s, c, "cut 1 (1 s) does not come after cut 0", "cuts not ascending");
  s.scene_cuts = (const double[]){NAN}, s.n_scene_cuts = 1;
  refused(ix, s, c, "scene cut 0", "a NaN cut");
  s = (store_source){.manifest_key = "has space"};
  refused(ix, s, c, "manifest key 'has space'", "a key with a space");
  s.manifest_key = "";
  refused(ix, s, c, "manifest key ''", "an empty key");
  index_close(&ix);
}

static int count_score(const char *name, double v, void *ctx) {
  char *out = ctx;
  size_t u = strlen(out);
  snprintf(out + u, 256 - u, "%s=%g;", name, v);
  return 0;
}

// The scores helpers and their limits, the key that passes STORE_MAX_SCORES_BYTES named.
static void test_scores_api(void) {
  char out[STORE_MAX_SCORES_BYTES + 1], seen[256] = "";
  const char *names[3] = {"aesthetic score", "motion", "a\"b"};
  const double vals[3] = {4.5, 0.25, -3};
  CHECK_OK(store_scores_format(names, vals, 3, out, sizeof out));
  CHECK(!strcmp(out, "{\"aesthetic score\":4.5,\"motion\":0.25,\"a\\\"b\":-3}"), "format: %s", out);
  char again[STORE_MAX_SCORES_BYTES + 1];
  CHECK_OK(store_scores_canon(out, again, sizeof again));
  CHECK(!strcmp(out, again), "canonical text is a fixed point: %s", again);
  CHECK_OK(store_scores_each(out, count_score, seen));
  CHECK(!strcmp(seen, "aesthetic score=4.5;motion=0.25;a\"b=-3;"), "each, in order: %s", seen);
  names[1] = "aesthetic score";
  CHECK(store_scores_format(names, vals, 2, out, sizeof out) == TSR_EFORMAT &&
        strstr(err_msg(), "'aesthetic score' is given twice"), "twice: %s", err_msg());
  CHECK(store_scores_format(names, (const double[]){NAN}, 1, out, sizeof out) == TSR_EFORMAT &&
        strstr(err_msg(), "not a finite number"), "NaN: %s", err_msg());
  CHECK(store_scores_canon("{}", out, sizeof out) == TSR_OK && !strcmp(out, "{}"), "empty object");
  CHECK(store_scores_canon("{}", out, 100) == TSR_EINVAL, "small buffer");
  // Keys of 100 bytes with value 1: the text after key i is 1 + 104 + 105 i bytes, so 39 keys
  // with the closing brace are exactly 4096 bytes, and key 39 passes the limit.
  static char keys[41][101];
  const char *kp[41];
  double ones[41];
  for (int i = 0; i < 41; i++) {
    snprintf(keys[i], sizeof keys[i], "k%03d%096d", i, 0);
    kp[i] = keys[i], ones[i] = 1;
  }
  CHECK_OK(store_scores_format(kp, ones, 39, out, sizeof out));
  CHECK(strlen(out) == 4096, "39 keys: %zu bytes", strlen(out));
  CHECK(store_scores_format(kp, ones, 40, out, sizeof out) == TSR_EFORMAT &&
        strstr(err_msg(), "longer than 4096 bytes at key 'k039"), "40 keys: %s", err_msg());
  static char many[65 * 16];
  strcpy(many, "{");
  for (int i = 0; i < 65; i++)
    snprintf(many + strlen(many), 16, "%s\"s%d\":%d", i ? "," : "", i, i);
  strcat(many, "}");
  CHECK(store_scores_check(many) == TSR_EFORMAT && strstr(err_msg(), "more than 64 keys") &&
        strstr(err_msg(), "'s64'"), "65 keys: %s", err_msg());
  char longkey[200];
  snprintf(longkey, sizeof longkey, "{\"%0129d\":1}", 0);
  CHECK(store_scores_check(longkey) == TSR_EFORMAT && strstr(err_msg(), "longer than 128"),
        "a key of 129 bytes: %s", err_msg());
}

static void test_scene_cuts_api(void) {
  char *text = NULL;
  double *v = NULL;
  int n = 0;
  CHECK_OK(store_scene_cuts_format(NULL, 0, &text));
  CHECK(text && !strcmp(text, "[]"), "no cut: %s", text);
  free(text);
  CHECK(store_scene_cuts_format((const double[]){3, 2}, 2, &text) == TSR_EINVAL && !text &&
        strstr(err_msg(), "cut 1"), "descending: %s", err_msg());
  CHECK(store_scene_cuts_format((const double[]){-0.5}, 1, &text) == TSR_EINVAL,
        "negative: %s", err_msg());
  // 3,000 cuts of 17 digits: more than 40 KiB of text
  double *many = malloc(3000 * sizeof *many);
  for (int i = 0; i < 3000; i++) many[i] = 1000 + i / 3.0;
  CHECK(store_scene_cuts_format(many, 3000, &text) == TSR_EINVAL &&
        strstr(err_msg(), "more than 40960 bytes"), "too many: %s", err_msg());
  CHECK_OK(store_scene_cuts_format(many, 1000, &text));
  CHECK_OK(store_scene_cuts_parse(text, &v, &n));
  int same = n == 1000;
  for (int i = 0; same && i < n; i++) same = v[i] == many[i];
  CHECK(same, "1,000 cuts read back bit for bit (%d)", n);
  free(v);
  free(text);
  free(many);
  CHECK_OK(store_scene_cuts_parse(" [ 1 , 2.5 ] ", &v, &n));
  CHECK(n == 2 && v[0] == 1 && v[1] == 2.5, "non-canonical text parsed");
  free(v);
  CHECK(store_scene_cuts_parse("{\"a\":1}", &v, &n) == TSR_EFORMAT && n == 0 && !v, "an object");
  CHECK(store_scene_cuts_parse("[1,\"x\"]", &v, &n) == TSR_EFORMAT && n == 0, "a text cut");
  CHECK(store_scene_cuts_parse("[2,1]", &v, &n) == TSR_EFORMAT, "descending text");
  CHECK(store_manifest_key_check("sha256:9f86d081884c7d659a2feaa0c55ad015") == TSR_OK, "a key");
  char k129[130];
  memset(k129, 'a', 129);
  k129[129] = 0;
  CHECK(store_manifest_key_check(k129) == TSR_EINVAL, "129 bytes");
  CHECK(store_manifest_key_check("tab\there") == TSR_EINVAL, "a tab");
}

static void test_filters(const char *path, const char *other) {
  store_index *ix = NULL;
  char f[STORE_MAX_FILTERS_BYTES + 1];
  int rec = -1;
  CHECK_OK(index_open(&ix, path, 0, &S));
  CHECK_OK(index_filters(ix, f, sizeof f, &rec));
  CHECK(!strcmp(f, "") && rec == 0, "no filters recorded: '%s' %d", f, rec);
  CHECK_OK(index_set_filters(ix, "min_seconds=2; aesthetic_score >= 4.5"));
  CHECK_OK(index_set_filters(ix, "min_seconds=2; aesthetic_score >= 4.5"));
  CHECK(index_set_filters(ix, "aesthetic_score >= 5") == TSR_EMISMATCH &&
        strstr(err_msg(), "'min_seconds=2; aesthetic_score >= 4.5'") &&
        strstr(err_msg(), "'aesthetic_score >= 5'"), "other filters: %s", err_msg());
  index_close(&ix);
  CHECK_OK(index_open(&ix, path, 0, &S));
  CHECK_OK(index_filters(ix, f, sizeof f, &rec));
  CHECK(!strcmp(f, "min_seconds=2; aesthetic_score >= 4.5") && rec == 1, "kept: '%s'", f);
  CHECK(index_filters(ix, f, 8, NULL) == TSR_EINVAL, "small buffer");
  index_close(&ix);
  // "" records "no filters": a later ingest with filters is refused.
  CHECK_OK(index_open(&ix, other, 1, &S));
  CHECK_OK(index_set_filters(ix, ""));
  CHECK_OK(index_filters(ix, f, sizeof f, &rec));
  CHECK(!strcmp(f, "") && rec == 1, "'' recorded: %d", rec);
  CHECK(index_set_filters(ix, "x > 1") == TSR_EMISMATCH, "filters after none");
  index_close(&ix);
}

// Copies index `from` to `to` and turns the copy into a version-`v` index (1 or 2) by
// dropping the columns later versions added.
static void age(const char *from, const char *to, int v) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
  CHECK(system(cmd) == 0, "copy");
  const char *v3 = "ALTER TABLE clips DROP COLUMN manifest_row; ALTER TABLE clips DROP COLUMN "
                   "manifest_span; ALTER TABLE clips DROP COLUMN span_start; ALTER TABLE clips "
                   "DROP COLUMN span_end; ALTER TABLE clips DROP COLUMN span_cut; ALTER TABLE "
                   "clips DROP COLUMN scores; ALTER TABLE sources DROP COLUMN scene_cuts; ALTER "
                   "TABLE sources DROP COLUMN manifest_key;";
  const char *v2 = "ALTER TABLE clips DROP COLUMN caption; ALTER TABLE clips DROP COLUMN "
                   "caption_offset; ALTER TABLE clips DROP COLUMN caption_tokens; ALTER TABLE "
                   "clips DROP COLUMN caption_dim; ALTER TABLE clips DROP COLUMN caption_checksum;";
  snprintf(cmd, sizeof cmd, "%s %s PRAGMA user_version = %d; UPDATE settings SET value = '%d' "
           "WHERE key = 'schema_version'", v3, v == 1 ? v2 : "", v, v);
  CHECK(sql_exec(to, cmd), "age to version %d", v);
}

static void test_upgrade(const char *v3path) {
  char p2[600], p1[600], got[256];
  snprintf(p2, sizeof p2, "%s/v2.sqlite", dir);
  snprintf(p1, sizeof p1, "%s/v1.sqlite", dir);
  age(v3path, p2, 2);
  age(v3path, p1, 1);
  // read as it is: the columns version 2 lacks are NULL; nothing is written through it
  store_index *ix = NULL;
  CHECK_OK(index_open_as_is(&ix, p2, &S));
  collect col = {0};
  CHECK_OK(index_foreach_clip(ix, collect_fn, &col));
  int nulls = col.n == 4;
  for (int i = 0; nulls && i < 4; i++) {
    const store_clip *c = &col.rows[i].c;
    nulls = c->manifest_row == 0 && isnan(c->span_start) && isnan(c->span_end) && !c->scores;
  }
  CHECK(nulls, "version 2 read as it is: %d clips, no manifest fields", col.n);
  char key[64] = "x";
  double *cuts = NULL;
  int n = 0;
  CHECK_OK(index_source_manifest_key(ix, "/v/m.mp4", key, sizeof key));
  CHECK_OK(index_source_scene_cuts(ix, "/v/m.mp4", &cuts, &n));
  CHECK(!strcmp(key, "") && n == -1, "version 2: no key, no cuts");
  store_source fs = {.path = "/v/x.mp4", .status = SOURCE_FAILED};
  CHECK(index_commit_source(ix, &fs, NULL, 0) == TSR_EIO, "no commit as is: %s", err_msg());
  CHECK(index_set_filters(ix, "a") == TSR_EIO, "no filters as is: %s", err_msg());
  index_close(&ix);
  sql1(p2, "PRAGMA user_version", got, sizeof got);
  CHECK(!strcmp(got, "2"), "left at version 2: %s", got);
  // opened for writing: upgraded in one transaction, old rows NULL, new ones recorded
  CHECK_OK(index_open(&ix, p2, 0, &S));
  sql1(p2, "SELECT (SELECT value FROM settings WHERE key = 'schema_version') || ' ' || "
       "count(manifest_row) || ' ' || count(scores) FROM clips", got, sizeof got);
  CHECK(!strcmp(got, "3 0 0"), "version 2 upgraded, its rows NULL: %s", got);
  sql1(p2, "PRAGMA user_version", got, sizeof got);
  CHECK(!strcmp(got, "3"), "user_version 3: %s", got);
  store_clip c[3];
  commit_manifest_source(ix, c);
  sql1(p2, "SELECT count(manifest_row) || ' ' || count(scores) || ' ' || (SELECT manifest_key "
       "FROM sources WHERE path = '/v/m.mp4') FROM clips", got, sizeof got);
  CHECK(!strcmp(got, "3 2 xxh3:00ff17aa"), "the upgraded index records them: %s", got);
  index_close(&ix);
  CHECK_OK(index_open(&ix, p1, 0, &S));
  index_close(&ix);
  sql1(p1, "SELECT (SELECT value FROM settings WHERE key = 'schema_version') || ' ' || "
       "count(caption) || count(caption_offset) || count(manifest_row) || count(span_cut) FROM "
       "clips", got, sizeof got);
  CHECK(!strcmp(got, "3 0000"), "version 1 upgraded to 3: %s", got);
}

// Every manifest column of every clip and source, in one text.
#define DUMP "SELECT group_concat(r, '|') FROM (SELECT s.path || ' ' || c.clip_index || ' ' || " \
  "quote(c.manifest_row) || ' ' || quote(c.manifest_span) || ' ' || quote(c.span_start) || ' ' " \
  "|| quote(c.span_end) || ' ' || quote(c.span_cut) || ' ' || quote(c.scores) || ' ' || "      \
  "quote(s.scene_cuts) || ' ' || quote(s.manifest_key) AS r FROM clips c JOIN sources s ON "  \
  "s.id = c.source_id ORDER BY s.path, c.clip_index)"

static void test_merge(const char *v3path) {
  char out[600], out2[600], p2[600], a[4096], b[4096];
  snprintf(out, sizeof out, "%s/merged.sqlite", dir);
  snprintf(out2, sizeof out2, "%s/merged2.sqlite", dir);
  snprintf(p2, sizeof p2, "%s/v2m.sqlite", dir);
  store_index *ix = NULL;
  int64_t merged = 0, skipped = 0;
  CHECK_OK(index_open(&ix, out, 1, &S));
  CHECK_OK(index_merge_from(ix, v3path, "", &merged, &skipped));
  CHECK(merged == 4 && skipped == 0, "merged %lld", (long long)merged);
  sql1(v3path, DUMP, a, sizeof a);
  sql1(out, DUMP, b, sizeof b);
  CHECK(!strcmp(a, b) && strstr(a, "xxh3:00ff17aa"), "columns copied:\n%s\n%s", a, b);
  char f[STORE_MAX_FILTERS_BYTES + 1];
  CHECK_OK(index_filters(ix, f, sizeof f, NULL));
  CHECK(!strcmp(f, "min_seconds=2; aesthetic_score >= 4.5"), "filters taken: '%s'", f);
  index_close(&ix);
  // from version 2, read as it is: NULL columns, the input left at version 2
  age(v3path, p2, 2);
  CHECK_OK(index_open(&ix, out2, 1, &S));
  CHECK_OK(index_merge_from(ix, p2, "x-", &merged, &skipped));
  CHECK(merged == 4, "merged from version 2: %lld", (long long)merged);
  index_close(&ix);
  sql1(out2, "SELECT count(*) || ' ' || count(manifest_row) || count(scores) FROM clips", b,
       sizeof b);
  CHECK(!strcmp(b, "4 00"), "NULL from version 2: %s", b);
  sql1(p2, "PRAGMA user_version", b, sizeof b);
  CHECK(!strcmp(b, "2"), "the input is not upgraded: %s", b);
  // other filters than the output's: refused, nothing merged
  snprintf(out2, sizeof out2, "%s/merged3.sqlite", dir);
  CHECK_OK(index_open(&ix, out2, 1, &S));
  CHECK_OK(index_set_filters(ix, "aesthetic_score >= 6"));
  store_totals t0, t1;
  CHECK_OK(index_totals(ix, &t0));
  CHECK(index_merge_from(ix, v3path, "y-", &merged, &skipped) == TSR_EMISMATCH &&
        strstr(err_msg(), "'aesthetic_score >= 6'") &&
        strstr(err_msg(), "'min_seconds=2; aesthetic_score >= 4.5'"), "filters: %s", err_msg());
  CHECK_OK(index_totals(ix, &t1));
  CHECK(t1.clips == t0.clips && t1.sources_done == t0.sources_done, "nothing merged");
  index_close(&ix);
}

typedef struct {
  int64_t ids[16];
  int n;
} bad_ids;

static void on_bad(int64_t id, const char *why, void *ctx) {
  bad_ids *b = ctx;
  (void)why;
  if (b->n < 16) b->ids[b->n++] = id;
}

// verify's walk: a row the reader gives goes through store_clip_check
static int check_row(const store_clip_row *r, void *ctx) {
  if (store_clip_check(&S, &r->c) != TSR_OK) on_bad(r->id, err_msg(), ctx);
  return 0;
}

// Nine good manifest clips, then seven of them damaged with SQL, one way each.
static void test_damaged(void) {
  char path[600], sql[6000];
  snprintf(path, sizeof path, "%s/damaged.sqlite", dir);
  store_index *ix = NULL;
  CHECK_OK(index_open(&ix, path, 1, &S));
  store_clip c[9];
  for (int i = 0; i < 9; i++) {
    c[i] = mk_clip(i, 4096 * (1 + 2 * i), 1);
    c[i].manifest_row = i + 1, c[i].span_start = i, c[i].span_end = i + 0.5;
    c[i].scores = "{\"aesthetic\":5}";
  }
  store_source src = {.path = "/v/d.mp4", .status = SOURCE_DONE};
  CHECK_OK(index_commit_source(ix, &src, c, 9));
  index_close(&ix);
  char big[5100];
  snprintf(big, sizeof big, "{\"a\":1,\"%04990d\":2}", 0);
  snprintf(sql, sizeof sql,
           "UPDATE clips SET manifest_row = 'abc' WHERE clip_index = 0;"
           "UPDATE clips SET manifest_span = -1 WHERE clip_index = 2;"
           "UPDATE clips SET span_end = 0.5 WHERE clip_index = 3;"  // start 3
           "UPDATE clips SET span_cut = 7 WHERE clip_index = 4;"
           "UPDATE clips SET scores = '{\"aesthetic\":\"high\"}' WHERE clip_index = 5;"
           "UPDATE clips SET scores = '%s' WHERE clip_index = 6;"
           "UPDATE clips SET manifest_row = 0 WHERE clip_index = 8;", big);
  CHECK(sql_exec(path, sql), "damage");
  CHECK_OK(index_open(&ix, path, 0, &S));
  bad_ids b = {0};
  CHECK_OK(index_foreach_clip_checked(ix, check_row, on_bad, &b));
  index_close(&ix);
  // ids are 1..9 in clip order: every damaged one listed once, in id order, the rest not
  const int64_t want[7] = {1, 3, 4, 5, 6, 7, 9};
  int same = b.n == 7;
  for (int i = 0; same && i < 7; i++) same = b.ids[i] == want[i];
  CHECK(same, "damaged rows listed: %d of them (first %lld)", b.n, (long long)b.ids[0]);
}

int main(void) {
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(dir, sizeof dir, "%s/test_index_manifest_XXXXXX", tmp);
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char path[512], other[512], cmd[600];
  snprintf(path, sizeof path, "%s/index.sqlite", dir);
  snprintf(other, sizeof other, "%s/other.sqlite", dir);
  test_round_trip(path);
  test_refusals(path);
  test_scores_api();
  test_scene_cuts_api();
  test_filters(path, other);
  test_upgrade(path);
  test_merge(path);
  test_damaged();
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0, "cleanup");
  return check_done();
}
