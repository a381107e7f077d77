// ingest/manifest_row.h — one manifest row made from its cells: the roles a column can play
// and the builder that turns a row's cells into its path, spans, captions and scores, or
// into the first thing wrong with it. Private to the manifest reader (manifest.c), which
// maps columns to roles by preset and formats the errors (ingest/manifest.h).
#ifndef TESSERA_INGEST_MANIFEST_ROW_H
#define TESSERA_INGEST_MANIFEST_ROW_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"
#include "ingest/manifest_record.h"

typedef enum {
  MCOL_AUTO = 0,      // a number is a score of the column's name; anything else is ignored
  MCOL_IGNORE,
  MCOL_PATH,          // text: the source
  MCOL_START,         // a time (manifest_value.h) or empty
  MCOL_END,
  MCOL_CAPTION,       // text or empty
  MCOL_START_FRAME,   // a frame number (>= 0) or empty; seconds through the `fps` score
  MCOL_END_FRAME,
  MCOL_SCORE,         // a number or empty: anything else is an error
  MCOL_SPAN_LIST,     // [[start, end], ...]: the row's spans
  MCOL_CAPTION_LIST,  // [caption, ...]: one per span
  MCOL_SCORE_LIST,    // [number, ...]: one per span, a score of the column's name
  MCOL_SPANS,         // JSON only: [{"start", "end", "caption", NAME: number...}, ...]
  MCOL_NROLES
} mcol_role;

// A cell: text (CSV, TSV) or a JSON value (JSONL), never both.
typedef struct {
  const char *text;
  json_t *json;
} mcell;

typedef struct {
  // The row's first error: reason NULL when there is none (manifest_error's fields).
  const char *reason;
  const char *column;
  int span;
  char what[600];
  unsigned seen;  // bit r: a cell of role r was given a value
  // The row, after mrow_finish without error.
  char path[4096];
  manifest_span *spans;
  int nspans;
  // What the cells gave so far (private to manifest_row.c).
  struct mrow_cells *c;
} mrow;

tsr_status mrow_init(mrow *b);
void mrow_free(mrow *b);
// Starts a new row whose record has `bytes` bytes; the previous row's values are released.
tsr_status mrow_begin(mrow *b, size_t bytes);
// A score name for `raw` (mv_score_name) that lives until the next mrow_begin; the names of
// one row together may take as many bytes as its record.
const char *mrow_name(mrow *b, const char *raw);
// Takes the cell of `column` (its name in the file), of `role`; `score` names its score
// (MCOL_AUTO, MCOL_SCORE, MCOL_SCORE_LIST). A JSON value must live until the next
// mrow_begin. A bad value is the row's error (after the first one cells are ignored).
tsr_status mrow_cell(mrow *b, const char *column, const char *score, mcol_role role, mcell cell);
// Makes the spans, their scores and the path: `path_column`'s cell + suffix, relative to
// root unless absolute. Errors of the row as in mrow_cell.
tsr_status mrow_finish(mrow *b, const char *root, const char *suffix, const char *path_column);

#endif
