// ingest/decode.c — one source to frames (decode.h): open, decode, select by time, convert.
#include "ingest/decode.h"

#include <limits.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fs.h"
#include "ingest/decode_internal.h"

static const char *av_err(int rc, char *buf) {
  av_strerror(rc, buf, AV_ERROR_MAX_STRING_SIZE);
  return buf;
}

// Clockwise display rotation from the stream's display matrix, snapped to 0/90/180/270.
static int stream_rotation(const AVStream *st) {
  const int32_t *m = (const int32_t *)av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, NULL);
  if (!m) return 0;
  double ccw = av_display_rotation_get(m);  // counter-clockwise degrees
  if (isnan(ccw)) return 0;
  long cw = lround(-ccw / 90.0) * 90 % 360;
  if (cw < 0) cw += 360;
  return (int)cw;
}

// Output geometry: square pixels, rotation, short side, centre crop to multiples.
static tsr_status plan_geometry(decode_ctx *d, const decode_opts *o, decode_info *info) {
  double dw = info->src_w * (double)info->sar_num / info->sar_den, dh = info->src_h;
  if (d->rotation == 90 || d->rotation == 270) {
    double t = dw;
    dw = dh;
    dh = t;
  }
  if (dw < 0.5 || dh < 0.5)
    return err_set(TSR_EDECODE, "%s: video has no usable size (%dx%d)", d->path, info->src_w,
                   info->src_h);
  if (dw <= dh) {
    d->disp_w = o->short_side;
    d->disp_h = (int)lround(dh * o->short_side / dw);
  } else {
    d->disp_h = o->short_side;
    d->disp_w = (int)lround(dw * o->short_side / dh);
  }
  d->out_w = d->disp_w - d->disp_w % o->mult_w;
  d->out_h = d->disp_h - d->disp_h % o->mult_h;
  if (d->out_w <= 0 || d->out_h <= 0)
    return err_set(TSR_EDECODE,
                   "%s: resized frame %dx%d is smaller than one %dx%d patch; use a larger "
                   "--short-side or a smaller --patch",
                   d->path, d->disp_w, d->disp_h, o->mult_w, o->mult_h);
  d->crop_x = (d->disp_w - d->out_w) / 2;
  d->crop_y = (d->disp_h - d->out_h) / 2;
  int swap = d->rotation == 90 || d->rotation == 270;
  d->scaled_w = swap ? d->disp_h : d->disp_w;
  d->scaled_h = swap ? d->disp_w : d->disp_h;
  d->scaled = malloc((size_t)d->scaled_w * d->scaled_h * 3);
  if (!d->scaled) return err_set(TSR_ENOMEM, "%s: out of memory for a frame", d->path);
  info->out_w = d->out_w;
  info->out_h = d->out_h;
  return TSR_OK;
}

tsr_status decode_open(decode_ctx **out, const char *path, const decode_opts *o,
                       decode_info *info) {
  char eb[AV_ERROR_MAX_STRING_SIZE];
  tsr_status st = TSR_OK;
  *out = NULL;
  memset(info, 0, sizeof *info);
  if (o->fps_num <= 0 || o->fps_den <= 0 || o->short_side <= 0 || o->mult_w <= 0 ||
      o->mult_h <= 0)
    return err_set(TSR_EINVAL, "decode: invalid options (fps %d/%d, short side %d)", o->fps_num,
                   o->fps_den, o->short_side);
  // libav opens the file itself: a FIFO put where a video was listed would block the worker
  if ((st = fs_check_regular(path))) return st;
  decode_ctx *d = calloc(1, sizeof *d);
  if (!d) return err_set(TSR_ENOMEM, "%s: out of memory", path);
  snprintf(d->path, sizeof d->path, "%s", path);
  av_reduce(&d->out_tb.num, &d->out_tb.den, o->fps_den, o->fps_num, INT_MAX);

  int rc = avformat_open_input(&d->fmt, path, NULL, NULL);
  if (rc < 0) {
    st = err_set(TSR_EDECODE, "%s: cannot open as media (%s); is it a video file?", path,
                 av_err(rc, eb));
    goto fail;
  }
  if ((rc = avformat_find_stream_info(d->fmt, NULL)) < 0) {
    st = err_set(TSR_EDECODE, "%s: cannot read stream information (%s)", path, av_err(rc, eb));
    goto fail;
  }
  const AVCodec *codec = NULL;
  int si = av_find_best_stream(d->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
  if (si >= 0 && (d->fmt->streams[si]->disposition & AV_DISPOSITION_ATTACHED_PIC)) {
    si = AVERROR_STREAM_NOT_FOUND;  // cover art only: look for a real video stream
    for (unsigned i = 0; i < d->fmt->nb_streams; i++) {
      AVStream *s = d->fmt->streams[i];
      if (s->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
          !(s->disposition & AV_DISPOSITION_ATTACHED_PIC) &&
          (codec = avcodec_find_decoder(s->codecpar->codec_id))) {
        si = (int)i;
        break;
      }
    }
  }
  if (si == AVERROR_STREAM_NOT_FOUND) {
    st = err_set(TSR_EDECODE, "%s: no video stream (audio-only or data file)", path);
    goto fail;
  }
  if (si < 0 || !codec) {
    st = err_set(TSR_EDECODE, "%s: no decoder for its video stream (%s)", path,
                 si < 0 ? av_err(si, eb) : "unsupported codec");
    goto fail;
  }
  d->st = d->fmt->streams[si];
  AVCodecParameters *par = d->st->codecpar;
  if (par->width <= 0 || par->height <= 0 || par->width > 16384 || par->height > 16384 ||
      (int64_t)par->width * par->height > o->max_pixels) {
    st = err_set(TSR_EDECODE, "%s: unsupported video size %dx%d (limit %lld pixels, 16384 a side)",
                 path, par->width, par->height, (long long)o->max_pixels);
    goto fail;
  }
  if (!(d->dec = avcodec_alloc_context3(codec)) ||
      avcodec_parameters_to_context(d->dec, par) < 0) {
    st = err_set(TSR_ENOMEM, "%s: cannot set up the %s decoder", path, codec->name);
    goto fail;
  }
  d->dec->thread_count = o->threads;
  d->dec->thread_type = FF_THREAD_FRAME | FF_THREAD_SLICE;
  d->dec->pkt_timebase = d->st->time_base;
  if ((rc = avcodec_open2(d->dec, codec, NULL)) < 0) {
    st = err_set(TSR_EDECODE, "%s: cannot open the %s decoder (%s)", path, codec->name,
                 av_err(rc, eb));
    goto fail;
  }
  d->pkt = av_packet_alloc();
  d->frame = av_frame_alloc();
  d->cur = av_frame_alloc();
  d->next = av_frame_alloc();
  if (!d->pkt || !d->frame || !d->cur || !d->next) {
    st = err_set(TSR_ENOMEM, "%s: out of memory", path);
    goto fail;
  }

  snprintf(info->codec, sizeof info->codec, "%s", codec->name);
  const char *pf = av_get_pix_fmt_name((enum AVPixelFormat)par->format);
  snprintf(info->pix_fmt, sizeof info->pix_fmt, "%s", pf ? pf : "unknown");
  info->src_w = par->width;
  info->src_h = par->height;
  AVRational sar = av_guess_sample_aspect_ratio(d->fmt, d->st, NULL);
  if (sar.num <= 0 || sar.den <= 0) sar = (AVRational){1, 1};
  av_reduce(&sar.num, &sar.den, sar.num, sar.den, 1 << 20);
  info->sar_num = sar.num;
  info->sar_den = sar.den;
  d->rotation = info->rotation = stream_rotation(d->st);
  AVRational fr = d->st->avg_frame_rate.num > 0 ? d->st->avg_frame_rate : d->st->r_frame_rate;
  info->src_fps = fr.num > 0 && fr.den > 0 ? av_q2d(fr) : 0;
  if (d->st->duration > 0) info->duration_s = d->st->duration * av_q2d(d->st->time_base);
  else if (d->fmt->duration > 0) info->duration_s = d->fmt->duration / (double)AV_TIME_BASE;
  if ((st = plan_geometry(d, o, info))) goto fail;
  d->end_idx = d->stop_idx = INT64_MAX;
  *out = d;
  return TSR_OK;
fail:
  decode_free(&d);
  return st;
}

// Reads packets and feeds the decoder until a frame comes out (returns 1), or the
// stream is exhausted (0). Damage is counted and skipped.
static int decode_pull(decode_ctx *d) {
  for (;;) {
    int rc = avcodec_receive_frame(d->dec, d->frame);
    if (rc == 0) return 1;
    if (rc == AVERROR_EOF) return 0;
    if (rc != AVERROR(EAGAIN)) {  // a broken picture: skip it, keep decoding
      d->stats.corrupt_packets++;
      continue;
    }
    if (d->demux_eof) return 0;  // cannot happen after a flush, but stay safe
    rc = av_read_frame(d->fmt, d->pkt);
    if (rc < 0) {
      if (rc != AVERROR_EOF) {
        char eb[AV_ERROR_MAX_STRING_SIZE];
        d->stats.truncated = 1;
        snprintf(d->stats.note, sizeof d->stats.note, "read error (%s)", av_err(rc, eb));
      }
      d->demux_eof = 1;
      avcodec_send_packet(d->dec, NULL);  // flush: drain the frames still inside
      continue;
    }
    if (d->pkt->stream_index == d->st->index) {
      rc = avcodec_send_packet(d->dec, d->pkt);
      if (rc < 0 && rc != AVERROR(EAGAIN)) d->stats.corrupt_packets++;
    }
    av_packet_unref(d->pkt);
  }
}

// Timestamp (stream time base) and duration of the frame just decoded.
static void frame_times(decode_ctx *d, AVFrame *f, int64_t *pts, int64_t *dur) {
  int64_t p = f->best_effort_timestamp;
  if (p == AV_NOPTS_VALUE) p = f->pts;
  if (p == AV_NOPTS_VALUE) p = d->has_prev ? d->prev_pts + d->prev_dur : 0;
  int64_t du = f->pkt_duration;
  if (du <= 0) {
    AVRational fr = d->st->avg_frame_rate.num > 0 ? d->st->avg_frame_rate : d->st->r_frame_rate;
    if (fr.num > 0 && fr.den > 0) du = av_rescale_q(1, av_inv_q(fr), d->st->time_base);
    else if (d->has_prev && p > d->prev_pts) du = p - d->prev_pts;
    else du = 1;
  }
  *pts = p;
  *dur = du;
}

int64_t decode_out_index(const decode_ctx *d, int64_t pts) {
  return av_rescale_q_rnd(pts - d->pts0, d->st->time_base, d->out_tb,
                          AV_ROUND_NEAR_INF | AV_ROUND_PASS_MINMAX);
}

// A key frame: decoding can start there (after a seek, what comes before is not shown).
static int frame_is_key(const AVFrame *f) {
#if LIBAVUTIL_VERSION_INT >= AV_VERSION_INT(58, 7, 100)
  return (f->flags & AV_FRAME_FLAG_KEY) != 0;
#else
  return f->key_frame != 0;
#endif
}

// Keeps presentation order: jitter is flattened, and a jump back (a concatenated or
// restarted stream) continues the timeline right after the previous frame.
static int64_t monotonic_pts(decode_ctx *d, int64_t pts) {
  pts += d->ts_offset;
  if (!d->has_prev || pts >= d->prev_pts) return pts;
  if (d->prev_pts - pts <= 2 * d->prev_dur) return d->prev_pts;
  d->ts_offset += d->prev_pts + d->prev_dur - pts;
  return d->prev_pts + d->prev_dur;
}

int decode_advance(decode_ctx *d) {
  for (;;) {
    if (!decode_pull(d)) {
      d->dec_eof = 1;
      return 0;
    }
    d->stats.decoded_frames++;
    if (!d->need_key || frame_is_key(d->frame)) break;
    d->need_key--;             // a stream that flags no key frame is shown after a while
    av_frame_unref(d->frame);  // a leading picture of a seek: its references were skipped
  }
  d->need_key = 0;
  if (d->frame->flags & AV_FRAME_FLAG_CORRUPT) d->stats.corrupt_packets++;
  int64_t pts, dur;
  frame_times(d, d->frame, &pts, &dur);
  if (!d->has_pts0) {
    d->pts0 = pts;
    d->has_pts0 = 1;
  }
  if (!d->has_first) {
    d->has_first = 1;
    d->stats.first_pts_s = pts * av_q2d(d->st->time_base);
  }
  pts = monotonic_pts(d, pts);
  d->has_prev = 1;
  d->prev_pts = pts;
  d->prev_dur = dur;
  d->stats.last_end_s = (pts + dur) * av_q2d(d->st->time_base);
  int64_t idx = decode_out_index(d, pts);
  if (idx < 0) idx = 0;
  AVFrame *dst = d->has_cur ? d->next : d->cur;
  av_frame_unref(dst);
  av_frame_move_ref(dst, d->frame);
  if (d->has_cur) {
    d->has_next = 1;
    d->next_idx = idx;
  } else {
    d->has_cur = 1;
    d->cur_idx = idx;
    d->cur_converted = 0;
  }
  d->end_idx = decode_out_index(d, pts + dur);
  return 1;
}

// Converts d->cur to RGB at the resize size (colour matrix and range from the frame).
static tsr_status convert_cur(decode_ctx *d) {
  AVFrame *f = d->cur;
  d->sws = sws_getCachedContext(d->sws, f->width, f->height, (enum AVPixelFormat)f->format,
                                d->scaled_w, d->scaled_h, AV_PIX_FMT_RGB24, SWS_BICUBIC, NULL,
                                NULL, NULL);
  if (!d->sws)
    return err_set(TSR_EDECODE, "%s: cannot convert frames of %dx%d %s to RGB", d->path,
                   f->width, f->height,
                   av_get_pix_fmt_name((enum AVPixelFormat)f->format) ?: "unknown");
  int src_full = f->color_range == AVCOL_RANGE_JPEG;
  const int *src_coef = sws_getCoefficients(f->colorspace == AVCOL_SPC_UNSPECIFIED
                                                ? SWS_CS_DEFAULT
                                                : (int)f->colorspace);
  sws_setColorspaceDetails(d->sws, src_coef, src_full, sws_getCoefficients(SWS_CS_DEFAULT), 1, 0,
                           1 << 16, 1 << 16);
  uint8_t *dst[4] = {d->scaled};
  int dst_stride[4] = {d->scaled_w * 3};
  if (sws_scale(d->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst,
                dst_stride) != d->scaled_h)
    return err_set(TSR_EDECODE, "%s: frame conversion failed", d->path);
  d->cur_converted = 1;
  return TSR_OK;
}

// Rotates (clockwise d->rotation) and crops d->scaled into rgb (out_h, out_w, 3).
static void rotate_crop(const decode_ctx *d, uint8_t *rgb) {
  const int sw = d->scaled_w, sh = d->scaled_h;
  for (int y = 0; y < d->out_h; y++) {
    int dy = y + d->crop_y;  // row in the display-orientation image
    uint8_t *o = rgb + (size_t)y * d->out_w * 3;
    if (d->rotation == 0) {
      memcpy(o, d->scaled + ((size_t)dy * sw + d->crop_x) * 3, (size_t)d->out_w * 3);
      continue;
    }
    for (int x = 0; x < d->out_w; x++) {
      int dx = x + d->crop_x, sx, sy;
      switch (d->rotation) {
      case 90: sx = dy; sy = sh - 1 - dx; break;       // clockwise: display (dx,dy) <- src
      case 180: sx = sw - 1 - dx; sy = sh - 1 - dy; break;
      default: sx = sw - 1 - dy; sy = dx; break;       // 270 clockwise
      }
      const uint8_t *p = d->scaled + ((size_t)sy * sw + sx) * 3;
      o[3 * x] = p[0];
      o[3 * x + 1] = p[1];
      o[3 * x + 2] = p[2];
    }
  }
}

// End of stream: judges truncation against the duration the file claims.
static void judge_truncation(decode_ctx *d) {
  if (d->stats.truncated || !d->st) return;
  double claimed_end = 0;
  const int64_t st0 = d->st->start_time != AV_NOPTS_VALUE ? d->st->start_time : 0;
  const int64_t fmt0 = d->fmt->start_time != AV_NOPTS_VALUE ? d->fmt->start_time : 0;
  if (d->st->duration > 0)
    claimed_end = (d->st->duration + st0) * av_q2d(d->st->time_base);
  else if (d->fmt->duration > 0)
    claimed_end = (d->fmt->duration + fmt0) / (double)AV_TIME_BASE;
  double shortfall = claimed_end - d->stats.last_end_s;
  if (claimed_end > 0 && d->stats.decoded_frames > 0 && shortfall > 1.0 + 0.05 * claimed_end) {
    d->stats.truncated = 1;
    snprintf(d->stats.note, sizeof d->stats.note,
             "truncated: decodable up to %.2f s of the %.2f s the file claims",
             d->stats.last_end_s, claimed_end);
  }
}

// Output frames one source frame may fill: DECODE_MAX_HOLD_S at the target rate.
static int64_t max_hold(const decode_ctx *d) {
  return av_rescale_q(DECODE_MAX_HOLD_S, (AVRational){1, 1}, d->out_tb);
}

// d->cur has been shown DECODE_MAX_HOLD_S and the next frame (or the stream's end) is at
// output index `next`: the source ends here, as a truncated one (its clips so far kept).
static void cut_at_hold(decode_ctx *d, int64_t next) {
  const double fs = av_q2d(d->out_tb);
  const double at = d->stats.first_pts_s + (double)d->cur_idx * fs;
  d->stats.truncated = 1;
  snprintf(d->stats.note, sizeof d->stats.note,
           "cut at %.2f s: the frame there lasts %.0f s (a timestamp gap, or a frame rate "
           "that low), a frame is held at most %d s; the rest of the source is left out", at,
           (double)(next - d->cur_idx) * fs, DECODE_MAX_HOLD_S);
  d->has_cur = d->has_next = 0;
  d->dec_eof = 1;  // nothing more of the source: writing on would store the gap's copies
}

tsr_status decode_next(decode_ctx *d, uint8_t *rgb, int *got) {
  *got = 0;
  for (;;) {
    if (d->n >= d->stop_idx) return TSR_OK;  // a span's end: the frames stay for the next
    if (!d->has_cur) {
      if (d->dec_eof || !decode_advance(d)) break;
      continue;
    }
    if (!d->has_next && !d->dec_eof) {
      decode_advance(d);  // look ahead: the next frame's index bounds the current one's
      continue;
    }
    int64_t until = d->has_next ? d->next_idx : d->end_idx;
    if (until - d->cur_idx > max_hold(d)) {  // a gap or a frame of absurd duration
      until = d->cur_idx + max_hold(d);
      if (d->n >= until) {
        cut_at_hold(d, d->has_next ? d->next_idx : d->end_idx);
        break;
      }
    }
    if (d->n < until && d->n >= d->cur_idx) {
      if (!d->cur_converted) {
        tsr_status st = convert_cur(d);
        if (st) return st;
      }
      rotate_crop(d, rgb);
      d->n++;
      d->stats.output_frames++;
      *got = 1;
      return TSR_OK;
    }
    if (d->n < d->cur_idx) {  // gap before cur (a span, or a video starting late): skip it
      d->n = d->cur_idx;
      continue;
    }
    if (!d->has_next) break;  // end of stream and cur fully shown
    AVFrame *t = d->cur;      // next becomes cur
    d->cur = d->next;
    d->next = t;
    av_frame_unref(d->next);
    d->cur_idx = d->next_idx;
    d->has_next = 0;
    d->cur_converted = 0;
  }
  judge_truncation(d);
  return TSR_OK;
}

void decode_get_stats(const decode_ctx *d, decode_stats *s) { *s = d->stats; }

void decode_free(decode_ctx **pd) {
  decode_ctx *d = *pd;
  if (!d) return;
  av_frame_free(&d->frame);
  av_frame_free(&d->cur);
  av_frame_free(&d->next);
  av_packet_free(&d->pkt);
  avcodec_free_context(&d->dec);
  avformat_close_input(&d->fmt);
  sws_freeContext(d->sws);
  free(d->scaled);
  free(d);
  *pd = NULL;
}
