// store/clip_meta.c — JSON of a clip block's metadata trailer (clip_meta.h), via jansson.
#include "store/clip_meta.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/shard.h"

#define META_VERSION 1

// The trailer's object but its canonical texts (scores, scene cuts: add_raw); NULL when
// jansson fails (a string that is not UTF-8).
static json_t *encode_object(const clip_meta *m) {
  const store_clip *c = &m->c;
  json_t *o = json_pack(
      "{s:i, s:s, s:I, s:I, s:o, s:f, s:i, s:f, s:f, s:f, s:i, s:i, s:i, s:i, s:i, s:s, s:s,"
      " s:I, s:I, s:I, s:i}",
      "v", META_VERSION, "path", m->path, "size", (json_int_t)m->size, "mtime",
      (json_int_t)m->mtime, "label", m->has_label ? json_string(m->label) : json_null(),
      "ingested_at", m->ingested_at, "clip_index", c->clip_index, "start_s", c->start_s,
      "duration_s", c->duration_s, "src_fps", c->src_fps, "src_w", c->src_w, "src_h", c->src_h,
      "rotation", c->rotation, "sar_num", c->sar_num, "sar_den", c->sar_den, "codec",
      c->codec ? c->codec : "", "pix_fmt", c->pix_fmt ? c->pix_fmt : "", "decoded_frames",
      (json_int_t)c->decoded_frames, "frames", (json_int_t)c->frames, "dropped_frames",
      (json_int_t)c->dropped_frames, "last", m->last ? 1 : 0);
  int bad = !o;
  // the caption block of the clip (version 3 shards), so a rebuild links it again
  if (!bad && c->caption_offset)
    bad = json_object_set_new(o, "caption_offset", json_integer((json_int_t)c->caption_offset));
  if (!bad && c->caption_offset && c->offset > c->caption_offset)
    bad = json_object_set_new(o, "caption_back",
                              json_integer((json_int_t)(c->offset - c->caption_offset)));
  // a caption without an embedding (a manifest span's text alone) is only here and in the
  // index: without it a rebuilt index would lose it
  if (!bad && !c->caption_offset && c->caption)
    bad = json_object_set_new(o, "caption", json_string(c->caption));
  if (!bad && c->manifest_row > 0)  // NaN: an open span end, null
    bad = json_object_set_new(o, "manifest_row", json_integer((json_int_t)c->manifest_row)) ||
          json_object_set_new(o, "manifest_span", json_integer(c->manifest_span)) ||
          json_object_set_new(o, "span_start", isnan(c->span_start) ? json_null()
                                                                     : json_real(c->span_start)) ||
          json_object_set_new(o, "span_end", isnan(c->span_end) ? json_null()
                                                                 : json_real(c->span_end)) ||
          json_object_set_new(o, "span_cut", json_integer(c->span_cut));
  if (!bad && m->last)
    bad = json_object_set_new(o, "source_decoded_frames", json_integer(m->source_decoded_frames)) ||
          json_object_set_new(o, "partial", json_integer(m->partial ? 1 : 0)) ||
          json_object_set_new(o, "note", m->note[0] ? json_string(m->note) : json_null()) ||
          (m->manifest_key[0] &&
           json_object_set_new(o, "manifest_key", json_string(m->manifest_key)));
  if (bad) json_decref(o);
  return bad ? NULL : o;
}

// The compact object `*json` (*len bytes, ending in '}', with members) with "key":raw
// added at its end: the canonical texts go in as they are (jansson would write their
// numbers with 17 digits).
static tsr_status add_raw(char **json, size_t *len, const char *key, const char *raw) {
  size_t k = strlen(key), r = strlen(raw), n = *len + k + r + 4;  // , "key" : and the '}'
  char *s = realloc(*json, n + 1);
  if (!s) return err_set(TSR_ENOMEM, "out of memory encoding clip metadata");
  snprintf(s + *len - 1, n + 2 - *len, ",\"%s\":%s}", key, raw);
  *json = s;
  *len = n;
  return TSR_OK;
}

// The canonical texts of the clip's scores and the last clip's scene cuts (NULL: none).
static tsr_status encode_texts(const clip_meta *m, char **scores, char **cuts) {
  *scores = *cuts = NULL;
  tsr_status st = TSR_OK;
  if (m->c.scores) {
    if (!(*scores = malloc(STORE_MAX_SCORES_BYTES + 1)))
      return err_set(TSR_ENOMEM, "out of memory encoding clip metadata");
    st = store_scores_canon(m->c.scores, *scores, STORE_MAX_SCORES_BYTES + 1);
  }
  if (!st && m->last && m->has_scene_cuts)
    st = store_scene_cuts_format(m->scene_cuts, m->n_scene_cuts, cuts);
  if (!st && m->last && m->manifest_key[0]) st = store_manifest_key_check(m->manifest_key);
  return st;
}

tsr_status clip_meta_encode(const clip_meta *m, char **json, size_t *n) {
  *json = NULL;
  *n = 0;
  const store_clip *c = &m->c;
  char *scores = NULL, *cuts = NULL, *s = NULL;
  size_t len = 0;
  tsr_status st = encode_texts(m, &scores, &cuts);
  if (st) {
    st = err_wrap(TSR_EINVAL, "clip %d of %s: ", c->clip_index, m->path);
    goto out;
  }
  json_t *o = encode_object(m);
  s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
  json_decref(o);
  if (!s) {
    st = err_set(TSR_EINVAL, "clip %d of %s: cannot encode its metadata (strings must be "
                 "UTF-8)", c->clip_index, m->path);
    goto out;
  }
  len = strlen(s);
  if (scores) st = add_raw(&s, &len, "scores", scores);
  if (!st && cuts) st = add_raw(&s, &len, "scene_cuts", cuts);
  if (!st && len > SHARD_META_MAX)
    st = err_set(TSR_EINVAL, "clip %d of %s: metadata of %zu bytes exceeds %d", c->clip_index,
                 m->path, len, SHARD_META_MAX);
  if (!st) {
    *json = s;
    *n = len;
    s = NULL;
  }
out:
  free(s);
  free(scores);
  free(cuts);
  return st;
}

// Field helpers: each returns 0 on success, else records `what` is wrong.
static int get_int(json_t *o, const char *k, int64_t lo, int64_t hi, int64_t *out) {
  json_t *v = json_object_get(o, k);
  if (!json_is_integer(v)) return 1;
  json_int_t x = json_integer_value(v);
  if (x < lo || x > hi) return 1;
  *out = (int64_t)x;
  return 0;
}
static int get_real(json_t *o, const char *k, double *out) {
  json_t *v = json_object_get(o, k);
  if (!json_is_number(v)) return 1;
  *out = json_number_value(v);
  return 0;
}
// String of at most n-1 bytes into buf; null allowed when *is_null is given.
static int get_str(json_t *o, const char *k, char *buf, size_t n, int *is_null) {
  json_t *v = json_object_get(o, k);
  if (is_null) *is_null = json_is_null(v);
  if (is_null && *is_null) {
    buf[0] = 0;
    return 0;
  }
  if (!json_is_string(v) || json_string_length(v) >= n || strlen(json_string_value(v)) !=
                                                               json_string_length(v))
    return 1;  // wrong type, too long, or an embedded NUL
  memcpy(buf, json_string_value(v), json_string_length(v) + 1);
  return 0;
}

// A span time: a number, or null (open: NaN).
static int get_span(json_t *o, const char *k, double *out) {
  json_t *v = json_object_get(o, k);
  if (json_is_null(v)) {
    *out = NAN;
    return 0;
  }
  return get_real(o, k, out);
}

// Text of a JSON value as jansson writes it (reals with 17 digits: read back bit for bit).
static char *dump(json_t *v) {
  return json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(17) | JSON_ENCODE_ANY);
}

// The scores object into m->c.scores, in its canonical text (allocated).
static int get_scores(json_t *v, clip_meta *m) {
  char *text = dump(v), *canon = malloc(STORE_MAX_SCORES_BYTES + 1);
  int bad = !text || !canon ||
            store_scores_canon(text, canon, STORE_MAX_SCORES_BYTES + 1) != TSR_OK;
  free(text);
  if (bad) {
    free(canon);
    return 1;
  }
  m->c.scores = canon;
  return 0;
}

// The fields a manifest ingest adds, each optional (none: not from a manifest); the name of
// the first bad one, or NULL.
static const char *decode_extras(json_t *o, clip_meta *m, int last) {
  store_clip *c = &m->c;
  int64_t row, span, cut;
  json_t *v;
  c->span_start = c->span_end = NAN;
  if (json_object_get(o, "manifest_row")) {
    if (get_int(o, "manifest_row", 1, INT64_MAX, &row)) return "manifest_row";
    if (get_int(o, "manifest_span", 0, INT32_MAX, &span)) return "manifest_span";
    if (get_span(o, "span_start", &c->span_start)) return "span_start";
    if (get_span(o, "span_end", &c->span_end)) return "span_end";
    if (get_int(o, "span_cut", 0, 1, &cut)) return "span_cut";
    c->manifest_row = row, c->manifest_span = (int)span, c->span_cut = (int)cut;
  }
  if ((v = json_object_get(o, "scores")) && get_scores(v, m)) return "scores";
  if ((v = json_object_get(o, "caption"))) {
    if (c->caption_offset || !json_is_string(v) || json_string_length(v) > STORE_MAX_CAPTION_BYTES ||
        strlen(json_string_value(v)) != json_string_length(v) ||
        !(m->caption = strdup(json_string_value(v))))
      return "caption";
    c->caption = m->caption;
  }
  if (!last) return NULL;
  if ((v = json_object_get(o, "scene_cuts"))) {
    char *text = dump(v);
    int bad = !text || store_scene_cuts_parse(text, &m->scene_cuts, &m->n_scene_cuts) != TSR_OK;
    free(text);
    if (bad) return "scene_cuts";
    m->has_scene_cuts = 1;
  }
  if (json_object_get(o, "manifest_key") &&
      (get_str(o, "manifest_key", m->manifest_key, sizeof m->manifest_key, NULL) ||
       store_manifest_key_check(m->manifest_key) != TSR_OK))
    return "manifest_key";
  return NULL;
}

tsr_status clip_meta_decode(const char *json, size_t n, clip_meta *m) {
  memset(m, 0, sizeof *m);
  m->decoded = 1;
  json_error_t e;
  json_t *o = json_loadb(json, n, JSON_REJECT_DUPLICATES, &e);
  if (!o) return err_set(TSR_EFORMAT, "clip metadata is not JSON (%s)", e.text);
  const char *bad = NULL;
  int64_t v = 0, ci, sw, sh, rot, sn, sd, last, partial = 0;
  int label_null = 1, note_null = 1;
  store_clip *c = &m->c;
  if (!json_is_object(o)) bad = "the record";
  else if (get_int(o, "v", 1, 1, &v)) bad = "v";
  else if (get_str(o, "path", m->path, sizeof m->path, NULL) || !m->path[0]) bad = "path";
  else if (get_int(o, "size", 0, INT64_MAX, &m->size)) bad = "size";
  else if (get_int(o, "mtime", INT64_MIN, INT64_MAX, &m->mtime)) bad = "mtime";
  else if (get_str(o, "label", m->label, sizeof m->label, &label_null)) bad = "label";
  else if (get_real(o, "ingested_at", &m->ingested_at)) bad = "ingested_at";
  else if (get_int(o, "clip_index", 0, INT32_MAX, &ci)) bad = "clip_index";
  else if (get_real(o, "start_s", &c->start_s)) bad = "start_s";
  else if (get_real(o, "duration_s", &c->duration_s)) bad = "duration_s";
  else if (get_real(o, "src_fps", &c->src_fps)) bad = "src_fps";
  else if (get_int(o, "src_w", INT32_MIN, INT32_MAX, &sw)) bad = "src_w";
  else if (get_int(o, "src_h", INT32_MIN, INT32_MAX, &sh)) bad = "src_h";
  else if (get_int(o, "rotation", INT32_MIN, INT32_MAX, &rot)) bad = "rotation";
  else if (get_int(o, "sar_num", INT32_MIN, INT32_MAX, &sn)) bad = "sar_num";
  else if (get_int(o, "sar_den", INT32_MIN, INT32_MAX, &sd)) bad = "sar_den";
  else if (get_str(o, "codec", m->codec, sizeof m->codec, NULL)) bad = "codec";
  else if (get_str(o, "pix_fmt", m->pix_fmt, sizeof m->pix_fmt, NULL)) bad = "pix_fmt";
  else if (get_int(o, "decoded_frames", 0, INT64_MAX, &c->decoded_frames)) bad = "decoded_frames";
  else if (get_int(o, "frames", 0, INT64_MAX, &c->frames)) bad = "frames";
  else if (get_int(o, "dropped_frames", 0, INT64_MAX, &c->dropped_frames)) bad = "dropped_frames";
  else if (get_int(o, "last", 0, 1, &last)) bad = "last";
  else if (last && get_int(o, "source_decoded_frames", 0, INT64_MAX, &m->source_decoded_frames))
    bad = "source_decoded_frames";
  else if (last && get_int(o, "partial", 0, 1, &partial)) bad = "partial";
  else if (last && get_str(o, "note", m->note, sizeof m->note, &note_null)) bad = "note";
  else if (json_object_get(o, "caption_offset") &&
           get_int(o, "caption_offset", 1, INT64_MAX, &c->caption_offset))
    bad = "caption_offset";
  else if (c->caption_offset && json_object_get(o, "caption_back") &&
           get_int(o, "caption_back", 1, INT64_MAX, &m->caption_back))
    bad = "caption_back";
  else
    bad = decode_extras(o, m, (int)last);
  json_decref(o);
  if (bad) return err_set(TSR_EFORMAT, "clip metadata: field '%s' missing or invalid", bad);
  m->has_label = !label_null;
  c->clip_index = (int)ci;
  c->src_w = (int)sw;
  c->src_h = (int)sh;
  c->rotation = (int)rot;
  c->sar_num = (int)sn;
  c->sar_den = (int)sd;
  c->codec = m->codec;
  c->pix_fmt = m->pix_fmt;
  c->label = m->has_label ? m->label : NULL;
  m->last = (int)last;
  m->partial = (int)partial;
  return TSR_OK;
}

void clip_meta_release(clip_meta *m) {
  if (!m->decoded) return;
  free(m->scene_cuts);
  free(m->caption);
  free((char *)m->c.scores);
  m->scene_cuts = NULL;
  m->caption = NULL;
  m->c.caption = NULL;
  m->c.scores = NULL;
  m->n_scene_cuts = 0;
}
