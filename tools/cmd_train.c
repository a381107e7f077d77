// tools/cmd_train.c — `tessera train`: train the DiT on a token store (docs/train.md).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "model/train/options.h"
#include "model/train/train.h"
#include "model/train/plan_choice.h"
#include "tools/backend.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/datadir.h"
#include "tools/opt.h"
#include "tools/parse.h"
#include "tools/profile.h"
#include "tools/prompt_embed.h"
#include "tools/train_signal.h"
#include "tools/video.h"

enum { O_CONFIG = 1, O_DATA, O_OUT, O_STEPS, O_RESUME, O_INIT, O_SET, O_COST, O_GPN, O_PLAN,
       O_SKIP_BAD, O_BACKEND, O_COMM, O_PLANNERS, O_MEM_BYTES, O_DRY_RUN, O_PRECISION };

// The options of `tessera train`, in the order of its --help (tools/opt.h).
static const opt_def train_opts[] = {
    OPT("config", "FILE", O_CONFIG, NULL,
     "model and training config (INI: [model], [train]), or the\n"
     "name of a preset of configs/model/ (tiny, dit-b, wan2.1-t2v-1.3b)"),
    OPT("data", "STORE", O_DATA, NULL,
     "token store; its patch size and channels must match the config\n"
     "(or a DATASET.ini of several stores with weights or repeats:\n"
     "docs/train.md \"Dataset mixes\")"),
    OPT("out", "RUN", O_OUT, NULL, "run directory (created); checkpoints and metrics go here"),
    OPT("steps", "N", O_STEPS, NULL,
     "stop when N steps are done in total (default: train.steps);\n"
     "a fresh run's schedule then spans N steps, unless\n"
     "train.lr_schedule_steps or --set train.steps is given"),
    OPT_AS("--resume [RUN]", "resume", NULL, O_RESUME, NULL,
     "continue from RUN's newest checkpoint (same losses as a run\n"
     "that never stopped); without --config, the config, store,\n"
     "--steps and --set come from RUN/config.ini"),
    OPT("init", "CKPT", O_INIT, NULL,
     "start from CKPT's weights (fine-tuning: new optimizer, step 0);\n"
     "with lora.rank > 0 the frozen base, which --resume reloads from\n"
     "where the run found it (or from --init CKPT: the same weights)"),
    OPT("set", "KEY=VALUE", O_SET, NULL,
     "override a config key, e.g. --set train.lr=3e-4 (repeatable)"),
    OPT_PRECISION_ROW(O_PRECISION),
    OPT("cost", "FILE", O_COST, NULL,
     "cost model for the planner (from `tessera calibrate`;\n"
     "default: built-in CPU numbers of the tiny model)"),
    OPT("gpus-per-node", "G", O_GPN, NULL,
     "ranks per node, for the cost model (default: the ranks the\n"
     "launcher put on this node)"),
    OPT("mem-bytes", "B", O_MEM_BYTES, NULL,
     "memory per rank for the memory model (default: the GPU's free\n"
     "memory; on the CPU half the available host memory, shared by\n"
     "the ranks); train.mem_tokens = 0 takes the most tokens that fit"),
    OPT("planners", "P", O_PLANNERS, NULL,
     "under mpirun, P ranks plan the batches in turn and broadcast\n"
     "each plan (the same plan, bitwise); 0: every rank plans every\n"
     "batch itself (default 1)"),
    OPT("skip-bad-clips", NULL, O_SKIP_BAD, NULL,
     "leave out clips whose checksum fails (reported once each on\n"
     "stderr, counted as bad_clips in metrics.jsonl); default: stop\n"
     "naming the clip (`tessera index verify STORE` lists them all)"),
    OPT("plan", "KIND", O_PLAN, NULL,
     "plan each step with: auto (Dynamic-CP, or the better static\n"
     "plan when it is not faster; default), dynamic, static\n"
     "(static CP, balanced) or packing (static CP, packing only)"),
    OPT("backend", "B", O_BACKEND, NULL,
     BACKEND_OPTION_TEXT
     "(--set train.precision=bf16: bf16 activations, fp32\n"
     "weights and optimizer)"),
    OPT("comm", "C", O_COMM, NULL, COMM_OPTION_TEXT),
    OPT("dry-run", NULL, O_DRY_RUN, NULL,
     "check the config, store, memory and plans as the start does,\n"
     "print the effective config, the memory model, the first\n"
     "batches' plans and the predicted step time; train nothing,\n"
     "write nothing (--out optional)"),
    OPT_HELP_ROW,
    OPT_END};

void cmd_train_usage(FILE *f) {
  fprintf(f,
    "usage: tessera train --config FILE --data STORE --out RUN [--steps N] [--resume]\n"
    "       tessera train --resume RUN [--steps N] [--set KEY=VALUE ...]\n"
    "                     [--init CKPT] [--set section.key=value ...] [--cost FILE]\n"
    "                     [--skip-bad-clips]\n"
    "       mpirun -np N tessera train ...   (any N >= 1: Dynamic-CP over N ranks)\n\n"
    "Trains the diffusion transformer of FILE (configs/model/*.conf) on the clips of STORE\n"
    "(made by `tessera ingest`): global batches of train.global_batch clips from a seeded\n"
    "epoch sampler, each planned into microbatches of at most train.mem_tokens tokens by the\n"
    "Dynamic-CP scheduler, AdamW with warmup and cosine decay, gradient clipping, EMA.\n"
    "Under mpirun (or srun) every batch is planned for all ranks: each wave gives every rank\n"
    "a context-parallel group of its own size, clips are split across the group and attend\n"
    "across it (ring attention), gradients are summed over all ranks. Rank 0 writes\n"
    "RUN/metrics.jsonl and RUN/ckpt-STEP.safetensors. Details: docs/train.md, docs/dist.md.\n\n");
  opt_help(f, train_opts, 21);
  fprintf(f, "\n"
    "Validation and samples (config keys, docs/train.md): train.val_clips holds clips out\n"
    "of training and scores them every train.val_every steps at fixed noise levels\n"
    "(metrics.jsonl: val_loss, val_t, val_bucket); train.sample_every writes\n"
    "RUN/samples/sample-STEP.mp4 from the EMA weights (one clip per label, side by side);\n"
    "with train.sample_prompts = FILE (prompts one a line, embedded once with the store's\n"
    "encoder) one per prompt, sample-STEP-K.mp4.\n\n"
    "SIGINT, SIGTERM, SIGUSR1: finish the step, write its checkpoint, exit 75 (resume\n"
    "with --resume RUN); a second SIGINT aborts at once (docs/train.md).\n\n"
    "TESSERA_PROFILE=1: time every kernel entry (kernels/profile.h) and print the time per\n"
    "kernel class and entry of the whole run on stderr at the end (docs/kernels.md).\n\n"
    "example (a store made with ingest's defaults; its clips must fit train.mem_tokens,\n"
    "32,768 tokens in tiny.conf = a 70 s clip at 128x224: longer videos need --max-seconds):\n"
    "  tessera ingest videos/ --out store\n"
    "  tessera train --config configs/model/tiny.conf --data store --out run --steps 200 \\\n"
    "      --set train.val_clips=2 --set train.sample_every=100\n");
}

// Parses argv into *o (sets: the --set values, argc entries; p owns the ones made from an
// option with a key); TSR_EINVAL naming the problem otherwise.
static tsr_status parse_args(opt_parser *p, int argc, char **argv, train_options *o, char **sets,
                             const char **backend, const char **comm) {
  tsr_status st = TSR_OK;
  int c;
  opt_begin(p, train_opts, argc, argv);
  while (!st && (c = opt_next(p)) != -1) {
    char *v = p->val;
    switch (c) {
    case O_CONFIG: o->config_path = datadir_config(v); break;
    case O_DATA: o->data_dir = v; break;
    case O_OUT: o->run_dir = v; break;
    case O_STEPS: st = parse_i64("--steps", v, 1, INT64_MAX / 2, &o->stop_step); break;
    case O_RESUME: o->resume = 1; break;
    case O_SKIP_BAD: o->skip_bad_clips = 1; break;
    case O_DRY_RUN: o->dry_run = 1; break;
    case O_INIT: o->init_ckpt = v; break;
    case O_COST: o->cost_path = v; break;
    case O_PLAN:
      if (!strcmp(v, "auto")) o->plan_kind = TRAIN_PLAN_AUTO;
      else if (!strcmp(v, "dynamic")) o->plan_kind = TRAIN_PLAN_DYNAMIC;
      else if (!strcmp(v, "static")) o->plan_kind = TRAIN_PLAN_STATIC;
      else if (!strcmp(v, "packing")) o->plan_kind = TRAIN_PLAN_PACKING;
      else st = err_set(TSR_EINVAL, "--plan '%s': use auto, dynamic, static or packing", v);
      break;
    case O_GPN: st = parse_int("--gpus-per-node", v, 1, 1 << 20, &o->gpus_per_node); break;
    case O_PLANNERS: st = parse_int("--planners", v, 0, 1 << 24, &o->planners); break;
    case O_MEM_BYTES: st = parse_i64("--mem-bytes", v, 1 << 20, INT64_MAX / 2, &o->mem_bytes); break;
    case O_SET:
    case O_PRECISION: st = parse_config_set(p, sets, argc, &o->n_overrides); break;
    case O_BACKEND: *backend = v; break;
    case O_COMM: *comm = v; break;
    default: st = TSR_EINVAL;  // opt_next said why
    }
  }
  // `--resume RUN`: the run directory as the argument left (getopt moved it last); the
  // config, store and overrides then come from RUN/config.ini (model/train/run_config.h)
  if (!st) st = cli_positionals(argc, argv, 0, o->resume && !o->run_dir ? 1 : 0, "");
  if (!st && optind < argc) o->run_dir = argv[optind];
  const char *missing = o->resume ? (!o->run_dir ? "--out RUN (or --resume RUN)" : NULL)
                        : !o->config_path ? "--config FILE" : !o->data_dir ? "--data STORE"
                        : !o->run_dir && !o->dry_run ? "--out RUN" : NULL;
  if (!st && missing) st = err_set(TSR_EINVAL, "missing %s", missing);
  return st;  // --resume with --init: only for a LoRA run's base, which the config says (train.c)
}

// TESSERA_PROFILE=1: every table of the chosen device is wrapped in the project's timers
// (kernels/profile.h, a sync around each entry); prof[] owns the wrappers.
static tsr_status profile_wrap(backend_choice *bc, kernels_backend *prof[2]) {
  const char *env = getenv("TESSERA_PROFILE");
  if (!env || strcmp(env, "1")) return TSR_OK;
  for (int t = 0; t < 2; t++) {
    if (!bc->table[t]) continue;
    tsr_status st = kernels_profiled(bc->table[t], 1, &prof[t]);
    if (st) return st;
    bc->table[t] = prof[t];
  }
  return TSR_OK;
}

// The profile of the whole run (every table that was used) on stderr.
static void profile_report_run(kernels_backend *prof[2], double wall_s) {
  for (int t = 0; t < 2; t++) {
    profile_report r;
    if (!prof[t] || profile_collect(prof[t], 1, wall_s, &r) || r.kernels_s == 0.0) continue;
    profile_print(stderr, &r);
  }
}

int cmd_train(int argc, char **argv) {
  train_options o = {.planners = 1, .write_video = video_write_default,
                     .embed_prompts = prompt_embed_train, .plan_kind = -1};
  const char *backend = "auto", *comm = "auto";
  backend_choice bc;
  char **sets = calloc((size_t)argc + 1, sizeof *sets);
  if (!sets) return 1;
  opt_parser op;
  tsr_status st = parse_args(&op, argc, argv, &o, sets, &backend, &comm);
  int rc = st ? cli_usage_error("train") : 0;
  o.overrides = sets;
  if (!o.gpus_per_node) o.gpus_per_node = comm_local_size();
  if (!rc && backend_choose(backend, &bc)) rc = cli_usage_error("train");
  kernels_backend *prof[2] = {NULL, NULL};
  if (!rc && profile_wrap(&bc, prof)) rc = cli_error("train");
  o.backend = &bc;
  if (!rc && backend_comm_open(comm, &bc, o.gpus_per_node, &o.comm)) rc = cli_usage_error("train");
  double t0 = time_now();
  int stopped = 0;
  o.stop_signal = train_signal_install();
  o.stopped = &stopped;
  if (!rc && train_run(&o)) rc = cli_error("train");
  train_signal_restore();
  if (!rc && stopped) rc = TRAIN_EXIT_STOPPED;  // checkpoint written; docs/train.md
  if (!rc) profile_report_run(prof, time_now() - t0);
  comm_close(&o.comm);
  for (int t = 0; t < 2; t++) kernels_profiled_free(&prof[t]);
  opt_end(&op);
  free(sets);
  return rc;
}
