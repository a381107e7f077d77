// Store directory and crash recovery: store_open (mkdir -p, refusals), a simulated crash
// (committed clips, an uncommitted clip and garbage past the committed end, a shard no row
// points at, a temp file, a per-rank part, an empty part) then store_recover: shard cut
// back to its committed end (closed form), unreferenced shard and temp removed, part
// merged exactly once (also when the part reappears, as after a crash before its
// deletion), idempotence, hard-linked shards kept, store_clip_lengths.
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "store/shard.h"
#include "store/clip.h"
#include "store/index.h"
#include "store/recover.h"
#include "store/settings.h"
#include "store/store.h"

static const store_settings S = {8, 1, 64, 2, 4, 4, 3, STORE_DTYPE_U8, 0, 0, 0};
#define TB 96

static char root[256], store[512];

static int64_t fsize(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 ? (int64_t)sb.st_size : -1;
}
static int exists(const char *p) { return access(p, F_OK) == 0; }

// Writes one clip of T x 2 x 3 tokens (byte value v) and returns its row.
static store_clip write_clip(shard_writer *w, const char *rel, int idx, int T, uint8_t v) {
  store_clip c = {0};
  uint8_t tok[TB];
  memset(tok, v, sizeof tok);
  CHECK_OK(shard_writer_begin_clip(w, 2, 3, &c.offset));
  for (int i = 0; i < T * 6; i++) CHECK_OK(shard_writer_append(w, tok, sizeof tok));
  CHECK_OK(shard_writer_end_clip(w, T, &c.checksum));
  c.clip_index = idx;
  c.duration_s = T * 2 / 8.0;
  c.src_fps = 25;
  c.sar_num = c.sar_den = 1;
  c.codec = "h264";
  c.pix_fmt = "yuv420p";
  c.frames = T * 2;
  c.T = T, c.H = 2, c.W = 3;
  c.tokens = T * 6;
  c.shard = rel;
  c.bytes = c.tokens * TB;
  return c;
}

static void sub(char *out, size_t n, const char *rel) { snprintf(out, n, "%s/%s", store, rel); }

static void copy_file(const char *from, const char *to) {
  int64_t n = fsize(from);
  uint8_t *b = malloc((size_t)n + 1);
  int fd = open(from, O_RDONLY);
  CHECK(read(fd, b, (size_t)n) == n, "read %s", from);
  close(fd);
  fd = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CHECK(write(fd, b, (size_t)n) == n, "write %s", to);
  close(fd);
  free(b);
}

static void append_garbage(const char *p, int n) {
  int fd = open(p, O_WRONLY | O_APPEND);
  uint8_t g[1000];
  memset(g, 0xab, sizeof g);
  for (int i = 0; i < n; i += 1000) CHECK(write(fd, g, 1000) == 1000, "append");
  close(fd);
}

int main(void) {
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(root, sizeof root, "%s/test_store_XXXXXX", tmp);
  CHECK(mkdtemp(root) != NULL, "mkdtemp");
  snprintf(store, sizeof store, "%s/a/b/store", root);
  char p1[600], p2[600], p3[600], ptmp[600], part[600], part0[600], saved[600], idx[600], link3[600];
  sub(p1, sizeof p1, "shards/s1.tshard");
  sub(p2, sizeof p2, "shards/s2.tshard");
  sub(p3, sizeof p3, "shards/s3.tshard");
  sub(ptmp, sizeof ptmp, "shards/s9.tshard.tmp");
  sub(part, sizeof part, "parts/rank-1-x.sqlite");
  sub(part0, sizeof part0, "parts/rank-2-x.sqlite");
  sub(idx, sizeof idx, "index.sqlite");
  snprintf(saved, sizeof saved, "%s/saved.sqlite", root);
  snprintf(link3, sizeof link3, "%s/link3.tshard", root);

  // ---- store_open ----
  store_index *ix = NULL;
  CHECK(store_open(&ix, store, 0, &S) != TSR_OK && strstr(err_msg(), "does not exist"), "missing store: %s", err_msg());
  CHECK_OK(store_open(&ix, store, 1, &S));  // mkdir -p
  char d[600];
  sub(d, sizeof d, "shards");
  CHECK(exists(d), "shards/ made");
  sub(d, sizeof d, "parts");
  CHECK(exists(d), "parts/ made");
  index_close(&ix);
  CHECK(store_open(&ix, idx, 0, NULL) == TSR_EINVAL && strstr(err_msg(), "not a directory"), "file as store: %s", err_msg());
  CHECK(store_open(&ix, root, 0, NULL) == TSR_EINVAL && strstr(err_msg(), "not a tessera store"), "dir without index: %s", err_msg());
  char foreign[600];
  snprintf(foreign, sizeof foreign, "%s/a", root);  // holds b/: not a store
  CHECK(store_open(&ix, foreign, 1, &S) == TSR_EINVAL && strstr(err_msg(), "not a tessera store"), "foreign dir: %s", err_msg());
  snprintf(foreign, sizeof foreign, "%s/notdir", root);
  FILE *f = fopen(foreign, "w");
  fclose(f);
  char under[700];
  snprintf(under, sizeof under, "%s/x", foreign);
  CHECK(store_open(&ix, under, 1, &S) == TSR_EIO && strstr(err_msg(), "cannot create"), "unwritable place: %s", err_msg());
  if (geteuid() != 0) {  // permissions do not stop root
    snprintf(under, sizeof under, "%s/ro", root);
    mkdir(under, 0555);
    strcat(under, "/store");
    CHECK(store_open(&ix, under, 1, &S) == TSR_EIO && strstr(err_msg(), "Permission denied"), "read-only parent: %s", err_msg());
  }
  store_settings other = S;
  other.short_side = 32;
  int64_t isz = fsize(idx);
  CHECK(store_open(&ix, store, 1, &other) == TSR_EMISMATCH && strstr(err_msg(), "short_side 64 vs 32"), "mismatch: %s", err_msg());
  CHECK(fsize(idx) == isz, "index untouched");

  // ---- simulated crash ----
  CHECK_OK(store_open(&ix, store, 1, &S));
  shard_writer *w = NULL;
  CHECK_OK(shard_writer_create(&w, p1, &S));
  store_clip c[3];
  c[0] = write_clip(w, "shards/s1.tshard", 0, 3, 1);
  c[1] = write_clip(w, "shards/s1.tshard", 1, 5, 2);
  CHECK_OK(shard_writer_sync(w));
  store_source sx = {.path = "/v/x.mp4", .size = 100, .mtime = 5, .status = SOURCE_DONE,
                       .decoded_frames = 40};
  CHECK_OK(index_commit_source(ix, &sx, c, 2));
  int64_t committed = shard_writer_size(w);
  c[2] = write_clip(w, "shards/s1.tshard", 0, 4, 3);  // never committed
  shard_writer_close(&w);
  append_garbage(p1, 5000);  // a torn block past the committed end
  CHECK(fsize(p1) > committed, "tail present");
  CHECK_OK(shard_writer_create(&w, p2, &S));  // a shard whose source never committed
  write_clip(w, "shards/s2.tshard", 0, 2, 4);
  shard_writer_close(&w);
  f = fopen(ptmp, "w");
  fputs("partial", f);
  fclose(f);
  // A rank's part: its source Y with one clip in s3, committed to the part only.
  store_index *px = NULL;
  CHECK_OK(index_open(&px, part, 1, &S));
  CHECK_OK(shard_writer_create(&w, p3, &S));
  store_clip cy = write_clip(w, "shards/s3.tshard", 0, 6, 5);
  CHECK_OK(shard_writer_sync(w));
  shard_writer_close(&w);
  store_source sy = {.path = "/v/y.mp4", .size = 200, .mtime = 6, .status = SOURCE_DONE,
                       .decoded_frames = 48, .label = "dogs"};
  CHECK_OK(index_commit_source(px, &sy, &cy, 1));
  store_source sz = {.path = "/v/z.mp4", .mtime = 6, .status = SOURCE_FAILED,
                       .error = "empty file"};
  CHECK_OK(index_commit_source(px, &sz, NULL, 0));
  index_close(&px);
  copy_file(part, saved);
  f = fopen(part0, "w");  // a part whose creation never committed
  fclose(f);

  store_recovery rep;
  CHECK_OK(store_recover_report(store, ix, &rep));
  CHECK(rep.parts_merged == 1 && rep.clips_merged == 1 && rep.sources_skipped == 0, "parts: %lld merged, %lld clips",
        (long long)rep.parts_merged, (long long)rep.clips_merged);
  CHECK(rep.shards_truncated == 1 && rep.shards_removed == 1 && rep.tmp_removed == 1, "shards: %lld cut %lld removed %lld tmp",
        (long long)rep.shards_truncated, (long long)rep.shards_removed, (long long)rep.tmp_removed);
  int64_t end1 = c[1].offset + (64 + c[1].bytes + 4095) / 4096 * 4096;
  CHECK(committed == end1 && fsize(p1) == end1, "s1 cut to committed end %lld (size %lld)", (long long)end1, (long long)fsize(p1));
  CHECK(rep.bytes_cut == (c[2].offset + (64 + c[2].bytes + 4095) / 4096 * 4096 + 5000) - end1, "bytes cut %lld", (long long)rep.bytes_cut);
  CHECK(!exists(p2) && !exists(ptmp) && !exists(part) && !exists(part0), "removed s2, tmp, parts");
  CHECK(exists(p3), "part's shard kept");
  store_totals t;
  CHECK_OK(index_totals(ix, &t));
  CHECK(t.sources_done == 2 && t.sources_failed == 1 && t.clips == 3, "totals %lld %lld %lld",
        (long long)t.sources_done, (long long)t.sources_failed, (long long)t.clips);
  // Every committed clip reads back with its checksum.
  shard_reader *r = NULL;
  CHECK_OK(shard_reader_open(&r, p1, &S));
  for (int i = 0; i < 2; i++) CHECK_OK(shard_reader_clip(r, c[i].offset, c[i].bytes, c[i].checksum, 1, NULL));
  shard_reader_close(&r);
  CHECK_OK(shard_reader_open(&r, p3, &S));
  CHECK_OK(shard_reader_clip(r, cy.offset, cy.bytes, cy.checksum, 1, NULL));
  shard_reader_close(&r);

  // Idempotent.
  CHECK_OK(store_recover_report(store, ix, &rep));
  CHECK(rep.parts_merged == 0 && rep.shards_truncated == 0 && rep.shards_removed == 0, "second recovery is a no-op");
  // A crash between the part's merge and its deletion: the part is back. Merged once.
  copy_file(saved, part);
  CHECK_OK(store_recover_report(store, ix, &rep));
  CHECK(rep.parts_merged == 1 && rep.clips_merged == 0 && rep.sources_skipped == 1, "re-merge: %lld clips %lld skipped",
        (long long)rep.clips_merged, (long long)rep.sources_skipped);
  CHECK_OK(index_totals(ix, &t));
  CHECK(t.clips == 3 && t.sources_done == 2 && t.sources_failed == 1, "still 3 clips");
  CHECK(!exists(part), "part removed");

  // A hard-linked shard's tail is kept (the other store may still own those bytes).
  CHECK(link(p3, link3) == 0, "link");
  append_garbage(p3, 3000);
  int64_t s3 = fsize(p3);
  CHECK_OK(store_recover_report(store, ix, &rep));
  CHECK(fsize(p3) == s3 && rep.shards_truncated == 0, "linked shard not truncated");
  unlink(link3);
  CHECK_OK(store_recover(store, ix));
  CHECK(fsize(p3) == 4096 + (64 + cy.bytes + 4095) / 4096 * 4096, "unlinked shard truncated");

  // A shard shorter than its committed end is reported, not silently accepted.
  CHECK(truncate(p1, end1 - 4096) == 0, "truncate");
  CHECK(store_recover(store, ix) == TSR_EFORMAT && strstr(err_msg(), "s1.tshard"), "lost clips: %s", err_msg());
  index_close(&ix);

  int64_t *ids = NULL, *toks = NULL, n = 0;
  CHECK_OK(store_clip_lengths(store, &ids, &toks, &n));
  CHECK(n == 3 && toks[0] == c[0].tokens && toks[1] == c[1].tokens && toks[2] == cy.tokens &&
            ids[0] < ids[1] && ids[1] < ids[2], "clip lengths");
  free(ids);
  free(toks);
  CHECK(store_clip_lengths(root, &ids, &toks, &n) != TSR_OK, "not a store");

  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  CHECK(system(cmd) == 0, "cleanup");
  return check_done();
}
