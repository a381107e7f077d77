// tools/cli.h — one voice for every command's errors:
//
//   error: tessera CMD: MESSAGE
//   hint: `tessera CMD --help` lists the options and arguments     (usage errors only)
//
// CMD is the command as typed ("train", "index export"). A usage error is a bad command
// line: an unknown option, an option without its value, a bad value, a missing required
// option or argument, an unexpected argument; any other failure (a missing store, a
// damaged checkpoint) is reported without the hint. MESSAGE is err_msg() (set by the
// parsers of tools/parse.h or the libraries), never with the prefix twice: a message
// that begins with the command's own name ("merge: input 1: ...") loses it.
// tests/cli/cli.sh drives every command through each kind of usage error.
#ifndef TESSERA_TOOLS_CLI_H
#define TESSERA_TOOLS_CLI_H

#include <getopt.h>

#include "core/err.h"

// Starts a new parse of argv (getopt's state is global).
void cli_reset(void);
// The next option of argv by the command's long options (no short ones): the option's
// `val` (> 0), -1 at the end, or 0 after err_set of "unknown option '--x'" or "option
// '--x' needs a value".
int cli_getopt(int argc, char **argv, const struct option *opts);
// The arguments left after the options must number between lo and hi: else err_set of
// "missing WHAT" or "unexpected argument 'x'" and TSR_EINVAL.
tsr_status cli_positionals(int argc, char **argv, int lo, int hi, const char *what);
// Prints err_msg() as a usage error of `tessera CMD`, with the hint; returns 1.
int cli_usage_error(const char *cmd);
// Prints err_msg() as a failure of `tessera CMD`; returns 1.
int cli_error(const char *cmd);

#endif
