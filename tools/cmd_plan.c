// tools/cmd_plan.c — `tessera plan`: what the Dynamic-CP scheduler would do with a
// dataset on a cluster, against static CP (docs/plan.md).
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "store/store.h"
#include "model/config.h"
#include "model/train/memory.h"
#include "model/train/zero_cost.h"
#include "sched/lengths.h"
#include "sched/plan_json.h"
#include "sched/placement.h"
#include "sched/plan_timeline.h"
#include "sched/sched.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/datadir.h"
#include "tools/opt.h"
#include "tools/parse.h"
#include "tools/pyscript.h"

enum { O_LENGTHS = 256, O_DATA, O_FPS, O_SIZE, O_PATCH, O_TPS, O_MAXSEC, O_CAPTOK, O_RANKS,
       O_GPN, O_MEM, O_BATCH, O_STEPS, O_SEED, O_MAXCLIP, O_COST, O_JSON, O_WAVES, O_CONFIG,
       O_SET, O_MEMBYTES, O_TIMELINE, O_CPMODE, O_HEADS, O_FRAMEGRID, O_OUT,
       O_PLACEMENT };

// The options, in the order of --help (tools/opt.h).
static const opt_def plan_opts[] = {
    OPT_HEADING("clip lengths:\n"),
    OPT("lengths", "SPEC", O_LENGTHS, NULL,
        "CSV files with a 'tokens' or 'duration_s' column; a mix\n"
        "'a.csv:0.9,b.csv:0.1' draws clips from each file with those\n"
        "relative weights (default weight 1)"),
    OPT("data", "STORE", O_DATA, NULL, "clip lengths of a token store (tessera ingest)"),
    OPT_AS("--fps F --size HxW --patch PTxPHxPW", "fps", "F", O_FPS, NULL,
        "token geometry for durations:\n"
        "tokens = floor(d*F/PT) * (H/PH) * (W/PW)\n"
        "(F in [0.001, 1000], H, W <= 65536, PT <= 64, PH, PW <= 1024)"),
    OPT("size", "HxW", O_SIZE, NULL, NULL),         // listed with --fps
    OPT("patch", "PTxPHxPW", O_PATCH, NULL, NULL),  // listed with --fps
    OPT("tokens-per-second", "R", O_TPS, NULL, "or tokens = floor(d*R), R in [1e-6, 1e9]"),
    OPT("max-seconds", "S", O_MAXSEC, NULL,
        "cap clip durations at S seconds (longer videos are cut)"),
    OPT("cap-tokens", "T", O_CAPTOK, NULL,
        "cap clip lengths at T tokens\n"
        "(a clip has at most 2^38 tokens, a duration at most 1e9 s)"),
    OPT_HEADING("cluster and batch:\n"),
    OPT("ranks", "N", O_RANKS, NULL, "ranks (GPUs), any N <= 2^24 (required)"),
    OPT("gpus-per-node", "G", O_GPN, NULL, "ranks per node, <= 2^24 (default 8)"),
    OPT("mem-tokens", "M", O_MEM, NULL, "most tokens one rank may hold in a microbatch, <= 2^38"),
    OPT_AS("--config FILE --mem-bytes B [--set KEY=VALUE ...]", "config", "FILE", O_CONFIG, NULL,
        "or M from the trainer's memory model: the most tokens per\n"
        "rank for which the model of FILE (a file or a preset name;\n"
        "train.precision, model.recompute, train.global_batch), its\n"
        "optimizer, inputs, ring buffers of every CP size <= N and a\n"
        "GPU's 1 GiB reserve fit B bytes per GPU"),
    OPT("mem-bytes", "B", O_MEMBYTES, NULL, NULL),  // listed with --config
    OPT("set", "KEY=VALUE", O_SET, NULL, NULL),     // listed with --config
    OPT("global-batch", "B", O_BATCH, NULL, "clips per step, <= 2^24 (default 256)"),
    OPT("steps", "S", O_STEPS, NULL, "steps to plan (default 1)"),
    OPT("seed", "X", O_SEED, NULL, "sampler seed (default 0)"),
    OPT("max-clip-tokens", "T", O_MAXCLIP, NULL,
        "longest clip the job may see; fixes the static CP size\n"
        "(default: the longest clip of the lengths after caps)"),
    OPT("cp-mode", "M", O_CPMODE, NULL,
        "how a CP group splits attention: auto (the planner picks\n"
        "ring, Ulysses or hybrid per group; default, or --config's\n"
        "train.cp_mode), ring, ulysses, hybrid (Ulysses inside a node,\n"
        "ring across nodes)"),
    OPT("heads", "H", O_HEADS, NULL,
        "attention heads Ulysses splits (default: --config's\n"
        "model.heads, else an even split), H in [1, 1024]"),
    OPT("frame-grid", "RxC", O_FRAMEGRID, NULL,
        "tokens of a latent frame, rows x columns, for --config's\n"
        "model.attn_mask (a clip's attention costs its mask's area;\n"
        "default: --size over --patch)"),
    OPT("placement", "P", O_PLACEMENT, NULL,
        "how a masked ring group's ranks hold its clips, for the\n"
        "prices: even (the area split evenly; default), contiguous\n"
        "(chunks, priced by the most loaded rank), blockwise\n"
        "(sched/placement.h; the JSON then gives each group's\n"
        "query blocks and K/V tokens per rank), or blockwise with\n"
        "one kind pinned: zigzag, balanced, greedy, metis"),
    OPT_HEADING("cost and output:\n"),
    OPT("cost", "FILE", O_COST, NULL,
        "cost model, key = value (configs/cost/*.conf, `tessera\n"
        "calibrate`); every key within its range (docs/plan.md), a\n"
        "and b > 0 (default: train's without --cost, the tiny\n"
        "model's CPU numbers)"),
    OPT("out", "FILE", O_OUT, NULL, "write plans and numbers as JSON to FILE"),
    OPT_AS("--json", "json", "[FILE]", O_JSON, NULL,
        "print that JSON on stdout instead (the summary then goes to\n"
        "stderr); `--json FILE` is taken as --out FILE for one release"),
    OPT("waves", NULL, O_WAVES, NULL, "print the groups of every wave of the plans"),
    OPT("timeline", "FILE.png", O_TIMELINE, NULL,
        "draw the first batch's plan: ranks against time, a box per\n"
        "microbatch coloured by CP size, beside static CP with\n"
        "packing only; FILE.json holds what it is drawn from\n"
        "(tools/plan_timeline.py, Debian's python3-matplotlib)"),
    OPT_HELP_ROW,
    OPT_END};

void cmd_plan_usage(FILE *f) {
  fprintf(f,
    "usage: tessera plan (--lengths FILE[:W],... | --data STORE) --ranks N\n"
    "                    (--mem-tokens M | --config FILE --mem-bytes B) [--cost FILE] [options]\n\n"
    "Plans global batches with the Dynamic-CP scheduler and prints, per step and in total,\n"
    "the predicted step time of the dynamic plan, of static CP with packing only and with\n"
    "balanced packing, a lower bound, speedups, efficiency (bound / plan), CP sizes used,\n"
    "idle fraction of ranks and planner time. Details: docs/plan.md.\n\n");
  opt_help(f, plan_opts, 24);
  fprintf(f, "\n"
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

// Everything the command line says.
typedef struct {
  const char *lengths_spec, *store, *cost_path, *json_path, *config_path;
  int json_stdout;       // --json: the JSON document on stdout, the summary on stderr
  const char *timeline;  // --timeline FILE.png
  char timeline_json[4096];  // FILE.json beside it: what the picture is drawn from
  lengths_opts lo;
  int64_t ranks, gpn, mem, batch, steps, seed, maxclip, mem_bytes, heads;
  int cp_mode;  // TRAIN_CP_*, or -1: not given
  int ulysses_chunks;  // train.ulysses_chunks of --config (the default without one)
  int show_waves;
  int frame_grid[2];  // --frame-grid ROWSxCOLS: a latent frame's tokens (0 0: not given)
  int placement;      // --placement: COST_PLACE_* (sched/cost.h cost_mask.place)
  int pin;            // --placement: cost_mask.pin (0: blockwise chooses per clip)
  char **sets;  // (argc) --set values
  int nsets;
} plan_args;

// --timeline FILE.png: the picture and, beside it, FILE.json.
static tsr_status timeline_paths(plan_args *a, const char *png) {
  size_t n = strlen(png);
  if (n < 5 || strcmp(png + n - 4, ".png"))
    return err_set(TSR_EINVAL, "--timeline %s: give a FILE.png", png);
  if (n + 1 > sizeof a->timeline_json)
    return err_set(TSR_EINVAL, "--timeline: path too long");
  a->timeline = png;
  snprintf(a->timeline_json, sizeof a->timeline_json, "%.*s.json", (int)(n - 4), png);
  return TSR_OK;
}

// Parses argv into *a; TSR_EINVAL with a message naming the option otherwise.
static tsr_status parse_args(int argc, char **argv, plan_args *a) {
  char **sets = a->sets;  // the caller's (argc) array
  dit_config dm;
  train_config dt;
  config_defaults(&dm, &dt);
  *a = (plan_args){.gpn = 8, .batch = 256, .steps = 1, .sets = sets, .cp_mode = -1,
                   .ulysses_chunks = dt.ulysses_chunks};
  int geometry_parts = 0;
  opt_parser op;
  opt_begin(&op, plan_opts, argc, argv);
  int o;
  // Ranges: sched/cost.h (SCHED_MAX_*: 64-bit safe sizes) and sched/lengths.h.
  static const int size_hi[2] = {1 << 16, 1 << 16}, patch_hi[3] = {64, 1024, 1024};
  const int64_t maxtok = SCHED_MAX_TOKENS;
  lengths_opts *lo = &a->lo;
  while ((o = opt_next(&op)) != -1) {
    tsr_status st = TSR_OK;
    int dims[3];
    switch (o) {
    case O_LENGTHS: a->lengths_spec = optarg; break;
    case O_DATA: a->store = optarg; break;
    case O_FPS: st = parse_double("--fps", optarg, 1e-3, 1e3, &lo->fps); geometry_parts++; break;
    case O_SIZE:
      if (parse_dims(optarg, "xX", 2, size_hi, dims))
        st = err_set(TSR_EINVAL, "--size: '%s' is not HxW, e.g. 480x848 (each in [1, %d])",
                     optarg, 1 << 16);
      lo->height = dims[0], lo->width = dims[1];
      geometry_parts++;
      break;
    case O_PATCH:
      if (parse_dims(optarg, "xX", 3, patch_hi, dims))
        st = err_set(TSR_EINVAL, "--patch: '%s' is not PTxPHxPW, e.g. 4x16x16 (PT <= 64, PH "
                     "and PW <= 1024)", optarg);
      lo->pt = dims[0], lo->ph = dims[1], lo->pw = dims[2];
      geometry_parts++;
      break;
    case O_TPS: st = parse_double("--tokens-per-second", optarg, 1e-6, 1e9, &lo->tokens_per_second); break;
    case O_MAXSEC: st = parse_double("--max-seconds", optarg, 1e-3, 1e9, &lo->max_seconds); break;
    case O_CAPTOK: st = parse_i64("--cap-tokens", optarg, 1, maxtok, &lo->cap_tokens); break;
    case O_RANKS: st = parse_i64("--ranks", optarg, 1, SCHED_MAX_RANKS, &a->ranks); break;
    case O_GPN: st = parse_i64("--gpus-per-node", optarg, 1, SCHED_MAX_RANKS, &a->gpn); break;
    case O_MEM: st = parse_i64("--mem-tokens", optarg, 1, maxtok, &a->mem); break;
    case O_BATCH: st = parse_i64("--global-batch", optarg, 1, SCHED_MAX_BATCH, &a->batch); break;
    case O_STEPS: st = parse_i64("--steps", optarg, 1, 1000000000, &a->steps); break;
    case O_SEED: st = parse_i64("--seed", optarg, 0, INT64_MAX, &a->seed); break;
    case O_MAXCLIP: st = parse_i64("--max-clip-tokens", optarg, 1, maxtok, &a->maxclip); break;
    case O_COST: a->cost_path = optarg; break;
    case O_JSON:
      // the older `--json FILE`: a file named after it (getopt leaves it at argv[optind])
      if (!optarg && optind < argc && argv[optind][0] != '-') optarg = argv[optind++];
      if (optarg) {
        log_warn("plan: --json %s: deprecated, accepted for one release: use --out %s (--json "
                 "alone prints the JSON)", optarg, optarg);
        a->json_path = optarg;
      } else {
        a->json_stdout = 1;
      }
      break;
    case O_OUT: a->json_path = optarg; break;
    case O_WAVES: a->show_waves = 1; break;
    case O_TIMELINE: st = timeline_paths(a, optarg); break;
    case O_CONFIG: a->config_path = datadir_config(optarg); break;
    case O_SET: st = parse_config_set(&op, a->sets, argc, &a->nsets); break;
    case O_CPMODE:
      a->cp_mode = !strcmp(optarg, "auto")      ? TRAIN_CP_AUTO
                   : !strcmp(optarg, "ring")    ? TRAIN_CP_RING
                   : !strcmp(optarg, "ulysses") ? TRAIN_CP_ULYSSES
                   : !strcmp(optarg, "hybrid")  ? TRAIN_CP_HYBRID : -1;
      if (a->cp_mode < 0)
        st = err_set(TSR_EINVAL, "--cp-mode: '%s' is not auto, ring, ulysses or hybrid", optarg);
      break;
    case O_HEADS: st = parse_i64("--heads", optarg, 1, 1024, &a->heads); break;
    case O_FRAMEGRID:
      if (parse_dims(optarg, "xX", 2, size_hi, a->frame_grid))
        st = err_set(TSR_EINVAL, "--frame-grid: '%s' is not ROWSxCOLS, e.g. 30x52 (each in [1, "
                     "%d])", optarg, 1 << 16);
      break;
    case O_PLACEMENT:
      a->pin = strcmp(optarg, "contiguous") ? place_kind_parse(optarg) + 1 : 0;
      a->placement = !strcmp(optarg, "even")         ? COST_PLACE_EVEN
                     : !strcmp(optarg, "contiguous") ? COST_PLACE_CONTIGUOUS
                     : !strcmp(optarg, "blockwise") || a->pin > 0 ? COST_PLACE_BLOCKWISE : -1;
      if (a->placement < 0)
        st = err_set(TSR_EINVAL, "--placement: '%s' is not even, contiguous, blockwise, zigzag, "
                     "balanced, greedy or metis%s", optarg,
                     !strcmp(optarg, "metis") ? "; metis: this build has " PLACE_METIS_MISSING : "");
      break;
    case O_MEMBYTES: st = parse_i64("--mem-bytes", optarg, 1 << 20, INT64_MAX / 2, &a->mem_bytes); break;
    default: return TSR_EINVAL;  // opt_next said why
    }
    if (st) return st;
  }
  tsr_status st = cli_positionals(argc, argv, 0, 0, "");
  if (st) return st;
  // every missing option at once
  char missing[160] = "";
  const char *what[3] = {!a->lengths_spec && !a->store ? "--lengths or --data" : NULL,
                         !a->ranks ? "--ranks" : NULL,
                         !a->mem && !a->mem_bytes ? "--mem-tokens (or --config and --mem-bytes)" : NULL};
  for (int i = 0; i < 3; i++)
    if (what[i])
      snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s",
               *missing ? ", " : "", what[i]);
  if (*missing) return err_set(TSR_EINVAL, "missing %s", missing);
  if (a->json_stdout && a->json_path)
    return err_set(TSR_EINVAL, "--json prints the JSON, --out %s writes it: give one", a->json_path);
  if (a->mem && a->mem_bytes)
    return err_set(TSR_EINVAL, "give --mem-tokens or --mem-bytes, not both");
  if (a->mem_bytes && !a->config_path)
    return err_set(TSR_EINVAL, "--mem-bytes needs --config FILE: the memory model counts that "
                   "model's bytes per token");
  if (a->nsets && !a->config_path) return err_set(TSR_EINVAL, "--set needs --config FILE");
  if (a->lengths_spec && a->store) return err_set(TSR_EINVAL, "give --lengths or --data, not both");
  if (geometry_parts && geometry_parts != 3)
    return err_set(TSR_EINVAL, "the token geometry needs all of --fps, --size, --patch");
  return TSR_OK;
}

// M from the memory model of --config for --mem-bytes per GPU, that model (*mm), and the
// cost model's ZeRO sizes of its train.zero (*z).
// The group set the plans use (docs/dist.md): per power of two k <= N, the aligned blocks of
// k that fit in N, and the ranks past the last whole block, which no group of k holds.
static void print_group_set(const sched_cluster *cl, int cp_modes) {
  const int N = cl->ranks, G = cl->gpus_per_node;
  printf("group set: aligned blocks [i*k, (i+1)*k) of k =");
  for (int k = 1; k <= N; k *= 2) {
    printf("%s %d (%d", k > 1 ? "," : "", k, N / k);
    if (N % k) printf("; ranks %d-%d in none", N / k * k, N - 1);
    printf(")");
  }
  int hybrid = (cp_modes & COST_MODES_HYBRID) && G > 1 && G < N;
  if (hybrid && (G & (G - 1)))
    printf("; hybrid off: %d ranks per node is not a power of two (Ulysses instead)", G);
  printf("\n");
}

static tsr_status memory_tokens(plan_args *a, int64_t *mem, train_memory *mm, cost_zero *z) {
  dit_config mc;
  train_config tc;
  tsr_status st = config_load(a->config_path, a->sets, a->nsets, &mc, &tc, NULL);
  if (!st && a->cp_mode >= 0) tc.cp_mode = a->cp_mode;  // the memory model counts its buffers
  if (!st && a->cp_mode < 0) a->cp_mode = tc.cp_mode;
  if (!st && !a->heads) a->heads = mc.heads;
  if (!st) a->ulysses_chunks = tc.ulysses_chunks;
  if (!st)
    // one byte a stored value (pixels): a latent store's 2-4 add L x P x 1-3 bytes
    st = train_memory_tokens(&mc, &tc, 1, (int)a->ranks, 1, (size_t)a->mem_bytes,
                             TRAIN_MEMORY_MAX_TOKENS, mem, mm);
  if (!st) st = train_zero_cost(&mc, &tc, (int)a->ranks, z);
  return st ? err_wrap(st, "--mem-bytes %lld with --config %s: ", (long long)a->mem_bytes,
                       a->config_path) : TSR_OK;
}

// --config without --mem-bytes: its train.cp_mode, model.heads and train.ulysses_chunks as
// memory_tokens takes them.
static tsr_status config_settings(plan_args *a) {
  dit_config mc;
  train_config tc;
  tsr_status st = config_load(a->config_path, a->sets, a->nsets, &mc, &tc, NULL);
  if (st) return st;
  if (a->cp_mode < 0) a->cp_mode = tc.cp_mode;
  if (!a->heads) a->heads = mc.heads;
  a->ulysses_chunks = tc.ulysses_chunks;
  return TSR_OK;
}

// The cost model's mask: --config's model.attn_mask over frames of --frame-grid (or the
// geometry's) tokens.
static tsr_status plan_mask(const plan_args *a, cost_mask *mk) {
  *mk = (cost_mask){0};
  if (!a->config_path) return TSR_OK;
  dit_config mc;
  train_config tc;
  tsr_status st = config_load(a->config_path, a->sets, a->nsets, &mc, &tc, NULL);
  if (st || mc.attn_mask == KERNELS_MASK_FULL) return st;
  int64_t rows = a->frame_grid[0], cols = a->frame_grid[1];
  if (!rows && a->lo.ph) rows = a->lo.height / a->lo.ph, cols = a->lo.width / a->lo.pw;
  if (rows < 1 || cols < 1)
    return err_set(TSR_EINVAL, "--config %s has model.attn_mask = %s: a clip's attention cost "
                   "is its mask's area, which needs the token grid of a latent frame: give "
                   "--frame-grid ROWSxCOLS (or the geometry --fps, --size, --patch)",
                   a->config_path, config_mask_name(mc.attn_mask));
  *mk = config_cost_mask(&mc, rows, cols);
  return TSR_OK;
}

// The clip lengths (a mix of CSVs or a store's clips) and the scheduler's configuration.
static tsr_status load_inputs(plan_args *a, lengths_set *ls, sched_config *cfg,
                              train_memory *mm) {
  int64_t mem = a->mem;
  cost_zero z = {0};
  tsr_status st = a->mem_bytes            ? memory_tokens(a, &mem, mm, &z)
                  : a->config_path         ? config_settings(a)
                                           : TSR_OK;
  if (st) return st;
  *cfg = (sched_config){.cluster = {(int)a->ranks, (int)a->gpn, mem},
                        .max_clip_tokens = a->maxclip, .mode_baselines = 1};
  cfg->cost = cost_model_cpu;  // what train takes without --cost
  st = a->cost_path ? cost_model_load(a->cost_path, &cfg->cost) : TSR_OK;
  cfg->cost.zero = z;
  cfg->cost.cp_modes = config_cost_modes(a->cp_mode < 0 ? TRAIN_CP_AUTO : a->cp_mode);
  cfg->cost.heads = (int)a->heads;
  cfg->cost.a2a_chunks = a->ulysses_chunks;
  if (!st) st = plan_mask(a, &cfg->cost.mask);
  cfg->cost.mask.place = a->placement;
  cfg->cost.mask.pin = a->pin;
  if (!st && a->lengths_spec) st = lengths_load_mix(ls, a->lengths_spec, &a->lo);
  if (!st && a->store) {
    int64_t *sid = NULL, *stok = NULL, sn = 0;
    st = store_clip_lengths(a->store, &sid, &stok, &sn);
    if (!st && sn == 0) st = err_set(TSR_EINVAL, "store %s holds no clips", a->store);
    if (!st) st = lengths_add(ls, a->store, sid, stok, sn, 1.0, &a->lo);
    free(sid);
    free(stok);
  }
  if (!st && !cfg->max_clip_tokens) cfg->max_clip_tokens = lengths_max(ls);
  if (!st) st = sched_config_check(cfg);
  return st;
}

// One line of the table: a step's numbers, or the totals.
static void print_row(const char *label, double plan_s, double packing_s, double balanced_s,
                      double bound_s, double idle_frac, const char *waves, const char *used,
                      double plan_ms, const int64_t *hist, int nlev) {
  printf("%-6s %10.3f %10.3f %10.3f %10.3f %6.3f %7.3fx %7.3fx %5.1f%% %6s %-15s %8.2f  ",
         label, plan_s, packing_s, balanced_s, bound_s, ratio(bound_s, plan_s),
         ratio(packing_s, plan_s), ratio(balanced_s, plan_s), 100 * idle_frac, waves, used,
         plan_ms);
  print_hist(stdout, hist, nlev);
  printf("\n");
}

// The totals in words: how much faster the plans are, how close to the bound, and whether
// Dynamic-CP ran or fell back to a static plan, and why.
// The modes the planner may choose from, in words.
static const char *modes_allowed(int cp_modes) {
  return cp_modes == COST_MODES_RING      ? "ring only"
         : cp_modes == COST_MODES_ULYSSES ? "Ulysses only"
         : cp_modes == COST_MODES_HYBRID  ? "hybrid across nodes, Ulysses inside"
                                          : "the planner picks per group";
}

// --set train.zero=Z: ZeRO's exposed communication per step (sched/cost.h), in the plans'
// step times: the all-gather after the optimizer and what the waves' collectives add.
static void print_zero(const sched_totals *tot, const sched_config *cfg) {
  const cost_zero *z = &cfg->cost.zero;
  if (z->stage < 1) return;
  double step = cost_zero_step(&cfg->cost, cfg->cluster.ranks, cfg->cluster.gpus_per_node);
  char parts[160] = "";
  int n = 0;
  if (z->stage < 3)  // stage 3 holds no whole weights to gather after the optimizer
    n = snprintf(parts, sizeof parts, "the weights' all-gather after the optimizer %.4f s", step);
  if (cost_zero_lockstep(&cfg->cost, cfg->cluster.ranks))
    snprintf(parts + n, sizeof parts - (size_t)n, "%sthe waves' reduce-scatters%s %.4f s",
             n ? "; " : "", z->stage >= 3 ? " and block gathers" : "",
             tot->zero_s / tot->steps - step);
  printf("ZeRO stage %d (%.4g parameters in %d buckets, blocks of %.4g): communication per "
         "step, exposed: %.4f s (%s); %.1f%% of the plans' step time\n", z->stage, z->params,
         z->buckets, z->block, tot->zero_s / tot->steps, parts,
         100 * ratio(tot->zero_s, tot->predicted_s));
}

static void print_summary(const sched_totals *tot, const cost_model *cm, int gpn) {
  printf("summary: dynamic plan %.3f s/step, %.3fx over packing only, %.3fx over static "
         "balanced; efficiency %.3f against the lower bound (%.3f against the per-clip "
         "bound); planner %.2f ms/batch (max %.2f; CPU %.2f ms/batch)\n",
         tot->predicted_s / tot->steps, ratio(tot->packing_only_s, tot->predicted_s),
         ratio(tot->static_balanced_s, tot->predicted_s),
         ratio(tot->lower_bound_s, tot->predicted_s), ratio(tot->lower_bound_ref_s, tot->predicted_s),
         tot->plan_ms / tot->steps, tot->plan_ms_max, tot->plan_cpu_ms / tot->steps);
  printf("CP modes (%s; %d heads, %d ranks per node): clips in groups of CP > 1: ring %" PRId64
         ", Ulysses %" PRId64 ", hybrid %" PRId64 "; static CP with every group in one mode: ring "
         "%.3f s/step (%.3fx), Ulysses %.3f s/step (%.3fx), hybrid %.3f s/step (%.3fx)\n",
         modes_allowed(cm->cp_modes), cm->heads, gpn, tot->mode_clips[COST_CP_RING],
         tot->mode_clips[COST_CP_ULYSSES], tot->mode_clips[COST_CP_HYBRID],
         tot->static_mode_s[COST_CP_RING] / tot->steps,
         ratio(tot->static_mode_s[COST_CP_RING], tot->predicted_s),
         tot->static_mode_s[COST_CP_ULYSSES] / tot->steps,
         ratio(tot->static_mode_s[COST_CP_ULYSSES], tot->predicted_s),
         tot->static_mode_s[COST_CP_HYBRID] / tot->steps,
         ratio(tot->static_mode_s[COST_CP_HYBRID], tot->predicted_s));
  int fell = tot->steps - tot->used[SCHED_USED_DYNAMIC];
  if (!fell) {
    printf("plans: Dynamic-CP's own plan ran in all %d steps (it was faster than both static "
           "plans)\n", tot->steps);
    return;
  }
  int ties = tot->dynamic_s <= tot->predicted_s * (1 + 1e-12);
  printf("plans: Dynamic-CP fell back to a static plan in %d of %d steps (static balanced %d, "
         "packing only %d) because its own plan was not faster there%s: its plans would take "
         "%.3f s in all, the plans run %.3f s\n", fell, tot->steps,
         tot->used[SCHED_USED_STATIC_BALANCED], tot->used[SCHED_USED_PACKING_ONLY],
         ties ? " (as fast: a tie goes to the static plan)" : "", tot->dynamic_s,
         tot->predicted_s);
}

typedef struct {
  const lengths_set *ls;
  uint64_t seed;
  int batch;
} draw_ctx;

// sched_draw_fn: batch s of the lengths sampler.
static tsr_status draw_batch(void *vctx, int64_t s, int64_t *ids, int64_t *tokens, int64_t *n) {
  draw_ctx *x = vctx;
  *n = x->batch;
  return lengths_sample(x->ls, x->seed, s, x->batch, ids, tokens);
}

// Plans a->steps batches (batch s+1 planned in the background while batch s is reported,
// the way the trainer overlaps planning with training), printing a row per step, and sums
// them into *tot (and the JSON, if js).
static tsr_status plan_steps(const plan_args *a, const lengths_set *ls, const sched_config *cfg,
                             sched_json *js, sched_totals *tot, int nlev) {
  draw_ctx dc = {.ls = ls, .seed = (uint64_t)a->seed, .batch = (int)a->batch};
  sched_pipeline *pipe = NULL;
  tsr_status st = sched_pipeline_open(&pipe, cfg, a->batch, 0, a->steps, draw_batch, &dc, NULL);
  for (int64_t s = 0; !st && s < a->steps; s++) {
    sched_batch b;
    if ((st = sched_pipeline_next(pipe, &b))) break;
    const sched_result *res = &b.res;
    int64_t hist[SCHED_MAX_LEVELS] = {0};
    plan_cp_histogram(&res->plan, hist);
    sched_totals_add(tot, res);
    char label[24], waves[16];
    snprintf(label, sizeof label, "%lld", (long long)s);
    snprintf(waves, sizeof waves, "%d", res->plan.nwaves);
    print_row(label, res->predicted_s, res->packing_only_s, res->static_balanced_s,
              res->lower_bound_s, res->idle_frac, waves, sched_used_name(res->used), res->plan_ms,
              hist, nlev);
    if (a->show_waves) print_waves(res, b.ids, b.tokens);
    if (js) st = sched_json_add_step(js, (int)s, b.ids, b.tokens, (int)b.n, res);
    if (!st && s == 0 && a->timeline)
      st = sched_timeline_write(cfg, s, b.ids, b.tokens, (int)b.n, res, a->timeline_json);
  }
  sched_pipeline_close(&pipe);
  return st;
}

int cmd_plan(int argc, char **argv) {
  plan_args a = {.sets = calloc((size_t)argc + 1, sizeof(char *))};
  sched_config cfg;
  lengths_set ls = {0};
  sched_json *js = NULL;
  sched_totals tot = {0};
  train_memory mm = {0};
  tsr_status st = a.sets ? TSR_OK : err_set(TSR_ENOMEM, "out of memory");
  if (!st && parse_args(argc, argv, &a)) {
    free(a.sets);
    return cli_usage_error("plan");
  }
  if (!st) st = load_inputs(&a, &ls, &cfg, &mm);
  // --json: the document goes to the stdout the caller gave, the summary to stderr
  int json_fd = -1;
  char json_dev[32];
  if (!st && a.json_stdout) {
    fflush(stdout);
    json_fd = dup(STDOUT_FILENO);
    if (json_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
      st = err_set(TSR_EIO, "--json: cannot keep stdout for the JSON: %s", strerror(errno));
    snprintf(json_dev, sizeof json_dev, "/dev/fd/%d", json_fd);
    a.json_path = json_dev;
  }
  if (!st && a.json_path) st = sched_json_begin(&js, &cfg);
  if (st) goto done;
  int nlev = 0;
  while ((1 << nlev) <= cfg.cluster.ranks) nlev++;
  if (ls.capped || ls.skipped)
    log_info("plan: %lld clips capped, %lld rows shorter than one tubelet skipped",
             (long long)ls.capped, (long long)ls.skipped);
  printf("tessera plan: %lld clips from %d source(s); %d ranks (%d per node), %lld mem "
         "tokens, batch %lld, static CP %d (max clip %lld tokens), cost %s\n",
         (long long)ls.n, ls.nsources, cfg.cluster.ranks, cfg.cluster.gpus_per_node,
         (long long)cfg.cluster.mem_tokens, (long long)a.batch,
         cost_min_cp(&cfg.cluster, cfg.max_clip_tokens), (long long)cfg.max_clip_tokens,
         a.cost_path ? a.cost_path : "built-in CPU (as train's without --cost)");
  print_group_set(&cfg.cluster, cfg.cost.cp_modes);
  if (a.mem_bytes) {
    char what[768];  // train_memory_format's line
    train_memory_format(&mm, what, sizeof what);
    printf("memory per GPU (%s, %lld bytes): %s\n", a.config_path, (long long)a.mem_bytes, what);
  }
  printf("%-6s %10s %10s %10s %10s %6s %8s %8s %6s %6s %-15s %8s  %s\n", "step", "plan_s",
         "packing_s", "balanced_s", "bound_s", "eff", "x_pack", "x_bal", "idle", "waves",
         "used", "plan_ms", "CP size:clips");
  if ((st = plan_steps(&a, &ls, &cfg, js, &tot, nlev))) goto done;
  print_row("total", tot.predicted_s, tot.packing_only_s, tot.static_balanced_s,
            tot.lower_bound_s, ratio(tot.idle_s, tot.predicted_s), "",
            tot.used[SCHED_USED_DYNAMIC] == tot.steps ? "dynamic" : "mixed",
            tot.plan_ms / tot.steps, tot.cp_hist, nlev);
  print_summary(&tot, &cfg.cost, cfg.cluster.gpus_per_node);
  print_zero(&tot, &cfg);
  if (js) st = sched_json_write(js, &tot, a.json_path);
  if (!st && a.timeline) {
    char *args[] = {a.timeline_json, (char *)a.timeline, NULL};
    st = pyscript_run("plan_timeline.py", args);
  }
done:
  if (st) cli_error("plan");
  if (json_fd >= 0) close(json_fd);
  sched_json_free(&js);
  lengths_free(&ls);
  free(a.sets);
  return st ? 1 : 0;
}
