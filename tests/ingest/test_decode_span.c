// Spans of real clips (../shared/videos) against the ffmpeg CLI's output-side trimming:
//   ffmpeg -i SRC -ss S -to E -map 0:v:0 -fps_mode passthrough
//          -vf fps=8,scale=W:H:flags=bicubic,format=rgb24,crop=w:h:x:y -f rawvideo
// (the scale and crop of tests/ingest/test_decode.c). For every span of every file the
// frame count must be equal and the first and last frames must match (PSNR >= 30 dB: the
// scaler's order differs for rotated sources, as in test_decode). Spans per file: one
// from 0, one in the middle off the grid and off key frames, one whose start * fps is a
// half-integer (the rule's odd case), one to the end (no -to), one past the end (cut and
// flagged), one overlapping an earlier one (a seek back), and one after the end (an error
// naming source and span). All spans of a file come from one open, in one pass: the
// source frames decoded for the spans in order are at most those of the whole file.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"
#include "ingest/decode.h"
#include "ingest/decode_span.h"

#define FPS 8
#define MAX_SPANS 8

static char tmpdir[256];

// Frames one span delivered, all kept (spans here are short).
typedef struct {
  uint8_t *rgb;
  int64_t frames, cap;
} span_frames;

typedef struct {
  size_t frame_bytes;
  span_frames s[MAX_SPANS];
  int bad_order;  // a frame index that did not follow the previous one
} collect;

static tsr_status keep_frame(void *arg, int span, int64_t frame, const uint8_t *rgb) {
  collect *c = arg;
  span_frames *f = &c->s[span];
  if (frame != f->frames) c->bad_order = 1;
  if (f->frames == f->cap) {
    f->cap = f->cap ? 2 * f->cap : 16;
    uint8_t *p = realloc(f->rgb, (size_t)f->cap * c->frame_bytes);
    if (!p) return err_set(TSR_ENOMEM, "test: out of memory");
    f->rgb = p;
  }
  memcpy(f->rgb + (size_t)f->frames * c->frame_bytes, rgb, c->frame_bytes);
  f->frames++;
  return TSR_OK;
}

static double psnr(const uint8_t *a, const uint8_t *b, size_t n) {
  double se = 0;
  for (size_t i = 0; i < n; i++) {
    double e = (double)a[i] - b[i];
    se += e * e;
  }
  return se > 0 ? 10 * log10(255.0 * 255.0 / (se / n)) : 99;
}

// The CLI's frames of span sp, scaled and cropped like the decoder's (info); *n frames.
static uint8_t *cli_span(const char *path, const decode_info *info, const decode_span *sp,
                         int64_t *n) {
  double dw = info->src_w * (double)info->sar_num / info->sar_den, dh = info->src_h;
  if (info->rotation == 90 || info->rotation == 270) {
    double t = dw;
    dw = dh;
    dh = t;
  }
  int sw = 128, shh = 128;
  if (dw <= dh) shh = (int)lround(dh * 128 / dw);
  else sw = (int)lround(dw * 128 / dh);
  char to[64] = "", raw[512];
  if (sp->end_s != DECODE_SPAN_TO_END) snprintf(to, sizeof to, "-to %.6f", sp->end_s);
  snprintf(raw, sizeof raw, "%s/span.rgb", tmpdir);
  *n = -1;
  if (sh("ffmpeg -nostdin -v error -y -i '%s' -ss %.6f %s -map 0:v:0 -fps_mode passthrough "
         "-vf 'fps=%d,scale=%d:%d:flags=bicubic,format=rgb24,crop=%d:%d:%d:%d' "
         "-f rawvideo '%s'", path, sp->start_s, to, FPS, sw, shh, info->out_w, info->out_h,
         (sw - info->out_w) / 2, (shh - info->out_h) / 2, raw))
    return NULL;
  FILE *f = fopen(raw, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  const size_t fb = (size_t)info->out_w * info->out_h * 3;
  uint8_t *buf = malloc(bytes > 0 ? (size_t)bytes : 1);
  if (buf && fread(buf, 1, (size_t)bytes, f) == (size_t)bytes) *n = (int64_t)((size_t)bytes / fb);
  fclose(f);
  return buf;
}

static decode_ctx *open_source(const char *path, decode_info *info) {
  decode_opts o = {.fps_num = FPS, .fps_den = 1, .short_side = 128, .mult_h = 16, .mult_w = 16,
                   .threads = 2, .max_pixels = 1LL << 26};
  decode_ctx *d = NULL;
  tsr_status st = decode_open(&d, path, &o, info);
  CHECK(st == TSR_OK, "%s: %s", path, err_msg());
  return d;
}

// Source frames the decoder reads for the whole file.
static int64_t whole_file_decoded(const char *path) {
  decode_info info;
  decode_ctx *d = open_source(path, &info);
  if (!d) return -1;
  uint8_t *rgb = malloc((size_t)info.out_w * info.out_h * 3);
  for (int got = 1; got;)
    if (decode_next(d, rgb, &got)) break;
  decode_stats s;
  decode_get_stats(d, &s);
  decode_free(&d);
  free(rgb);
  return s.decoded_frames;
}

// Span k of a pass against the CLI: count, first and last frame.
static void compare_span(const char *name, const char *path, const decode_info *info,
                         const decode_span *sp, int k, const span_frames *got,
                         const decode_span_result *r) {
  int64_t n = 0;
  uint8_t *ref = cli_span(path, info, sp, &n);
  const size_t fb = (size_t)info->out_w * info->out_h * 3;
  double p0 = 99, p1 = 99;
  if (ref && n == got->frames && n > 0) {
    p0 = psnr(got->rgb, ref, fb);
    p1 = psnr(got->rgb + (n - 1) * fb, ref + (n - 1) * fb, fb);
  }
  printf("%-40s span %d [%8.4f, %8.4f): %3lld frames (CLI %3lld) from grid %4lld%s%s, "
         "decoded %4lld, PSNR first %.1f last %.1f dB\n", name, k, sp->start_s, sp->end_s,
         (long long)got->frames, (long long)n, (long long)r->first_index,
         r->cut_at_end ? ", cut at end" : "", r->seeked ? ", seeked" : "",
         (long long)r->decoded_frames, p0, p1);
  CHECK(n == got->frames, "%s span %d: %lld frames, the CLI %lld", name, k,
        (long long)got->frames, (long long)n);
  CHECK(r->frames == got->frames, "%s span %d: result says %lld frames", name, k,
        (long long)r->frames);
  CHECK(p0 >= 30 && p1 >= 30, "%s span %d: PSNR first %.1f last %.1f dB", name, k, p0, p1);
  free(ref);
}

static void free_frames(collect *c) {
  for (int i = 0; i < MAX_SPANS; i++) free(c->s[i].rgb);
  memset(c, 0, sizeof *c);
}

// Pass A: spans in order, none overlapping; one starts after the end. Pass B: a span to
// the end and one overlapping it (a seek back).
static void check_file(const char *name, const char *path) {
  decode_info info;
  decode_ctx *d = open_source(path, &info);
  if (!d) return;
  // Lengths shrink with the file, so that pass A never overlaps (the shortest has 2 s).
  const double dur = info.duration_s, len = fmin(1.3, dur * 0.15);
  const double mid = floor(dur * 0.3 * FPS) / FPS + 0.0437;
  const double half = (floor(dur * 0.55 * FPS) + 0.5) / FPS;
  const decode_span a[] = {
      {0, fmin(1.0, dur * 0.2)}, {mid, mid + len}, {half, half + len},
      {dur * 0.8, dur + 2.0},    {dur + 1.0, dur + 2.0},
  };
  const int na = sizeof a / sizeof a[0];
  collect c = {.frame_bytes = (size_t)info.out_w * info.out_h * 3};
  decode_span_result ra[MAX_SPANS];
  CHECK_OK(decode_spans(d, a, na, keep_frame, &c, ra));
  decode_stats st;
  decode_get_stats(d, &st);
  decode_free(&d);
  CHECK(!c.bad_order, "%s: frames out of order within a span", name);
  for (int k = 0; k < na - 1; k++) {
    compare_span(name, path, &info, &a[k], k, &c.s[k], &ra[k]);
    CHECK(ra[k].status == TSR_OK, "%s span %d: %s", name, k, ra[k].error);
  }
  CHECK(ra[3].cut_at_end && ra[3].end_s < dur + 0.2 && !ra[2].cut_at_end && !ra[0].cut_at_end,
        "%s: span past the end flagged %d, ends at %.3f (video %.3f)", name, ra[3].cut_at_end,
        ra[3].end_s, dur);
  CHECK(ra[4].status == TSR_EINVAL && strstr(ra[4].error, name) &&
            strstr(ra[4].error, "span 4") && c.s[4].frames == 0,
        "%s: span after the end: status %d, '%s'", name, ra[4].status, ra[4].error);
  printf("%-40s span 4: %s\n", name, ra[4].error);
  const int64_t whole = whole_file_decoded(path);
  printf("%-40s pass A: %lld source frames decoded, %lld seeks; whole file %lld\n", name,
         (long long)st.decoded_frames, (long long)st.seeks, (long long)whole);
  CHECK(st.decoded_frames <= whole, "%s: spans in order decoded %lld frames, the file has %lld",
        name, (long long)st.decoded_frames, (long long)whole);
  free_frames(&c);

  if (!(d = open_source(path, &info))) return;
  const decode_span b[] = {{dur * 0.25, DECODE_SPAN_TO_END}, {half, half + len}};
  c.frame_bytes = (size_t)info.out_w * info.out_h * 3;
  CHECK_OK(decode_spans(d, b, 2, keep_frame, &c, ra));
  decode_free(&d);
  for (int k = 0; k < 2; k++) compare_span(name, path, &info, &b[k], k, &c.s[k], &ra[k]);
  CHECK(!ra[0].cut_at_end && ra[1].seeked, "%s: to-end span flagged %d, overlap seeked %d",
        name, ra[0].cut_at_end, ra[1].seeked);
  free_frames(&c);
}

int main(void) {
  const char *shared = check_shared("videos");
  if (!shared) return check_done();
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessera-test-span-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  // Constant and variable rates, a late video stream, a negative container start, no
  // stream duration, non-square pixels, rotation, packed B-frames in AVI, VP9 10-bit, Theora.
  // The short file of each kind (a constant 10 fps: 3 s; non-square pixels: 10 s at 340x256,
  // 4 key frames): every span decodes the file up to its end through the CLI, so the 24 and
  // 25 s files of test_decode.c would take most of the test's time for no other case.
  const char *files[] = {
      "counter.mp4", "goldeneye-vfr-drop3.mp4", "delayed_start.mp4",
      "decord__flipping_a_pancake.mkv", "issue-236-split-copy.mkv",
      "mmaction2__demo.mp4", "issue-134-rotate.mp4", "mmaction2__test.avi",
      "androidx-media__roadtrip-vp92-10bit.webm",
      "TimedMediaHandler__test5seconds.electricsheep.300x400.ogv",
  };
  char p[1024];
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(p, sizeof p, "%s/videos/%s", shared, files[i]);
    check_file(files[i], p);
  }
  sh("rm -rf '%s'", tmpdir);
  return check_done();
}
