// bench/ingest/scene_cut.c — tessera's scene-cut detector (ingest/scene_cut.h) on one
// video, for bench/ingest/scene_cut.sh: decodes it with ingest/decode.h at a given rate
// and short side, feeds every frame to the detector, and prints one JSON object: frames,
// cut times, and the seconds spent decoding and detecting (measured apart, so the
// detector's own time per frame is known).
//   bench_scene_cut FILE --fps N[/D] [--short-side S] [--threshold T] [--min-shot F]
//                   [--repeat R]
// --repeat runs the detector R times over the decoded frames (kept in memory) and takes
// the fastest, as the benchmark's other timings do.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "ingest/decode.h"
#include "ingest/scene_cut.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
  const char *path;
  int fps_num, fps_den, short_side, repeat;
  scene_cut_opts so;
} args;

static int parse(int argc, char **argv, args *a) {
  *a = (args){.fps_num = 0, .fps_den = 1, .short_side = 144, .repeat = 1};
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (argv[i][0] != '-') a->path = argv[i];
    else if (!v) return 0;
    else if (!strcmp(argv[i], "--fps") && ++i) {
      if (sscanf(v, "%d/%d", &a->fps_num, &a->fps_den) < 1) return 0;
    } else if (!strcmp(argv[i], "--short-side") && ++i) a->short_side = atoi(v);
    else if (!strcmp(argv[i], "--threshold") && ++i) a->so.threshold = atof(v);
    else if (!strcmp(argv[i], "--min-shot") && ++i) a->so.min_shot_frames = atoi(v);
    else if (!strcmp(argv[i], "--repeat") && ++i) a->repeat = atoi(v);
    else return 0;
  }
  return a->path && a->fps_num > 0 && a->fps_den > 0 && a->short_side > 0 && a->repeat > 0;
}

// Every output frame of the file, (n, h, w, 3) in one buffer.
static tsr_status decode_all(const args *a, uint8_t **frames, int64_t *n, decode_info *info) {
  decode_opts o = {.fps_num = a->fps_num, .fps_den = a->fps_den, .short_side = a->short_side,
                   .mult_h = 2, .mult_w = 2, .threads = 1, .max_pixels = 1LL << 26};
  decode_ctx *d = NULL;
  tsr_status st = decode_open(&d, a->path, &o, info);
  if (st) return st;
  const size_t fb = (size_t)info->out_w * info->out_h * 3;
  int64_t cap = 0;
  *frames = NULL;
  for (*n = 0;; (*n)++) {
    if (*n == cap) {
      cap = cap ? 2 * cap : 256;
      uint8_t *p = realloc(*frames, (size_t)cap * fb);
      if (!p) {
        st = err_set(TSR_ENOMEM, "out of memory for %lld frames", (long long)cap);
        break;
      }
      *frames = p;
    }
    int got = 0;
    if ((st = decode_next(d, *frames + (size_t)*n * fb, &got)) || !got) break;
  }
  decode_free(&d);
  return st;
}

int main(int argc, char **argv) {
  args a;
  if (!parse(argc, argv, &a)) {
    fprintf(stderr, "usage: bench_scene_cut FILE --fps N[/D] [--short-side S] [--threshold T] "
                    "[--min-shot F] [--repeat R]\n");
    return 2;
  }
  uint8_t *frames = NULL;
  int64_t n = 0;
  decode_info info;
  double t0 = now_s();
  if (decode_all(&a, &frames, &n, &info)) {
    fprintf(stderr, "bench_scene_cut: %s\n", err_msg());
    free(frames);
    return 1;
  }
  const double decode_s = now_s() - t0;
  const size_t fb = (size_t)info.out_w * info.out_h * 3;
  double best = 1e30;
  scene_cut *sc = NULL;
  for (int r = 0; r < a.repeat; r++) {
    scene_cut_free(&sc);
    if (scene_cut_new(&sc, &a.so, info.out_w, info.out_h)) {
      fprintf(stderr, "bench_scene_cut: %s\n", err_msg());
      free(frames);
      return 1;
    }
    t0 = now_s();
    for (int64_t i = 0; i < n; i++) {
      int cut;
      if (scene_cut_feed(sc, frames + (size_t)i * fb, (double)i * a.fps_den / a.fps_num, &cut))
        return 1;
    }
    const double s = now_s() - t0;
    if (s < best) best = s;
  }
  int64_t nc = 0;
  const double *cuts = scene_cut_times(sc, &nc);
  printf("{\"file\": \"%s\", \"frames\": %lld, \"width\": %d, \"height\": %d, "
         "\"decode_s\": %.6f, \"detect_s\": %.6f, \"cuts\": [", a.path, (long long)n,
         info.out_w, info.out_h, decode_s, best);
  for (int64_t i = 0; i < nc; i++) printf("%s%.4f", i ? ", " : "", cuts[i]);
  printf("]}\n");
  scene_cut_free(&sc);
  free(frames);
  return 0;
}
