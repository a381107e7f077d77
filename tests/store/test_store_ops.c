// Whole-store operations: verify (clean store, then a flipped payload byte, a damaged
// shard header, a missing shard: each reported with shard/offset/clip/source), and merge
// of two stores (counts, every clip of the merged store read back with its checksum and
// its bytes equal to the input's, repeated merge adds nothing, settings mismatch refused
// with nothing written).
//   test_store_ops              run the tests
//   test_store_ops make DIR K   write a small store to DIR (K: 0 or 1, different sources;
//                               2: other settings), for the shell test of `tessera index`
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "lines.h"
#include "store/shard.h"
#include "store/clip.h"
#include "store/index.h"
#include "store/merge.h"
#include "store/recover.h"
#include "store/settings.h"
#include "store/stats.h"
#include "store/store.h"
#include "store/verify.h"

static store_settings S = {8, 1, 64, 2, 4, 4, 3, STORE_DTYPE_U8, 0, 0, 0};
#define TB 96

static uint8_t val(int k, int src, int clip, int64_t i) { return (uint8_t)(k * 31 + src * 7 + clip * 3 + i); }

// Store K: 3 sources (2 clips, 1 clip, failed) over two shards.
static void make_store(const char *dir, int k) {
  store_settings s = S;
  if (k == 2) s.fps_num = 12;
  store_index *ix = NULL;
  CHECK_OK(store_open(&ix, dir, 1, &s));
  for (int src = 0; src < 2; src++) {
    char rel[64], path[600], spath[64];
    snprintf(rel, sizeof rel, "shards/w%d.tshard", src);
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    shard_writer *w = NULL;
    CHECK_OK(shard_writer_create(&w, path, &s));
    store_clip c[2] = {{0}};
    int nclip = src == 0 ? 2 : 1;
    for (int j = 0; j < nclip; j++) {
      int T = 2 + j + src, H = 3, W = 4;
      uint8_t tok[TB];
      CHECK_OK(shard_writer_begin_clip(w, H, W, &c[j].offset));
      for (int64_t t = 0; t < (int64_t)T * H * W; t++) {
        for (int b = 0; b < TB; b++) tok[b] = val(k, src, j, t * TB + b);
        CHECK_OK(shard_writer_append(w, tok, TB));
      }
      CHECK_OK(shard_writer_end_clip(w, T, &c[j].checksum));
      c[j].clip_index = j;
      c[j].duration_s = T * 2.0 / s.fps_num * (j + 1) * 10;
      c[j].src_fps = 25, c[j].src_w = 640, c[j].src_h = 480, c[j].sar_num = c[j].sar_den = 1;
      c[j].codec = "h264", c[j].pix_fmt = "yuv420p";
      c[j].frames = T * 2, c[j].decoded_frames = T * 6;
      c[j].T = T, c[j].H = H, c[j].W = W, c[j].tokens = (int64_t)T * H * W;
      c[j].shard = rel, c[j].bytes = c[j].tokens * TB;
    }
    CHECK_OK(shard_writer_sync(w));
    shard_writer_close(&w);
    snprintf(spath, sizeof spath, "/videos/s%d-%d.mp4", k, src);
    store_source so = {.path = spath, .size = 1000, .mtime = 5, .status = SOURCE_DONE,
                       .decoded_frames = 30};
    CHECK_OK(index_commit_source(ix, &so, c, nclip));
  }
  char fp[64];
  snprintf(fp, sizeof fp, "/videos/broken%d.mp4", k);
  store_source f = {.path = fp, .size = 10, .mtime = 5, .status = SOURCE_FAILED,
                      .error = "no video stream (audio only)"};
  CHECK_OK(index_commit_source(ix, &f, NULL, 0));
  index_close(&ix);
}


// store_repair's lines into a `lines` (ctx).
static void on_say(const char *line, void *ctx) { on_line(line, 0, ctx); }

// store_stats_collect's predicate: clips of more than *ctx (int64_t) tokens.
static int over_tokens(const store_clip_row *r, void *ctx) { return r->c.tokens > *(int64_t *)ctx; }

static void flip(const char *path, int64_t off) {
  int fd = open(path, O_RDWR);
  uint8_t b;
  CHECK(pread(fd, &b, 1, off) == 1, "read");
  b ^= 1;
  CHECK(pwrite(fd, &b, 1, off) == 1, "write");
  close(fd);
}

typedef struct {
  const char *dir;
  int n, ok;
  int64_t bytes;
} readback;

// Reads every clip of a store through the shard reader with full verification.
static int read_clip(const store_clip_row *r, void *ctx) {
  readback *rb = ctx;
  char path[700];
  snprintf(path, sizeof path, "%s/%s", rb->dir, r->c.shard);
  shard_reader *sr = NULL;
  const uint8_t *p = NULL;
  if (shard_reader_open(&sr, path, &S) == TSR_OK &&
      shard_reader_clip(sr, r->c.offset, r->c.bytes, r->c.checksum, 1, &p) == TSR_OK) {
    // Source "/videos/sK-N.mp4" tells which bytes the clip must hold.
    int k = r->source[9] - '0', src = r->source[11] - '0', same = 1;
    for (int64_t i = 0; i < r->c.bytes && same; i++) same = p[i] == val(k, src, r->c.clip_index, i);
    rb->ok += same;
    rb->bytes += r->c.bytes;
  }
  shard_reader_close(&sr);
  rb->n++;
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "make")) {
    make_store(argv[2], atoi(argv[3]));
    return check_done();
  }
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char root[256], a[300], b[300], c[300], out[300], p[700];
  snprintf(root, sizeof root, "%s/test_store_ops_XXXXXX", tmp);
  CHECK(mkdtemp(root) != NULL, "mkdtemp");
  snprintf(a, sizeof a, "%s/a", root);
  snprintf(b, sizeof b, "%s/b", root);
  snprintf(c, sizeof c, "%s/c", root);
  snprintf(out, sizeof out, "%s/out", root);
  make_store(a, 0);
  make_store(b, 1);
  make_store(c, 2);

  // ---- verify ----
  store_verify_result vr;
  lines l = {0};
  CHECK_OK(store_verify(a, on_line, &l, &vr));
  CHECK(vr.shards == 2 && vr.clips == 3 && vr.shards_bad == 0 && vr.clips_bad == 0 && l.problems == 0,
        "clean store: %s", l.text);
  CHECK(vr.bytes == (2 + 3 + 3) * 12 * TB, "bytes hashed %lld", (long long)vr.bytes);

  // ---- merge ----
  char *ins[3] = {a, b, c};
  store_merge_result mr;
  CHECK(store_merge(out, ins, 3, &mr) == TSR_EMISMATCH && strstr(err_msg(), "fps 8/1 vs 12/1") &&
            strstr(err_msg(), c), "mismatch refused: %s", err_msg());
  CHECK(access(out, F_OK) != 0, "nothing written on refusal");
  char *self[2] = {a, a};
  CHECK(store_merge(out, self, 2, &mr) == TSR_EINVAL && strstr(err_msg(), "twice"), "duplicate input: %s", err_msg());
  CHECK_OK(store_merge(out, ins, 2, &mr));
  CHECK(mr.stores == 2 && mr.clips == 6 && mr.skipped == 0 && mr.shards_linked + mr.shards_copied == 4,
        "merge: %lld stores %lld clips %lld linked %lld copied", (long long)mr.stores,
        (long long)mr.clips, (long long)mr.shards_linked, (long long)mr.shards_copied);
  store_index *ix = NULL;
  store_totals t;
  CHECK_OK(store_open(&ix, out, 0, &S));
  CHECK_OK(index_totals(ix, &t));
  CHECK(t.sources_done == 4 && t.sources_failed == 2 && t.clips == 6, "merged totals");
  readback rb = {.dir = out};
  CHECK_OK(index_foreach_clip(ix, read_clip, &rb));
  CHECK(rb.n == 6 && rb.ok == 6, "merged clips read back: %d of %d", rb.ok, rb.n);
  index_close(&ix);
  // Merging a again adds nothing and leaves no extra shard behind.
  CHECK_OK(store_merge(out, ins, 1, &mr));
  CHECK(mr.clips == 0 && mr.skipped == 2, "re-merge: %lld clips %lld skipped", (long long)mr.clips, (long long)mr.skipped);
  CHECK_OK(store_verify(out, on_line, &l, &vr));
  CHECK(vr.shards == 4 && vr.clips == 6 && vr.orphan_shards == 0 && vr.clips_bad == 0, "merged store verifies: %lld shards", (long long)vr.shards);
  CHECK(store_merge(out, ins + 2, 1, &mr) == TSR_EMISMATCH, "mismatched input into existing out");
  CHECK(store_merge(a, ins, 2, &mr) == TSR_EINVAL && strstr(err_msg(), "output"), "input as output: %s", err_msg());

  // ---- corruption (in a, after the merge; the merged store links or copies shards) ----
  snprintf(p, sizeof p, "%s/shards/w0.tshard", a);
  flip(p, 8192 + 64 + 100);  // payload of a's second clip
  memset(&l, 0, sizeof l);
  CHECK_OK(store_verify(a, on_line, &l, &vr));
  CHECK(vr.clips_bad == 1 && l.problems == 1 && strstr(l.text, "clip 2 (source /videos/s0-0.mp4)") &&
            strstr(l.text, "w0.tshard") && strstr(l.text, "offset 8192"), "payload flip: %s", l.text);
  flip(p, 20);  // shard header
  memset(&l, 0, sizeof l);
  CHECK_OK(store_verify(a, on_line, &l, &vr));
  CHECK(vr.shards_bad == 1 && vr.clips_bad == 2 && strstr(l.text, "header checksum"), "header flip: %s", l.text);
  snprintf(p, sizeof p, "%s/shards/w1.tshard", a);
  CHECK(unlink(p) == 0, "unlink");
  memset(&l, 0, sizeof l);
  CHECK_OK(store_verify(a, on_line, &l, &vr));
  CHECK(vr.clips_bad == 3 && strstr(l.text, "missing"), "missing shard: %s", l.text);
  CHECK(store_verify(root, on_line, &l, &vr) != TSR_OK, "not a store");

  // ---- stats (b, untouched): against make_store's clips, tokens T*12 for T = 2, 3, 3 and
  // lengths 5, 15, 7.5 s ----
  store_stats ss;
  CHECK_OK(store_open(&ix, b, 0, NULL));
  CHECK_OK(index_totals(ix, &t));
  CHECK_OK(store_stats_collect(ix, b, NULL, NULL, &ss));
  CHECK(!memcmp(&ss.t, &t, sizeof t) && ss.store_clips == 3, "stats: the index's totals");
  CHECK(ss.min_tok == 24 && ss.max_tok == 36 && ss.min_sec == 5 && ss.max_sec == 15,
        "stats: %lld..%lld tokens, %g..%g s", (long long)ss.min_tok, (long long)ss.max_tok,
        ss.min_sec, ss.max_sec);
  CHECK(ss.sec.count[2 + 6] == 2 && ss.sec.count[3 + 6] == 1 && ss.sec.used_lo == 8 &&
            ss.sec.used_hi == 9 && store_histo_lo(&ss.sec, 8) == 4,
        "stats: seconds in [4, 8) twice, [8, 16) once");
  CHECK(ss.tok.count[4] == 1 && ss.tok.count[5] == 2, "stats: tokens in [16, 32) once, [32, 64) twice");
  store_stats_free(&ss);
  int64_t over = 30;
  CHECK_OK(store_stats_collect(ix, b, over_tokens, &over, &ss));
  CHECK(ss.t.clips == 2 && ss.t.tokens == 72 && ss.t.frames == 12 && ss.t.seconds == 22.5 &&
            ss.store_clips == 3 && ss.t.sources_done == t.sources_done && ss.min_tok == 36,
        "stats of the clips over 30 tokens: %lld clips, %lld tokens, %lld frames, %g s",
        (long long)ss.t.clips, (long long)ss.t.tokens, (long long)ss.t.frames, ss.t.seconds);
  store_stats_free(&ss);
  index_close(&ix);

  // ---- repair (c): a consistent store, a stray temporary file, a lost index ----
  store_repair_report rr;
  lines said = {0};
  CHECK_OK(store_repair(c, on_say, &said, &rr));
  CHECK(!rr.rebuilt && rr.recovery.tmp_removed == 0 && rr.recovery.shards_removed == 0 &&
            !said.text[0], "repair of a consistent store does nothing: %s", said.text);
  snprintf(p, sizeof p, "%s/shards/w9.tshard.tmp", c);
  FILE *tf = fopen(p, "w");
  CHECK(tf && fclose(tf) == 0, "stray temporary file");
  CHECK_OK(store_repair(c, on_say, &said, &rr));
  CHECK(!rr.rebuilt && rr.recovery.tmp_removed == 1 && access(p, F_OK) != 0,
        "repair removes the temporary file");
  snprintf(p, sizeof p, "%s/index.sqlite", c);
  CHECK(unlink(p) == 0, "index removed");
  CHECK_OK(store_repair(c, on_say, &said, &rr));
  CHECK(rr.rebuilt && rr.rebuild.shards == 2 && rr.rebuild.clips == 3 &&
            strstr(said.text, "rebuilding the index from the shards"),
        "repair of a store without its index rebuilds it: %lld shards, %lld clips: %s",
        (long long)rr.rebuild.shards, (long long)rr.rebuild.clips, said.text);
  CHECK_OK(store_verify_as_reader(c, on_line, &l, &vr));
  CHECK(vr.shards_bad == 0 && vr.clips_bad == 0 && vr.clips == rr.rebuild.clips,
        "repaired store verifies: %lld clips", (long long)vr.clips);

  snprintf(p, sizeof p, "rm -rf '%s'", root);
  CHECK(system(p) == 0, "cleanup");
  return check_done();
}
