// Scene-cut detector (ingest/scene_cut.h) on synthetic frames, against closed forms: a cut
// between two flat colours is found at the exact frame with the score the HSV formulas
// give; slow fades (black to white, one colour to another) never cut; cuts closer than
// the minimum shot length are suppressed and farther ones kept; a score equal to the
// threshold cuts; frames wider than max_width are shrunk without changing flat scores;
// invalid options are refused.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ingest/scene_cut.h"

#define W 96
#define H 64

static void fill(uint8_t *rgb, int w, int h, int r, int g, int b) {
  for (int i = 0; i < w * h; i++) {
    rgb[3 * i] = (uint8_t)r;
    rgb[3 * i + 1] = (uint8_t)g;
    rgb[3 * i + 2] = (uint8_t)b;
  }
}

// Feeds n frames of colour (r, g, b); returns the number of cuts made.
static int feed_flat(scene_cut *sc, uint8_t *rgb, int w, int h, int n, int r, int g, int b,
                     int64_t *frame) {
  int cuts = 0;
  fill(rgb, w, h, r, g, b);
  for (int i = 0; i < n; i++) {
    int cut = 0;
    CHECK_OK(scene_cut_feed(sc, rgb, (double)(*frame)++ / 8, &cut));
    cuts += cut;
  }
  return cuts;
}

// Red (200, 40, 40) is H 0, S 204, V 200; blue (40, 60, 200) is H round(120 - 30 * 20 / 160)
// = 116, S 204, V 200: the score of the change is (116 + 0 + 0) / 3.
static void two_colours(int w, int h) {
  scene_cut *sc = NULL;
  scene_cut_opts o = {0};
  CHECK_OK(scene_cut_new(&sc, &o, w, h));
  uint8_t *rgb = malloc((size_t)w * h * 3);
  int64_t f = 0;
  int cuts = feed_flat(sc, rgb, w, h, 20, 200, 40, 40, &f);
  int cut = 0;
  fill(rgb, w, h, 40, 60, 200);
  CHECK_OK(scene_cut_feed(sc, rgb, 20 / 8.0, &cut));
  CHECK(cut == 1 && cuts == 0, "%dx%d: cut %d at frame 20, %d before", w, h, cut, cuts);
  CHECK_NEAR(scene_cut_score(sc), 116.0 / 3, 1e-9);
  cuts = feed_flat(sc, rgb, w, h, 19, 40, 60, 200, &f);
  CHECK(cuts == 0 && scene_cut_score(sc) == 0, "%dx%d: %d cuts in a flat shot", w, h, cuts);
  int64_t n = 0;
  const double *t = scene_cut_times(sc, &n);
  const int64_t *at = scene_cut_frames(sc, &n);
  CHECK(n == 1 && at[0] == 20 && t[0] == 2.5, "%dx%d: %lld cuts, first at frame %lld", w, h,
        (long long)n, n ? (long long)at[0] : -1LL);
  free(rgb);
  scene_cut_free(&sc);
}

// Black to white over 60 frames (V moves 255 / 60 per frame, H and S stay 0), then green
// to blue over 60 frames (H 60 to 116 through cyan, not across red, where H wraps from 179
// to 0 and a fade would score as a cut): nothing scores near the threshold.
static void fades(void) {
  scene_cut *sc = NULL;
  scene_cut_opts o = {0};
  CHECK_OK(scene_cut_new(&sc, &o, W, H));
  uint8_t *rgb = malloc((size_t)W * H * 3);
  double worst = 0;
  int cuts = 0;
  for (int i = 0; i <= 120; i++) {
    int v = i <= 60 ? 255 * i / 60 : 255;
    int r = v, g = v, b = v;
    if (i > 60) {  // a colour fade: green to blue, each channel linearly
      const int k = i - 60;
      r = 40;
      g = 200 + (60 - 200) * k / 60;
      b = 40 + (200 - 40) * k / 60;
    }
    fill(rgb, W, H, r, g, b);
    int cut = 0;
    CHECK_OK(scene_cut_feed(sc, rgb, i / 8.0, &cut));
    cuts += cut;
    if (i != 61 && scene_cut_score(sc) > worst) worst = scene_cut_score(sc);
  }
  printf("fades: worst score %.2f, %d cuts\n", worst, cuts);
  CHECK(cuts == 1 && worst < 10, "fades: %d cuts (only white to green is one), worst %.2f",
        cuts, worst);
  free(rgb);
  scene_cut_free(&sc);
}

// Flat shots with the minimum at 15: a change 10 frames after the start is suppressed (and
// does not count as a cut for the next), one at frame 26 is made, one exactly 15 frames
// later too, and one 14 frames after that is suppressed again.
static void min_shot(void) {
  scene_cut *sc = NULL;
  scene_cut_opts o = {.min_shot_frames = 15};
  CHECK_OK(scene_cut_new(&sc, &o, W, H));
  uint8_t *rgb = malloc((size_t)W * H * 3);
  int64_t f = 0;
  int cuts = feed_flat(sc, rgb, W, H, 10, 200, 40, 40, &f);   // frames 0-9
  cuts += feed_flat(sc, rgb, W, H, 16, 40, 60, 200, &f);      // 10: too early
  cuts += feed_flat(sc, rgb, W, H, 15, 200, 40, 40, &f);      // 26: cut
  cuts += feed_flat(sc, rgb, W, H, 15, 40, 60, 200, &f);      // 41: exactly 15 after: cut
  cuts += feed_flat(sc, rgb, W, H, 14, 200, 40, 40, &f);      // 56: cut
  cuts += feed_flat(sc, rgb, W, H, 1, 40, 60, 200, &f);       // 70: 14 after: suppressed
  int64_t n = 0;
  const int64_t *at = scene_cut_frames(sc, &n);
  CHECK(cuts == 3 && n == 3 && at[0] == 26 && at[1] == 41 && at[2] == 56,
        "min shot: %d cuts (%lld, %lld, %lld)", cuts, n > 0 ? (long long)at[0] : -1LL,
        n > 1 ? (long long)at[1] : -1LL, n > 2 ? (long long)at[2] : -1LL);
  free(rgb);
  scene_cut_free(&sc);
}

// Grey levels 0 and 81: a score of exactly 81 / 3 = 27 cuts; 80 / 3 does not.
static void at_threshold(void) {
  for (int v = 80; v <= 81; v++) {
    scene_cut *sc = NULL;
    scene_cut_opts o = {.min_shot_frames = 1};
    CHECK_OK(scene_cut_new(&sc, &o, W, H));
    uint8_t *rgb = malloc((size_t)W * H * 3);
    int64_t f = 0;
    feed_flat(sc, rgb, W, H, 3, 0, 0, 0, &f);
    int cuts = feed_flat(sc, rgb, W, H, 1, v, v, v, &f);
    CHECK(cuts == (v == 81), "grey %d: score %.3f, %d cuts", v, scene_cut_score(sc), cuts);
    free(rgb);
    scene_cut_free(&sc);
  }
}

int main(void) {
  two_colours(W, H);
  two_colours(640, 360);  // shrunk by 2 (max_width 256)
  two_colours(1001, 7);   // shrunk by 3 to 333 x 2
  fades();
  min_shot();
  at_threshold();
  scene_cut *sc = NULL;
  scene_cut_opts bad = {.w_h = -1};
  CHECK(scene_cut_new(&sc, &bad, W, H) == TSR_EINVAL && !sc, "negative weight refused");
  scene_cut_opts ok = {0};
  CHECK(scene_cut_new(&sc, &ok, 0, H) == TSR_EINVAL && !sc, "empty frame refused");
  return check_done();
}
