// model/sample/sample.h — `tessera sample`: generate a clip from a checkpoint by Euler
// integration of the rectified flow (docs/train.md).
//
// The model predicts v = e - x0 for x_t = (1 - t) x0 + t e, so dx/dt = v and the clip is
// x(0) from x(1) = e ~ N(0, I): for n steps on the grid u_i = 1 - i/n, shifted as in
// training (t_i = s u_i / (1 + (s - 1) u_i), s = max(1, sqrt(N / t_shift_tokens)) for a
// clip of N tokens, so a sample starts from the noise levels its length was trained at),
//   x <- x + (t_{i+1} - t_i) v(x, t_i).
// Classifier-free guidance with scale g: v = v_u + g (v_c - v_u), v_u with the "no label"
// class; the conditional and unconditional copies run as two clips of one packed
// microbatch. The noise is keyed by (seed, RNG_STREAM_SAMPLE), so a seed gives one clip.
#ifndef TESSERA_MODEL_SAMPLE_H
#define TESSERA_MODEL_SAMPLE_H

#include <stdint.h>
#include "core/err.h"
#include "ingest/store.h"
#include "model/config.h"
#include "model/dit.h"

typedef struct {
  int T, H, W;      // token grid of the clip
  int label;        // class id, or -1: unconditional ("no label")
  float cfg;        // guidance scale (1: none; needs a label and num_classes > 0)
  int steps;        // Euler steps >= 1
  uint64_t seed;
  int64_t t_shift_tokens;  // train.t_shift_tokens of the checkpoint (0: no shift)
} sample_params;

// Integrates the flow with model m (created for >= 2*T*H*W tokens and 2 clips when
// guided) on the model's backend and writes the clip's tokens as uint8 pixels:
// out (T*H*W, P) host memory, values round((x + 1) * 127.5) clamped to [0, 255].
tsr_status sample_generate(dit_model *m, const sample_params *sp, uint8_t *out);

// The sampled clip: its tokens, and what turning them into a video needs.
typedef struct {
  uint8_t *tokens;        // (T*H*W, P) uint8 pixels (P = pt*ph*pw*channels), malloc'ed
  int T, H, W;            // token grid
  dit_config mc;          // the model (tubelet pt, ph, pw and channels)
  store_settings store;   // the store it was trained on (frame rate of the video)
} sample_result;

// Samples one clip per entry of sp (n >= 1 entries of one grid T x H x W) with model m
// (created for >= 2*T*H*W tokens and 2 clips when an entry is guided, else >= T*H*W and 1)
// and lays them side by side, left to right, with a column of `gap` tokens of white
// (255) between neighbours: out->tokens is the (T, H, n W + (n - 1) gap) grid, out->mc
// m's config; out->store is left zero for the caller. `tessera sample` is n = 1; the
// trainer's samples during training are a row of seeds or labels.
tsr_status sample_row(dit_model *m, const sample_params *sp, int n, int gap,
                      sample_result *out);
void sample_result_free(sample_result *r);

typedef struct {
  const char *ckpt;         // checkpoint file
  int frames;               // frames (a multiple of the checkpoint's pt)
  int height, width;        // pixels (multiples of ph, pw)
  const char *label;        // class id or name (checkpoint's labels), NULL: none
  float cfg;                // guidance scale
  int steps;                // Euler steps
  uint64_t seed;
  int ema;                  // 1: EMA weights (default), 0: raw weights
  const backend_choice *backend;  // compute device, chosen by the caller (tools/backend.h)
  int precision;            // kernels_dtype of the activations, or -1: the checkpoint's
                            // train.precision (weights load as fp32 masters either way)
} sample_options;

// Loads the checkpoint, checks the options against it and samples the clip's tokens
// (writing them as a video is the caller's: tessera sample encodes an MP4).
tsr_status sample_run(const sample_options *o, sample_result *out);

#endif
