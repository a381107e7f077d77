// ingest/decode_span.h — spans [start, end) of one source, decoded in one forward pass.
//
// Manifests name clips as spans of long source videos. A decoder opened once (decode.h
// decode_open: same geometry, conversion and target rate) delivers the frames of one span
// after another. A span that starts ahead of the decoder seeks to the key frame at or
// before its start when that skips decoding, and decodes straight on otherwise (frames
// before the span are skipped without conversion), so spans taken in order never read
// the source twice.
//
// Timeline. Span times are seconds on the ffmpeg CLI's timeline: 0 is the container's
// start (the CLI shifts every input so that the file starts at 0, and -ss/-to count from
// there; a video stream that starts late starts late on it too). Times are taken to the
// microsecond, the CLI's precision. Output frames lie on the grid t_n = n / F (F the
// target rate), and grid frame n shows the last source frame i with
// round(t_i * F) <= n (decode.h's rule; round: halves away from zero), up to
// round(t_end * F), t_end the end of the last frame.
//
// Frame selection. A span shows exactly the frames that
//   ffmpeg -i SRC -ss START -to END -vf fps=F,... -fps_mode passthrough
// writes (-ss/-to after the input: output-side trimming). With S, E the span's times in
// microseconds and D = E - S, the frames are n = n0, n0 + 1, ... where
//   n0 = max(round(S * F), the video's first grid index)   (the trim filter's start, in
//        the fps filter's time base: the first frame may sit up to half a frame before S)
// and each n satisfies all of
//   n - n0 < round(D * F)          (the trim filter's duration, in frames)
//   n - r  < D * F                 (ffmpeg.c's recording-time check on encoder timestamps,
//                                   r = S * F rounded to the nearest, halves down; exactly
//                                   r = ceil((q * 2^(17-b) - 1 - 2^16) / 2^17) with
//                                   q = round(S * F * 2^b), b = clip(29 - log2(F num), 0, 16))
//   n < round(t_end * F)           (the video lasts).
// In effect: round(D * F) frames from round(S * F), one fewer when S * F is a half-integer
// (and D * F is an integer or has a fraction of a half or more). Without an end a span runs
// to the end of the video. The CLI's default vsync for a file with more than one stream
// (cfr) differs only by repeating frames: the first frame once more when S * F is a
// half-integer, or to fill from S when the video starts after S; tessera never repeats.
// Checked against the CLI on the real clips (tests/ingest/test_decode_span.c).
//
// Order. decode_spans takes spans in order of start (ties in the caller's order). A span
// that starts before the decoder's position (overlapping the previous one) seeks back, so
// the overlap is decoded again: the only case that re-reads the source.
//
// Seeking. A span seeks ahead when the key frame at or before its first frame (the
// demuxer's index) lies beyond the last decoded frame, or, when the demuxer has no index,
// when its start is more than DECODE_SPAN_SEEK_GAP_S past it. After a seek the first key
// frame decoded must show at or before the span's first frame (indexes keyed by decode
// time, open GOPs); if not, the seek is tried again 1, 2, 4 ... s earlier, down to the
// file's start. Frames decoded before that key frame are not shown.
//
// Ends. A span whose end lies past the video's end is cut there: its result says so
// (cut_at_end) and gives where it really ends (end_s). A span whose first frame would lie
// at or after the video's end is an error for that span alone, naming source and span.
#ifndef TESSERA_INGEST_DECODE_SPAN_H
#define TESSERA_INGEST_DECODE_SPAN_H

#include <stdint.h>

#include "core/err.h"
#include "ingest/decode.h"

#define DECODE_SPAN_TO_END (-1.0)   // end_s of a span that runs to the end of the video
#define DECODE_SPAN_SEEK_GAP_S 5.0  // seek ahead without an index when the gap is larger

typedef struct {
  double start_s;  // >= 0
  double end_s;    // > start_s, or DECODE_SPAN_TO_END
} decode_span;

typedef struct {
  tsr_status status;       // TSR_OK, or why the span has no frames (message in `error`)
  char error[512];
  int64_t frames;          // frames delivered
  int64_t first_index;     // grid index of the first frame (its time: first_index / F); -1: none
  double start_s, end_s;   // first_index / F and (first_index + frames) / F: what was delivered
  int cut_at_end;          // the video ended before the span's end (end_s is where it ends)
  int seeked;              // the span began with a seek
  int64_t decoded_frames;  // source frames decoded for the span (with a seek's run-up)
} decode_span_result;

// Starts span `sp` (the caller's number `index`, for messages) on a decoder from
// decode_open that has not run decode_next on its own. TSR_EINVAL for a span that is
// not one (negative or non-finite start, end not after start), naming source and span;
// TSR_EDECODE when the source cannot seek back to it.
tsr_status decode_span_begin(decode_ctx *d, int index, const decode_span *sp);

// The span's next frame, RGB24 (out_h, out_w, 3) into `rgb`; *got = 0 at the span's end.
// TSR_EINVAL (with *got = 0) when the video ends before the span's first frame.
tsr_status decode_span_next(decode_ctx *d, uint8_t *rgb, int *got);

// What the current span delivered so far (status TSR_OK: decode_spans fills it in).
void decode_span_get(const decode_ctx *d, decode_span_result *r);

// The order decode_spans takes spans in: order[k] (n of them) is the index of the k-th span
// to decode, by start, ties in the caller's order.
tsr_status decode_span_order(const decode_span *spans, int n, int *order);
// Called for every frame of every span: span is the index into the caller's array,
// frame counts from 0 within the span. A non-OK return stops decode_spans with it.
typedef tsr_status (*decode_span_fn)(void *arg, int span, int64_t frame, const uint8_t *rgb);

// All `n` spans of the source in one pass (order above), each frame through `fn`, each
// span's outcome in res[span]. A span that fails (TSR_EINVAL) fails alone; the return
// value is non-OK only for what stops the source: a decoder error or fn's error.
tsr_status decode_spans(decode_ctx *d, const decode_span *spans, int n, decode_span_fn fn,
                        void *arg, decode_span_result *res);

#endif
