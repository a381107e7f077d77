// tools/tessera.c — the `tessera` command line: dispatch to subcommands.
#ifdef TESSERA_HAVE_MEDIA
#include <libavutil/log.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/log.h"
#include "kernels/kernels.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/datadir.h"

typedef struct {
  const char *name;
  int (*run)(int argc, char **argv);
  void (*usage)(FILE *f);  // its --help; NULL: run prints it (index: per subcommand)
  const char *summary;
} command;

static const command commands[] = {
    {"ingest", cmd_ingest, cmd_ingest_usage,
     "decode videos into tubelet tokens: shards + SQLite index"},
    {"index", cmd_index, NULL,
     "inspect a store: stats, list clips, verify, export a clip to MP4, merge, recover"},
    {"manifest", cmd_manifest, cmd_manifest_usage,
     "read a clip manifest (CSV, TSV, JSONL): rows, spans, filters, errors"},
    {"plan", cmd_plan, cmd_plan_usage,
     "Dynamic-CP plans for a dataset on a cluster, against static CP"},
    {"train", cmd_train, cmd_train_usage,
     "train the diffusion transformer on a store (checkpoints, metrics)"},
    {"sample", cmd_sample, cmd_sample_usage,
     "generate a video from a checkpoint (Euler sampler, MP4)"},
    {"calibrate", cmd_calibrate, cmd_calibrate_usage,
     "fit the scheduler's cost model to this machine's kernel times"},
    {"convert", cmd_convert, cmd_convert_usage,
     "Wan transformer checkpoints from and to diffusers' folder"},
    {"report", cmd_report, cmd_report_usage,
     "a run's report: curves, samples, memory, plans, config (HTML, PNG)"},
};
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

int wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "tessera — train video diffusion transformers on clips of seconds to minutes\n\n"
          "usage: tessera <command> [options]   (tessera <command> --help for details)\n\n"
          "commands:\n");
  for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "  %-8s %s\n", "help", "this message (tessera help CMD: CMD's options)");
  fprintf(f, "\noptions:\n  --version  the version and what this build holds (backends, media)\n"
             "  -h, --help this message\n");
}

// `tessera --version`: the version and the parts this binary was built with.
static void version(void) {
  const kernels_backend *all[16];
  int n = kernels_backends(all, 16);
  printf("tessera %s\nbackends:", TESSERA_VERSION);
  for (int i = 0; i < n && i < 16; i++) printf("%s %s", i ? "," : "", all[i]->name);
  // A backend that is built in but cannot be used here is named too, with why: without
  // it a CUDA build on a machine whose GPU cannot be opened reads like a CPU-only build.
  char why[256];
  if (kernels_backend_unusable("cuda", why, sizeof why)) printf(", cuda (not usable here: %s)", why);
#ifdef TESSERA_HAVE_MEDIA
  printf("\nmedia: FFmpeg (ingest, index export, MP4 samples)\n");
#else
  printf("\nmedia: none (built without FFmpeg: no ingest or export; samples as Y4M)\n");
#endif
  printf("data: %s (presets, cost files, scripts)\n", datadir_root());
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--version")) {
    version();
    return 0;
  }
  if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") ||
      !strcmp(argv[1], "-h")) {
    if (argc >= 3) {  // tessera help <cmd> == tessera <cmd> --help
      for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[2], commands[i].name)) {
          if (commands[i].usage) {
            commands[i].usage(stdout);
            return 0;
          }
          char *hargv[] = {argv[2], "--help", NULL};
          return commands[i].run(2, hargv);
        }
    }
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 1 : 0;
  }
  for (int i = 0; i < NCOMMANDS; i++) {
    if (strcmp(argv[1], commands[i].name)) continue;
    if (commands[i].usage && wants_help(argc - 1, argv + 1)) {
      commands[i].usage(stdout);
      return 0;
    }
    // Media damage and encoder state are reported by tessera itself (index, summary);
    // libav's own chatter would bury the progress line. TESSERA_AV_LOG=1 shows it.
#ifdef TESSERA_HAVE_MEDIA
    if (!getenv("TESSERA_AV_LOG")) av_log_set_level(AV_LOG_FATAL);
#endif
    if (comm_init(&argc, &argv)) {
      log_error("%s", err_msg());
      return 1;
    }
    log_set_rank(comm_rank(), comm_size());
    // Several ranks on one node share its cores: give each its share of CPU-backend
    // threads unless the user chose (OMP_NUM_THREADS), so ranks do not oversubscribe.
    if (comm_size() > 1 && !getenv("OMP_NUM_THREADS")) kernels_cpu_set_threads(comm_local_cores());
    int rc = commands[i].run(argc - 1, argv + 1);
    // A fatal error on one rank of a multi-rank job: stop every rank now rather than
    // leave the others waiting in a collective (mpirun then names this rank).
    if (rc == 1 && comm_size() > 1) {
      log_error("rank %d stopped with an error; aborting the job", comm_rank());
      comm_abort(1);
    }
    comm_finalize();
    return rc;
  }
  log_error("tessera: unknown command '%s'", argv[1]);
  fprintf(stderr, "hint: `tessera --help` lists the commands\n");
  return 1;
}
