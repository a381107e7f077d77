// core/csv.h — the physical lines of a text file and the records of a CSV or TSV, read in
// bounded memory (a 64 KiB read buffer, one record of at most CSV_MAX_RECORD bytes): the
// one CSV reader of the clip manifests (ingest/manifest.c) and the lengths files
// (sched/lengths.c).
//
// Records follow RFC 4180 with the delimiter given (',' or '\t'): a field that starts with
// '"' is quoted, runs to the next '"' not doubled, and may hold delimiters and line breaks
// ("" is one '"'); a '"' inside an unquoted field is kept as it is. Lines end with LF or CRLF
// (the CR is dropped, also before a line break inside quotes). Blank lines between records
// are skipped.
#ifndef TESSERA_CORE_CSV_H
#define TESSERA_CORE_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

enum { CSV_MAX_RECORD = 1 << 20 };  // bytes of one record, all its lines

typedef struct {
  int fd;
  int seekable;       // a regular file: a broken record can be read again from its 2nd line
  int eof;
  char *buf;          // read buffer
  size_t pos, len;
  int64_t buf_off;    // file offset of buf[0]
  int64_t line;       // lines read so far (the number of the current line)
  char *text;         // the current line, NUL-terminated, without LF / CRLF
  size_t tlen, tcap;
  int too_long;       // the current line was longer than CSV_MAX_RECORD (text is cut)
} mcsv_lines;

// Reads fd from its current offset (the reader owns fd from here: mcsv_lines_free closes it).
tsr_status mcsv_lines_init(mcsv_lines *l, int fd);
void mcsv_lines_free(mcsv_lines *l);
// The next line into l->text; *got = 0 at the end of the file. A UTF-8 byte order mark at the
// start of the file is dropped. Fails only when the file cannot be read (TSR_EIO, `name`).
tsr_status mcsv_next_line(mcsv_lines *l, const char *name, int *got);
// Reads on from the line after line `after` (whose next line starts at file offset `off`).
tsr_status mcsv_seek_line(mcsv_lines *l, const char *name, int64_t off, int64_t after);

typedef enum {
  MCSV_OK = 0,
  MCSV_AFTER_QUOTE,  // text after a closing quote (before the delimiter or line end)
  MCSV_OPEN_QUOTE,   // a quoted field still open at the end of the file
  MCSV_TOO_LONG,     // the record passed CSV_MAX_RECORD bytes (cut there)
  MCSV_NUL,          // a NUL byte in a field (the field's C string would end there)
} mcsv_problem;

typedef struct {
  char delim;
  char *data;          // the fields' text, each NUL-terminated
  size_t len, cap;
  size_t *start;       // field i is data + start[i]
  int n, fcap;
  int64_t first_line, last_line;
  int64_t resync_off;  // file offset of the line after first_line
  mcsv_problem problem;
  int problem_field;   // field of the problem (0-based)
  int64_t problem_line;
} mcsv_record;

// The next non-blank record into r; *got = 0 at the end of the file. A record with a problem
// is still returned whole (r->problem says what), so the caller can report it and choose
// where to read on.
tsr_status mcsv_next_record(mcsv_lines *l, const char *name, mcsv_record *r, int *got);
void mcsv_record_free(mcsv_record *r);

#endif
