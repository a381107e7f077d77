// ingest/ingest_video.c — the video source reader of `tessera ingest` (ingest_internal.h):
// decodes a video with FFmpeg (decode.h), resamples it to the store's fps and size, cuts it
// into tubelet tokens (patchify.h) and appends them to the worker's shard, cutting clips
// at max_seconds. With --captions (ingest_opts.captions) a caption file beside the video,
// VIDEO.caption.safetensors (latent_file.h caption_file_open), becomes a caption block
// before its clips; a malformed one fails the source, naming the caption file.
#include <limits.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/decode.h"
#include "ingest/ingest_internal.h"
#include "store/latent_file.h"
#include "store/patchify.h"

// One source being read: its decoder, buffers, the clip being written and where it stands.
typedef struct {
  ingest_worker *wk;
  const source_file *sf;
  const store_settings *s;
  store_source *src;
  ingest_clips *clips;
  ingest_text *txt;
  decode_ctx *d;
  decode_info info;
  latent_file *cap;          // the video's caption file (--captions), if it has one
  uint8_t *frames;           // pt output frames, the next tubelet's
  uint8_t *tokens;           // one tubelet's tokens (H x W of them)
  const uint8_t *fp[STORE_MAX_PATCH];  // the frames of `frames`
  clip_meta *meta;           // what every clip of the source shares (clip_meta.h)
  int H, W;                  // token grid of a frame
  int64_t group_bytes;       // bytes of one tubelet's tokens
  int64_t per_clip;          // at most this many output frames per clip (max_seconds)
  double frame_s;            // seconds of one output frame
  store_clip c;              // the open clip
  store_clip src_fields;     // what every clip of the source records about it
  int open_clip;
  int cut;                   // the open clip is full; it ends when the next tubelet comes
  int k;                     // frames buffered for the next tubelet
  int64_t out_idx;           // output frames seen
  int64_t clip_first, clip_dec0;  // output frame and decoded frames where the clip began
  int64_t first_block;       // where this source's blocks begin (a failure cuts them off)
} video_read;

// The outcome fields of `src` before anything is read: failed, with an empty reason.
static void video_source_init(video_read *v) {
  const source_file *sf = v->sf;
  store_source *src = v->src;
  ingest_label_of(sf->path, v->wk->o->label_from_dir, v->txt->label, sizeof v->txt->label);
  memset(src, 0, sizeof *src);
  src->path = sf->path;
  src->size = sf->size;
  src->mtime = sf->mtime;
  src->status = SOURCE_FAILED;
  src->error = v->txt->error;
  src->label = v->txt->label[0] ? v->txt->label : NULL;
  v->txt->error[0] = 0;
}

// VIDEO.caption.safetensors (--captions), when there is one; 0 if the source fails here.
static int video_open_caption(video_read *v) {
  char *errbuf = v->txt->error;
  const size_t errn = sizeof v->txt->error;
  char cpath[PATH_MAX + 32];
  snprintf(cpath, sizeof cpath, "%s.caption.safetensors", v->sf->path);
  if (access(cpath, F_OK) == 0 && caption_file_open(&v->cap, cpath)) {
    snprintf(errbuf, errn, "%s: %s", v->sf->path, err_msg());
    return 0;
  }
  if (v->cap && !(v->txt->caption = strdup(v->cap->caption))) {
    latent_file_close(&v->cap);
    snprintf(errbuf, errn, "%s: out of memory", v->sf->path);
    return 0;
  }
  return 1;
}

// The token grid, the frame and token buffers, the clip length and the source's metadata
// trailer, from the opened decoder; 0 if the source fails here.
static int video_prepare(video_read *v) {
  const store_settings *s = v->s;
  const decode_info *info = &v->info;
  char *errbuf = v->txt->error;
  const size_t errn = sizeof v->txt->error;
  v->H = info->out_h / s->ph;
  v->W = info->out_w / s->pw;
  const int64_t tok_bytes = store_token_bytes(s);
  // Buffer sizes in checked 64-bit: the settings' limits (store/settings.h) and decode's pixel guard
  // keep them small, but a size that does not fit is refused, not wrapped.
  int64_t frame_bytes, frames_bytes;
  if (v->H <= 0 || v->W <= 0 ||
      __builtin_mul_overflow((int64_t)info->out_w * info->out_h, (int64_t)3, &frame_bytes) ||
      __builtin_mul_overflow(frame_bytes, (int64_t)s->pt, &frames_bytes) ||
      __builtin_mul_overflow((int64_t)v->H * v->W, tok_bytes, &v->group_bytes) ||
      frames_bytes > ((int64_t)1 << 40) || v->group_bytes > ((int64_t)1 << 40)) {
    snprintf(errbuf, errn, "%s: frame size %dx%d gives an invalid token grid %dx%d", v->sf->path,
             info->out_w, info->out_h, v->H, v->W);
    return 0;
  }
  v->frames = malloc((size_t)frames_bytes);
  v->tokens = malloc((size_t)v->group_bytes);
  if (!v->frames || !v->tokens) {
    snprintf(errbuf, errn, "%s: out of memory for %dx%d frames", v->sf->path, info->out_w,
             info->out_h);
    return 0;
  }
  for (int t = 0; t < s->pt && t < STORE_MAX_PATCH; t++)
    v->fp[t] = v->frames + (size_t)frame_bytes * t;
  // Clip cutting: at most this many output frames per clip, a whole number of tubelets.
  v->per_clip = INT64_MAX;
  if (s->max_seconds > 0) {
    v->per_clip = (int64_t)(s->max_seconds * s->fps_num / s->fps_den) / s->pt * s->pt;
    if (v->per_clip < s->pt) v->per_clip = s->pt;
  }
  v->frame_s = (double)s->fps_den / s->fps_num;
  clip_meta *meta = v->meta = calloc(1, sizeof *meta);
  if (!meta) {
    snprintf(errbuf, errn, "%s: out of memory", v->sf->path);
    return 0;
  }
  snprintf(meta->path, sizeof meta->path, "%s", v->sf->path);
  meta->size = v->sf->size;
  meta->mtime = v->sf->mtime;
  meta->has_label = v->src->label != NULL;
  snprintf(meta->label, sizeof meta->label, "%s", v->txt->label);
  meta->ingested_at = ingest_wall_now();
  snprintf(meta->codec, sizeof meta->codec, "%s", v->txt->codec);
  snprintf(meta->pix_fmt, sizeof meta->pix_fmt, "%s", v->txt->pix_fmt);
  v->src_fields = (store_clip){.src_fps = info->src_fps, .src_w = info->src_w,
                               .src_h = info->src_h, .rotation = info->rotation,
                               .sar_num = info->sar_num, .sar_den = info->sar_den};
  return 1;
}

// Opens a clip for the next tubelet; the source's first clip may open a new shard and
// writes the caption block before it.
static tsr_status video_open_clip(video_read *v) {
  ingest_worker *wk = v->wk;
  tsr_status io;
  if (v->clips->n == 0) {
    if ((io = ingest_open_shard(wk))) return io;
    v->first_block = shard_writer_size(wk->w);
    const latent_file *cap = v->cap;
    if (cap) {
      if ((io = shard_writer_caption(wk->w, cap->text, cap->text_tokens, cap->text_dim,
                                     cap->text_dtype, cap->caption, strlen(cap->caption),
                                     &v->src_fields.caption_offset,
                                     &v->src_fields.caption_checksum)))
        return io;
      v->src_fields.caption_tokens = cap->text_tokens;
      v->src_fields.caption_dim = cap->text_dim;
    }
  }
  v->c = v->src_fields;
  if ((io = shard_writer_begin_clip(wk->w, v->H, v->W, &v->c.offset))) return io;
  v->c.H = v->H;
  v->c.W = v->W;
  v->open_clip = 1;
  v->clip_first = v->out_idx - v->s->pt;
  return TSR_OK;
}

// A full tubelet in `frames`: ends a full clip before it, opens a clip if none is, appends
// its tokens, and marks the clip full at per_clip frames.
static tsr_status video_tubelet(video_read *v) {
  const store_settings *s = v->s;
  tsr_status io;
  if (v->open_clip && v->cut) {  // a tubelet follows a full clip: that clip was not the last
    if ((io = ingest_end_clip(v->wk, &v->c, v->frame_s, v->meta, v->txt, v->clips, 0, 0)))
      return io;
    v->open_clip = v->cut = 0;
  }
  if (!v->open_clip && (io = video_open_clip(v))) return io;
  patchify_u8(v->fp, s->pt, v->info.out_h, v->info.out_w, 3, s->ph, s->pw, v->tokens);
  if ((io = shard_writer_append(v->wk->w, v->tokens, (size_t)v->group_bytes))) return io;
  v->c.T++;
  if ((int64_t)v->c.T * s->pt >= v->per_clip) {  // cut here; the next tubelet starts a new clip
    decode_stats ds;
    decode_get_stats(v->d, &ds);
    v->c.decoded_frames = ds.decoded_frames - v->clip_dec0;  // source frames since the last cut
    v->clip_dec0 = ds.decoded_frames;
    v->c.start_s = ds.first_pts_s + v->clip_first * v->frame_s;
    v->cut = 1;
  }
  return TSR_OK;
}

// The source has ended (dst: the decoder's error, if it stopped on one): the reason it
// failed if no clip came of it, else its note (partial) and the last clip ended.
static tsr_status video_finish(video_read *v, tsr_status dst) {
  const store_settings *s = v->s;
  store_source *src = v->src;
  char *errbuf = v->txt->error;
  const size_t errn = sizeof v->txt->error;
  decode_stats ds;
  decode_get_stats(v->d, &ds);
  src->decoded_frames = ds.decoded_frames;
  if (v->clips->n == 0 && !v->open_clip) {
    if (dst) snprintf(errbuf, errn, "%s", err_msg());
    else if (ds.decoded_frames == 0)
      snprintf(errbuf, errn, "%s: no frame could be decoded%s%s", v->sf->path,
               ds.note[0] ? ": " : "", ds.note);
    else
      snprintf(errbuf, errn,
               "%s: too short: %lld frames at %d/%d fps, a tubelet needs %d (%lld source frames "
               "decoded)%s%s",
               v->sf->path, (long long)v->out_idx, s->fps_num, s->fps_den, s->pt,
               (long long)ds.decoded_frames, ds.note[0] ? "; " : "", ds.note);
    return TSR_OK;
  }
  if (ds.truncated || ds.corrupt_packets > 0 || dst) {  // keep the prefix, say what is wrong
    src->partial = 1;
    snprintf(errbuf, errn, "%s%s", dst ? err_msg() : ds.note,
             (dst || ds.note[0]) && ds.corrupt_packets ? "; " : "");
    if (ds.corrupt_packets) {
      size_t n = strlen(errbuf);
      snprintf(errbuf + n, errn - n,
               "corrupt data skipped: %lld packets/pictures rejected by the decoder",
               (long long)ds.corrupt_packets);
    }
  }
  // The last clip ends now that the source has ended: it records the frames dropped after
  // the last full tubelet and the source's totals.
  if (!v->cut) {
    v->c.decoded_frames = ds.decoded_frames - v->clip_dec0;
    v->c.start_s = ds.first_pts_s + v->clip_first * v->frame_s;
  }
  v->meta->source_decoded_frames = ds.decoded_frames;
  v->meta->partial = src->partial;
  snprintf(v->meta->note, sizeof v->meta->note, "%s", errbuf);
  tsr_status io = ingest_end_clip(v->wk, &v->c, v->frame_s, v->meta, v->txt, v->clips, 1, v->k);
  if (io) return io;
  v->open_clip = 0;
  src->status = SOURCE_DONE;
  return TSR_OK;
}

// Decodes frames into tubelets until the source ends; returns a shard error (io) and
// leaves the decoder's own error, if it stopped on one, in *dst.
static tsr_status video_decode_all(video_read *v, tsr_status *dst) {
  const size_t frame_bytes = (size_t)v->info.out_w * v->info.out_h * 3;
  for (;;) {
    int got = 0;
    if ((*dst = decode_next(v->d, v->frames + frame_bytes * v->k, &got)) || !got) break;
    v->out_idx++;
    if (++v->k < v->s->pt) continue;
    v->k = 0;
    tsr_status io = video_tubelet(v);
    if (io) return io;
    if (v->info.duration_s > 0) v->wk->frac = v->out_idx * v->frame_s / v->info.duration_s;
  }
  return TSR_OK;
}

// Decodes one source into clips appended to the worker's shard. On return `src` and
// `clips` describe the outcome; the return value is non-OK only for errors that must
// stop the worker (shard I/O), not for bad media.
static tsr_status video_source(ingest_worker *wk, const source_file *sf, store_source *src,
                               ingest_clips *clips, ingest_text *txt) {
  video_read v = {.wk = wk, .sf = sf, .s = &wk->o->settings, .src = src, .clips = clips,
                  .txt = txt, .first_block = -1};
  const store_settings *s = v.s;
  video_source_init(&v);
  if (sf->error) {
    snprintf(txt->error, sizeof txt->error, "%s: %s", sf->path, sf->error);
    return TSR_OK;
  }
  if (wk->o->captions && !video_open_caption(&v)) return TSR_OK;
  decode_opts dopt = {.fps_num = s->fps_num, .fps_den = s->fps_den, .short_side = s->short_side,
                      .mult_h = s->ph, .mult_w = s->pw, .threads = wk->threads,
                      .max_pixels = wk->o->max_pixels};
  if (decode_open(&v.d, sf->path, &dopt, &v.info)) {
    snprintf(txt->error, sizeof txt->error, "%s", err_msg());
    latent_file_close(&v.cap);
    return TSR_OK;
  }
  snprintf(txt->codec, sizeof txt->codec, "%s", v.info.codec);
  snprintf(txt->pix_fmt, sizeof txt->pix_fmt, "%s", v.info.pix_fmt);
  tsr_status io = TSR_OK, dst = TSR_OK;
  if (video_prepare(&v) && !(io = video_decode_all(&v, &dst))) io = video_finish(&v, dst);
  io = ingest_end_source(wk, src, v.open_clip, v.first_block, clips, io);
  free(v.meta);
  latent_file_close(&v.cap);
  decode_free(&v.d);
  free(v.frames);
  free(v.tokens);
  return io;
}

const ingest_reader ingest_reader_video = {
    .what = "videos", .accept_name = sources_is_video_name, .source = video_source};
