// Shard files: write/read round trip of many clips of various sizes (payloads and XXH3
// checksums computed independently here), byte layout of headers, abort/rewind, misuse,
// corruption and truncation detection with messages naming path and offset, truncate;
// caption blocks (version 3): layout, round trip, checks against an index row, damage,
// rewind; a latent store's settings in the header.
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "check.h"
#include "store/shard.h"

static store_settings S = {8, 1, 64, 2, 4, 4, 3, STORE_DTYPE_U8, 0, 0, 0};  // token: 96 bytes

static char dir[256];

static uint8_t byte_at(int clip, int64_t i) {
  uint64_t x = (uint64_t)clip * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return (uint8_t)(x * 0x94D049BB133111EBull >> 56);
}

static int64_t align4k(int64_t x) { return (x + 4095) / 4096 * 4096; }

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

static int64_t file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (int64_t)sb.st_size : -1;
}

static void read_file(const char *path, uint8_t *buf, int64_t off, size_t n) {
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0 && pread(fd, buf, n, off) == (ssize_t)n, "read %s", path);
  if (fd >= 0) close(fd);
}

static void flip_byte(const char *path, int64_t off) {
  int fd = open(path, O_RDWR);
  uint8_t b = 0;
  CHECK(fd >= 0 && pread(fd, &b, 1, off) == 1, "read byte of %s", path);
  b ^= 0x5a;
  CHECK(pwrite(fd, &b, 1, off) == 1, "write byte of %s", path);
  close(fd);
}

static void copy_file(const char *from, const char *to) {
  int64_t n = file_size(from);
  uint8_t *buf = malloc((size_t)n);
  read_file(from, buf, 0, (size_t)n);
  int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CHECK(fd >= 0 && write(fd, buf, (size_t)n) == (ssize_t)n, "write %s", to);
  close(fd);
  free(buf);
}

#define NCLIPS 24
typedef struct {
  int T, H, W;
  int64_t off, bytes;
  uint64_t sum;
} ref_clip;

int main(void) {
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(dir, sizeof dir, "%s/test_shard_XXXXXX", tmp);
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char path[512];
  snprintf(path, sizeof path, "%s/a.tshard", dir);
  const int64_t tb = 96;
  CHECK(store_token_bytes(&S) == tb, "token bytes %lld", (long long)store_token_bytes(&S));

  // ---- write ----
  shard_writer *w = NULL;
  CHECK_OK(shard_writer_create(&w, path, &S));
  CHECK(shard_writer_create(&(shard_writer *){NULL}, path, &S) == TSR_EIO, "existing shard refused");
  CHECK(shard_writer_size(w) == 4096, "empty shard ends after its header");
  ref_clip ref[NCLIPS];
  uint8_t *data = NULL;
  int64_t expect_off = 4096;
  for (int c = 0; c < NCLIPS; c++) {
    // Sizes from a single token to > 1 MiB (exercises the writer's buffer flush path).
    ref_clip *r = &ref[c];
    r->T = 1 + (c * 7) % 13;
    r->H = 1 + (c * 5) % 11;
    r->W = 1 + (c * 3) % 17;
    if (c == 5) r->T = 40, r->H = 20, r->W = 20;  // 1.5 MB
    if (c == 0) r->T = r->H = r->W = 1;
    r->bytes = (int64_t)r->T * r->H * r->W * tb;
    data = realloc(data, (size_t)r->bytes);
    for (int64_t i = 0; i < r->bytes; i++) data[i] = byte_at(c, i);
    r->sum = XXH3_64bits(data, (size_t)r->bytes);
    if (c == 3) {  // a clip that is abandoned half-way leaves nothing behind
      int64_t off;
      CHECK_OK(shard_writer_begin_clip(w, r->H, r->W, &off));
      CHECK_OK(shard_writer_append(w, data, (size_t)r->bytes / 2));
      CHECK(shard_writer_end_clip(w, r->T, NULL) == TSR_EINVAL, "end of an incomplete clip refused");
      CHECK_OK(shard_writer_abort_clip(w));
      CHECK(shard_writer_size(w) == off && file_size(path) == off, "abort rewinds to %lld", (long long)off);
    }
    CHECK_OK(shard_writer_begin_clip(w, r->H, r->W, &r->off));
    CHECK(r->off == expect_off, "clip %d offset %lld, expected %lld", c, (long long)r->off, (long long)expect_off);
    // Append in irregular chunks: 1, 2, 3, ... bytes, then 100 KB pieces.
    int64_t i = 0;
    size_t k = 1;
    while (i < r->bytes) {
      size_t n = k < 64 ? k : 100000;
      if ((int64_t)n > r->bytes - i) n = (size_t)(r->bytes - i);
      CHECK_OK(shard_writer_append(w, data + i, n));
      i += (int64_t)n;
      k++;
    }
    CHECK(shard_writer_end_clip(w, r->T + 1, NULL) == TSR_EINVAL, "end with a T that does not match the bytes refused");
    uint64_t sum = 0;
    CHECK_OK(shard_writer_end_clip(w, r->T, &sum));
    CHECK(sum == r->sum, "clip %d checksum %016llx vs XXH3 %016llx", c, (unsigned long long)sum,
          (unsigned long long)r->sum);
    expect_off = align4k(r->off + 64 + r->bytes);
    CHECK(shard_writer_size(w) == expect_off, "size after clip %d", c);
  }
  CHECK(shard_writer_begin_clip(w, 0, 1, NULL) == TSR_EINVAL, "empty grid refused");
  CHECK(shard_writer_append(w, data, 1) == TSR_EINVAL, "append without open clip refused");
  CHECK_OK(shard_writer_sync(w));
  shard_writer_close(&w);
  CHECK(w == NULL, "close clears handle");
  CHECK(file_size(path) == expect_off, "file size %lld == end %lld", (long long)file_size(path),
        (long long)expect_off);

  // ---- byte layout, parsed independently ----
  uint8_t h[4096];
  read_file(path, h, 0, sizeof h);
  CHECK(!memcmp(h, "TSRSHARD", 8), "shard magic");
  CHECK(le32(h + 8) == 3 && le32(h + 12) == 4096, "version 3, header 4096");
  CHECK(le32(h + 16) == 2 && le32(h + 20) == 4 && le32(h + 24) == 4 && le32(h + 28) == 3 &&
            le32(h + 32) == 0, "geometry in header");
  CHECK(le64(h + 40) == 96, "token bytes in header");
  CHECK(le64(h + 4088) == XXH3_64bits(h, 4088), "header checksum");
  for (int c = 0; c < NCLIPS; c++) {
    uint8_t b[64];
    read_file(path, b, ref[c].off, 64);
    CHECK(!memcmp(b, "TSRCLIP1", 8) && le32(b + 8) == (uint32_t)ref[c].T &&
              le32(b + 12) == (uint32_t)ref[c].H && le32(b + 16) == (uint32_t)ref[c].W,
          "block %d header fields", c);
    CHECK(le64(b + 24) == (uint64_t)ref[c].bytes && le64(b + 32) == ref[c].sum &&
              le64(b + 56) == XXH3_64bits(b, 56), "block %d sizes and checksums", c);
  }

  // ---- read back ----
  shard_reader *r = NULL;
  CHECK_OK(shard_reader_open(&r, path, &S));
  CHECK(shard_reader_size(r) == expect_off, "reader size");
  store_settings g;
  shard_reader_geometry(r, &g);
  CHECK(g.pt == 2 && g.ph == 4 && g.pw == 4 && g.channels == 3 && g.dtype == STORE_DTYPE_U8, "geometry");
  for (int c = 0; c < NCLIPS; c++) {
    const uint8_t *p = NULL;
    CHECK_OK(shard_reader_clip(r, ref[c].off, ref[c].bytes, ref[c].sum, 1, &p));
    int same = p != NULL;
    for (int64_t i = 0; same && i < ref[c].bytes; i++) same = p[i] == byte_at(c, i);
    CHECK(same, "clip %d payload round trip", c);
  }
  CHECK_OK(shard_reader_clip(r, ref[1].off, -1, 0, 0, NULL));
  CHECK(shard_reader_clip(r, ref[1].off, ref[1].bytes + 96, 0, 0, NULL) == TSR_EFORMAT, "bytes vs index");
  CHECK(shard_reader_clip(r, ref[1].off, ref[1].bytes, ref[1].sum ^ 1, 0, NULL) == TSR_EFORMAT, "checksum vs index");
  CHECK(shard_reader_clip(r, ref[1].off + 64, -1, 0, 0, NULL) == TSR_EFORMAT, "unaligned offset");
  CHECK(shard_reader_clip(r, 0, -1, 0, 0, NULL) == TSR_EFORMAT, "offset in header");
  CHECK(shard_reader_clip(r, ref[5].off + 4096, -1, 0, 0, NULL) == TSR_EFORMAT, "offset inside a payload");
  CHECK(strstr(err_msg(), path) && strstr(err_msg(), "offset"), "message names path and offset: %s", err_msg());
  CHECK(shard_reader_clip(r, expect_off, -1, 0, 0, NULL) == TSR_EFORMAT, "offset past end");
  shard_reader_close(&r);

  store_settings other = S;
  other.ph = other.pw = 8;
  CHECK(shard_reader_open(&r, path, &other) == TSR_EMISMATCH && r == NULL, "geometry mismatch refused");
  CHECK(strstr(err_msg(), "patch 2x4x4 vs 2x8x8") != NULL, "mismatch message: %s", err_msg());
  other = S;
  other.fps_num = 30;  // version-2 shards record fps, short side and max seconds too
  CHECK(shard_reader_open(&r, path, &other) == TSR_EMISMATCH && r == NULL, "fps mismatch refused");
  CHECK(strstr(err_msg(), "fps 8/1 vs 30/1") != NULL, "fps mismatch message: %s", err_msg());

  // ---- corruption ----
  char bad[600];
  snprintf(bad, sizeof bad, "%s/bad.tshard", dir);
  copy_file(path, bad);
  flip_byte(bad, ref[7].off + 64 + ref[7].bytes / 2);  // payload byte
  CHECK_OK(shard_reader_open(&r, bad, &S));
  CHECK_OK(shard_reader_clip(r, ref[7].off, ref[7].bytes, ref[7].sum, 0, NULL));
  CHECK(shard_reader_clip(r, ref[7].off, ref[7].bytes, ref[7].sum, 1, NULL) == TSR_EFORMAT, "payload flip found");
  char want[700];
  snprintf(want, sizeof want, "offset %lld", (long long)ref[7].off);
  CHECK(strstr(err_msg(), bad) && strstr(err_msg(), want) && strstr(err_msg(), "payload checksum"),
        "message: %s", err_msg());
  CHECK_OK(shard_reader_clip(r, ref[8].off, ref[8].bytes, ref[8].sum, 1, NULL));
  shard_reader_close(&r);

  copy_file(path, bad);
  flip_byte(bad, ref[2].off + 9);  // block header T
  CHECK_OK(shard_reader_open(&r, bad, &S));
  CHECK(shard_reader_clip(r, ref[2].off, ref[2].bytes, 0, 0, NULL) == TSR_EFORMAT &&
            strstr(err_msg(), "block header checksum"), "block header flip found: %s", err_msg());
  shard_reader_close(&r);

  copy_file(path, bad);
  flip_byte(bad, 17);  // shard header geometry
  CHECK(shard_reader_open(&r, bad, &S) == TSR_EFORMAT && strstr(err_msg(), "header checksum") &&
            strstr(err_msg(), bad), "shard header flip found: %s", err_msg());
  copy_file(path, bad);
  flip_byte(bad, 1);  // magic
  CHECK(shard_reader_open(&r, bad, NULL) == TSR_EFORMAT && strstr(err_msg(), "magic"), "bad magic: %s", err_msg());

  // Truncated in the middle of the last clip's payload: earlier clips still read.
  copy_file(path, bad);
  CHECK(truncate(bad, ref[NCLIPS - 1].off + 64 + ref[NCLIPS - 1].bytes / 2) == 0, "truncate");
  CHECK_OK(shard_reader_open(&r, bad, &S));
  CHECK(shard_reader_clip(r, ref[NCLIPS - 1].off, ref[NCLIPS - 1].bytes, 0, 0, NULL) == TSR_EFORMAT &&
            strstr(err_msg(), "truncated"), "truncated payload found: %s", err_msg());
  CHECK_OK(shard_reader_clip(r, ref[NCLIPS - 2].off, ref[NCLIPS - 2].bytes, ref[NCLIPS - 2].sum, 1, NULL));
  shard_reader_close(&r);
  CHECK(truncate(bad, 100) == 0, "truncate");
  CHECK(shard_reader_open(&r, bad, &S) == TSR_EFORMAT && strstr(err_msg(), "shorter"), "short file: %s", err_msg());
  CHECK(truncate(bad, 0) == 0, "truncate");
  CHECK(shard_reader_open(&r, bad, &S) == TSR_EFORMAT, "empty file refused");
  CHECK(shard_reader_open(&r, "/nonexistent/x.tshard", &S) == TSR_EIO, "missing file");

  // ---- shard_truncate ----
  copy_file(path, bad);
  int64_t end3 = align4k(ref[3].off + 64 + ref[3].bytes);
  CHECK_OK(shard_truncate(bad, end3));
  CHECK(file_size(bad) == end3, "truncated to committed end");
  CHECK_OK(shard_truncate(bad, end3));  // idempotent
  CHECK(shard_truncate(bad, end3 + 4096) == TSR_EFORMAT, "shorter than committed end is an error");
  CHECK(shard_truncate(bad, 10) == TSR_EINVAL, "inside header refused");
  CHECK_OK(shard_reader_open(&r, bad, &S));
  CHECK_OK(shard_reader_clip(r, ref[3].off, ref[3].bytes, ref[3].sum, 1, NULL));
  CHECK(shard_reader_clip(r, ref[4].off, ref[4].bytes, 0, 0, NULL) == TSR_EFORMAT, "cut clip gone");
  shard_reader_close(&r);

  // Format 1 (before clip metadata): a version-1 header (no settings) over the same
  // blocks still reads; its blocks have no metadata trailer.
  copy_file(path, bad);
  {
    uint8_t h[4096];
    read_file(bad, h, 0, sizeof h);
    h[8] = 1, h[9] = h[10] = h[11] = 0;
    memset(h + 48, 0, 24);  // fps, short side, max seconds: absent in version 1
    uint64_t sum = XXH3_64bits(h, 4088);
    for (int i = 0; i < 8; i++) h[4088 + i] = (uint8_t)(sum >> (8 * i));
    FILE *f = fopen(bad, "r+b");
    CHECK(f && fwrite(h, 1, sizeof h, f) == sizeof h && fclose(f) == 0, "write v1 header");
  }
  other = S;
  other.fps_num = 30;  // not recorded in version 1: not compared
  CHECK_OK(shard_reader_open(&r, bad, &other));
  CHECK(shard_reader_version(r) == 1, "version 1 read");
  shard_block blk;
  CHECK_OK(shard_reader_block(r, ref[3].off, 1, &blk));
  CHECK(blk.meta == NULL && blk.bytes == ref[3].bytes && blk.end == align4k(ref[3].off + 64 + ref[3].bytes),
        "v1 block: no metadata, end after payload and padding");
  shard_reader_close(&r);

  // Metadata trailer: written after the payload, checksummed, bounds the block's end.
  {
    char mp[600];
    snprintf(mp, sizeof mp, "%s/meta.tshard", dir);
    unlink(mp);
    shard_writer *w = NULL;
    int64_t off = 0;
    uint64_t sum = 0;
    const char meta[] = "{\"v\":1}";
    CHECK_OK(shard_writer_create(&w, mp, &S));
    CHECK_OK(shard_writer_begin_clip(w, 2, 2, &off));
    uint8_t pay[4 * 96 * 2];
    memset(pay, 7, sizeof pay);
    CHECK_OK(shard_writer_append(w, pay, sizeof pay));
    CHECK_OK(shard_writer_end_clip_meta(w, 2, meta, sizeof meta - 1, &sum));
    CHECK(shard_writer_size(w) == align4k(off + 64 + (int64_t)sizeof pay + (int64_t)sizeof meta - 1),
          "block end covers the trailer");
    shard_writer_close(&w);
    CHECK_OK(shard_reader_open(&r, mp, &S));
    CHECK_OK(shard_reader_block(r, off, 1, &blk));
    CHECK(blk.meta && blk.meta_bytes == sizeof meta - 1 && !memcmp(blk.meta, meta, blk.meta_bytes),
          "trailer read back");
    shard_reader_close(&r);
    flip_byte(mp, off + 64 + (int64_t)sizeof pay + 2);  // a metadata byte
    CHECK_OK(shard_reader_open(&r, mp, &S));
    CHECK(shard_reader_block(r, off, 0, &blk) == TSR_EFORMAT && strstr(err_msg(), "metadata"),
          "corrupt trailer refused: %s", err_msg());
    shard_reader_close(&r);
    unlink(mp);
  }

  // Settings helpers.
  store_settings a = S, b = S;
  char diff[256];
  CHECK(store_settings_diff(&a, &b, diff, sizeof diff) == 0 && diff[0] == 0, "equal settings");
  b.fps_num = 16, b.fps_den = 2;
  CHECK(store_settings_diff(&a, &b, diff, sizeof diff) == 0, "8/1 == 16/2");
  b.fps_num = 12, b.fps_den = 1, b.short_side = 128, b.dtype = STORE_DTYPE_BF16;
  CHECK(store_settings_diff(&a, &b, diff, sizeof diff) == 1 &&
            !strcmp(diff, "fps 8/1 vs 12/1; short_side 64 vs 128; dtype u8 vs bf16"), "diff: %s", diff);
  b.dtype = STORE_DTYPE_BF16;
  CHECK(store_token_bytes(&b) == 192, "bf16 token bytes");
  b.dtype = STORE_DTYPE_F32;
  CHECK(store_token_bytes(&b) == 384, "f32 token bytes");
  // a latent store: short side 0 and VAE strides required; pixels: strides 0
  store_settings lat = {16, 1, 0, 1, 2, 2, 16, STORE_DTYPE_BF16, 0, 4, 8};
  CHECK_OK(store_settings_check(&lat));
  lat.vae_t = 0;
  CHECK(store_settings_check(&lat) == TSR_EINVAL && strstr(err_msg(), "vae stride 0x8x8"),
        "latent store without a VAE stride: %s", err_msg());
  lat.vae_t = 4, lat.short_side = 64;
  CHECK(store_settings_check(&lat) == TSR_EINVAL && strstr(err_msg(), "short side 64 in a latent"),
        "latent store with a short side: %s", err_msg());
  a.vae_t = 4, a.vae_s = 8;
  CHECK(store_settings_check(&a) == TSR_EINVAL && strstr(err_msg(), "in a pixel (u8) store"),
        "pixel store with a VAE stride: %s", err_msg());

  // Caption blocks: before a clip block, round trip, layout, checks, damage, rewind.
  {
    char cp[512];
    snprintf(cp, sizeof cp, "%s/cap.tshard", dir);
    lat = (store_settings){16, 1, 0, 1, 2, 2, 4, STORE_DTYPE_BF16, 0, 4, 8};
    shard_writer *cw;
    CHECK_OK(shard_writer_create(&cw, cp, &lat));
    float emb[3 * 5];
    for (int i = 0; i < 15; i++) emb[i] = (float)i * 0.25f - 1;
    const char *text = "a red ball";
    int64_t coff = 0, off = 0, off2 = 0;
    uint64_t csum = 0, psum = 0;
    CHECK_OK(shard_writer_caption(cw, emb, 3, 5, STORE_DTYPE_F32, text, strlen(text), &coff, &csum));
    CHECK(coff == 4096 && csum == XXH3_64bits(emb, sizeof emb), "caption block at %lld",
          (long long)coff);
    uint8_t tok[4 * 32] = {1, 2, 3};  // 2x2 tokens of 1x2x2x4 bf16 values
    CHECK_OK(shard_writer_begin_clip(cw, 2, 2, &off));
    CHECK_OK(shard_writer_append(cw, tok, sizeof tok));
    CHECK_OK(shard_writer_end_clip(cw, 1, &psum));
    CHECK(off == 8192, "the clip block follows the caption block (%lld)", (long long)off);
    // a second caption whose source then fails: rewound away
    int64_t end = shard_writer_size(cw);
    CHECK_OK(shard_writer_caption(cw, emb, 1, 5, STORE_DTYPE_F32, NULL, 0, &off2, NULL));
    CHECK_OK(shard_writer_rewind(cw, off2));
    CHECK(shard_writer_size(cw) == end && file_size(cp) == end, "rewind cuts the caption off");
    CHECK(shard_writer_caption(cw, emb, 0, 5, STORE_DTYPE_F32, NULL, 0, NULL, NULL) == TSR_EINVAL,
          "an empty caption is refused");
    CHECK(shard_writer_caption(cw, emb, 1, 5, STORE_DTYPE_U8, NULL, 0, NULL, NULL) == TSR_EINVAL,
          "a u8 caption is refused");
    shard_writer_close(&cw);
    uint8_t ch[64];
    read_file(cp, ch, coff, 64);
    CHECK(!memcmp(ch, "TSRTEXT1", 8) && le32(ch + 8) == 3 && le32(ch + 12) == 5 &&
              le32(ch + 16) == STORE_DTYPE_F32 && le32(ch + 20) == strlen(text) &&
              le64(ch + 24) == sizeof emb && le64(ch + 32) == csum &&
              le64(ch + 40) == XXH3_64bits(text, strlen(text)) && le64(ch + 56) == XXH3_64bits(ch, 56),
          "caption block header layout");
    uint8_t hh[4096];
    read_file(cp, hh, 0, sizeof hh);
    CHECK(le32(hh + 72) == 4 && le32(hh + 76) == 8 && le32(hh + 32) == STORE_DTYPE_BF16,
          "VAE strides and dtype in the header");
    shard_reader *cr;
    CHECK_OK(shard_reader_open(&cr, cp, &lat));
    shard_caption c;
    CHECK(shard_reader_is_caption(cr, coff) && !shard_reader_is_caption(cr, off), "caption magic");
    CHECK_OK(shard_reader_caption(cr, coff, 1, &c));
    CHECK(c.tokens == 3 && c.dim == 5 && c.dtype == STORE_DTYPE_F32 && !memcmp(c.emb, emb, sizeof emb) &&
              c.text_bytes == strlen(text) && !memcmp(c.text, text, c.text_bytes) && c.end == off,
          "caption round trip");
    store_clip row = {.caption_offset = coff, .caption_tokens = 3, .caption_dim = 5,
                      .caption_checksum = csum};
    CHECK_OK(shard_reader_caption_of(cr, &row, 1, &c));
    row.caption_dim = 6;
    CHECK(shard_reader_caption_of(cr, &row, 0, &c) == TSR_EFORMAT && strstr(err_msg(), "the index says 3 x 6"),
          "a row of another width: %s", err_msg());
    CHECK(shard_reader_caption(cr, off, 0, &c) == TSR_EFORMAT && strstr(err_msg(), "no caption block"),
          "a clip block is no caption: %s", err_msg());
    shard_reader_close(&cr);
    flip_byte(cp, coff + 64 + 4);  // the embedding
    CHECK_OK(shard_reader_open(&cr, cp, &lat));
    CHECK_OK(shard_reader_caption(cr, coff, 0, &c));  // not hashed: not seen
    CHECK(shard_reader_caption(cr, coff, 1, &c) == TSR_EFORMAT &&
              strstr(err_msg(), "caption embedding checksum mismatch") && strstr(err_msg(), cp),
          "a damaged embedding: %s", err_msg());
    shard_reader_close(&cr);
    flip_byte(cp, coff + 64 + (int64_t)sizeof emb + 2);  // the text
    CHECK_OK(shard_reader_open(&cr, cp, &lat));
    CHECK(shard_reader_caption(cr, coff, 0, &c) == TSR_EFORMAT && strstr(err_msg(), "caption text"),
          "a damaged caption text: %s", err_msg());
    shard_reader_close(&cr);
    unlink(cp);
  }

  free(data);
  unlink(path);
  unlink(bad);
  rmdir(dir);
  return check_done();
}
