// ingest/export.c — a stored clip back to frames: index row -> verified shard block ->
// unpatchify each of the T tubelet rows into pt frames -> MP4 (encode.h) or raw rgb24.
#include "ingest/export.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"
#include "ingest/encode.h"
#include "store/patchify.h"
#include "store/shard.h"
#include "store/clip.h"
#include "store/index.h"
#include "store/lock.h"
#include "store/settings.h"
#include "store/store.h"

// One clip opened for reading: its settings, row and verified payload.
typedef struct {
  store_settings s;
  store_clip_row row;
  store_lock *rlock;       // the store's reader lock while the shard is mapped
  shard_reader *reader;
  const uint8_t *payload;  // (T, H, W, pt, ph, pw, C) inside the mapping
  int h, w;                // frame size: H*ph, W*pw
  size_t frame_bytes;      // h*w*C
  size_t group_bytes;      // bytes of one tubelet row: H*W tokens
  uint8_t *frames;         // pt frames, (pt, h, w, C)
  uint8_t **fp;            // pt pointers into frames
} export_clip;

static void export_clip_close(export_clip *c) {
  shard_reader_close(&c->reader);
  store_lock_release(&c->rlock);  // after the unmap
  free(c->frames);
  free(c->fp);
  memset(c, 0, sizeof *c);
}

static tsr_status export_clip_read(export_clip *c, const char *dir, int64_t id) {
  memset(c, 0, sizeof *c);
  store_index *ix = NULL;
  tsr_status st = store_open(&ix, dir, 0, NULL);
  if (st != TSR_OK) return err_wrap(st, "export clip %" PRId64 " of %s: ", id, dir);
  st = store_lock_read(&c->rlock, dir);  // before the row: no writer cuts its block meanwhile
  if (st == TSR_OK) st = index_settings(ix, &c->s);
  if (st == TSR_OK) st = index_get_clip(ix, id, &c->row);
  index_close(&ix);
  if (st != TSR_OK) return err_wrap(st, "export clip %" PRId64 " of %s: ", id, dir);

  const store_settings *s = &c->s;
  const store_clip *k = &c->row.c;
  if (s->dtype != STORE_DTYPE_U8 || s->channels != 3)
    return err_set(TSR_EINVAL,
                   "export clip %" PRId64 " of %s: the store holds %d-channel %s tokens; "
                   "export needs uint8 RGB tokens (3 channels)%s",
                   id, dir, s->channels, store_dtype_name(s->dtype),
                   store_is_latent(s) ? " (a latent store: decode its latents with the VAE that "
                                        "encoded them)" : "");
  char path[4400];
  // The row is untrusted (store/clip.h): sizes in checked 64-bit, the shard inside the store,
  // and a frame size this process can hold.
  st = store_clip_check(s, k);
  if (st == TSR_OK) st = store_shard_path(dir, k->shard, path, sizeof path);
  if (st == TSR_OK && ((int64_t)k->H * s->ph > 16384 || (int64_t)k->W * s->pw > 16384))
    st = err_set(TSR_EFORMAT, "frames of %lldx%lld pixels are larger than 16384x16384",
                 (long long)k->W * s->pw, (long long)k->H * s->ph);
  if (st != TSR_OK)
    return err_wrap(st, "export clip %" PRId64 " of %s: index row invalid (run `tessera index "
                    "verify %s`): ", id, dir, dir);
  c->h = k->H * s->ph;
  c->w = k->W * s->pw;
  c->frame_bytes = (size_t)c->h * c->w * 3;
  c->group_bytes = (size_t)k->H * k->W * (size_t)store_token_bytes(s);
  st = shard_reader_open(&c->reader, path, s);
  if (st == TSR_OK)
    st = shard_reader_clip(c->reader, k->offset, k->bytes, k->checksum, 1, &c->payload);
  if (st != TSR_OK) {
    export_clip_close(c);
    return err_wrap(st, "export clip %" PRId64 " of %s: ", id, dir);
  }

  c->frames = malloc(c->frame_bytes * s->pt);
  c->fp = malloc(sizeof *c->fp * s->pt);
  if (!c->frames || !c->fp) {
    export_clip_close(c);
    return err_set(TSR_ENOMEM, "export clip %" PRId64 ": out of memory for %d frames of %dx%d",
                   id, s->pt, c->w, c->h);
  }
  for (int t = 0; t < s->pt; t++) c->fp[t] = c->frames + (size_t)t * c->frame_bytes;
  return TSR_OK;
}

// export_clip_read, dropping the reader lock when it fails (its early returns keep it).
static tsr_status export_clip_open(export_clip *c, const char *dir, int64_t id) {
  tsr_status st = export_clip_read(c, dir, id);
  if (st != TSR_OK) store_lock_release(&c->rlock);
  return st;
}

// Unpatchifies tubelet row g into c->frames.
static void export_group(export_clip *c, int g) {
  unpatchify_u8(c->payload + (size_t)g * c->group_bytes, c->s.pt, c->h, c->w, 3, c->s.ph,
                c->s.pw, c->fp);
}

tsr_status export_clip_mp4(const char *dir, int64_t clip_id, const char *out_path, int crf) {
  export_clip c;
  tsr_status st = export_clip_open(&c, dir, clip_id);
  if (st != TSR_OK) return st;
  encode_opts o = {.width = c.w, .height = c.h, .fps_num = c.s.fps_num,
                   .fps_den = c.s.fps_den, .crf = crf};
  video_encoder *e = NULL;
  st = video_encoder_open(&e, out_path, &o);
  for (int g = 0; st == TSR_OK && g < c.row.c.T; g++) {
    export_group(&c, g);
    for (int t = 0; st == TSR_OK && t < c.s.pt; t++) st = video_encoder_write_rgb(e, c.fp[t]);
  }
  if (st == TSR_OK) st = video_encoder_finish(e);
  video_encoder_free(&e);
  export_clip_close(&c);
  return st;
}

tsr_status export_clip_raw(const char *dir, int64_t clip_id, const char *out_path) {
  export_clip c;
  tsr_status st = export_clip_open(&c, dir, clip_id);
  if (st != TSR_OK) return st;
  fs_atomic a;
  st = fs_atomic_open(&a, out_path);
  if (st == TSR_EIO) err_wrap(st, "export (check the directory exists and is writable): ");
  for (int g = 0; st == TSR_OK && g < c.row.c.T; g++) {
    export_group(&c, g);
    // The pt frames are contiguous in c.frames: write them in one go.
    size_t bytes = c.frame_bytes * c.s.pt;
    if (fwrite(c.frames, 1, bytes, a.f) != bytes)
      st = err_set(TSR_EIO, "export: write %s: %s (disk full?)", a.tmp, strerror(errno));
  }
  if (st == TSR_OK) st = fs_atomic_commit(&a);
  fs_atomic_abort(&a);
  export_clip_close(&c);
  return st;
}
