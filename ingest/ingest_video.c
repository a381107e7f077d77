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
#include "ingest/latent_file.h"
#include "ingest/patchify.h"

// Decodes one source into clips appended to the worker's shard. On return `src` and
// `clips` describe the outcome; the return value is non-OK only for errors that must
// stop the worker (shard I/O), not for bad media.
static tsr_status video_source(ingest_worker *wk, const source_file *sf, store_source *src,
                               ingest_clips *clips, ingest_text *txt) {
  const store_settings *s = &wk->o->settings;
  tsr_status io = TSR_OK;
  decode_ctx *d = NULL;
  uint8_t *frames = NULL, *tokens = NULL;
  clip_meta *meta = NULL;
  latent_file *cap = NULL;   // the video's caption file (--captions), if it has one
  int open_clip = 0;
  int64_t first_block = -1;  // where this source's blocks begin (a failure cuts them off)

  char *errbuf = txt->error;
  const size_t errn = sizeof txt->error;
  ingest_label_of(sf->path, wk->o->label_from_dir, txt->label, sizeof txt->label);
  memset(src, 0, sizeof *src);
  src->path = sf->path;
  src->size = sf->size;
  src->mtime = sf->mtime;
  src->status = SOURCE_FAILED;
  src->error = errbuf;
  src->label = txt->label[0] ? txt->label : NULL;
  errbuf[0] = 0;
  if (sf->error) {
    snprintf(errbuf, errn, "%s: %s", sf->path, sf->error);
    return TSR_OK;
  }

  decode_opts dopt = {.fps_num = s->fps_num, .fps_den = s->fps_den, .short_side = s->short_side,
                      .mult_h = s->ph, .mult_w = s->pw, .threads = wk->threads,
                      .max_pixels = wk->o->max_pixels};
  decode_info info;
  if (wk->o->captions) {  // VIDEO.caption.safetensors, when there is one
    char cpath[PATH_MAX + 32];
    snprintf(cpath, sizeof cpath, "%s.caption.safetensors", sf->path);
    if (access(cpath, F_OK) == 0 && caption_file_open(&cap, cpath)) {
      snprintf(errbuf, errn, "%s: %s", sf->path, err_msg());
      return TSR_OK;
    }
    if (cap && !(txt->caption = strdup(cap->caption))) {
      latent_file_close(&cap);
      snprintf(errbuf, errn, "%s: out of memory", sf->path);
      return TSR_OK;
    }
  }
  if (decode_open(&d, sf->path, &dopt, &info)) {
    snprintf(errbuf, errn, "%s", err_msg());
    latent_file_close(&cap);
    return TSR_OK;
  }
  snprintf(txt->codec, sizeof txt->codec, "%s", info.codec);
  snprintf(txt->pix_fmt, sizeof txt->pix_fmt, "%s", info.pix_fmt);
  const int H = info.out_h / s->ph, W = info.out_w / s->pw;
  const int64_t tok_bytes = store_token_bytes(s);
  // Buffer sizes in checked 64-bit: the settings' limits (store.h) and decode's pixel guard
  // keep them small, but a size that does not fit is refused, not wrapped.
  int64_t frame_bytes64, frames_bytes, group_bytes;
  if (H <= 0 || W <= 0 ||
      __builtin_mul_overflow((int64_t)info.out_w * info.out_h, (int64_t)3, &frame_bytes64) ||
      __builtin_mul_overflow(frame_bytes64, (int64_t)s->pt, &frames_bytes) ||
      __builtin_mul_overflow((int64_t)H * W, tok_bytes, &group_bytes) ||
      frames_bytes > ((int64_t)1 << 40) || group_bytes > ((int64_t)1 << 40)) {
    snprintf(errbuf, errn, "%s: frame size %dx%d gives an invalid token grid %dx%d", sf->path,
             info.out_w, info.out_h, H, W);
    goto done;
  }
  const size_t frame_bytes = (size_t)frame_bytes64;
  frames = malloc((size_t)frames_bytes);
  tokens = malloc((size_t)group_bytes);
  if (!frames || !tokens) {
    snprintf(errbuf, errn, "%s: out of memory for %dx%d frames", sf->path, info.out_w, info.out_h);
    goto done;
  }
  const uint8_t *fp[STORE_MAX_PATCH];
  for (int t = 0; t < s->pt && t < STORE_MAX_PATCH; t++) fp[t] = frames + frame_bytes * t;

  // Clip cutting: at most this many output frames per clip, a whole number of tubelets.
  int64_t per_clip = INT64_MAX;
  if (s->max_seconds > 0) {
    per_clip = (int64_t)(s->max_seconds * s->fps_num / s->fps_den) / s->pt * s->pt;
    if (per_clip < s->pt) per_clip = s->pt;
  }
  const double frame_s = (double)s->fps_den / s->fps_num;
  // What every clip of the source shares, and its block's metadata trailer (clip_meta.h).
  meta = calloc(1, sizeof *meta);
  if (!meta) {
    snprintf(errbuf, errn, "%s: out of memory", sf->path);
    goto done;
  }
  snprintf(meta->path, sizeof meta->path, "%s", sf->path);
  meta->size = sf->size;
  meta->mtime = sf->mtime;
  meta->has_label = src->label != NULL;
  snprintf(meta->label, sizeof meta->label, "%s", txt->label);
  meta->ingested_at = ingest_wall_now();
  snprintf(meta->codec, sizeof meta->codec, "%s", txt->codec);
  snprintf(meta->pix_fmt, sizeof meta->pix_fmt, "%s", txt->pix_fmt);
  store_clip c = {0};
  // what every clip of the source records about it (ingest_end_clip)
  store_clip src_fields = {.src_fps = info.src_fps, .src_w = info.src_w, .src_h = info.src_h,
                           .rotation = info.rotation, .sar_num = info.sar_num,
                           .sar_den = info.sar_den};
  int k = 0;             // frames buffered for the next tubelet
  int cut = 0;           // the open clip is full; it ends when the next tubelet comes
  int64_t out_idx = 0;   // output frames seen
  int64_t clip_first = 0, clip_dec0 = 0;
  tsr_status dst = TSR_OK;
  decode_stats ds;
  for (;;) {
    int got = 0;
    if ((dst = decode_next(d, frames + frame_bytes * k, &got)) || !got) break;
    out_idx++;
    if (++k < s->pt) continue;
    k = 0;
    if (open_clip && cut) {  // a tubelet follows a full clip: that clip was not the last
      if ((io = ingest_end_clip(wk, &c, frame_s, meta, txt, clips, 0, 0))) goto done;
      open_clip = cut = 0;
    }
    if (!open_clip) {
      if (clips->n == 0) {  // the first clip: maybe a new shard, and the caption before it
        if ((io = ingest_open_shard(wk))) goto done;
        first_block = shard_writer_size(wk->w);
        if (cap) {
          if ((io = shard_writer_caption(wk->w, cap->text, cap->text_tokens, cap->text_dim,
                                         cap->text_dtype, cap->caption, strlen(cap->caption),
                                         &src_fields.caption_offset,
                                         &src_fields.caption_checksum)))
            goto done;
          src_fields.caption_tokens = cap->text_tokens;
          src_fields.caption_dim = cap->text_dim;
        }
      }
      c = src_fields;
      if ((io = shard_writer_begin_clip(wk->w, H, W, &c.offset))) goto done;
      c.H = H;
      c.W = W;
      open_clip = 1;
      clip_first = out_idx - s->pt;
    }
    patchify_u8(fp, s->pt, info.out_h, info.out_w, 3, s->ph, s->pw, tokens);
    if ((io = shard_writer_append(wk->w, tokens, (size_t)group_bytes))) goto done;
    c.T++;
    if ((int64_t)c.T * s->pt >= per_clip) {  // cut here; the next tubelet starts a new clip
      decode_get_stats(d, &ds);
      c.decoded_frames = ds.decoded_frames - clip_dec0;  // source frames since the last cut
      clip_dec0 = ds.decoded_frames;
      c.start_s = ds.first_pts_s + clip_first * frame_s;
      cut = 1;
    }
    if (info.duration_s > 0) wk->frac = out_idx * frame_s / info.duration_s;
  }
  decode_get_stats(d, &ds);
  src->decoded_frames = ds.decoded_frames;
  if (clips->n == 0 && !open_clip) {
    if (dst) snprintf(errbuf, errn, "%s", err_msg());
    else if (ds.decoded_frames == 0)
      snprintf(errbuf, errn, "%s: no frame could be decoded%s%s", sf->path,
               ds.note[0] ? ": " : "", ds.note);
    else
      snprintf(errbuf, errn,
               "%s: too short: %lld frames at %d/%d fps, a tubelet needs %d (%lld source frames "
               "decoded)%s%s",
               sf->path, (long long)out_idx, s->fps_num, s->fps_den, s->pt,
               (long long)ds.decoded_frames, ds.note[0] ? "; " : "", ds.note);
    goto done;
  }
  if (ds.truncated || ds.corrupt_packets > 0 || dst) {  // keep the prefix, say what is wrong
    src->partial = 1;
    snprintf(errbuf, errn, "%s%s", dst ? err_msg() : ds.note,
             (dst || ds.note[0]) && ds.corrupt_packets ? "; " : "");
    if (ds.corrupt_packets) {
      size_t n = strlen(errbuf);
      snprintf(errbuf + n, errn - n, "corrupt data skipped: %lld packets/pictures rejected by the decoder",
               (long long)ds.corrupt_packets);
    }
  }
  // The last clip ends now that the source has ended: it records the frames dropped after
  // the last full tubelet and the source's totals.
  if (!cut) {
    c.decoded_frames = ds.decoded_frames - clip_dec0;
    c.start_s = ds.first_pts_s + clip_first * frame_s;
  }
  meta->source_decoded_frames = ds.decoded_frames;
  meta->partial = src->partial;
  snprintf(meta->note, sizeof meta->note, "%s", errbuf);
  if ((io = ingest_end_clip(wk, &c, frame_s, meta, txt, clips, 1, k))) goto done;
  open_clip = 0;
  src->status = SOURCE_DONE;
done:
  io = ingest_end_source(wk, src, open_clip, first_block, clips, io);
  free(meta);
  latent_file_close(&cap);
  decode_free(&d);
  free(frames);
  free(tokens);
  return io;
}


const ingest_reader ingest_reader_video = {
    .what = "videos", .accept_name = sources_is_video_name, .source = video_source};
