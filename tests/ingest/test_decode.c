// Decoder against the ffmpeg CLI: output frame counts against ffprobe's timestamps, output
// geometry against the closed form (SAR, rotation, short side, crop), and pixels against
// the ffmpeg CLI's own fps+scale+crop output of the same source (PSNR).
//
// References: ffprobe's frame timestamps give the expected count
//   round((last_ts + last_duration - first_ts) * fps)   (decode.h's rule, the fps filter's)
// and `ffmpeg -vf fps,scale,crop -pix_fmt rgb24` (which applies the display rotation itself)
// gives reference pixels. Tolerances: count within 1 frame (the bound; timestamps
// rounding at exact halves may differ), PSNR >= 30 dB (bicubic resampling done in a
// different order: ffmpeg rotates before scaling, tessera after).
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"
#include "ingest/decode.h"

static char tmpdir[256];

// Expected output frames from ffprobe's timestamps.
static int64_t ffprobe_expected(const char *path, int fps) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "ffprobe -v error -select_streams v:0 -show_entries "
           "frame=best_effort_timestamp_time,pkt_duration_time -of csv=p=0 '%s'",
           path);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  char line[256];
  double first = NAN, last = NAN, dur = 0;
  while (fgets(line, sizeof line, p)) {
    double ts, du = 0;
    int n = sscanf(line, "%lf,%lf", &ts, &du);
    if (n < 1) continue;
    if (isnan(first)) first = ts;
    if (isnan(last) || ts >= last) {
      last = ts;
      dur = n == 2 ? du : 0;
    }
  }
  pclose(p);
  if (isnan(first)) return -1;
  return llround((last + dur - first) * fps);
}

typedef struct {
  int64_t frames;
  int w, h;
  decode_info info;
  decode_stats stats;
  uint8_t *rgb;  // all frames (frames, h, w, 3)
} decoded;

static tsr_status decode_all(const char *path, int fps, int short_side, decoded *out) {
  decode_opts o = {.fps_num = fps, .fps_den = 1, .short_side = short_side, .mult_h = 16,
                   .mult_w = 16, .threads = 2, .max_pixels = 1LL << 26};
  decode_ctx *d = NULL;
  memset(out, 0, sizeof *out);
  tsr_status st = decode_open(&d, path, &o, &out->info);
  if (st) return st;
  out->w = out->info.out_w;
  out->h = out->info.out_h;
  size_t fb = (size_t)out->w * out->h * 3, cap = 0;
  for (;;) {
    if ((size_t)out->frames + 1 > cap) {
      cap = cap ? 2 * cap : 64;
      out->rgb = realloc(out->rgb, cap * fb);
    }
    int got = 0;
    st = decode_next(d, out->rgb + fb * out->frames, &got);
    if (st || !got) break;
    out->frames++;
  }
  decode_get_stats(d, &out->stats);
  decode_free(&d);
  return st;
}

// PSNR of our frames against the ffmpeg CLI's fps+scale+crop rendering of the source.
static double psnr_vs_ffmpeg(const char *path, int fps, const decoded *dd, int64_t *ref_frames) {
  // display size before crop, as decode.c computes it
  double dw = dd->info.src_w * (double)dd->info.sar_num / dd->info.sar_den, dh = dd->info.src_h;
  if (dd->info.rotation == 90 || dd->info.rotation == 270) {
    double t = dw;
    dw = dh;
    dh = t;
  }
  int sw, shh;
  if (dw <= dh) {
    sw = 128;
    shh = (int)lround(dh * 128 / dw);
  } else {
    shh = 128;
    sw = (int)lround(dw * 128 / dh);
  }
  // The crop offsets are given explicitly: ffmpeg's crop rounds (in-out)/2 to even
  // (5.5 -> 6) where tessera floors it; both are centre crops.
  char raw[512];
  snprintf(raw, sizeof raw, "%s/ref.rgb", tmpdir);
  if (sh("ffmpeg -v error -y -i '%s' -map 0:v:0 -vf 'fps=%d,scale=%d:%d:flags=bicubic,"
         "format=rgb24,crop=%d:%d:%d:%d' -pix_fmt rgb24 -f rawvideo '%s'",
         path, fps, sw, shh, dd->w, dd->h, (sw - dd->w) / 2, (shh - dd->h) / 2, raw))
    return -1;
  FILE *f = fopen(raw, "rb");
  if (!f) return -1;
  size_t fb = (size_t)dd->w * dd->h * 3;
  uint8_t *ref = malloc(fb);
  double se = 0;
  int64_t n = 0, cnt = 0;
  while (fread(ref, 1, fb, f) == fb) {
    if (n < dd->frames) {
      const uint8_t *ours = dd->rgb + fb * n;
      for (size_t i = 0; i < fb; i++) {
        double e = (double)ours[i] - ref[i];
        se += e * e;
      }
      cnt += (int64_t)fb;
    }
    n++;
  }
  fclose(f);
  free(ref);
  *ref_frames = n;
  if (!cnt) return -1;
  double mse = se / cnt;
  return mse > 0 ? 10 * log10(255.0 * 255.0 / mse) : 99;
}

typedef struct {
  const char *name;
  int expect_rotation;
  int expect_w, expect_h;  // 0: not checked
  int check_pixels;
} case_t;

static void check_source(const char *path, const case_t *c) {
  decoded dd;
  tsr_status st = decode_all(path, 8, 128, &dd);
  CHECK(st == TSR_OK, "%s: %s", c->name, err_msg());
  if (st) return;
  int64_t expect = ffprobe_expected(path, 8);
  CHECK(expect > 0 && llabs(dd.frames - expect) <= 1, "%s: %lld frames at 8 fps, ffprobe says %lld",
        c->name, (long long)dd.frames, (long long)expect);
  CHECK(dd.info.rotation == c->expect_rotation, "%s: rotation %d, expected %d", c->name,
        dd.info.rotation, c->expect_rotation);
  if (c->expect_w)
    CHECK(dd.w == c->expect_w && dd.h == c->expect_h, "%s: out %dx%d, expected %dx%d", c->name,
          dd.w, dd.h, c->expect_w, c->expect_h);
  if (c->check_pixels) {
    int64_t ref_frames = 0;
    double psnr = psnr_vs_ffmpeg(path, 8, &dd, &ref_frames);
    printf("%-44s frames %4lld (ffprobe %4lld, ffmpeg fps %4lld) out %dx%d rot %3d  PSNR %.1f dB\n",
           c->name, (long long)dd.frames, (long long)expect, (long long)ref_frames, dd.w, dd.h,
           dd.info.rotation, psnr);
    CHECK(psnr >= 30, "%s: PSNR %.1f dB vs the ffmpeg CLI, want >= 30", c->name, psnr);
    CHECK(llabs(ref_frames - dd.frames) <= 1, "%s: %lld frames vs ffmpeg fps filter %lld", c->name,
          (long long)dd.frames, (long long)ref_frames);
  }
  free(dd.rgb);
}

int main(void) {
  const char *shared = check_shared("videos");
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessera-test-decode-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  char p[1024];

  // Generated: 3 s at 24 fps -> exactly 24 frames at 8 fps; 4:2:2 10-bit and 4:4:4.
  struct { const char *name, *args; int w, h; } gen[] = {
      {"cfr24.mp4", "-f lavfi -i testsrc2=s=320x240:r=24:d=3 -pix_fmt yuv420p", 160, 128},
      {"p10_422.mkv", "-f lavfi -i testsrc2=s=320x180:r=25:d=2 -c:v libx264 -pix_fmt yuv422p10le", 224, 128},
      {"p444.mkv", "-f lavfi -i testsrc2=s=180x320:r=30:d=2 -c:v libx264 -pix_fmt yuv444p", 128, 224},
      // smooth content: rotation is applied after scaling here and before it in the ffmpeg
      // CLI, which changes resampling of hard synthetic edges by a few dB
      {"smooth.mp4", "-f lavfi -i testsrc2=s=320x240:r=24:d=2,boxblur=2 -pix_fmt yuv420p", 160, 128},
      {"rot.mp4", "-i %s/smooth.mp4 -c copy -metadata:s:v:0 rotate=90", 128, 160},
      {"start5.mp4", "-f lavfi -i testsrc2=s=320x240:r=24:d=2 -pix_fmt yuv420p -output_ts_offset 5", 160, 128},
  };
  for (size_t i = 0; i < sizeof gen / sizeof gen[0]; i++) {
    snprintf(p, sizeof p, "%s/%s", tmpdir, gen[i].name);
    char args[1024];
    snprintf(args, sizeof args, gen[i].args, tmpdir);  // rot.mp4 remuxes smooth.mp4
    if (sh("ffmpeg -v error -y %s '%s'", args, p)) {
      CHECK(0, "could not generate %s", gen[i].name);
      continue;
    }
    // The legacy `rotate=90` tag is stored as a display matrix of 90 degrees counter-
    // clockwise, so the picture is turned 270 degrees clockwise (the ffmpeg CLI agrees:
    // the pixel comparison below uses its autorotation).
    case_t c = {gen[i].name, strstr(gen[i].args, "rotate=90") ? 270 : 0, gen[i].w, gen[i].h, 1};
    check_source(p, &c);
  }
  // Variable frame rate: 1 s at 10 fps then 1 s at 30 fps (concat), 2 s -> 16 frames.
  snprintf(p, sizeof p, "%s/vfr.mkv", tmpdir);
  if (!sh("ffmpeg -v error -y -f lavfi -i testsrc2=s=160x120:r=10:d=1 -f lavfi -i "
          "testsrc2=s=160x120:r=30:d=1 -filter_complex '[0:v][1:v]concat=n=2:v=1[v]' -map '[v]' "
          "-fps_mode vfr '%s'", p)) {
    decoded dd;
    CHECK_OK(decode_all(p, 8, 128, &dd));
    CHECK(dd.frames == 16, "vfr: %lld frames, expected 16", (long long)dd.frames);
    free(dd.rgb);
  }

  // Real clips (../shared/videos, SOURCES.md): rotation, SAR, VFR, start offsets, 10-bit.
  if (shared) {
    case_t real[] = {
        {"testvideo.mp4", 0, 224, 128, 1},
        {"issue-134-rotate.mp4", 90, 128, 288, 1},  // 1280x544 rotated: 544x1280 -> 128x301 -> crop 128x288
        {"issue-195-aspect-ratio.mp4", 0, 224, 128, 1},  // 704x576 SAR 16:11 -> 1024x576
        {"mmaction2__demo.mp4", 0, 208, 128, 1},  // 340x256 SAR 64:51 -> 426.7x256 -> 213x128
        {"goldeneye-vfr-drop3.mp4", 0, 288, 128, 1},
        {"delayed_start.mp4", 0, 192, 128, 1},
        {"androidx-media__roadtrip-vp92-10bit.webm", 0, 224, 128, 1},
        {"androidx-media__bear-vp9-odd-dimensions.webm", 0, 160, 128, 1},
        {"decord__flipping_a_pancake.mkv", 0, 224, 128, 1},
        {"issue-236-split-copy.mkv", 0, 224, 128, 0},
    };
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
      snprintf(p, sizeof p, "%s/videos/%s", shared, real[i].name);
      check_source(p, &real[i]);
    }
    // Broken files. jcodec__test.mkv is cut at 100 KiB: ffprobe decodes 1 frame of the
    // 46.7 s it claims, so the decoder must decode that one frame and flag truncation.
    snprintf(p, sizeof p, "%s/videos/jcodec__test.mkv", shared);
    decoded dd;
    tsr_status st = decode_all(p, 8, 128, &dd);
    CHECK(st == TSR_OK && dd.stats.decoded_frames == 1 && dd.stats.truncated,
          "truncated file: status %d, %lld decoded, truncated=%d (%s)", st,
          (long long)dd.stats.decoded_frames, dd.stats.truncated, dd.stats.note);
    free(dd.rgb);
    snprintf(p, sizeof p, "%s/videos/decord__corrupted.mp4", shared);
    st = decode_all(p, 8, 128, &dd);
    printf("decord__corrupted.mp4: status %d, %lld frames, %lld corrupt, note: %s %s\n", st,
           (long long)dd.frames, (long long)dd.stats.corrupt_packets, dd.stats.note,
           st ? err_msg() : "");
    CHECK(st != TSR_OK || dd.stats.corrupt_packets > 0 || dd.stats.truncated,
          "corrupt file must be reported as damaged");
    free(dd.rgb);
  }

  // Mid-stream resolution change with restarted timestamps: two MPEG-TS segments of 1 s
  // (320x240 then 160x120, each starting at the same time stamp) concatenated. Expect
  // 16 frames of one output size; the second half shows the second segment, compared
  // with the ffmpeg CLI's rendering of that segment alone.
  {
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/seg_a.ts", tmpdir);
    snprintf(b, sizeof b, "%s/seg_b.ts", tmpdir);
    snprintf(p, sizeof p, "%s/mixed.ts", tmpdir);
    if (!sh("ffmpeg -v error -y -f lavfi -i testsrc2=s=320x240:r=24:d=1 -c:v libx264 '%s' && "
            "ffmpeg -v error -y -f lavfi -i mandelbrot=s=160x120:r=24 -t 1 -c:v libx264 '%s' && "
            "cat '%s' '%s' > '%s'", a, b, a, b, p)) {
      decoded dd;
      CHECK_OK(decode_all(p, 8, 128, &dd));
      CHECK(dd.frames == 16 && dd.w == 160 && dd.h == 128, "mixed.ts: %lld frames of %dx%d, want 16 of 160x128",
            (long long)dd.frames, dd.w, dd.h);
      if (dd.frames == 16) {
        decoded tail = dd;
        tail.rgb = dd.rgb + (size_t)8 * dd.w * dd.h * 3;
        tail.frames = 8;
        int64_t ref_frames = 0;
        double psnr = psnr_vs_ffmpeg(b, 8, &tail, &ref_frames);
        printf("mixed.ts second segment: PSNR %.1f dB vs the ffmpeg CLI on that segment alone\n", psnr);
        CHECK(psnr >= 30, "mixed.ts: second segment PSNR %.1f dB", psnr);
      }
      free(dd.rgb);
    }
  }

  // A 6 s Matroska file cut in half keeps a decodable prefix and is flagged truncated.
  snprintf(p, sizeof p, "%s/full.mkv", tmpdir);
  if (!sh("ffmpeg -v error -y -f lavfi -i testsrc2=s=160x120:r=24:d=6 -g 12 '%s' && "
          "head -c $(( $(stat -c %%s '%s') / 2 )) '%s' > '%s/half.mkv'", p, p, p, tmpdir)) {
    snprintf(p, sizeof p, "%s/half.mkv", tmpdir);
    decoded dd;
    CHECK_OK(decode_all(p, 8, 128, &dd));
    CHECK(dd.frames >= 8 && dd.frames < 40 && dd.stats.truncated,
          "half file: %lld frames of 48, truncated=%d (%s)", (long long)dd.frames,
          dd.stats.truncated, dd.stats.note);
    free(dd.rgb);
  }

  // Not media at all / no video stream / empty: clear errors naming the file.
  snprintf(p, sizeof p, "%s/text.mp4", tmpdir);
  sh("echo 'not a video' > '%s'", p);
  decoded dd;
  CHECK(decode_all(p, 8, 128, &dd) == TSR_EDECODE && strstr(err_msg(), "text.mp4"),
        "text file: %s", err_msg());
  snprintf(p, sizeof p, "%s/empty.mp4", tmpdir);
  sh(": > '%s'", p);
  CHECK(decode_all(p, 8, 128, &dd) == TSR_EDECODE && strstr(err_msg(), "empty.mp4"),
        "empty file: %s", err_msg());
  snprintf(p, sizeof p, "%s/audio.m4a", tmpdir);
  sh("ffmpeg -v error -y -f lavfi -i sine=d=1 '%s'", p);
  CHECK(decode_all(p, 8, 128, &dd) == TSR_EDECODE && strstr(err_msg(), "no video stream"),
        "audio-only: %s", err_msg());

  sh("rm -rf '%s'", tmpdir);
  return check_done();
}
