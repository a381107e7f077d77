// ingest/manifest_row.c — a manifest row's cells into its path, spans, captions and scores.
#include "ingest/manifest_row.h"

#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/num.h"
#include "core/term.h"
#include "ingest/manifest_value.h"
#include "store/json_cols.h"
#include "store/settings.h"

enum { T_START, T_END, T_START_FRAME, T_END_FRAME, NTIMES };
enum { L_SPANS, L_CAPTIONS, L_SCORES, L_OBJECTS, NLISTS };  // MCOL_SPAN_LIST ... MCOL_SPANS

struct mrow_cells {
  const char *path;
  int has[NTIMES];
  double t[NTIMES];
  const char *tcol[NTIMES];
  const char *caption, *caption_col;
  json_t *list[NLISTS];
  const char *list_col[NLISTS];
  const char *score_list_name;
  json_t *held[NLISTS];  // lists parsed from text, released at the next row
  int nheld;
  manifest_score *rs, *ss;  // the row's scores; every span's scores, one after the other
  int nrs, rscap, nss, sscap;
  int *soff;                // span k's scores start at ss[soff[k]]
  int spcap;
  char *tmp;                // list cells translated to JSON (manifest_value.h)
  size_t tmpcap;
  char *names;              // score names made for this row (mrow_name)
  size_t nlen, ncap;
};

static void fail(mrow *b, const char *reason, const char *column, int span, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void fail(mrow *b, const char *reason, const char *column, int span, const char *fmt, ...) {
  if (b->reason) return;
  b->reason = reason;
  b->column = column;
  b->span = span;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->what, sizeof b->what, fmt, ap);
  va_end(ap);
}

// A cell's text for a message: at most 80 bytes, "..." when cut.
static const char *snip(char *out, size_t n, const char *s) {
  size_t len = strlen(s);
  if (len < 80 || n < 84) snprintf(out, n, "%s", s);
  else snprintf(out, n, "%.77s...", s);
  return out;
}

static const char *json_kind(const json_t *j) {
  switch (json_typeof(j)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "a list";
  case JSON_STRING: return "text";
  case JSON_INTEGER: case JSON_REAL: return "a number";
  case JSON_NULL: return "null";
  default: return "true/false";
  }
}

tsr_status mrow_init(mrow *b) {
  memset(b, 0, sizeof *b);
  b->c = calloc(1, sizeof *b->c);
  return b->c ? TSR_OK : err_set(TSR_ENOMEM, "out of memory reading a manifest");
}

void mrow_free(mrow *b) {
  struct mrow_cells *c = b->c;
  if (c) {
    for (int i = 0; i < c->nheld; i++) json_decref(c->held[i]);
    free(c->rs);
    free(c->ss);
    free(c->soff);
    free(c->tmp);
    free(c->names);
    free(c);
  }
  free(b->spans);
  memset(b, 0, sizeof *b);
}

tsr_status mrow_begin(mrow *b, size_t bytes) {
  struct mrow_cells *c = b->c;
  for (int i = 0; i < c->nheld; i++) json_decref(c->held[i]);
  manifest_score *rs = c->rs, *ss = c->ss;
  int *soff = c->soff, rscap = c->rscap, sscap = c->sscap, spcap = c->spcap;
  char *tmp = c->tmp, *names = c->names;
  size_t tmpcap = c->tmpcap, ncap = c->ncap;
  *c = (struct mrow_cells){.rs = rs, .ss = ss, .soff = soff, .rscap = rscap, .sscap = sscap,
                           .spcap = spcap, .tmp = tmp, .tmpcap = tmpcap, .names = names,
                           .ncap = ncap};
  b->reason = b->column = NULL;
  b->span = -1;
  b->what[0] = b->path[0] = 0;
  b->seen = 0;
  b->nspans = 0;
  if (bytes + 16 > c->ncap) {
    char *n = realloc(c->names, bytes + 16);
    if (!n) return err_set(TSR_ENOMEM, "out of memory reading a manifest row");
    c->names = n;
    c->ncap = bytes + 16;
  }
  return TSR_OK;
}

const char *mrow_name(mrow *b, const char *raw) {
  struct mrow_cells *c = b->c;
  size_t room = c->ncap - c->nlen;
  if (strlen(raw) + 1 > room) return raw;  // cannot happen within a record's bytes
  char *dst = c->names + c->nlen;
  mv_score_name(dst, room, raw);
  c->nlen += strlen(dst) + 1;
  return dst;
}

// ---- cells -------------------------------------------------------------------------------

static tsr_status push_score(manifest_score **v, int *n, int *cap, const char *name, double x) {
  if (*n == *cap) {
    int nc = *cap ? 2 * *cap : 16;
    manifest_score *p = realloc(*v, (size_t)nc * sizeof *p);
    if (!p) return err_set(TSR_ENOMEM, "out of memory reading a manifest row");
    *v = p;
    *cap = nc;
  }
  (*v)[(*n)++] = (manifest_score){name, x};
  return TSR_OK;
}

// A time from text or JSON (a number of seconds, a time text, null); 0, or -1 after fail.
static int time_of(mrow *b, const char *column, int span, const char *text, const json_t *j,
                   int *has, double *v) {
  char s[96];
  *has = 0;
  if (j && json_is_number(j)) {
    *v = json_number_value(j);
    if (*v < 0) return fail(b, "negative time", column, span, "time %g is negative", *v), -1;
    *has = 1;
    return 0;
  }
  if (j && json_is_string(j)) text = json_string_value(j);
  else if (j && !json_is_null(j))
    return fail(b, "timestamp", column, span, "a time must be a number or text, not %s",
                json_kind(j)), -1;
  if (!text || !*text) return 0;
  mv_result r = mv_parse_time(text, v);
  if (r == MV_NEGATIVE)
    return fail(b, "negative time", column, span, "time '%s' is negative",
                snip(s, sizeof s, text)), -1;
  if (r)
    return fail(b, "timestamp", column, span, "'%s' is not a time (seconds, or H:MM:SS.fff)",
                snip(s, sizeof s, text)), -1;
  *has = 1;
  return 0;
}

static void take_time(mrow *b, const char *column, mcol_role role, mcell cell) {
  struct mrow_cells *c = b->c;
  int k = role == MCOL_START ? T_START : role == MCOL_END ? T_END
          : role == MCOL_START_FRAME ? T_START_FRAME : T_END_FRAME;
  c->tcol[k] = column;
  if (k == T_START || k == T_END) {
    time_of(b, column, -1, cell.text, cell.json, &c->has[k], &c->t[k]);
    return;
  }
  char s[96];
  const json_t *j = cell.json;
  const char *text = j && json_is_string(j) ? json_string_value(j) : cell.text;
  double v;
  if (j && json_is_number(j)) v = json_number_value(j);
  else if (!text || !*text) return;  // empty, or JSON null
  else if (num_parse_double(text, -DBL_MAX, DBL_MAX, &v)) {
    fail(b, "timestamp", column, -1, "'%s' is not a frame number", snip(s, sizeof s, text));
    return;
  }
  if (v < 0) {
    fail(b, "negative time", column, -1, "frame %g is negative", v);
    return;
  }
  c->has[k] = 1;
  c->t[k] = v;
}

static void take_caption(mrow *b, const char *column, mcell cell) {
  struct mrow_cells *c = b->c;
  c->caption_col = column;
  if (cell.json && !json_is_string(cell.json) && !json_is_null(cell.json)) {
    fail(b, "caption type", column, -1, "a caption must be text, not %s", json_kind(cell.json));
    return;
  }
  const char *t = cell.json ? json_string_value(cell.json) : cell.text;
  c->caption = t && *t ? t : NULL;
}

static tsr_status take_score(mrow *b, const char *column, const char *name, int strict,
                             mcell cell) {
  struct mrow_cells *c = b->c;
  const json_t *j = cell.json;
  const char *text = j && json_is_string(j) ? json_string_value(j) : cell.text;
  char s[96];
  double v;
  if (j && json_is_number(j)) {
    v = json_number_value(j);
  } else if (j && !json_is_string(j) && !json_is_null(j)) {
    if (strict) fail(b, "number", column, -1, "a score must be a number, not %s", json_kind(j));
    return TSR_OK;
  } else if (!text || !*text) {
    return TSR_OK;  // empty or null: no score
  } else if (num_parse_double(text, -DBL_MAX, DBL_MAX, &v)) {
    if (strict) fail(b, "number", column, -1, "'%s' is not a number", snip(s, sizeof s, text));
    return TSR_OK;
  }
  return push_score(&c->rs, &c->nrs, &c->rscap, name, v);
}

static tsr_status take_list(mrow *b, const char *column, const char *name, mcol_role role,
                            mcell cell) {
  struct mrow_cells *c = b->c;
  int k = (int)(role - MCOL_SPAN_LIST);
  const json_t *j = cell.json;
  const char *text = j && json_is_string(j) ? json_string_value(j) : cell.text;
  json_t *list = NULL;
  char s[96], why[256];
  c->list_col[k] = column;
  if (role == MCOL_SCORE_LIST) c->score_list_name = name;
  if (j && json_is_array(j)) {
    list = (json_t *)j;
  } else if (j && !json_is_string(j) && !json_is_null(j)) {
    fail(b, "list", column, -1, "%s is not a list", json_kind(j));
    return TSR_OK;
  } else if (!text || !*text) {
    if (role == MCOL_SPAN_LIST)
      fail(b, "list", column, -1, "empty: a list of [start, end] pairs is expected");
    return TSR_OK;
  } else {
    int rc = mv_parse_list(text, &c->tmp, &c->tmpcap, &list, why, sizeof why);
    if (rc == -2) return err_set(TSR_ENOMEM, "out of memory reading a manifest list cell");
    if (rc) {
      fail(b, "list", column, -1, "'%s': %s", snip(s, sizeof s, text), why);
      return TSR_OK;
    }
    c->held[c->nheld++] = list;
  }
  c->list[k] = list;
  return TSR_OK;
}

tsr_status mrow_cell(mrow *b, const char *column, const char *score, mcol_role role, mcell cell) {
  if (b->reason) return TSR_OK;
  int empty = cell.json ? json_is_null(cell.json) : !cell.text || !*cell.text;
  if (!empty) b->seen |= 1u << role;
  switch (role) {
  case MCOL_AUTO: case MCOL_SCORE: return take_score(b, column, score, role == MCOL_SCORE, cell);
  case MCOL_PATH:
    if (cell.json && !json_is_string(cell.json) && !json_is_null(cell.json))
      fail(b, "path", column, -1, "a path must be text, not %s", json_kind(cell.json));
    else b->c->path = cell.json ? json_string_value(cell.json) : cell.text;
    return TSR_OK;
  case MCOL_START: case MCOL_END: case MCOL_START_FRAME: case MCOL_END_FRAME:
    take_time(b, column, role, cell);
    return TSR_OK;
  case MCOL_CAPTION: take_caption(b, column, cell); return TSR_OK;
  case MCOL_SPAN_LIST: case MCOL_CAPTION_LIST: case MCOL_SCORE_LIST: case MCOL_SPANS:
    return take_list(b, column, score, role, cell);
  default: return TSR_OK;
  }
}

// ---- spans -------------------------------------------------------------------------------

// A new span K = index with the row's scores; its own scores follow (push_score on ss).
static tsr_status add_span(mrow *b, int index, manifest_span **out) {
  struct mrow_cells *c = b->c;
  if (b->nspans == c->spcap) {
    int cap = c->spcap ? 2 * c->spcap : 16;
    manifest_span *s = realloc(b->spans, (size_t)cap * sizeof *s);
    if (s) b->spans = s;
    int *o = s ? realloc(c->soff, (size_t)cap * sizeof *o) : NULL;
    if (!o) return err_set(TSR_ENOMEM, "out of memory reading a manifest row");
    c->soff = o;
    c->spcap = cap;
  }
  c->soff[b->nspans] = c->nss;
  manifest_span *sp = &b->spans[b->nspans++];
  *sp = (manifest_span){.index = index};
  for (int i = 0; i < c->nrs; i++) {
    tsr_status st = push_score(&c->ss, &c->nss, &c->sscap, c->rs[i].name, c->rs[i].value);
    if (st) return st;
  }
  *out = sp;
  return TSR_OK;
}

// A caption element of a list: text or null; 0, or -1 after fail.
static int caption_of(mrow *b, const char *column, int k, const json_t *j, const char **out) {
  *out = NULL;
  if (json_is_string(j)) *out = *json_string_value(j) ? json_string_value(j) : NULL;
  else if (!json_is_null(j))
    return fail(b, "caption type", column, k, "a caption must be text, not %s", json_kind(j)), -1;
  return 0;
}

// panda70m: a list of [start, end] pairs, with captions and scores in lists beside it.
static tsr_status spans_from_lists(mrow *b) {
  struct mrow_cells *c = b->c;
  const json_t *pairs = c->list[L_SPANS], *caps = c->list[L_CAPTIONS], *scores = c->list[L_SCORES];
  const char *col = c->list_col[L_SPANS];
  size_t n = json_array_size(pairs);
  if (n == 0) return fail(b, "list", col, -1, "no spans: the list is empty"), TSR_OK;
  for (int l = L_CAPTIONS; l <= L_SCORES; l++)
    if (c->list[l] && json_array_size(c->list[l]) != n)
      return fail(b, "list length", c->list_col[l], -1, "%zu entries for %zu spans in column '%s'",
                  json_array_size(c->list[l]), n, col), TSR_OK;
  for (size_t k = 0; k < n; k++) {
    const json_t *p = json_array_get(pairs, k);
    manifest_span *sp;
    tsr_status st = add_span(b, (int)k, &sp);
    if (st) return st;
    if (!json_is_array(p) || json_array_size(p) != 2)
      return fail(b, "timestamp", col, (int)k, "%s is not a [start, end] pair",
                  json_is_array(p) ? "a list of other length" : json_kind(p)), TSR_OK;
    if (time_of(b, col, (int)k, NULL, json_array_get(p, 0), &sp->has_start, &sp->start) ||
        time_of(b, col, (int)k, NULL, json_array_get(p, 1), &sp->has_end, &sp->end))
      return TSR_OK;
    sp->caption = c->caption;
    const char *capcol = c->list_col[L_CAPTIONS];
    if (caps && caption_of(b, capcol, (int)k, json_array_get(caps, k), &sp->caption)) return TSR_OK;
    const json_t *v = scores ? json_array_get(scores, k) : NULL;
    if (v && !json_is_null(v) && !json_is_number(v))
      return fail(b, "number", c->list_col[L_SCORES], (int)k, "a score must be a number, not %s",
                  json_kind(v)), TSR_OK;
    if (v && json_is_number(v) &&
        (st = push_score(&c->ss, &c->nss, &c->sscap, c->score_list_name, json_number_value(v))))
      return st;
  }
  return TSR_OK;
}

// JSONL `spans`: a list of objects {start, end, caption, NAME: number...}.
static tsr_status spans_from_objects(mrow *b) {
  struct mrow_cells *c = b->c;
  const json_t *list = c->list[L_OBJECTS];
  const char *col = c->list_col[L_OBJECTS];
  if (json_array_size(list) == 0)
    return fail(b, "list", col, -1, "no spans: the list is empty"), TSR_OK;
  for (size_t k = 0; k < json_array_size(list); k++) {
    json_t *o = json_array_get(list, k), *v;
    const char *key;
    manifest_span *sp;
    tsr_status st = add_span(b, (int)k, &sp);
    if (st) return st;
    if (!json_is_object(o))
      return fail(b, "list", col, (int)k, "a span must be an object, not %s", json_kind(o)), TSR_OK;
    json_object_foreach(o, key, v) {
      int bad = 0;
      if (!strcmp(key, "start")) bad = time_of(b, col, (int)k, NULL, v, &sp->has_start, &sp->start);
      else if (!strcmp(key, "end")) bad = time_of(b, col, (int)k, NULL, v, &sp->has_end, &sp->end);
      else if (!strcmp(key, "caption")) bad = caption_of(b, col, (int)k, v, &sp->caption);
      else if (json_is_number(v))
        st = push_score(&c->ss, &c->nss, &c->sscap, mrow_name(b, key), json_number_value(v));
      if (st) return st;
      if (bad) return TSR_OK;
    }
  }
  return TSR_OK;
}

static tsr_status one_span(mrow *b) {
  struct mrow_cells *c = b->c;
  manifest_span *sp;
  tsr_status st = add_span(b, 0, &sp);
  if (st) return st;
  sp->has_start = c->has[T_START], sp->start = c->t[T_START];
  sp->has_end = c->has[T_END], sp->end = c->t[T_END];
  sp->caption = c->caption;
  return TSR_OK;
}

// Open-Sora's frame ranges as seconds: start_frame / fps, end_frame / fps.
static void frames_to_seconds(mrow *b) {
  struct mrow_cells *c = b->c;
  if (!c->has[T_START_FRAME] && !c->has[T_END_FRAME]) return;
  const char *col = c->tcol[c->has[T_START_FRAME] ? T_START_FRAME : T_END_FRAME];
  if (c->has[T_START] || c->has[T_END]) {
    fail(b, "timestamp", col, -1, "both seconds (start/end) and frames: give one or the other");
    return;
  }
  double fps = 0;
  for (int i = 0; i < c->nrs; i++)
    if (!strcmp(c->rs[i].name, "fps")) fps = c->rs[i].value;
  if (!(fps > 0)) {
    fail(b, "fps", "fps", -1, "a frame range needs a frame rate > 0 in column 'fps'");
    return;
  }
  for (int k = 0; k < 2; k++) {
    c->has[T_START + k] = c->has[T_START_FRAME + k];
    c->t[T_START + k] = c->t[T_START_FRAME + k] / fps;
    c->tcol[T_START + k] = c->tcol[T_START_FRAME + k];
  }
}

// Spans within their source (end > start) and captions that the index can hold (UTF-8).
static void check_spans(mrow *b) {
  struct mrow_cells *c = b->c;
  const char *tcol = c->list[L_OBJECTS] ? c->list_col[L_OBJECTS]
                     : c->list[L_SPANS] ? c->list_col[L_SPANS] : c->tcol[T_END];
  for (int k = 0; k < b->nspans; k++) {
    const manifest_span *s = &b->spans[k];
    if (s->has_start && s->has_end && s->end <= s->start)
      fail(b, "end <= start", tcol, s->index, "end %.9g s is not after start %.9g s", s->end,
           s->start);
    else if (s->caption && !term_is_utf8(s->caption))
      fail(b, "encoding", c->caption_col ? c->caption_col : c->list_col[L_CAPTIONS], s->index,
           "the caption is not valid UTF-8");
    else if (s->caption && strlen(s->caption) > STORE_MAX_CAPTION_BYTES)
      fail(b, "caption length", c->caption_col ? c->caption_col : c->list_col[L_CAPTIONS],
           s->index, "the caption is %zu bytes, a store holds at most %d", strlen(s->caption),
           STORE_MAX_CAPTION_BYTES);
    if (b->reason) return;
  }
}

// Every span's scores within what a clip's record holds (store/json_cols.h: their number,
// each name's bytes, their text), checked by the store's own formatter: a row past them is a
// bad row here, not a failed ingest.
static void check_scores(mrow *b) {
  const char *names[STORE_MAX_SCORES];
  double values[STORE_MAX_SCORES];
  char text[STORE_MAX_SCORES_BYTES + 1];
  for (int k = 0; k < b->nspans && !b->reason; k++) {
    const manifest_span *s = &b->spans[k];
    if (s->nscores > STORE_MAX_SCORES) {
      fail(b, "scores", NULL, s->index, "%d scores, a clip holds at most %d", s->nscores,
           STORE_MAX_SCORES);
      return;
    }
    for (int i = 0; i < s->nscores; i++) names[i] = s->scores[i].name, values[i] = s->scores[i].value;
    if (store_scores_format(names, values, s->nscores, text, sizeof text)) {
      fail(b, "scores", NULL, s->index, "%s", err_msg());
      err_clear();
    }
  }
}

static void resolve_path(mrow *b, const char *root, const char *suffix, const char *column) {
  const char *p = b->c->path;
  int n;
  if (p[0] == '/') {
    n = snprintf(b->path, sizeof b->path, "%s%s", p, suffix);
  } else {
    while (p[0] == '.' && p[1] == '/') p += 2;
    const char *sep = root[0] && root[strlen(root) - 1] == '/' ? "" : "/";  // root "/"
    n = snprintf(b->path, sizeof b->path, "%s%s%s%s", root, sep, p, suffix);
  }
  if (n < 0 || (size_t)n >= sizeof b->path)
    fail(b, "path", column, -1, "the path is longer than %zu bytes", sizeof b->path - 1);
}

tsr_status mrow_finish(mrow *b, const char *root, const char *suffix, const char *path_column) {
  struct mrow_cells *c = b->c;
  if (b->reason) return TSR_OK;
  if (!c->path || !*c->path) return fail(b, "missing path", path_column, -1, "no path"), TSR_OK;
  if (!term_is_utf8(c->path))
    return fail(b, "encoding", path_column, -1, "the path is not valid UTF-8"), TSR_OK;
  frames_to_seconds(b);
  if (b->reason) return TSR_OK;
  tsr_status st = c->list[L_OBJECTS] ? spans_from_objects(b)
                  : c->list[L_SPANS] ? spans_from_lists(b) : one_span(b);
  if (st || b->reason) return st;
  check_spans(b);
  if (b->reason) return TSR_OK;
  for (int k = 0; k < b->nspans; k++) {
    int end = k + 1 < b->nspans ? c->soff[k + 1] : c->nss;
    b->spans[k].scores = c->ss ? c->ss + c->soff[k] : NULL;  // no score yet: no array
    b->spans[k].nscores = end - c->soff[k];
  }
  check_scores(b);
  if (b->reason) return TSR_OK;
  resolve_path(b, root, suffix, path_column);
  return TSR_OK;
}
