// ingest/encode.h — write RGB frames as an H.264 MP4 through libavcodec/libavformat.
//
// Used by `tessera index export` (tokens back to video) and by `tessera sample`.
// The file is written to PATH.tmp and renamed to PATH on close, so a crash never leaves
// a half-written video under the final name.
#ifndef TESSERA_INGEST_ENCODE_H
#define TESSERA_INGEST_ENCODE_H

#include <stdint.h>
#include "core/err.h"

typedef struct video_encoder video_encoder;

typedef struct {
  int width, height;       // frame size in pixels (even sizes; odd ones are padded)
  int fps_num, fps_den;    // frame rate
  int crf;                 // x264 constant rate factor (lower = better; 0 = lossless)
} encode_opts;

tsr_status video_encoder_open(video_encoder **e, const char *path, const encode_opts *o);
// rgb: (height, width, 3) uint8, full range.
tsr_status video_encoder_write_rgb(video_encoder *e, const uint8_t *rgb);
// Flushes the encoder, writes the trailer, renames PATH.tmp to PATH.
tsr_status video_encoder_finish(video_encoder *e);
// Frees; if not finished, removes the temporary file.
void video_encoder_free(video_encoder **e);

#endif
