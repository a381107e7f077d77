// store/latent_file.h — latent files: the latents of one video (or clip) from an external
// video VAE, and optionally its caption embedding, as `tessera ingest --latents` reads
// them and `tessera sample` writes them. docs/store-format.md "Latent files";
// tools/reference/encode_latents.py writes them with a PyTorch VAE.
//
// A safetensors file (core/safetensors.h):
//   latents    (T, H, W, C)  BF16 or F32   required: T latent frames of H x W latent pixels of
//                                          C channels, as the DiT is to learn them (the VAE's
//                                          normalisation applied)
//   text_emb   (N, D)        BF16 or F32   optional: the caption's embedding, N >= 1 tokens
//                                          of the text encoder's width D
//   __metadata__ (strings):
//     format      "tessera-latents"        required
//     fps         "N" or "N/D"             required: frame rate of the video frames the VAE
//                                          encoded (1/3600 .. 240)
//     vae_stride  "TxSxS"                  required: video frames per latent frame, pixels
//                                          per latent row and column (each 1..64)
//     source      the video's path         optional (recorded in the store)
//     caption     the caption's text       optional, with text_emb (UTF-8, <= 8 KiB)
//     caption_encoder  the encoder's record optional, with text_emb: the JSON of the text
//                                          encoder's settings (store/caption_encoder.h;
//                                          tools/embed_captions.py writes it), which an
//                                          ingest records in the store
//     label       a class label            optional (--label-from-dir takes the folder)
//     start_s     start in the video, s    optional (a clip of a longer video)
// Other tensors and metadata keys are ignored (an encoder may keep its own there).
//
// musubi-tuner's Wan caches are read too (a file without 'format' whose tensor is
// latents_FxHxW_DTYPE): the latent cache NAME[_POS-COUNT]_WxH_wan.safetensors, a (C, F, H, W)
// bf16/f32 tensor of 16 channels (Wan 2.1's VAE, stride 4x8x8) or 48 (Wan 2.2's, 4x16x16),
// metadata architecture = "wan", taken at Wan's 16 fps; its caption from
// NAME_wan_te.safetensors beside it (varlen_t5_DTYPE (N, D), metadata caption1), if there.
//
// Validation (latent_file_open): every rule above, sizes within the store's limits
// (store/settings.h), and every value of both tensors finite; a failure is TSR_EFORMAT naming the
// file, the tensor or key, and what is wrong (for a non-finite value, its index).
#ifndef TESSERA_STORE_LATENT_FILE_H
#define TESSERA_STORE_LATENT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/safetensors.h"
#include "store/settings.h"

#define LATENT_FORMAT "tessera-latents"

typedef struct {
  st_reader *st;            // the mapped file (owns every pointer below)
  int T, H, W, C;           // latents (T, H, W, C)
  store_dtype dtype;        // STORE_DTYPE_BF16 or STORE_DTYPE_F32
  const void *latents;      // (T, H, W, C) inside the mapping (read with memcpy: the file
                            // aligns it only as its writer did)
  int fps_num, fps_den;     // the video's frame rate
  int vae_t, vae_s;         // the VAE's compression
  const char *source;       // "" if not given
  const char *label;        // NULL if not given
  double start_s;           // 0 if not given
  int text_tokens, text_dim;  // caption embedding (0, 0: none)
  store_dtype text_dtype;
  const void *text;         // (text_tokens, text_dim) inside the mapping
  const char *caption;      // "" if not given
  const char *caption_encoder;  // metadata caption_encoder as written ("" if not given;
                            // always "" for a musubi-tuner cache)
  st_reader *te;            // a musubi-tuner cache's text-encoder cache (text, caption), or NULL
  void *owned;              // a musubi-tuner cache's latents in (T, H, W, C) order, or NULL
} latent_file;

// Opens and validates `path`. *lf is NULL on error.
tsr_status latent_file_open(latent_file **lf, const char *path);
void latent_file_close(latent_file **lf);

// A caption file: any safetensors file with a tensor text_emb (N, D), bf16 or f32, all
// finite, N in 1..STORE_MAX_CAPTION_TOKENS, D in 1..STORE_MAX_CAPTION_DIM, and optional
// metadata 'caption' (its text, <= 8 KiB). The video reader of `tessera ingest --captions`
// takes VIDEO.caption.safetensors beside each video. Only the text fields of *lf are set.
tsr_status caption_file_open(latent_file **lf, const char *path);

// The caption of a caption file for `tessera sample --caption`: any safetensors file with a
// tensor text_emb (N, D), bf16 or f32, all finite, N in 1..STORE_MAX_CAPTION_TOKENS, D =
// text_dim (a latent file with a caption is one); metadata 'caption' is its text. *emb:
// (N, D) fp32, malloc'ed; caption (n bytes) gets the text ("" if none). TSR_EFORMAT /
// TSR_EMISMATCH naming the file and what is wrong.
tsr_status caption_file_read(const char *path, int text_dim, float **emb, int *tokens,
                             char *caption, size_t n);

// Value i of n values of dtype (bf16 or f32) at p, as float (p may be unaligned).
float latent_value(const void *p, store_dtype dtype, size_t i);

// Writes a latent file: latents (T, H, W, C) f32 host memory, the video's fps and the VAE's
// strides, `source` (may be NULL), plus n_extra metadata pairs extra[2i] = key,
// extra[2i+1] = value; atomically (core/fs.h), so the file is whole
// or absent. What `tessera sample` writes for the user's VAE decoder.
tsr_status latent_file_write(const char *path, const float *latents, int T, int H, int W, int C,
                             int fps_num, int fps_den, int vae_t, int vae_s, const char *source,
                             const char *const *extra, int n_extra);

#endif
