// tools/opt.h — one option table per command: each row names a flag, its value, its help
// text and the config key it sets, and both the parser (opt_next) and `--help` (opt_help)
// read that table, so a flag is written once. The man page (tools/make_man.sh), the bash
// completion (tools/tessera-completion.bash) and the docs check (tests/cli/docs_cli.sh)
// read `--help`, so they follow the table too.
//
// Parsing is getopt_long's (long options only, abbreviations, options and arguments in any
// order) through cli_getopt, so a bad command line gets tools/cli.h's messages: "unknown
// option '--x'", "option '--x' needs a value".
#ifndef TESSERA_TOOLS_OPT_H
#define TESSERA_TOOLS_OPT_H

#include <stdio.h>

#include "core/err.h"

typedef struct {
  const char *name;      // the flag without "--" ("steps"); NULL: a heading row, whose help
                         // `--help` prints as it is (blank lines, "options:")
  const char *arg;       // the value's name in `--help` ("N"); NULL: a flag without a value;
                         // in brackets ("[FILE]"): an optional value, --name=FILE
  int id;                // what opt_next returns for it (> 0; several rows may share one);
                         // 0: listed, not parsed (-h, --help: wants_help takes it first)
  const char *key;       // the config key the flag sets ("train.precision"), or NULL
  const char *help;      // its text, lines separated by '\n' (continuations indented under
                         // the first); NULL: parsed but not listed (an older spelling)
  const char *synopsis;  // the left column in `--help` when it is not "--name ARG" (a flag
                         // listed with its companions, "-h, --help"); NULL: "--name ARG"
} opt_def;

// Rows: OPT for a flag, OPT_AS for one listed under another left column, OPT_HEADING for
// text between the flags, OPT_HELP_ROW for "-h, --help"; OPT_END ends the table. At most
// OPT_MAX rows with a name.
#define OPT(name, arg, id, key, help) {(name), (arg), (id), (key), (help), NULL}
#define OPT_AS(synopsis, name, arg, id, key, help) {(name), (arg), (id), (key), (help), (synopsis)}
#define OPT_HEADING(text) {NULL, NULL, 0, NULL, (text), NULL}
#define OPT_HELP_ROW {"help", NULL, 0, NULL, "this help", "-h, --help"}
#define OPT_END {NULL, NULL, 0, NULL, NULL, NULL}
enum { OPT_MAX = 64 };

// The state of one parse of argv by one table.
typedef struct {
  const opt_def *defs;
  int argc;
  char **argv;
  const opt_def *row;  // the option opt_next returned last
  char *val;           // its value, in argv (NULL for a flag without one)
  char *set_buf[OPT_MAX];  // the "key=value" strings of opt_key_set (freed by opt_end)
  int n_set_buf;
} opt_parser;

// Starts a parse of argv (argv[0] the command) by `defs` (which outlives the parse).
void opt_begin(opt_parser *p, const opt_def *defs, int argc, char **argv);
// The next option: its row's id (p->row, p->val set), -1 when the options are done (the
// arguments left are argv[optind..argc)), or 0 after err_set naming the bad option.
int opt_next(opt_parser *p);
// "KEY=value" for the current row's config key, for the command's --set list: owned by p
// (valid until opt_end); NULL after err_set when out of memory or the row sets no key.
char *opt_key_set(opt_parser *p, const char *value);
// Frees what opt_key_set made.
void opt_end(opt_parser *p);

// Writes the table's help: each row "  LEFT" padded to `width` columns, then its help;
// continuation lines start at column width + 2. A LEFT of `width` or more: "--name ARG"
// followed by two spaces and the help, a synopsis on a line of its own with the help below.
void opt_help(FILE *f, const opt_def *defs, int width);

#endif
