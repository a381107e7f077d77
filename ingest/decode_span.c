// ingest/decode_span.c — spans of one source (decode_span.h): the CLI's frame selection
// as grid indices, the choice between seeking and decoding on, and the seek itself.
#include "ingest/decode_span.h"

#include <libavutil/common.h>
#include <libavutil/mathematics.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/decode_internal.h"

// ceil(a / b) for b > 0 and any sign of a.
static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); }

// Seconds to microseconds, as the CLI parses -ss and -to.
static int64_t to_us(double s) { return llround(s * 1e6); }

// The target rate F = num / den (the inverse of the output time base).
static void rate_of(const decode_ctx *d, int64_t *num, int64_t *den) {
  *num = d->out_tb.den;
  *den = d->out_tb.num;
}

// r of decode_span.h: S * F rounded to the nearest with halves down, computed as ffmpeg.c
// does in double precision (its timestamps carry b extra bits and a nudge of 2^-17, so no
// value is ever exactly a half).
static int64_t encoder_start(int64_t start_us, int64_t num, int64_t den) {
  const int b = av_clip(29 - av_log2((unsigned)num), 0, 16);
  int64_t q = av_rescale_rnd(start_us, num << b, 1000000 * den, AV_ROUND_NEAR_INF);
  return ceil_div(q * ((int64_t)1 << (17 - b)) - 1 - ((int64_t)1 << 16), (int64_t)1 << 17);
}

// The CLI's timeline begins at the container's start (stream time base).
static void span_timeline(decode_ctx *d) {
  int64_t t0 = 0;
  if (d->fmt->start_time != AV_NOPTS_VALUE)
    t0 = av_rescale_q(d->fmt->start_time, AV_TIME_BASE_Q, d->st->time_base);
  else if (d->st->start_time != AV_NOPTS_VALUE)
    t0 = d->st->start_time;
  d->pts0 = t0;
  d->has_pts0 = 1;
  d->span.on = 1;
}

// Drops every decoded frame and the decoder's state after a seek.
static void forget_frames(decode_ctx *d) {
  avcodec_flush_buffers(d->dec);
  av_frame_unref(d->cur);
  av_frame_unref(d->next);
  d->has_cur = d->has_next = d->cur_converted = 0;
  d->has_prev = 0;
  d->ts_offset = 0;
  d->demux_eof = d->dec_eof = 0;
  d->end_idx = INT64_MAX;
  d->need_key = 300;  // leading pictures of an open GOP, not a stream without key flags
}

// Grid index s in the stream's time base (rounded down: a time at or before it).
static int64_t grid_to_ts(const decode_ctx *d, int64_t s) {
  return d->pts0 + av_rescale_q_rnd(s, d->out_tb, d->st->time_base, AV_ROUND_DOWN);
}

// Seeks to the key frame at or before timestamp `ts` (or the nearest, `anywhere`) and
// decodes the first frame after it; 0 if the demuxer cannot seek there.
static int seek_and_take(decode_ctx *d, int64_t ts, int anywhere) {
  if (avformat_seek_file(d->fmt, d->st->index, INT64_MIN, ts, anywhere ? INT64_MAX : ts, 0) < 0 &&
      av_seek_frame(d->fmt, d->st->index, ts, AVSEEK_FLAG_BACKWARD) < 0)
    return 0;
  d->stats.seeks++;
  forget_frames(d);
  decode_advance(d);
  return 1;
}

// Puts the decoder where grid index s can be shown: the first key frame shows at or before
// s, or the file starts after it. Backs off 1, 2, 4 ... s when a seek lands too late.
static tsr_status seek_to(decode_ctx *d, int64_t s) {
  const int64_t target = grid_to_ts(d, s);
  const int64_t second = av_rescale_q(1, (AVRational){1, 1}, d->st->time_base);
  const int64_t begin = d->st->start_time != AV_NOPTS_VALUE ? d->st->start_time : d->pts0;
  for (int64_t back = 0;;) {
    const int at_begin = target - back <= begin;
    if (!seek_and_take(d, at_begin ? begin : target - back, at_begin)) {
      if (at_begin) break;
      back = target - begin;  // cannot seek there: try the start
      continue;
    }
    if (at_begin || !d->has_cur || d->cur_idx <= s) return TSR_OK;
    back = back ? 2 * back : second;
  }
  // No timestamp seek works: start over from the first byte (formats without an index).
  if (avformat_seek_file(d->fmt, -1, INT64_MIN, 0, 0, AVSEEK_FLAG_BYTE) < 0)
    return err_set(TSR_EDECODE, "%s: span %d: cannot seek back to %.3f s", d->path,
                   d->span.index, d->span.start_us / 1e6);
  d->stats.seeks++;
  forget_frames(d);
  d->need_key = 0;
  return TSR_OK;
}

// Whether seeking ahead to grid index s skips decoding: the key frame at or before it lies
// beyond the last decoded frame (by the index), or, without one, the gap is large.
static int worth_seeking(decode_ctx *d, int64_t s) {
  const int64_t target = grid_to_ts(d, s);
  const int64_t pos = d->has_prev ? d->prev_pts - d->ts_offset : d->pts0;
  if (avformat_index_get_entries_count(d->st) > 0) {
    int i = av_index_search_timestamp(d->st, target, AVSEEK_FLAG_BACKWARD);
    if (i < 0) return 0;
    const AVIndexEntry *e = avformat_index_get_entry(d->st, i);
    return e && e->timestamp > pos;
  }
  return (target - pos) * av_q2d(d->st->time_base) > DECODE_SPAN_SEEK_GAP_S;
}

// Checks the span, sets its grid limits (decode_span.h) and the decoder's stop.
static tsr_status span_limits(decode_ctx *d, int index, const decode_span *sp) {
  decode_span_state *ss = &d->span;
  const int to_end = sp->end_s == DECODE_SPAN_TO_END;
  memset(ss, 0, sizeof *ss);
  ss->on = 1;
  ss->index = index;
  ss->first = -1;
  if (!isfinite(sp->start_s) || sp->start_s < 0 || sp->start_s > 1e9 ||
      (!to_end && (!isfinite(sp->end_s) || sp->end_s <= sp->start_s || sp->end_s > 1e9)))
    return err_set(TSR_EINVAL, "%s: span %d [%g, %g): not a span (want 0 <= start < end)",
                   d->path, index, sp->start_s, sp->end_s);
  int64_t num, den;
  rate_of(d, &num, &den);
  ss->start_us = to_us(sp->start_s);
  ss->end_us = to_end ? -1 : to_us(sp->end_s);
  ss->s = av_rescale_rnd(ss->start_us, num, 1000000 * den, AV_ROUND_NEAR_INF);
  ss->max_frames = INT64_MAX;
  d->stop_idx = INT64_MAX;
  if (!to_end) {
    const int64_t dur = ss->end_us - ss->start_us;
    ss->max_frames = av_rescale_rnd(dur, num, 1000000 * den, AV_ROUND_NEAR_INF);
    d->stop_idx = encoder_start(ss->start_us, num, den) +
                  av_rescale_rnd(dur, num, 1000000 * den, AV_ROUND_UP);
  }
  return TSR_OK;
}

tsr_status decode_span_begin(decode_ctx *d, int index, const decode_span *sp) {
  if (!d->span.on && d->stats.decoded_frames > 0)
    return err_set(TSR_EINVAL, "%s: spans must begin before decode_next reads the source",
                   d->path);
  if (!d->span.on) span_timeline(d);
  tsr_status st = span_limits(d, index, sp);
  if (st) return st;
  decode_span_state *ss = &d->span;
  ss->dec0 = d->stats.decoded_frames;
  // Before the frame on screen (an overlap): seek back. Ahead: seek if that saves
  // decoding, else decode on from here. The frame on screen shows until the next one, so a
  // span starting within it needs nothing new.
  const int behind = d->has_cur && d->cur_idx > ss->s;
  if (behind || (!d->dec_eof && worth_seeking(d, ss->s))) {
    ss->seeked = 1;
    if ((st = seek_to(d, ss->s))) return st;
  }
  d->n = ss->s;
  return TSR_OK;
}

tsr_status decode_span_next(decode_ctx *d, uint8_t *rgb, int *got) {
  decode_span_state *ss = &d->span;
  tsr_status st = decode_next(d, rgb, got);
  if (st || !ss->on) return st;
  if (*got) {
    if (ss->first < 0) {  // trim's duration counts from the first frame shown
      ss->first = d->n - 1;
      if (ss->max_frames < INT64_MAX && ss->first + ss->max_frames < d->stop_idx)
        d->stop_idx = ss->first + ss->max_frames;
    }
    ss->frames++;
    return TSR_OK;
  }
  if (d->n >= d->stop_idx) return TSR_OK;  // the span's end
  if (ss->end_us >= 0) ss->ended_early = 1;
  if (ss->first < 0 && (d->end_idx == INT64_MAX || d->end_idx <= ss->s)) {
    char end[32] = "end";
    if (ss->end_us >= 0) snprintf(end, sizeof end, "%.3f", ss->end_us / 1e6);
    ss->past_end = 1;
    return err_set(TSR_EINVAL, "%s: span %d [%.3f, %s) starts at or after the end of the "
                   "video (%.3f s)", d->path, ss->index, ss->start_us / 1e6, end,
                   d->stats.last_end_s - d->pts0 * av_q2d(d->st->time_base));
  }
  return TSR_OK;
}

void decode_span_get(const decode_ctx *d, decode_span_result *r) {
  const decode_span_state *ss = &d->span;
  int64_t num, den;
  rate_of(d, &num, &den);
  memset(r, 0, sizeof *r);
  r->frames = ss->frames;
  r->first_index = ss->first;
  if (ss->first >= 0) {
    r->start_s = (double)ss->first * den / num;
    r->end_s = (double)(ss->first + ss->frames) * den / num;
  }
  r->cut_at_end = ss->ended_early;
  r->seeked = ss->seeked;
  r->decoded_frames = d->stats.decoded_frames - ss->dec0;
}

typedef struct {
  double start;
  int index;
} span_order;

static int by_start(const void *a, const void *b) {
  const span_order *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

// One span through fn; its outcome in *r. Non-OK only for what stops the source.
static tsr_status run_span(decode_ctx *d, int k, const decode_span *sp, decode_span_fn fn,
                           void *arg, uint8_t *rgb, decode_span_result *r) {
  tsr_status st = decode_span_begin(d, k, sp);
  for (int64_t f = 0; !st; f++) {
    int got = 0;
    if ((st = decode_span_next(d, rgb, &got)) || !got) break;
    if ((st = fn(arg, k, f, rgb))) return st;
  }
  decode_span_get(d, r);
  if (st != TSR_EINVAL) return st;
  r->status = st;
  snprintf(r->error, sizeof r->error, "%s", err_msg());
  return TSR_OK;
}

tsr_status decode_span_order(const decode_span *spans, int n, int *order) {
  span_order *o = malloc(sizeof *o * (size_t)(n > 0 ? n : 1));
  if (!o) return err_set(TSR_ENOMEM, "out of memory ordering %d spans", n);
  for (int i = 0; i < n; i++) o[i] = (span_order){spans[i].start_s, i};
  qsort(o, (size_t)n, sizeof *o, by_start);
  for (int i = 0; i < n; i++) order[i] = o[i].index;
  free(o);
  return TSR_OK;
}

tsr_status decode_spans(decode_ctx *d, const decode_span *spans, int n, decode_span_fn fn,
                        void *arg, decode_span_result *res) {
  int *order = malloc(sizeof *order * (size_t)(n > 0 ? n : 1));
  uint8_t *rgb = malloc((size_t)d->out_w * d->out_h * 3);
  tsr_status st = !order || !rgb ? err_set(TSR_ENOMEM, "%s: out of memory for %d spans",
                                           d->path, n)
                                 : decode_span_order(spans, n, order);
  for (int i = 0; i < n && !st; i++)
    st = run_span(d, order[i], &spans[order[i]], fn, arg, rgb, &res[order[i]]);
  free(order);
  free(rgb);
  return st;
}
