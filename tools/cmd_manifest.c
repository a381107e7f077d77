// tools/cmd_manifest.c — `tessera manifest FILE`: reads a clip manifest as the ingest does
// (ingest/manifest.h), applies the filters (ingest/manifest_filter.h), and says what it
// found: rows, spans kept and filtered by reason, errors by reason with examples; --jsonl
// writes the normalized spans.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/term.h"
#include "ingest/manifest.h"
#include "ingest/manifest_filter.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/parse.h"

// Reasons are few: 17 of errors (ingest/manifest.h), at most 2 per --where and 3 of limits.
enum { EXAMPLES = 3, MAX_REASONS = 2 * MANIFEST_FILTER_MAX_WHERE + 32 };

static void usage(FILE *f) {
  fprintf(f,
          "usage: tessera manifest FILE [options]\n\n"
          "Reads a clip manifest (CSV, TSV or JSONL: a source video per row with one or more\n"
          "spans, captions and scores) as `tessera ingest` would, and prints what it found:\n"
          "rows, spans kept and filtered by reason, bad rows by reason with the first few.\n"
          "Each bad row and each filtered span is also one line on stderr naming the file,\n"
          "row, line and column. Formats, columns and filters: docs/manifest.md.\n\n"
          "options:\n"
          "  --manifest-format F  column names of: tessera, panda70m, openvid, opensora [tessera]\n"
          "  --manifest-syntax S  csv, tsv or jsonl                       [from the file name]\n"
          "  --root DIR           folder of relative paths              [the manifest's folder]\n"
          "  --path-column COL    the column that names the source          [the format's]\n"
          "  --path-suffix S      appended to every path                [panda70m: .mp4]\n"
          "  --where EXPR         keep spans whose score passes, e.g. 'aesthetic_score >= 4.5'\n"
          "                       (< <= > >= == !=); repeat: all must hold\n"
          "  --min-clip-seconds S drop spans shorter than S seconds (when start and end known)\n"
          "  --max-clip-seconds S drop spans longer than S seconds (when start and end known)\n"
          "  --min-resolution PX  drop sources whose short side is below PX (checked at ingest)\n"
          "  --jsonl              write the kept spans to stdout, one JSON object a line:\n"
          "                       {\"row\", \"span\", \"path\", \"start\", \"end\", \"caption\",\n"
          "                       \"scores\"}"
          "                       (the summary then goes to stderr)\n\n"
          "exit status: 0 every row read; 2 some rows or spans had errors; 1 fatal (bad\n"
          "arguments, unreadable file, a column the format needs missing from the header)\n");
}

typedef struct {
  char reason[MANIFEST_FILTER_NAME + 48];
  int64_t n;
  char *example[EXAMPLES];
} tally;

typedef struct {
  tally v[MAX_REASONS];
  int n;
} tallies;

typedef struct {
  const char *file;
  FILE *out;  // the JSONL output, or NULL
  manifest_filter filter;
  tallies filtered, errors;
  int64_t rows, rows_with_errors, last_error_row, kept, nfiltered, nerrors, duplicates;
} report;

// Counts one `reason`, keeping the first EXAMPLES messages.
static void tally_add(tallies *t, const char *reason, const char *message) {
  int i = 0;
  while (i < t->n && strcmp(t->v[i].reason, reason)) i++;
  if (i == MAX_REASONS) return;
  if (i == t->n) snprintf(t->v[t->n++].reason, sizeof t->v[0].reason, "%s", reason);
  tally *e = &t->v[i];
  if (e->n < EXAMPLES && message) e->example[e->n] = strdup(message);
  e->n++;
}

static void tallies_print(FILE *f, const tallies *t, const char *title) {
  char shown[TERM_ESCAPE_SIZE(1024)];
  if (!t->n) return;
  fprintf(f, "%s:\n", title);
  for (int i = 0; i < t->n; i++) {
    const tally *e = &t->v[i];
    fprintf(f, "  %s: %lld\n", term_escape(shown, sizeof shown, e->reason), (long long)e->n);
    for (int k = 0; k < EXAMPLES && k < e->n; k++)
      if (e->example[k]) fprintf(f, "    %s\n", term_escape(shown, sizeof shown, e->example[k]));
  }
}

static void tallies_free(tallies *t) {
  for (int i = 0; i < t->n; i++)
    for (int k = 0; k < EXAMPLES; k++) free(t->v[i].example[k]);
}

// ---- JSONL -------------------------------------------------------------------------------

// A JSON string: the reader gives UTF-8, so only quotes, backslashes and controls are escaped
// (the runs between them written whole).
static void put_string(FILE *f, const char *s) {
  putc('"', f);
  for (;;) {
    size_t n = 0;
    while ((unsigned char)s[n] >= 0x20 && s[n] != '"' && s[n] != '\\' && s[n] != 0x7f) n++;
    fwrite(s, 1, n, f);
    unsigned char c = (unsigned char)s[n];
    if (!c) break;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c == '\n') fputs("\\n", f);
    else fprintf(f, "\\u%04x", c);
    s += n + 1;
  }
  putc('"', f);
}

static void put_time(FILE *f, int has, double t) {
  char v[32];
  fputs(has ? manifest_filter_number(v, sizeof v, t) : "null", f);
}

static void write_span(FILE *f, const manifest_row *r, const manifest_span *s) {
  char v[32];
  fprintf(f, "{\"row\": %lld, \"span\": %d, \"path\": ", (long long)r->row, s->index);
  put_string(f, r->path);
  fputs(", \"start\": ", f);
  put_time(f, s->has_start, s->start);
  fputs(", \"end\": ", f);
  put_time(f, s->has_end, s->end);
  fputs(", \"caption\": ", f);
  if (s->caption) put_string(f, s->caption);
  else fputs("null", f);
  fputs(", \"scores\": {", f);
  for (int i = 0; i < s->nscores; i++) {
    fputs(i ? ", " : "", f);
    put_string(f, s->scores[i].name);
    fprintf(f, ": %s", manifest_filter_number(v, sizeof v, s->scores[i].value));
  }
  fputs("}}\n", f);
}

// ---- reading -----------------------------------------------------------------------------

static void on_error(report *rp, const manifest_error *e) {
  char shown[TERM_ESCAPE_SIZE(1024)];
  fprintf(stderr, "error: %s\n", term_escape(shown, sizeof shown, e->message));
  tally_add(&rp->errors, e->reason, e->message);
  rp->nerrors++;
  rp->duplicates += !strcmp(e->reason, "duplicate");
  if (e->row != rp->last_error_row) rp->rows_with_errors++;
  rp->last_error_row = e->row;
}

static void on_row(report *rp, const manifest_row *r) {
  char msg[1024], v[32], shown[TERM_ESCAPE_SIZE(1024)];
  for (int k = 0; k < r->nspans; k++) {
    const manifest_span *s = &r->spans[k];
    manifest_filter_result fr;
    if (!manifest_filter_span(&rp->filter, s, &fr)) {
      rp->kept++;
      if (rp->out) write_span(rp->out, r, s);
      continue;
    }
    int n = snprintf(msg, sizeof msg, "%s: row %lld (line %lld), span %d", rp->file,
                     (long long)r->row, (long long)r->line, s->index);
    if (fr.score && n < (int)sizeof msg)
      n += snprintf(msg + n, sizeof msg - (size_t)n, ", column '%s'", fr.score);
    int missing = !strncmp(fr.reason, "missing", 7);
    if (n < (int)sizeof msg)
      snprintf(msg + n, sizeof msg - (size_t)n, ": %s%s%s", fr.reason, missing ? "" : " fails: ",
               missing ? "" : manifest_filter_number(v, sizeof v, fr.value));
    fprintf(stderr, "filtered: %s\n", term_escape(shown, sizeof shown, msg));
    tally_add(&rp->filtered, fr.reason, msg);
    rp->nfiltered++;
  }
}

static tsr_status read_all(manifest *m, report *rp) {
  for (;;) {
    const manifest_record *rec;
    tsr_status st = manifest_next(m, &rec);
    if (st || rec->kind == MANIFEST_EOF) return st;
    if (rec->kind == MANIFEST_ERROR) {
      rp->rows = rec->error.row;
      on_error(rp, &rec->error);
    } else {
      rp->rows = rec->row.row;
      on_row(rp, &rec->row);
    }
  }
}

static void print_summary(FILE *f, const manifest *m, const manifest_opts *o, const report *rp) {
  char shown[TERM_ESCAPE_SIZE(4096)], filter[4096];
  fprintf(f, "manifest %s: format %s, %s; relative paths under %s\n",
          term_escape(shown, sizeof shown, rp->file), manifest_preset_name(o->preset),
          manifest_syntax_name(manifest_syntax_of(m)), manifest_root(m));
  if (!manifest_filter_format(&rp->filter, filter, sizeof filter) && filter[0])
    fprintf(f, "filter: %s\n", term_escape(shown, sizeof shown, filter));
  fprintf(f, "rows: %lld (%lld with errors)\n", (long long)rp->rows,
          (long long)rp->rows_with_errors);
  fprintf(f, "spans: %lld kept, %lld filtered, %lld duplicates\n", (long long)rp->kept,
          (long long)rp->nfiltered, (long long)rp->duplicates);
  fprintf(f, "errors: %lld\n", (long long)rp->nerrors);
  tallies_print(f, &rp->filtered, "filtered by reason");
  tallies_print(f, &rp->errors, "errors by reason");
}

// ---- options -----------------------------------------------------------------------------

static tsr_status parse_option(int c, manifest_opts *o, report *rp, int *jsonl) {
  switch (c) {
  case 'f':
    if (manifest_preset_parse(optarg, &o->preset))
      return err_wrap(TSR_EINVAL, "--manifest-format: ");
    return TSR_OK;
  case 's':
    if (manifest_syntax_parse(optarg, &o->syntax))
      return err_wrap(TSR_EINVAL, "--manifest-syntax: ");
    return TSR_OK;
  case 'r': o->root = optarg; return TSR_OK;
  case 'p': o->path_column = optarg; return TSR_OK;
  case 'x': o->path_suffix = optarg; return TSR_OK;
  case 'w': return manifest_filter_add_where(&rp->filter, optarg);
  case 'm': return parse_double("--min-clip-seconds", optarg, 0, 1e9, &rp->filter.min_clip_seconds);
  case 'M': return parse_double("--max-clip-seconds", optarg, 0, 1e9, &rp->filter.max_clip_seconds);
  case 'R': return parse_int("--min-resolution", optarg, 0, 1 << 20, &rp->filter.min_resolution);
  case 'j': *jsonl = 1; return TSR_OK;
  default: return TSR_EINVAL;
  }
}

int cmd_manifest(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  static const struct option opts[] = {
      {"manifest-format", required_argument, 0, 'f'},
      {"manifest-syntax", required_argument, 0, 's'},
      {"root", required_argument, 0, 'r'},
      {"path-column", required_argument, 0, 'p'},
      {"path-suffix", required_argument, 0, 'x'},
      {"where", required_argument, 0, 'w'},
      {"min-clip-seconds", required_argument, 0, 'm'},
      {"max-clip-seconds", required_argument, 0, 'M'},
      {"min-resolution", required_argument, 0, 'R'},
      {"jsonl", no_argument, 0, 'j'},
      {0, 0, 0, 0}};
  manifest_opts o = {0};
  report *rp = calloc(1, sizeof *rp);
  int jsonl = 0, c;
  tsr_status st = rp ? TSR_OK : err_set(TSR_ENOMEM, "out of memory");
  cli_reset();
  while (!st && (c = cli_getopt(argc, argv, opts)) != -1) st = parse_option(c, &o, rp, &jsonl);
  if (!st) st = cli_positionals(argc, argv, 1, 1, "FILE");
  if (!st) st = manifest_filter_check(&rp->filter);
  if (st) {
    free(rp);
    return cli_usage_error("manifest");
  }
  rp->file = argv[optind];
  rp->last_error_row = -1;
  rp->out = jsonl ? stdout : NULL;
  manifest *m = NULL;
  st = manifest_open(&m, rp->file, &o);
  if (!st) st = read_all(m, rp);
  if (!st && jsonl && (fflush(stdout) || ferror(stdout)))
    st = err_set(TSR_EIO, "cannot write the spans to stdout");
  if (!st) print_summary(jsonl ? stderr : stdout, m, &o, rp);
  int rc = st ? cli_error("manifest") : rp->nerrors ? 2 : 0;
  manifest_close(&m);
  tallies_free(&rp->filtered);
  tallies_free(&rp->errors);
  free(rp);
  return rc;
}
