// ingest/encode.c — RGB24 frames to an H.264 MP4 (libavformat + libavcodec + libswscale).
//
// Encoder choice: libx264; else any other H.264 encoder that opens; else MPEG-4 part 2
// (a warning says so). Colour: RGB24 (full range) -> Y'CbCr with the BT.709 matrix,
// limited range, and the stream is tagged BT.709 / limited (VUI + MP4 'colr'), so players
// and ffmpeg convert it back with the same matrix. crf 0 with libx264 is lossless and
// uses 4:4:4 chroma; otherwise 4:2:0. Odd frame sizes are padded to even by repeating
// the last column/row. The loop follows FFmpeg's encode example: send_frame /
// receive_packet, flush with a NULL frame.
#include "ingest/encode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>

#include "core/fs.h"
#include "core/log.h"

struct video_encoder {
  fs_atomic out;         // the final name and PATH.tmp, written by libav (core/fs.h)
  AVFormatContext *fmt;
  AVCodecContext *cc;
  AVStream *st;
  struct SwsContext *sws;
  AVFrame *frame;        // encoder input (Y'CbCr)
  AVPacket *pkt;
  int in_w, in_h;        // size of the RGB frames given by the caller
  int w, h;              // encoded size (even)
  uint8_t *pad;          // (h, w, 3) padded RGB when the input size is odd, else NULL
  int64_t next_pts;      // in encoder time base (1 / fps)
  int header_written;
  int finished;
};

static const char *av_errstr(int e, char *buf, size_t n) {
  if (av_strerror(e, buf, n) < 0) snprintf(buf, n, "libav error %d", e);
  return buf;
}

#define AVERR(e) av_errstr((e), (char[AV_ERROR_MAX_STRING_SIZE]){0}, AV_ERROR_MAX_STRING_SIZE)

// Sets the codec context for `codec` and tries to open it. Returns the libav status.
static int try_open_codec(video_encoder *e, const AVCodec *codec, const encode_opts *o) {
  AVCodecContext *cc = avcodec_alloc_context3(codec);
  if (!cc) return AVERROR(ENOMEM);
  int lossless = (o->crf == 0 && codec->id == AV_CODEC_ID_H264);
  cc->codec_id = codec->id;
  cc->width = e->w;
  cc->height = e->h;
  cc->time_base = (AVRational){o->fps_den, o->fps_num};
  cc->framerate = (AVRational){o->fps_num, o->fps_den};
  cc->sample_aspect_ratio = (AVRational){1, 1};
  // a keyframe every 2 s, in 64-bit: any positive int fps (2^31-1 / 2^31-1 is 1 fps) fits
  int64_t gop = o->fps_den > 0 ? 2 * (((int64_t)o->fps_num + o->fps_den - 1) / o->fps_den) : 16;
  cc->gop_size = gop >= 1 && gop <= 600 ? (int)gop : gop < 1 ? 16 : 600;
  cc->thread_count = 0;  // libavcodec's choice
  cc->color_range = AVCOL_RANGE_MPEG;
  cc->colorspace = AVCOL_SPC_BT709;
  cc->color_primaries = AVCOL_PRI_BT709;
  cc->color_trc = AVCOL_TRC_BT709;

  // Pixel format: 4:4:4 for lossless H.264 when the encoder takes it, else 4:2:0.
  enum AVPixelFormat pf = AV_PIX_FMT_YUV420P;
  if (lossless && codec->pix_fmts) {
    for (const enum AVPixelFormat *p = codec->pix_fmts; *p != AV_PIX_FMT_NONE; p++)
      if (*p == AV_PIX_FMT_YUV444P) pf = AV_PIX_FMT_YUV444P;
  }
  cc->pix_fmt = pf;

  AVDictionary *opts = NULL;
  if (codec->id == AV_CODEC_ID_H264) {
    char crf[16];
    snprintf(crf, sizeof crf, "%d", o->crf);
    av_dict_set(&opts, "crf", crf, 0);           // libx264 (ignored by others)
    av_dict_set(&opts, "preset", "medium", 0);
    if (pf == AV_PIX_FMT_YUV444P) av_dict_set(&opts, "profile", "high444", 0);
  } else {
    // MPEG-4 part 2: fixed quantiser from crf (crf 0..51 -> q 2..12).
    cc->flags |= AV_CODEC_FLAG_QSCALE;
    cc->global_quality = FF_QP2LAMBDA * (2 + o->crf / 5);
  }
  if (e->fmt->oformat->flags & AVFMT_GLOBALHEADER) cc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;

  int r = avcodec_open2(cc, codec, &opts);
  av_dict_free(&opts);
  if (r < 0) {
    avcodec_free_context(&cc);
    return r;
  }
  e->cc = cc;
  return 0;
}

// Opens the best available encoder into e->cc.
static tsr_status open_encoder(video_encoder *e, const encode_opts *o) {
  char tried[512] = "";
  size_t used = 0;
  const AVCodec *x264 = avcodec_find_encoder_by_name("libx264");
  if (x264) {
    int r = try_open_codec(e, x264, o);
    if (r == 0) return TSR_OK;
    used += snprintf(tried + used, sizeof tried - used, " libx264 (%s)", AVERR(r));
  }
  // Any other H.264 encoder (hardware ones often fail to open without a device).
  void *it = NULL;
  const AVCodec *c;
  while ((c = av_codec_iterate(&it))) {
    if (!av_codec_is_encoder(c) || c->id != AV_CODEC_ID_H264 || c == x264) continue;
    if (strcmp(c->name, "libx264rgb") == 0) continue;  // RGB input, not what we write
    int r = try_open_codec(e, c, o);
    if (r == 0) {
      log_warn("encode %s: libx264 is not available; using H.264 encoder %s", e->out.path,
               c->name);
      return TSR_OK;
    }
    if (used < sizeof tried)
      used += snprintf(tried + used, sizeof tried - used, " %s (%s)", c->name, AVERR(r));
  }
  const AVCodec *m4 = avcodec_find_encoder(AV_CODEC_ID_MPEG4);
  if (m4) {
    int r = try_open_codec(e, m4, o);
    if (r == 0) {
      log_warn("encode %s: no H.264 encoder could be opened (tried:%s); writing MPEG-4 "
               "part 2 instead. Install an FFmpeg built with libx264 for H.264.",
               e->out.path, used ? tried : " none found");
      return TSR_OK;
    }
    if (used < sizeof tried)
      snprintf(tried + used, sizeof tried - used, " mpeg4 (%s)", AVERR(r));
  }
  return err_set(TSR_EINVAL,
                 "encode %s: no usable video encoder (tried:%s); install an FFmpeg with "
                 "libx264 (Debian: libavcodec-extra or libavcodec59 with x264)",
                 e->out.path, used ? tried : " none found");
}

tsr_status video_encoder_open(video_encoder **out, const char *path, const encode_opts *o) {
  *out = NULL;
  if (!path || !*path) return err_set(TSR_EINVAL, "encode: empty output path");
  if (!o || o->width <= 0 || o->height <= 0 || o->width > 16384 || o->height > 16384)
    return err_set(TSR_EINVAL, "encode %s: frame size %dx%d out of range (1..16384)", path,
                   o ? o->width : 0, o ? o->height : 0);
  if (o->fps_num <= 0 || o->fps_den <= 0)
    return err_set(TSR_EINVAL, "encode %s: frame rate %d/%d must be positive", path,
                   o->fps_num, o->fps_den);
  if (o->crf < 0 || o->crf > 51)
    return err_set(TSR_EINVAL, "encode %s: crf %d out of range (0..51)", path, o->crf);

  tsr_status st = TSR_OK;
  int r;
  video_encoder *e = calloc(1, sizeof *e);
  if (!e) return err_set(TSR_ENOMEM, "encode %s: out of memory", path);
  e->in_w = o->width;
  e->in_h = o->height;
  e->w = (o->width + 1) & ~1;
  e->h = (o->height + 1) & ~1;
  if ((st = fs_atomic_name(&e->out, path))) goto fail;

  r = avformat_alloc_output_context2(&e->fmt, NULL, "mp4", e->out.tmp);
  if (r < 0 || !e->fmt) {
    st = err_set(TSR_EINVAL, "encode %s: cannot create the MP4 muxer: %s (is libavformat "
                 "built with the mp4 muxer?)", path, AVERR(r));
    goto fail;
  }
  if ((st = open_encoder(e, o)) != TSR_OK) goto fail;

  e->st = avformat_new_stream(e->fmt, NULL);
  if (!e->st) {
    st = err_set(TSR_ENOMEM, "encode %s: cannot add a video stream (out of memory)", path);
    goto fail;
  }
  e->st->time_base = e->cc->time_base;
  e->st->avg_frame_rate = e->cc->framerate;
  e->st->sample_aspect_ratio = e->cc->sample_aspect_ratio;
  r = avcodec_parameters_from_context(e->st->codecpar, e->cc);
  if (r < 0) {
    st = err_set(TSR_EINVAL, "encode %s: cannot copy encoder parameters: %s", path, AVERR(r));
    goto fail;
  }

  r = avio_open(&e->fmt->pb, e->out.tmp, AVIO_FLAG_WRITE);
  if (r < 0) {
    st = err_set(TSR_EIO, "encode %s: cannot create %s: %s (check the directory exists and "
                 "is writable)", path, e->out.tmp, AVERR(r));
    goto fail;
  }
  AVDictionary *mux = NULL;
  av_dict_set(&mux, "movflags", "+write_colr+faststart", 0);
  r = avformat_write_header(e->fmt, &mux);
  av_dict_free(&mux);
  if (r < 0) {
    st = err_set(TSR_EIO, "encode %s: cannot write the MP4 header to %s: %s", path, e->out.tmp,
                 AVERR(r));
    goto fail;
  }
  e->header_written = 1;

  e->frame = av_frame_alloc();
  e->pkt = av_packet_alloc();
  if (!e->frame || !e->pkt) {
    st = err_set(TSR_ENOMEM, "encode %s: out of memory (frame/packet)", path);
    goto fail;
  }
  e->frame->format = e->cc->pix_fmt;
  e->frame->width = e->w;
  e->frame->height = e->h;
  e->frame->color_range = AVCOL_RANGE_MPEG;
  e->frame->colorspace = AVCOL_SPC_BT709;
  e->frame->color_primaries = AVCOL_PRI_BT709;
  e->frame->color_trc = AVCOL_TRC_BT709;
  r = av_frame_get_buffer(e->frame, 0);
  if (r < 0) {
    st = err_set(TSR_ENOMEM, "encode %s: cannot allocate a %dx%d frame: %s", path, e->w, e->h,
                 AVERR(r));
    goto fail;
  }

  // SWS_ACCURATE_RND also keeps swscale off its unscaled RGB24->YUV420P shortcut, which
  // ignores the colour matrix (always BT.601).
  e->sws = sws_getContext(e->w, e->h, AV_PIX_FMT_RGB24, e->w, e->h, e->cc->pix_fmt,
                          SWS_AREA | SWS_ACCURATE_RND|SWS_FULL_CHR_H_INP, NULL, NULL,
                          NULL);
  if (!e->sws) {
    st = err_set(TSR_EINVAL, "encode %s: libswscale cannot convert rgb24 to %s at %dx%d", path,
                 av_get_pix_fmt_name(e->cc->pix_fmt), e->w, e->h);
    goto fail;
  }
  const int *bt709 = sws_getCoefficients(SWS_CS_ITU709);
  if (sws_setColorspaceDetails(e->sws, bt709, 1 /* src full range */, bt709,
                               0 /* dst limited range */, 0, 1 << 16, 1 << 16) < 0) {
    st = err_set(TSR_EINVAL, "encode %s: libswscale refused the BT.709 colour settings", path);
    goto fail;
  }
  if (e->w != e->in_w || e->h != e->in_h) {
    e->pad = malloc((size_t)e->w * e->h * 3);
    if (!e->pad) {
      st = err_set(TSR_ENOMEM, "encode %s: out of memory (padding buffer)", path);
      goto fail;
    }
  }
  *out = e;
  return TSR_OK;

fail:
  video_encoder_free(&e);
  return st;
}

// Sends one frame (NULL: flush) and writes every packet the encoder returns.
static tsr_status encode_send(video_encoder *e, AVFrame *f) {
  int r = avcodec_send_frame(e->cc, f);
  if (r < 0)
    return err_set(TSR_EINVAL, "encode %s: encoder (%s) rejected a frame: %s", e->out.path,
                   e->cc->codec->name, AVERR(r));
  for (;;) {
    r = avcodec_receive_packet(e->cc, e->pkt);
    if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return TSR_OK;
    if (r < 0)
      return err_set(TSR_EINVAL, "encode %s: encoder (%s) failed: %s", e->out.path,
                     e->cc->codec->name, AVERR(r));
    av_packet_rescale_ts(e->pkt, e->cc->time_base, e->st->time_base);
    e->pkt->stream_index = e->st->index;
    r = av_interleaved_write_frame(e->fmt, e->pkt);  // takes the packet's reference
    if (r < 0)
      return err_set(TSR_EIO, "encode %s: cannot write a packet to %s: %s (disk full?)",
                     e->out.path, e->out.tmp, AVERR(r));
  }
}

tsr_status video_encoder_write_rgb(video_encoder *e, const uint8_t *rgb) {
  if (!e || e->finished) return err_set(TSR_EINVAL, "encode: write after finish");
  if (!rgb) return err_set(TSR_EINVAL, "encode %s: NULL frame", e->out.path);
  const uint8_t *src = rgb;
  int src_stride = e->in_w * 3;
  if (e->pad) {
    // Copy with the last column and row repeated into the even-sized buffer.
    size_t in_row = (size_t)e->in_w * 3, out_row = (size_t)e->w * 3;
    for (int y = 0; y < e->h; y++) {
      int sy = y < e->in_h ? y : e->in_h - 1;
      uint8_t *d = e->pad + (size_t)y * out_row;
      memcpy(d, rgb + (size_t)sy * in_row, in_row);
      for (int x = e->in_w; x < e->w; x++) memcpy(d + (size_t)x * 3, d + in_row - 3, 3);
    }
    src = e->pad;
    src_stride = (int)out_row;
  }
  int r = av_frame_make_writable(e->frame);
  if (r < 0)
    return err_set(TSR_ENOMEM, "encode %s: cannot make the frame writable: %s", e->out.path,
                   AVERR(r));
  const uint8_t *planes[1] = {src};
  int strides[1] = {src_stride};
  sws_scale(e->sws, planes, strides, 0, e->h, e->frame->data, e->frame->linesize);
  e->frame->pts = e->next_pts++;
  return encode_send(e, e->frame);
}

tsr_status video_encoder_finish(video_encoder *e) {
  if (!e || e->finished) return err_set(TSR_EINVAL, "encode: finish called twice");
  tsr_status st = encode_send(e, NULL);
  if (st != TSR_OK) return st;
  int r = av_write_trailer(e->fmt);
  if (r < 0)
    return err_set(TSR_EIO, "encode %s: cannot finish %s: %s (disk full?)", e->out.path, e->out.tmp,
                   AVERR(r));
  r = avio_closep(&e->fmt->pb);
  if (r < 0)
    return err_set(TSR_EIO, "encode %s: cannot close %s: %s (disk full?)", e->out.path, e->out.tmp,
                   AVERR(r));
  tsr_status cs = fs_atomic_commit(&e->out);  // fsync, rename, fsync of the directory
  if (cs) return err_wrap(cs, "encode %s: ", e->out.path);
  e->finished = 1;
  return TSR_OK;
}

void video_encoder_free(video_encoder **pe) {
  video_encoder *e = pe ? *pe : NULL;
  if (!e) return;
  if (e->fmt) {
    if (e->fmt->pb) avio_closep(&e->fmt->pb);
    avformat_free_context(e->fmt);
  }
  fs_atomic_abort(&e->out);  // removes PATH.tmp unless finished
  avcodec_free_context(&e->cc);
  sws_freeContext(e->sws);
  av_frame_free(&e->frame);
  av_packet_free(&e->pkt);
  free(e->pad);
  free(e);
  *pe = NULL;
}
