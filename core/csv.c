// core/csv.c — lines and CSV/TSV records of a text file in bounded memory (core/csv.h).
#include "core/csv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


enum { READ_CHUNK = 64 << 10 };

tsr_status mcsv_lines_init(mcsv_lines *l, int fd) {
  memset(l, 0, sizeof *l);
  l->fd = fd;
  struct stat sb;
  l->seekable = !fstat(fd, &sb) && S_ISREG(sb.st_mode);
  l->buf_off = l->seekable ? lseek(fd, 0, SEEK_CUR) : 0;
  if (l->buf_off < 0) l->buf_off = 0, l->seekable = 0;
  l->buf = malloc(READ_CHUNK);
  l->tcap = 4096;
  l->text = malloc(l->tcap);
  if (!l->buf || !l->text) {
    mcsv_lines_free(l);
    return err_set(TSR_ENOMEM, "out of memory reading a CSV file");
  }
  return TSR_OK;
}

void mcsv_lines_free(mcsv_lines *l) {
  if (l->fd >= 0) close(l->fd);
  free(l->buf);
  free(l->text);
  memset(l, 0, sizeof *l);
  l->fd = -1;
}

static tsr_status fill(mcsv_lines *l, const char *name) {
  l->buf_off += (int64_t)l->len;
  l->pos = l->len = 0;
  ssize_t n;
  do n = read(l->fd, l->buf, READ_CHUNK);
  while (n < 0 && errno == EINTR);
  if (n < 0) return err_set(TSR_EIO, "cannot read %s: %s", name, strerror(errno));
  if (n == 0) l->eof = 1;
  l->len = (size_t)n;
  return TSR_OK;
}

// Appends n bytes to the line, up to CSV_MAX_RECORD (beyond it: too_long, dropped).
static tsr_status append(mcsv_lines *l, const char *p, size_t n) {
  if (l->tlen + n > CSV_MAX_RECORD) {
    l->too_long = 1;
    n = l->tlen < CSV_MAX_RECORD ? CSV_MAX_RECORD - l->tlen : 0;
  }
  if (l->tlen + n + 1 > l->tcap) {
    size_t cap = l->tcap;
    while (cap < l->tlen + n + 1) cap *= 2;
    char *t = realloc(l->text, cap);
    if (!t) return err_set(TSR_ENOMEM, "out of memory reading a CSV line");
    l->text = t;
    l->tcap = cap;
  }
  memcpy(l->text + l->tlen, p, n);
  l->tlen += n;
  return TSR_OK;
}

tsr_status mcsv_next_line(mcsv_lines *l, const char *name, int *got) {
  tsr_status st = TSR_OK;
  int any = 0;
  l->tlen = 0;
  l->too_long = 0;
  for (;;) {
    if (l->pos == l->len) {
      if (l->eof || (st = fill(l, name))) break;
      if (l->eof) break;
    }
    any = 1;
    char *s = l->buf + l->pos, *nl = memchr(s, '\n', l->len - l->pos);
    size_t n = nl ? (size_t)(nl - s) : l->len - l->pos;
    if ((st = append(l, s, n))) break;
    l->pos += n + (nl != NULL);
    if (nl) break;
  }
  if (st) return st;
  *got = any;
  if (!any) return TSR_OK;
  if (l->tlen && l->text[l->tlen - 1] == '\r' && !l->too_long) l->tlen--;
  l->text[l->tlen] = 0;
  if (l->line == 0 && l->tlen >= 3 && !memcmp(l->text, "\xEF\xBB\xBF", 3)) {
    memmove(l->text, l->text + 3, l->tlen - 2);
    l->tlen -= 3;
  }
  l->line++;
  return TSR_OK;
}

tsr_status mcsv_seek_line(mcsv_lines *l, const char *name, int64_t off, int64_t after) {
  if (lseek(l->fd, off, SEEK_SET) < 0)
    return err_set(TSR_EIO, "cannot seek in %s: %s", name, strerror(errno));
  l->buf_off = off;
  l->pos = l->len = 0;
  l->eof = 0;
  l->line = after;
  return TSR_OK;
}

// ---- records -----------------------------------------------------------------------------

typedef enum { FIELD_START, UNQUOTED, QUOTED, AFTER_QUOTE } field_state;

static tsr_status put_byte(mcsv_record *r, char c) {
  if (r->len + 2 > r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 4096;
    char *d = realloc(r->data, cap);
    if (!d) return err_set(TSR_ENOMEM, "out of memory reading a CSV record");
    r->data = d;
    r->cap = cap;
  }
  r->data[r->len++] = c;
  return TSR_OK;
}

// Ends field n; the next one starts at the current length (start[n + 1]).
static tsr_status end_field(mcsv_record *r) {
  tsr_status st = put_byte(r, 0);
  if (st) return st;
  if (r->n + 2 > r->fcap) {
    int cap = 2 * r->fcap;
    size_t *s = realloc(r->start, (size_t)cap * sizeof *s);
    if (!s) return err_set(TSR_ENOMEM, "out of memory reading a CSV record");
    r->start = s;
    r->fcap = cap;
  }
  r->start[++r->n] = r->len;
  return TSR_OK;
}

static void note(mcsv_record *r, mcsv_problem p, int64_t line) {
  if (r->problem) return;  // the first one is the one to report
  r->problem = p;
  r->problem_field = r->n;
  r->problem_line = line;
}

// Scans one physical line into the record; *state carries a quoted field over lines.
static tsr_status scan_line(mcsv_record *r, const mcsv_lines *l, field_state *state) {
  tsr_status st = TSR_OK;
  for (size_t i = 0; i < l->tlen && !st; i++) {
    char c = l->text[i];
    if (c == 0) note(r, MCSV_NUL, l->line);  // kept: the fields still split where they would
    switch (*state) {
    case FIELD_START:
      if (c == '"') { *state = QUOTED; break; }
      *state = UNQUOTED;
      /* fall through */
    case UNQUOTED:
      if (c == r->delim) st = end_field(r), *state = FIELD_START;
      else st = put_byte(r, c);
      break;
    case QUOTED:
      if (c == '"') *state = AFTER_QUOTE;
      else st = put_byte(r, c);
      break;
    case AFTER_QUOTE:
      if (c == '"') st = put_byte(r, '"'), *state = QUOTED;  // a doubled quote
      else if (c == r->delim) st = end_field(r), *state = FIELD_START;
      else note(r, MCSV_AFTER_QUOTE, l->line), st = put_byte(r, c), *state = UNQUOTED;
      break;
    }
  }
  if (!st && l->too_long) note(r, MCSV_TOO_LONG, l->line);
  return st;
}

// Starts the record at the current line (the first that is not blank).
static tsr_status begin_record(mcsv_record *r, const mcsv_lines *l) {
  r->len = 0;
  r->n = 0;
  r->problem = MCSV_OK;
  r->problem_field = 0;
  r->first_line = r->last_line = l->line;
  r->resync_off = l->buf_off + (int64_t)l->pos;
  if (!r->start) {
    r->fcap = 32;
    r->start = malloc((size_t)r->fcap * sizeof *r->start);
    if (!r->start) return err_set(TSR_ENOMEM, "out of memory reading a CSV record");
  }
  r->start[0] = 0;
  return TSR_OK;
}

tsr_status mcsv_next_record(mcsv_lines *l, const char *name, mcsv_record *r, int *got) {
  tsr_status st;
  int have;
  *got = 0;
  do {
    if ((st = mcsv_next_line(l, name, &have)) || !have) return st;
  } while (l->tlen == 0 && !l->too_long);
  if ((st = begin_record(r, l))) return st;
  field_state state = FIELD_START;
  size_t bytes = 0;
  for (;;) {
    if ((st = scan_line(r, l, &state))) return st;
    bytes += l->tlen + 1;
    r->last_line = l->line;
    if (state != QUOTED) break;
    if (bytes > CSV_MAX_RECORD) {
      note(r, MCSV_TOO_LONG, l->line);
      break;
    }
    if ((st = mcsv_next_line(l, name, &have))) return st;
    if (!have) {
      note(r, MCSV_OPEN_QUOTE, r->last_line);
      break;
    }
    if ((st = put_byte(r, '\n'))) return st;  // the line break inside the quotes
  }
  if ((st = end_field(r))) return st;
  *got = 1;
  return TSR_OK;
}

void mcsv_record_free(mcsv_record *r) {
  free(r->data);
  free(r->start);
  memset(r, 0, sizeof *r);
}
