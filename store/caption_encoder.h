// store/caption_encoder.h — which text encoder made a store's caption embeddings, so that a
// prompt given to `tessera sample --prompt` is embedded the same way (docs/captions.md,
// "The store's encoder").
//
// The record is the canonical JSON text of the settings in tools/embed_captions.py's
// OUTDIR/encoder.json that change the numbers, e.g.
//   {"encoder":"minilm","dim":384,"pooled":false,"pad_to":null,"dtype":"bf16",
//    "model_dtype":"f32","clean":false,"max_tokens":256}
// kept in the index's settings table under key "caption_encoder" (not part of
// store_settings: an index made before, or one whose captions came from files without an
// encoder.json, has none: encoder unknown), and copied by the trainer into the
// checkpoint's metadata under the same key.
#ifndef TESSERA_STORE_CAPTION_ENCODER_H
#define TESSERA_STORE_CAPTION_ENCODER_H

#include <stddef.h>

#include "core/err.h"
#include "store/index.h"
#include "store/settings.h"

#define CAPTION_ENCODER_KEY "caption_encoder"
#define CAPTION_ENCODER_MAX_BYTES STORE_MAX_CAPTION_ENCODER_BYTES

typedef struct {
  char name[4200];           // "minilm" or "hf:" + the encoder's absolute folder
  int dim;                   // embedding width (model.text_dim)
  int pooled;                // 1: one row per caption (the mean), 0: one row per token
  int pad_to;                // rows every caption is padded to with zeros (0: none)
  char dtype[8];             // stored values: "bf16" or "f32"
  char model_dtype[8];       // the encoder ran in "f32", "bf16" or "f16"
  int clean;                 // 1: the text went through Wan's prompt_clean first
  int max_tokens;            // tokens a caption is cut at (0: the encoder's default)
} caption_encoder;

// The record of folder dir's encoder.json into out (n bytes, canonical text); "" when dir
// has none. TSR_EFORMAT naming the file when it is not the script's (keys missing or of
// the wrong type).
tsr_status caption_encoder_from_dir(const char *dir, char *out, size_t n);
// Parses a record into *e. TSR_EFORMAT naming `what` (where the text came from) when it is
// not one.
tsr_status caption_encoder_parse(const char *text, const char *what, caption_encoder *e);
// The record of e (canonical text) into out (n bytes).
tsr_status caption_encoder_format(const caption_encoder *e, char *out, size_t n);

// The store's record into out (n bytes); "" when none is recorded (encoder unknown).
tsr_status index_caption_encoder(store_index *ix, char *out, size_t n);
// Records `text` (a record, or "" for nothing) as the store's encoder: with none recorded
// it is written; with the same one nothing changes; with another, TSR_EMISMATCH naming
// both, nothing written (the embeddings of two encoders in one store would be a silent mix).
tsr_status index_set_caption_encoder(store_index *ix, const char *text);

#endif
