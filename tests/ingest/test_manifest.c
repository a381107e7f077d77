// tests/ingest/test_manifest.c — the clip manifest reader (ingest/manifest.h) and its filters
// (ingest/manifest_filter.h) on files written here in each preset's real shape.
// - panda70m: 60 rows of 1-4 spans with Python-literal list cells ('...' and "..." strings,
//   doubled CSV quotes); every start and end equals H*3600 + M*60 + S + ms/1000 of the
//   numbers the timecode was printed from; captions and per-span scores in order
// - openvid, opensora (seconds, timecodes, frame ranges at fps), tessera CSV (CRLF, a caption
//   over lines, absolute and relative paths, --root), TSV, JSONL (spans objects)
// - bad rows: each gives an error record naming its row, line, column and reason, and the
//   next good row is read; an unterminated quote resumes at the next line; a missing header
//   column fails the open naming it and the columns found
// - filters: --where syntax, canonical text (sorted, no repeats, shortest numbers, read back),
//   span, name/value pair and clip checks with their reasons
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"
#include "ingest/manifest.h"
#include "ingest/manifest_filter.h"

static char dir[256];

static const char *write_text(const char *name, const char *text) {
  return scratch_write(dir, name, text);
}

static manifest *open_as(const char *path, manifest_preset preset, const char *root) {
  manifest *m = NULL;
  manifest_opts o = {.preset = preset, .root = root};
  CHECK_OK(manifest_open(&m, path, &o));
  return m;
}

static const manifest_record *next(manifest *m) {
  const manifest_record *r = NULL;
  static const manifest_record eof = {.kind = MANIFEST_EOF};
  tsr_status st = m ? manifest_next(m, &r) : TSR_EINVAL;
  CHECK(st == TSR_OK, "manifest_next: %s", err_msg());
  return st ? &eof : r;
}

// The next record must be row R with n spans.
static const manifest_row *expect_row(manifest *m, int64_t row, int n) {
  const manifest_record *r = next(m);
  if (r->kind != MANIFEST_ROW) {
    CHECK(0, "want row %lld, got %s", (long long)row,
          r->kind == MANIFEST_ERROR ? r->error.message : "the end");
    return NULL;
  }
  CHECK(r->row.row == row, "row %lld, want %lld", (long long)r->row.row, (long long)row);
  CHECK(r->row.nspans == n, "row %lld: %d spans, want %d", (long long)row, r->row.nspans, n);
  return r->row.nspans == n ? &r->row : NULL;
}

// The next record must be an error of row R, reason and column (NULL: none).
static void expect_error(manifest *m, int64_t row, const char *reason, const char *column) {
  const manifest_record *r = next(m);
  if (r->kind != MANIFEST_ERROR) {
    CHECK(0, "want an error '%s' of row %lld, got %s", reason, (long long)row,
          r->kind == MANIFEST_ROW ? "a row" : "the end");
    return;
  }
  const manifest_error *e = &r->error;
  CHECK(e->row == row && !strcmp(e->reason, reason), "error of row %lld '%s', want row %lld '%s': "
        "%s", (long long)e->row, e->reason, (long long)row, reason, e->message);
  CHECK(column ? e->column && !strcmp(e->column, column) : !e->column, "column '%s', want '%s': %s",
        e->column ? e->column : "(none)", column ? column : "(none)", e->message);
  char where[64];
  snprintf(where, sizeof where, ": row %lld (line", (long long)row);
  CHECK(strstr(e->message, where) && strstr(e->message, dir), "message names file and row: %s",
        e->message);
}

static void expect_end(manifest *m) {
  const manifest_record *r = next(m);
  CHECK(r->kind == MANIFEST_EOF, "want the end, got %s",
        r->kind == MANIFEST_ROW ? "a row" : r->error.message);
}

static int score_of(const manifest_span *s, const char *name, double *v) {
  for (int i = 0; i < s->nscores; i++)
    if (!strcmp(s->scores[i].name, name)) return *v = s->scores[i].value, 1;
  return 0;
}

static void expect_score(const manifest_span *s, const char *name, double want) {
  double v = NAN;
  CHECK(score_of(s, name, &v) && v == want, "score %s = %.17g, want %.17g", name, v, want);
}

// ---- panda70m ----------------------------------------------------------------------------

enum { PANDA_ROWS = 60, MAX_SPANS = 4 };
typedef struct {
  int n;
  double start[MAX_SPANS], end[MAX_SPANS], score[MAX_SPANS];
  char caption[MAX_SPANS][96];
} panda_row;

static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

// A time printed as Panda-70M does ("H:MM:SS.mmm") and its seconds by closed form.
static double timecode(uint64_t ms, char *out, size_t n) {
  unsigned h = (unsigned)(ms / 3600000), m = (unsigned)(ms / 60000 % 60);
  unsigned s = (unsigned)(ms / 1000 % 60), f = (unsigned)(ms % 1000);
  snprintf(out, n, "%u:%02u:%02u.%03u", h, m, s, f);
  return h * 3600.0 + m * 60.0 + s + f / 1000.0;
}

// One row's CSV text: list cells as pandas writes Python lists (repr), quoted for CSV.
static void panda_line(FILE *f, int i, panda_row *want, uint64_t *seed) {
  char tc[2][32];
  uint64_t t = lcg(seed) % 4000000;  // up to ~1 h 6 min
  want->n = 1 + (int)(lcg(seed) % MAX_SPANS);
  fprintf(f, "vid%03d_x-Y,https://www.youtube.com/watch?v=vid%03d_x-Y,\"[", i, i);
  for (int k = 0; k < want->n; k++) {
    uint64_t a = t + lcg(seed) % 3000, b = a + 1 + lcg(seed) % 20000;
    want->start[k] = timecode(a, tc[0], sizeof tc[0]);
    want->end[k] = timecode(b, tc[1], sizeof tc[1]);
    fprintf(f, "%s['%s', '%s']", k ? ", " : "", tc[0], tc[1]);
    t = b;
  }
  fputs("]\",\"[", f);
  for (int k = 0; k < want->n; k++) {
    int quote = (i + k) % 3 == 0;  // a caption with an apostrophe: repr uses "..."
    snprintf(want->caption[k], sizeof want->caption[k], quote ? "a person's hands, clip %d of %d"
             : "a dog runs on grass, clip %d of %d", k, i);
    fprintf(f, quote ? "%s\"\"%s\"\"" : "%s'%s'", k ? ", " : "", want->caption[k]);
  }
  fputs("]\",\"[", f);
  for (int k = 0; k < want->n; k++) {
    want->score[k] = (double)(lcg(seed) % 100000) / 131072.0;  // exact in binary and decimal
    fprintf(f, "%s%.17g", k ? ", " : "", want->score[k]);
  }
  fputs("]\"\n", f);
}

static void test_panda(void) {
  static panda_row want[PANDA_ROWS];
  char path[512];
  snprintf(path, sizeof path, "%s/panda.csv", dir);
  FILE *f = fopen(path, "w");
  uint64_t seed = 7;
  fputs("videoID,url,timestamp,caption,matching_score\n", f);
  for (int i = 0; i < PANDA_ROWS; i++) panda_line(f, i, &want[i], &seed);
  fclose(f);
  manifest *m = open_as(path, MANIFEST_PANDA70M, NULL);
  int spans = 0;
  for (int i = 0; i < PANDA_ROWS; i++) {
    const manifest_row *r = expect_row(m, i + 1, want[i].n);
    if (!r) continue;
    char p[600];
    snprintf(p, sizeof p, "%s/vid%03d_x-Y.mp4", dir, i);
    CHECK(!strcmp(r->path, p), "path %s, want %s (videoID + .mp4 in the manifest's folder)", r->path, p);
    CHECK(r->line == i + 2, "row %d on line %lld", i + 1, (long long)r->line);
    for (int k = 0; k < r->nspans; k++, spans++) {
      const manifest_span *s = &r->spans[k];
      CHECK(s->index == k && s->has_start && s->has_end, "span %d of row %d", k, i + 1);
      CHECK_NEAR(s->start, want[i].start[k], 1e-9);
      CHECK_NEAR(s->end, want[i].end[k], 1e-9);
      CHECK(s->caption && !strcmp(s->caption, want[i].caption[k]), "caption '%s', want '%s'",
            s->caption ? s->caption : "(null)", want[i].caption[k]);
      CHECK(s->nscores == 1, "row %d span %d: %d scores", i + 1, k, s->nscores);
      expect_score(s, "matching_score", want[i].score[k]);
    }
  }
  expect_end(m);
  printf("panda70m: %d rows, %d spans\n", PANDA_ROWS, spans);
  manifest_close(&m);
  CHECK(m == NULL, "close clears the handle");
}

// ---- openvid, opensora, tessera ------------------------------------------------------------

static void test_openvid(void) {
  const char *p = write_text("openvid.csv",
      "video,caption,aesthetic score,motion score,temporal consistency score,camera motion,frame,fps,seconds\n"
      "celebv_--5kJ3Ol6Zk_0.mp4,\"The video shows a woman with long hair, talking; \"\"hello\"\".\","
      "5.123,0.89,0.987,static,99,25.0,3.96\n"
      "pexels_3059_2.mp4,A drone flies over a green valley.,4.25,12.5,0.9921875,pan_right,240,29.97,8.008\n");
  manifest *m = open_as(p, MANIFEST_OPENVID, NULL);
  const manifest_row *r = expect_row(m, 1, 1);
  if (r) {
    const manifest_span *s = &r->spans[0];
    CHECK(!s->has_start && !s->has_end, "openvid clips are whole files");
    CHECK(!strcmp(s->caption, "The video shows a woman with long hair, talking; \"hello\"."), "caption %s", s->caption);
    CHECK(s->nscores == 6, "6 scores (camera motion is text, ignored): %d", s->nscores);
    expect_score(s, "aesthetic_score", 5.123);
    expect_score(s, "motion_score", 0.89);
    expect_score(s, "temporal_consistency_score", 0.987);
    expect_score(s, "frame", 99);
    expect_score(s, "fps", 25);
    expect_score(s, "seconds", 3.96);
  }
  if ((r = expect_row(m, 2, 1))) expect_score(&r->spans[0], "temporal_consistency_score", 0.9921875);
  expect_end(m);
  manifest_close(&m);
}

static void test_opensora(void) {
  const char *p = write_text("opensora.csv",
      "path,text,num_frames,height,width,aspect_ratio,resolution,fps,start,end\n"
      "/data/raw/a.mp4,a cat sleeps,120,720,1280,0.5625,921600,24,0:00:01.500,00:00:04.000\n"
      "clips/b.mp4,,48,480,854,0.5620608899,409920,30,2.25,\n");
  manifest *m = open_as(p, MANIFEST_OPENSORA, "/");
  const manifest_row *r = expect_row(m, 1, 1);
  if (r) {
    CHECK(!strcmp(r->path, "/data/raw/a.mp4"), "an absolute path is kept: %s", r->path);
    CHECK(r->spans[0].start == 1.5 && r->spans[0].end == 4.0, "timecodes %g %g", r->spans[0].start, r->spans[0].end);
    expect_score(&r->spans[0], "resolution", 921600);
    expect_score(&r->spans[0], "aspect_ratio", 0.5625);
  }
  if ((r = expect_row(m, 2, 1))) {
    CHECK(!strcmp(r->path, "/clips/b.mp4"), "relative to --root /: %s", r->path);
    CHECK(r->spans[0].has_start && r->spans[0].start == 2.25 && !r->spans[0].has_end, "to the end");
    CHECK(!r->spans[0].caption, "an empty text is no caption");
  }
  expect_end(m);
  manifest_close(&m);
  // frame ranges at the row's fps: start = start_frame / fps, end = end_frame / fps
  p = write_text("opensora_frames.csv",
      "path,text,num_frames,fps,start_frame,end_frame\n"
      "a.mp4,x,48,24,12,60\n"
      "b.mp4,x,48,,12,60\n"
      "c.mp4,x,48,30000/1001,0,10\n");
  m = open_as(p, MANIFEST_OPENSORA, NULL);
  if ((r = expect_row(m, 1, 1))) CHECK(r->spans[0].start == 0.5 && r->spans[0].end == 2.5, "frames 12-60 at 24 fps");
  expect_error(m, 2, "fps", "fps");
  expect_error(m, 3, "number", "fps");
  expect_end(m);
  manifest_close(&m);
}

static void test_tessera(void) {
  // CRLF, a caption over two lines, a quoted path, a pandas index column, extra columns
  const char *p = write_text("t.csv",
      ",path,start,end,caption,aesthetic,source_url\r\n"
      "0,v/a.mp4,0,2.5,\"two\r\nlines, one caption\",4.5,http://x\r\n"
      "\r\n"
      "1,\"/abs/b c.mp4\",,,,,\r\n"
      "2,./c.mp4,1:00,1:00:00,plain,text,\r\n");
  manifest *m = open_as(p, MANIFEST_TESSERA, NULL);
  char want[600];
  const manifest_row *r = expect_row(m, 1, 1);
  if (r) {
    snprintf(want, sizeof want, "%s/v/a.mp4", dir);
    CHECK(!strcmp(r->path, want), "path %s, want %s", r->path, want);
    CHECK(!strcmp(r->spans[0].caption, "two\nlines, one caption"), "caption '%s'", r->spans[0].caption);
    CHECK(r->spans[0].nscores == 1, "the index column is ignored, the url is text: %d scores", r->spans[0].nscores);
    expect_score(&r->spans[0], "aesthetic", 4.5);
  }
  if ((r = expect_row(m, 2, 1))) {
    CHECK(r->line == 5, "row 2 on line 5 (after a caption over 2 lines and a blank line): %lld", (long long)r->line);
    CHECK(!strcmp(r->path, "/abs/b c.mp4") && !r->spans[0].has_start && !r->spans[0].caption, "whole file");
  }
  if ((r = expect_row(m, 3, 1))) {
    snprintf(want, sizeof want, "%s/c.mp4", dir);
    CHECK(!strcmp(r->path, want), "./ dropped: %s", r->path);
    CHECK(r->spans[0].start == 60 && r->spans[0].end == 3600, "M:SS and H:MM:SS: %g %g", r->spans[0].start, r->spans[0].end);
    CHECK(r->spans[0].nscores == 0, "a text in a free column is no score");
  }
  expect_end(m);
  manifest_close(&m);

  p = write_text("t.tsv", "path\tcaption\tstart\tend\n"
                          "a.mp4\tcommas, \"quotes\" and all\t1\t2\n");
  m = open_as(p, MANIFEST_TESSERA, NULL);
  if ((r = expect_row(m, 1, 1))) CHECK(!strcmp(r->spans[0].caption, "commas, \"quotes\" and all"), "TSV: %s", r->spans[0].caption);
  expect_end(m);
  manifest_close(&m);

  p = write_text("t.jsonl",
      "{\"path\": \"a.mp4\", \"start\": 1.5, \"end\": \"0:00:03.000\", \"caption\": \"x\", \"aesthetic score\": 5, \"tag\": \"t\"}\n"
      "\n"
      "{\"path\": \"b.mp4\", \"spans\": [{\"start\": 0, \"end\": 2, \"caption\": \"first\", \"clarity\": 0.5},"
      " {\"start\": 2, \"caption\": null}], \"aesthetic\": 4}\n");
  m = open_as(p, MANIFEST_TESSERA, NULL);
  if ((r = expect_row(m, 1, 1))) {
    CHECK(r->spans[0].start == 1.5 && r->spans[0].end == 3, "JSON number and timecode");
    expect_score(&r->spans[0], "aesthetic_score", 5);
    CHECK(r->spans[0].nscores == 1, "text keys are no scores");
  }
  if ((r = expect_row(m, 2, 2))) {
    CHECK(r->line == 3, "JSONL line numbers count blank lines: %lld", (long long)r->line);
    CHECK(r->spans[0].nscores == 2 && r->spans[1].nscores == 1, "row scores + span scores: %d %d",
          r->spans[0].nscores, r->spans[1].nscores);
    expect_score(&r->spans[0], "clarity", 0.5);
    expect_score(&r->spans[1], "aesthetic", 4);
    CHECK(r->spans[1].has_start && !r->spans[1].has_end && !r->spans[1].caption, "open end, no caption");
  }
  expect_end(m);
  manifest_close(&m);
}

// ---- bad input ---------------------------------------------------------------------------

static void test_bad_rows(void) {
  const char *p = write_text("bad.csv",
      "path,start,end,caption\n"
      ",1,2,no path\n"                      // 1 missing path
      "a.mp4,1:75:00,,bad minutes\n"        // 2 timestamp
      "b.mp4,5,3,backwards\n"               // 3 end <= start
      "c.mp4,-3,,negative\n"                // 4 negative time
      "d.mp4,1,2\n"                         // 5 fields
      "e.mp4,1,2,\"unclosed caption\n"      // 6 quote: resumes at the next line
      "f.mp4,1,2,good\n"                    // 7
      "g.mp4,1,2,\"x\"y\n"                  // 8 text after a closing quote
      "f.mp4,1,2,again\n"                   // 9 duplicate of row 7
      "h.mp4,0,1,last\n"                    // 10
      "i.mp4,0,1,\"never closed\n");        // 11 quote at the end of the file
  manifest *m = open_as(p, MANIFEST_TESSERA, NULL);
  expect_error(m, 1, "missing path", "path");
  expect_error(m, 2, "timestamp", "start");
  expect_error(m, 3, "end <= start", "end");
  expect_error(m, 4, "negative time", "start");
  expect_error(m, 5, "fields", NULL);
  expect_error(m, 6, "quote", "caption");
  expect_row(m, 7, 1);
  expect_error(m, 8, "quote", "caption");
  expect_error(m, 9, "duplicate", NULL);
  expect_row(m, 10, 1);
  expect_error(m, 11, "quote", "caption");
  expect_end(m);
  manifest_close(&m);

  p = write_text("bad_panda.csv",
      "videoID,url,timestamp,caption,matching_score\n"
      "a,u,\"[['0:00:00.000', '0:00:02.000'], ['0:00:02.000', '0:00:04.000']]\",\"['one']\",\"[0.1, 0.2]\"\n"
      "b,u,\"[['0:00:00.000', '0:00:02.000']]\",\"[3]\",[0.1]\n"
      "c,u,\"[['0:00:00.000', '0:00:02.000'\",\"['x']\",[0.1]\n"
      "d,u,\"[['0:00:00.000', 'soon']]\",\"['x']\",[0.1]\n"
      "e,u,\"[['0:00:00.000', '0:00:02.000']]\",\"['x']\",\"['high']\"\n"
      "f,u,\"[['0:00:00.000', '0:00:02.000'], ['0:00:00.000', '0:00:02.000']]\",\"['x', 'y']\",\"[1, 2]\"\n");
  m = open_as(p, MANIFEST_PANDA70M, NULL);
  expect_error(m, 1, "list length", "caption");
  expect_error(m, 2, "caption type", "caption");
  expect_error(m, 3, "list", "timestamp");
  expect_error(m, 4, "timestamp", "timestamp");
  expect_error(m, 5, "number", "matching_score");
  // row 6 repeats its own first span: span 1 is the duplicate, span 0 is read
  const manifest_record *r = next(m);
  CHECK(r->kind == MANIFEST_ERROR && r->error.span == 1 && !strcmp(r->error.reason, "duplicate"),
        "span 1 of row 6 is a duplicate");
  const manifest_row *row = expect_row(m, 6, 1);
  if (row) CHECK(row->spans[0].index == 0 && !strcmp(row->spans[0].caption, "x"), "span 0 kept");
  expect_end(m);
  manifest_close(&m);

  p = write_text("bad.jsonl",
      "{\"path\": \"a.mp4\", \"caption\": 7}\n"
      "{\"path\": \"b.mp4\", \"caption\": {\"en\": \"x\"}}\n"
      "{\"path\": \"c.mp4\", \"start\": \"0:00:01\" \n"
      "[\"d.mp4\"]\n"
      "{\"path\": \"e.mp4\", \"start\": true}\n"
      "{\"path\": 5}\n"
      "{\"path\": \"f.mp4\", \"caption\": \"fine\"}\n");
  m = open_as(p, MANIFEST_TESSERA, NULL);
  expect_error(m, 1, "caption type", "caption");
  expect_error(m, 2, "caption type", "caption");
  expect_error(m, 3, "json", NULL);
  expect_error(m, 4, "json", NULL);
  expect_error(m, 5, "timestamp", "start");
  expect_error(m, 6, "path", "path");
  expect_row(m, 7, 1);
  expect_end(m);
  manifest_close(&m);
}

static void test_long_and_missing(void) {
  // a record over MANIFEST_MAX_RECORD is an error of its own; the next row is read
  char path[512];
  snprintf(path, sizeof path, "%s/long.csv", dir);
  FILE *f = fopen(path, "w");
  fputs("path,caption\n", f);
  fputs("a.mp4,", f);
  for (int i = 0; i < MANIFEST_MAX_RECORD / 8 + 8; i++) fputs("xxxxxxxx", f);
  fputs("\nb.mp4,ok\n", f);
  fclose(f);
  manifest *m = open_as(path, MANIFEST_TESSERA, NULL);
  expect_error(m, 1, "too long", NULL);
  expect_row(m, 2, 1);
  expect_end(m);
  manifest_close(&m);

  const char *p = write_text("nots.csv", "videoID,url,caption\nx,u,\"['a']\"\n");
  manifest_opts o = {.preset = MANIFEST_PANDA70M};
  CHECK(manifest_open(&m, p, &o) == TSR_EFORMAT && !m, "a missing column fails the open");
  CHECK(strstr(err_msg(), "'timestamp'") && strstr(err_msg(), "'videoID', 'url', 'caption'") &&
        strstr(err_msg(), "nots.csv"), "names the column and those found: %s", err_msg());
  p = write_text("x.txt", "path\n");
  CHECK(manifest_open(&m, p, &o) == TSR_EINVAL && strstr(err_msg(), "csv, tsv or jsonl"),
        "a name that tells no syntax: %s", err_msg());
  o.syntax = MANIFEST_SYNTAX_CSV;
  o.preset = MANIFEST_TESSERA;
  CHECK_OK(manifest_open(&m, p, &o));
  expect_end(m);
  manifest_close(&m);
  p = write_text("empty.csv", "");
  o.syntax = MANIFEST_SYNTAX_AUTO;
  CHECK(manifest_open(&m, p, &o) == TSR_EFORMAT && strstr(err_msg(), "empty"), "empty: %s", err_msg());
}

// ---- filters -----------------------------------------------------------------------------

static void test_filters(void) {
  manifest_filter f = {0};
  char text[512];
  CHECK_OK(manifest_filter_add_where(&f, "motion_score>0.3"));
  CHECK_OK(manifest_filter_add_where(&f, " aesthetic score >= 4.5 "));
  CHECK_OK(manifest_filter_add_where(&f, "aesthetic_score>=4.5"));
  CHECK_OK(manifest_filter_add_where(&f, "fps != 0.1"));
  const char *bad[] = {"aesthetic 4.5", "aesthetic = 4.5", ">= 3", "x >= four", "x >= nan", "x ! 3"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK(manifest_filter_add_where(&f, bad[i]) == TSR_EINVAL && strstr(err_msg(), bad[i]),
          "'%s' refused naming it: %s", bad[i], err_msg());
  f.min_clip_seconds = 2;
  f.max_clip_seconds = 60;
  f.min_resolution = 256;
  CHECK_OK(manifest_filter_format(&f, text, sizeof text));
  const char *want = "where aesthetic_score >= 4.5; where fps != 0.1; where motion_score > 0.3; "
                     "min_clip_seconds 2; max_clip_seconds 60; min_resolution 256";
  CHECK(!strcmp(text, want), "canonical:\n  %s\nwant\n  %s", text, want);
  manifest_filter g;
  char again[512];
  CHECK_OK(manifest_filter_parse(text, &g));
  CHECK_OK(manifest_filter_format(&g, again, sizeof again));
  CHECK(!strcmp(text, again) && g.nwhere == 3, "read back: %s", again);
  CHECK(manifest_filter_parse("where x >= 1; sideways 3", &g) == TSR_EFORMAT && strstr(err_msg(), "sideways"),
        "a foreign clause: %s", err_msg());
  CHECK_OK(manifest_filter_parse("", &g));
  CHECK(g.nwhere == 0 && manifest_filter_format(&g, again, sizeof again) == TSR_OK && !again[0], "empty");
  CHECK(manifest_filter_format(&f, again, 20) == TSR_EINVAL, "too small a buffer is refused");

  manifest_score sc[] = {{"aesthetic_score", 4.5}, {"motion_score", 0.3}, {"fps", 24}};
  manifest_span s = {.has_start = 1, .has_end = 1, .start = 10, .end = 13, .scores = sc, .nscores = 3};
  manifest_filter_result r;
  CHECK(manifest_filter_span(&f, &s, &r) == 1 && !strcmp(r.reason, "where motion_score > 0.3") &&
        !strcmp(r.score, "motion_score") && r.value == 0.3, "motion 0.3 is not > 0.3: %s", r.reason);
  sc[1].value = 0.31;
  CHECK(manifest_filter_span(&f, &s, &r) == 0, "passes: %s", r.reason);
  s.end = 11.5;
  CHECK(manifest_filter_span(&f, &s, &r) == 1 && !strcmp(r.reason, "min_clip_seconds 2") && r.value == 1.5,
        "1.5 s: %s", r.reason);
  s.has_end = 0;
  CHECK(manifest_filter_span(&f, &s, &r) == 0, "an open end is checked at ingest");
  s.nscores = 2;
  CHECK(manifest_filter_span(&f, &s, &r) == 1 && !strcmp(r.reason, "missing score fps"), "%s", r.reason);
  // name/value pairs alone (a stored clip's scores): the same clauses, no length check
  manifest_score pairs[] = {{"fps", 24}, {"motion_score", 0.5}, {"aesthetic_score", 4.5},
                            {"motion_score", 0.1}};
  CHECK(manifest_filter_scores(&f, pairs, 4, &r) == 0, "pairs pass (the first motion_score "
        "counts): %s", r.reason);
  CHECK(manifest_filter_scores(&f, pairs + 1, 3, &r) == 1 && !strcmp(r.reason, "missing score fps") &&
        r.value == 0, "no fps: %s", r.reason);
  CHECK(manifest_filter_scores(&f, pairs + 2, 2, &r) == 1 &&
        !strcmp(r.reason, "where motion_score > 0.3") && r.value == 0.1,
        "the first failing clause in the order added (before fps, which is missing): %s", r.reason);
  CHECK(manifest_filter_scores(&f, NULL, 0, &r) == 1, "no scores fail a where clause");
  manifest_filter none = {0};
  CHECK(manifest_filter_scores(&none, NULL, 0, &r) == 0, "no clause passes anything");
  CHECK(manifest_filter_clip(&f, 61, 0, 0, &r) == 1 && !strcmp(r.reason, "max_clip_seconds 60"), "61 s");
  CHECK(manifest_filter_clip(&f, 30, 1920, 240, &r) == 1 && !strcmp(r.reason, "min_resolution 256") &&
        r.value == 240, "short side 240");
  CHECK(manifest_filter_clip(&f, 0, 256, 1920, &r) == 0, "256 passes, unknown length unchecked");
  manifest_filter h = {.min_clip_seconds = 5, .max_clip_seconds = 2};
  CHECK(manifest_filter_check(&h) == TSR_EINVAL, "max below min");
  char num[32];
  CHECK(!strcmp(manifest_filter_number(num, sizeof num, 0.1), "0.1") &&
        !strcmp(manifest_filter_number(num, sizeof num, 1.0 / 3), "0.3333333333333333"), "shortest: %s", num);
}

int main(void) {
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(dir, sizeof dir, "%s/tessera-manifest.XXXXXX", tmp);
  char made[sizeof dir];
  if (!mkdtemp(dir) || !realpath(dir, made)) return perror("mkdtemp"), 1;
  snprintf(dir, sizeof dir, "%s", made);  // as the reader resolves the manifest's folder
  test_panda();
  test_openvid();
  test_opensora();
  test_tessera();
  test_bad_rows();
  test_long_and_missing();
  test_filters();
  scratch_remove(dir);
  return check_done();
}
