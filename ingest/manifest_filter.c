// ingest/manifest_filter.c — --where expressions, clip length and resolution limits, and
// their canonical text.
#include "ingest/manifest_filter.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/num.h"
#include "ingest/manifest_value.h"
#include "store/json_cols.h"

static const char *op_text[] = {"<", "<=", ">", ">=", "==", "!="};

char *manifest_filter_number(char *out, size_t n, double v) {
  for (int p = 15; p <= 17; p++) {
    snprintf(out, n, "%.*g", p, v);
    if (strtod(out, NULL) == v) break;
  }
  return out;
}

// The operator at p: its length, or 0 with why it is not one.
static int read_op(const char *p, manifest_op *op, const char **why) {
  int two = p[1] == '=';
  switch (p[0]) {
  case '<': *op = two ? MANIFEST_LE : MANIFEST_LT; return 1 + two;
  case '>': *op = two ? MANIFEST_GE : MANIFEST_GT; return 1 + two;
  case '=': *op = MANIFEST_EQ; *why = "'=' is not a comparison: write =="; return two ? 2 : 0;
  default: *op = MANIFEST_NE; *why = "'!' is not a comparison: write !="; return two ? 2 : 0;
  }
}

tsr_status manifest_filter_add_where(manifest_filter *f, const char *expr) {
  if (f->nwhere == MANIFEST_FILTER_MAX_WHERE)
    return err_set(TSR_EINVAL, "--where '%s': more than %d expressions", expr,
                   MANIFEST_FILTER_MAX_WHERE);
  const char *p = strpbrk(expr, "<>=!"), *why = NULL;
  if (!p) return err_set(TSR_EINVAL, "--where '%s': no comparison (< <= > >= == !=), as in "
                         "'aesthetic_score >= 4.5'", expr);
  manifest_where w = {0};
  int oplen = read_op(p, &w.op, &why);
  if (!oplen) return err_set(TSR_EINVAL, "--where '%s': %s", expr, why);
  char raw[MANIFEST_FILTER_NAME * 2];
  size_t len = (size_t)(p - expr);
  if (len >= sizeof raw) return err_set(TSR_EINVAL, "--where '%s': the name is too long", expr);
  memcpy(raw, expr, len);
  raw[len] = 0;
  mv_score_name(w.name, sizeof w.name, raw);
  if (!w.name[0])
    return err_set(TSR_EINVAL, "--where '%s': no score name before the comparison", expr);
  if (strlen(w.name) >= MANIFEST_FILTER_NAME - 1 || strpbrk(w.name, ";\"'"))
    return err_set(TSR_EINVAL, "--where '%s': a score name has at most %d characters, without ; "
                   "or quotes", expr, MANIFEST_FILTER_NAME - 2);
  const char *num = p + oplen;
  if (num_parse_double(num, -DBL_MAX, DBL_MAX, &w.value))
    return err_set(TSR_EINVAL, "--where '%s': '%s' is not a number", expr, num);
  f->where[f->nwhere++] = w;
  return TSR_OK;
}

tsr_status manifest_filter_check(const manifest_filter *f) {
  if (!(f->min_clip_seconds >= 0) || !(f->max_clip_seconds >= 0) || f->min_resolution < 0)
    return err_set(TSR_EINVAL, "clip length and resolution limits cannot be negative");
  if (f->max_clip_seconds > 0 && f->max_clip_seconds < f->min_clip_seconds)
    return err_set(TSR_EINVAL, "the maximum clip length (%g s) is below the minimum (%g s)",
                   f->max_clip_seconds, f->min_clip_seconds);
  return TSR_OK;
}

static int by_clause(const void *a, const void *b) {
  const manifest_where *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  if (c) return c;
  if (x->op != y->op) return x->op < y->op ? -1 : 1;
  return x->value < y->value ? -1 : x->value > y->value;
}

static void where_text(const manifest_where *w, char *out, size_t n) {
  char v[32];
  snprintf(out, n, "where %.*s %s %s", MANIFEST_FILTER_NAME - 1, w->name, op_text[w->op],
           manifest_filter_number(v, sizeof v, w->value));
}

enum { MIN_SECONDS, MAX_SECONDS, MIN_RESOLUTION, NLIMITS };

// The clause of limit `which` ("min_clip_seconds 2") into out; 0 if that limit is not set.
static int limit_text(const manifest_filter *f, int which, char *out, size_t n) {
  static const char *name[] = {"min_clip_seconds", "max_clip_seconds", "min_resolution"};
  double v = which == MIN_SECONDS ? f->min_clip_seconds
             : which == MAX_SECONDS ? f->max_clip_seconds : f->min_resolution;
  char num[32];
  if (!(v > 0)) return 0;
  snprintf(out, n, "%s %s", name[which], manifest_filter_number(num, sizeof num, v));
  return 1;
}

// Appends "; clause" (no "; " first) at out[*k], n bytes in all.
static tsr_status append_clause(char *out, size_t n, size_t *k, const char *clause) {
  int m = snprintf(out + *k, n > *k ? n - *k : 0, "%s%s", *k ? "; " : "", clause);
  if (m < 0 || *k + (size_t)m >= n)
    return err_set(TSR_EINVAL, "the filter's text is longer than %zu bytes", n ? n - 1 : 0);
  *k += (size_t)m;
  return TSR_OK;
}

tsr_status manifest_filter_format(const manifest_filter *f, char *out, size_t n) {
  manifest_where w[MANIFEST_FILTER_MAX_WHERE];
  memcpy(w, f->where, (size_t)f->nwhere * sizeof *w);
  qsort(w, (size_t)f->nwhere, sizeof *w, by_clause);
  char clause[MANIFEST_FILTER_NAME + 64];
  size_t k = 0;
  tsr_status st = TSR_OK;
  if (n) out[0] = 0;
  for (int i = 0; i < f->nwhere && !st; i++) {
    if (i > 0 && !by_clause(&w[i], &w[i - 1])) continue;  // a repeat
    where_text(&w[i], clause, sizeof clause);
    st = append_clause(out, n, &k, clause);
  }
  for (int l = 0; l < NLIMITS && !st; l++)
    if (limit_text(f, l, clause, sizeof clause)) st = append_clause(out, n, &k, clause);
  return st;
}

// One clause of the canonical text (trimmed, NUL-terminated) into f.
static tsr_status parse_clause(char *c, manifest_filter *f) {
  static const char *kw[] = {"where ", "min_clip_seconds ", "max_clip_seconds ", "min_resolution "};
  for (int k = 0; k < 4; k++) {
    size_t n = strlen(kw[k]);
    if (strncmp(c, kw[k], n)) continue;
    const char *arg = c + n;
    int64_t px;
    if (k == 0) return manifest_filter_add_where(f, arg);
    if (k == 3 && !num_parse_i64(arg, 1, 1 << 20, &px)) {
      f->min_resolution = (int)px;
      return TSR_OK;
    }
    double *sec = k == 1 ? &f->min_clip_seconds : &f->max_clip_seconds;
    if (k < 3 && !num_parse_double(arg, 0, DBL_MAX, sec)) return TSR_OK;
    break;
  }
  return err_set(TSR_EFORMAT, "cannot read the filter clause '%s'", c);
}

tsr_status manifest_filter_parse(const char *text, manifest_filter *f) {
  memset(f, 0, sizeof *f);
  char *copy = strdup(text), *save = NULL;
  if (!copy) return err_set(TSR_ENOMEM, "out of memory reading a filter");
  tsr_status st = TSR_OK;
  for (char *c = strtok_r(copy, ";", &save); c && !st; c = strtok_r(NULL, ";", &save)) {
    while (*c == ' ') c++;
    size_t n = strlen(c);
    while (n && c[n - 1] == ' ') c[--n] = 0;
    if (n) st = parse_clause(c, f);
  }
  free(copy);
  if (st == TSR_EINVAL) st = err_wrap(TSR_EFORMAT, "stored filter: ");
  if (!st) st = manifest_filter_check(f);
  return st;
}

static int holds(manifest_op op, double x, double v) {
  switch (op) {
  case MANIFEST_LT: return x < v;
  case MANIFEST_LE: return x <= v;
  case MANIFEST_GT: return x > v;
  case MANIFEST_GE: return x >= v;
  case MANIFEST_EQ: return x == v;
  default: return x != v;
  }
}

// The clip length limits on `seconds`: 1 (and *r) if they fail it.
static int check_seconds(const manifest_filter *f, double seconds, manifest_filter_result *r) {
  int which = f->min_clip_seconds > 0 && seconds < f->min_clip_seconds ? MIN_SECONDS
              : f->max_clip_seconds > 0 && seconds > f->max_clip_seconds ? MAX_SECONDS : -1;
  if (which < 0) return 0;
  limit_text(f, which, r->reason, sizeof r->reason);
  r->score = NULL;
  r->value = seconds;
  return 1;
}

int manifest_filter_scores(const manifest_filter *f, const manifest_score *scores, int n,
                           manifest_filter_result *r) {
  for (int i = 0; i < f->nwhere; i++) {
    const manifest_where *w = &f->where[i];
    int k = 0;
    while (k < n && strcmp(scores[k].name, w->name)) k++;
    r->score = w->name;
    r->value = k < n ? scores[k].value : 0;
    if (k == n) {
      snprintf(r->reason, sizeof r->reason, "missing score %s", w->name);
      return 1;
    }
    if (!holds(w->op, r->value, w->value)) {
      where_text(w, r->reason, sizeof r->reason);
      return 1;
    }
  }
  return 0;
}

// A stored clip's scores as the name/value pairs manifest_filter_scores judges. The names
// are copied: store_scores_each's live only during its call.
typedef struct {
  manifest_score pair[STORE_MAX_SCORES];
  char name[STORE_MAX_SCORES][STORE_MAX_SCORE_NAME + 1];
  int n;
} stored_scores;

static int collect_score(const char *name, double v, void *p) {
  stored_scores *s = p;
  if (s->n == STORE_MAX_SCORES) return 1;  // store_scores_check allows no more
  mv_score_name(s->name[s->n], sizeof s->name[s->n], name);
  s->pair[s->n] = (manifest_score){.name = s->name[s->n], .value = v};
  s->n++;
  return 0;
}

int manifest_filter_stored(const manifest_filter *f, const char *scores,
                           manifest_filter_result *r) {
  stored_scores s = {.n = 0};
  if (scores && store_scores_each(scores, collect_score, &s) != TSR_OK) {
    s.n = 0;
    err_clear();
  }
  return manifest_filter_scores(f, s.pair, s.n, r);
}

int manifest_filter_span(const manifest_filter *f, const manifest_span *s,
                         manifest_filter_result *r) {
  if (manifest_filter_scores(f, s->scores, s->nscores, r)) return 1;
  if (s->has_start && s->has_end) return check_seconds(f, s->end - s->start, r);
  return 0;
}

int manifest_filter_clip(const manifest_filter *f, double seconds, int width, int height,
                         manifest_filter_result *r) {
  if (seconds > 0 && check_seconds(f, seconds, r)) return 1;
  int side = width < height ? width : height;
  if (width <= 0 || height <= 0 || f->min_resolution <= 0 || side >= f->min_resolution) return 0;
  limit_text(f, MIN_RESOLUTION, r->reason, sizeof r->reason);
  r->score = NULL;
  r->value = side;
  return 1;
}
