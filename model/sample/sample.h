// model/sample/sample.h — `tessera sample`: generate a clip from a checkpoint by Euler
// integration of the rectified flow (docs/train.md).
//
// The model predicts v = e - x0 for x_t = (1 - t) x0 + t e, so dx/dt = v and the clip is
// x(0) from x(1) = e ~ N(0, I): for n steps on the grid u_i = 1 - i/n, shifted as in
// training (t_i = s u_i / (1 + (s - 1) u_i), s = max(1, sqrt(N / t_shift_tokens)) for a
// clip of N tokens, so a sample starts from the noise levels its length was trained at),
//   x <- x + (t_{i+1} - t_i) v(x, t_i).
// Classifier-free guidance with scale g: v = v_u + g (v_c - v_u), v_u with the "no label"
// class and no caption (the learned null token alone); the conditional and unconditional
// copies run as two clips of one packed microbatch. The noise is keyed by
// (seed, RNG_STREAM_SAMPLE), so a seed gives one clip.
//
// A model of a latent store (bf16/f32 tokens) samples latents: the clip's values as they
// are, for the user's VAE decoder (tessera sample writes them as a latent file and a
// preview video of three latent channels; sample_latents, sample_preview_frame).
#ifndef TESSERA_MODEL_SAMPLE_H
#define TESSERA_MODEL_SAMPLE_H

#include <stdint.h>
#include "core/err.h"
#include "store/settings.h"
#include "model/config.h"
#include "model/dit.h"

// How a step moves x from one noise level to the next.
typedef enum {
  SAMPLE_SOLVER_EULER = 0,  // x <- x + (t_{i+1} - t_i) v (the default)
  SAMPLE_SOLVER_UNIPC,      // diffusers' UniPCMultistepScheduler as Wan's pipeline configures
                            // it (flow_prediction, use_flow_sigmas, flow_shift = shift,
                            // solver_order 2, bh2 predictor-corrector, lower_order_final):
                            // its own noise levels (sample_sigmas) and integer timesteps
} sample_solver;

// The noise levels of the steps (sample_sigmas).
typedef enum {
  SAMPLE_SCHEDULE_TESSERA = 0,  // the training shift on the even grid (above)
  SAMPLE_SCHEDULE_WAN,          // diffusers' FlowMatchEulerDiscreteScheduler(shift) as WanPipeline
                                // runs it (docs/train.md "Sampling as Wan's pipeline")
} sample_schedule;

typedef struct {
  int T, H, W;      // token grid of the clip
  int label;        // class id, or -1: unconditional ("no label")
  const float *text;  // (text_tokens, model.text_dim) host: the caption embedding, or NULL
  int text_tokens;
  float cfg;        // guidance scale (1: none; needs a label or a caption)
  int steps;        // Euler steps >= 1
  uint64_t seed;
  int64_t t_shift_tokens;  // train.t_shift_tokens of the checkpoint (0: no shift)
  // The unconditional clip of guidance: a caption embedding (text_neg_tokens, text_dim),
  // e.g. the empty prompt's as Wan's pipeline uses, or NULL: no caption (the null token).
  const float *text_neg;
  int text_neg_tokens;
  const float *noise;       // (T*H*W, P) the starting noise as tokens, or NULL: drawn from seed
  sample_schedule schedule;
  double shift;             // SAMPLE_SCHEDULE_WAN and UniPC: the scheduler's shift (> 0)
  sample_solver solver;     // Euler, or UniPC (needs SAMPLE_SCHEDULE_WAN)
  // Wan 2.2 A14B's two experts (WanPipeline's transformer_2 and boundary_ratio): `expert2`
  // (a model of the same config, created for the same tokens and clips) runs the steps
  // whose timestep (sample_timesteps) is below boundary * 1000, with guidance scale cfg2;
  // the model given to sample_generate the others (with cfg). NULL: one model throughout.
  dit_model *expert2;
  double boundary;          // in (0, 1]
  float cfg2;               // guidance of expert2's steps (WanPipeline's guidance_scale_2)
  // 1: chunk by chunk (a block_causal model): chunk k (model.mask_chunk latent frames) is
  // integrated alone over the whole schedule (Euler, or a UniPC solve of its own), with the
  // k chunks before it, as sampled, as clean context (t = 0), as autoregressive video models
  // generate (CausVid, diffusion forcing). The starting noise and the levels are the whole
  // clip's, so under the mask chunk 0 comes out as the whole clip's sampling makes it. The
  // context's keys and values come from a K/V cache (model/kvcache.h): a finished chunk
  // runs once more, clean, and its keys and values of every layer are kept for the chunks
  // after it (the last model.mask_window of them with a window), so a step of chunk k runs
  // the model on chunk k alone: K chunks cost K (steps + 1) - 1 chunk forwards instead of
  // steps K (K + 1) / 2.
  int chunked;
  // With chunked, 1: no cache: chunk k's forwards take the k chunks before it in the
  // model's input as a segment at t = 0 (their keys and values recomputed every step). The
  // cache's reference (tests/model/test_kvcache.c, `tessera sample --no-kv-cache`).
  int chunk_recompute;
} sample_params;

// The steps + 1 noise levels t_0 = 1 (or Wan's) > ... > t_steps = 0 of sp's schedule for a
// clip of N tokens; step i goes from t_i to t_{i+1} with the model at t_i.
// SAMPLE_SCHEDULE_TESSERA: kernels_time_shift of the grid 1 - i/steps (training's shift).
// SAMPLE_SCHEDULE_WAN: diffusers' FlowMatchEulerDiscreteScheduler(shift = S) after
// set_timesteps(steps): its training grid's ends 1 and f(1/1000) (f(s) = S s / (1 + (S - 1)
// s), in fp32 as its constructor computes them), `steps` points evenly spaced between them
// and f applied again, rounded to fp32 (the values its step() subtracts), then 0.
// SAMPLE_SOLVER_UNIPC: UniPCMultistepScheduler(use_flow_sigmas, flow_shift = S) after
// set_timesteps(steps): `steps` points evenly spaced from 1 to 1/1000 (the last of steps + 1
// dropped), f applied in double, the first lowered by 1e-6 when within 1e-6 of 1, rounded to
// fp32, then 0.
void sample_sigmas(const sample_params *sp, int64_t N, double *t);
// The timestep the pipeline gives the model at each of the steps and compares with the
// experts' boundary, from the unrounded levels: 1000 t_i in fp32 (Euler: the fp32 product
// FlowMatchEulerDiscreteScheduler's timesteps are), or UniPC's integer timestep floor(1000 u_i)
// of the level u_i before its fp32 rounding. ts: (steps); the model runs at ts / 1000.
void sample_timesteps(const sample_params *sp, int64_t N, float *ts);

// Integrates the flow with model m (created for >= 2*T*H*W tokens and 2 clips when
// guided, twice the clips when chunked; chunked with the cache: a chunk's tokens and 1
// clip, twice both when guided)
// on the model's backend: out (T*H*W, P) host memory gets the clip's tokens, the final x
// in fp32 (pixels: x0 in [-1, 1]; latents: the latent values).
tsr_status sample_generate(dit_model *m, const sample_params *sp, float *out);
// Sampled pixel values as uint8, as training maps them: round((x + 1) * 127.5) clamped to
// [0, 255]. x, out: (n)
void sample_to_pixels(const float *x, size_t n, uint8_t *out);

typedef struct {
  const char *ckpt;         // checkpoint file
  int frames;               // frames (a multiple of the checkpoint's pt)
  int height, width;        // pixels (multiples of ph, pw)
  const char *label;        // class id or name (checkpoint's labels), NULL: none
  const char *caption;      // caption file (caption_file_read), NULL: none
  const char *negative;     // caption file of the unconditional clip of guidance, NULL: none
  const char *noise;        // latent file (T, H, W, C) of the starting noise, NULL: seeded
  float cfg;                // guidance scale
  int steps;                // Euler steps
  sample_schedule schedule;
  double shift;             // Wan schedule's shift
  sample_solver solver;
  const char *ckpt2;        // the second expert's checkpoint (Wan 2.2 A14B), NULL: none
  double boundary;          // its boundary (sample_params.boundary)
  float cfg2;               // its guidance scale; NAN: cfg
  uint64_t seed;
  int ema;                  // 1: EMA weights (default), 0: raw weights
  const backend_choice *backend;  // compute device, chosen by the caller (tools/backend.h)
  int precision;            // kernels_dtype of the activations, or -1: the checkpoint's
                            // train.precision (weights load as fp32 masters either way)
  int chunked;              // 1: chunk by chunk (sample_params.chunked)
  int no_kv_cache;          // with chunked: sample_params.chunk_recompute
} sample_options;

// The sampled clip: its tokens, and what turning them into a video needs.
typedef struct {
  uint8_t *tokens;        // (T*H*W, P) uint8 pixels (P = pt*ph*pw*channels), malloc'ed; NULL
                          // for a latent model
  float *values;          // (T*H*W, P) the sampled values (latents, or pixels in [-1, 1])
  int T, H, W;            // token grid
  dit_config mc;          // the checkpoint's model (tubelet pt, ph, pw and channels)
  store_settings store;   // the store it was trained on (frame rate, latent or pixels)
  char caption[STORE_MAX_CAPTION_BYTES + 1];  // the caption file's text ("" if none)
} sample_result;

// Samples one clip per entry of sp (n >= 1 entries of one grid T x H x W) with model m
// (created for >= 2*T*H*W tokens and 2 clips when an entry is guided, else >= T*H*W and 1)
// and lays them side by side, left to right, with a column of `gap` tokens between
// neighbours (value 1: white pixels; 0 for latents): out->values is the (T, H, n W + (n - 1)
// gap) grid of the sampled values and, when `pixels`, out->tokens the same as uint8
// (sample_to_pixels); out->mc is m's config; out->store is left zero for the caller.
// The trainer's samples during training are a row of labels or seeds (model/train/samples.c).
tsr_status sample_row(dit_model *m, const sample_params *sp, int n, int gap, int pixels,
                      sample_result *out);

// Loads the checkpoint, checks the options against it and samples the clip's tokens
// (writing them as a video is the caller's: tessera sample encodes an MP4).
tsr_status sample_run(const sample_options *o, sample_result *out);
void sample_result_free(sample_result *r);

// The sampled latents of a latent model as a (T*pt, H*ph, W*pw, C) fp32 array (the layout
// of a latent file), malloc'ed into *out.
tsr_status sample_latents(const sample_result *r, float **out);
// A preview of latents (n frames of h x w x C, fp32): channels 0, 1, 2 as red, green,
// blue (channel 0 alone as grey when C < 3), each mapped linearly from its [lo, hi] over
// the whole clip (its 0.5th and 99.5th percentiles: sample_preview_range) to [0, 255].
// Not the decoded video: the VAE's decoder makes that from the latents.
void sample_preview_range(const float *lat, size_t pixels, int C, float lo[3], float hi[3]);
// One frame (h, w, C) of it as rgb24 (h*up, w*up, 3), each latent pixel an up x up square.
void sample_preview_frame(const float *frame, int h, int w, int C, int up, const float lo[3],
                          const float hi[3], uint8_t *rgb);

#endif
