// ingest/manifest_record.h — what the manifest reader (ingest/manifest.h) gives for each
// record: a row of spans, or an error naming the row and column. Types only: the reader's
// parts (manifest_csv.c, manifest_row.c) and its users share them.
#ifndef TESSERA_INGEST_MANIFEST_RECORD_H
#define TESSERA_INGEST_MANIFEST_RECORD_H

#include <stdint.h>

#include "core/csv.h"

enum { MANIFEST_MAX_RECORD = CSV_MAX_RECORD };  // bytes of one record, all its lines

typedef struct {
  const char *name;  // score name (spaces turned to underscores)
  double value;      // finite
} manifest_score;

typedef struct {
  int index;              // K: position in the row's list of spans, from 0
  int has_start, has_end; // 0: from the start of the file / to its end
  double start, end;      // seconds in the source: the span is [start, end); >= 0, end > start
  const char *caption;    // UTF-8 text, or NULL when the row has none (an empty cell is none)
  const manifest_score *scores;  // the row's scores, then the span's own (panda70m's
  int nscores;                   // matching_score)
} manifest_span;

typedef struct {
  int64_t row;   // R
  int64_t line;  // the first physical line of its record
  const char *path;  // the source: absolute as written, else root/path (not checked to exist)
  const manifest_span *spans;  // spans that are not duplicates, in order (K may skip)
  int nspans;                  // >= 1
} manifest_row;

typedef struct {
  int64_t row, line;
  int span;            // K, or -1 for the whole row
  const char *column;  // the column at fault, or NULL (the record as a whole)
  // Fixed short text to count errors by: "fields", "quote", "too long", "json", "missing
  // column", "missing path", "path", "encoding", "timestamp", "negative time", "end <= start",
  // "caption type", "list", "list length", "number", "fps", "duplicate", "caption length"
  // (past STORE_MAX_CAPTION_BYTES), "scores" (past a clip's limits of scores,
  // store/json_cols.h). A NUL byte in a CSV/TSV field is "encoding".
  const char *reason;
  // "FILE: row R (line L), column 'C', span K: what is wrong" (cell text quoted as read:
  // escape it before printing it to a terminal, core/term.h)
  const char *message;
} manifest_error;

typedef enum { MANIFEST_EOF = 0, MANIFEST_ROW, MANIFEST_ERROR } manifest_item;

typedef struct {
  manifest_item kind;
  manifest_row row;      // when kind == MANIFEST_ROW
  manifest_error error;  // when kind == MANIFEST_ERROR
} manifest_record;

#endif
