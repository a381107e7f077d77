// tools/cmd_report.c — `tessera report RUN`: the run's report page and curves, drawn by
// tools/report.py with matplotlib (docs/report.md).
#include <getopt.h>
#include <stdio.h>
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
  const char *out = NULL, *png = NULL, *videos = NULL;
  tsr_status st = TSR_OK;
  int c, nv;
  opt_parser op;
  opt_begin(&op, report_opts, argc, argv);
  while (!st && (c = opt_next(&op)) != -1) {
    switch (c) {
    case O_OUT: out = optarg; break;
    case O_PNG: png = optarg; break;
    case O_VIDEOS:
      videos = optarg;
      st = parse_int("--max-videos", optarg, 0, 1 << 20, &nv);
      break;
    default: st = TSR_EINVAL;  // opt_next said why
    }
  }
  if (!st) st = cli_positionals(argc, argv, 1, 1, "RUN");
  if (st) return cli_usage_error("report");
  const char *run = argv[optind];
  struct stat sb;
  if (stat(run, &sb) || !S_ISDIR(sb.st_mode)) {
    err_set(TSR_EINVAL, "%s is not a run directory", run);
    return cli_error("report");
  }
  char *args[9];
  int n = 0;
  args[n++] = (char *)run;
  if (out) args[n++] = "--out", args[n++] = (char *)out;
  if (png) args[n++] = "--png", args[n++] = (char *)png;
  if (videos) args[n++] = "--max-videos", args[n++] = (char *)videos;
  args[n] = NULL;
  return pyscript_run("report.py", args) ? cli_error("report") : 0;
}
