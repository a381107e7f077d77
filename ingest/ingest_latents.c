// ingest/ingest_latents.c — the latent-file source reader of `tessera ingest --latents`
// (ingest_internal.h): one latent file (latent_file.h) into clip blocks of a latent store.
//
// The file's latents (T, H, W, C) must match the store: C channels, the same video frame
// rate and VAE strides (a mismatch fails the source, naming both). Rows and columns are
// centre-cropped to multiples of the patch (as ingest crops pixels), values are converted
// to the store's dtype (f32 -> bf16 rounds to nearest even; bf16 -> f32 is exact) and cut
// into tubelets of pt latent frames x ph x pw latent pixels x C, in the (t, y, x, c) order
// of pixel tokens; latent frames after the last full tubelet are dropped and counted.
// Long files are cut into clips of at most max_seconds as videos are. A caption (text_emb)
// becomes one caption block before the source's clips, which all point at it.
//
// What the clip rows record: src_fps = the video's frame rate, src_w x src_h = the latent
// grid times the VAE's spatial stride (the size the encoder saw), codec "latents", pix_fmt
// the file's dtype, decoded_frames = latent frames read for the clip, frames = latent
// frames stored (T * pt), duration = frames * vae_t / fps; the source's note names the
// video (metadata 'source').
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/bf16.h"
#include "ingest/ingest_internal.h"
#include "store/latent_file.h"
#include "store/patchify.h"
#include "store/store.h"

static int latent_name(const char *name) {
  size_t n = strlen(name), k = strlen(".safetensors"), te = strlen("_wan_te.safetensors");
  // musubi-tuner's text-encoder caches are read with their latent cache (latent_file.h)
  if (n > te && !strcmp(name + n - te, "_wan_te.safetensors")) return 0;
  return n > k && !strcasecmp(name + n - k, ".safetensors");
}

// Why the file cannot go into a store of settings s ("" if it can), in buf.
static void mismatch(const latent_file *lf, const store_settings *s, char *buf, size_t n) {
  buf[0] = 0;
  if (lf->C != s->channels)
    snprintf(buf, n, "%d channels, the store's latents have %d", lf->C, s->channels);
  else if ((int64_t)lf->fps_num * s->fps_den != (int64_t)s->fps_num * lf->fps_den)
    snprintf(buf, n, "fps %d/%d, the store's is %d/%d", lf->fps_num, lf->fps_den, s->fps_num,
             s->fps_den);
  else if (lf->vae_t != s->vae_t || lf->vae_s != s->vae_s)
    snprintf(buf, n, "vae_stride %dx%dx%d, the store's is %dx%dx%d", lf->vae_t, lf->vae_s,
             lf->vae_s, s->vae_t, s->vae_s, s->vae_s);
}

// Converts n values of dtype `from` at src to dtype `to` at dst.
static void convert(void *dst, store_dtype to, const void *src, store_dtype from, size_t n) {
  if (to == from) {
    memcpy(dst, src, n * (size_t)store_dtype_size(to));
    return;
  }
  for (size_t i = 0; i < n; i++) {
    float v = latent_value(src, from, i);
    if (to == STORE_DTYPE_BF16) {
      uint16_t h = bf16_from_f32(v);
      memcpy((char *)dst + 2 * i, &h, 2);
    } else {
      memcpy((char *)dst + 4 * i, &v, 4);
    }
  }
}

// Why the file's values cannot be stored in the store's dtype ("" if they can), in buf: an
// f32 value past bf16's range is finite in the file but would be stored as infinity (and
// train as NaN), so such a file fails here instead. bf16 -> f32 and f32 -> f32 always fit.
static void overflow(const latent_file *lf, const store_settings *s, char *buf, size_t n) {
  buf[0] = 0;
  if (s->dtype != STORE_DTYPE_BF16 || lf->dtype != STORE_DTYPE_F32) return;
  int64_t total = (int64_t)lf->T * lf->H * lf->W * lf->C;
  for (int64_t i = 0; i < total; i++) {
    float v = latent_value(lf->latents, lf->dtype, (size_t)i);
    if (!isinf(bf16_to_f32(bf16_from_f32(v)))) continue;
    int64_t c = i % lf->C, x = i / lf->C % lf->W, y = i / lf->C / lf->W % lf->H,
            t = i / lf->C / lf->W / lf->H;
    snprintf(buf, n, "tensor 'latents' has %g at [t %lld, y %lld, x %lld, c %lld], past the "
             "largest bf16 value (%g): the store keeps bf16 and it would become infinity. "
             "Rescale the latents (the VAE's scaling factor), or ingest into a store of f32 "
             "(--dtype f32)", v, (long long)t, (long long)y, (long long)x, (long long)c,
             bf16_to_f32(0x7f7f));
    return;
  }
}

static tsr_status latent_source(ingest_worker *wk, const source_file *sf, store_source *src,
                                ingest_clips *clips, ingest_text *txt) {
  const store_settings *s = &wk->o->settings;
  tsr_status io = TSR_OK;
  latent_file *lf = NULL;
  char *frames = NULL, *tokens = NULL;
  clip_meta *meta = NULL;
  int open_clip = 0;
  int64_t first_block = -1;  // where this source's blocks begin (a failure cuts them off)
  char *errbuf = txt->error;
  const size_t errn = sizeof txt->error;
  memset(src, 0, sizeof *src);
  src->path = sf->path;
  src->size = sf->size;
  src->mtime = sf->mtime;
  src->status = SOURCE_FAILED;
  src->error = errbuf;
  errbuf[0] = 0;
  ingest_label_of(sf->path, wk->o->label_from_dir, txt->label, sizeof txt->label);
  if (sf->error) {
    snprintf(errbuf, errn, "%s: %s", sf->path, sf->error);
    return TSR_OK;
  }
  if (latent_file_open(&lf, sf->path)) {
    snprintf(errbuf, errn, "%s", err_msg());
    return TSR_OK;
  }
  if (!txt->label[0] && lf->label) snprintf(txt->label, sizeof txt->label, "%s", lf->label);
  src->label = txt->label[0] ? txt->label : NULL;
  snprintf(txt->codec, sizeof txt->codec, "latents");
  snprintf(txt->pix_fmt, sizeof txt->pix_fmt, "%s", store_dtype_name(lf->dtype));
  char why[512];
  mismatch(lf, s, why, sizeof why);
  const int H = lf->H / s->ph, W = lf->W / s->pw;
  if (why[0]) {
    snprintf(errbuf, errn, "latent file %s: %s (one store holds the latents of one VAE at one "
             "frame rate; ingest it into another store)", sf->path, why);
    goto done;
  }
  overflow(lf, s, why, sizeof why);
  if (why[0]) {
    snprintf(errbuf, errn, "latent file %s: %s", sf->path, why);
    goto done;
  }
  if (H < 1 || W < 1 || lf->T < s->pt) {
    snprintf(errbuf, errn, "latent file %s: too small: %d latent frames of %dx%d, a tubelet "
             "needs %dx%dx%d", sf->path, lf->T, lf->H, lf->W, s->pt, s->ph, s->pw);
    goto done;
  }
  // the crop (centred) and the buffers of one tubelet group
  const int hc = H * s->ph, wc = W * s->pw, y0 = (lf->H - hc) / 2, x0 = (lf->W - wc) / 2;
  const size_t esz = (size_t)store_dtype_size(s->dtype), pix = (size_t)lf->C * esz;
  const size_t frame_bytes = (size_t)hc * wc * pix;
  const size_t group_bytes = (size_t)H * W * (size_t)store_token_bytes(s);
  frames = malloc(frame_bytes * (size_t)s->pt);
  tokens = malloc(group_bytes);
  meta = calloc(1, sizeof *meta);
  if (!frames || !tokens || !meta) {
    snprintf(errbuf, errn, "%s: out of memory for %dx%d latents", sf->path, lf->H, lf->W);
    goto done;
  }
  const uint8_t *fp[STORE_MAX_PATCH];
  for (int t = 0; t < s->pt; t++) fp[t] = (const uint8_t *)frames + frame_bytes * t;

  // clip cutting: at most this many latent frames per clip, whole tubelets
  const double frame_s = (double)lf->vae_t * s->fps_den / s->fps_num;  // per latent frame
  int64_t per_clip = INT64_MAX;
  if (s->max_seconds > 0) {
    per_clip = (int64_t)(s->max_seconds / frame_s) / s->pt * s->pt;
    if (per_clip < s->pt) per_clip = s->pt;
  }
  snprintf(meta->path, sizeof meta->path, "%s", sf->path);
  meta->size = sf->size;
  meta->mtime = sf->mtime;
  meta->has_label = src->label != NULL;
  snprintf(meta->label, sizeof meta->label, "%s", txt->label);
  meta->ingested_at = ingest_wall_now();
  snprintf(meta->codec, sizeof meta->codec, "%s", txt->codec);
  snprintf(meta->pix_fmt, sizeof meta->pix_fmt, "%s", txt->pix_fmt);
  if (lf->source[0]) snprintf(errbuf, errn, "latents of %s", lf->source);

  if ((io = ingest_open_shard(wk))) goto done;
  first_block = shard_writer_size(wk->w);
  store_clip src_fields = {.src_fps = (double)s->fps_num / s->fps_den,
                           .src_w = lf->W * lf->vae_s, .src_h = lf->H * lf->vae_s,
                           .sar_num = 1, .sar_den = 1};
  if (lf->text_tokens) {  // the caption, once, before the source's clips
    if (!(txt->caption = strdup(lf->caption))) {
      snprintf(errbuf, errn, "%s: out of memory", sf->path);
      goto done;
    }
    if (strlen(lf->caption_encoder) >= sizeof txt->caption_encoder) {
      snprintf(errbuf, errn, "%s: metadata 'caption_encoder' over %zu bytes", sf->path,
               sizeof txt->caption_encoder - 1);
      goto done;
    }
    snprintf(txt->caption_encoder, sizeof txt->caption_encoder, "%s", lf->caption_encoder);
    if ((io = shard_writer_caption(wk->w, lf->text, lf->text_tokens, lf->text_dim,
                                   lf->text_dtype, lf->caption, strlen(lf->caption),
                                   &src_fields.caption_offset, &src_fields.caption_checksum)))
      goto done;
    src_fields.caption_tokens = lf->text_tokens;
    src_fields.caption_dim = lf->text_dim;
  }
  const int groups = lf->T / s->pt, dropped = lf->T - groups * s->pt;
  const size_t in_frame = (size_t)lf->H * lf->W * lf->C;  // values of one latent frame
  store_clip c = {0};
  for (int g = 0; g < groups; g++) {
    if (!open_clip) {
      c = src_fields;
      if ((io = shard_writer_begin_clip(wk->w, H, W, &c.offset))) goto done;
      c.H = H, c.W = W;
      c.start_s = lf->start_s + (double)g * s->pt * frame_s;
      open_clip = 1;
    }
    for (int t = 0; t < s->pt; t++)  // crop and convert each latent frame of the tubelet
      for (int y = 0; y < hc; y++) {
        size_t in = ((size_t)(g * s->pt + t) * in_frame +
                     ((size_t)(y0 + y) * lf->W + (size_t)x0) * lf->C);
        convert(frames + frame_bytes * t + (size_t)y * wc * pix, s->dtype,
                (const char *)lf->latents + in * (size_t)store_dtype_size(lf->dtype), lf->dtype,
                (size_t)wc * lf->C);
      }
    patchify_u8(fp, s->pt, hc, wc, (int)pix, s->ph, s->pw, (uint8_t *)tokens);
    if ((io = shard_writer_append(wk->w, tokens, group_bytes))) goto done;
    c.T++;
    c.decoded_frames += s->pt;
    wk->frac = (double)(g + 1) / groups;
    int last = g == groups - 1;
    if (!last && (int64_t)c.T * s->pt >= per_clip) {  // cut: the next tubelet starts a clip
      if ((io = ingest_end_clip(wk, &c, frame_s, meta, txt, clips, 0, 0))) goto done;
      open_clip = 0;
    }
  }
  c.decoded_frames += dropped;
  src->decoded_frames = lf->T;
  meta->source_decoded_frames = lf->T;
  snprintf(meta->note, sizeof meta->note, "%s", errbuf);
  if ((io = ingest_end_clip(wk, &c, frame_s, meta, txt, clips, 1, dropped))) goto done;
  open_clip = 0;
  src->status = SOURCE_DONE;
done:
  io = ingest_end_source(wk, src, open_clip, first_block, clips, io);
  free(meta);
  free(frames);
  free(tokens);
  latent_file_close(&lf);
  return io;
}

tsr_status ingest_latent_settings(char **srcs, int n, store_settings *s) {
  source_list list;
  tsr_status st = sources_expand(srcs, n, latent_name, &list);
  if (st) return st;
  char first[1024] = "";
  int found = 0;
  for (int64_t i = 0; i < list.n && !found; i++) {
    latent_file *lf = NULL;
    if (list.v[i].error) continue;
    if (latent_file_open(&lf, list.v[i].path)) {
      if (!first[0]) snprintf(first, sizeof first, "%s", err_msg());
      continue;
    }
    s->fps_num = lf->fps_num, s->fps_den = lf->fps_den;
    s->vae_t = lf->vae_t, s->vae_s = lf->vae_s;
    s->channels = lf->C;
    s->short_side = 0;
    found = 1;
    latent_file_close(&lf);
  }
  int64_t count = list.n;
  sources_free(&list);
  if (!found)
    return err_set(TSR_EINVAL, "no valid latent file among the %lld sources%s%s", (long long)count,
                   first[0] ? "; the first error: " : " (files ending in .safetensors)", first);
  return TSR_OK;
}

tsr_status ingest_latent_store_settings(const char *out, char **srcs, int n,
                                        const ingest_latent_given *given, store_settings *s) {
  if (!given->patch) s->pt = 1, s->ph = s->pw = 2;
  store_index *ix = NULL;
  store_settings have;
  tsr_status st = TSR_OK;
  if (store_open(&ix, out, 0, NULL) == TSR_OK && index_settings(ix, &have) == TSR_OK &&
      store_is_latent(&have)) {
    store_settings want = have;
    if (given->patch) want.pt = s->pt, want.ph = s->ph, want.pw = s->pw;
    if (given->dtype) want.dtype = s->dtype;
    if (given->max_seconds) want.max_seconds = s->max_seconds;
    *s = want;
  } else {
    st = ingest_latent_settings(srcs, n, s);
  }
  index_close(&ix);
  if (!st) err_clear();  // a store that is not there yet failed to open: no error
  return st;
}

const ingest_reader ingest_reader_latents = {
    .what = "latent files", .accept_name = latent_name, .source = latent_source};
