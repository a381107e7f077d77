// tools/cli.c — command-line errors in one format (tools/cli.h).
#include "tools/cli.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"

void cli_reset(void) {
  optind = 1;
  opterr = 0;  // our messages name the option
}

int cli_getopt(int argc, char **argv, const struct option *opts) {
  // ":" first: an option without its value returns ':' rather than '?'
  int c = getopt_long(argc, argv, ":", opts, NULL);
  if (c == -1 || (c > 0 && c != '?' && c != ':')) return c;
  const char *arg = optind > 1 && optind <= argc ? argv[optind - 1] : "?";
  if (c == ':') err_set(TSR_EINVAL, "option '%s' needs a value", arg);
  else err_set(TSR_EINVAL, "unknown option '%s'", arg);
  return 0;
}

tsr_status cli_positionals(int argc, char **argv, int lo, int hi, const char *what) {
  int n = argc - optind;
  if (n < lo) return err_set(TSR_EINVAL, "missing %s", what);
  if (n > hi) return err_set(TSR_EINVAL, "unexpected argument '%s'", argv[optind + hi]);
  return TSR_OK;
}

// err_msg() without a leading "WORD: " where WORD is the command's last word: some
// libraries name themselves ("merge: input 1: ..."), which after "tessera index merge: "
// would say it twice.
static const char *message(const char *cmd) {
  const char *m = err_msg(), *w = strrchr(cmd, ' ');
  w = w ? w + 1 : cmd;
  size_t n = strlen(w);
  return !strncmp(m, w, n) && m[n] == ':' && m[n + 1] == ' ' ? m + n + 2 : m;
}

int cli_usage_error(const char *cmd) {
  log_error("tessera %s: %s", cmd, message(cmd));
  fprintf(stderr, "hint: `tessera %s --help` lists the options and arguments\n", cmd);
  return 1;
}

int cli_error(const char *cmd) {
  log_error("tessera %s: %s", cmd, message(cmd));
  return 1;
}
