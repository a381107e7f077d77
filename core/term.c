// core/term.c — text from outside shown safely on a terminal (core/term.h).
#include "core/term.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

// Length of the valid UTF-8 sequence at s (1..4) and its code point, or 0 if the bytes
// there are not one (overlong forms, surrogates and values past U+10FFFF included).
static int utf8_next(const unsigned char *s, uint32_t *cp) {
  unsigned char c = s[0];
  int len;
  uint32_t v, min;
  if (c < 0x80) return *cp = c, 1;
  if (c >= 0xc2 && c <= 0xdf) len = 2, v = c & 0x1f, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef) len = 3, v = c & 0x0f, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4) len = 4, v = c & 0x07, min = 0x10000;
  else return 0;
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;  // also stops at the NUL
    v = v << 6 | (s[i] & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  return *cp = v, len;
}

int term_is_utf8(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  uint32_t cp;
  for (int len; *p; p += len)
    if (!(len = utf8_next(p, &cp))) return 0;
  return 1;
}

// Code points a terminal acts on or that reorder what is shown (C1 controls, bidi overrides).
static int hidden_cp(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

// The escape of one ASCII control byte into buf (at least 5 bytes); its length.
static int escape_byte(unsigned char c, char *buf) {
  switch (c) {
  case '\n': return snprintf(buf, 5, "\\n");
  case '\r': return snprintf(buf, 5, "\\r");
  case '\t': return snprintf(buf, 5, "\\t");
  case 0x1b: return snprintf(buf, 5, "\\e");
  default: return snprintf(buf, 5, "\\x%02x", c);
  }
}

char *term_escape(char *out, size_t n, const char *s) {
  if (n == 0) return out;
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  size_t used = 0;
  while (*p) {
    char piece[8];
    int plen, adv;
    uint32_t cp = 0;
    int len = utf8_next(p, &cp);
    if (len == 0) {  // a byte of no valid sequence
      plen = snprintf(piece, sizeof piece, "\\x%02x", *p);
      adv = 1;
    } else if (len == 1 && (cp < 0x20 || cp == 0x7f)) {
      plen = escape_byte((unsigned char)cp, piece);
      adv = 1;
    } else if (hidden_cp(cp)) {
      plen = snprintf(piece, sizeof piece, "\\u%04x", (unsigned)cp);
      adv = len;
    } else {
      memcpy(piece, p, (size_t)len);
      plen = adv = len;
    }
    if (used + (size_t)plen > n - 1) {  // cut at this character, marked
      size_t keep = n - 1 >= 3 ? n - 1 - 3 : 0;
      if (used > keep) {  // back to `keep`, then to the start of the character cut there
        used = keep;
        while (used > 0 && ((unsigned char)out[used] & 0xc0) == 0x80) used--;
      }
      snprintf(out + used, n - used, "%.*s", (int)(n - 1 - used), "...");
      return out;
    }
    memcpy(out + used, piece, (size_t)plen);
    used += (size_t)plen;
    p += adv;
  }
  out[used] = 0;
  return out;
}
