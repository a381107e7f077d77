// ingest/scene_cut.c — the content detector of scene_cut.h: shrink, HSV, score, cut.
#include "ingest/scene_cut.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct scene_cut {
  int w, h;            // frames fed
  int k;               // shrink factor
  int sw, sh;          // shrunk size
  double threshold, wh, ws, wv;
  int min_shot;
  uint8_t *hsv[2];     // planar H, S, V of the shrunk frame: [cur] and the previous one
  uint8_t *row;        // one shrunk row, RGB
  int cur;
  int64_t frames;      // frames fed
  int64_t last_cut;    // frame number of the last cut (0: the first frame)
  double score;
  double *times;       // cuts
  int64_t *at;
  int64_t n, cap;
};

// Reciprocals in 12-bit fixed point, as OpenCV's 8-bit HSV does: no division per pixel.
// sdiv[v] = 255 / v (saturation), hdiv[d] = 30 / d (hue in degrees / 2 per sector).
static int32_t sdiv[256], hdiv[256];

static void hsv_tables(void) {
  for (int i = 1; i < 256; i++) {
    sdiv[i] = (int32_t)((255 << 12) / (double)i + 0.5);
    hdiv[i] = (int32_t)((30 << 12) / (double)i + 0.5);
  }
}

// HSV of n pixels on OpenCV's 8-bit scales: H = degrees / 2 (0-179), S and V 0-255.
// restrict: the byte stores could alias the tables otherwise, and the loop would not
// vectorise.
static void to_hsv(const uint8_t *restrict rgb, int n, uint8_t *restrict h,
                   uint8_t *restrict s, uint8_t *restrict v) {
  for (int i = 0; i < n; i++) {
    const int r = rgb[3 * i], g = rgb[3 * i + 1], b = rgb[3 * i + 2];
    const int mx = r > g ? (r > b ? r : b) : (g > b ? g : b);
    const int mn = r < g ? (r < b ? r : b) : (g < b ? g : b);
    const int d = mx - mn;
    v[i] = (uint8_t)mx;
    s[i] = (uint8_t)((d * sdiv[mx] + (1 << 11)) >> 12);
    // 30 * (difference of the other two) / d, plus the sector's start
    const int num = mx == r ? g - b : mx == g ? b - r : r - g;
    int hh = (mx == r ? 0 : mx == g ? 60 : 120) + ((num * hdiv[d] + (1 << 11)) >> 12);
    hh += hh < 0 ? 180 : 0;
    h[i] = (uint8_t)(hh >= 180 ? hh - 180 : hh);
  }
}

// Shrinks rgb by sc->k (box average) into the planar HSV buffer `out`, a row at a time.
static void shrink_hsv(const scene_cut *sc, const uint8_t *rgb, uint8_t *row, uint8_t *out) {
  const size_t plane = (size_t)sc->sw * sc->sh;
  const int k = sc->k, kk = k * k;
  for (int y = 0; y < sc->sh; y++) {
    const uint8_t *src = rgb + (size_t)y * sc->w * 3;
    if (k > 1) {
      for (int x = 0; x < sc->sw; x++) {
        int acc[3] = {0, 0, 0};
        for (int dy = 0; dy < k; dy++) {
          const uint8_t *p = rgb + ((size_t)(y * k + dy) * sc->w + (size_t)x * k) * 3;
          for (int dx = 0; dx < k * 3; dx++) acc[dx % 3] += p[dx];
        }
        for (int c = 0; c < 3; c++) row[3 * x + c] = (uint8_t)((acc[c] + kk / 2) / kk);
      }
      src = row;
    }
    const size_t i = (size_t)y * sc->sw;
    to_hsv(src, sc->sw, out + i, out + plane + i, out + 2 * plane + i);
  }
}

// Sum of |a - b| over n bytes (a loop the compiler vectorizes).
static int64_t abs_diff_sum(const uint8_t *a, const uint8_t *b, size_t n) {
  int64_t sum = 0;
  for (size_t i = 0; i < n;) {
    uint32_t part = 0;  // blocks of 2^16 bytes cannot overflow 32 bits
    const size_t stop = n - i < 65536 ? n : i + 65536;
    for (; i < stop; i++) part += (uint32_t)(a[i] > b[i] ? a[i] - b[i] : b[i] - a[i]);
    sum += part;
  }
  return sum;
}

// Weighted mean absolute difference of the two HSV frames.
static double frame_score(const scene_cut *sc, const uint8_t *a, const uint8_t *b) {
  const size_t plane = (size_t)sc->sw * sc->sh;
  const double n = (double)plane;
  const double dh = abs_diff_sum(a, b, plane) / n;
  const double ds = abs_diff_sum(a + plane, b + plane, plane) / n;
  const double dv = abs_diff_sum(a + 2 * plane, b + 2 * plane, plane) / n;
  return (sc->wh * dh + sc->ws * ds + sc->wv * dv) / (sc->wh + sc->ws + sc->wv);
}

tsr_status scene_cut_new(scene_cut **out, const scene_cut_opts *o, int w, int h) {
  *out = NULL;
  const double th = o->threshold > 0 ? o->threshold : SCENE_CUT_THRESHOLD;
  const int max_w = o->max_width > 0 ? o->max_width : SCENE_CUT_MAX_WIDTH;
  const int weights = o->w_h != 0 || o->w_s != 0 || o->w_v != 0;
  if (w <= 0 || h <= 0 || w > 16384 || h > 16384 || !isfinite(th) || o->min_shot_frames < 0 ||
      !(o->w_h >= 0 && o->w_s >= 0 && o->w_v >= 0) || !isfinite(o->w_h + o->w_s + o->w_v))
    return err_set(TSR_EINVAL, "scene cuts: invalid frame size %dx%d or options (threshold %g, "
                   "weights %g %g %g)", w, h, th, o->w_h, o->w_s, o->w_v);
  scene_cut *sc = calloc(1, sizeof *sc);
  if (!sc) return err_set(TSR_ENOMEM, "scene cuts: out of memory");
  sc->w = w;
  sc->h = h;
  sc->k = w > max_w ? w / max_w : 1;
  if (h / sc->k == 0) sc->k = 1;  // a strip: not shrunk
  sc->sw = w / sc->k;
  sc->sh = h / sc->k;
  sc->threshold = th;
  sc->wh = weights ? o->w_h : 1;
  sc->ws = weights ? o->w_s : 1;
  sc->wv = weights ? o->w_v : 1;
  sc->min_shot = o->min_shot_frames > 0 ? o->min_shot_frames : SCENE_CUT_MIN_SHOT;
  const size_t plane = (size_t)sc->sw * sc->sh;
  sc->hsv[0] = malloc(3 * plane);
  sc->hsv[1] = malloc(3 * plane);
  sc->row = malloc((size_t)sc->sw * 3);
  if (!sc->hsv[0] || !sc->hsv[1] || !sc->row) {
    scene_cut_free(&sc);
    return err_set(TSR_ENOMEM, "scene cuts: out of memory for %dx%d frames", w, h);
  }
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, hsv_tables);
  *out = sc;
  return TSR_OK;
}

tsr_status scene_cut_feed(scene_cut *sc, const uint8_t *rgb, double t, int *cut) {
  *cut = 0;
  uint8_t *now = sc->hsv[sc->cur], *before = sc->hsv[1 - sc->cur];
  shrink_hsv(sc, rgb, sc->row, now);
  sc->score = sc->frames > 0 ? frame_score(sc, now, before) : 0;
  const int64_t i = sc->frames++;
  sc->cur = 1 - sc->cur;
  if (i == 0 || sc->score < sc->threshold || i - sc->last_cut < sc->min_shot) return TSR_OK;
  if (sc->n == sc->cap) {
    int64_t cap = sc->cap ? 2 * sc->cap : 16;
    double *times = realloc(sc->times, sizeof *times * (size_t)cap);
    if (times) sc->times = times;
    int64_t *at = realloc(sc->at, sizeof *at * (size_t)cap);
    if (at) sc->at = at;
    if (!times || !at) return err_set(TSR_ENOMEM, "scene cuts: out of memory for %lld cuts",
                                      (long long)cap);
    sc->cap = cap;
  }
  sc->times[sc->n] = t;
  sc->at[sc->n++] = i;
  sc->last_cut = i;
  *cut = 1;
  return TSR_OK;
}

double scene_cut_score(const scene_cut *sc) { return sc->score; }

const double *scene_cut_times(const scene_cut *sc, int64_t *n) {
  *n = sc->n;
  return sc->times;
}

const int64_t *scene_cut_frames(const scene_cut *sc, int64_t *n) {
  *n = sc->n;
  return sc->at;
}

void scene_cut_free(scene_cut **psc) {
  scene_cut *sc = *psc;
  if (!sc) return;
  free(sc->hsv[0]);
  free(sc->hsv[1]);
  free(sc->row);
  free(sc->times);
  free(sc->at);
  free(sc);
  *psc = NULL;
}
