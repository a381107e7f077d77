// ingest/manifest.h — clip manifests: the tables real video datasets ship (Panda-70M,
// OpenVid-1M, Open-Sora's pipeline, tessera's own form), read one row at a time.
//
// A row names a source video and one or more spans of it, each with an optional caption and
// numeric scores. The reader streams: memory does not grow with the number of rows, except
// for the duplicate check (below), so a manifest of tens of millions of rows is read in a few
// tens of megabytes. docs/manifest.md is the user's description of everything here.
//
// Syntax (manifest_syntax): CSV (RFC 4180: quoted fields, doubled quotes, line breaks inside
// quotes, LF or CRLF), TSV (the same with tabs) or JSONL (one JSON object per line), told by
// the file name (.csv, .tsv, .jsonl / .ndjson) unless forced. The first record of a CSV or
// TSV is its header; blank lines are skipped everywhere. A record (all its lines) may be at
// most MANIFEST_MAX_RECORD bytes.
//
// Columns are mapped by name, by preset (manifest_preset): which column is the path, which
// hold the spans, captions and scores. A column no preset names is a score when its value
// is a number (a text value there is ignored: urls, labels). Score names are the column
// names with spaces turned to underscores ("aesthetic score" -> aesthetic_score).
//
// Numbering: a row's number R counts the data records from 1 (the header and blank lines
// not counted); `line` is the physical line (1-based, header counted) where it starts. A
// span's number K is its 0-based position in its row (panda70m rows list several).
//
// Bad rows do not stop the reader: manifest_next returns an error record for the row (file,
// row, line, column, what is wrong) and the next call reads on. A record broken over lines by
// an unterminated quote is reported once, then reading resumes at the line after its first
// (a file that cannot seek, a pipe, resumes after the broken record instead). Only a missing
// required column in the header, an unreadable file and out of memory stop it.
//
// Duplicates: a span with the same resolved path, start and end as an earlier span is an error
// record of its own (reason "duplicate"). The reader remembers a 64-bit hash of each span: 8
// bytes per slot of an open-addressing table kept at most 3/4 full, so at most ~21 bytes a span
// (32 MiB for 2 million spans, 128 MiB for 10 million; half as much again while the table
// doubles). Two different spans share a hash with probability about n^2 / 2^65 (3e-6 for 10
// million), and the later one would then be reported as a duplicate.
#ifndef TESSERA_INGEST_MANIFEST_H
#define TESSERA_INGEST_MANIFEST_H

#include <stdint.h>

#include "core/err.h"
#include "ingest/manifest_record.h"

typedef enum {
  MANIFEST_SYNTAX_AUTO = 0,  // from the file name
  MANIFEST_SYNTAX_CSV,
  MANIFEST_SYNTAX_TSV,
  MANIFEST_SYNTAX_JSONL,
} manifest_syntax;

// The column maps (docs/manifest.md lists each preset's columns):
//   tessera   path, start, end, caption (+ JSONL: spans, a list of {start, end, caption,
//             NAME: number}); one span per row unless `spans` is given
//   panda70m  videoID (path: videoID + ".mp4"), timestamp (list of [start, end]), caption
//             (list of texts, one per span), matching_score (list of numbers, one per span)
//   openvid   video, caption; numbers: aesthetic score, motion score, temporal consistency
//             score, frame, fps, seconds; camera motion (text) ignored; whole files
//   opensora  path, text; numbers: num_frames, height, width, aspect_ratio, resolution, fps;
//             optional start/end (seconds or timecodes) or start_frame/end_frame (frames at
//             `fps`: start = start_frame / fps, end = end_frame / fps, end frame excluded)
typedef enum {
  MANIFEST_TESSERA = 0,
  MANIFEST_PANDA70M,
  MANIFEST_OPENVID,
  MANIFEST_OPENSORA,
} manifest_preset;

typedef struct {
  manifest_preset preset;
  manifest_syntax syntax;
  const char *root;         // folder of relative paths; NULL: the manifest's own folder
  const char *path_column;  // NULL: the preset's path column
  const char *path_suffix;  // appended to every path; NULL: the preset's (panda70m ".mp4")
} manifest_opts;

typedef struct manifest manifest;

// "tessera", "panda70m", "openvid", "opensora" (the names --manifest-format takes).
tsr_status manifest_preset_parse(const char *name, manifest_preset *out);
const char *manifest_preset_name(manifest_preset p);
// "csv", "tsv", "jsonl" (and "auto").
tsr_status manifest_syntax_parse(const char *name, manifest_syntax *out);
const char *manifest_syntax_name(manifest_syntax s);

// Opens `path` (a regular file or a pipe) and, for CSV and TSV, reads its header. Fails with
// TSR_EFORMAT naming the file and the column when the header lacks a column the preset
// requires (listing the columns found), TSR_EINVAL for a syntax the name does not tell or a
// root that is not a folder, TSR_EIO when the file cannot be read.
tsr_status manifest_open(manifest **out, const char *path, const manifest_opts *o);
// The next row or error record in *rec (owned by the reader: valid until the next call or
// manifest_close); kind MANIFEST_EOF at the end. Fails only on a read error or out of memory.
tsr_status manifest_next(manifest *m, const manifest_record **rec);
// The folder relative paths are resolved against, absolute.
const char *manifest_root(const manifest *m);
// The syntax being read (after detection from the name).
manifest_syntax manifest_syntax_of(const manifest *m);
void manifest_close(manifest **m);

#endif
