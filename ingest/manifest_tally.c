// ingest/manifest_tally.c — counts by reason with examples (ingest/manifest_tally.h).
#include "ingest/manifest_tally.h"

#include <stdlib.h>
#include <string.h>

#include "core/term.h"

void manifest_tally_add(manifest_tally *t, const char *reason, const char *message) {
  int i = 0;
  while (i < t->n && strcmp(t->v[i].reason, reason)) i++;
  if (i == MANIFEST_TALLY_MAX) return;
  if (i == t->n) snprintf(t->v[t->n++].reason, sizeof t->v[0].reason, "%s", reason);
  manifest_tally_entry *e = &t->v[i];
  if (e->n < MANIFEST_TALLY_EXAMPLES && message) e->example[e->n] = strdup(message);
  e->n++;
}

void manifest_tally_print(FILE *f, const manifest_tally *t, const char *title) {
  char shown[TERM_ESCAPE_SIZE(1024)];
  if (!t->n) return;
  fprintf(f, "%s:\n", title);
  for (int i = 0; i < t->n; i++) {
    const manifest_tally_entry *e = &t->v[i];
    fprintf(f, "  %s: %lld\n", term_escape(shown, sizeof shown, e->reason), (long long)e->n);
    for (int k = 0; k < MANIFEST_TALLY_EXAMPLES && k < e->n; k++)
      if (e->example[k]) fprintf(f, "    %s\n", term_escape(shown, sizeof shown, e->example[k]));
  }
}

void manifest_tally_merge(manifest_tally *dst, const manifest_tally *src) {
  for (int i = 0; i < src->n; i++) {
    const manifest_tally_entry *e = &src->v[i];
    int64_t shown = e->n < MANIFEST_TALLY_EXAMPLES ? e->n : MANIFEST_TALLY_EXAMPLES;
    for (int64_t k = 0; k < shown; k++) manifest_tally_add(dst, e->reason, e->example[k]);
    if (e->n == shown) continue;
    int j = 0;
    while (j < dst->n && strcmp(dst->v[j].reason, e->reason)) j++;
    if (j < dst->n) dst->v[j].n += e->n - shown;
  }
}

void manifest_tally_free(manifest_tally *t) {
  for (int i = 0; i < t->n; i++)
    for (int k = 0; k < MANIFEST_TALLY_EXAMPLES; k++) free(t->v[i].example[k]);
  t->n = 0;
}

void manifest_tally_filtered_message(char *out, size_t n, const char *file, int64_t row,
                                     int64_t line, int span, const manifest_filter_result *fr) {
  char v[32];
  int k = snprintf(out, n, "%s: row %lld (line %lld), span %d", file, (long long)row,
                   (long long)line, span);
  if (fr->score && k >= 0 && (size_t)k < n)
    k += snprintf(out + k, n - (size_t)k, ", column '%s'", fr->score);
  int missing = !strncmp(fr->reason, "missing", 7);
  if (k >= 0 && (size_t)k < n)
    snprintf(out + k, n - (size_t)k, ": %s%s%s", fr->reason, missing ? "" : " fails: ",
             missing ? "" : manifest_filter_number(v, sizeof v, fr->value));
}
