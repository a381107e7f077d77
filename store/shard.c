// store/shard.c — shard files of clip blocks: streaming writer and validating mmap reader.
// Byte layout: shard.h and docs/store-format.md.
#include "store/shard.h"

#include "core/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

// Version 2: the header also records the store's fps, short side and max seconds, and a
// block may carry a metadata trailer after its payload (B_META_BYTES, B_META_SUM), so a
// store's index can be rebuilt from its shards. Version 3 (this build writes it; it reads
// 1 to 3): a block may also be a caption block (CAPTION_MAGIC), and the header records a
// latent store's VAE strides; an older build refuses the file rather than misread it.
#define SHARD_VERSION 3u
#define SHARD_VERSION_MIN 1u
#define SHARD_MAGIC "TSRSHARD"
#define BLOCK_MAGIC "TSRCLIP1"
#define CAPTION_MAGIC "TSRTEXT1"
// Header field offsets (little-endian).
#define H_MAGIC 0        // 8 bytes
#define H_VERSION 8      // u32
#define H_HDRSIZE 12     // u32, SHARD_HEADER_BYTES
#define H_PT 16          // u32
#define H_PH 20          // u32
#define H_PW 24          // u32
#define H_CHANNELS 28    // u32
#define H_DTYPE 32       // u32 (store_dtype)
#define H_ALIGN 36       // u32, SHARD_ALIGN
#define H_TOKEN_BYTES 40 // u64
#define H_FPS_NUM 48     // u32, version 2 (0 in version 1)
#define H_FPS_DEN 52     // u32, version 2
#define H_SHORT_SIDE 56  // u32, version 2
#define H_MAX_SECONDS 64 // f64 bits as u64, version 2
#define H_VAE_T 72       // u32, latent stores (0: pixels, and in shards written before)
#define H_VAE_S 76       // u32
#define H_CHECKSUM (SHARD_HEADER_BYTES - 8)  // u64 XXH3-64 of bytes [0, H_CHECKSUM)
// Block header field offsets.
#define B_MAGIC 0        // 8 bytes
#define B_T 8            // u32
#define B_H 12           // u32
#define B_W 16           // u32
#define B_META_BYTES 20  // u32 metadata trailer bytes (0 in version 1)
#define B_BYTES 24       // u64 payload bytes
#define B_PAYLOAD_SUM 32 // u64 XXH3-64 of the payload
#define B_META_SUM 40    // u64 XXH3-64 of the metadata trailer (0 if none)
// 48..56 reserved, 0
#define B_CHECKSUM 56    // u64 XXH3-64 of bytes [0, 56)
// Caption block header field offsets (same size, magic and checksum places).
#define C_TOKENS 8       // u32 embedding rows
#define C_DIM 12         // u32 embedding width
#define C_DTYPE 16       // u32 store_dtype of the values: bf16 or f32
#define C_TEXT_BYTES 20  // u32 caption text bytes (<= STORE_MAX_CAPTION_BYTES)
#define C_EMB_BYTES 24   // u64 embedding bytes = tokens * dim * value size
#define C_EMB_SUM 32     // u64 XXH3-64 of the embedding
#define C_TEXT_SUM 40    // u64 XXH3-64 of the text (0 if none)

#define WRITE_BUFFER (1 << 20)

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static int64_t align_up(int64_t x) { return (x + SHARD_ALIGN - 1) / SHARD_ALIGN * SHARD_ALIGN; }

// Writes all n bytes at off, retrying on EINTR and short writes.
static tsr_status pwrite_all(int fd, const void *data, size_t n, int64_t off, const char *path) {
  const uint8_t *p = data;
  while (n > 0) {
    ssize_t k = pwrite(fd, p, n, (off_t)off);
    if (k < 0) {
      if (errno == EINTR) continue;
      return err_set(TSR_EIO, "write shard %s at offset %lld: %s%s", path, (long long)off,
                     strerror(errno),
                     errno == ENOSPC ? " (disk full: free space or choose another --out)" : "");
    }
    if (k == 0)
      return err_set(TSR_EIO, "write shard %s at offset %lld: no progress", path, (long long)off);
    p += k;
    n -= (size_t)k;
    off += k;
  }
  return TSR_OK;
}

// ---- writer ---------------------------------------------------------------------------

struct shard_writer {
  int fd;
  char *path;
  int64_t token_bytes;
  int64_t end;          // end of the last finished block (file end when no clip is open)
  int dir_synced;       // the parent directory was fsync'ed after creation
  // open clip
  int open;
  int T, H, W;
  int64_t clip_off;     // block offset
  int64_t expect;       // payload bytes expected (T*H*W*token_bytes)
  int64_t got;          // payload bytes appended so far
  int64_t flushed;      // payload bytes already written to the file
  XXH3_state_t *xs;
  uint8_t *buf;         // (WRITE_BUFFER) pending payload bytes
  size_t nbuf;
};

tsr_status shard_writer_create(shard_writer **out, const char *path, const store_settings *s) {
  *out = NULL;
  int64_t tb = store_token_bytes(s);
  if (tb <= 0)
    return err_set(TSR_EINVAL, "shard %s: invalid token geometry %dx%dx%d, %d channels, dtype %d",
                   path, s->pt, s->ph, s->pw, s->channels, (int)s->dtype);
  shard_writer *w = calloc(1, sizeof *w);
  if (!w) return err_set(TSR_ENOMEM, "out of memory creating shard %s", path);
  w->fd = -1;
  w->path = strdup(path);
  w->buf = malloc(WRITE_BUFFER);
  w->xs = XXH3_createState();
  if (!w->path || !w->buf || !w->xs) {
    shard_writer_close(&w);
    return err_set(TSR_ENOMEM, "out of memory creating shard %s", path);
  }
  w->token_bytes = tb;
  w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (w->fd < 0) {
    tsr_status st = err_set(TSR_EIO, "create shard %s: %s%s", path, strerror(errno),
                            errno == EEXIST ? " (a shard of that name exists; shards are never "
                                              "overwritten)" : "");
    shard_writer_close(&w);
    return st;
  }
  uint8_t *h = calloc(1, SHARD_HEADER_BYTES);
  if (!h) {
    shard_writer_close(&w);
    unlink(path);
    return err_set(TSR_ENOMEM, "out of memory creating shard %s", path);
  }
  memcpy(h + H_MAGIC, SHARD_MAGIC, 8);
  put_u32(h + H_VERSION, SHARD_VERSION);
  put_u32(h + H_HDRSIZE, SHARD_HEADER_BYTES);
  put_u32(h + H_PT, (uint32_t)s->pt);
  put_u32(h + H_PH, (uint32_t)s->ph);
  put_u32(h + H_PW, (uint32_t)s->pw);
  put_u32(h + H_CHANNELS, (uint32_t)s->channels);
  put_u32(h + H_DTYPE, (uint32_t)s->dtype);
  put_u32(h + H_ALIGN, SHARD_ALIGN);
  put_u64(h + H_TOKEN_BYTES, (uint64_t)tb);
  put_u32(h + H_FPS_NUM, (uint32_t)s->fps_num);
  put_u32(h + H_FPS_DEN, (uint32_t)s->fps_den);
  put_u32(h + H_SHORT_SIDE, (uint32_t)s->short_side);
  uint64_t ms;
  memcpy(&ms, &s->max_seconds, sizeof ms);
  put_u64(h + H_MAX_SECONDS, ms);
  put_u32(h + H_VAE_T, (uint32_t)s->vae_t);
  put_u32(h + H_VAE_S, (uint32_t)s->vae_s);
  put_u64(h + H_CHECKSUM, XXH3_64bits(h, H_CHECKSUM));
  tsr_status st = pwrite_all(w->fd, h, SHARD_HEADER_BYTES, 0, path);
  free(h);
  if (st) {
    shard_writer_close(&w);
    unlink(path);
    return st;
  }
  w->end = SHARD_HEADER_BYTES;
  *out = w;
  return TSR_OK;
}

tsr_status shard_writer_begin_clip(shard_writer *w, int H, int W, int64_t *offset) {
  if (w->open)
    return err_set(TSR_EINVAL, "shard %s: a clip is already open at offset %lld (end or abort it)",
                   w->path, (long long)w->clip_off);
  if (H <= 0 || W <= 0)
    return err_set(TSR_EINVAL, "shard %s: invalid token grid Tx%dx%d", w->path, H, W);
  if (XXH3_64bits_reset(w->xs) != XXH_OK)
    return err_set(TSR_EINVAL, "shard %s: checksum state reset failed", w->path);
  w->open = 1;
  w->T = 0;  // known at end_clip
  w->H = H;
  w->W = W;
  w->clip_off = w->end;
  w->expect = INT64_MAX / 4;  // bound until T is known
  w->got = w->flushed = 0;
  w->nbuf = 0;
  if (offset) *offset = w->clip_off;
  return TSR_OK;
}

static tsr_status flush_buf(shard_writer *w) {
  if (w->nbuf == 0) return TSR_OK;
  tsr_status st = pwrite_all(w->fd, w->buf, w->nbuf,
                             w->clip_off + SHARD_BLOCK_HEADER_BYTES + w->flushed, w->path);
  if (st) return st;
  w->flushed += (int64_t)w->nbuf;
  w->nbuf = 0;
  return TSR_OK;
}

tsr_status shard_writer_append(shard_writer *w, const void *data, size_t bytes) {
  if (!w->open) return err_set(TSR_EINVAL, "shard %s: append with no open clip", w->path);
  if ((int64_t)bytes > w->expect - w->got)
    return err_set(TSR_EINVAL,
                   "shard %s: clip at offset %lld gets %lld bytes more than its %dx%dx%d tokens "
                   "(%lld bytes)", w->path, (long long)w->clip_off,
                   (long long)(w->got + (int64_t)bytes - w->expect), w->T, w->H, w->W,
                   (long long)w->expect);
  if (bytes == 0) return TSR_OK;
  XXH3_64bits_update(w->xs, data, bytes);
  w->got += (int64_t)bytes;
  if (w->nbuf + bytes <= WRITE_BUFFER) {
    memcpy(w->buf + w->nbuf, data, bytes);
    w->nbuf += bytes;
    return w->nbuf == WRITE_BUFFER ? flush_buf(w) : TSR_OK;
  }
  tsr_status st = flush_buf(w);
  if (st) return st;
  st = pwrite_all(w->fd, data, bytes, w->clip_off + SHARD_BLOCK_HEADER_BYTES + w->flushed, w->path);
  if (st) return st;
  w->flushed += (int64_t)bytes;
  return TSR_OK;
}

tsr_status shard_writer_end_clip(shard_writer *w, int T, uint64_t *checksum) {
  return shard_writer_end_clip_meta(w, T, NULL, 0, checksum);
}

tsr_status shard_writer_end_clip_meta(shard_writer *w, int T, const void *meta, size_t meta_bytes,
                                      uint64_t *checksum) {
  if (!w->open) return err_set(TSR_EINVAL, "shard %s: end_clip with no open clip", w->path);
  if (meta_bytes > SHARD_META_MAX)
    return err_set(TSR_EINVAL, "shard %s: clip metadata of %zu bytes, more than %d", w->path,
                   meta_bytes, SHARD_META_MAX);
  int64_t tokens;
  if (T <= 0 || __builtin_mul_overflow((int64_t)T * w->H, (int64_t)w->W, &tokens) ||
      __builtin_mul_overflow(tokens, w->token_bytes, &w->expect) || w->expect > INT64_MAX / 4)
    return err_set(TSR_EINVAL, "shard %s: invalid token grid %dx%dx%d", w->path, T, w->H, w->W);
  w->T = T;
  if (w->got != w->expect)
    return err_set(TSR_EINVAL,
                   "shard %s: clip at offset %lld has %lld of its %lld payload bytes (%dx%dx%d "
                   "tokens); append the rest or abort it",
                   w->path, (long long)w->clip_off, (long long)w->got, (long long)w->expect, w->T,
                   w->H, w->W);
  tsr_status st = flush_buf(w);
  if (st) return st;
  uint64_t sum = XXH3_64bits_digest(w->xs);
  int64_t payload_end = w->clip_off + SHARD_BLOCK_HEADER_BYTES + w->expect;
  if (meta_bytes) {
    st = pwrite_all(w->fd, meta, meta_bytes, payload_end, w->path);
    if (st) return st;
    payload_end += (int64_t)meta_bytes;
  }
  int64_t block_end = align_up(payload_end);
  static const uint8_t zeros[SHARD_ALIGN];
  if (block_end > payload_end) {
    st = pwrite_all(w->fd, zeros, (size_t)(block_end - payload_end), payload_end, w->path);
    if (st) return st;
  }
  uint8_t h[SHARD_BLOCK_HEADER_BYTES] = {0};
  memcpy(h + B_MAGIC, BLOCK_MAGIC, 8);
  put_u32(h + B_T, (uint32_t)w->T);
  put_u32(h + B_H, (uint32_t)w->H);
  put_u32(h + B_W, (uint32_t)w->W);
  put_u64(h + B_BYTES, (uint64_t)w->expect);
  put_u64(h + B_PAYLOAD_SUM, sum);
  put_u32(h + B_META_BYTES, (uint32_t)meta_bytes);
  put_u64(h + B_META_SUM, meta_bytes ? XXH3_64bits(meta, meta_bytes) : 0);
  put_u64(h + B_CHECKSUM, XXH3_64bits(h, B_CHECKSUM));
  st = pwrite_all(w->fd, h, sizeof h, w->clip_off, w->path);
  if (st) return st;
  w->end = block_end;
  w->open = 0;
  if (checksum) *checksum = sum;
  return TSR_OK;
}

tsr_status shard_writer_abort_clip(shard_writer *w) {
  if (!w->open) return TSR_OK;
  w->open = 0;
  w->nbuf = 0;
  if (ftruncate(w->fd, (off_t)w->clip_off) != 0)
    return err_set(TSR_EIO, "shard %s: rewind to offset %lld: %s", w->path,
                   (long long)w->clip_off, strerror(errno));
  w->end = w->clip_off;
  return TSR_OK;
}

tsr_status shard_writer_rewind(shard_writer *w, int64_t offset) {
  if (w->open)
    return err_set(TSR_EINVAL, "shard %s: rewind with a clip open at offset %lld", w->path,
                   (long long)w->clip_off);
  if (offset < SHARD_HEADER_BYTES || offset % SHARD_ALIGN || offset > w->end)
    return err_set(TSR_EINVAL, "shard %s: rewind to %lld: not a block offset up to the end %lld",
                   w->path, (long long)offset, (long long)w->end);
  if (ftruncate(w->fd, (off_t)offset) != 0)
    return err_set(TSR_EIO, "shard %s: rewind to offset %lld: %s", w->path, (long long)offset,
                   strerror(errno));
  w->end = offset;
  return TSR_OK;
}

// Bytes of one caption value of dtype d (bf16 or f32 only), else 0.
static int64_t caption_value_bytes(uint32_t d) {
  return d == STORE_DTYPE_BF16 ? 2 : d == STORE_DTYPE_F32 ? 4 : 0;
}

tsr_status shard_writer_caption(shard_writer *w, const void *emb, int tokens, int dim,
                                store_dtype dtype, const char *text, size_t text_bytes,
                                int64_t *offset, uint64_t *checksum) {
  if (w->open)
    return err_set(TSR_EINVAL, "shard %s: a caption block while a clip is open at offset %lld",
                   w->path, (long long)w->clip_off);
  int64_t vb = caption_value_bytes((uint32_t)dtype);
  if (tokens < 1 || tokens > STORE_MAX_CAPTION_TOKENS || dim < 1 || dim > STORE_MAX_CAPTION_DIM ||
      !vb || !emb || text_bytes > STORE_MAX_CAPTION_BYTES || (text_bytes && !text))
    return err_set(TSR_EINVAL, "shard %s: invalid caption: %d x %d values of dtype %d, %zu bytes "
                   "of text (limits %d x %d, bf16 or f32, %d bytes)", w->path, tokens, dim,
                   (int)dtype, text_bytes, STORE_MAX_CAPTION_TOKENS, STORE_MAX_CAPTION_DIM,
                   STORE_MAX_CAPTION_BYTES);
  int64_t off = w->end, eb = (int64_t)tokens * dim * vb;
  uint64_t sum = XXH3_64bits(emb, (size_t)eb);
  tsr_status st = pwrite_all(w->fd, emb, (size_t)eb, off + SHARD_BLOCK_HEADER_BYTES, w->path);
  int64_t data_end = off + SHARD_BLOCK_HEADER_BYTES + eb;
  if (!st && text_bytes) st = pwrite_all(w->fd, text, text_bytes, data_end, w->path);
  data_end += (int64_t)text_bytes;
  int64_t block_end = align_up(data_end);
  static const uint8_t zeros[SHARD_ALIGN];
  if (!st && block_end > data_end)
    st = pwrite_all(w->fd, zeros, (size_t)(block_end - data_end), data_end, w->path);
  uint8_t h[SHARD_BLOCK_HEADER_BYTES] = {0};
  memcpy(h + B_MAGIC, CAPTION_MAGIC, 8);
  put_u32(h + C_TOKENS, (uint32_t)tokens);
  put_u32(h + C_DIM, (uint32_t)dim);
  put_u32(h + C_DTYPE, (uint32_t)dtype);
  put_u32(h + C_TEXT_BYTES, (uint32_t)text_bytes);
  put_u64(h + C_EMB_BYTES, (uint64_t)eb);
  put_u64(h + C_EMB_SUM, sum);
  put_u64(h + C_TEXT_SUM, text_bytes ? XXH3_64bits(text, text_bytes) : 0);
  put_u64(h + B_CHECKSUM, XXH3_64bits(h, B_CHECKSUM));
  if (!st) st = pwrite_all(w->fd, h, sizeof h, off, w->path);
  if (st) {
    (void)ftruncate(w->fd, (off_t)off);  // nothing of it stays
    return st;
  }
  w->end = block_end;
  if (offset) *offset = off;
  if (checksum) *checksum = sum;
  return TSR_OK;
}

tsr_status shard_writer_sync(shard_writer *w) {
  if (fdatasync(w->fd) != 0)
    return err_set(TSR_EIO, "fdatasync shard %s: %s", w->path, strerror(errno));
  if (!w->dir_synced) {
    tsr_status st = fs_fsync_parent(w->path);
    if (st) return err_wrap(st, "shard %s: ", w->path);
    w->dir_synced = 1;
  }
  return TSR_OK;
}

int64_t shard_writer_size(const shard_writer *w) { return w->end; }

void shard_writer_close(shard_writer **pw) {
  shard_writer *w = *pw;
  if (!w) return;
  if (w->fd >= 0) {
    if (w->open) (void)shard_writer_abort_clip(w);
    close(w->fd);
  }
  if (w->xs) XXH3_freeState(w->xs);
  free(w->buf);
  free(w->path);
  free(w);
  *pw = NULL;
}

// ---- reader ---------------------------------------------------------------------------

struct shard_reader {
  char *path;
  const uint8_t *map;
  int64_t size;
  store_settings geom;  // pt, ph, pw, channels, dtype (version 2: fps, short side, max s too)
  int64_t token_bytes;
  int version;          // format version of the file (1 or 2)
};

static tsr_status parse_header(const uint8_t *h, int64_t size, const char *path,
                               store_settings *g, int64_t *token_bytes, int *version) {
  if (size < SHARD_HEADER_BYTES)
    return err_set(TSR_EFORMAT, "shard %s: %lld bytes, shorter than its %d-byte header (truncated "
                   "or not a shard)", path, (long long)size, SHARD_HEADER_BYTES);
  if (memcmp(h + H_MAGIC, SHARD_MAGIC, 8) != 0)
    return err_set(TSR_EFORMAT, "shard %s: bad magic at offset 0 (not a tessera shard)", path);
  uint32_t v = get_u32(h + H_VERSION);
  if (v < SHARD_VERSION_MIN || v > SHARD_VERSION)
    return err_set(TSR_EFORMAT, "shard %s: format version %u, this build reads versions %u to %u%s",
                   path, v, SHARD_VERSION_MIN, SHARD_VERSION,
                   v > SHARD_VERSION ? " (update tessera)" : "");
  *version = (int)v;
  uint64_t want = get_u64(h + H_CHECKSUM), got = XXH3_64bits(h, H_CHECKSUM);
  if (want != got)
    return err_set(TSR_EFORMAT, "shard %s: header checksum mismatch at offset 0 (stored %016llx, "
                   "computed %016llx): header corrupt", path, (unsigned long long)want,
                   (unsigned long long)got);
  if (get_u32(h + H_HDRSIZE) != SHARD_HEADER_BYTES || get_u32(h + H_ALIGN) != SHARD_ALIGN)
    return err_set(TSR_EFORMAT, "shard %s: header size %u / alignment %u, expected %d / %d", path,
                   get_u32(h + H_HDRSIZE), get_u32(h + H_ALIGN), SHARD_HEADER_BYTES, SHARD_ALIGN);
  memset(g, 0, sizeof *g);
  uint32_t pt = get_u32(h + H_PT), ph = get_u32(h + H_PH), pw = get_u32(h + H_PW),
           c = get_u32(h + H_CHANNELS), d = get_u32(h + H_DTYPE);
  if (pt == 0 || ph == 0 || pw == 0 || c == 0 || pt > 4096 || ph > 4096 || pw > 4096 ||
      c > 65536 || d > STORE_DTYPE_F32)
    return err_set(TSR_EFORMAT, "shard %s: invalid geometry in header (patch %ux%ux%u, %u "
                   "channels, dtype %u)", path, pt, ph, pw, c, d);
  g->pt = (int)pt;
  g->ph = (int)ph;
  g->pw = (int)pw;
  g->channels = (int)c;
  g->dtype = (store_dtype)d;
  int64_t tb = store_token_bytes(g);
  if (tb <= 0 || (uint64_t)tb != get_u64(h + H_TOKEN_BYTES))
    return err_set(TSR_EFORMAT, "shard %s: token bytes %llu in header, geometry gives %lld", path,
                   (unsigned long long)get_u64(h + H_TOKEN_BYTES), (long long)tb);
  *token_bytes = tb;
  if (v >= 2) {  // the store settings a shard of version 2 records (checked by the index)
    g->fps_num = (int)get_u32(h + H_FPS_NUM);
    g->fps_den = (int)get_u32(h + H_FPS_DEN);
    g->short_side = (int)get_u32(h + H_SHORT_SIDE);
    uint64_t ms = get_u64(h + H_MAX_SECONDS);
    memcpy(&g->max_seconds, &ms, sizeof ms);
    g->vae_t = (int)get_u32(h + H_VAE_T);
    g->vae_s = (int)get_u32(h + H_VAE_S);
    if (store_settings_check(g) != TSR_OK)
      return err_wrap(TSR_EFORMAT, "shard %s: header: ", path);
  }
  return TSR_OK;
}

tsr_status shard_reader_open(shard_reader **out, const char *path, const store_settings *expect) {
  *out = NULL;
  int fd = -1;
  // a regular file only (core/fs.h): a FIFO in shards/ would block every reader
  tsr_status opened = fs_open_regular(path, &fd);
  if (opened) return opened == TSR_EINVAL ? err_wrap(TSR_EFORMAT, "shard: ") : opened;
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    return err_set(TSR_EIO, "stat shard %s: %s", path, strerror(e));
  }
  if (sb.st_size < SHARD_HEADER_BYTES) {
    close(fd);
    return err_set(TSR_EFORMAT, "shard %s: %lld bytes, shorter than its %d-byte header (truncated "
                   "or not a shard)", path, (long long)sb.st_size, SHARD_HEADER_BYTES);
  }
  void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED) return err_set(TSR_EIO, "mmap shard %s: %s", path, strerror(e));
  shard_reader *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path))) {
    free(r);
    munmap(m, (size_t)sb.st_size);
    return err_set(TSR_ENOMEM, "out of memory opening shard %s", path);
  }
  r->map = m;
  r->size = sb.st_size;
  tsr_status st = parse_header(r->map, r->size, path, &r->geom, &r->token_bytes, &r->version);
  if (st == TSR_OK && expect) {
    store_settings e2 = r->geom;  // compare only what a shard records
    if (r->version < 2) {
      e2.fps_num = expect->fps_num;
      e2.fps_den = expect->fps_den;
      e2.short_side = expect->short_side;
      e2.max_seconds = expect->max_seconds;
    }
    char diff[512];
    if (store_settings_diff(&e2, expect, diff, sizeof diff))
      st = err_set(TSR_EMISMATCH, "shard %s: settings differ from the store's (shard vs "
                   "store): %s", path, diff);
  }
  if (st) {
    shard_reader_close(&r);
    return st;
  }
  *out = r;
  return TSR_OK;
}

void shard_reader_geometry(const shard_reader *r, store_settings *g) { *g = r->geom; }

int shard_reader_version(const shard_reader *r) { return r->version; }

// *h = the header of the block at `offset` once its place and header are checked: on the
// block grid past the shard header, inside the file, `magic` (in shards of min_version or
// later), its own checksum. `what` names the block in the messages, `kind` the block a bad
// magic is not ("block", "clip block"; "caption block" twice).
static tsr_status block_header(const shard_reader *r, int64_t offset, const char *what,
                               const char *kind, const char *magic, int min_version,
                               const uint8_t **h) {
  const char *p = r->path;
  long long off = (long long)offset;
  if (offset < SHARD_HEADER_BYTES || offset % SHARD_ALIGN != 0)
    return err_set(TSR_EFORMAT, "shard %s: offset %lld is not a block offset (must be a multiple "
                   "of %d past the header)", p, off, SHARD_ALIGN);
  if (offset > r->size - SHARD_BLOCK_HEADER_BYTES)
    return err_set(TSR_EFORMAT, "shard %s: %s at offset %lld lies past the end of the file "
                   "(%lld bytes): shard truncated", p, what, off, (long long)r->size);
  *h = r->map + offset;
  if (r->version < min_version || memcmp(*h + B_MAGIC, magic, 8) != 0)
    return err_set(TSR_EFORMAT, "shard %s: no %s at offset %lld (bad block magic)", p, kind, off);
  uint64_t want = get_u64(*h + B_CHECKSUM), got = XXH3_64bits(*h, B_CHECKSUM);
  if (want != got)
    return err_set(TSR_EFORMAT, "shard %s: %s header checksum mismatch at offset %lld (stored "
                   "%016llx, computed %016llx): block header corrupt", p, what, off,
                   (unsigned long long)want, (unsigned long long)got);
  return TSR_OK;
}

tsr_status shard_reader_block(shard_reader *r, int64_t offset, int verify, shard_block *b) {
  memset(b, 0, sizeof *b);
  const char *p = r->path;
  long long off = (long long)offset;
  const uint8_t *h;
  tsr_status st = block_header(r, offset, "block", "clip block", BLOCK_MAGIC, 0, &h);
  if (st) return st;
  uint32_t T = get_u32(h + B_T), H = get_u32(h + B_H), W = get_u32(h + B_W);
  uint64_t hb = get_u64(h + B_BYTES);
  uint32_t mb = get_u32(h + B_META_BYTES);
  int64_t tokens, tb;
  if (T == 0 || H == 0 || W == 0 || T > STORE_MAX_GRID || H > STORE_MAX_GRID ||
      W > STORE_MAX_GRID || __builtin_mul_overflow((int64_t)T * H, (int64_t)W, &tokens) ||
      __builtin_mul_overflow(tokens, r->token_bytes, &tb) || (uint64_t)tb != hb ||
      tb > STORE_MAX_CLIP_BYTES)
    return err_set(TSR_EFORMAT, "shard %s: block at offset %lld: grid %ux%ux%u of %lld-byte tokens "
                   "does not give its %llu payload bytes", p, off, T, H, W,
                   (long long)r->token_bytes, (unsigned long long)hb);
  if ((r->version < 2 && (mb != 0 || get_u64(h + B_META_SUM) != 0)) || mb > SHARD_META_MAX)
    return err_set(TSR_EFORMAT, "shard %s: block at offset %lld: metadata of %u bytes (version %d "
                   "shards allow %d)", p, off, mb, r->version, r->version < 2 ? 0 : SHARD_META_MAX);
  // tb <= 2^40 and offset <= size, so these sums cannot overflow.
  if (tb + (int64_t)mb > r->size - offset - SHARD_BLOCK_HEADER_BYTES)
    return err_set(TSR_EFORMAT, "shard %s: payload of block at offset %lld (%lld bytes + %u "
                   "metadata) runs past the end of the file (%lld bytes): shard truncated", p, off,
                   (long long)tb, mb, (long long)r->size);
  const uint8_t *data = h + SHARD_BLOCK_HEADER_BYTES;
  uint64_t hsum = get_u64(h + B_PAYLOAD_SUM);
  if (mb) {
    uint64_t ms = XXH3_64bits(data + tb, mb);
    if (ms != get_u64(h + B_META_SUM))
      return err_set(TSR_EFORMAT, "shard %s: metadata checksum mismatch in block at offset %lld "
                     "(stored %016llx, computed %016llx): clip metadata corrupt", p, off,
                     (unsigned long long)get_u64(h + B_META_SUM), (unsigned long long)ms);
    b->meta = (const char *)(data + tb);
    b->meta_bytes = mb;
  }
  if (verify) {
    uint64_t s = XXH3_64bits(data, (size_t)tb);
    if (s != hsum)
      return err_set(TSR_EFORMAT, "shard %s: payload checksum mismatch in block at offset %lld "
                     "(stored %016llx, computed %016llx): clip data corrupt", p, off,
                     (unsigned long long)hsum, (unsigned long long)s);
  }
  b->T = (int)T;
  b->H = (int)H;
  b->W = (int)W;
  b->bytes = tb;
  b->checksum = hsum;
  b->payload = data;
  b->end = align_up(offset + SHARD_BLOCK_HEADER_BYTES + tb + mb);
  return TSR_OK;
}

int shard_reader_is_caption(const shard_reader *r, int64_t offset) {
  return offset >= SHARD_HEADER_BYTES && offset <= r->size - SHARD_BLOCK_HEADER_BYTES &&
         memcmp(r->map + offset + B_MAGIC, CAPTION_MAGIC, 8) == 0;
}

tsr_status shard_reader_caption(shard_reader *r, int64_t offset, int verify, shard_caption *c) {
  memset(c, 0, sizeof *c);
  const char *p = r->path;
  long long off = (long long)offset;
  const uint8_t *h;
  tsr_status st = block_header(r, offset, "caption block", "caption block", CAPTION_MAGIC, 3, &h);
  if (st) return st;
  uint32_t n = get_u32(h + C_TOKENS), d = get_u32(h + C_DIM), dt = get_u32(h + C_DTYPE);
  uint32_t tb = get_u32(h + C_TEXT_BYTES);
  uint64_t eb = get_u64(h + C_EMB_BYTES);
  int64_t vb = caption_value_bytes(dt);
  if (n < 1 || n > STORE_MAX_CAPTION_TOKENS || d < 1 || d > STORE_MAX_CAPTION_DIM || !vb ||
      eb != (uint64_t)n * d * (uint64_t)vb || tb > STORE_MAX_CAPTION_BYTES)
    return err_set(TSR_EFORMAT, "shard %s: caption block at offset %lld: %u x %u values of dtype "
                   "%u in %llu bytes, %u text bytes: not a valid caption", p, off, n, d, dt,
                   (unsigned long long)eb, tb);
  // eb < 2^35 and offset <= size: no overflow
  if ((int64_t)eb + tb > r->size - offset - SHARD_BLOCK_HEADER_BYTES)
    return err_set(TSR_EFORMAT, "shard %s: caption block at offset %lld (%llu + %u bytes) runs "
                   "past the end of the file (%lld bytes): shard truncated", p, off,
                   (unsigned long long)eb, tb, (long long)r->size);
  const uint8_t *data = h + SHARD_BLOCK_HEADER_BYTES;
  if (tb && XXH3_64bits(data + eb, tb) != get_u64(h + C_TEXT_SUM))
    return err_set(TSR_EFORMAT, "shard %s: caption text checksum mismatch in the caption block at "
                   "offset %lld: caption corrupt", p, off);
  c->checksum = get_u64(h + C_EMB_SUM);
  if (verify && XXH3_64bits(data, (size_t)eb) != c->checksum)
    return err_set(TSR_EFORMAT, "shard %s: caption embedding checksum mismatch in the caption "
                   "block at offset %lld (stored %016llx, computed %016llx): caption corrupt", p,
                   off, (unsigned long long)c->checksum,
                   (unsigned long long)XXH3_64bits(data, (size_t)eb));
  c->tokens = (int)n;
  c->dim = (int)d;
  c->dtype = (store_dtype)dt;
  c->emb = data;
  c->emb_bytes = (int64_t)eb;
  c->text = (const char *)data + eb;
  c->text_bytes = tb;
  c->end = align_up(offset + SHARD_BLOCK_HEADER_BYTES + (int64_t)eb + tb);
  return TSR_OK;
}

tsr_status shard_reader_caption_of(shard_reader *r, const store_clip *c, int verify,
                                   shard_caption *out) {
  tsr_status st = shard_reader_caption(r, c->caption_offset, 0, out);
  if (st) return st;
  if (out->tokens != c->caption_tokens || out->dim != c->caption_dim ||
      out->checksum != c->caption_checksum)
    return err_set(TSR_EFORMAT, "shard %s: caption block at offset %lld holds %d x %d values "
                   "(checksum %016llx), the index says %d x %d (%016llx)", r->path,
                   (long long)c->caption_offset, out->tokens, out->dim,
                   (unsigned long long)out->checksum, c->caption_tokens, c->caption_dim,
                   (unsigned long long)c->caption_checksum);
  if (verify) return shard_reader_caption(r, c->caption_offset, 1, out);
  return TSR_OK;
}

tsr_status shard_reader_clip(shard_reader *r, int64_t offset, int64_t bytes, uint64_t checksum,
                             int verify, const uint8_t **payload) {
  if (payload) *payload = NULL;
  shard_block b;
  // The index's size and checksum are compared before the payload is hashed.
  tsr_status st = shard_reader_block(r, offset, 0, &b);
  if (st) return st;
  const char *p = r->path;
  long long off = (long long)offset;
  if (bytes >= 0 && bytes != b.bytes)
    return err_set(TSR_EFORMAT, "shard %s: block at offset %lld has %lld payload bytes, the index "
                   "says %lld", p, off, (long long)b.bytes, (long long)bytes);
  if (checksum && checksum != b.checksum)
    return err_set(TSR_EFORMAT, "shard %s: block at offset %lld has payload checksum %016llx, the "
                   "index says %016llx", p, off, (unsigned long long)b.checksum,
                   (unsigned long long)checksum);
  if (verify) {
    uint64_t s = XXH3_64bits(b.payload, (size_t)b.bytes);
    if (s != b.checksum)
      return err_set(TSR_EFORMAT, "shard %s: payload checksum mismatch in block at offset %lld "
                     "(stored %016llx, computed %016llx): clip data corrupt", p, off,
                     (unsigned long long)b.checksum, (unsigned long long)s);
  }
  if (payload) *payload = b.payload;
  return TSR_OK;
}

int64_t shard_reader_size(const shard_reader *r) { return r->size; }

void shard_reader_close(shard_reader **pr) {
  shard_reader *r = *pr;
  if (!r) return;
  if (r->map) munmap((void *)r->map, (size_t)r->size);
  free(r->path);
  free(r);
  *pr = NULL;
}

tsr_status shard_truncate(const char *path, int64_t end) {
  if (end < SHARD_HEADER_BYTES)
    return err_set(TSR_EINVAL, "truncate shard %s to %lld bytes: less than its header", path,
                   (long long)end);
  int fd = -1;  // never a link's target: the cut would shorten a file outside the store
  tsr_status st = fs_open_nofollow(path, O_RDWR, &fd);
  if (st) return err_wrap(st, "truncate shard: ");
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    st = err_set(TSR_EIO, "stat shard %s: %s", path, strerror(errno));
  } else if (sb.st_size < end) {
    st = err_set(TSR_EFORMAT, "shard %s is %lld bytes, shorter than its committed end %lld: "
                 "clips were lost (run `tessera index verify` on the store)", path,
                 (long long)sb.st_size, (long long)end);
  } else if (sb.st_size > end) {
    if (ftruncate(fd, (off_t)end) != 0)
      st = err_set(TSR_EIO, "truncate shard %s to %lld bytes: %s", path, (long long)end,
                   strerror(errno));
    else if (fsync(fd) != 0)
      st = err_set(TSR_EIO, "fsync shard %s: %s", path, strerror(errno));
  }
  close(fd);
  return st;
}
