// tools/opt.c — the table-driven parser and help of tools/opt.h.
#include "tools/opt.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

void opt_begin(opt_parser *p, const opt_def *defs, int argc, char **argv) {
  *p = (opt_parser){.defs = defs, .argc = argc, .argv = argv};
  cli_reset();
}

int opt_next(opt_parser *p) {
  // getopt_long's table from ours; its val is the row's index + 1, so a row is found again
  // whatever its id (ids may repeat)
  struct option lo[OPT_MAX + 1];
  int n = 0;
  for (int i = 0; p->defs[i].name || p->defs[i].help; i++) {
    if (!p->defs[i].name || !p->defs[i].id) continue;
    if (n == OPT_MAX) return err_set(TSR_EINVAL, "too many options in one table"), 0;
    const char *arg = p->defs[i].arg;
    int has = !arg ? no_argument : arg[0] == '[' ? optional_argument : required_argument;
    lo[n++] = (struct option){p->defs[i].name, has, NULL, i + 1};
  }
  lo[n] = (struct option){0, 0, 0, 0};
  int c = cli_getopt(p->argc, p->argv, lo);
  if (c <= 0) return c;  // -1 done; 0: cli_getopt said why
  p->row = &p->defs[c - 1];
  p->val = p->row->arg ? optarg : NULL;
  return p->row->id;
}

char *opt_key_set(opt_parser *p, const char *value) {
  if (!p->row || !p->row->key)
    return err_set(TSR_EINVAL, "option '--%s' sets no config key", p->row ? p->row->name : "?"),
           NULL;
  if (p->n_set_buf == OPT_MAX) return err_set(TSR_EINVAL, "too many config options"), NULL;
  size_t len = strlen(p->row->key) + strlen(value) + 2;
  char *s = malloc(len);
  if (!s) return err_set(TSR_ENOMEM, "out of memory"), NULL;
  snprintf(s, len, "%s=%s", p->row->key, value);
  return p->set_buf[p->n_set_buf++] = s;
}

void opt_end(opt_parser *p) {
  for (int i = 0; i < p->n_set_buf; i++) free(p->set_buf[i]);
  p->n_set_buf = 0;
}

// Writes text's lines, the first after what the caller wrote, the others from column `col`.
static void help_lines(FILE *f, const char *text, int col) {
  for (const char *s = text;;) {
    size_t len = strcspn(s, "\n");
    fprintf(f, "%.*s\n", (int)len, s);
    if (!s[len] || !s[len + 1]) break;
    s += len + 1;
    fprintf(f, "%*s", col, "");
  }
}

void opt_help(FILE *f, const opt_def *defs, int width) {
  for (int i = 0; defs[i].name || defs[i].help; i++) {
    const opt_def *d = &defs[i];
    if (!d->help) continue;
    if (!d->name) {  // a heading, as it is
      fputs(d->help, f);
      continue;
    }
    char left[128];
    if (d->synopsis) snprintf(left, sizeof left, "%s", d->synopsis);
    else snprintf(left, sizeof left, "--%s%s%s", d->name, d->arg ? " " : "", d->arg ? d->arg : "");
    if ((int)strlen(left) < width) fprintf(f, "  %-*s", width, left);
    else if (!d->synopsis) fprintf(f, "  %s  ", left);  // one long flag: its help beside it
    else fprintf(f, "  %s\n%*s", left, width + 2, "");  // a flag with companions: below
    help_lines(f, d->help, width + 2);
  }
}
