// Scene cuts on real clips joined end to end (../shared/videos): the ffmpeg CLI cuts six
// stretches without a cut of their own out of real sources, each at 25 fps and 320x180
// (fps, scale, then trim by frame count, so each has exactly its frames), and joins them
// with the concat filter; the true cuts are the joins. The file is decoded with
// ingest/decode.h and every frame fed to the detector (default threshold 27 and minimum
// shot 15 frames), at the source rate (25 fps) and at ingest's default 8 fps: one cut
// within one frame of each join, none anywhere else.
//
// The stretches (SOURCES.md; their own cuts found by PySceneDetect 0.7.2's ContentDetector
// and by eye): the pancake clip's first 4 s (one hand-held shot; a hand covers the lens
// near its end), mmaction2's AVI (one shot), testvideo.mp4 from 1.5 s (its cuts: 1.0, 6.0,
// 13.1 s), fades.mp4's first 4 s (fades between greys, no cut), goldeneye from 4.5 s (cuts
// at 3.75 and 8.76 s) and issue-195 from 7.5 s (cuts at 6.8 and 12.04 s).
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ingest/decode.h"
#include "ingest/scene_cut.h"

typedef struct {
  const char *file;
  double from;  // seconds into the source
  int frames;   // at 25 fps
} stretch;

static const stretch parts[] = {
    {"decord__flipping_a_pancake.mkv", 0, 100}, {"mmaction2__test.avi", 0, 100},
    {"testvideo.mp4", 1.5, 100},                 {"fades.mp4", 0, 100},
    {"goldeneye-vfr-drop3.mp4", 4.5, 80},        {"issue-195-aspect-ratio.mp4", 7.5, 100},
};
#define NPARTS ((int)(sizeof parts / sizeof parts[0]))

// The joined file; 0 if the CLI failed.
static int make_joined(const char *videos, const char *out) {
  char cmd[8192], *p = cmd, *end = cmd + sizeof cmd;
  p += snprintf(p, (size_t)(end - p), "ffmpeg -nostdin -v error -y");
  for (int i = 0; i < NPARTS; i++)
    p += snprintf(p, (size_t)(end - p), " -i '%s/%s'", videos, parts[i].file);
  p += snprintf(p, (size_t)(end - p), " -filter_complex '");
  for (int i = 0; i < NPARTS; i++)
    p += snprintf(p, (size_t)(end - p),
                  "[%d:v]trim=start=%g,setpts=PTS-STARTPTS,fps=25,scale=320:180:flags=bicubic,"
                  "setsar=1,format=yuv420p,trim=end_frame=%d,setpts=PTS-STARTPTS[s%d];",
                  i, parts[i].from, parts[i].frames, i);
  for (int i = 0; i < NPARTS; i++) p += snprintf(p, (size_t)(end - p), "[s%d]", i);
  p += snprintf(p, (size_t)(end - p),
                "concat=n=%d:v=1:a=0[v]' -map '[v]' -c:v libx264 -preset veryfast -crf 18 "
                "-g 50 '%s'", NPARTS, out);
  int rc = system(cmd);
  if (rc) fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
  return rc == 0;
}

// Decodes `path` at `fps` and feeds every frame to a default detector; checks the cuts.
static void check_rate(const char *path, int fps) {
  decode_opts o = {.fps_num = fps, .fps_den = 1, .short_side = 180, .mult_h = 2,
                   .mult_w = 2, .threads = 2, .max_pixels = 1LL << 26};
  decode_ctx *d = NULL;
  decode_info info;
  scene_cut *sc = NULL;
  scene_cut_opts so = {0};
  CHECK_OK(decode_open(&d, path, &o, &info));
  if (!d) return;
  CHECK_OK(scene_cut_new(&sc, &so, info.out_w, info.out_h));
  uint8_t *rgb = malloc((size_t)info.out_w * info.out_h * 3);
  int64_t n = 0;
  for (int got = 1;; n++) {
    if (decode_next(d, rgb, &got) || !got) break;
    int cut;
    CHECK_OK(scene_cut_feed(sc, rgb, (double)n / fps, &cut));
  }
  int64_t nc = 0;
  const double *t = scene_cut_times(sc, &nc);
  printf("%2d fps, %lld frames of %dx%d: cuts at", fps, (long long)n, info.out_w, info.out_h);
  for (int64_t i = 0; i < nc; i++) printf(" %.3f", t[i]);
  printf(" s; joins at");
  double join = 0;
  int found = 0;
  for (int i = 0; i + 1 < NPARTS; i++) {
    join += parts[i].frames / 25.0;
    printf(" %.3f", join);
    for (int64_t k = 0; k < nc; k++) found += fabs(t[k] - join) <= 1.0 / fps + 1e-9;
  }
  printf(" s\n");
  CHECK(found == NPARTS - 1 && nc == NPARTS - 1,
        "%d fps: %lld cuts, %d of the %d joins found within one frame", fps, (long long)nc,
        found, NPARTS - 1);
  free(rgb);
  scene_cut_free(&sc);
  decode_free(&d);
}

int main(void) {
  const char *shared = check_shared("videos");
  if (!shared) return check_done();
  char tmpdir[] = "/tmp/tessera-test-scenes-XXXXXX", videos[1024], joined[512];
  if (!mkdtemp(tmpdir)) return 1;
  snprintf(videos, sizeof videos, "%s/videos", shared);
  snprintf(joined, sizeof joined, "%s/joined.mp4", tmpdir);
  CHECK(make_joined(videos, joined), "the ffmpeg CLI could not join the clips");
  check_rate(joined, 25);
  check_rate(joined, 8);
  unlink(joined);
  rmdir(tmpdir);
  return check_done();
}
