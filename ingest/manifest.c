// ingest/manifest.c — the manifest reader: presets, opening and header, rows and error
// records, duplicate spans.
#include "ingest/manifest.h"

#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/fs.h"
#include "core/hash_set.h"
#include "core/csv.h"
#include "ingest/manifest_row.h"
#include "ingest/manifest_value.h"

// ---- presets -----------------------------------------------------------------------------

typedef struct {
  const char *name;
  mcol_role role;
  int required;  // the header must have it (JSONL: every row must have the key)
} column_map;

typedef struct {
  const char *name;
  const char *suffix;  // appended to the path cell
  const column_map *cols;
  int ncols;
} preset_def;

static const column_map tessera_cols[] = {
    {"path", MCOL_PATH, 1},       {"start", MCOL_START, 0}, {"end", MCOL_END, 0},
    {"caption", MCOL_CAPTION, 0}, {"spans", MCOL_SPANS, 0},
};
static const column_map panda_cols[] = {
    {"videoID", MCOL_PATH, 1},         {"url", MCOL_IGNORE, 0},
    {"timestamp", MCOL_SPAN_LIST, 1},  {"caption", MCOL_CAPTION_LIST, 1},
    {"matching_score", MCOL_SCORE_LIST, 0},
};
static const column_map openvid_cols[] = {
    {"video", MCOL_PATH, 1},           {"caption", MCOL_CAPTION, 1},
    {"aesthetic score", MCOL_SCORE, 0}, {"motion score", MCOL_SCORE, 0},
    {"temporal consistency score", MCOL_SCORE, 0}, {"camera motion", MCOL_IGNORE, 0},
    {"frame", MCOL_SCORE, 0},          {"fps", MCOL_SCORE, 0}, {"seconds", MCOL_SCORE, 0},
};
static const column_map opensora_cols[] = {
    {"path", MCOL_PATH, 1},        {"text", MCOL_CAPTION, 0},      {"num_frames", MCOL_SCORE, 0},
    {"height", MCOL_SCORE, 0},     {"width", MCOL_SCORE, 0},       {"aspect_ratio", MCOL_SCORE, 0},
    {"resolution", MCOL_SCORE, 0}, {"fps", MCOL_SCORE, 0},         {"start", MCOL_START, 0},
    {"end", MCOL_END, 0},          {"start_frame", MCOL_START_FRAME, 0},
    {"end_frame", MCOL_END_FRAME, 0},
};
#define PRESET(n, s, c) {n, s, c, (int)(sizeof c / sizeof c[0])}
static const preset_def presets[] = {
    [MANIFEST_TESSERA] = PRESET("tessera", "", tessera_cols),
    [MANIFEST_PANDA70M] = PRESET("panda70m", ".mp4", panda_cols),
    [MANIFEST_OPENVID] = PRESET("openvid", "", openvid_cols),
    [MANIFEST_OPENSORA] = PRESET("opensora", "", opensora_cols),
};
enum { NPRESETS = sizeof presets / sizeof presets[0] };
static const char *syntax_names[] = {"auto", "csv", "tsv", "jsonl"};

tsr_status manifest_preset_parse(const char *name, manifest_preset *out) {
  for (int i = 0; i < NPRESETS; i++)
    if (!strcmp(name, presets[i].name)) {
      *out = (manifest_preset)i;
      return TSR_OK;
    }
  return err_set(TSR_EINVAL,
                 "'%s' is not a manifest format: tessera, panda70m, openvid or opensora", name);
}

const char *manifest_preset_name(manifest_preset p) {
  return (unsigned)p < NPRESETS ? presets[p].name : "?";
}

tsr_status manifest_syntax_parse(const char *name, manifest_syntax *out) {
  for (int i = 0; i < 4; i++)
    if (!strcmp(name, syntax_names[i])) {
      *out = (manifest_syntax)i;
      return TSR_OK;
    }
  return err_set(TSR_EINVAL, "'%s' is not a manifest syntax: csv, tsv, jsonl or auto", name);
}

const char *manifest_syntax_name(manifest_syntax s) {
  return (unsigned)s < 4 ? syntax_names[s] : "?";
}

// ---- the reader --------------------------------------------------------------------------

struct manifest {
  char *file;
  manifest_syntax syntax;
  const preset_def *preset;
  char *path_column;
  const char *suffix;
  char root[PATH_MAX];
  mcsv_lines lines;
  mcsv_record rec;
  int ncols;          // CSV / TSV header: names, score names, roles
  char **names, **scores;
  mcol_role *roles;
  json_t *jrow;       // JSONL: the current row's object
  mrow b;
  int64_t rows, line, last_line;
  hash_set seen;
  unsigned char *dup; // span k of the current row repeats an earlier span
  int dupcap, next_dup, pending;
  manifest_record out;
  char msg[1024];
};

static mcol_role role_of(const manifest *m, const char *name) {
  if (!name[0]) return MCOL_IGNORE;  // pandas' unnamed index column
  if (!strcmp(name, m->path_column)) return MCOL_PATH;
  for (int i = 0; i < m->preset->ncols; i++)
    if (!strcmp(name, m->preset->cols[i].name))
      return m->preset->cols[i].role == MCOL_PATH ? MCOL_AUTO : m->preset->cols[i].role;
  return MCOL_AUTO;
}

// The name the file must use for preset column i (the path column may be renamed).
static const char *required_name(const manifest *m, int i) {
  const column_map *c = &m->preset->cols[i];
  return c->role == MCOL_PATH ? m->path_column : c->name;
}

// The error record for the current row: "FILE: row R (line L), column 'C', span K: what".
static void set_error(manifest *m, const char *reason, const char *column, int span,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void set_error(manifest *m, const char *reason, const char *column, int span,
                      const char *fmt, ...) {
  char what[700], where[160], col[300] = "", sp[32] = "";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (m->last_line > m->line)
    snprintf(where, sizeof where, "lines %lld-%lld", (long long)m->line, (long long)m->last_line);
  else
    snprintf(where, sizeof where, "line %lld", (long long)m->line);
  if (column) snprintf(col, sizeof col, ", column '%s'", column);
  if (span >= 0) snprintf(sp, sizeof sp, ", span %d", span);
  int n = snprintf(m->msg, sizeof m->msg, "%s: row %lld (%s)%s%s: %s", m->file, (long long)m->rows,
                   where, col, sp, what);
  if (n >= (int)sizeof m->msg) memcpy(m->msg + sizeof m->msg - 4, "...", 4);  // a long file name
  m->out.kind = MANIFEST_ERROR;
  m->out.error = (manifest_error){.row = m->rows, .line = m->line, .span = span, .column = column,
                                  .reason = reason, .message = m->msg};
}

// ---- CSV and TSV -------------------------------------------------------------------------

// "a, b, c" (cut with "..." past n bytes).
static void list_columns(const manifest *m, char *out, size_t n) {
  size_t k = 0;
  out[0] = 0;
  for (int i = 0; i < m->ncols && k + 4 < n; i++)
    k += (size_t)snprintf(out + k, n - k, "%s'%s'", i ? ", " : "", m->names[i]);
  if (k >= n - 1 && n > 4) strcpy(out + n - 4, "...");
}

static tsr_status check_header(manifest *m) {
  char found[600];
  for (int i = 0; i < m->ncols; i++)
    for (int j = 0; j < i; j++)
      if (m->names[i][0] && !strcmp(m->names[i], m->names[j]))
        return err_set(TSR_EFORMAT, "manifest %s: column '%s' appears twice in the header "
                       "(columns %d and %d)", m->file, m->names[i], j + 1, i + 1);
  for (int c = 0; c < m->preset->ncols; c++) {
    if (!m->preset->cols[c].required) continue;
    const char *want = required_name(m, c);
    int have = 0;
    for (int i = 0; i < m->ncols && !have; i++) have = !strcmp(m->names[i], want);
    if (have) continue;
    list_columns(m, found, sizeof found);
    return err_set(TSR_EFORMAT, "manifest %s: the %s format needs a column '%s'; the header (line "
                   "%lld) has %s", m->file, m->preset->name, want, (long long)m->rec.first_line,
                   found);
  }
  return TSR_OK;
}

static tsr_status read_header(manifest *m) {
  int got;
  tsr_status st = mcsv_next_record(&m->lines, m->file, &m->rec, &got);
  if (st) return st;
  if (!got) return err_set(TSR_EFORMAT, "manifest %s is empty: no header line", m->file);
  if (m->rec.problem)
    return err_set(TSR_EFORMAT, "manifest %s: the header (line %lld) is malformed (%s)", m->file,
                   (long long)m->rec.first_line,
                   m->rec.problem == MCSV_TOO_LONG ? "too long"
                   : m->rec.problem == MCSV_NUL    ? "a NUL byte"
                                                   : "unbalanced quotes");
  m->ncols = m->rec.n;
  m->names = calloc((size_t)m->ncols, sizeof *m->names);
  m->scores = calloc((size_t)m->ncols, sizeof *m->scores);
  m->roles = calloc((size_t)m->ncols, sizeof *m->roles);
  if (!m->names || !m->scores || !m->roles)
    return err_set(TSR_ENOMEM, "out of memory reading a manifest");
  for (int i = 0; i < m->ncols; i++) {
    const char *raw = m->rec.data + m->rec.start[i];
    size_t len = strlen(raw);
    m->names[i] = strdup(raw);
    m->scores[i] = malloc(len + 1);
    if (!m->names[i] || !m->scores[i])
      return err_set(TSR_ENOMEM, "out of memory reading a manifest");
    mv_score_name(m->scores[i], len + 1, raw);
    m->roles[i] = role_of(m, m->names[i]);
  }
  return check_header(m);
}

// A record that is not a row: says what, and reads on from the line after its first (a file
// that cannot seek, from the line after the record).
static tsr_status record_problem(manifest *m) {
  const mcsv_record *r = &m->rec;
  int multi = r->last_line > r->first_line;
  const char *col = r->problem_field < m->ncols ? m->names[r->problem_field] : NULL;
  char resume[160] = "";
  if (multi && m->lines.seekable)
    snprintf(resume, sizeof resume, "; reading resumes at line %lld", (long long)r->first_line + 1);
  else if (multi)
    snprintf(resume, sizeof resume, "; lines %lld-%lld are skipped (the input cannot seek)",
             (long long)r->first_line + 1, (long long)r->last_line);
  if (r->problem == MCSV_TOO_LONG)
    set_error(m, "too long", NULL, -1, "the record is longer than %d bytes%s%s",
              MANIFEST_MAX_RECORD, multi ? " (an unterminated quote?)" : "", resume);
  else if (r->problem == MCSV_OPEN_QUOTE)
    set_error(m, "quote", col, -1, "a quoted field is not closed before the end of the file (an "
              "unterminated quote)%s", resume);
  else if (r->problem == MCSV_AFTER_QUOTE && multi)
    set_error(m, "quote", col, -1, "a quoted field runs over %lld lines and is followed by text on "
              "line %lld (an unterminated quote?)%s", (long long)(r->last_line - r->first_line + 1),
              (long long)r->problem_line, resume);
  else if (r->problem == MCSV_AFTER_QUOTE)
    set_error(m, "quote", col, -1, "text after the closing quote of a quoted field (a quote inside "
              "a field is written twice: \"\")");
  else
    set_error(m, "fields", NULL, -1, "%d fields, the header has %d%s", r->n, m->ncols, resume);
  if (!multi || !m->lines.seekable) return TSR_OK;
  return mcsv_seek_line(&m->lines, m->file, r->resync_off, r->first_line);
}

static tsr_status read_csv_row(manifest *m, int *got) {
  tsr_status st = mcsv_next_record(&m->lines, m->file, &m->rec, got);
  if (st || !*got) return st;
  m->rows++;
  m->line = m->rec.first_line;
  m->last_line = m->rec.last_line;
  if ((st = mrow_begin(&m->b, m->rec.len))) return st;
  if (m->rec.problem == MCSV_NUL && m->rec.n == m->ncols) {
    const int f = m->rec.problem_field;
    set_error(m, "encoding", f < m->ncols ? m->names[f] : NULL, -1, "a NUL byte in the field "
              "(text stops there: a binary file, or UTF-16?)");
    return TSR_OK;
  }
  if (m->rec.problem || m->rec.n != m->ncols) return record_problem(m);
  m->last_line = m->line;  // a row's own errors name its first line
  for (int i = 0; i < m->ncols && !st; i++)
    st = mrow_cell(&m->b, m->names[i], m->scores[i], m->roles[i],
                   (mcell){.text = m->rec.data + m->rec.start[i]});
  if (!st) st = mrow_finish(&m->b, m->root, m->suffix, m->path_column);
  return st;
}

// ---- JSONL -------------------------------------------------------------------------------

static int blank(const char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\r') s++;
  return !*s;
}

static tsr_status jsonl_cells(manifest *m) {
  const char *key;
  json_t *v;
  unsigned present = 0;
  tsr_status st = TSR_OK;
  json_object_foreach(m->jrow, key, v) {
    mcol_role role = role_of(m, key);
    present |= 1u << role;
    if ((st = mrow_cell(&m->b, key, mrow_name(&m->b, key), role, (mcell){.json = v}))) return st;
  }
  for (int c = 0; c < m->preset->ncols && !m->b.reason; c++)
    if (m->preset->cols[c].required && m->preset->cols[c].role != MCOL_PATH &&
        !(present & (1u << m->preset->cols[c].role))) {
      set_error(m, "missing column", m->preset->cols[c].name, -1, "the %s format needs this key",
                m->preset->name);
      return TSR_OK;
    }
  return mrow_finish(&m->b, m->root, m->suffix, m->path_column);
}

static tsr_status read_jsonl_row(manifest *m, int *got) {
  mcsv_lines *l = &m->lines;
  tsr_status st;
  do {
    if ((st = mcsv_next_line(l, m->file, got)) || !*got) return st;
  } while (!l->too_long && blank(l->text));
  m->rows++;
  m->line = m->last_line = l->line;
  json_decref(m->jrow);
  m->jrow = NULL;
  if ((st = mrow_begin(&m->b, l->tlen))) return st;
  if (l->too_long) {
    set_error(m, "too long", NULL, -1, "the line is longer than %d bytes", MANIFEST_MAX_RECORD);
    return TSR_OK;
  }
  json_error_t jerr;
  m->jrow = json_loadb(l->text, l->tlen, JSON_REJECT_DUPLICATES, &jerr);
  if (!m->jrow)
    set_error(m, "json", NULL, -1, "not JSON: %s (character %d)", jerr.text, jerr.column);
  else if (!json_is_object(m->jrow))
    set_error(m, "json", NULL, -1, "a row must be a JSON object {...}");
  else return jsonl_cells(m);
  return TSR_OK;
}

// ---- duplicates --------------------------------------------------------------------------

// XXH3 of (path, start, end): its bits are uniform, which the false-duplicate rate in
// ingest/manifest.h assumes; the table's slot is taken from its low bits.
static uint64_t span_hash(const char *path, const manifest_span *s) {
  unsigned char key[18];
  double t[2] = {s->has_start ? s->start + 0.0 : 0.0, s->has_end ? s->end + 0.0 : 0.0};
  memcpy(key, t, 16);
  key[16] = (unsigned char)s->has_start;
  key[17] = (unsigned char)s->has_end;
  uint64_t h = XXH3_64bits_withSeed(key, sizeof key, XXH3_64bits(path, strlen(path)));
  return h ? h : 1;
}

static tsr_status mark_duplicates(manifest *m) {
  if (m->b.nspans > m->dupcap) {
    unsigned char *d = realloc(m->dup, (size_t)m->b.nspans);
    if (!d) return err_set(TSR_ENOMEM, "out of memory reading a manifest");
    m->dup = d;
    m->dupcap = m->b.nspans;
  }
  for (int k = 0; k < m->b.nspans; k++) {
    int r = hash_set_add(&m->seen, span_hash(m->b.path, &m->b.spans[k]));
    if (r < 0) return err_set(TSR_ENOMEM, "out of memory remembering manifest spans for the "
                              "duplicate check (%llu spans)", (unsigned long long)m->seen.n);
    m->dup[k] = (unsigned char)r;
  }
  m->next_dup = 0;
  m->pending = 1;
  return TSR_OK;
}

// The current row's next duplicate span as an error record, else the row without its
// duplicates; 0 when the row had nothing left to give.
static int emit_pending(manifest *m) {
  mrow *b = &m->b;
  while (m->next_dup < b->nspans) {
    int k = m->next_dup++;
    if (m->dup[k]) {
      set_error(m, "duplicate", NULL, b->spans[k].index,
                "the same path and span as an earlier row");
      return 1;
    }
  }
  m->pending = 0;
  int n = 0;
  for (int k = 0; k < b->nspans; k++)
    if (!m->dup[k]) b->spans[n++] = b->spans[k];
  if (n == 0) return 0;
  m->out.kind = MANIFEST_ROW;
  m->out.row = (manifest_row){.row = m->rows, .line = m->line, .path = b->path, .spans = b->spans,
                              .nspans = n};
  return 1;
}

tsr_status manifest_next(manifest *m, const manifest_record **rec) {
  *rec = &m->out;
  for (;;) {
    if (m->pending && emit_pending(m)) return TSR_OK;
    int got;
    m->out.kind = MANIFEST_EOF;
    tsr_status st = m->syntax == MANIFEST_SYNTAX_JSONL ? read_jsonl_row(m, &got)
                                                       : read_csv_row(m, &got);
    if (st || !got || m->out.kind == MANIFEST_ERROR) return st;
    if (m->b.reason) {
      set_error(m, m->b.reason, m->b.column, m->b.span, "%s", m->b.what);
      return TSR_OK;
    }
    if ((st = mark_duplicates(m))) return st;
  }
}

// ---- open and close ----------------------------------------------------------------------

static tsr_status detect_syntax(manifest *m) {
  if (m->syntax != MANIFEST_SYNTAX_AUTO) return TSR_OK;
  static const struct { const char *ext; manifest_syntax s; } ext[] = {
      {".csv", MANIFEST_SYNTAX_CSV}, {".tsv", MANIFEST_SYNTAX_TSV}, {".tab", MANIFEST_SYNTAX_TSV},
      {".jsonl", MANIFEST_SYNTAX_JSONL}, {".ndjson", MANIFEST_SYNTAX_JSONL}};
  const char *dot = strrchr(m->file, '.');
  for (size_t i = 0; dot && i < sizeof ext / sizeof ext[0]; i++)
    if (!strcasecmp(dot, ext[i].ext)) {
      m->syntax = ext[i].s;
      return TSR_OK;
    }
  return err_set(TSR_EINVAL, "manifest %s: its name does not tell its syntax (.csv, .tsv, .jsonl "
                 "or .ndjson): give it (csv, tsv or jsonl; --manifest-syntax)", m->file);
}

// --root, else the manifest's folder (the working directory for a pipe).
static tsr_status find_root(manifest *m, const char *root) {
  char dir[PATH_MAX];
  struct stat sb;
  if (root) {
    if (!realpath(root, m->root) || stat(m->root, &sb) || !S_ISDIR(sb.st_mode))
      return err_set(TSR_EINVAL, "manifest root %s is not a folder", root);
    return TSR_OK;
  }
  snprintf(dir, sizeof dir, "%s", m->file);
  char *slash = strrchr(dir, '/');
  if (slash) *(slash == dir ? slash + 1 : slash) = 0;
  else snprintf(dir, sizeof dir, ".");
  if (!m->lines.seekable) snprintf(dir, sizeof dir, ".");
  if (!realpath(dir, m->root))
    return err_set(TSR_EIO, "manifest %s: cannot resolve its folder", m->file);
  return TSR_OK;
}

static tsr_status setup(manifest *m, const char *path, const manifest_opts *o) {
  if ((unsigned)o->preset >= NPRESETS)
    return err_set(TSR_EINVAL, "unknown manifest preset %d", o->preset);
  m->preset = &presets[o->preset];
  m->syntax = o->syntax;
  m->file = strdup(path);
  const char *pc = o->path_column;
  for (int i = 0; !pc && i < m->preset->ncols; i++)
    if (m->preset->cols[i].role == MCOL_PATH) pc = m->preset->cols[i].name;
  m->path_column = strdup(pc);
  m->suffix = o->path_suffix ? o->path_suffix : m->preset->suffix;
  if (!m->file || !m->path_column) return err_set(TSR_ENOMEM, "out of memory opening a manifest");
  return TSR_OK;
}

tsr_status manifest_open(manifest **out, const char *path, const manifest_opts *o) {
  *out = NULL;
  manifest *m = calloc(1, sizeof *m);
  if (!m) return err_set(TSR_ENOMEM, "out of memory opening a manifest");
  m->lines.fd = -1;
  int fd = -1;
  tsr_status st = setup(m, path, o);
  if (!st) st = detect_syntax(m);
  if (!st) m->rec.delim = m->syntax == MANIFEST_SYNTAX_TSV ? '\t' : ',';
  if (!st && (st = fs_open_input(path, FS_PIPE_OK, &fd))) err_wrap(st, "manifest: ");
  if (!st) st = mcsv_lines_init(&m->lines, fd);
  if (!st) st = find_root(m, o->root);
  if (!st) st = mrow_init(&m->b);
  if (!st && m->syntax != MANIFEST_SYNTAX_JSONL) st = read_header(m);
  if (st) {
    manifest_close(&m);
    return st;
  }
  *out = m;
  return TSR_OK;
}

const char *manifest_root(const manifest *m) { return m->root; }
manifest_syntax manifest_syntax_of(const manifest *m) { return m->syntax; }

void manifest_close(manifest **pm) {
  manifest *m = *pm;
  if (!m) return;
  mcsv_lines_free(&m->lines);
  mcsv_record_free(&m->rec);
  mrow_free(&m->b);
  json_decref(m->jrow);
  for (int i = 0; i < m->ncols; i++) {
    free(m->names[i]);
    free(m->scores[i]);
  }
  free(m->names);
  free(m->scores);
  free(m->roles);
  hash_set_free(&m->seen);
  free(m->dup);
  free(m->path_column);
  free(m->file);
  free(m);
  *pm = NULL;
}
