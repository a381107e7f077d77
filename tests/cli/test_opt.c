// tests/cli/test_opt.c — the option tables of tools/opt.h: --help's layout written out by
// hand for each kind of row, and the parse of argv against what getopt_long's rules give
// (rows found by flag whatever their id, shared ids, optional values, abbreviations,
// arguments left after the options) with tools/cli.h's messages for bad flags.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tools/opt.h"

enum { A_STEPS = 1, A_DRY, A_FPS, A_SIZE, A_JSON, A_PREC };

static const opt_def table[] = {
    OPT_HEADING("first:\n"),
    OPT("steps", "N", A_STEPS, NULL, "steps to run\nsecond line"),
    OPT("dry-run", NULL, A_DRY, NULL, "check only"),
    OPT("a-very-long-flag", "VALUE", A_DRY, NULL, "beside it"),
    OPT_AS("--fps F --size HxW", "fps", "F", A_FPS, NULL, "geometry\nof durations"),
    OPT("size", "HxW", A_SIZE, NULL, NULL),
    OPT_AS("--json", "json", "[FILE]", A_JSON, NULL, "print JSON"),
    OPT("precision", "P", A_PREC, "train.precision", "activations"),
    OPT_HELP_ROW,
    OPT_END};

// `text` written by opt_help(table, width).
static void help_text(int width, char *text, size_t cap) {
  FILE *f = fmemopen(text, cap, "w");
  opt_help(f, table, width);
  fclose(f);
}

// Parses the NULL-terminated args (args[0] the command): the ids returned in order (-1
// last, or 0 at an error), the values, and optind at the end.
static int parse(char **args, int *ids, const char **vals, opt_parser *p) {
  int argc = 0;
  while (args[argc]) argc++;
  opt_begin(p, table, argc, args);
  int n = 0, c;
  do {
    c = opt_next(p);
    vals[n] = c > 0 ? p->val : NULL;
    ids[n++] = c;
  } while (c > 0 && n < 16);
  return n;
}

int main(void) {
  char text[4096];
  help_text(12, text, sizeof text);
  // width 12: the help at column 14
  const char *want =
      "first:\n"
      "  --steps N   steps to run\n"
      "              second line\n"
      "  --dry-run   check only\n"
      "  --a-very-long-flag VALUE  beside it\n"
      "  --fps F --size HxW\n"
      "              geometry\n"
      "              of durations\n"
      "  --json      print JSON\n"
      "  --precision P  activations\n"
      "  -h, --help  this help\n";
  CHECK(!strcmp(text, want), "help:\n%s\nwanted:\n%s", text, want);

  int ids[16];
  const char *vals[16];
  opt_parser p;
  char *a1[] = {"cmd", "in.csv", "--steps", "5", "--size=4x4", "--dry", "--json", "--json=x",
                "--a-very-long-flag", "v", NULL};
  int n = parse(a1, ids, vals, &p);
  CHECK(n == 7 && ids[0] == A_STEPS && !strcmp(vals[0], "5") && ids[1] == A_SIZE &&
            !strcmp(vals[1], "4x4") && ids[2] == A_DRY && !vals[2] && ids[3] == A_JSON &&
            !vals[3] && ids[4] == A_JSON && !strcmp(vals[4], "x") && ids[5] == A_DRY &&
            !strcmp(vals[5], "v") && ids[6] == -1,
        "parse of a1: %d ids", n);
  // getopt_long moves the arguments after the options: in.csv is the last of the 10
  CHECK(optind == 9 && !strcmp(a1[optind], "in.csv"), "optind %d", optind);

  char *a2[] = {"cmd", "--stepz", "1", NULL};
  n = parse(a2, ids, vals, &p);
  CHECK(n == 1 && ids[0] == 0 && !strcmp(err_msg(), "unknown option '--stepz'"), "%s", err_msg());
  char *a3[] = {"cmd", "--steps", NULL};
  n = parse(a3, ids, vals, &p);
  CHECK(n == 1 && ids[0] == 0 && !strcmp(err_msg(), "option '--steps' needs a value"), "%s",
        err_msg());
  // -h, --help is listed only: commands take it before parsing (wants_help)
  char *a4[] = {"cmd", "--help", NULL};
  n = parse(a4, ids, vals, &p);
  CHECK(n == 1 && ids[0] == 0 && strstr(err_msg(), "unknown option '--help'"), "%s", err_msg());

  // a row with a key makes its --set; one without says so
  char *a5[] = {"cmd", "--precision", "bf16", "--steps", "2", NULL};
  int argc = 5;
  opt_begin(&p, table, argc, a5);
  CHECK(opt_next(&p) == A_PREC, "--precision");
  char *kv = opt_key_set(&p, p.val);
  CHECK(kv && !strcmp(kv, "train.precision=bf16"), "%s", kv ? kv : err_msg());
  CHECK(opt_next(&p) == A_STEPS && !opt_key_set(&p, "2") && strstr(err_msg(), "--steps"),
        "%s", err_msg());
  opt_end(&p);
  return check_done();
}
