// ingest/settings.c — store settings helpers (store.h): token size and differences.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ingest/store.h"

static int64_t dtype_bytes(store_dtype d) {
  switch (d) {
    case STORE_DTYPE_U8: return 1;
    case STORE_DTYPE_BF16: return 2;
  }
  return 0;
}

int64_t store_token_bytes(const store_settings *s) {
  if (s->pt <= 0 || s->ph <= 0 || s->pw <= 0 || s->channels <= 0) return 0;
  return (int64_t)s->pt * s->ph * s->pw * s->channels * dtype_bytes(s->dtype);
}

static const char *dtype_name(store_dtype d) {
  switch (d) {
    case STORE_DTYPE_U8: return "u8";
    case STORE_DTYPE_BF16: return "bf16";
  }
  return "?";
}

// Appends "; " separated items to buf, always NUL-terminated.
static void add(char *buf, size_t n, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t n, size_t *used, const char *fmt, ...) {
  if (!buf || n == 0 || *used >= n - 1) return;
  if (*used > 0) {
    int k = snprintf(buf + *used, n - *used, "; ");
    if (k > 0) *used = (*used + (size_t)k < n) ? *used + (size_t)k : n - 1;
  }
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *used, n - *used, fmt, ap);
  va_end(ap);
  if (k > 0) *used = (*used + (size_t)k < n) ? *used + (size_t)k : n - 1;
}

int store_settings_diff(const store_settings *a, const store_settings *b, char *buf, size_t n) {
  size_t used = 0;
  int diff = 0;
  if (buf && n) buf[0] = 0;
  // Frame rates compare as rationals (8/1 == 16/2).
  if ((int64_t)a->fps_num * b->fps_den != (int64_t)b->fps_num * a->fps_den) {
    add(buf, n, &used, "fps %d/%d vs %d/%d", a->fps_num, a->fps_den, b->fps_num, b->fps_den);
    diff = 1;
  }
  if (a->short_side != b->short_side) {
    add(buf, n, &used, "short_side %d vs %d", a->short_side, b->short_side);
    diff = 1;
  }
  if (a->pt != b->pt || a->ph != b->ph || a->pw != b->pw) {
    add(buf, n, &used, "patch %dx%dx%d vs %dx%dx%d", a->pt, a->ph, a->pw, b->pt, b->ph, b->pw);
    diff = 1;
  }
  if (a->channels != b->channels) {
    add(buf, n, &used, "channels %d vs %d", a->channels, b->channels);
    diff = 1;
  }
  if (a->dtype != b->dtype) {
    add(buf, n, &used, "dtype %s vs %s", dtype_name(a->dtype), dtype_name(b->dtype));
    diff = 1;
  }
  if (a->max_seconds != b->max_seconds) {
    add(buf, n, &used, "max_seconds %g vs %g", a->max_seconds, b->max_seconds);
    diff = 1;
  }
  return diff;
}
