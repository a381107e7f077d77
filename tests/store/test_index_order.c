// The clips' order (store/index.h index_order_settle): sources committed in any order are
// numbered by (manifest row, path, clip index) once settled; only the clips committed since
// the last settling move; a mark left by a job that never settled (a crash) is kept, so the
// next settling orders both jobs' clips; merging two indexes numbers the clips as one
// commit of all their sources would. Each result is checked against the order written out
// here.
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "store/index.h"
#include "store/settings.h"

static const store_settings S = {8, 1, 64, 2, 4, 4, 3, STORE_DTYPE_U8, 30, 0, 0};

// Source `path` with n clips at distinct offsets of one shard (manifest rows rows[k] when
// rows is not NULL, else none).
static void commit(store_index *ix, const char *path, int n, const int64_t *rows) {
  static int64_t offset = 4096;
  store_clip c[4] = {{0}};
  for (int k = 0; k < n; k++) {
    c[k] = (store_clip){.clip_index = k, .duration_s = 1, .src_fps = 8, .src_w = 64,
                        .src_h = 64, .sar_num = 1, .sar_den = 1, .codec = "h264",
                        .pix_fmt = "yuv420p", .decoded_frames = 2, .frames = 2, .T = 1, .H = 1,
                        .W = 1, .tokens = 1, .shard = "shards/x.tshard", .offset = offset,
                        .bytes = 96, .checksum = (uint64_t)offset};
    c[k].manifest_row = rows ? rows[k] : 0;
    c[k].span_start = 0, c[k].span_end = 1;
    offset += 4096;
  }
  store_source s = {.path = path, .size = 10, .mtime = 1, .status = SOURCE_DONE, .error = ""};
  CHECK_OK(index_commit_source(ix, &s, c, n));
}

// The index's clips in id order as "id:path#clip_index " into out.
static void order_of(const char *file, char *out, size_t n) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  out[0] = 0;
  CHECK(sqlite3_open_v2(file, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK, "open %s", file);
  CHECK(sqlite3_prepare_v2(db, "SELECT c.id, s.path, c.clip_index FROM clips c JOIN sources s "
                           "ON s.id = c.source_id ORDER BY c.id", -1, &st, NULL) == SQLITE_OK,
        "prepare");
  while (sqlite3_step(st) == SQLITE_ROW) {
    size_t u = strlen(out);
    snprintf(out + u, n - u, "%lld:%s#%d ", (long long)sqlite3_column_int64(st, 0),
             (const char *)sqlite3_column_text(st, 1), sqlite3_column_int(st, 2));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static void expect_order(const char *file, const char *want, const char *what) {
  char got[2048];
  order_of(file, got, sizeof got);
  CHECK(!strcmp(got, want), "%s:\n got  %s\n want %s", what, got, want);
}

static int64_t settle(const char *file) {
  store_index *ix = NULL;
  int64_t moved = -1;
  CHECK_OK(index_open(&ix, file, 0, &S));
  CHECK_OK(index_order_settle(ix, &moved));
  index_close(&ix);
  return moved;
}

int main(void) {
  char dir[256], a[300], b[300], m[300];
  snprintf(dir, sizeof dir, "%s/test_index_order_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR")
                                                                              : "/tmp");
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  snprintf(a, sizeof a, "%s/a.sqlite", dir);
  snprintf(b, sizeof b, "%s/b.sqlite", dir);
  snprintf(m, sizeof m, "%s/m.sqlite", dir);

  // One job whose workers finished /v/b, then /v/a: ids follow the commits until settled.
  store_index *ix = NULL;
  CHECK_OK(index_open(&ix, a, 1, &S));
  commit(ix, "/v/b", 2, NULL);
  commit(ix, "/v/a", 2, NULL);
  index_close(&ix);
  expect_order(a, "1:/v/b#0 2:/v/b#1 3:/v/a#0 4:/v/a#1 ", "committed");
  CHECK(settle(a) == 4, "4 clips renumbered");
  expect_order(a, "1:/v/a#0 2:/v/a#1 3:/v/b#0 4:/v/b#1 ", "settled: by path");
  CHECK(settle(a) == 0, "settling again moves nothing");
  expect_order(a, "1:/v/a#0 2:/v/a#1 3:/v/b#0 4:/v/b#1 ", "settled twice");

  // A second job: only its clips move, above the first job's.
  CHECK_OK(index_open(&ix, a, 0, &S));
  commit(ix, "/v/c", 1, NULL);
  commit(ix, "/v/0", 1, NULL);
  index_close(&ix);
  CHECK(settle(a) == 2, "the second job's 2 clips renumbered");
  expect_order(a, "1:/v/a#0 2:/v/a#1 3:/v/b#0 4:/v/b#1 5:/v/0#0 6:/v/c#0 ",
               "the first job's ids kept, the second's above them by path");

  // A job that crashed after its commits (never settled), then the next one: both ordered.
  CHECK_OK(index_open(&ix, a, 0, &S));
  commit(ix, "/v/z", 1, NULL);
  commit(ix, "/v/y", 1, NULL);
  index_close(&ix);
  CHECK_OK(index_open(&ix, a, 0, &S));
  commit(ix, "/v/x", 1, NULL);
  index_close(&ix);
  CHECK(settle(a) == 2, "x and z change places, y stays");
  expect_order(a, "1:/v/a#0 2:/v/a#1 3:/v/b#0 4:/v/b#1 5:/v/0#0 6:/v/c#0 7:/v/x#0 8:/v/y#0 "
               "9:/v/z#0 ", "the crashed job's clips ordered with the next job's");

  // A re-ingest of a changed source: its old clips go, its new ones take ids above the rest.
  CHECK_OK(index_open(&ix, a, 0, &S));
  commit(ix, "/v/a", 1, NULL);
  index_close(&ix);
  CHECK(settle(a) == 0, "one new clip: nothing to reorder");
  expect_order(a, "3:/v/b#0 4:/v/b#1 5:/v/0#0 6:/v/c#0 7:/v/x#0 8:/v/y#0 9:/v/z#0 10:/v/a#0 ",
               "the replaced source");

  // Manifest rows come first: a unit of rows 5 and 6 after one of rows 1 and 2.
  CHECK_OK(index_open(&ix, b, 1, &S));
  const int64_t r56[2] = {5, 6}, r12[2] = {1, 2};
  commit(ix, "/m/a", 2, r56);
  commit(ix, "/m/b", 2, r12);
  index_close(&ix);
  CHECK(settle(b) == 4, "manifest units renumbered");
  expect_order(b, "1:/m/b#0 2:/m/b#1 3:/m/a#0 4:/m/a#1 ", "by manifest row, then path");

  // Merging a and b into a new index: the clips numbered as one commit of all the sources.
  CHECK_OK(index_open(&ix, m, 1, &S));
  int64_t merged = 0, skipped = 0;
  CHECK_OK(index_merge_from(ix, a, "", &merged, &skipped));
  CHECK_OK(index_merge_from(ix, b, "", &merged, &skipped));
  index_close(&ix);
  settle(m);
  expect_order(m, "1:/v/0#0 2:/v/a#0 3:/v/b#0 4:/v/b#1 5:/v/c#0 6:/v/x#0 7:/v/y#0 8:/v/z#0 "
               "9:/m/b#0 10:/m/b#1 11:/m/a#0 12:/m/a#1 ", "merged: file sources by path, then "
               "manifest rows");

  // A read-only handle cannot settle, and says so.
  CHECK_OK(index_open_as_is(&ix, m, &S));
  CHECK(index_order_settle(ix, NULL) == TSR_EIO && strstr(err_msg(), "read-only"),
        "read-only refused: %s", err_msg());
  index_close(&ix);

  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0, "clean up");
  return check_done();
}
