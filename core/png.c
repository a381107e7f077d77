// core/png.c — uncompressed PNG (core/png.h). Chunks carry the CRC-32 of ISO 3309 (not
// core/crc32c.h's Castagnoli polynomial); the zlib stream its Adler-32.
#include "core/png.h"

#include <stdlib.h>
#include <string.h>

static uint32_t crc32_update(uint32_t c, const uint8_t *p, size_t n) {
  static uint32_t table[256];
  if (!table[1])  // filled once; the same values from every thread that races here
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t v = i;
      for (int k = 0; k < 8; k++) v = v & 1 ? 0xEDB88320u ^ (v >> 1) : v >> 1;
      table[i] = v;
    }
  for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c;
}

static void be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

// A chunk at p: length, type, data (n bytes, already at p + 8), CRC of type and data.
static size_t chunk(uint8_t *p, const char *type, size_t n) {
  be32(p, (uint32_t)n);
  memcpy(p + 4, type, 4);
  be32(p + 8 + n, crc32_update(0xffffffffu, p + 4, n + 4) ^ 0xffffffffu);
  return n + 12;
}

tsr_status png_encode_rgb(const uint8_t *rgb, int w, int h, uint8_t **out, size_t *n) {
  if (w < 1 || h < 1 || w > 65535 || h > 65535)
    return err_set(TSR_EINVAL, "png: image size %dx%d outside 1..65535", w, h);
  size_t row = (size_t)w * 3 + 1, raw = row * (size_t)h;  // filter byte + pixels a row
  size_t blocks = (raw + 65534) / 65535;                  // stored blocks of <= 65535 bytes
  size_t zlen = 2 + raw + blocks * 5 + 4;
  size_t cap = 8 + (12 + 13) + (12 + zlen) + 12;
  uint8_t *p = malloc(cap);
  if (!p) return err_set(TSR_ENOMEM, "png: out of memory (%zu bytes)", cap);
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  memcpy(p, sig, 8);
  size_t at = 8;
  uint8_t *ih = p + at + 8;
  be32(ih, (uint32_t)w), be32(ih + 4, (uint32_t)h);
  ih[8] = 8, ih[9] = 2, ih[10] = 0, ih[11] = 0, ih[12] = 0;  // 8 bits, RGB, deflate, no interlace
  at += chunk(p + at, "IHDR", 13);
  uint8_t *z = p + at + 8, *q = z;
  *q++ = 0x78, *q++ = 0x01;  // deflate, 32 K window, no preset dictionary (0x7801 % 31 == 0)
  uint32_t a = 1, b = 0;     // Adler-32 of the raw scanlines
  size_t left = raw, r = 0, col = 0;  // position: row r, byte col of it (0: the filter byte)
  while (left > 0) {
    size_t len = left < 65535 ? left : 65535;
    *q++ = left == len;  // BFINAL on the last block, BTYPE 00 (stored)
    *q++ = (uint8_t)len, *q++ = (uint8_t)(len >> 8);
    *q++ = (uint8_t)~len, *q++ = (uint8_t)(~len >> 8);
    for (size_t i = 0; i < len; i++) {
      uint8_t v = col == 0 ? 0 : rgb[r * (size_t)w * 3 + col - 1];
      *q++ = v;
      a = (a + v) % 65521, b = (b + a) % 65521;
      if (++col == row) col = 0, r++;
    }
    left -= len;
  }
  be32(q, b << 16 | a);
  at += chunk(p + at, "IDAT", zlen);
  at += chunk(p + at, "IEND", 0);
  *out = p, *n = at;
  return TSR_OK;
}
