// ingest/decode.h — one video source to frames at the target rate and geometry.
//
// Streams: holds at most a couple of decoded frames, whatever the video's length.
// Pipeline: demux (libavformat) -> best video stream -> decode (libavcodec, threaded)
// -> select frames by presentation time at the target rate -> convert to RGB24 with the
// source's colour matrix and range (libswscale; any bit depth or chroma subsampling)
// -> square pixels (SAR) -> display rotation (0/90/180/270) -> resize so the short side
// is `short_side` -> centre crop to multiples of (mult_h, mult_w).
//
// Frame selection (the same rule as the ffmpeg CLI's fps filter, so tests can compare
// pixels with it): every source frame i gets the output index
// idx_i = round((pts_i - pts_0) * fps) (halves round up), where pts_0 is the first decoded
// frame's timestamp. Frame i is shown at output indices [idx_i, idx_{i+1}); the last
// frame up to round((pts_last + duration_last - pts_0) * fps). Variable frame rates and
// non-zero start times are therefore handled by timestamps, not frame counts. Frames
// that get no output index are skipped without conversion. Spans of a source
// (decode_span.h) use the same rule on the ffmpeg CLI's timeline instead, whose 0 is the
// container's start.
//
// A source frame is shown for at most DECODE_MAX_HOLD_S seconds: a longer one (a timestamp
// gap, or a frame rate of one frame per hours) would fill the store with copies of one
// picture, so the source ends there as a truncated one (decode_stats.note says where).
#ifndef TESSERA_INGEST_DECODE_H
#define TESSERA_INGEST_DECODE_H

#define DECODE_MAX_HOLD_S 10

#include <stddef.h>
#include <stdint.h>
#include "core/err.h"

typedef struct {
  int fps_num, fps_den;  // target frame rate
  int short_side;        // short side after resize, before crop (pixels)
  int mult_h, mult_w;    // crop each side down to a multiple of these (patch size)
  int threads;           // decoder threads (0: libavcodec's choice)
  int64_t max_pixels;    // refuse sources whose coded size exceeds this (absurd sizes)
} decode_opts;

typedef struct {
  char codec[32];        // decoder name
  char pix_fmt[32];      // source pixel format
  int src_w, src_h;      // coded size
  int sar_num, sar_den;  // sample aspect ratio (1:1 if unset)
  int rotation;          // clockwise degrees applied for display: 0, 90, 180, 270
  double src_fps;        // average frame rate of the stream (0 if unknown)
  double duration_s;     // duration claimed by the container/stream (0 if unknown)
  int out_w, out_h;      // output frame size after SAR, rotation, resize and crop
} decode_info;

typedef struct {
  int64_t decoded_frames;   // source frames decoded
  int64_t output_frames;    // frames returned by decode_next
  int64_t corrupt_packets;  // packets the decoder rejected (skipped)
  int64_t seeks;            // seeks made for spans (decode_span.h)
  double first_pts_s;       // timestamp of the first decoded frame (t_0)
  double last_end_s;        // end of the last decoded frame's display interval
  int truncated;            // stream ended well before the claimed duration / read error
  char note[256];           // human-readable summary of any damage ("" if clean)
} decode_stats;

typedef struct decode_ctx decode_ctx;

// Opens `path`, picks the best video stream, opens its decoder and computes the output
// geometry. Fails with a clear message (naming the file) for: unreadable or non-media
// files, no video stream, unsupported codec, absurd or zero sizes, a geometry too small
// for one patch.
tsr_status decode_open(decode_ctx **d, const char *path, const decode_opts *o, decode_info *info);

// Next output frame, RGB24 (out_h, out_w, 3) into `rgb`. *got = 0 at the end.
// Damage mid-stream (corrupt packets, truncation) is skipped and counted in the stats;
// an error is returned only when nothing more can be read.
tsr_status decode_next(decode_ctx *d, uint8_t *rgb, int *got);

void decode_get_stats(const decode_ctx *d, decode_stats *s);
void decode_free(decode_ctx **d);

#endif
