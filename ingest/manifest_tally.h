// ingest/manifest_tally.h — counting a manifest's filtered spans and bad rows by reason,
// with the first few messages of each as examples: what `tessera manifest` and `tessera
// ingest --manifest` print in their summaries instead of one line per span.
#ifndef TESSERA_INGEST_MANIFEST_TALLY_H
#define TESSERA_INGEST_MANIFEST_TALLY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ingest/manifest_filter.h"
#include "ingest/manifest_record.h"

// Reasons are few: 17 of errors (ingest/manifest_record.h), at most 2 per --where clause
// and 3 of limits, and the ingest's own (a source that cannot be opened, a repeated video).
enum { MANIFEST_TALLY_EXAMPLES = 3, MANIFEST_TALLY_MAX = 2 * MANIFEST_FILTER_MAX_WHERE + 32 };

typedef struct {
  char reason[MANIFEST_FILTER_NAME + 48];
  int64_t n;
  char *example[MANIFEST_TALLY_EXAMPLES];  // the first messages (malloc'ed), or NULL
} manifest_tally_entry;

typedef struct {
  manifest_tally_entry v[MANIFEST_TALLY_MAX];
  int n;
} manifest_tally;  // zero-initialised: empty

// Counts one `reason`, keeping its first MANIFEST_TALLY_EXAMPLES messages (message may be
// NULL). Reasons past MANIFEST_TALLY_MAX are not counted.
void manifest_tally_add(manifest_tally *t, const char *reason, const char *message);
// "title:" then "  reason: count" and the examples under it, escaped for a terminal;
// nothing when empty.
void manifest_tally_print(FILE *f, const manifest_tally *t, const char *title);
void manifest_tally_free(manifest_tally *t);
// Adds src's counts to dst's, and its examples while dst has room for them.
void manifest_tally_merge(manifest_tally *dst, const manifest_tally *src);

// The message of a span that failed the filter (fr, from manifest_filter_span or
// manifest_filter_clip): "FILE: row R (line L), span K, column 'C': CLAUSE fails: VALUE".
void manifest_tally_filtered_message(char *out, size_t n, const char *file, int64_t row,
                                     int64_t line, int span, const manifest_filter_result *fr);

#endif
