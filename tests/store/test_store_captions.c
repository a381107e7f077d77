// A store of a manifest's clips: each clip with its own caption block right before it
// (caption, clip, caption, clip, ...), beside a source with one caption shared by its clips
// and a source with none; scores, spans, scene cuts and manifest keys in the trailers.
// Checked on it: verify (clean; then damaged manifest values and scores, each a CORRUPT
// row), the trainer's reader (every clip gets its own caption's embedding), a merge, the
// rebuild of a lost index (every column of every row equal to the index ingest wrote), and
// recovery of a shard tail inside such a source (an interrupted source's caption and clip
// blocks cut, nothing quarantined; a complete uncommitted one quarantined as a shard whose
// rebuild links every clip to its own caption again, though the copy moved every block).
//   test_store_captions              run the tests
//   test_store_captions make DIR     write the store to DIR (for tests/cli/list_manifest.sh)
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "lines.h"
#include "model/train/data.h"
#include "store/clip.h"
#include "store/clip_meta.h"
#include "store/index.h"
#include "store/merge.h"
#include "store/rebuild.h"
#include "store/recover.h"
#include "store/settings.h"
#include "store/shard.h"
#include "store/store.h"
#include "store/verify.h"

static const store_settings S = {8, 1, 64, 2, 4, 4, 3, STORE_DTYPE_U8, 0, 0, 0};
#define TB 96
#define DIM 4

// A caption of `tokens` x DIM values, the first one `mark` (which clip's it is), the rest
// a pattern.
static int64_t write_caption(shard_writer *w, float mark, int tokens, const char *text,
                             store_clip *c) {
  float emb[3 * DIM];
  for (int i = 0; i < tokens * DIM; i++) emb[i] = i ? (float)i / 8 : mark;
  CHECK_OK(shard_writer_caption(w, emb, tokens, DIM, STORE_DTYPE_F32, text, strlen(text),
                                &c->caption_offset, &c->caption_checksum));
  c->caption_tokens = tokens, c->caption_dim = DIM, c->caption = text;
  return c->caption_offset;
}

// Writes clip c (its fields set but for the block's) of T x 2 x 3 tokens of byte v, with
// its trailer from *m (m->last as given), as ingest does.
static void write_clip(shard_writer *w, const char *rel, int T, uint8_t v, clip_meta *m,
                       store_clip *c) {
  uint8_t tok[TB];
  memset(tok, v, sizeof tok);
  CHECK_OK(shard_writer_begin_clip(w, 2, 3, &c->offset));
  for (int i = 0; i < T * 6; i++) CHECK_OK(shard_writer_append(w, tok, sizeof tok));
  c->duration_s = T * 2 / 8.0, c->src_fps = 25, c->src_w = 640, c->src_h = 480;
  c->sar_num = c->sar_den = 1, c->codec = "h264", c->pix_fmt = "yuv420p";
  c->frames = T * 2, c->decoded_frames = T * 6 + 1, c->T = T, c->H = 2, c->W = 3;
  c->tokens = T * 6, c->bytes = T * 6 * TB, c->shard = rel;
  m->c = *c;
  char *json = NULL;
  size_t n = 0;
  CHECK_OK(clip_meta_encode(m, &json, &n));
  CHECK_OK(shard_writer_end_clip_meta(w, T, json, n, &c->checksum));
  free(json);
}

static clip_meta *new_meta(const char *path, double at) {
  clip_meta *m = calloc(1, sizeof *m);
  snprintf(m->path, sizeof m->path, "%s", path);
  m->size = 1000, m->mtime = 7, m->ingested_at = at;
  snprintf(m->codec, sizeof m->codec, "h264");
  snprintf(m->pix_fmt, sizeof m->pix_fmt, "yuv420p");
  return m;
}

static const double CUTS_A[2] = {1.25, 121.0 / 12};
static const char *TEXT_A[3] = {"an orange sun setting over a violet sky", "blue waves rolling",
                                "a pale moon crossing a dark sky"};

// Source A: three manifest clips (rows 1, 1, 2), each with its own caption right before it.
static void source_a(store_index *ix, shard_writer *w, const char *rel) {
  clip_meta *m = new_meta("/v/a.mp4", 100.5);
  store_clip c[3] = {{0}};
  const char *scores[3] = {"{\"aesthetic_score\":4.7,\"matching_score\":0.41}", NULL,
                           "{\"aesthetic_score\":5.25}"};
  for (int k = 0; k < 3; k++) {
    write_caption(w, 100 + k, 1 + k, TEXT_A[k], &c[k]);
    c[k].clip_index = k, c[k].start_s = 1.5 + 4 * k;
    c[k].manifest_row = k < 2 ? 1 : 2, c[k].manifest_span = k == 1;
    c[k].span_start = k == 2 ? NAN : 1.5 + 4 * k, c[k].span_end = k == 1 ? NAN : 3.5 + 4 * k;
    c[k].span_cut = k == 2, c[k].scores = scores[k];
    m->last = k == 2, m->source_decoded_frames = 40;
    if (m->last) {
      m->has_scene_cuts = 1, m->scene_cuts = (double *)CUTS_A, m->n_scene_cuts = 2;
      snprintf(m->manifest_key, sizeof m->manifest_key, "xxh3:a1");
    }
    write_clip(w, rel, 1 + k, (uint8_t)(10 + k), m, &c[k]);
  }
  CHECK_OK(shard_writer_sync(w));
  // a done source without a note: "", as ingest records it (a rebuild gives "" for it)
  store_source src = {.path = "/v/a.mp4", .size = 1000, .mtime = 7, .status = SOURCE_DONE,
                      .error = "", .decoded_frames = 40, .has_scene_cuts = 1, .scene_cuts = CUTS_A,
                      .n_scene_cuts = 2, .manifest_key = "xxh3:a1"};
  CHECK_OK(index_commit_source(ix, &src, c, 3));
  free(m);
}

// Source B: one caption before both its clips (a caption file beside a video), a label,
// a note; source C: one manifest clip without caption, scene detection on and no cut.
static void sources_b_c(store_index *ix, shard_writer *wb, const char *relb, shard_writer *wc,
                        const char *relc) {
  clip_meta *m = new_meta("/v/b.mp4", 101.25);
  m->has_label = 1;
  snprintf(m->label, sizeof m->label, "dogs");
  snprintf(m->note, sizeof m->note, "truncated: kept 12 frames");
  store_clip b[2] = {{0}};
  write_caption(wb, 200, 2, "a dog", &b[0]);
  b[1] = b[0];
  for (int k = 0; k < 2; k++) {
    b[k].clip_index = k, b[k].label = "dogs", m->last = k == 1, m->partial = 1;
    m->source_decoded_frames = 12;
    write_clip(wb, relb, 2, (uint8_t)(20 + k), m, &b[k]);
  }
  CHECK_OK(shard_writer_sync(wb));
  store_source sb = {.path = "/v/b.mp4", .size = 1000, .mtime = 7, .status = SOURCE_DONE,
                     .error = "truncated: kept 12 frames", .partial = 1, .decoded_frames = 12,
                     .label = "dogs"};
  CHECK_OK(index_commit_source(ix, &sb, b, 2));
  free(m);
  m = new_meta("/v/c.mp4", 102);
  store_clip c = {.manifest_row = 3, .span_start = 0, .span_end = 1,
                  .scores = "{\"motion score\":0.5}"};
  m->last = 1, m->has_scene_cuts = 1;
  snprintf(m->manifest_key, sizeof m->manifest_key, "xxh3:c3");
  write_clip(wc, relc, 1, 30, m, &c);
  CHECK_OK(shard_writer_sync(wc));
  store_source sc = {.path = "/v/c.mp4", .size = 1000, .mtime = 7, .status = SOURCE_DONE,
                     .error = "", .has_scene_cuts = 1, .manifest_key = "xxh3:c3"};
  CHECK_OK(index_commit_source(ix, &sc, &c, 1));
  free(m);
}

// The store: A then C in shards/w0, B in shards/w1, and a failed source. With keep_w0,
// shards/w0's writer is left open there (to write what a crash leaves after C).
static void make_store(const char *dir, shard_writer **keep_w0) {
  store_index *ix = NULL;
  shard_writer *w0 = NULL, *w1 = NULL;
  char p0[600], p1[600];
  snprintf(p0, sizeof p0, "%s/shards/w0.tshard", dir);
  snprintf(p1, sizeof p1, "%s/shards/w1.tshard", dir);
  CHECK_OK(store_open(&ix, dir, 1, &S));
  CHECK_OK(shard_writer_create(&w0, p0, &S));
  CHECK_OK(shard_writer_create(&w1, p1, &S));
  source_a(ix, w0, "shards/w0.tshard");
  sources_b_c(ix, w1, "shards/w1.tshard", w0, "shards/w0.tshard");
  store_source f = {.path = "/v/f.mp4", .status = SOURCE_FAILED, .error = "no video stream"};
  CHECK_OK(index_commit_source(ix, &f, NULL, 0));
  CHECK_OK(index_set_filters(ix, "aesthetic_score >= 4"));
  if (keep_w0) *keep_w0 = w0;
  else shard_writer_close(&w0);
  shard_writer_close(&w1);
  index_close(&ix);
}

// ---- reading the index back ------------------------------------------------------------

// Every row of `sql` on the index of `dir` as text, "column=type:value;" for each column but
// those named in `skip` (" id updated_at "), a line a row; reals as %a (bit for bit).
static char *dump(const char *dir, const char *sql, const char *skip) {
  char path[600], name[80];
  snprintf(path, sizeof path, "%s/index.sqlite", dir);
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  size_t cap = 1 << 16, len = 0;
  char *out = calloc(1, cap);
  CHECK(sqlite3_open(path, &db) == SQLITE_OK && sqlite3_prepare_v2(db, sql, -1, &st, NULL) ==
        SQLITE_OK, "dump: %s", sqlite3_errmsg(db));
  while (st && sqlite3_step(st) == SQLITE_ROW) {
    for (int i = 0; i < sqlite3_column_count(st); i++) {
      snprintf(name, sizeof name, " %s ", sqlite3_column_name(st, i));
      if (strstr(skip, name)) continue;
      char v[9000];
      switch (sqlite3_column_type(st, i)) {
        case SQLITE_INTEGER:
          snprintf(v, sizeof v, "i:%lld", (long long)sqlite3_column_int64(st, i));
          break;
        case SQLITE_FLOAT: snprintf(v, sizeof v, "r:%a", sqlite3_column_double(st, i)); break;
        case SQLITE_TEXT: snprintf(v, sizeof v, "t:%s", sqlite3_column_text(st, i)); break;
        case SQLITE_NULL: snprintf(v, sizeof v, "null"); break;
        default: snprintf(v, sizeof v, "blob"); break;
      }
      size_t need = strlen(name) + strlen(v) + 4;
      if (len + need >= cap) out = realloc(out, cap *= 2);
      len += (size_t)snprintf(out + len, cap - len, "%s=%s;", sqlite3_column_name(st, i), v);
    }
    out[len++] = '\n', out[len] = 0;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

#define SOURCES_SQL "SELECT * FROM sources WHERE status = 'done' ORDER BY path"
#define SOURCES_SKIP " id updated_at "
#define CLIPS_SQL "SELECT s.path AS source_path, c.* FROM clips c JOIN sources s ON " \
                  "s.id = c.source_id ORDER BY s.path, c.clip_index"
#define CLIPS_SKIP " id source_id "


static void on_say(const char *line, void *ctx) { on_line(line, 0, ctx); }

static void sql_exec(const char *dir, const char *q) {
  char path[600];
  snprintf(path, sizeof path, "%s/index.sqlite", dir);
  sqlite3 *db = NULL;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK &&
        sqlite3_exec(db, q, NULL, NULL, NULL) == SQLITE_OK, "%s: %s", q, sqlite3_errmsg(db));
  sqlite3_close(db);
}

static void run(const char *cmd) { CHECK(system(cmd) == 0, "%s", cmd); }

// ---- the checks ------------------------------------------------------------------------

static void test_verify(const char *dir) {
  store_verify_result vr;
  lines *l = calloc(1, sizeof *l);
  CHECK_OK(store_verify(dir, on_line, l, &vr));
  CHECK(vr.shards == 2 && vr.clips == 6 && vr.clips_bad == 0 && vr.shards_bad == 0 &&
        l->problems == 0 && vr.tail_bytes == 0, "clean interleaved store: %s", l->text);
  // damaged manifest values and scores in a copy of the index: each clip once, CORRUPT
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "cp '%s/index.sqlite' '%s/saved.sqlite'", dir, dir);
  run(cmd);
  sql_exec(dir, "UPDATE clips SET span_end = span_start - 1 WHERE id = 1;"
                "UPDATE clips SET manifest_row = 'x' WHERE id = 2;"
                "UPDATE clips SET scores = '{\"a\":[1]}' WHERE id = 3;"
                "UPDATE clips SET span_cut = 2 WHERE id = 6;");
  memset(l, 0, sizeof *l);
  CHECK_OK(store_verify(dir, on_line, l, &vr));
  CHECK(vr.clips == 6 && vr.clips_bad == 4 && l->problems == 4 && strstr(l->text, "clip 1 ") &&
        strstr(l->text, "clip 2 ") && strstr(l->text, "clip 3 ") && strstr(l->text, "clip 6 ") &&
        strstr(l->text, "manifest record") && strstr(l->text, "key 'a'"),
        "damaged values: %d: %s", l->problems, l->text);
  snprintf(cmd, sizeof cmd, "mv '%s/saved.sqlite' '%s/index.sqlite'", dir, dir);
  run(cmd);
  free(l);
}

// The captions' first values and lengths of clips 1..6 as make_store commits them (A, B,
// C), and as a merge or a rebuild numbers them (index_order_settle: by manifest row, none
// first, so B's two clips, then A's rows 1, 1, 2, then C's row 3).
typedef struct {
  float marks[6];
  int tokens[6];
} clip_order;
static const clip_order COMMITTED = {{100, 101, 102, 200, 200, 0}, {1, 2, 3, 2, 2, 0}};
static const clip_order SETTLED = {{200, 200, 100, 101, 102, 0}, {2, 2, 1, 2, 3, 0}};

// The trainer's reader: every clip's caption is its own (A), the shared one (B), or none.
static void test_reader(const char *dir, const clip_order *o) {
  data_store *d = NULL;
  CHECK_OK(data_open(&d, dir));
  if (!d) return;
  CHECK(data_num_clips(d) == 6 && data_num_captions(d) == 5, "6 clips, 5 with a caption");
  const float *marks = o->marks;
  const int *tokens = o->tokens;
  for (int64_t id = 1; id <= 6; id++) {
    int64_t i = data_find(d, id);
    const void *emb = NULL;
    int n = -1;
    store_dtype dt;
    CHECK_OK(data_clip_caption(d, i, 1, &emb, &n, &dt));
    float first = emb ? ((const float *)emb)[0] : -1.0f;
    CHECK(n == tokens[id - 1] &&
              (n == 0 ? emb == NULL : dt == STORE_DTYPE_F32 && first == marks[id - 1]),
          "clip %lld: caption of %d tokens, first value %g", (long long)id, n, first);
    CHECK_OK(data_clip_verify(d, i));
  }
  data_close(&d);
}

static void test_rebuild(const char *dir) {
  char *src0 = dump(dir, SOURCES_SQL, SOURCES_SKIP), *clips0 = dump(dir, CLIPS_SQL, CLIPS_SKIP);
  CHECK(strstr(clips0, "scores=t:{\"aesthetic_score\":4.7,") && strstr(src0, "scene_cuts=t:[]") &&
        strstr(src0, "manifest_key=t:xxh3:a1") && strstr(clips0, "caption=t:blue waves rolling"),
        "the reference holds the new columns:\n%s%s", src0, clips0);
  char path[600], why[512];
  snprintf(path, sizeof path, "%s/index.sqlite", dir);
  CHECK(unlink(path) == 0, "index deleted");
  CHECK_OK(store_index_state(dir, why, sizeof why));
  CHECK(why[0], "a store without index is told apart");
  lines *l = calloc(1, sizeof *l);
  store_rebuild_report rep;
  CHECK_OK(store_rebuild(dir, on_say, l, &rep));
  CHECK(rep.sources == 3 && rep.clips == 6 && rep.blocks_left == 0 && !strstr(l->text, "caption"),
        "rebuilt 3 sources, 6 clips, every caption linked: %s", l->text);
  store_index *ix = NULL;
  store_recover_opts ro = {.keep_blocks = 1};
  CHECK_OK(store_open(&ix, dir, 0, NULL));
  CHECK_OK(store_recover_with(dir, ix, &ro, NULL));
  index_close(&ix);
  char *src1 = dump(dir, SOURCES_SQL, SOURCES_SKIP), *clips1 = dump(dir, CLIPS_SQL, CLIPS_SKIP);
  CHECK(!strcmp(src0, src1), "sources rebuilt exactly:\n%s---\n%s", src0, src1);
  CHECK(!strcmp(clips0, clips1), "clips rebuilt exactly:\n%s---\n%s", clips0, clips1);
  store_verify_result vr;
  memset(l, 0, sizeof *l);
  CHECK_OK(store_verify(dir, on_line, l, &vr));
  CHECK(vr.clips == 6 && vr.clips_bad == 0 && l->problems == 0, "verify after rebuild: %s",
        l->text);
  free(src0), free(src1), free(clips0), free(clips1), free(l);
}

// `index merge` of the store: shards linked, rows copied with every column, so the merged
// store verifies and its clips read their own captions; the filters go along.
static void test_merge(const char *root, const char *dir) {
  char out[600];
  snprintf(out, sizeof out, "%s/merged", root);
  char *ins[1] = {(char *)dir};
  store_merge_result mr;
  CHECK_OK(store_merge(out, ins, 1, &mr));
  CHECK(mr.clips == 6, "merged %lld clips", (long long)mr.clips);
  store_verify_result vr;
  lines *l = calloc(1, sizeof *l);
  CHECK_OK(store_verify(out, on_line, l, &vr));
  CHECK(vr.clips == 6 && vr.clips_bad == 0 && l->problems == 0, "merged store: %s", l->text);
  char *a = dump(dir, CLIPS_SQL, CLIPS_SKIP " shard ");
  char *b = dump(out, CLIPS_SQL, CLIPS_SKIP " shard ");
  CHECK(!strcmp(a, b), "merged rows equal but for the shard names:\n%s---\n%s", a, b);
  store_index *ix = NULL;
  char f[64] = "";
  CHECK_OK(store_open(&ix, out, 0, NULL));
  CHECK_OK(index_filters(ix, f, sizeof f, NULL));
  CHECK(!strcmp(f, "aesthetic_score >= 4"), "filters merged: '%s'", f);
  index_close(&ix);
  test_reader(out, &SETTLED);
  free(a), free(b), free(l);
}

static int64_t fsize(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 ? (int64_t)sb.st_size : -1;
}

// Appends bytes [from, size) of file `src` to file `dst`.
static void append_file(const char *src, int64_t from, const char *dst) {
  FILE *in = fopen(src, "rb"), *out = fopen(dst, "ab");
  CHECK(in && out && fseek(in, from, SEEK_SET) == 0, "open %s, %s", src, dst);
  char buf[1 << 14];
  size_t k;
  while (in && out && (k = fread(buf, 1, sizeof buf, in)) > 0)
    CHECK(fwrite(buf, 1, k, out) == k, "append");
  if (in) fclose(in);
  if (out) fclose(out);
}

// Source E: two manifest clips, each with its caption, complete (its last clip written), in a
// shard of its own at `path` after a block of something else; returns E's first offset.
// Neither the store it is copied into nor the quarantine's copy of it has E's blocks at the
// offsets they were written at.
static int64_t source_e(const char *path) {
  shard_writer *w = NULL;
  CHECK_OK(shard_writer_create(&w, path, &S));
  int64_t first = 0;
  uint8_t tok[TB] = {0};
  uint64_t sum;
  CHECK_OK(shard_writer_begin_clip(w, 1, 1, &first));
  CHECK_OK(shard_writer_append(w, tok, sizeof tok));
  CHECK_OK(shard_writer_end_clip(w, 1, &sum));
  first = shard_writer_size(w);
  clip_meta *m = new_meta("/v/e.mp4", 103);
  store_clip c[2] = {{0}};
  static const char *text[2] = {"red leaves falling", "snow on a roof"};
  for (int k = 0; k < 2; k++) {
    write_caption(w, 300 + k, 1, text[k], &c[k]);
    c[k].clip_index = k, c[k].manifest_row = 9, c[k].manifest_span = k;
    c[k].span_start = 2 * k, c[k].span_end = 2 * k + 1, m->last = k == 1;
    write_clip(w, "shards/e.tshard", 1, (uint8_t)(40 + k), m, &c[k]);
  }
  shard_writer_close(&w);
  free(m);
  return first;
}

static int rows_with_caption(const char *dir, const char *want) {
  char *clips = dump(dir, CLIPS_SQL, CLIPS_SKIP);
  int found = strstr(clips, want) != NULL;
  free(clips);
  return found;
}

// A crash inside a source of per-clip captions: the tail after the last committed block.
static void test_tail(const char *root) {
  char dir[600], p0[700], scratch[700], cmd[5000];
  snprintf(dir, sizeof dir, "%s/tail", root);
  snprintf(p0, sizeof p0, "%s/shards/w0.tshard", dir);
  shard_writer *w0 = NULL;
  make_store(dir, &w0);
  int64_t end = shard_writer_size(w0);
  // D, interrupted: caption, clip (not its last), caption, a clip cut mid-way, torn bytes
  clip_meta *m = new_meta("/v/d.mp4", 104);
  store_clip d = {.manifest_row = 5, .span_start = 0, .span_end = 2};
  write_caption(w0, 400, 1, "interrupted", &d);
  write_clip(w0, "shards/w0.tshard", 2, 50, m, &d);
  write_caption(w0, 401, 1, "interrupted too", &d);
  CHECK_OK(shard_writer_begin_clip(w0, 2, 3, &d.offset));
  uint8_t tok[TB] = {0};
  CHECK_OK(shard_writer_append(w0, tok, sizeof tok));
  CHECK_OK(shard_writer_sync(w0));
  shard_writer_close(&w0);  // drops the open clip
  free(m);
  FILE *f = fopen(p0, "ab");
  for (int i = 0; f && i < 3000; i++) fputc(0xab, f);
  if (f) fclose(f);
  CHECK(fsize(p0) > end + 3 * 4096, "a tail of caption and clip blocks");
  char *before = dump(dir, CLIPS_SQL, CLIPS_SKIP);
  store_index *ix = NULL;
  store_recovery rep;
  CHECK_OK(store_open(&ix, dir, 0, NULL));
  CHECK_OK(store_recover_report(dir, ix, &rep));
  CHECK(fsize(p0) == end && rep.shards_truncated == 1 && rep.quarantined.tails == 0,
        "interrupted source cut back to %lld (size %lld), nothing quarantined (%lld)",
        (long long)end, (long long)fsize(p0), (long long)rep.quarantined.tails);
  // E, complete but never committed (its blocks appended as a copy would leave them)
  snprintf(scratch, sizeof scratch, "%s/e.tshard", root);
  append_file(scratch, source_e(scratch), p0);
  CHECK_OK(store_recover_report(dir, ix, &rep));
  index_close(&ix);
  CHECK(fsize(p0) == end && rep.quarantined.tails == 1, "complete source quarantined: %lld tails",
        (long long)rep.quarantined.tails);
  char *after = dump(dir, CLIPS_SQL, CLIPS_SKIP);
  CHECK(!strcmp(before, after), "the index is untouched by recovery");
  store_verify_result vr;
  lines *l = calloc(1, sizeof *l);
  CHECK_OK(store_verify(dir, on_line, l, &vr));
  CHECK(vr.clips == 6 && vr.clips_bad == 0 && vr.tail_bytes == 0, "verify after: %s", l->text);
  // the quarantined tail is a shard: a store made of it rebuilds E, each clip its caption
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/q/shards' && mv '%s'/*-tail-*.tshard '%s/q/shards/'",
           root, rep.quarantined.dir, root);
  run(cmd);
  snprintf(dir, sizeof dir, "%s/q", root);
  store_rebuild_report rb;
  memset(l, 0, sizeof *l);
  CHECK_OK(store_rebuild(dir, on_say, l, &rb));
  CHECK(rb.sources == 1 && rb.clips == 2 && !strstr(l->text, "caption"), "tail rebuilt: %s",
        l->text);
  CHECK(rows_with_caption(dir, "caption=t:red leaves falling") &&
        rows_with_caption(dir, "caption=t:snow on a roof"), "each clip of E has its caption");
  memset(l, 0, sizeof *l);
  CHECK_OK(store_verify(dir, on_line, l, &vr));
  CHECK(vr.clips == 2 && vr.clips_bad == 0, "the rebuilt tail verifies: %s", l->text);
  free(before), free(after), free(l);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "make")) {
    make_store(argv[2], NULL);
    return check_done();
  }
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char root[256], dir[400], cmd[600];
  snprintf(root, sizeof root, "%s/test_store_captions_XXXXXX", tmp);
  CHECK(mkdtemp(root) != NULL, "mkdtemp");
  snprintf(dir, sizeof dir, "%s/store", root);
  make_store(dir, NULL);
  test_verify(dir);
  test_reader(dir, &COMMITTED);
  test_merge(root, dir);
  test_rebuild(dir);
  test_reader(dir, &SETTLED);
  test_tail(root);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  run(cmd);
  return check_done();
}
