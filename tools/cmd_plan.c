// tools/cmd_plan.c — `tessera plan`: what the Dynamic-CP scheduler would do with a
// dataset on a cluster, against static CP (docs/plan.md).
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "ingest/store.h"
#include "sched/lengths.h"
#include "sched/plan_json.h"
#include "sched/sched.h"
#include "tools/commands.h"
#include "tools/parse.h"

static void plan_usage(FILE *f) {
  fprintf(f,
    "usage: tessera plan (--lengths FILE[:W],... | --data STORE) --ranks N --mem-tokens M\n"
    "                    --cost FILE [options]\n\n"
    "Plans global batches with the Dynamic-CP scheduler and prints, per step and in total,\n"
    "the predicted step time of the dynamic plan, of static CP with packing only and with\n"
    "balanced packing, a lower bound, speedups, efficiency (bound / plan), CP sizes used,\n"
    "idle fraction of ranks and planner time. Details: docs/plan.md.\n\n"
    "clip lengths:\n"
    "  --lengths SPEC          CSV files with a 'tokens' or 'duration_s' column; a mix\n"
    "                          'a.csv:0.9,b.csv:0.1' draws clips from each file with those\n"
    "                          relative weights (default weight 1)\n"
    "  --data STORE            clip lengths of a token store (tessera ingest)\n"
    "  --fps F --size HxW --patch PTxPHxPW\n"
    "                          token geometry for durations:\n"
    "                          tokens = floor(d*F/PT) * (H/PH) * (W/PW)\n"
    "                          (F in [0.001, 1000], H, W <= 65536, PT <= 64, PH, PW <= 1024)\n"
    "  --tokens-per-second R   or tokens = floor(d*R), R in [1e-6, 1e9]\n"
    "  --max-seconds S         cap clip durations at S seconds (longer videos are cut)\n"
    "  --cap-tokens T          cap clip lengths at T tokens\n"
    "                          (a clip has at most 2^38 tokens, a duration at most 1e9 s)\n"
    "cluster and batch:\n"
    "  --ranks N               ranks (GPUs), a power of two <= 2^24 (required)\n"
    "  --gpus-per-node G       ranks per node, <= 2^24 (default 8)\n"
    "  --mem-tokens M          most tokens one rank may hold in a microbatch, <= 2^38\n"
    "                          (required)\n"
    "  --global-batch B        clips per step, <= 2^24 (default 256)\n"
    "  --steps S               steps to plan (default 1)\n"
    "  --seed X                sampler seed (default 0)\n"
    "  --max-clip-tokens T     longest clip the job may see; fixes the static CP size\n"
    "                          (default: the longest clip of the lengths after caps)\n"
    "cost and output:\n"
    "  --cost FILE             cost model, key = value (required; configs/cost/*.conf);\n"
    "                          every key within its range (docs/plan.md), a and b > 0\n"
    "  --json FILE             write plans and numbers as JSON\n"
    "  --waves                 print the groups of every wave of the plans\n"
    "  -h, --help              this help\n\n"
    "example:\n"
    "  tessera plan --lengths ucf101_clips.csv:0.97,youcook2_videos.csv:0.03 \\\n"
    "      --tokens-per-second 1800 --max-seconds 300 --ranks 64 --mem-tokens 65536 \\\n"
    "      --cost configs/cost/h100-dit1b.conf --steps 4 --json plan.json\n");
}

static void print_hist(FILE *f, const int64_t *hist, int nlev) {
  int any = 0;
  for (int l = 0; l < nlev; l++)
    if (hist[l]) {
      fprintf(f, "%s%d:%" PRId64, any ? " " : "", 1 << l, hist[l]);
      any = 1;
    }
}

static double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

static void print_waves(const sched_result *r, const int64_t *ids, const int64_t *tokens) {
  const plan *p = &r->plan;
  for (int w = 0; w < p->nwaves; w++) {
    printf("  wave %d:", w);
    for (int gi = p->wave_off[w]; gi < p->wave_off[w + 1]; gi++) {
      const plan_group *g = &p->groups[gi];
      if (!g->nclips) continue;
      printf(" [%d+%d:", g->first_rank, g->size);
      for (int k = 0; k < g->nclips; k++) {
        int c = p->clip_index[g->clip_off + k];
        printf(" %" PRId64 "(%" PRId64 ")", ids[c], tokens[c]);
      }
      printf("]");
    }
    printf("\n");
  }
}

int cmd_plan(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    plan_usage(stdout);
    return 0;
  }
  enum { O_LENGTHS = 256, O_DATA, O_FPS, O_SIZE, O_PATCH, O_TPS, O_MAXSEC, O_CAPTOK, O_RANKS,
         O_GPN, O_MEM, O_BATCH, O_STEPS, O_SEED, O_MAXCLIP, O_COST, O_JSON, O_WAVES };
  static const struct option opts[] = {
      {"lengths", required_argument, 0, O_LENGTHS}, {"data", required_argument, 0, O_DATA},
      {"fps", required_argument, 0, O_FPS},         {"size", required_argument, 0, O_SIZE},
      {"patch", required_argument, 0, O_PATCH},
      {"tokens-per-second", required_argument, 0, O_TPS},
      {"max-seconds", required_argument, 0, O_MAXSEC},
      {"cap-tokens", required_argument, 0, O_CAPTOK},
      {"ranks", required_argument, 0, O_RANKS},
      {"gpus-per-node", required_argument, 0, O_GPN},
      {"mem-tokens", required_argument, 0, O_MEM},
      {"global-batch", required_argument, 0, O_BATCH},
      {"steps", required_argument, 0, O_STEPS},     {"seed", required_argument, 0, O_SEED},
      {"max-clip-tokens", required_argument, 0, O_MAXCLIP},
      {"cost", required_argument, 0, O_COST},       {"json", required_argument, 0, O_JSON},
      {"waves", no_argument, 0, O_WAVES},           {0, 0, 0, 0}};
  const char *lengths_spec = NULL, *store = NULL, *cost_path = NULL, *json_path = NULL;
  lengths_opts lo = {0};
  int64_t ranks = 0, gpn = 8, mem = 0, batch = 256, steps = 1, seed = 0, maxclip = 0;
  int show_waves = 0, geometry_parts = 0;
  optind = 1;
  opterr = 0;
  int o;
  // Ranges: sched/cost.h (SCHED_MAX_*: 64-bit safe sizes) and sched/lengths.h.
  static const int size_hi[2] = {1 << 16, 1 << 16}, patch_hi[3] = {64, 1024, 1024};
  const int64_t maxtok = SCHED_MAX_TOKENS;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    tsr_status st = TSR_OK;
    int dims[3];
    switch (o) {
    case O_LENGTHS: lengths_spec = optarg; break;
    case O_DATA: store = optarg; break;
    case O_FPS: st = parse_double("--fps", optarg, 1e-3, 1e3, &lo.fps); geometry_parts++; break;
    case O_SIZE:
      if (parse_dims(optarg, "xX", 2, size_hi, dims))
        st = err_set(TSR_EINVAL, "--size: '%s' is not HxW, e.g. 480x848 (each in [1, %d])",
                     optarg, 1 << 16);
      lo.height = dims[0], lo.width = dims[1];
      geometry_parts++;
      break;
    case O_PATCH:
      if (parse_dims(optarg, "xX", 3, patch_hi, dims))
        st = err_set(TSR_EINVAL, "--patch: '%s' is not PTxPHxPW, e.g. 4x16x16 (PT <= 64, PH "
                     "and PW <= 1024)", optarg);
      lo.pt = dims[0], lo.ph = dims[1], lo.pw = dims[2];
      geometry_parts++;
      break;
    case O_TPS: st = parse_double("--tokens-per-second", optarg, 1e-6, 1e9, &lo.tokens_per_second); break;
    case O_MAXSEC: st = parse_double("--max-seconds", optarg, 1e-3, 1e9, &lo.max_seconds); break;
    case O_CAPTOK: st = parse_i64("--cap-tokens", optarg, 1, maxtok, &lo.cap_tokens); break;
    case O_RANKS: st = parse_i64("--ranks", optarg, 1, SCHED_MAX_RANKS, &ranks); break;
    case O_GPN: st = parse_i64("--gpus-per-node", optarg, 1, SCHED_MAX_RANKS, &gpn); break;
    case O_MEM: st = parse_i64("--mem-tokens", optarg, 1, maxtok, &mem); break;
    case O_BATCH: st = parse_i64("--global-batch", optarg, 1, SCHED_MAX_BATCH, &batch); break;
    case O_STEPS: st = parse_i64("--steps", optarg, 1, 1000000000, &steps); break;
    case O_SEED: st = parse_i64("--seed", optarg, 0, INT64_MAX, &seed); break;
    case O_MAXCLIP: st = parse_i64("--max-clip-tokens", optarg, 1, maxtok, &maxclip); break;
    case O_COST: cost_path = optarg; break;
    case O_JSON: json_path = optarg; break;
    case O_WAVES: show_waves = 1; break;
    default:
      fprintf(stderr, "tessera plan: unknown option or missing value: '%s' (see --help)\n",
              argv[optind - 1]);
      return 1;
    }
    if (st) {
      fprintf(stderr, "tessera plan: %s\n", err_msg());
      return 1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "tessera plan: unexpected argument '%s' (see --help)\n", argv[optind]);
    return 1;
  }
  const char *missing = !lengths_spec && !store ? "--lengths or --data"
                        : !ranks               ? "--ranks"
                        : !mem                 ? "--mem-tokens"
                        : !cost_path           ? "--cost"
                                               : NULL;
  if (missing) {
    fprintf(stderr, "tessera plan: %s is required (see --help)\n", missing);
    return 1;
  }
  if (lengths_spec && store) {
    fprintf(stderr, "tessera plan: give --lengths or --data, not both\n");
    return 1;
  }
  if (geometry_parts && geometry_parts != 3) {
    fprintf(stderr, "tessera plan: the token geometry needs all of --fps, --size, --patch\n");
    return 1;
  }

  sched_config cfg = {.cluster = {(int)ranks, (int)gpn, mem}, .max_clip_tokens = maxclip};
  lengths_set ls = {0};
  int64_t *ids = NULL, *tokens = NULL;
  sched_json *js = NULL;
  sched_result res = {0};
  plan_init(&res.plan, (int)ranks);
  int rc = 1;
  tsr_status st = cost_model_load(cost_path, &cfg.cost);
  if (!st && lengths_spec) st = lengths_load_mix(&ls, lengths_spec, &lo);
  if (!st && store) {
    int64_t *sid = NULL, *stok = NULL, sn = 0;
    st = store_clip_lengths(store, &sid, &stok, &sn);
    if (!st && sn == 0) st = err_set(TSR_EINVAL, "store %s holds no clips", store);
    if (!st) st = lengths_add(&ls, store, sid, stok, sn, 1.0, &lo);
    free(sid);
    free(stok);
  }
  if (!st && !cfg.max_clip_tokens) cfg.max_clip_tokens = lengths_max(&ls);
  if (!st) st = sched_config_check(&cfg);
  if (st) {
    fprintf(stderr, "tessera plan: %s\n", err_msg());
    goto done;
  }
  ids = malloc((size_t)batch * sizeof *ids);
  tokens = malloc((size_t)batch * sizeof *tokens);
  if (!ids || !tokens) {
    fprintf(stderr, "tessera plan: out of memory for a batch of %lld clips\n", (long long)batch);
    goto done;
  }
  if (json_path && (st = sched_json_begin(&js, &cfg))) {
    fprintf(stderr, "tessera plan: %s\n", err_msg());
    goto done;
  }
  int nlev = 0;
  while ((1 << nlev) <= cfg.cluster.ranks) nlev++;
  if (ls.capped || ls.skipped)
    log_info("plan: %lld clips capped, %lld rows shorter than one tubelet skipped",
             (long long)ls.capped, (long long)ls.skipped);
  printf("tessera plan: %lld clips from %d source(s); %d ranks (%d per node), %lld mem "
         "tokens, batch %lld, static CP %d (max clip %lld tokens), cost %s\n",
         (long long)ls.n, ls.nsources, cfg.cluster.ranks, cfg.cluster.gpus_per_node,
         (long long)mem, (long long)batch, cost_min_cp(&cfg.cluster, cfg.max_clip_tokens),
         (long long)cfg.max_clip_tokens, cost_path);
  printf("%-6s %10s %10s %10s %10s %6s %8s %8s %6s %6s %-15s %8s  %s\n", "step", "plan_s",
         "packing_s", "balanced_s", "bound_s", "eff", "x_pack", "x_bal", "idle", "waves",
         "used", "plan_ms", "CP size:clips");
  sched_totals tot = {0};
  // Batch s+1 is planned on a background thread while batch s is reported, the way the
  // trainer overlaps planning with training.
  sched_async *next = NULL;
  int64_t *nids = malloc((size_t)batch * sizeof *nids);
  int64_t *ntok = malloc((size_t)batch * sizeof *ntok);
  if (!nids || !ntok) {
    fprintf(stderr, "tessera plan: out of memory\n");
    free(nids);
    free(ntok);
    goto done;
  }
  st = lengths_sample(&ls, (uint64_t)seed, 0, (int)batch, nids, ntok);
  if (!st) st = sched_async_start(&next, &cfg, ntok, (int)batch);
  for (int64_t s = 0; !st && s < steps; s++) {
    int64_t *t = ids; ids = nids; nids = t;
    t = tokens; tokens = ntok; ntok = t;
    st = sched_async_wait(&next, &res);
    if (!st && s + 1 < steps) {
      st = lengths_sample(&ls, (uint64_t)seed, s + 1, (int)batch, nids, ntok);
      if (!st) st = sched_async_start(&next, &cfg, ntok, (int)batch);
    }
    if (st) break;
    int64_t hist[SCHED_MAX_LEVELS] = {0};
    plan_cp_histogram(&res.plan, hist);
    sched_totals_add(&tot, &res);
    printf("%-6lld %10.3f %10.3f %10.3f %10.3f %6.3f %7.3fx %7.3fx %5.1f%% %6d %-15s %8.2f  ",
           (long long)s, res.predicted_s, res.packing_only_s, res.static_balanced_s,
           res.lower_bound_s, ratio(res.lower_bound_s, res.predicted_s),
           ratio(res.packing_only_s, res.predicted_s),
           ratio(res.static_balanced_s, res.predicted_s), 100 * res.idle_frac,
           res.plan.nwaves, sched_used_name(res.used), res.plan_ms);
    print_hist(stdout, hist, nlev);
    printf("\n");
    if (show_waves) print_waves(&res, ids, tokens);
    if (js && (st = sched_json_add_step(js, (int)s, ids, tokens, (int)batch, &res))) break;
    sched_result_free(&res);
  }
  if (next) {  // an error left a planning in flight
    sched_result tmp;
    sched_async_wait(&next, &tmp);
    sched_result_free(&tmp);
  }
  free(nids);
  free(ntok);
  if (st) {
    fprintf(stderr, "tessera plan: %s\n", err_msg());
    goto done;
  }
  printf("%-6s %10.3f %10.3f %10.3f %10.3f %6.3f %7.3fx %7.3fx %5.1f%% %6s %-15s %8.2f  ",
         "total", tot.predicted_s, tot.packing_only_s, tot.static_balanced_s, tot.lower_bound_s,
         ratio(tot.lower_bound_s, tot.predicted_s), ratio(tot.packing_only_s, tot.predicted_s),
         ratio(tot.static_balanced_s, tot.predicted_s), 100 * ratio(tot.idle_s, tot.predicted_s),
         "", tot.used[SCHED_USED_DYNAMIC] == tot.steps ? "dynamic" : "mixed",
         tot.plan_ms / tot.steps);
  print_hist(stdout, tot.cp_hist, nlev);
  printf("\n");
  printf("summary: dynamic plan %.3f s/step, %.3fx over packing only, %.3fx over static "
         "balanced, efficiency %.3f (bound per issue formula: %.3f), planner %.2f ms/batch "
         "(max %.2f), fallback in %d of %d steps\n",
         tot.predicted_s / tot.steps, ratio(tot.packing_only_s, tot.predicted_s),
         ratio(tot.static_balanced_s, tot.predicted_s), ratio(tot.lower_bound_s, tot.predicted_s),
         ratio(tot.lower_bound_ref_s, tot.predicted_s), tot.plan_ms / tot.steps, tot.plan_ms_max,
         tot.steps - tot.used[SCHED_USED_DYNAMIC], tot.steps);
  if (js && (st = sched_json_write(js, &tot, json_path))) {
    fprintf(stderr, "tessera plan: %s\n", err_msg());
    goto done;
  }
  rc = 0;
done:
  sched_result_free(&res);
  sched_json_free(&js);
  lengths_free(&ls);
  free(ids);
  free(tokens);
  return rc;
}
