// tools/video.c — sampled clips as MP4 or Y4M (tools/video.h).
#include "tools/video.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/fs.h"
#ifdef TESSERA_HAVE_MEDIA
#include "ingest/encode.h"
#endif
#include "store/patchify.h"
#include "tools/y4m.h"

// Every frame of the clip as rgb24 (height x width x 3), in order, to put(ctx, frame).
// The tokens are unpatchified one tubelet (pt frames) at a time.
static tsr_status for_each_frame(const sample_result *s,
                                 tsr_status (*put)(void *ctx, const uint8_t *rgb), void *ctx) {
  const dit_config *mc = &s->mc;
  const int height = s->H * mc->ph, width = s->W * mc->pw;
  size_t P = (size_t)mc->pt * mc->ph * mc->pw * mc->channels;
  size_t frame_bytes = (size_t)height * width * 3;
  uint8_t *frames = malloc(frame_bytes * (size_t)mc->pt);
  uint8_t **fp = malloc((size_t)mc->pt * sizeof *fp);
  tsr_status st = frames && fp ? TSR_OK : err_set(TSR_ENOMEM, "out of memory for frames");
  for (int f = 0; !st && f < mc->pt; f++) fp[f] = frames + (size_t)f * frame_bytes;
  for (int t = 0; !st && t < s->T; t++) {
    unpatchify_u8(s->tokens + (size_t)t * s->H * s->W * P, mc->pt, height, width, mc->channels,
                  mc->ph, mc->pw, fp);
    for (int f = 0; !st && f < mc->pt; f++) st = put(ctx, fp[f]);
  }
  free(frames);
  free(fp);
  return st;
}

// A latent clip's preview (model/sample/sample.h sample_preview_*): latent channels 0, 1, 2
// as red, green, blue over their range in the clip, one frame a latent frame, each latent
// pixel an up x up square.
typedef struct {
  float *lat;                 // (frames, h, w, C) sample_latents
  int frames, h, w, C, up;
  float lo[3], hi[3];
} preview;

static tsr_status preview_make(const sample_result *s, preview *pv) {
  const store_settings *ss = &s->store;
  *pv = (preview){.frames = s->T * s->mc.pt, .h = s->H * s->mc.ph, .w = s->W * s->mc.pw,
                  .C = s->mc.channels, .up = ss->vae_s < 2 ? 2 : (ss->vae_s + 1) / 2 * 2};
  tsr_status st = sample_latents(s, &pv->lat);
  if (!st) sample_preview_range(pv->lat, (size_t)pv->frames * pv->h * pv->w, pv->C, pv->lo, pv->hi);
  return st;
}

// Every frame of the clip (or of its preview) as rgb24, in order, to put(ctx, frame).
static tsr_status for_each_out_frame(const sample_result *s, const preview *pv,
                                     tsr_status (*put)(void *ctx, const uint8_t *rgb), void *ctx) {
  if (!pv) return for_each_frame(s, put, ctx);
  uint8_t *rgb = malloc((size_t)pv->h * pv->up * pv->w * pv->up * 3);
  tsr_status st = rgb ? TSR_OK : err_set(TSR_ENOMEM, "out of memory for the preview");
  for (int f = 0; !st && f < pv->frames; f++) {
    sample_preview_frame(pv->lat + (size_t)f * pv->h * pv->w * pv->C, pv->h, pv->w, pv->C, pv->up,
                         pv->lo, pv->hi, rgb);
    st = put(ctx, rgb);
  }
  free(rgb);
  return st;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b, b = t;
  }
  return a;
}

// The size and frame rate of the video: the clip's, or the preview's (a latent frame per
// frame, at the latent frame rate fps / vae_t, reduced; in 64-bit, as the store's fps may
// be any positive int fraction). TSR_EINVAL if that rate has no int fraction.
static tsr_status out_geometry(const sample_result *s, const preview *pv, int *w, int *h,
                               int *fps_num, int *fps_den) {
  *w = pv ? pv->w * pv->up : s->W * s->mc.pw;
  *h = pv ? pv->h * pv->up : s->H * s->mc.ph;
  int64_t num = s->store.fps_num, den = (int64_t)s->store.fps_den * (pv ? s->store.vae_t : 1);
  int64_t g = num > 0 && den > 0 ? gcd64(num, den) : 1;
  num /= g, den /= g;
  if (num < 1 || den < 1 || num > INT32_MAX || den > INT32_MAX)
    return err_set(TSR_EINVAL, "frame rate %d/%d (VAE stride %d) gives no video frame rate",
                   s->store.fps_num, s->store.fps_den, s->store.vae_t);
  *fps_num = (int)num, *fps_den = (int)den;
  return TSR_OK;
}

#ifdef TESSERA_HAVE_MEDIA
static tsr_status put_mp4(void *ctx, const uint8_t *rgb) {
  return video_encoder_write_rgb(ctx, rgb);
}

static tsr_status write_mp4(const char *path, const sample_result *s, const preview *pv) {
  encode_opts eo = {.crf = 18};
  video_encoder *e = NULL;
  tsr_status st = out_geometry(s, pv, &eo.width, &eo.height, &eo.fps_num, &eo.fps_den);
  if (!st) st = video_encoder_open(&e, path, &eo);
  if (!st) st = for_each_out_frame(s, pv, put_mp4, e);
  if (!st) st = video_encoder_finish(e);
  video_encoder_free(&e);
  return st;
}
#else
static tsr_status write_mp4(const char *path, const sample_result *s, const preview *pv) {
  (void)s, (void)pv;
  return err_set(TSR_EINVAL, "%s: this tessera was built without media (FFmpeg): it writes "
                 "Y4M only (a path ending in .y4m)", path);
}
#endif

typedef struct {
  FILE *f;
  int width, height;
} y4m_sink;

static tsr_status put_y4m(void *ctx, const uint8_t *rgb) {
  y4m_sink *y = ctx;
  return y4m_write_frame_rgb(y->f, rgb, y->width, y->height);
}

static tsr_status write_y4m(const char *path, const sample_result *s, const preview *pv) {
  fs_atomic a = {0};
  y4m_sink y;
  int fps_num, fps_den;
  tsr_status st = out_geometry(s, pv, &y.width, &y.height, &fps_num, &fps_den);
  if (!st) st = fs_atomic_open(&a, path);
  if (!st) st = y4m_write_header(y.f = a.f, y.width, y.height, fps_num, fps_den);
  if (!st) st = for_each_out_frame(s, pv, put_y4m, &y);
  if (!st) st = fs_atomic_commit(&a);
  fs_atomic_abort(&a);
  return st;
}

tsr_status video_write(const char *path, const sample_result *s) {
  int latent = store_is_latent(&s->store);
  if (!latent && s->mc.channels != 3)
    return err_set(TSR_EINVAL, "%s: the model has %d channels; only RGB (3) can be written as "
                   "video", path, s->mc.channels);
  preview pv = {0};
  tsr_status st = latent ? preview_make(s, &pv) : TSR_OK;
  if (!st) st = fs_has_suffix_nocase(path, ".y4m") ? write_y4m(path, s, latent ? &pv : NULL)
                                        : write_mp4(path, s, latent ? &pv : NULL);
  free(pv.lat);
  return st ? err_wrap(st, "writing %s: ", path) : TSR_OK;
}

const char *video_default_ext(void) {
#ifdef TESSERA_HAVE_MEDIA
  return "mp4";
#else
  return "y4m";
#endif
}

tsr_status video_write_default(const char *path_noext, const sample_result *s, char *written,
                               size_t cap) {
  if (snprintf(written, cap, "%s.%s", path_noext, video_default_ext()) >= (int)cap)
    return err_set(TSR_EINVAL, "path too long: %s", path_noext);
  return video_write(written, s);
}
