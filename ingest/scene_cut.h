// ingest/scene_cut.h — shot boundaries found in frames as they are decoded (no second pass).
//
// A content detector in the manner of PySceneDetect's ContentDetector: each frame is
// shrunk by an integer factor (box average; frames wider than max_width only), converted
// to HSV on 0-255 scales (H as OpenCV keeps it for 8-bit images: degrees / 2, 0-179), and
// scored against the previous frame by the mean absolute difference of each channel,
// weighted:
//   score = (w_h * mean|dH| + w_s * mean|dS| + w_v * mean|dV|) / (w_h + w_s + w_v)
// A new shot starts at frame i when score_i >= threshold and at least min_shot_frames
// frames have passed since the last cut (or the first frame): a flash or a burst of fast
// motion makes one cut at most per min_shot_frames. This is ContentDetector's
// FlashFilter SUPPRESS mode; its default MERGE mode instead holds a burst of cuts closer
// than min_shot_frames and reports one where the burst ends. Hard cuts farther apart than
// min_shot_frames come out the same in both. Hue differences are not taken around the
// circle, as ContentDetector does not: a fade through red, where H wraps from 179 to 0,
// scores like a cut.
//
// Streams: holds one shrunk HSV frame, whatever the video's length. Frame rate matters
// only through min_shot_frames: at ingest's 8 fps, the default 15 frames is 1.9 s.
#ifndef TESSERA_INGEST_SCENE_CUT_H
#define TESSERA_INGEST_SCENE_CUT_H

#include <stdint.h>

#include "core/err.h"

#define SCENE_CUT_THRESHOLD 27.0  // ContentDetector's default, on the 0-255 score scale
#define SCENE_CUT_MIN_SHOT 15     // frames; ContentDetector's default min_scene_len
#define SCENE_CUT_MAX_WIDTH 256   // frames are shrunk by floor(width / 256) (its default)

typedef struct {
  double threshold;       // 0: SCENE_CUT_THRESHOLD
  int min_shot_frames;    // 0: SCENE_CUT_MIN_SHOT; 1: every frame over the threshold cuts
  double w_h, w_s, w_v;   // channel weights; all 0: 1, 1, 1
  int max_width;          // 0: SCENE_CUT_MAX_WIDTH
} scene_cut_opts;

typedef struct scene_cut scene_cut;

// A detector for frames of w x h RGB24 pixels. TSR_EINVAL for sizes or options out of
// range (negative weights, a threshold that is not finite).
tsr_status scene_cut_new(scene_cut **sc, const scene_cut_opts *o, int w, int h);

// The next frame (RGB24, h rows of w pixels, at time t seconds). *cut = 1 when a new shot
// starts at this frame (its time is then recorded); the first frame never cuts. Fails
// only when the list of cuts cannot grow (TSR_ENOMEM).
tsr_status scene_cut_feed(scene_cut *sc, const uint8_t *rgb, double t, int *cut);

// The score of the last frame fed against the one before (0 for the first).
double scene_cut_score(const scene_cut *sc);

// The cuts found so far: times (seconds, the t of each shot's first frame) and frame
// numbers (counting frames fed from 0); *n of them. Valid until the next feed.
const double *scene_cut_times(const scene_cut *sc, int64_t *n);
const int64_t *scene_cut_frames(const scene_cut *sc, int64_t *n);

void scene_cut_free(scene_cut **sc);

#endif
