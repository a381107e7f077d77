// store/settings.h — the settings fixed for the life of a store (frame rate, size, tubelet,
// element type, VAE strides), their limits and their checks.
#ifndef TESSERA_STORE_SETTINGS_H
#define TESSERA_STORE_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

// Element type of token values. u8: RGB pixels (`tessera ingest`); bf16 and f32: latents
// of an external video VAE (`tessera ingest --latents`, store/latent_file.h), real values the
// model learns as they are. The numbers are those of the shard header and of
// kernels_tokens (kernels/kernels.h), which the trainer maps them to.
typedef enum { STORE_DTYPE_U8 = 0, STORE_DTYPE_BF16 = 1, STORE_DTYPE_F32 = 2 } store_dtype;

// Settings fixed for the life of a store. Ingesting with other settings is refused.
typedef struct {
  int fps_num, fps_den;  // target frame rate, e.g. 8/1 or 30000/1001; of a latent store the
                         // frame rate of the video frames the VAE encoded
  int short_side;        // pixels of the short side after resize (before crop); 0 in a
                         // latent store (latents keep the encoder's size)
  int pt, ph, pw;        // tubelet size: frames x pixels x pixels (latent store: latent
                         // frames x latent rows x latent columns)
  int channels;          // values per pixel (3 = RGB; latents: the VAE's channels)
  store_dtype dtype;     // element type of token values (u8: pixels; bf16, f32: latents)
  double max_seconds;    // longer videos are cut into clips of at most this (0: no cut)
  int vae_t, vae_s;      // latent store: the VAE's compression, video frames per latent frame
                         // and pixels per latent row/column (e.g. 4 and 8); 0 for pixels
} store_settings;

// 1 for a store of VAE latents (dtype bf16 or f32), 0 for pixels (u8).
static inline int store_is_latent(const store_settings *s) { return s->dtype != STORE_DTYPE_U8; }
// "u8", "bf16", "f32" ("?" for an unknown value).
const char *store_dtype_name(store_dtype d);
// *d = the dtype store_dtype_name calls `name` and 1, or 0 (*d untouched) for another name.
int store_dtype_from_name(const char *name, store_dtype *d);
// Bytes of one value of dtype d (0 for an unknown value).
int store_dtype_size(store_dtype d);

// Limits of the settings, checked where options enter (`tessera ingest`, tools/cmd_ingest.c
// prints them in --help) and again when an index is created (store_settings_check), so no
// caller can start runaway work: the output size of a clip grows with fps x short side^2,
// and `--fps 1000000` on a 3 s clip once wrote 16 GB.
//   fps <= 240: above every camera rate a video model trains on (high-speed footage is
//     resampled down anyway); fps >= 1/3600 (one frame an hour).
//   short side 8..4096: 8 is the smallest side with a useful patch; 4096 is 4K, the
//     largest frames decode.c accepts by default (8192^2 pixels) scaled to a short side.
//   patch dims 1..64: a tubelet of 64 frames or 64x64 pixels is already larger than any
//     published video DiT's (2x16x16 at most in practice); larger ones only multiply memory.
//   max seconds 0..86400: one day; longer cuts are no cut at all.
#define STORE_MAX_FPS 240
#define STORE_MIN_SHORT_SIDE 8
#define STORE_MAX_SHORT_SIDE 4096
#define STORE_MAX_PATCH 64
#define STORE_MAX_CHANNELS 1024
#define STORE_MAX_SECONDS 86400.0
// Largest VAE compression factor (temporal or spatial) of a latent store: 64 is far above
// every published video VAE (4x8x8 for Wan, HunyuanVideo, Cosmos; 8x32x32 for LTX-Video).
#define STORE_MAX_VAE_STRIDE 64
// Largest payload of one clip block (bytes): 1 TiB. A row or block claiming more is corrupt.
#define STORE_MAX_CLIP_BYTES (1LL << 40)
// Largest token grid dimension of a clip (T, H or W): 2^24.
#define STORE_MAX_GRID (1 << 24)
// Captions: text of at most 8 KiB (a long prompt is ~3 KB), an embedding of at most 2^16
// tokens (text encoders take 77 to 512) of at most 2^16 values (umT5-XXL: 4096).
#define STORE_MAX_CAPTION_BYTES 8192
#define STORE_MAX_CAPTION_TOKENS 65536
#define STORE_MAX_CAPTION_DIM 65536
// The record of the encoder that made a store's caption embeddings (store/caption_encoder.h):
// an hf:PATH encoder's absolute folder (PATH_MAX) and the other keys fit.
#define STORE_MAX_CAPTION_ENCODER_BYTES 4608

// TSR_EINVAL naming every value outside the limits above (fps a positive fraction, dtype
// known; pixels: short side in range and vae strides 0; latents: short side 0 and vae
// strides in 1..STORE_MAX_VAE_STRIDE); TSR_OK if all are inside.
tsr_status store_settings_check(const store_settings *s);

// Bytes of one token: pt*ph*pw*channels*element size.
int64_t store_token_bytes(const store_settings *s);
// Describes the differences between two settings ("fps 8/1 vs 12/1, patch ...");
// returns 0 if equal, else 1 with the text in buf.
int store_settings_diff(const store_settings *a, const store_settings *b, char *buf, size_t n);

#endif
