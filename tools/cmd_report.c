// tools/cmd_report.c — `tessera report RUN`: the run's report page and curves, drawn by
// tools/report.py with matplotlib (docs/report.md).
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/opt.h"
#include "tools/parse.h"
#include "tools/pyscript.h"

enum { O_OUT = 1, O_PNG, O_VIDEOS };

// The options, in the order of --help (tools/opt.h).
static const opt_def report_opts[] = {
    OPT("out", "FILE", O_OUT, NULL, "the page                          [RUN/report.html]"),
    OPT("png", "FILE", O_PNG, NULL, "the curves                        [RUN/report.png]"),
    OPT("max-videos", "N", O_VIDEOS, NULL, "newest sample videos inlined      [8]"),
    OPT_END};

void cmd_report_usage(FILE *f) {
  fprintf(f,
          "usage: tessera report RUN [options]\n\n"
          "Writes RUN/report.html, one page that opens from disk (images and videos inlined):\n"
          "the curves of loss, validation loss per noise level and length bucket, learning\n"
          "rate, gradient norm and tokens/s (points and a smoothed line), the samples written\n"
          "during training (still frames per step, the MP4s playable), the memory report, the\n"
          "plan statistics and the config; and RUN/report.png, the curves alone. Reads what\n"
          "RUN holds: a run in progress, resumed or multi-rank too. Drawn by tools/report.py\n"
          "with Debian's python3-matplotlib (tools/setup.sh). docs/report.md.\n\n"
          "options:\n");
  opt_help(f, report_opts, 19);
}

int cmd_report(int argc, char **argv) {
  tsr_status st = TSR_OK;
  int c, nv;
  opt_parser op;
  opt_begin(&op, report_opts, argc, argv);
  while (!st && (c = opt_next(&op)) != -1)  // checked here, passed on as they are (below)
    st = !c ? TSR_EINVAL  // opt_next said why
         : c == O_VIDEOS ? parse_int("--max-videos", op.val, 0, 1 << 20, &nv) : TSR_OK;
  if (!st) st = cli_positionals(argc, argv, 1, 1, "RUN");
  if (st) return cli_usage_error("report");
  const char *run = argv[optind];
  struct stat sb;
  if (stat(run, &sb) || !S_ISDIR(sb.st_mode)) {
    err_set(TSR_EINVAL, "%s is not a run directory", run);
    return cli_error("report");
  }
  // report.py takes the same options: RUN, then the option words as they were given
  // (getopt has moved them before RUN: argv[1 .. optind))
  char **args = calloc((size_t)argc + 1, sizeof *args);
  if (!args) {
    err_set(TSR_ENOMEM, "out of memory");
    return cli_error("report");
  }
  args[0] = (char *)run;
  for (int i = 1; i < optind; i++) args[i] = argv[i];
  st = pyscript_run("report.py", args);
  free(args);
  return st ? cli_error("report") : 0;
}
