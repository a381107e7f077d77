// ingest/manifest_value.c — times, list cells and score names of manifests.
#include "ingest/manifest_value.h"

#include <ctype.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/num.h"

// ---- times -----------------------------------------------------------------------------

// The digits at *p (at least one, at most 9: an int holds them), advancing *p.
static int read_digits(const char **p, long *v) {
  const char *s = *p;
  long x = 0;
  int n = 0;
  while (isdigit((unsigned char)*s) && n < 10) x = x * 10 + (*s++ - '0'), n++;
  if (n == 0 || n > 9) return -1;
  *p = s;
  *v = x;
  return 0;
}

// "H:MM:SS[.fff]" or "M:SS[.fff]" (s trimmed, no sign).
static mv_result parse_timecode(const char *s, double *out) {
  long part[3];
  int n = 0;
  const char *p = s, *last = s;
  for (;;) {
    last = p;
    if (n == 3 || read_digits(&p, &part[n])) return MV_SYNTAX;
    n++;
    if (*p != ':') break;
    p++;
  }
  if (n < 2) return MV_SYNTAX;
  if (*p == '.') {
    const char *frac = ++p;
    while (isdigit((unsigned char)*p)) p++;
    if (p == frac) return MV_SYNTAX;
  }
  if (*p) return MV_SYNTAX;
  long min = part[n - 2], hour = n == 3 ? part[0] : 0;
  if (part[n - 1] >= 60 || (n == 3 && min >= 60)) return MV_SYNTAX;
  // SS.fff read whole (digits and one point, checked above), so a time under a minute is
  // the double nearest its text
  *out = (double)hour * 3600.0 + (double)min * 60.0 + strtod(last, NULL);
  return MV_OK;
}

mv_result mv_parse_time(const char *s, double *out) {
  char buf[64];
  while (*s == ' ' || *s == '\t') s++;
  size_t len = strlen(s);
  while (len && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
  if (len == 0 || len >= sizeof buf) return MV_SYNTAX;
  memcpy(buf, s, len);
  buf[len] = 0;
  if (strchr(buf, ':')) {
    if (buf[0] == '-') return parse_timecode(buf + 1, out) ? MV_SYNTAX : MV_NEGATIVE;
    return parse_timecode(buf, out);
  }
  double v;
  if (num_parse_double(buf, -DBL_MAX, DBL_MAX, &v)) return MV_SYNTAX;
  if (v < 0) return MV_NEGATIVE;
  *out = v + 0.0;  // -0 is 0
  return MV_OK;
}

// ---- list cells --------------------------------------------------------------------------

typedef struct {
  char *p;
  size_t len, cap;
} out_buf;

// Room for `more` bytes (cells are at most MANIFEST_MAX_RECORD, so this stays bounded).
static int reserve(out_buf *o, size_t more) {
  if (o->len + more + 1 <= o->cap) return 0;
  size_t cap = o->cap ? o->cap : 256;
  while (cap < o->len + more + 1) cap *= 2;
  char *p = realloc(o->p, cap);
  if (!p) return -1;
  o->p = p;
  o->cap = cap;
  return 0;
}

static void put(out_buf *o, const char *s, size_t n) {
  memcpy(o->p + o->len, s, n);
  o->len += n;
}

// A code point as JSON's \uXXXX (a surrogate pair above U+FFFF).
static void put_code(out_buf *o, unsigned long c) {
  char e[32];
  if (c > 0xFFFF) {
    c -= 0x10000;
    snprintf(e, sizeof e, "\\u%04lx\\u%04lx", 0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF));
  } else {
    snprintf(e, sizeof e, "\\u%04lx", c);
  }
  put(o, e, strlen(e));
}

// `n` hex digits at s, or -1.
static long hex_value(const char *s, int n) {
  long v = 0;
  for (int i = 0; i < n; i++) {
    int c = (unsigned char)s[i];
    if (!isxdigit(c)) return -1;
    v = v * 16 + (isdigit(c) ? c - '0' : tolower(c) - 'a' + 10);
  }
  return v;
}

// One escape of a Python string (s at the character after the backslash) as JSON; returns
// the characters of s it used, or 0 if malformed.
static size_t put_escape(out_buf *o, const char *s) {
  switch (*s) {
  case '\'': put(o, "'", 1); return 1;
  case '"': put(o, "\\\"", 2); return 1;
  case '\\': put(o, "\\\\", 2); return 1;
  case 'n': case 't': case 'r': case 'b': case 'f': put(o, "\\", 1); put(o, s, 1); return 1;
  case '\n': return 1;  // a line continuation
  case 'x': case 'u': case 'U': {
    int n = *s == 'x' ? 2 : *s == 'u' ? 4 : 8;
    long c = hex_value(s + 1, n);
    if (c < 0 || c > 0x10FFFF) return 0;
    put_code(o, (unsigned long)c);
    return (size_t)n + 1;
  }
  default:
    if (*s >= '0' && *s <= '7') {  // octal, up to 3 digits
      size_t k = 0;
      unsigned long c = 0;
      while (k < 3 && s[k] >= '0' && s[k] <= '7') c = c * 8 + (unsigned long)(s[k++] - '0');
      put_code(o, c);
      return k;
    }
    if (!*s) return 0;
    put(o, "\\\\", 2);  // Python keeps an unknown escape as written: "\d" is "\\d"
    put(o, s, 1);
    return 1;
  }
}

// A quoted Python string starting at s (its quote) as a JSON string; returns the
// characters used, or 0 if it does not close.
static size_t put_string(out_buf *o, const char *s) {
  char q = s[0];
  size_t i = 1;
  put(o, "\"", 1);
  while (s[i] && s[i] != q) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\\') {
      size_t used = put_escape(o, s + i + 1);
      if (!used) return 0;
      i += 1 + used;
    } else if (c == '"') {
      put(o, "\\\"", 2), i++;
    } else if (c < 0x20) {
      put_code(o, c), i++;
    } else {
      put(o, s + i, 1), i++;
    }
  }
  if (s[i] != q) return 0;
  put(o, "\"", 1);
  return i + 1;
}

// Python's names of constants as JSON; returns the characters used, or 0.
static size_t put_name(out_buf *o, const char *s) {
  static const char *py[] = {"None", "True", "False"}, *js[] = {"null", "true", "false"};
  size_t n = 0;
  while (isalnum((unsigned char)s[n]) || s[n] == '_') n++;
  for (int k = 0; k < 3; k++)
    if (n == strlen(py[k]) && !strncmp(s, py[k], n)) {
      put(o, js[k], strlen(js[k]));
      return n;
    }
  return 0;
}

// The Python (or JSON) literal `s` as JSON text in o; 0, or -1 with why, -2 out of memory.
static int translate(const char *s, out_buf *o, char *why, size_t wn) {
  // an input byte becomes at most 6 output bytes (a raw control character -> \u00XX; the
  // escapes grow less: \xhh 4 -> 6, \0 2 -> 6, \U0001F600 10 -> 12): reserve once
  if (reserve(o, 6 * strlen(s) + 16)) return -2;
  o->len = 0;
  for (size_t i = 0; s[i];) {
    char c = s[i];
    size_t used = 1;
    if (c == '\'' || c == '"') used = put_string(o, s + i);
    else if (isalpha((unsigned char)c)) used = put_name(o, s + i);
    else if (c == '(' || c == ')') put(o, c == '(' ? "[" : "]", 1);
    else put(o, &c, 1);
    if (!used) {
      snprintf(why, wn, c == '\'' || c == '"' ? "a string at character %zu does not close"
               : "unexpected text at character %zu", i + 1);
      return -1;
    }
    i += used;
  }
  o->p[o->len] = 0;
  return 0;
}

int mv_parse_list(const char *text, char **tmp, size_t *cap, json_t **out, char *why, size_t n) {
  out_buf o = {*tmp, 0, *cap};
  *out = NULL;
  int rc = translate(text, &o, why, n);
  *tmp = o.p;
  *cap = o.cap;
  if (rc) return rc;
  json_error_t jerr;
  json_t *v = json_loadb(o.p, o.len, 0, &jerr);
  if (!v) {
    snprintf(why, n, "not a list: %s", jerr.text);
    return -1;
  }
  if (!json_is_array(v)) {
    json_decref(v);
    snprintf(why, n, "not a list (it does not start with '[')");
    return -1;
  }
  *out = v;
  return 0;
}

// ---- names -------------------------------------------------------------------------------

void mv_score_name(char *dst, size_t n, const char *src) {
  size_t k = 0;
  while (*src == ' ' || *src == '\t') src++;
  for (; *src && k + 1 < n; src++) {
    if (*src == ' ' || *src == '\t') {
      while (src[1] == ' ' || src[1] == '\t') src++;
      if (!src[1]) break;  // trailing spaces
      dst[k++] = '_';
    } else {
      dst[k++] = *src;
    }
  }
  dst[k] = 0;
}
