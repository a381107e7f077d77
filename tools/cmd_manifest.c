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
#include "ingest/manifest_tally.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/manifest_cli.h"
#include "tools/opt.h"
#include "tools/parse.h"

enum { O_JSONL = 1 };

// The options, in the order of --help (tools/opt.h).
static const opt_def manifest_flags[] = {
    MANIFEST_CLI_OPTS,
    OPT("jsonl", NULL, O_JSONL, NULL,
        "write the kept spans to stdout, one JSON object a line:\n"
        "{\"row\", \"span\", \"path\", \"start\", \"end\", \"caption\",\n"
        "\"scores\"} (the summary then goes to stderr)"),
    OPT_END};

void cmd_manifest_usage(FILE *f) {
  fprintf(f,
          "usage: tessera manifest FILE [options]\n\n"
          "Reads a clip manifest (CSV, TSV or JSONL: a source video per row with one or more\n"
          "spans, captions and scores) as `tessera ingest` would, and prints what it found:\n"
          "rows, spans kept and filtered by reason, bad rows by reason with the first few.\n"
          "Each bad row and each filtered span is also one line on stderr naming the file,\n"
          "row, line and column. Formats, columns and filters: docs/manifest.md.\n\n"
          "options:\n");
  opt_help(f, manifest_flags, 21);
  fprintf(f, "\n"
          "exit status: 0 every row read; 2 some rows or spans had errors; 1 fatal (bad\n"
          "arguments, unreadable file, a column the format needs missing from the header)\n");
}

typedef struct {
  const char *file;
  FILE *out;  // the JSONL output, or NULL
  manifest_filter filter;
  manifest_tally filtered, errors;
  int64_t rows, rows_with_errors, last_error_row, kept, nfiltered, nerrors, duplicates;
} report;

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
  manifest_tally_add(&rp->errors, e->reason, e->message);
  rp->nerrors++;
  rp->duplicates += !strcmp(e->reason, "duplicate");
  if (e->row != rp->last_error_row) rp->rows_with_errors++;
  rp->last_error_row = e->row;
}

static void on_row(report *rp, const manifest_row *r) {
  char msg[1024], shown[TERM_ESCAPE_SIZE(1024)];
  for (int k = 0; k < r->nspans; k++) {
    const manifest_span *s = &r->spans[k];
    manifest_filter_result fr;
    if (!manifest_filter_span(&rp->filter, s, &fr)) {
      rp->kept++;
      if (rp->out) write_span(rp->out, r, s);
      continue;
    }
    manifest_tally_filtered_message(msg, sizeof msg, rp->file, r->row, r->line, s->index, &fr);
    fprintf(stderr, "filtered: %s\n", term_escape(shown, sizeof shown, msg));
    manifest_tally_add(&rp->filtered, fr.reason, msg);
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
  manifest_tally_print(f, &rp->filtered, "filtered by reason");
  manifest_tally_print(f, &rp->errors, "errors by reason");
}

// ---- options -----------------------------------------------------------------------------

static tsr_status parse_option(int c, manifest_opts *o, report *rp, int *jsonl) {
  int taken;
  tsr_status st = manifest_cli_option(c, optarg, o, &rp->filter, &taken);
  if (taken) return st;
  if (c == O_JSONL) {
    *jsonl = 1;
    return TSR_OK;
  }
  return TSR_EINVAL;
}

int cmd_manifest(int argc, char **argv) {
  manifest_opts o = {0};
  report *rp = calloc(1, sizeof *rp);
  int jsonl = 0, c;
  tsr_status st = rp ? TSR_OK : err_set(TSR_ENOMEM, "out of memory");
  opt_parser op;
  opt_begin(&op, manifest_flags, argc, argv);
  while (!st && (c = opt_next(&op)) != -1) st = parse_option(c, &o, rp, &jsonl);
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
  manifest_tally_free(&rp->filtered);
  manifest_tally_free(&rp->errors);
  free(rp);
  return rc;
}
