// tools/manifest_cli.h — the command-line options that say how to read a clip manifest and
// which spans to keep, the same for `tessera manifest` and `tessera ingest --manifest`.
#ifndef TESSERA_TOOLS_MANIFEST_CLI_H
#define TESSERA_TOOLS_MANIFEST_CLI_H

#include "core/err.h"
#include "ingest/manifest.h"
#include "ingest/manifest_filter.h"
#include "tools/opt.h"

// The options' rows of a command's table (tools/opt.h; ids MANIFEST_CLI_FIRST.. : above
// every command's own ids), at --help's width 21.
enum { MANIFEST_CLI_FIRST = 0x200 };
#define MANIFEST_CLI_OPTS                                                                   \
  OPT("manifest-format", "F", MANIFEST_CLI_FIRST + 0, NULL,                                 \
      "column names of: tessera, panda70m, openvid, opensora [tessera]"),                   \
  OPT("manifest-syntax", "S", MANIFEST_CLI_FIRST + 1, NULL,                                 \
      "csv, tsv or jsonl                       [from the file name]"),                      \
  OPT("root", "DIR", MANIFEST_CLI_FIRST + 2, NULL,                                          \
      "folder of relative paths              [the manifest's folder]"),                     \
  OPT("path-column", "COL", MANIFEST_CLI_FIRST + 3, NULL,                                   \
      "the column that names the source          [the format's]"),                          \
  OPT("path-suffix", "S", MANIFEST_CLI_FIRST + 4, NULL,                                     \
      "appended to every path                [panda70m: .mp4]"),                            \
  OPT("where", "EXPR", MANIFEST_CLI_FIRST + 5, NULL,                                        \
      "keep spans whose score passes, e.g. 'aesthetic_score >= 4.5'\n"                      \
      "(< <= > >= == !=); repeat: all must hold"),                                          \
  OPT("min-clip-seconds", "S", MANIFEST_CLI_FIRST + 6, NULL,                                \
      "drop spans shorter than S seconds"),                                                 \
  OPT("max-clip-seconds", "S", MANIFEST_CLI_FIRST + 7, NULL,                                \
      "drop spans longer than S seconds"),                                                  \
  OPT("min-resolution", "PX", MANIFEST_CLI_FIRST + 8, NULL,                                 \
      "drop sources whose short side is below PX")

// Takes option `code` (with arg) into o and f: *taken = 1; a code that is not one of them:
// *taken = 0. TSR_EINVAL naming the option for a bad value.
tsr_status manifest_cli_option(int code, const char *arg, manifest_opts *o, manifest_filter *f,
                               int *taken);

#endif
