// ingest/manifest_units.c — a manifest read in units of one source video
// (ingest/manifest_units.h).
#include "ingest/manifest_units.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/hash_set.h"
#include "core/log.h"
#include "core/term.h"

struct manifest_units {
  manifest *m;
  char *file;
  manifest_filter f;
  char filter_text[4096];
  manifest_units_stats st;
  hash_set videos;                 // the units' sources so far
  manifest_unit acc;               // the unit being gathered
  int acc_repeated;                // acc's video had a unit before: its rows are errors
  const manifest_record *pending;  // a row read but not yet taken (the next unit's first)
  int64_t last_error_row;
  int log_errors;
};

void manifest_unit_free(manifest_unit *unit) {
  for (int i = 0; i < unit->n; i++) {
    free(unit->spans[i].caption);
    free(unit->spans[i].scores);
  }
  free(unit->spans);
  free(unit->path);
  *unit = (manifest_unit){0};
}

static void count_error(manifest_units *u, int64_t row, const char *reason, const char *msg) {
  char shown[TERM_ESCAPE_SIZE(1024)];
  if (u->log_errors) log_warn("manifest: %s", term_escape(shown, sizeof shown, msg));
  manifest_tally_add(&u->st.errors_by, reason, msg);
  u->st.errors++;
  if (row != u->last_error_row) u->st.rows_with_errors++;
  u->last_error_row = row;
}

// The scores of a span as one JSON object (NULL when it has none).
static tsr_status scores_json(const manifest_span *s, char **out) {
  *out = NULL;
  if (!s->nscores) return TSR_OK;
  json_t *o = json_object();
  for (int i = 0; o && i < s->nscores; i++)
    if (json_object_set_new(o, s->scores[i].name, json_real(s->scores[i].value))) {
      json_decref(o);
      o = NULL;
    }
  if (o) *out = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
  json_decref(o);
  return *out ? TSR_OK : err_set(TSR_ENOMEM, "out of memory for a span's scores");
}

static tsr_status add_span(manifest_unit *a, const manifest_row *r, const manifest_span *s) {
  if (a->n == a->cap) {
    int cap = a->cap ? 2 * a->cap : 8;
    manifest_unit_span *v = realloc(a->spans, (size_t)cap * sizeof *v);
    if (!v) return err_set(TSR_ENOMEM, "out of memory for the spans of %s", r->path);
    a->spans = v;
    a->cap = cap;
  }
  manifest_unit_span *d = &a->spans[a->n];
  *d = (manifest_unit_span){.row = r->row, .line = r->line, .span = s->index,
                            .has_start = s->has_start, .has_end = s->has_end,
                            .start = s->start, .end = s->end};
  tsr_status st = scores_json(s, &d->scores);
  if (!st && s->caption && !(d->caption = strdup(s->caption)))
    st = err_set(TSR_ENOMEM, "out of memory for a caption of %s", r->path);
  if (st) {
    free(d->scores);
    return st;
  }
  if (!a->n) a->first_row = r->row;
  a->last_row = r->row;
  a->n++;
  return TSR_OK;
}

// A row of the unit being gathered: its spans that pass the filter.
static tsr_status take_row(manifest_units *u, const manifest_row *r) {
  char msg[1024];
  u->st.spans += r->nspans;
  if (u->acc_repeated) {
    snprintf(msg, sizeof msg, "%s: row %lld (line %lld), column 'path': the video %s had rows "
             "before other videos' rows: rows of one video must be consecutive (sort the "
             "manifest by path)", u->file, (long long)r->row, (long long)r->line, r->path);
    count_error(u, r->row, "repeated video", msg);
    return TSR_OK;
  }
  for (int k = 0; k < r->nspans; k++) {
    manifest_filter_result fr;
    if (manifest_filter_span(&u->f, &r->spans[k], &fr)) {
      manifest_tally_filtered_message(msg, sizeof msg, u->file, r->row, r->line,
                                      r->spans[k].index, &fr);
      manifest_tally_add(&u->st.filtered_by, fr.reason, msg);
      u->st.filtered++;
      continue;
    }
    tsr_status st = add_span(&u->acc, r, &r->spans[k]);
    if (st) return st;
    u->st.kept++;
  }
  return TSR_OK;
}

static void unit_key(const manifest_units *u, manifest_unit *a) {
  XXH3_state_t *h = XXH3_createState();
  if (!h) {  // no key: the unit is taken again on a rerun, which is safe
    snprintf(a->key, sizeof a->key, "%s", "");
    return;
  }
  XXH3_64bits_reset(h);
  XXH3_64bits_update(h, a->path, strlen(a->path) + 1);
  for (int i = 0; i < a->n; i++) {
    const manifest_unit_span *s = &a->spans[i];
    double t[2] = {s->has_start ? s->start : -1.0, s->has_end ? s->end : -1.0};
    int64_t id[2] = {s->row, s->span};
    XXH3_64bits_update(h, id, sizeof id);
    XXH3_64bits_update(h, t, sizeof t);
    XXH3_64bits_update(h, s->caption ? s->caption : "", s->caption ? strlen(s->caption) + 1 : 0);
    XXH3_64bits_update(h, "|", 1);
    XXH3_64bits_update(h, s->scores ? s->scores : "", s->scores ? strlen(s->scores) + 1 : 0);
  }
  XXH3_64bits_update(h, u->filter_text, strlen(u->filter_text));
  snprintf(a->key, sizeof a->key, "%016llx", (unsigned long long)XXH3_64bits_digest(h));
  XXH3_freeState(h);
}

// Starts gathering a unit for the video of row r.
static tsr_status start_unit(manifest_units *u, const manifest_row *r) {
  manifest_unit_free(&u->acc);
  if (!(u->acc.path = strdup(r->path))) return err_set(TSR_ENOMEM, "out of memory");
  int seen = hash_set_add(&u->videos, XXH3_64bits(r->path, strlen(r->path)));
  if (seen < 0) return err_set(TSR_ENOMEM, "out of memory for the manifest's videos");
  u->acc_repeated = seen;
  return TSR_OK;
}

// Hands the gathered unit to the caller; 0 if it has no span (nothing to do).
static int emit(manifest_units *u, manifest_unit *out) {
  if (!u->acc.n) {
    manifest_unit_free(&u->acc);
    return 0;
  }
  unit_key(u, &u->acc);
  manifest_unit_free(out);
  *out = u->acc;
  u->acc = (manifest_unit){0};
  u->st.units++;
  return 1;
}

tsr_status manifest_units_next(manifest_units *u, manifest_unit *out, int *got) {
  *got = 0;
  for (;;) {
    const manifest_record *rec = u->pending;
    u->pending = NULL;
    tsr_status st = rec ? TSR_OK : manifest_next(u->m, &rec);
    if (st) return st;
    if (rec->kind == MANIFEST_EOF) {
      *got = emit(u, out);
      return TSR_OK;
    }
    if (rec->kind == MANIFEST_ERROR) {
      u->st.rows = rec->error.row > u->st.rows ? rec->error.row : u->st.rows;
      count_error(u, rec->error.row, rec->error.reason, rec->error.message);
      continue;
    }
    const manifest_row *r = &rec->row;
    if (u->acc.path && strcmp(u->acc.path, r->path) != 0) {
      u->pending = rec;  // the next unit's first row: taken on the next call
      if ((*got = emit(u, out))) return TSR_OK;
      u->pending = NULL;
    }
    u->st.rows = r->row;
    if (!u->acc.path && (st = start_unit(u, r))) return st;
    if ((st = take_row(u, r))) return st;
  }
}

tsr_status manifest_units_open(manifest_units **out, const char *path, const manifest_opts *o,
                               const manifest_filter *f, int log_errors) {
  *out = NULL;
  manifest_units *u = calloc(1, sizeof *u);
  if (!u || !(u->file = strdup(path))) {
    free(u);
    return err_set(TSR_ENOMEM, "out of memory");
  }
  if (f) u->f = *f;
  u->last_error_row = -1;
  u->log_errors = log_errors;
  tsr_status st = manifest_filter_format(&u->f, u->filter_text, sizeof u->filter_text);
  if (!st) st = manifest_open(&u->m, path, o);
  if (st) {
    manifest_units_close(&u);
    return st;
  }
  *out = u;
  return TSR_OK;
}

manifest_units_stats *manifest_units_stats_of(manifest_units *u) { return &u->st; }

const char *manifest_units_file(const manifest_units *u) { return u->file; }

void manifest_units_close(manifest_units **pu) {
  manifest_units *u = *pu;
  if (!u) return;
  manifest_close(&u->m);
  manifest_unit_free(&u->acc);
  hash_set_free(&u->videos);
  manifest_tally_free(&u->st.filtered_by);
  manifest_tally_free(&u->st.errors_by);
  free(u->file);
  free(u);
  *pu = NULL;
}
