// store/json_cols.c — checks and canonical text of the scores, scene cuts and manifest key
// (store/json_cols.h), via jansson for parsing; the canonical text is written here, since
// jansson writes reals with 17 digits (4.7000000000000002) and the text must not depend on
// the library's version.
#include "store/json_cols.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The shortest of %.15g, %.16g, %.17g that reads back as v, bit for bit (so -0 stays -0;
// %.17g always does). v is finite. Returns its length.
static int fmt_real(char *buf, size_t n, double v) {
  int k = 0;
  for (int prec = 15; prec <= 17; prec++) {
    k = snprintf(buf, n, "%.*g", prec, v);
    double back = strtod(buf, NULL);
    if (back == v && signbit(back) == signbit(v)) break;
  }
  return k;
}

// Text built up to a byte limit: `over` is set once it would not fit (n - 1 bytes).
typedef struct {
  char *p;
  size_t n, len;
  int over;
} outbuf;

static void put(outbuf *o, const char *s, size_t k) {
  if (o->over || o->len + k >= o->n) {
    o->over = 1;
    return;
  }
  memcpy(o->p + o->len, s, k);
  o->len += k;
  o->p[o->len] = 0;
}

// "key": with '"', '\' and the control characters escaped (JSON's rules; the rest as it is).
static void put_key(outbuf *o, const char *key) {
  put(o, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)key; *c; c++) {
    char e[8];
    if (*c == '"' || *c == '\\') {
      e[0] = '\\', e[1] = (char)*c;
      put(o, e, 2);
    } else if (*c < 0x20) {
      snprintf(e, sizeof e, "\\u%04x", *c);
      put(o, e, 6);
    } else {
      put(o, (const char *)c, 1);
    }
  }
  put(o, "\":", 2);
}

// Appends score i (key of klen bytes, value v if is_number) to the object text in o.
static tsr_status score_add(outbuf *o, int i, const char *key, size_t klen, int is_number,
                            double v) {
  if (i >= STORE_MAX_SCORES)
    return err_set(TSR_EFORMAT, "scores: more than %d keys (at key '%.64s')", STORE_MAX_SCORES,
                   key);
  if (klen == 0 || klen > STORE_MAX_SCORE_NAME || strlen(key) != klen)
    return err_set(TSR_EFORMAT, "scores: key '%.64s' is empty, longer than %d bytes or holds a "
                   "NUL", key, STORE_MAX_SCORE_NAME);
  if (!is_number || !isfinite(v))
    return err_set(TSR_EFORMAT, "scores: the value of key '%.64s' is not a finite number", key);
  char num[40];
  int k = fmt_real(num, sizeof num, v);
  if (i) put(o, ",", 1);
  put_key(o, key);
  put(o, num, (size_t)k);
  if (o->over)
    return err_set(TSR_EFORMAT, "scores: longer than %d bytes at key '%.64s'",
                   STORE_MAX_SCORES_BYTES, key);
  return TSR_OK;
}

static tsr_status scores_close(outbuf *o) {
  put(o, "}", 1);
  return o->over ? err_set(TSR_EFORMAT, "scores: longer than %d bytes", STORE_MAX_SCORES_BYTES)
                 : TSR_OK;
}

// The parsed object of a scores text, or NULL with the error set.
static json_t *scores_parse(const char *text) {
  json_error_t e;
  json_t *o = json_loads(text, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &e);
  if (!o) {
    err_set(TSR_EFORMAT, "scores are not JSON (%s)", e.text);
    return NULL;
  }
  if (!json_is_object(o)) {
    json_decref(o);
    err_set(TSR_EFORMAT, "scores are not a JSON object");
    return NULL;
  }
  return o;
}

tsr_status store_scores_canon(const char *text, char *out, size_t n) {
  if (n < STORE_MAX_SCORES_BYTES + 1)
    return err_set(TSR_EINVAL, "scores: a buffer of %zu bytes is too small", n);
  out[0] = 0;
  json_t *o = scores_parse(text);
  if (!o) return TSR_EFORMAT;
  outbuf b = {out, STORE_MAX_SCORES_BYTES + 1, 0, 0};
  put(&b, "{", 1);
  const char *key;
  size_t klen;
  json_t *v;
  int i = 0;
  tsr_status st = TSR_OK;
  json_object_keylen_foreach(o, key, klen, v) {
    if ((st = score_add(&b, i++, key, klen, json_is_number(v), json_number_value(v)))) break;
  }
  if (!st) st = scores_close(&b);
  json_decref(o);
  if (st) out[0] = 0;
  return st;
}

tsr_status store_scores_check(const char *text) {
  char buf[STORE_MAX_SCORES_BYTES + 1];
  return store_scores_canon(text, buf, sizeof buf);
}

tsr_status store_scores_format(const char *const *names, const double *values, int count,
                               char *out, size_t n) {
  if (n < STORE_MAX_SCORES_BYTES + 1 || count < 0)
    return err_set(TSR_EINVAL, "scores: a buffer of %zu bytes is too small, or %d scores", n,
                   count);
  out[0] = 0;
  outbuf b = {out, STORE_MAX_SCORES_BYTES + 1, 0, 0};
  put(&b, "{", 1);
  tsr_status st = TSR_OK;
  for (int i = 0; i < count && !st; i++) {
    for (int j = 0; j < i && !st; j++)
      if (!strcmp(names[i], names[j]))
        st = err_set(TSR_EFORMAT, "scores: key '%.64s' is given twice", names[i]);
    if (!st) st = score_add(&b, i, names[i], strlen(names[i]), 1, values[i]);
  }
  if (!st) st = scores_close(&b);
  if (st) out[0] = 0;
  return st;
}

tsr_status store_scores_each(const char *text, int (*fn)(const char *name, double v, void *ctx),
                             void *ctx) {
  tsr_status st = store_scores_check(text);
  json_t *o = st ? NULL : scores_parse(text);
  if (!o) return TSR_EFORMAT;
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    if (fn(key, json_number_value(v), ctx)) break;
  }
  json_decref(o);
  return TSR_OK;
}

// Cut i at t after prev (i > 0): TSR_OK when it keeps the rules, else the error (status st).
static tsr_status cut_ok(tsr_status st, int i, double t, double prev) {
  if (!isfinite(t) || t < 0)
    return err_set(st, "scene cut %d (%g s) is not a finite time >= 0", i, t);
  if (i > 0 && !(t > prev))
    return err_set(st, "scene cut %d (%.17g s) does not come after cut %d (%.17g s): cut times "
                   "must be strictly ascending", i, t, i - 1, prev);
  return TSR_OK;
}

tsr_status store_scene_cuts_format(const double *cuts, int n, char **text) {
  *text = NULL;
  if (n < 0 || (n > 0 && !cuts)) return err_set(TSR_EINVAL, "scene cuts: %d cuts", n);
  char *buf = malloc(STORE_MAX_SCENE_CUTS_BYTES + 1);
  if (!buf) return err_set(TSR_ENOMEM, "out of memory for %d scene cuts", n);
  outbuf b = {buf, STORE_MAX_SCENE_CUTS_BYTES + 1, 0, 0};
  put(&b, "[", 1);
  for (int i = 0; i < n; i++) {
    tsr_status st = cut_ok(TSR_EINVAL, i, cuts[i], i ? cuts[i - 1] : 0);
    if (st) {
      free(buf);
      return st;
    }
    char num[40];
    int k = fmt_real(num, sizeof num, cuts[i]);
    if (i) put(&b, ",", 1);
    put(&b, num, (size_t)k);
  }
  put(&b, "]", 1);
  if (b.over) {
    free(buf);
    return err_set(TSR_EINVAL, "scene cuts: %d cut times take more than %d bytes of text (about "
                   "2,000 cuts fit): keep fewer (a longer minimum shot length)", n,
                   STORE_MAX_SCENE_CUTS_BYTES);
  }
  char *fit = realloc(buf, b.len + 1);
  *text = fit ? fit : buf;
  return TSR_OK;
}

tsr_status store_scene_cuts_parse(const char *text, double **cuts, int *n) {
  *cuts = NULL;
  *n = 0;
  if (strlen(text) > STORE_MAX_SCENE_CUTS_BYTES)
    return err_set(TSR_EFORMAT, "scene cuts: more than %d bytes of text",
                   STORE_MAX_SCENE_CUTS_BYTES);
  json_error_t e;
  json_t *a = json_loads(text, JSON_DECODE_INT_AS_REAL, &e);
  if (!a || !json_is_array(a)) {
    json_decref(a);
    return err_set(TSR_EFORMAT, "scene cuts are not a JSON array%s%s", a ? "" : ": ",
                   a ? "" : e.text);
  }
  size_t len = json_array_size(a);
  double *v = len ? malloc(len * sizeof *v) : NULL;
  tsr_status st = len && !v ? err_set(TSR_ENOMEM, "out of memory for %zu scene cuts", len) : TSR_OK;
  for (size_t i = 0; i < len && !st; i++) {
    json_t *x = json_array_get(a, i);
    if (!json_is_number(x)) st = err_set(TSR_EFORMAT, "scene cut %zu is not a number", i);
    else st = cut_ok(TSR_EFORMAT, (int)i, v[i] = json_number_value(x), i ? v[i - 1] : 0);
  }
  json_decref(a);
  if (st) {
    free(v);
    return st;
  }
  *cuts = v;
  *n = (int)len;
  return TSR_OK;
}

tsr_status store_manifest_key_check(const char *key) {
  size_t n = key ? strnlen(key, STORE_MAX_MANIFEST_KEY + 1) : 0;
  int ok = n >= 1 && n <= STORE_MAX_MANIFEST_KEY;
  for (size_t i = 0; ok && i < n; i++) ok = key[i] >= 0x21 && key[i] <= 0x7e;
  if (!ok)
    return err_set(TSR_EINVAL, "manifest key '%.40s%s' is not 1 to %d bytes of printable ASCII "
                   "without spaces", key ? key : "", n > 40 ? "..." : "", STORE_MAX_MANIFEST_KEY);
  return TSR_OK;
}
