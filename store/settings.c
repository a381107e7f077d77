// store/settings.c — store settings helpers (store/settings.h): token size and differences.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "store/settings.h"

int store_dtype_size(store_dtype d) {
  switch (d) {
    case STORE_DTYPE_U8: return 1;
    case STORE_DTYPE_BF16: return 2;
    case STORE_DTYPE_F32: return 4;
  }
  return 0;
}

int64_t store_token_bytes(const store_settings *s) {
  if (s->pt <= 0 || s->ph <= 0 || s->pw <= 0 || s->channels <= 0) return 0;
  return (int64_t)s->pt * s->ph * s->pw * s->channels * store_dtype_size(s->dtype);
}

// The name of each store_dtype, in enum order: what the index records and reads back.
static const char *const DTYPE_NAMES[] = {"u8", "bf16", "f32"};
enum { NDTYPES = sizeof DTYPE_NAMES / sizeof DTYPE_NAMES[0] };

const char *store_dtype_name(store_dtype d) {
  return (int)d >= 0 && (int)d < NDTYPES ? DTYPE_NAMES[d] : "?";
}

int store_dtype_from_name(const char *name, store_dtype *d) {
  for (int i = 0; i < NDTYPES; i++)
    if (!strcmp(name, DTYPE_NAMES[i])) return *d = (store_dtype)i, 1;
  return 0;
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
    add(buf, n, &used, "dtype %s vs %s", store_dtype_name(a->dtype), store_dtype_name(b->dtype));
    diff = 1;
  }
  if (a->max_seconds != b->max_seconds) {
    add(buf, n, &used, "max_seconds %g vs %g", a->max_seconds, b->max_seconds);
    diff = 1;
  }
  if (a->vae_t != b->vae_t || a->vae_s != b->vae_s) {
    add(buf, n, &used, "vae stride %dx%dx%d vs %dx%dx%d", a->vae_t, a->vae_s, a->vae_s, b->vae_t,
        b->vae_s, b->vae_s);
    diff = 1;
  }
  return diff;
}

tsr_status store_settings_check(const store_settings *s) {
  char buf[512];
  size_t used = 0;
  if (s->fps_num <= 0 || s->fps_den <= 0 ||
      (int64_t)s->fps_num > (int64_t)STORE_MAX_FPS * s->fps_den ||
      (int64_t)s->fps_num * 3600 < s->fps_den)
    add(buf, sizeof buf, &used, "fps %d/%d outside 1/3600..%d", s->fps_num, s->fps_den,
        STORE_MAX_FPS);
  int latent = store_is_latent(s);
  if (latent) {  // latents keep the encoder's size: no resize, so no short side
    if (s->short_side != 0)
      add(buf, sizeof buf, &used, "short side %d in a latent store (must be 0)", s->short_side);
    if (s->vae_t < 1 || s->vae_s < 1 || s->vae_t > STORE_MAX_VAE_STRIDE ||
        s->vae_s > STORE_MAX_VAE_STRIDE)
      add(buf, sizeof buf, &used, "vae stride %dx%dx%d outside 1..%d", s->vae_t, s->vae_s,
          s->vae_s, STORE_MAX_VAE_STRIDE);
  } else {
    if (s->short_side < STORE_MIN_SHORT_SIDE || s->short_side > STORE_MAX_SHORT_SIDE)
      add(buf, sizeof buf, &used, "short side %d outside %d..%d", s->short_side,
          STORE_MIN_SHORT_SIDE, STORE_MAX_SHORT_SIDE);
    if (s->vae_t != 0 || s->vae_s != 0)
      add(buf, sizeof buf, &used, "vae stride %dx%d in a pixel (u8) store (must be 0)", s->vae_t,
          s->vae_s);
  }
  if (s->pt < 1 || s->ph < 1 || s->pw < 1 || s->pt > STORE_MAX_PATCH || s->ph > STORE_MAX_PATCH ||
      s->pw > STORE_MAX_PATCH)
    add(buf, sizeof buf, &used, "patch %dx%dx%d outside 1..%d", s->pt, s->ph, s->pw,
        STORE_MAX_PATCH);
  else if (!latent && (s->short_side < s->ph || s->short_side < s->pw))
    add(buf, sizeof buf, &used, "short side %d smaller than the patch %dx%d", s->short_side,
        s->ph, s->pw);
  if (s->channels < 1 || s->channels > STORE_MAX_CHANNELS)
    add(buf, sizeof buf, &used, "channels %d outside 1..%d", s->channels, STORE_MAX_CHANNELS);
  if (store_dtype_size(s->dtype) == 0) add(buf, sizeof buf, &used, "unknown dtype %d", (int)s->dtype);
  if (!(s->max_seconds >= 0 && s->max_seconds <= STORE_MAX_SECONDS))
    add(buf, sizeof buf, &used, "max seconds %g outside 0..%g", s->max_seconds,
        STORE_MAX_SECONDS);
  return used ? err_set(TSR_EINVAL, "invalid store settings: %s", buf) : TSR_OK;
}
