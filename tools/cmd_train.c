// tools/cmd_train.c — `tessera train`: train the DiT on a token store (docs/train.md).
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "model/train/train.h"
#include "tools/backend.h"
#include "tools/commands.h"
#include "tools/parse.h"

static void train_usage(FILE *f) {
  fprintf(f,
    "usage: tessera train --config FILE --data STORE --out RUN [--steps N] [--resume]\n"
    "                     [--init CKPT] [--set section.key=value ...] [--cost FILE]\n"
    "                     [--skip-bad-clips]\n"
    "       mpirun -np N tessera train ...   (N a power of two: Dynamic-CP over N ranks)\n\n"
    "Trains the diffusion transformer of FILE (configs/model/*.conf) on the clips of STORE\n"
    "(made by `tessera ingest`): global batches of train.global_batch clips from a seeded\n"
    "epoch sampler, each planned into microbatches of at most train.mem_tokens tokens by the\n"
    "Dynamic-CP scheduler, AdamW with warmup and cosine decay, gradient clipping, EMA.\n"
    "Under mpirun (or srun) every batch is planned for all ranks: each wave gives every rank\n"
    "a context-parallel group of its own size, clips are split across the group and attend\n"
    "across it (ring attention), gradients are summed over all ranks. Rank 0 writes\n"
    "RUN/metrics.jsonl and RUN/ckpt-STEP.safetensors. Details: docs/train.md, docs/dist.md.\n\n"
    "  --config FILE        model and training config (INI: [model], [train])\n"
    "  --data STORE         token store; its patch size and channels must match the config\n"
    "  --out RUN            run directory (created); checkpoints and metrics go here\n"
    "  --steps N            stop when N steps are done in total (default: train.steps);\n"
    "                       the schedule always spans train.steps\n"
    "  --resume             continue from RUN's newest checkpoint (same losses as a run\n"
    "                       that never stopped)\n"
    "  --init CKPT          start from CKPT's weights (fine-tuning: new optimizer, step 0)\n"
    "  --set KEY=VALUE      override a config key, e.g. --set train.lr=3e-4 (repeatable)\n"
    "  --cost FILE          cost model for the planner (from `tessera calibrate`;\n"
    "                       default: built-in CPU numbers of the tiny model)\n"
    "  --gpus-per-node G    ranks per node, for the cost model (default: the ranks the\n"
    "                       launcher put on this node)\n"
    "  --mem-bytes B        memory per rank for the memory model (default: the GPU's free\n"
    "                       memory; on the CPU half the available host memory, shared by\n"
    "                       the ranks); train.mem_tokens = 0 takes the most tokens that fit\n"
    "  --planners P         under mpirun, P ranks plan the batches in turn and broadcast\n"
    "                       each plan (the same plan, bitwise); 0: every rank plans every\n"
    "                       batch itself (default 1)\n"
    "  --skip-bad-clips     leave out clips whose checksum fails (reported once each on\n"
    "                       stderr, counted as bad_clips in metrics.jsonl); default: stop\n"
    "                       naming the clip (`tessera index verify STORE` lists them all)\n"
    "  --plan KIND          plan each step with: auto (Dynamic-CP, or the better static\n"
    "                       plan when it is not faster; default), dynamic, static\n"
    "                       (static CP, balanced) or packing (static CP, packing only)\n"
    BACKEND_OPTION_HELP
    "                       (--set train.precision=bf16: bf16 activations, fp32\n"
    "                       weights and optimizer)\n"
    COMM_OPTION_HELP
    "  -h, --help           this help\n\n"
    "example:\n"
    "  tessera train --config configs/model/tiny.conf --data out/demo/store --out out/run \\\n"
    "      --steps 200\n");
}

int cmd_train(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    train_usage(stdout);
    return 0;
  }
  enum { O_CONFIG = 1, O_DATA, O_OUT, O_STEPS, O_RESUME, O_INIT, O_SET, O_COST, O_GPN, O_PLAN,
         O_SKIP_BAD, O_BACKEND, O_COMM, O_PLANNERS, O_MEM_BYTES };
  static const struct option opts[] = {
      {"config", required_argument, 0, O_CONFIG}, {"data", required_argument, 0, O_DATA},
      {"out", required_argument, 0, O_OUT},       {"steps", required_argument, 0, O_STEPS},
      {"resume", no_argument, 0, O_RESUME},       {"init", required_argument, 0, O_INIT},
      {"set", required_argument, 0, O_SET},       {"cost", required_argument, 0, O_COST},
      {"gpus-per-node", required_argument, 0, O_GPN}, {"plan", required_argument, 0, O_PLAN},
      {"skip-bad-clips", no_argument, 0, O_SKIP_BAD}, {"backend", required_argument, 0, O_BACKEND},
      {"comm", required_argument, 0, O_COMM},
      {"planners", required_argument, 0, O_PLANNERS},
      {"mem-bytes", required_argument, 0, O_MEM_BYTES},
      {0, 0, 0, 0}};
  train_options o = {.planners = 1};
  const char *backend = "auto", *comm = "auto";
  backend_choice bc;
  // One exit path below: every error after this allocation sets `bad` and falls through
  // to the free (an early return leaked `sets`, e.g. on --plan bogus).
  char **sets = calloc((size_t)argc + 1, sizeof *sets);
  if (!sets) return 1;
  int bad = 0, c;
  optind = 1;
  opterr = 0;
  while (!bad && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case O_CONFIG: o.config_path = optarg; break;
    case O_DATA: o.data_dir = optarg; break;
    case O_OUT: o.run_dir = optarg; break;
    case O_STEPS:
      if (parse_i64("--steps", optarg, 1, INT64_MAX / 2, &o.stop_step)) {
        log_error("tessera train: %s", err_msg());
        bad = 1;
      }
      break;
    case O_RESUME: o.resume = 1; break;
    case O_SKIP_BAD: o.skip_bad_clips = 1; break;
    case O_INIT: o.init_ckpt = optarg; break;
    case O_COST: o.cost_path = optarg; break;
    case O_PLAN:
      if (!strcmp(optarg, "auto")) o.plan_kind = TRAIN_PLAN_AUTO;
      else if (!strcmp(optarg, "dynamic")) o.plan_kind = TRAIN_PLAN_DYNAMIC;
      else if (!strcmp(optarg, "static")) o.plan_kind = TRAIN_PLAN_STATIC;
      else if (!strcmp(optarg, "packing")) o.plan_kind = TRAIN_PLAN_PACKING;
      else {
        log_error("tessera train: --plan '%s': use auto, dynamic, static or packing", optarg);
        bad = 1;
      }
      break;
    case O_GPN:
      if (parse_int("--gpus-per-node", optarg, 1, 1 << 20, &o.gpus_per_node)) {
        log_error("tessera train: %s", err_msg());
        bad = 1;
      }
      break;
    case O_PLANNERS:
      if (parse_int("--planners", optarg, 0, 1 << 24, &o.planners)) {
        log_error("tessera train: %s", err_msg());
        bad = 1;
      }
      break;
    case O_MEM_BYTES:
      if (parse_i64("--mem-bytes", optarg, 1 << 20, INT64_MAX / 2, &o.mem_bytes)) {
        log_error("tessera train: %s", err_msg());
        bad = 1;
      }
      break;
    case O_SET: sets[o.n_overrides++] = optarg; break;
    case O_BACKEND: backend = optarg; break;
    case O_COMM: comm = optarg; break;
    default:
      log_error("tessera train: unknown option or missing value: '%s' (see --help)",
                argv[optind - 1]);
      bad = 1;
    }
  }
  if (!bad && optind < argc) {
    log_error("tessera train: unexpected argument '%s' (see --help)", argv[optind]);
    bad = 1;
  }
  const char *missing = !o.config_path ? "--config FILE" : !o.data_dir ? "--data STORE"
                        : !o.run_dir ? "--out RUN" : NULL;
  if (!bad && missing) {
    log_error("tessera train: missing %s (see --help)", missing);
    bad = 1;
  }
  if (!bad && o.resume && o.init_ckpt) {
    log_error("tessera train: --resume and --init exclude each other: --resume continues RUN, "
              "--init starts a new run from a checkpoint's weights");
    bad = 1;
  }
  o.overrides = sets;
  if (!o.gpus_per_node) o.gpus_per_node = comm_local_size();
  tsr_status r = bad ? TSR_EINVAL : backend_choose(backend, &bc);
  o.backend = &bc;
  if (!bad && !r) r = backend_comm_open(comm, &bc, &o.comm);
  if (!bad && !r) r = train_run(&o);
  if (!bad && r) log_error("tessera train: %s", err_msg());
  comm_close(&o.comm);
  free(sets);
  return r ? 1 : 0;
}
