// SQLite index: create/open checks, commit/lookup/replace, clip rows round trip, failed
// listing, totals against sums computed here, shard committed end (closed form), settings
// mismatch refused with every differing key and the file left byte-identical, not-an-
// index files refused, merge (skip done, replace failed, id mapping, shard prefix).
#include <fcntl.h>
#include <sqlite3.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "store/clip.h"
#include "store/index.h"
#include "store/settings.h"

static const store_settings S = {8, 1, 64, 2, 4, 4, 3, STORE_DTYPE_U8, 30, 0, 0};
#define TB 96

static char dir[256];

static store_clip mk_clip(int idx, const char *shard, int64_t offset, int T, int H, int W) {
  store_clip c = {0};
  c.clip_index = idx;
  c.start_s = idx * 30.0;
  c.duration_s = T * 2 / 8.0;
  c.src_fps = 29.97;
  c.src_w = 1920, c.src_h = 1080;
  c.rotation = 90;
  c.sar_num = 4, c.sar_den = 3;
  c.codec = "h264";
  c.pix_fmt = "yuv420p10le";
  c.decoded_frames = 100 + idx;
  c.frames = T * 2;
  c.dropped_frames = 1;
  c.T = T, c.H = H, c.W = W;
  c.tokens = (int64_t)T * H * W;
  c.shard = shard;
  c.offset = offset;
  c.bytes = c.tokens * TB;
  c.checksum = 0xfedcba9876543210ull + (uint64_t)offset;  // high bit set: unsigned round trip
  c.label = idx % 2 ? "cats" : NULL;
  return c;
}

static store_source mk_src(const char *path, source_status st, const char *err) {
  store_source s = {.path = path, .size = 1000, .mtime = 1700000000, .status = st, .error = err,
                    .decoded_frames = 50, .label = "cats"};
  return s;
}

static int64_t block_end(const store_clip *c) { return c->offset + (64 + c->bytes + 4095) / 4096 * 4096; }

static int same_clip(const store_clip *a, const store_clip *b) {
  return a->clip_index == b->clip_index && a->start_s == b->start_s &&
         a->duration_s == b->duration_s && a->src_fps == b->src_fps && a->src_w == b->src_w &&
         a->src_h == b->src_h && a->rotation == b->rotation && a->sar_num == b->sar_num &&
         a->sar_den == b->sar_den && !strcmp(a->codec, b->codec) &&
         !strcmp(a->pix_fmt, b->pix_fmt) && a->decoded_frames == b->decoded_frames &&
         a->frames == b->frames && a->dropped_frames == b->dropped_frames && a->T == b->T &&
         a->H == b->H && a->W == b->W && a->tokens == b->tokens && !strcmp(a->shard, b->shard) &&
         a->offset == b->offset && a->bytes == b->bytes && a->checksum == b->checksum &&
         ((!a->label && !b->label) || (a->label && b->label && !strcmp(a->label, b->label)));
}

typedef struct {
  int n;
  int64_t last_id;
  store_clip_row rows[16];
} collect;

static int collect_fn(const store_clip_row *r, void *ctx) {
  collect *c = ctx;
  CHECK(r->id > c->last_id, "ids ascending");
  c->last_id = r->id;
  if (c->n < 16) {
    c->rows[c->n] = *r;  // fix up the self-pointers of the copy
    store_clip_row *o = &c->rows[c->n];
    o->c.codec = o->codec_buf, o->c.pix_fmt = o->pix_fmt_buf, o->c.shard = o->shard_buf;
    if (r->c.label) o->c.label = o->label_buf;
  }
  c->n++;
  return 0;
}

static int failed_fn(const char *path, const char *err, void *ctx) {
  char *out = ctx;
  snprintf(out + strlen(out), 512 - strlen(out), "%s: %s\n", path, err);
  return 0;
}

static uint8_t *slurp(const char *path, int64_t *n) {
  struct stat sb;
  if (stat(path, &sb) != 0) return NULL;
  uint8_t *b = malloc((size_t)sb.st_size + 1);
  int fd = open(path, O_RDONLY);
  *n = read(fd, b, (size_t)sb.st_size);
  close(fd);
  return b;
}

static int file_exists(const char *p) { return access(p, F_OK) == 0; }

int main(void) {
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(dir, sizeof dir, "%s/test_index_XXXXXX", tmp);
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char path[512], pathb[512], pathc[512], junk[512];
  snprintf(path, sizeof path, "%s/index.sqlite", dir);
  snprintf(pathb, sizeof pathb, "%s/b.sqlite", dir);
  snprintf(pathc, sizeof pathc, "%s/c.sqlite", dir);
  snprintf(junk, sizeof junk, "%s/junk", dir);

  store_index *ix = NULL;
  CHECK(index_open(&ix, path, 0, &S) == TSR_EIO && ix == NULL, "missing index refused without create");
  CHECK(index_open(&ix, path, 1, NULL) == TSR_EINVAL, "create needs settings");
  CHECK(!file_exists(path), "nothing created on refusal");
  CHECK_OK(index_open(&ix, path, 1, &S));
  store_settings got;
  CHECK_OK(index_settings(ix, &got));
  CHECK(!store_settings_diff(&got, &S, NULL, 0) && got.max_seconds == 30, "settings stored");

  source_status ss;
  int same = -1;
  CHECK_OK(index_source_lookup(ix, "/v/a.mp4", 1000, 1700000000, &ss, &same));
  CHECK(ss == SOURCE_NEW && same == 0, "unknown source is new");

  // a.mp4: 3 clips in shards/w0.tshard; b.mp4 failed; c.mp4 partial with 1 clip.
  store_clip ca[3];
  int64_t off = 4096;
  for (int i = 0; i < 3; i++) {
    ca[i] = mk_clip(i, "shards/w0.tshard", off, 3 + i, 4, 5 + i);
    off = block_end(&ca[i]);
  }
  store_source a = mk_src("/v/a.mp4", SOURCE_DONE, NULL);
  CHECK_OK(index_commit_source(ix, &a, ca, 3));
  store_source b = mk_src("/v/b.mp4", SOURCE_FAILED, "no video stream");
  CHECK_OK(index_commit_source(ix, &b, NULL, 0));
  store_clip cc = mk_clip(0, "shards/w1.tshard", 4096, 7, 2, 2);
  store_source c = mk_src("/v/c.mp4", SOURCE_DONE, "truncated: kept the first 14 frames");
  c.partial = 1;
  CHECK_OK(index_commit_source(ix, &c, &cc, 1));

  CHECK_OK(index_source_lookup(ix, "/v/a.mp4", 1000, 1700000000, &ss, &same));
  CHECK(ss == SOURCE_DONE && same == 1, "a done, same file");
  CHECK_OK(index_source_lookup(ix, "/v/a.mp4", 1000, 1700000001, &ss, &same));
  CHECK(ss == SOURCE_DONE && same == 0, "a done, mtime changed");
  CHECK_OK(index_source_lookup(ix, "/v/b.mp4", 1000, 1700000000, &ss, &same));
  CHECK(ss == SOURCE_FAILED, "b failed");

  collect col = {0};
  CHECK_OK(index_foreach_clip(ix, collect_fn, &col));
  CHECK(col.n == 4, "4 clips, got %d", col.n);
  for (int i = 0; i < 3 && col.n == 4; i++) {
    CHECK(same_clip(&col.rows[i].c, &ca[i]), "clip %d round trip", i);
    CHECK(!strcmp(col.rows[i].source, "/v/a.mp4"), "clip %d source", i);
  }
  if (col.n == 4) CHECK(same_clip(&col.rows[3].c, &cc) && !strcmp(col.rows[3].source, "/v/c.mp4"), "clip of c");
  store_clip_row row;
  CHECK_OK(index_get_clip(ix, col.rows[1].id, &row));
  CHECK(same_clip(&row.c, &ca[1]), "get_clip");
  CHECK(index_get_clip(ix, 987654, &row) == TSR_EINVAL && strstr(err_msg(), "987654"), "absent id: %s", err_msg());

  char failed[512] = "";
  CHECK_OK(index_foreach_failed(ix, failed_fn, failed));
  CHECK(!strcmp(failed, "/v/b.mp4: no video stream\n"), "failed list: %s", failed);

  store_totals t;
  CHECK_OK(index_totals(ix, &t));
  int64_t tok = cc.tokens, fr = cc.frames;
  double sec = cc.duration_s;
  for (int i = 0; i < 3; i++) tok += ca[i].tokens, fr += ca[i].frames, sec += ca[i].duration_s;
  CHECK(t.sources_done == 2 && t.sources_failed == 1 && t.sources_partial == 1 && t.clips == 4,
        "counts %lld %lld %lld %lld", (long long)t.sources_done, (long long)t.sources_failed,
        (long long)t.sources_partial, (long long)t.clips);
  CHECK(t.tokens == tok && t.frames == fr && t.dropped_frames == 4, "token/frame totals");
  CHECK_NEAR(t.seconds, sec, 1e-9);  // sums of exact binary fractions

  int64_t end;
  CHECK_OK(index_shard_end(ix, "shards/w0.tshard", &end));
  CHECK(end == block_end(&ca[2]), "shard end %lld vs %lld", (long long)end, (long long)block_end(&ca[2]));
  CHECK_OK(index_shard_end(ix, "shards/none.tshard", &end));
  CHECK(end == 0, "no rows: end 0");

  // Replace a.mp4 with a single clip: old clips disappear, the shard's end moves back.
  a.size = 2000;
  CHECK_OK(index_commit_source(ix, &a, ca, 1));
  CHECK_OK(index_totals(ix, &t));
  CHECK(t.clips == 2 && t.sources_done == 2, "replaced: %lld clips", (long long)t.clips);
  CHECK_OK(index_shard_end(ix, "shards/w0.tshard", &end));
  CHECK(end == block_end(&ca[0]), "shard end after replace");
  CHECK_OK(index_source_lookup(ix, "/v/a.mp4", 2000, 1700000000, &ss, &same));
  CHECK(ss == SOURCE_DONE && same == 1, "new size recorded");
  // A failed retry of c replaces its clip too.
  store_source c2 = mk_src("/v/c.mp4", SOURCE_FAILED, "decoder error");
  CHECK_OK(index_commit_source(ix, &c2, NULL, 0));
  CHECK_OK(index_commit_source(ix, &c, &cc, 1));

  // Invalid commits write nothing.
  store_clip bad = mk_clip(0, "shards/w2.tshard", 4096, 2, 2, 2);
  bad.tokens = 9;
  store_source d = mk_src("/v/d.mp4", SOURCE_DONE, NULL);
  CHECK(index_commit_source(ix, &d, &bad, 1) == TSR_EINVAL, "inconsistent clip refused");
  bad = mk_clip(0, "shards/w0.tshard", ca[0].offset, 2, 2, 2);  // block already used by a
  CHECK(index_commit_source(ix, &d, &bad, 1) != TSR_OK && strstr(err_msg(), "/v/d.mp4"),
        "duplicate block refused: %s", err_msg());
  CHECK_OK(index_source_lookup(ix, "/v/d.mp4", 1000, 1700000000, &ss, &same));
  CHECK(ss == SOURCE_NEW, "rolled back");

  int64_t *ids = NULL, *toks = NULL, n = 0;
  CHECK_OK(index_clip_lengths(ix, &ids, &toks, &n));
  CHECK(n == 2 && toks[0] == ca[0].tokens && toks[1] == cc.tokens && ids[0] < ids[1], "clip lengths");
  free(ids);
  free(toks);
  index_close(&ix);
  CHECK(ix == NULL, "close clears handle");

  // ---- settings mismatch: refused, every key named, file byte-identical ----
  int64_t n0, n1;
  uint8_t *before = slurp(path, &n0);
  store_settings other = S;
  other.fps_num = 12;
  other.pt = 4;
  other.short_side = 128;
  for (int create = 0; create < 2; create++) {
    CHECK(index_open(&ix, path, create, &other) == TSR_EMISMATCH && ix == NULL, "mismatch refused");
    CHECK(strstr(err_msg(), "fps 8/1 vs 12/1") && strstr(err_msg(), "short_side 64 vs 128") &&
              strstr(err_msg(), "patch 2x4x4 vs 4x4x4") && strstr(err_msg(), path),
          "message: %s", err_msg());
  }
  uint8_t *after = slurp(path, &n1);
  CHECK(n0 == n1 && !memcmp(before, after, (size_t)n0), "index file unchanged");
  free(before);
  free(after);
  char jpath[600];
  snprintf(jpath, sizeof jpath, "%s-journal", path);
  CHECK(!file_exists(jpath), "no journal left");
  CHECK_OK(index_open(&ix, path, 0, NULL));
  index_close(&ix);

  // ---- not an index ----
  FILE *f = fopen(junk, "w");
  fputs("this is not a database, just some text long enough to look like a header....\n", f);
  for (int i = 0; i < 100; i++) fputs("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", f);
  fclose(f);
  CHECK(index_open(&ix, junk, 0, NULL) == TSR_EFORMAT && strstr(err_msg(), "not a tessera index"),
        "text file: %s", err_msg());
  CHECK(index_open(&ix, junk, 1, &S) == TSR_EFORMAT, "text file not overwritten");
  sqlite3 *db;
  CHECK(sqlite3_open(pathc, &db) == SQLITE_OK, "sqlite open");
  CHECK(sqlite3_exec(db, "CREATE TABLE t(x)", NULL, NULL, NULL) == SQLITE_OK, "sqlite exec");
  sqlite3_close(db);
  CHECK(index_open(&ix, pathc, 1, &S) == TSR_EFORMAT && strstr(err_msg(), "not a tessera index"),
        "foreign db: %s", err_msg());
  unlink(pathc);

  // ---- merge ----
  store_index *bx = NULL;
  CHECK_OK(index_open(&bx, pathb, 1, &S));
  store_clip cd[2] = {mk_clip(0, "shards/x.tshard", 4096, 2, 3, 3), mk_clip(1, "shards/x.tshard", 8192, 2, 3, 3)};
  store_clip cb = mk_clip(0, "shards/x.tshard", 12288, 1, 1, 1);
  store_clip ca_b = mk_clip(0, "shards/y.tshard", 4096, 1, 1, 1);
  store_source ad = mk_src("/v/a.mp4", SOURCE_DONE, NULL);  // done in both: skipped
  ad.size = 2000;
  store_source dd = mk_src("/v/d.mp4", SOURCE_DONE, NULL);
  store_source bd = mk_src("/v/b.mp4", SOURCE_DONE, NULL);  // failed in main: replaced
  store_source ef = mk_src("/v/e.mp4", SOURCE_FAILED, "empty file");
  CHECK_OK(index_commit_source(bx, &ad, &ca_b, 1));
  CHECK_OK(index_commit_source(bx, &dd, cd, 2));
  CHECK_OK(index_commit_source(bx, &bd, &cb, 1));
  CHECK_OK(index_commit_source(bx, &ef, NULL, 0));
  index_close(&bx);

  CHECK_OK(index_open(&ix, path, 0, &S));
  int64_t merged = -1, skipped = -1;
  CHECK_OK(index_merge_from(ix, pathb, "p1-", &merged, &skipped));
  CHECK(merged == 3 && skipped == 1, "merged %lld skipped %lld", (long long)merged, (long long)skipped);
  CHECK_OK(index_totals(ix, &t));
  CHECK(t.sources_done == 4 && t.sources_failed == 1 && t.clips == 5, "after merge: %lld done %lld failed %lld clips",
        (long long)t.sources_done, (long long)t.sources_failed, (long long)t.clips);
  failed[0] = 0;
  CHECK_OK(index_foreach_failed(ix, failed_fn, failed));
  CHECK(!strcmp(failed, "/v/e.mp4: empty file\n"), "failed after merge: %s", failed);
  col = (collect){0};
  CHECK_OK(index_foreach_clip(ix, collect_fn, &col));
  int nd = 0;
  for (int i = 0; i < col.n && i < 16; i++) {
    if (!strcmp(col.rows[i].source, "/v/d.mp4")) {
      store_clip want = cd[nd < 2 ? nd : 1];
      want.shard = "shards/p1-x.tshard";
      CHECK(same_clip(&col.rows[i].c, &want), "merged clip %d of d (shard %s)", nd, col.rows[i].c.shard);
      nd++;
    }
    if (!strcmp(col.rows[i].source, "/v/a.mp4"))
      CHECK(!strcmp(col.rows[i].c.shard, "shards/w0.tshard"), "a kept from main");
  }
  CHECK(nd == 2, "d's clips mapped to d (%d)", nd);
  CHECK_OK(index_shard_end(ix, "shards/p1-x.tshard", &end));
  CHECK(end == 16384, "merged shard end %lld", (long long)end);
  // Merging again changes nothing (done sources skipped; the failed one is rewritten).
  CHECK_OK(index_merge_from(ix, pathb, "p1-", &merged, &skipped));
  CHECK(merged == 0 && skipped == 3, "second merge: merged %lld skipped %lld", (long long)merged, (long long)skipped);
  CHECK_OK(index_totals(ix, &t));
  CHECK(t.clips == 5 && t.sources_done == 4 && t.sources_failed == 1, "totals unchanged");
  CHECK(index_merge_from(ix, path, "", &merged, &skipped) == TSR_EINVAL, "merge into itself refused");
  CHECK(index_merge_from(ix, junk, "", &merged, &skipped) == TSR_EFORMAT, "merge of junk refused");
  // Other settings: refused, nothing merged.
  store_index *ox = NULL;
  CHECK_OK(index_open(&ox, pathc, 1, &other));
  store_source zs = mk_src("/v/z.mp4", SOURCE_FAILED, "x");
  CHECK_OK(index_commit_source(ox, &zs, NULL, 0));
  index_close(&ox);
  CHECK(index_merge_from(ix, pathc, "", &merged, &skipped) == TSR_EMISMATCH && strstr(err_msg(), "fps"),
        "mismatched merge: %s", err_msg());
  CHECK_OK(index_totals(ix, &t));
  CHECK(t.sources_failed == 1, "nothing merged from mismatched index");
  index_close(&ix);

  unlink(path);
  unlink(pathb);
  unlink(pathc);
  unlink(junk);
  rmdir(dir);
  return check_done();
}
