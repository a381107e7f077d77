// tools/cmd_calibrate.c — `tessera calibrate`: fit the cost model to this machine.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/log.h"
#include "model/train/calibrate.h"
#include "model/config.h"
#include "tools/backend.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/datadir.h"
#include "tools/opt.h"
#include "tools/parse.h"

enum { O_CONFIG = 1, O_SET, O_OUT, O_BASE, O_MIN, O_MAX, O_POINTS, O_REPS, O_BACKEND, O_COMM,
       O_PRECISION };

// The options of `tessera calibrate`, in the order of its --help (tools/opt.h).
static const opt_def calibrate_flags[] = {
    OPT("config", "FILE", O_CONFIG, NULL,
        "model config, or a preset name (configs/model/)    [required]"),
    OPT("set", "KEY=VALUE", O_SET, NULL, "override a config key (section.key=value), repeatable"),
    OPT_PRECISION_ROW(O_PRECISION),
    OPT("out", "FILE", O_OUT, NULL, "cost file to write                                 [required]"),
    OPT("base", "FILE", O_BASE, NULL,
        "cost file for what cannot be measured here\n"
        "[configs/cost/h100-dit1b.conf]"),
    OPT("min-tokens", "N", O_MIN, NULL, "shortest clip timed                                [64]"),
    OPT("max-tokens", "N", O_MAX, NULL, "longest clip timed                                 [2048]"),
    OPT("points", "N", O_POINTS, NULL, "clip lengths on a geometric grid                   [6]"),
    OPT("reps", "N", O_REPS, NULL, "timed runs per length (median)                     [3]"),
    OPT("backend", "B", O_BACKEND, NULL,
        "compute device: cpu, cuda or auto                  [auto]\n"
        "(--set train.precision=bf16 times bf16 activations)"),
    OPT("comm", "C", O_COMM, NULL,
        "ranks' communication: mpi, nccl or auto            [auto]\n"
        "(as `tessera train --comm`: time what training will use)"),
    OPT_END};

void cmd_calibrate_usage(FILE *f) {
  fprintf(f,
          "usage: tessera calibrate --config FILE --out COST.conf [options]\n\n"
          "Times forward + backward of the configured model on this machine's backend for\n"
          "clips of --min-tokens to --max-tokens tokens, fits the cost model's a, b and ovh\n"
          "(t = ovh + a L + b L^2), derives kv from the model, and under mpirun measures\n"
          "the ring exchange (lat, bw_intra) and the gradient all-reduce. The rest comes\n"
          "from --base. The result is a cost file for `tessera plan --cost` and the trainer.\n\n"
          "options:\n");
  opt_help(f, calibrate_flags, 19);
}

int cmd_calibrate(int argc, char **argv) {
  char default_base[4096];
  const char *config = NULL, *out = NULL, *base = default_base;
  char *sets[64];
  int nsets = 0;
  calibrate_opts o = {.min_tokens = 64, .max_tokens = 2048, .points = 6, .reps = 3};
  const char *backend = "auto", *comm = "auto";
  backend_choice bc;
  tsr_status st = datadir_path("configs/cost/h100-dit1b.conf", default_base, sizeof default_base);
  int c;
  opt_parser op;
  opt_begin(&op, calibrate_flags, argc, argv);
  while (!st && (c = opt_next(&op)) != -1) {
    char *v = op.val;
    switch (c) {
    case O_CONFIG: config = datadir_config(v); break;
    case O_SET:
    case O_PRECISION: st = parse_config_set(&op, sets, 64, &nsets); break;
    case O_OUT: out = v; break;
    case O_BASE: base = v; break;
    case O_MIN: st = parse_i64("--min-tokens", v, 1, 1 << 24, &o.min_tokens); break;
    case O_MAX: st = parse_i64("--max-tokens", v, 2, 1 << 24, &o.max_tokens); break;
    case O_POINTS: st = parse_int("--points", v, 3, 64, &o.points); break;
    case O_REPS: st = parse_int("--reps", v, 1, 1000, &o.reps); break;
    case O_BACKEND: backend = v; break;
    case O_COMM: comm = v; break;
    default: st = TSR_EINVAL;  // opt_next said why
    }
  }
  if (!st) st = cli_positionals(argc, argv, 0, 0, "");
  if (!st && (!config || !out)) st = err_set(TSR_EINVAL, "missing %s", !config ? "--config FILE" : "--out FILE");
  if (st) return opt_end(&op), cli_usage_error("calibrate");
  dit_config mc;
  train_config tc;
  cost_model bm;
  char *defaults = NULL;
  if (!st) st = config_load(config, sets, nsets, &mc, &tc, &defaults);
  if (!st) st = config_validate(&mc, &tc);
  if (!st) st = cost_model_load(base, &bm);
  if (!st) st = backend_choose(backend, &bc);
  o.backend = &bc;
  if (!st) st = backend_comm_open(comm, &bc, 0, &o.comm);  // makes the group set
  if (!st && defaults && comm_rank() == 0)
    log_info("config: %d keys at their defaults (docs/config.md)", config_list_count(defaults));
  if (!st && comm_rank() == 0)
    log_info("calibrate: backend %s, precision %s, comm %s",
             bc.table[tc.precision] ? bc.table[tc.precision]->name : bc.device,
             config_precision_name(tc.precision), o.comm->name);
  free(defaults);
  opt_end(&op);
  // One exit path (end:), so an error added later cannot skip a cleanup.
  calibrate_point pts[64];
  calibrate_result res;
  if (!st) st = calibrate_run(&mc, &tc, &o, &bm, pts, &res);
  if (st || comm_rank() != 0) goto end;
  printf("%10s %12s %12s %8s\n", "tokens", "measured_s", "fitted_s", "err");
  for (int i = 0; i < o.points; i++)
    printf("%10lld %12.5f %12.5f %7.1f%%\n", (long long)pts[i].tokens, pts[i].measured_s,
           pts[i].fitted_s, 100 * (pts[i].fitted_s - pts[i].measured_s) / pts[i].measured_s);
  char comment[2 * 4096 + 256];  // two paths and the numbers
  snprintf(comment, sizeof comment, "config %s, %d rank(s), clips of %lld..%lld tokens; base %s",
           config, comm_size(), (long long)o.min_tokens, (long long)o.max_tokens, base);
  if ((st = calibrate_write(out, &res, comment))) goto end;
  printf("calibrate: a = %.4g s/token, b = %.4g s/token^2, ovh = %.4g s, kv = %.4g B/token, "
         "fit within %.1f%%; wrote %s\n",
         res.cost.a, res.cost.b, res.cost.ovh, res.cost.kv, 100 * res.max_rel_err, out);
end:
  comm_close(&o.comm);
  return st ? cli_error("calibrate") : 0;
}
