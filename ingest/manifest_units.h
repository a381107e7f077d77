// ingest/manifest_units.h — a manifest read as the ingest's units of work: the spans of one
// source video, with their rows' captions and scores, kept after the filter.
//
// A unit is the run of consecutive rows that name the same source (Panda-70M: one row of
// many spans; Open-Sora and tessera's form: one row per clip, sorted by video), so a video
// is opened once for all its spans. Rows of a video that already had a unit earlier in the
// manifest (not consecutive) are an error record (reason "repeated video"): a unit is the
// store's record of its source, and a second one would replace the first; sort the
// manifest by path (docs/manifest.md). Memory: one unit at a time, plus the reader's
// duplicate check and a 64-bit hash per video (core/hash_set.h).
//
// Bad rows and filtered spans do not stop the reading: each bad row is logged as a warning
// naming file, row, line and column; both are counted by reason (manifest_units_stats).
#ifndef TESSERA_INGEST_MANIFEST_UNITS_H
#define TESSERA_INGEST_MANIFEST_UNITS_H

#include <stdint.h>

#include "core/err.h"
#include "ingest/manifest.h"
#include "ingest/manifest_filter.h"
#include "ingest/manifest_tally.h"

typedef struct {
  int64_t row, line;       // manifest row R (1-based) and the line it starts on
  int span;                // K, its position in the row
  int has_start, has_end;  // 0: from the video's start / to its end
  double start, end;       // seconds, [start, end)
  char *caption;           // UTF-8, or NULL
  char *scores;            // the row's and span's scores as a JSON object, or NULL if none
} manifest_unit_span;

typedef struct {
  char *path;              // the source (absolute)
  manifest_unit_span *spans;  // (n) in manifest order
  int n, cap;
  int64_t first_row, last_row;
  // XXH3-64 (16 hex digits) of the unit's path, spans, captions, scores and the filter's
  // canonical text: a rerun skips a done source only when its unit is the same.
  char key[17];
} manifest_unit;           // zero-initialised: empty; reused by manifest_units_next

typedef struct {
  int64_t rows, spans;     // data rows read, spans they named
  int64_t kept, filtered;  // spans in units / failing the filter
  int64_t errors, rows_with_errors;  // error records (a row may have several)
  int64_t units;           // units returned
  manifest_tally filtered_by, errors_by;
} manifest_units_stats;

typedef struct manifest_units manifest_units;

// Opens the manifest `path` (ingest/manifest.h with `o`) to be read in units, spans
// failing `f` left out (f may be NULL: none). `f` is copied. log_errors: bad rows are logged
// as they are read (else only counted).
tsr_status manifest_units_open(manifest_units **u, const char *path, const manifest_opts *o,
                               const manifest_filter *f, int log_errors);
// The next unit with at least one span into *out (its previous contents freed); *got = 0
// at the end. Errors only for what stops the reader (an unreadable file, out of memory).
tsr_status manifest_units_next(manifest_units *u, manifest_unit *out, int *got);
// The counts so far (all of them once manifest_units_next returned *got = 0). The caller
// may move the tallies out (leaving them zeroed); manifest_units_close frees what is left.
manifest_units_stats *manifest_units_stats_of(manifest_units *u);
// The manifest's file name as given, for messages.
const char *manifest_units_file(const manifest_units *u);
void manifest_units_close(manifest_units **u);
void manifest_unit_free(manifest_unit *unit);

#endif
