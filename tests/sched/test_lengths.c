// Clip lengths: CSV columns, token geometry, caps, mixes and their sampling weights,
// determinism, real files from shared/lengths, and clear errors on bad files.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"
#include "sched/lengths.h"

static char tmpdir[] = "/tmp/tsr_lengths_XXXXXX";

static const char *write_file(const char *name, const char *text) {
  return scratch_write(tmpdir, name, text);
}

// Loads `text` as a CSV and expects failure whose message contains `what` and the path.
static void expect_bad(const char *name, const char *text, const lengths_opts *o,
                       const char *what) {
  lengths_set ls = {0};
  const char *p = write_file(name, text);
  tsr_status st = lengths_load_csv(&ls, p, 1.0, o);
  CHECK(st != TSR_OK, "%s should fail", name);
  CHECK(strstr(err_msg(), what) && strstr(err_msg(), p), "%s: message '%s' lacks '%s'", name,
        err_msg(), what);
  CHECK(ls.n == 0 && ls.nsources == 0, "%s: nothing kept", name);
  lengths_free(&ls);
}

int main(void) {
  CHECK(mkdtemp(tmpdir) != NULL, "mkdtemp");
  lengths_opts geo = {.fps = 8, .height = 480, .width = 640, .pt = 4, .ph = 16, .pw = 16};

  // tokens column, extra columns, blank line, CRLF
  lengths_set ls = {0};
  CHECK_OK(lengths_load_csv(&ls, write_file("t.csv", "id,tokens,x\r\na,100,1\r\n\r\nb,7,2\r\n"),
                            1.0, NULL));
  CHECK(ls.n == 2 && ls.tokens[0] == 100 && ls.tokens[1] == 7, "n=%lld", (long long)ls.n);
  CHECK(ls.ids[0] == 0 && ls.ids[1] == 1, "row ids");
  // durations: floor(d*8/4) * (480/16) * (640/16) = floor(2d) * 1200
  CHECK_OK(lengths_load_csv(&ls, write_file("d.csv", "dataset,id,duration_s\nx,a,10\nx,b,2.74\n"
                                                     "x,c,0.4\n"),
                            3.0, &geo));
  CHECK(ls.n == 4 && ls.nsources == 2, "n=%lld", (long long)ls.n);
  CHECK(ls.tokens[2] == 20 * 1200, "10 s -> %lld", (long long)ls.tokens[2]);
  CHECK(ls.tokens[3] == 5 * 1200, "2.74 s -> %lld", (long long)ls.tokens[3]);
  CHECK(ls.skipped == 1, "0.4 s is shorter than a 4-frame tubelet at 8 fps");
  CHECK(ls.ids[2] == 2 && ls.offsets[1] == 2 && ls.offsets[2] == 4, "ids continue across files");
  CHECK(lengths_max(&ls) == 24000, "max");
  lengths_free(&ls);

  // a CSV as pandas writes it (core/csv.h, the manifests' reader): quoted fields holding
  // commas, a doubled quote and a line break, a quoted header name, a UTF-8 BOM
  CHECK_OK(lengths_load_csv(&ls, write_file("q.csv", "\xef\xbb\xbf" "id,caption,\"tokens\"\n"
                                                     "a,\"a dog, a cat\",12\n"
                                                     "b,\"say \"\"hi\"\", then\nleave\",30\n"
                                                     "c,plain,7\n"),
                            1.0, NULL));
  CHECK(ls.n == 3 && ls.tokens[0] == 12 && ls.tokens[1] == 30 && ls.tokens[2] == 7,
        "quoted commas: n=%lld", (long long)ls.n);
  lengths_free(&ls);
  expect_bad("open.csv", "id,tokens\n\"a,5\n", NULL, "open.csv:2: a quoted field is never closed");
  expect_bad("after.csv", "id,tokens\n\"a\"x,5\n", NULL, "after.csv:2: text after a closing quote");

  // exact products are not floored one below: 9.04 s * 25 fps = 226 frames
  lengths_opts g25 = {.fps = 25, .height = 16, .width = 16, .pt = 1, .ph = 16, .pw = 16};
  CHECK_OK(lengths_load_csv(&ls, write_file("e.csv", "duration_s\n9.04\n"), 1, &g25));
  CHECK(ls.tokens[0] == 226, "got %lld", (long long)ls.tokens[0]);
  lengths_free(&ls);

  // tokens per second and caps
  lengths_opts tps = {.tokens_per_second = 1800, .max_seconds = 300};
  CHECK_OK(lengths_load_csv(&ls, write_file("c.csv", "duration_s\n1.5\n400\n"), 1, &tps));
  CHECK(ls.tokens[0] == 2700 && ls.tokens[1] == 540000 && ls.capped == 1, "caps");
  lengths_free(&ls);
  lengths_opts capt = {.cap_tokens = 50};
  CHECK_OK(lengths_load_csv(&ls, write_file("ct.csv", "tokens\n10\n80\n"), 1, &capt));
  CHECK(ls.tokens[1] == 50 && ls.capped == 1, "cap tokens");
  lengths_free(&ls);

  // in-memory source (token store path)
  int64_t sid[3] = {10, 11, 12}, stok[3] = {5, 6, 7};
  CHECK_OK(lengths_add(&ls, "store", sid, stok, 3, 1.0, NULL));
  CHECK(ls.n == 3 && ls.ids[2] == 12, "store ids kept");
  stok[1] = 0;
  CHECK(lengths_add(&ls, "store2", sid, stok, 3, 1.0, NULL) == TSR_EINVAL &&
            strstr(err_msg(), "clip 11"),
        "%s", err_msg());
  CHECK(ls.n == 3 && ls.nsources == 1, "failed source dropped");
  lengths_free(&ls);

  // mix: weights and sampling
  char spec[1200];
  const char *a = write_file("a.csv", "tokens\n1\n2\n3\n");
  const char *b = write_file("b.csv", "tokens\n1000\n2000\n");
  snprintf(spec, sizeof spec, "%s:0.9,%s:0.1", a, b);
  CHECK_OK(lengths_load_mix(&ls, spec, NULL));
  CHECK(ls.nsources == 2 && ls.weights[0] == 0.9 && ls.weights[1] == 0.1, "weights");
  enum { B = 4000 };
  static int64_t ids[B], tok[B], ids2[B], tok2[B];
  CHECK_OK(lengths_sample(&ls, 7, 3, B, ids, tok));
  CHECK_OK(lengths_sample(&ls, 7, 3, B, ids2, tok2));
  CHECK(!memcmp(ids, ids2, sizeof ids) && !memcmp(tok, tok2, sizeof tok), "deterministic");
  CHECK_OK(lengths_sample(&ls, 7, 4, B, ids2, tok2));
  CHECK(memcmp(tok, tok2, sizeof tok), "another step draws another batch");
  int nb = 0;
  for (int i = 0; i < B; i++) nb += tok[i] >= 1000;
  // Binomial(4000, 0.1): sd = 19; 5 sd either side
  CHECK(nb > 400 - 95 && nb < 400 + 95, "%d of %d from the 0.1 source", nb, B);
  lengths_free(&ls);
  snprintf(spec, sizeof spec, "%s:0,%s", a, b);
  CHECK(lengths_load_mix(&ls, spec, NULL) == TSR_EINVAL && strstr(err_msg(), "weight"), "%s",
        err_msg());
  lengths_free(&ls);

  // distinct clips within a batch while the source is large enough
  CHECK_OK(lengths_load_csv(&ls, write_file("u.csv", "tokens\n1\n2\n3\n4\n5\n6\n7\n8\n"), 1, NULL));
  CHECK_OK(lengths_sample(&ls, 1, 0, 8, ids, tok));
  int seen[8] = {0}, distinct = 0;
  for (int i = 0; i < 8; i++) distinct += !seen[ids[i]]++;
  CHECK(distinct == 8, "%d distinct of 8", distinct);
  lengths_free(&ls);

  // real distributions
  const char *shared = check_shared("lengths");
  if (shared) {
    char p[1024];
    snprintf(p, sizeof p, "%s/lengths/ucf101_clips.csv", shared);
    CHECK_OK(lengths_load_csv(&ls, p, 1.0, &tps));
    CHECK(ls.n == 13320, "ucf101 rows %lld", (long long)ls.n);
    snprintf(p, sizeof p, "%s/lengths/youcook2_videos.csv", shared);
    CHECK_OK(lengths_load_csv(&ls, p, 0.03, &tps));
    CHECK(ls.n == 13320 + 1790, "youcook2 rows");
    CHECK(lengths_max(&ls) == 540000, "capped at 300 s: %lld", (long long)lengths_max(&ls));
    lengths_free(&ls);
  }

  // bad files
  expect_bad("empty.csv", "", &geo, "empty file");
  expect_bad("header.csv", "dataset,id,duration_s\n", &geo, "no clips");
  expect_bad("nocol.csv", "dataset,id,length\nx,a,3\n", &geo, "no 'tokens' or 'duration_s'");
  expect_bad("nan.csv", "id,duration_s\na,12\nb,abc\n", &geo, ":3: duration_s 'abc'");
  expect_bad("short.csv", "id,duration_s\na\n", &geo, ":2:");
  expect_bad("zero.csv", "id,tokens\na,0\n", NULL, ":2: tokens = 0");
  expect_bad("neg.csv", "id,duration_s\na,-3\n", &geo, "must be > 0");
  expect_bad("frac.csv", "tokens\n1.5\n", NULL, "whole numbers");
  expect_bad("nogeo.csv", "duration_s\n3\n", NULL, "--fps");
  // Issue 9, part 6: absurd numbers are refused with file:line and the text (1e30 tokens
  // was converted to INT64_MIN and reported as "clip 0 has -9223372036854775808 tokens").
  expect_bad("huge.csv", "tokens\n100\n1e30\n", NULL, "huge.csv:3: tokens = 1e30; clip lengths");
  expect_bad("over.csv", "tokens\n274877906945\n", NULL, ":2: tokens = 274877906945");
  expect_bad("inf.csv", "tokens\ninf\n", NULL, ":2: tokens = inf");
  expect_bad("tnan.csv", "tokens\nnan\n", NULL, ":2: tokens 'nan' is not a number");
  expect_bad("dhuge.csv", "duration_s\n1e300\n", &geo, ":2: duration_s = 1e300");
  lengths_opts fast = {.tokens_per_second = 1e9};
  expect_bad("dtok.csv", "duration_s\n1\n1e8\n", &fast,
             ":3: duration_s = '1e8' gives 1e+17 tokens, more than the limit");
  fast.cap_tokens = 1000;  // capped clips are fine
  CHECK_OK(lengths_load_csv(&ls, write_file("dcap.csv", "duration_s\n1e8\n"), 1, &fast));
  CHECK(ls.n == 1 && ls.tokens[0] == 1000 && ls.capped == 1, "capped huge duration");
  lengths_free(&ls);
  CHECK(lengths_load_mix(&ls, "a.csv:1e300", NULL) == TSR_EINVAL && strstr(err_msg(), "weight"),
        "%s", err_msg());
  CHECK(lengths_load_csv(&ls, "/nonexistent/l.csv", 1, NULL) == TSR_EIO &&
            strstr(err_msg(), "/nonexistent/l.csv"),
        "%s", err_msg());
  CHECK(lengths_sample(&ls, 0, 0, 4, ids, tok) == TSR_EINVAL, "sampling nothing");

  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  CHECK(system(cmd) == 0, "cleanup");
  return check_done();
}
