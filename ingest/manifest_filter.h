// ingest/manifest_filter.h — which manifest spans to ingest: score thresholds, clip length
// and resolution, with one text form to store in a store's settings and compare.
//
// A --where expression is NAME OP NUMBER: NAME a score (ingest/manifest.h: a column's name,
// spaces turned to underscores, so "aesthetic score >= 4.5" and "aesthetic_score>=4.5" are the
// same), OP one of < <= > >= == != (== and != compare exactly), NUMBER a finite decimal. Spaces
// around the parts are free. Several expressions must all hold (AND). A span that lacks the
// named score fails with the reason "missing score NAME": it is counted, never taken by
// default.
//
// Clip length and resolution: min_clip_seconds, max_clip_seconds (seconds of the span) and
// min_resolution (the source's short side in pixels, after display rotation). A span's length
// is known from the manifest when it has both start and end (manifest_filter_span checks it
// then); otherwise, and for the resolution, the ingest checks once it has opened the source
// (manifest_filter_clip).
//
// Canonical text (manifest_filter_format): the clauses sorted and without repeats, "; "
// between them:
//   where aesthetic_score >= 4.5; where motion_score > 0.3; min_clip_seconds 2;
//   max_clip_seconds 60; min_resolution 256
// Numbers are written as the shortest text that reads back to the same double. Two filters
// select the same spans exactly when their canonical texts are equal; an empty filter is "".
#ifndef TESSERA_INGEST_MANIFEST_FILTER_H
#define TESSERA_INGEST_MANIFEST_FILTER_H

#include <stddef.h>

#include "core/err.h"
#include "ingest/manifest.h"

enum { MANIFEST_FILTER_MAX_WHERE = 32, MANIFEST_FILTER_NAME = 64 };

typedef enum {
  MANIFEST_LT, MANIFEST_LE, MANIFEST_GT, MANIFEST_GE, MANIFEST_EQ, MANIFEST_NE
} manifest_op;

typedef struct {
  char name[MANIFEST_FILTER_NAME];  // a score name
  manifest_op op;
  double value;
} manifest_where;

typedef struct {
  manifest_where where[MANIFEST_FILTER_MAX_WHERE];
  int nwhere;
  double min_clip_seconds;  // 0: no minimum
  double max_clip_seconds;  // 0: no maximum
  int min_resolution;       // short side in pixels; 0: no minimum
} manifest_filter;          // zero-initialised: takes every span

typedef struct {
  // What failed, the same text for every span it fails (to count by): the canonical clause
  // ("where aesthetic_score >= 4.5", "min_clip_seconds 2", "min_resolution 256") or
  // "missing score NAME".
  char reason[MANIFEST_FILTER_NAME + 48];
  const char *score;  // the score's name for a where clause, else NULL
  double value;       // the value that failed it (score, seconds, short side); 0 when missing
} manifest_filter_result;

// Adds a --where expression. TSR_EINVAL naming the expression and what is wrong with it
// (no operator, "=" for "==", an empty or too long name, not a number), or past
// MANIFEST_FILTER_MAX_WHERE expressions.
tsr_status manifest_filter_add_where(manifest_filter *f, const char *expr);
// Checks the clip length and resolution limits (>= 0, max >= min when both); TSR_EINVAL.
tsr_status manifest_filter_check(const manifest_filter *f);
// The canonical text into out (n bytes); TSR_EINVAL if it does not fit.
tsr_status manifest_filter_format(const manifest_filter *f, char *out, size_t n);
// Reads a canonical text (as stored) back; TSR_EFORMAT naming the clause it cannot read.
tsr_status manifest_filter_parse(const char *text, manifest_filter *f);

// 1 if the scores[0..n) (name, value pairs) fail a where clause, else 0: the first failing
// clause, in the order they were added, in *r ("missing score NAME" when no pair has the
// name; the first pair of a name counts). The where part of manifest_filter_span and of
// manifest_filter_stored.
int manifest_filter_scores(const manifest_filter *f, const manifest_score *scores, int n,
                           manifest_filter_result *r);
// manifest_filter_scores of a stored clip's scores (a clip row's scores, the JSON object of
// store/json_cols.h, or NULL), so that a stored clip and a manifest span pass the same
// clauses by the same code (`tessera index list --where`, `index stats --where`). The names
// are spelled as the manifest reader spells a column's (mv_score_name: spaces to '_'), as
// --where's are: a key "motion score" that a store holds is reached by "motion score > 0.3".
// Scores that do not parse (`index verify` names the row) count as none, so the clip lacks
// every score and fails any clause, as a manifest span without the score does.
int manifest_filter_stored(const manifest_filter *f, const char *scores,
                           manifest_filter_result *r);
// 1 if the span fails the filter (the first failing clause, in the order they were added, in
// *r), else 0: its scores (manifest_filter_scores), then its length.
// Clip length only when the span has start and end; resolution never (manifest_filter_clip).
int manifest_filter_span(const manifest_filter *f, const manifest_span *s,
                         manifest_filter_result *r);
// 1 if a clip of `seconds` cut from a source of width x height pixels (display orientation)
// fails the length or resolution limits, else 0. A value <= 0 is unknown and not checked.
int manifest_filter_clip(const manifest_filter *f, double seconds, int width, int height,
                         manifest_filter_result *r);

// The shortest decimal text of a finite v that reads back as v (%.15g .. %.17g) into out.
char *manifest_filter_number(char *out, size_t n, double v);

#endif
