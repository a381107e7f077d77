// ingest/decode_internal.h — what the decoder's files share (decode.c: opening, the frame
// pipeline, decode_next; decode_span.c: spans of a source, seeking). Not a public header:
// other code uses decode.h and decode_span.h.
#ifndef TESSERA_INGEST_DECODE_INTERNAL_H
#define TESSERA_INGEST_DECODE_INTERNAL_H

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <stdint.h>

#include "ingest/decode.h"

// Where the decoder stands in its current span (decode_span.h); all zero outside span mode.
typedef struct {
  int on;                // spans were begun: the timeline starts at the container's start
  int index;             // the caller's number for the current span (messages, results)
  int64_t start_us, end_us;  // the span asked for, microseconds (end_us < 0: to the end)
  int64_t s;             // first grid index the span may show (round(start * fps))
  int64_t max_frames;    // trim's frame budget from the first frame shown (INT64_MAX: none)
  int64_t first, frames; // grid index of the first frame shown (-1: none yet), frames shown
  int64_t dec0;          // decoded_frames when the span began
  int seeked;            // the span began with a seek
  int ended_early;       // the video ended before the span's end
  int past_end;          // the video ended before the span's first frame
} decode_span_state;

struct decode_ctx {
  char path[4096];
  AVFormatContext *fmt;
  AVCodecContext *dec;
  AVStream *st;
  AVPacket *pkt;
  AVFrame *frame;      // scratch for avcodec_receive_frame
  AVFrame *cur, *next; // frame on screen and the one after it (refs)
  int64_t cur_idx, next_idx;
  int has_cur, has_next;
  int cur_converted;   // `scaled` holds cur already (sources slower than the target)
  int64_t pts0;        // timestamp of output index 0 (stream time base)
  int has_pts0;
  int has_first;       // stats.first_pts_s is set
  int64_t prev_pts, prev_dur;
  int has_prev;        // prev_pts is set (a seek forgets it)
  int need_key;        // after a seek: this many frames before a key frame may be dropped
  int64_t ts_offset;   // added to timestamps after a backward jump (concatenated streams)
  int64_t n;           // next output index
  int64_t stop_idx;    // decode_next shows no index at or past this one (INT64_MAX: none)
  int64_t end_idx;     // output index after the last frame (known at end of stream)
  int demux_eof, dec_eof;
  AVRational out_tb;   // 1 / target fps (reduced)
  // geometry
  int rotation;        // clockwise degrees
  int scaled_w, scaled_h;  // resize target in the source's (unrotated) orientation
  int disp_w, disp_h;      // resized size in display orientation (before crop)
  int out_w, out_h, crop_x, crop_y;
  struct SwsContext *sws;
  uint8_t *scaled;     // (scaled_h, scaled_w, 3) rgb24
  decode_stats stats;
  decode_span_state span;
};

// Takes the next decoded frame into d->next (d->cur if there is none): 1, or 0 at the end
// of the stream (d->dec_eof set).
int decode_advance(decode_ctx *d);

// Output grid index of a timestamp (stream time base): round((pts - pts0) * fps), halves
// away from zero, as the ffmpeg CLI's fps filter rounds.
int64_t decode_out_index(const decode_ctx *d, int64_t pts);

#endif
