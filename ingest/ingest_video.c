// ingest/ingest_video.c — the video source reader of `tessera ingest` (ingest_internal.h):
// decodes a video with FFmpeg (decode.h), resamples it to the store's fps and size, cuts it
// into tubelet tokens (patchify.h) and appends them to the worker's shard, cutting clips
// at max_seconds. With --captions (ingest_opts.captions) a caption file beside the video,
// VIDEO.caption.safetensors (latent_file.h caption_file_open), becomes a caption block
// before its clips; a malformed one fails the source, naming the caption file.
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "ingest/decode.h"
#include "ingest/decode_span.h"
#include "ingest/ingest_internal.h"
#include "ingest/scene_cut.h"
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
  int64_t pending_dropped;   // frames of a partial tubelet left when a clip ended early
  scene_cut *sc;             // shot detection (ingest_opts.scenes), or NULL; its cuts
                             // go to txt->cuts, which outlive the commit
  // a manifest unit (wk->unit): the span being read, its caption file, where it stands
  const manifest_unit_span *span;
  latent_file *span_cap;
  int64_t span_caption_offset;  // its caption block, once written (0: none yet)
  uint64_t span_caption_checksum;
  int64_t span_frame;        // frames of the span delivered so far
  int64_t filtered0;         // the worker's filtered spans before this unit
  double span_t0;            // time of its first frame (the CLI's grid)
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
  ingest_caption_path(v->wk->o, v->sf->path, cpath, sizeof cpath);
  if (*cpath && access(cpath, F_OK) == 0 && caption_file_open(&v->cap, cpath)) {
    snprintf(errbuf, errn, "%s: %s", v->sf->path, err_msg());
    return 0;
  }
  if (v->cap && !(v->txt->caption = strdup(v->cap->caption))) {
    latent_file_close(&v->cap);
    snprintf(errbuf, errn, "%s: out of memory", v->sf->path);
    return 0;
  }
  if (v->cap && strlen(v->cap->caption_encoder) >= sizeof v->txt->caption_encoder) {
    snprintf(errbuf, errn, "%.1900s: metadata 'caption_encoder' over %zu bytes", cpath,
             sizeof v->txt->caption_encoder - 1);
    latent_file_close(&v->cap);
    return 0;
  }
  if (v->cap)
    snprintf(v->txt->caption_encoder, sizeof v->txt->caption_encoder, "%s",
             v->cap->caption_encoder);
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

// The caption block of the current span (a manifest's caption file), written before the
// span's first clip; the span's other clips point at it too.
static tsr_status video_span_caption(video_read *v) {
  const latent_file *cap = v->span_cap;
  if (!cap || v->span_caption_offset) return TSR_OK;
  tsr_status io = shard_writer_caption(v->wk->w, cap->text, cap->text_tokens, cap->text_dim,
                                       cap->text_dtype, cap->caption, strlen(cap->caption),
                                       &v->span_caption_offset, &v->span_caption_checksum);
  return io;
}

// What a clip of the current manifest span records: its row, span, scores and caption.
static void video_span_fields(video_read *v, store_clip *c) {
  const manifest_unit_span *sp = v->span;
  c->manifest_row = sp->row;
  c->manifest_span = sp->span;
  c->span_start = sp->has_start ? sp->start : NAN;
  c->span_end = sp->has_end ? sp->end : NAN;
  c->scores = sp->scores;
  c->caption = sp->caption;  // the text, with or without an embedding
  if (v->span_cap) {
    c->caption_offset = v->span_caption_offset;
    c->caption_checksum = v->span_caption_checksum;
    c->caption_tokens = v->span_cap->text_tokens;
    c->caption_dim = v->span_cap->text_dim;
  }
  // The clip starts at its first tubelet's first frame, on the span's grid.
  c->start_s = v->span_t0 + (double)(v->span_frame - v->s->pt) * v->frame_s;
}

// Opens a clip for the next tubelet; the source's first clip may open a new shard and
// writes the caption block before it (the video's, or the manifest span's).
static tsr_status video_open_clip(video_read *v) {
  ingest_worker *wk = v->wk;
  tsr_status io;
  if (v->first_block < 0) {
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
  if (v->span && (io = video_span_caption(v))) return io;
  v->c = v->src_fields;
  if (v->span) video_span_fields(v, &v->c);
  if ((io = shard_writer_begin_clip(wk->w, v->H, v->W, &v->c.offset))) return io;
  v->c.H = v->H;
  v->c.W = v->W;
  v->open_clip = 1;
  v->clip_first = v->out_idx - v->s->pt;
  return TSR_OK;
}

// The open clip takes no more tubelets: it ends (not as the source's last) when the next
// tubelet comes, or as the last when the source ends. Its decoded frames and start are
// known now.
static void video_mark_full(video_read *v) {
  decode_stats ds;
  decode_get_stats(v->d, &ds);
  v->c.decoded_frames = ds.decoded_frames - v->clip_dec0;  // source frames since the last cut
  v->clip_dec0 = ds.decoded_frames;
  if (!v->span) v->c.start_s = ds.first_pts_s + v->clip_first * v->frame_s;
  v->cut = 1;
}

// A full tubelet in `frames`: ends a full clip before it, opens a clip if none is, appends
// its tokens, and marks the clip full at per_clip frames.
static tsr_status video_tubelet(video_read *v) {
  const store_settings *s = v->s;
  tsr_status io;
  if (v->open_clip && v->cut) {  // a tubelet follows a full clip: that clip was not the last
    if ((io = ingest_end_clip(v->wk, &v->c, v->frame_s, v->meta, v->txt, v->clips, 0,
                              (int)v->pending_dropped)))
      return io;
    v->open_clip = v->cut = 0;
    v->pending_dropped = 0;
  }
  if (!v->open_clip && (io = video_open_clip(v))) return io;
  patchify_u8(v->fp, s->pt, v->info.out_h, v->info.out_w, 3, s->ph, s->pw, v->tokens);
  if ((io = shard_writer_append(v->wk->w, v->tokens, (size_t)v->group_bytes))) return io;
  v->c.T++;
  if ((int64_t)v->c.T * s->pt >= v->per_clip) video_mark_full(v);
  return TSR_OK;
}

// A shot boundary or the end of a span: the open clip ends at its last full tubelet (the
// frames of a partial one are dropped and counted), the next frame starts a tubelet.
static void video_break(video_read *v) {
  if (v->open_clip && !v->cut) {
    video_mark_full(v);
    v->pending_dropped = v->k;
  }
  v->k = 0;
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
    if (!v->span) v->c.start_s = ds.first_pts_s + v->clip_first * v->frame_s;
  }
  v->meta->source_decoded_frames = ds.decoded_frames;
  v->meta->partial = src->partial;
  snprintf(v->meta->note, sizeof v->meta->note, "%s", errbuf);
  if (v->wk->unit)  // the last clip's trailer carries what the source's row does
    snprintf(v->meta->manifest_key, sizeof v->meta->manifest_key, "%s", v->wk->unit->key);
  if (v->wk->o->scenes.enabled) {
    v->meta->has_scene_cuts = 1;
    v->meta->scene_cuts = v->txt->cuts;
    v->meta->n_scene_cuts = v->txt->ncuts;
  }
  int dropped = v->cut ? (int)v->pending_dropped : v->k;
  tsr_status io = ingest_end_clip(v->wk, &v->c, v->frame_s, v->meta, v->txt, v->clips, 1, dropped);
  if (io) return io;
  v->open_clip = 0;
  src->status = SOURCE_DONE;
  return TSR_OK;
}

// Records a shot boundary at time t (seconds in the source).
static tsr_status video_add_cut(video_read *v, double t) {
  ingest_text *txt = v->txt;
  if (txt->ncuts == txt->capcuts) {
    int cap = txt->capcuts ? 2 * txt->capcuts : 16;
    double *c = realloc(txt->cuts, (size_t)cap * sizeof *c);
    if (!c) return err_set(TSR_ENOMEM, "out of memory for the scene cuts of %s", v->sf->path);
    txt->cuts = c;
    txt->capcuts = cap;
  }
  txt->cuts[txt->ncuts++] = t;
  v->wk->scene_cuts++;
  return TSR_OK;
}

// A new shot detector (ingest_opts.scenes), for a source or a span: frames of two spans
// are not consecutive, so no cut is looked for between them.
static tsr_status video_new_detector(video_read *v) {
  const ingest_scene_opts *so = &v->wk->o->scenes;
  scene_cut_free(&v->sc);
  if (!so->enabled) return TSR_OK;
  double fps = (double)v->s->fps_num / v->s->fps_den;
  scene_cut_opts o = {.threshold = so->threshold,
                      .min_shot_frames = so->min_shot_s > 0 ? (int)(so->min_shot_s * fps + 0.5) : 0};
  if (so->min_shot_s > 0 && o.min_shot_frames < 1) o.min_shot_frames = 1;
  return scene_cut_new(&v->sc, &o, v->info.out_w, v->info.out_h);
}

// The frame just decoded into slot k of `frames`, at time t: a shot boundary before it ends
// the open clip there (the frame moves to slot 0), then it joins the next tubelet.
static tsr_status video_frame(video_read *v, double t) {
  const size_t frame_bytes = (size_t)v->info.out_w * v->info.out_h * 3;
  uint8_t *f = v->frames + frame_bytes * v->k;
  tsr_status st;
  int cut = 0;
  if (v->sc && (st = scene_cut_feed(v->sc, f, t, &cut))) return st;
  if (cut) {
    if ((st = video_add_cut(v, t))) return st;
    if (v->k) memmove(v->frames, f, frame_bytes);
    video_break(v);
  }
  v->out_idx++;
  if (++v->k < v->s->pt) return TSR_OK;
  v->k = 0;
  return video_tubelet(v);
}

// Decodes frames into tubelets until the source ends; returns a shard error (io) and
// leaves the decoder's own error, if it stopped on one, in *dst.
static tsr_status video_decode_all(video_read *v, tsr_status *dst) {
  const size_t frame_bytes = (size_t)v->info.out_w * v->info.out_h * 3;
  tsr_status io = video_new_detector(v);
  double t0 = 0;
  while (!io) {
    int got = 0;
    if ((*dst = decode_next(v->d, v->frames + frame_bytes * v->k, &got)) || !got) break;
    if (v->out_idx == 0) {
      decode_stats ds;
      decode_get_stats(v->d, &ds);
      t0 = ds.first_pts_s;
    }
    io = video_frame(v, t0 + (double)v->out_idx * v->frame_s);
    if (v->info.duration_s > 0) v->wk->frac = v->out_idx * v->frame_s / v->info.duration_s;
  }
  return io;
}

// ---- a manifest unit: its spans, one after another ----------------------------------------

// A span that is no clip (filtered once the video was opened, or not cut): counted with
// its reason and an example message naming the manifest row and span.
static void video_span_skipped(video_read *v, const manifest_unit_span *sp, int filtered,
                               const char *reason, const char *why) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s: manifest row %lld (line %lld), span %d: %s", v->sf->path,
           (long long)sp->row, (long long)sp->line, sp->span, why);
  if (filtered) {
    v->wk->spans_filtered++;
    manifest_tally_add(&v->wk->filtered_by, reason, msg);
  } else {
    v->wk->spans_failed++;
    manifest_tally_add(&v->wk->failed_by, reason, msg);
    log_warn("%s", msg);
  }
}

// 1 if the span fails the filter's resolution or length limits, known now that the video
// is open (a span without an end lasts to the video's claimed end).
static int video_span_filtered(video_read *v, const manifest_unit_span *sp) {
  const manifest_filter *f = &v->wk->o->manifest->filter;
  double len = sp->has_end ? sp->end - (sp->has_start ? sp->start : 0)
               : v->info.duration_s > 0 ? v->info.duration_s - (sp->has_start ? sp->start : 0)
                                        : 0;
  int w = v->info.src_w, h = v->info.src_h;
  if (v->info.rotation == 90 || v->info.rotation == 270) w = v->info.src_h, h = v->info.src_w;
  manifest_filter_result fr;
  if (!manifest_filter_clip(f, sp->has_end ? 0 : len, w, h, &fr)) return 0;
  char why[256], num[32];
  snprintf(why, sizeof why, "%s fails: %s", fr.reason,
           manifest_filter_number(num, sizeof num, fr.value));
  video_span_skipped(v, sp, 1, fr.reason, why);
  return 1;
}

// The span's caption file EMB/R-K.caption.safetensors (ingest_manifest.embeddings), if
// there is one; 0 (the span skipped, the reason counted) when it is malformed.
static int video_span_open_caption(video_read *v, const manifest_unit_span *sp) {
  const char *dir = v->wk->o->manifest->embeddings;
  latent_file_close(&v->span_cap);
  v->span_caption_offset = 0;
  if (!dir) return 1;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%lld-%d.caption.safetensors", dir, (long long)sp->row,
           sp->span);
  if (access(path, F_OK) != 0) return 1;
  if (caption_file_open(&v->span_cap, path) == TSR_OK) return 1;
  video_span_skipped(v, sp, 0, "caption file", err_msg());
  return 0;
}

// Decodes span `i` of the unit (ds: its times for the decoder) into tubelets; a shard error
// is returned, the decoder's error in *dst.
static tsr_status video_read_span(video_read *v, int i, const decode_span *ds,
                                  tsr_status *dst) {
  const manifest_unit_span *sp = &v->wk->unit->spans[i];
  const size_t frame_bytes = (size_t)v->info.out_w * v->info.out_h * 3;
  if (video_span_filtered(v, sp) || !video_span_open_caption(v, sp)) return TSR_OK;
  if ((*dst = decode_span_begin(v->d, i, ds))) {
    video_span_skipped(v, sp, 0, "span", err_msg());
    *dst = TSR_OK;
    return TSR_OK;
  }
  video_break(v);  // the previous span's last clip ends at its last full tubelet
  v->span = sp;
  v->span_frame = 0;
  tsr_status io = video_new_detector(v);
  int64_t clips0 = v->clips->n + v->open_clip;
  while (!io) {
    int got = 0;
    if ((*dst = decode_span_next(v->d, v->frames + frame_bytes * v->k, &got)) || !got) break;
    if (v->span_frame == 0) {
      decode_span_result r;
      decode_span_get(v->d, &r);
      v->span_t0 = r.start_s;
    }
    v->span_frame++;
    io = video_frame(v, v->span_t0 + (double)(v->span_frame - 1) * v->frame_s);
  }
  decode_span_result r;
  decode_span_get(v->d, &r);
  if (!io && *dst && r.frames == 0) {  // the span is past the video's end: it alone fails
    video_span_skipped(v, sp, 0, "span", err_msg());
    *dst = TSR_OK;
  } else if (!io && r.cut_at_end && v->open_clip && v->c.manifest_row == sp->row &&
             v->c.manifest_span == sp->span) {
    v->c.span_cut = 1;
  }
  if (!io && !*dst && v->clips->n + v->open_clip == clips0)
    video_span_skipped(v, sp, 0, "too short", "too short for one tubelet");
  return io;
}

// The spans of the unit in the order decode_spans takes them (by start: the decoder goes
// forward; ties in manifest order), each into its clips.
static tsr_status video_read_unit(video_read *v, tsr_status *dst) {
  const manifest_unit *u = v->wk->unit;
  decode_span *spans = malloc((size_t)u->n * sizeof *spans);
  int *order = malloc((size_t)u->n * sizeof *order);
  tsr_status io = !spans || !order
                      ? err_set(TSR_ENOMEM, "out of memory for the spans of %s", v->sf->path)
                      : TSR_OK;
  for (int i = 0; !io && i < u->n; i++)
    spans[i] = (decode_span){.start_s = u->spans[i].has_start ? u->spans[i].start : 0,
                             .end_s = u->spans[i].has_end ? u->spans[i].end : DECODE_SPAN_TO_END};
  if (!io) io = decode_span_order(spans, u->n, order);
  for (int k = 0; !io && k < u->n && !*dst; k++) {
    io = video_read_span(v, order[k], &spans[order[k]], dst);
    if (v->info.duration_s > 0) v->wk->frac = (double)(k + 1) / u->n;
  }
  free(order);
  free(spans);
  return io;
}

// A unit none of whose spans gave a clip: done with no clip when every span was filtered
// (a rerun skips it), else failed, saying why (the spans' reasons are counted).
static tsr_status video_unit_empty(video_read *v) {
  const manifest_unit *u = v->wk->unit;
  int64_t filtered = v->wk->spans_filtered - v->filtered0;
  if (filtered == u->n)
    snprintf(v->txt->error, sizeof v->txt->error, "every span of manifest rows %lld-%lld was "
             "filtered", (long long)u->first_row, (long long)u->last_row);
  else
    snprintf(v->txt->error, sizeof v->txt->error, "%s: no span of manifest rows %lld-%lld gave "
             "a clip (%d span%s, %lld filtered; the others' reasons are in the summary)",
             v->sf->path, (long long)u->first_row, (long long)u->last_row, u->n,
             u->n == 1 ? "" : "s", (long long)filtered);
  if (filtered == u->n) v->src->status = SOURCE_DONE;
  return TSR_OK;
}

// What the source records beyond its clips: the manifest unit's key, the shot boundaries.
static void video_source_extras(video_read *v) {
  if (v->wk->unit) v->src->manifest_key = v->wk->unit->key;
  if (v->wk->o->scenes.enabled && v->src->status == SOURCE_DONE) {
    v->src->has_scene_cuts = 1;
    v->src->scene_cuts = v->txt->cuts;
    v->src->n_scene_cuts = v->txt->ncuts;
  }
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
  v.filtered0 = wk->spans_filtered;
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
  if (video_prepare(&v)) {
    io = wk->unit ? video_read_unit(&v, &dst) : video_decode_all(&v, &dst);
    if (!io) io = wk->unit && !v.open_clip && !clips->n ? video_unit_empty(&v)
                                                        : video_finish(&v, dst);
  }
  video_source_extras(&v);
  io = ingest_end_source(wk, src, v.open_clip, v.first_block, clips, io);
  free(v.meta);
  scene_cut_free(&v.sc);
  latent_file_close(&v.span_cap);
  latent_file_close(&v.cap);
  decode_free(&v.d);
  free(v.frames);
  free(v.tokens);
  return io;
}

const ingest_reader ingest_reader_video = {
    .what = "videos", .accept_name = sources_is_video_name, .source = video_source};
