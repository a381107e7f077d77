// tools/manifest_cli.h — the command-line options that say how to read a clip manifest and
// which spans to keep, the same for `tessera manifest` and `tessera ingest --manifest`.
#ifndef TESSERA_TOOLS_MANIFEST_CLI_H
#define TESSERA_TOOLS_MANIFEST_CLI_H

#include <getopt.h>

#include "core/err.h"
#include "ingest/manifest.h"
#include "ingest/manifest_filter.h"

// getopt_long entries of the options (codes MANIFEST_CLI_FIRST.. : above every command's
// own codes); put them in a command's table.
enum { MANIFEST_CLI_FIRST = 0x200 };
#define MANIFEST_CLI_OPTIONS                                                      \
  {"manifest-format", required_argument, 0, MANIFEST_CLI_FIRST + 0},              \
  {"manifest-syntax", required_argument, 0, MANIFEST_CLI_FIRST + 1},              \
  {"root", required_argument, 0, MANIFEST_CLI_FIRST + 2},                         \
  {"path-column", required_argument, 0, MANIFEST_CLI_FIRST + 3},                  \
  {"path-suffix", required_argument, 0, MANIFEST_CLI_FIRST + 4},                  \
  {"where", required_argument, 0, MANIFEST_CLI_FIRST + 5},                        \
  {"min-clip-seconds", required_argument, 0, MANIFEST_CLI_FIRST + 6},             \
  {"max-clip-seconds", required_argument, 0, MANIFEST_CLI_FIRST + 7},             \
  {"min-resolution", required_argument, 0, MANIFEST_CLI_FIRST + 8}

// Their lines of a usage text.
extern const char manifest_cli_help[];

// Takes option `code` (with arg) into o and f: *taken = 1; a code that is not one of them:
// *taken = 0. TSR_EINVAL naming the option for a bad value.
tsr_status manifest_cli_option(int code, const char *arg, manifest_opts *o, manifest_filter *f,
                               int *taken);

#endif
