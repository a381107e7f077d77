// bench/train/bench_step.c — times full training steps of the DiT on the C CPU backend
// (bench/train/run.sh compares them with the PyTorch reference, tools/reference/bench.py).
//
// usage: bench_train_step [--config FILE] [--set KEY=VALUE ...] [--warmup N] [--steps N]
//                         [--dump FILE] [--json FILE] [--one-clip-tokens N] [--clips SPEC]
//                         [--backend B] [--profile]
//
// Backend: chosen as `tessera train` does (tools/backend.h: --backend cpu|cuda|auto, the
// config's train.precision picks the fp32 or bf16 table; --set train.precision=bf16 times
// the cpu-bf16 kernels).
//
// Model: the config (default configs/model/tiny.conf of the source tree), weights from
// dit_init(train.seed). Batch: by default 8 clips of mixed grids (4092 tokens with the
// tiny patch), or with --one-clip-tokens N a single clip of N tokens on a T x H x W grid
// (T <= H ~ W, see one_clip_grid), or with --clips SPEC the clips it lists (bench/gpu/run.sh:
// "16x4096", "32768,16384,...,2x512", each clip on one_clip_grid of its length); tokens are counter-random uint8 (core/rng.h), turned
// into x_t, target, t, positions and loss weights by model/objective.h at step 0 — the
// batch is built once, outside the timed steps, and reused by every step.
//
// With lora.rank > 0 (--set lora.rank=R, lora.targets, lora.alpha) the step is LoRA's as
// `tessera train` runs it: the base frozen (dit_create_frozen), adapters with PEFT's init
// from train.seed, AdamW over the adapters only (train_lora_adamw); bench/train/lora.sh
// times it against full fine-tuning of the same model and batch.
//
// One training step (what is timed): dit_zero_grad, dit_forward (with the loss),
// dit_backward, AdamW (train_adamw: kernels adamw_update_multi) over every tensor with the config's lr,
// the refresh of the weights' working copy (bf16 only; a no-op in fp32),
// betas, eps and weight decay (train_decays: matrices only), step count 1, 2, ...; no
// gradient clipping, no EMA, no learning-rate schedule (lr = train.lr). The PyTorch side
// (tools/reference/bench.py) runs the same step.
//
// --profile: the backend is wrapped in the project's timers (kernels/profile.h, with a sync
// around every entry) and, after the timed steps, the time per kernel class and per entry
// of the timed steps (the warm-up excluded) is printed (tools/profile.h) and written to the
// JSON as "profile". The timers cost two clock reads per entry on the CPU.
//
// Output: one line per timed step (seconds, loss), then "tokens/s" from the median step;
// with --json FILE the same as a JSON object {config, tokens, clips, threads, warmup,
// steps, step_s: [...], median_s, mean_s, min_s, tokens_per_s, losses: [...], params,
// activation_bytes, max_rss_kb_before_step, max_rss_kb_after, backend_peak_bytes,
// backend_capacity_bytes (kernels.h memory_stats)}. --dump FILE writes the
// config (metadata "config"), the initial weights ("param.<name>") and the batch
// ("batch.*", objective_write_tensors) as safetensors before the first step, so that the
// PyTorch side runs the very same model and batch.
//
// The batch lives in host memory and is handed to the model as is when the backend
// computes in fp32 in host memory (kernels.h): no second copy inflates the peak RSS of the
// one-clip step (the peak-memory measurement of run.sh, under /usr/bin/time -v). Other
// backends get it made on the backend (objective_device_build, as the trainer does).
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/err.h"
#include "core/log.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/dit.h"
#include "model/objective.h"
#include "model/io/dit_io.h"
#include "model/lora.h"
#include "model/train/step.h"
#include "tools/backend.h"
#include "tools/parse.h"
#include "tools/profile.h"

#ifndef TESSERA_SOURCE_DIR
#define TESSERA_SOURCE_DIR "."
#endif

typedef struct {
  int T, H, W;
} grid;

// The default batch: 8 clips of different lengths and aspect ratios, 4092 tokens.
static const grid MIXED[] = {{4, 16, 16}, {8, 8, 8},   {2, 16, 24}, {4, 12, 12},
                             {1, 16, 16}, {6, 8, 10},  {3, 10, 10}, {2, 8, 11}};
enum { N_MIXED = sizeof MIXED / sizeof MIXED[0] };

typedef struct {
  const char *config_path;
  char **sets;
  int n_sets;
  int warmup, steps;
  const char *dump_path, *json_path;
  int one_clip_tokens;  // 0: the mixed batch
  const char *clips;    // --clips SPEC, NULL: the mixed batch (or --one-clip-tokens)
  const char *backend;  // --backend: cpu, cuda, auto
  int profile;          // --profile: time every entry (kernels/profile.h)
} options;

typedef struct {
  dit_config mc;
  train_config tc;
  const kernels_backend *kb;
  kernels_backend *profiled;  // kb when --profile (owned), else NULL
  dit_model *model;
  float *adam_m, *adam_v;  // (n_params, or the adapters' with lora.rank) backend memory
  int lora;                // lora.rank > 0: adapters on a frozen base
  float *loss_dev;         // (1) [f32] backend memory: the step's loss, read once per step
  kernels_param_segment *adam_segs;  // train_adamw_segments
  int n_adam_segs;
  objective_batch ob;      // host memory, used directly as the batch (see the top comment)
  objective_device dev;    // the batch on the backend, unless it computes fp32 in host memory
  dit_batch batch;
} bench;

static long max_rss_kb(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) ? -1 : ru.ru_maxrss;
}

// A T x H x W grid of exactly n tokens shaped like a video: among all factorisations,
// the one closest to H == W == 4 T (log distance); 65536 gives 16 x 64 x 64.
static grid one_clip_grid(int n) {
  grid best = {1, 1, n};
  double best_cost = INFINITY;
  for (int T = 1; T <= n; T++) {
    if (n % T) continue;
    int hw = n / T;
    for (int H = 1; (long)H * H <= hw; H++) {
      if (hw % H) continue;
      int W = hw / H;
      double cost = fabs(log((double)W / H)) + fabs(log(4.0 * T / H));
      if (cost < best_cost) best_cost = cost, best = (grid){T, H, W};
    }
  }
  return best;
}

// --clips SPEC: comma-separated items, each "N" (one clip of N tokens) or "KxN" (K clips
// of N tokens); every clip gets one_clip_grid(N). "16x4096", "65536",
// "32768,16384,8192,4096,2048,1024,2x512". *out (malloc'd) and *n_out on success.
static tsr_status parse_clips(const char *spec, grid **out, int *n_out) {
  grid *g = NULL;
  int n = 0;
  long total = 0;
  const char *p = spec;
  while (*p) {
    char *end;
    long k = 1, len = strtol(p, &end, 10);
    if (end != p && *end == 'x') {
      k = len, p = end + 1;
      len = strtol(p, &end, 10);
    }
    if (end == p || (*end && *end != ',') || k < 1 || k > 65536 || len < 1 ||
        len > INT32_MAX / 4 || (total += k * len) > INT32_MAX / 4) {
      free(g);
      return err_set(TSR_EINVAL, "bench: --clips %s: expected N or KxN items separated by "
                                 "commas, at most %d tokens in all", spec, INT32_MAX / 4);
    }
    grid *ng = realloc(g, (size_t)(n + k) * sizeof *g);
    if (!ng) {
      free(g);
      return err_set(TSR_ENOMEM, "bench: no memory");
    }
    g = ng;
    grid one = one_clip_grid((int)len);
    for (long i = 0; i < k; i++) g[n++] = one;
    p = *end ? end + 1 : end;
  }
  if (!n) return err_set(TSR_EINVAL, "bench: --clips: empty");
  *out = g, *n_out = n;
  return TSR_OK;
}

// Builds the batch of n clips of grids g (clip ids 0..n-1, counter-random tokens from
// seed 7) at step 0 into b->ob and points b->batch at it.
static tsr_status build_batch(bench *b, const grid *g, int n) {
  int P = b->mc.pt * b->mc.ph * b->mc.pw * b->mc.channels;
  long L = 0;
  for (int c = 0; c < n; c++) L += (long)g[c].T * g[c].H * g[c].W;
  if (L > INT32_MAX / 4) return err_set(TSR_EINVAL, "bench: %ld tokens is too many", L);
  objective_clip *clips = calloc((size_t)n, sizeof *clips);
  if (!clips) return err_set(TSR_ENOMEM, "bench: no memory");
  tsr_status st = objective_alloc(&b->ob, (int)L, n, P);
  for (int c = 0; !st && c < n; c++) {
    int len = g[c].T * g[c].H * g[c].W;
    uint8_t *tok = malloc((size_t)len * P);
    if (!tok) {
      st = err_set(TSR_ENOMEM, "bench: no memory for %d tokens", len);
      break;
    }
    rng_key k = {7, 0, (uint64_t)c, RNG_STREAM_SAMPLER};
    for (size_t i = 0; i < (size_t)len * P; i++) tok[i] = (uint8_t)(rng_uniform(&k, i) * 256);
    int label = b->mc.num_classes > 0 && c % 4 != 3 ? c % b->mc.num_classes : -1;
    clips[c] = (objective_clip){.clip_id = c, .total_tokens = len, .first_token = 0, .len = len,
                                .T = g[c].T, .H = g[c].H, .W = g[c].W, .label = label,
                                .tokens = tok};
  }
  if (!st) st = objective_build(&b->ob, &b->mc, &b->tc, 0, n, clips, n);
  int direct = b->kb->act_dtype == KERNELS_F32 && !b->kb->device_memory;
  if (!st && !direct) st = objective_device_alloc(&b->dev, b->kb, (int)L, n, P);
  if (!st && !direct) st = objective_device_build(&b->dev, &b->mc, &b->tc, 0, n, clips, n);
  for (int c = 0; c < n; c++) free((void *)clips[c].tokens);
  free(clips);
  if (st) return err_wrap(st, "bench: batch: ");
  const objective_batch *ob = &b->ob;
  if (!direct) b->batch = b->dev.batch;
  else
    b->batch = (dit_batch){.n_clips = ob->n_clips, .L = ob->L, .max_len = ob->max_len,
                           .cu_seqlens = ob->cu_seqlens,
                           .pos = ob->pos, .t = ob->t,
                           .labels = b->mc.num_classes > 0 ? ob->labels : NULL, .x = ob->x,
                           .target = ob->target, .loss_weight = ob->loss_weight};
  return TSR_OK;
}

// The model for b->ob's tokens and clips, weights from dit_init(train.seed), Adam moments 0;
// with lora.rank > 0 frozen, with the config's adapters.
static tsr_status build_model(bench *b) {
  const kernels_backend *kb = b->kb;
  b->lora = b->tc.lora_rank > 0;
  tsr_status st = b->lora ? dit_create_frozen(&b->model, &b->mc, kb, b->ob.L, b->ob.n_clips)
                          : dit_create(&b->model, &b->mc, kb, b->ob.L, b->ob.n_clips);
  if (!st) st = dit_init(b->model, (uint64_t)b->tc.seed);
  if (!st && b->lora) {
    lora_config lc = train_lora_config(&b->tc);
    st = dit_lora_attach(b->model, &lc, (uint64_t)b->tc.seed);
  }
  if (st) return err_wrap(st, "bench: model: ");
  size_t bytes = (b->lora ? dit_lora_num_params(b->model) : dit_num_params(b->model)) * sizeof(float);
  if (!st) st = kb->alloc(kb, (void **)&b->adam_m, bytes);
  if (!st) st = kb->alloc(kb, (void **)&b->adam_v, bytes);
  if (!st) st = kb->alloc(kb, (void **)&b->loss_dev, sizeof(float));
  if (!st) st = b->lora ? train_lora_adamw_segments(b->model, &b->adam_segs, &b->n_adam_segs)
                        : train_adamw_segments(b->model, &b->adam_segs, &b->n_adam_segs);
  return st ? err_wrap(st, "bench: model: ") : TSR_OK;
}

// One training step with AdamW step count `t` (>= 1); *loss = the step's loss.
// The loss stays on the backend until the step is queued (dit_forward_dev) and is read
// once after it, as the trainer does: on CUDA a read between forward and backward would
// make the host wait for the forward before it queues the backward.
static tsr_status train_once(bench *b, int64_t t, double *loss) {
  const kernels_backend *kb = b->kb;
  float loss_host = 0.0f;
  tsr_status st = dit_zero_grad(b->model);
  if (!st) st = dit_lora_zero_grad(b->model);
  if (!st) st = dit_forward_dev(b->model, &b->batch, NULL, b->loss_dev);
  if (!st) st = dit_backward(b->model, &b->batch);
  if (!st)
    st = (b->lora ? train_lora_adamw : train_adamw)(b->model, &b->tc, b->adam_m, b->adam_v,
                                                    b->adam_segs, b->n_adam_segs, b->tc.lr, t, 1.0f);
  if (!st) st = kb->to_host(kb, &loss_host, b->loss_dev, sizeof loss_host);
  if (!st) st = kb->sync(kb);
  *loss = loss_host;
  return st ? err_wrap(st, "bench: step %lld: ", (long long)t) : TSR_OK;
}

// Config, initial weights and batch for the PyTorch side (tools/reference/bench.py).
static tsr_status dump(bench *b, const char *path) {
  st_writer *w = NULL;
  char *ini = config_to_ini(&b->mc, &b->tc);
  if (!ini) return err_set(TSR_ENOMEM, "bench: no memory");
  // The weights live in backend memory on a device backend (cuda): copied to the host.
  const float *params = dit_params(b->model);
  float *host = NULL;
  tsr_status st = TSR_OK;
  if (b->kb->device_memory) {
    size_t bytes = dit_num_params(b->model) * sizeof(float);
    if (!(host = malloc(bytes))) st = err_set(TSR_ENOMEM, "bench: no memory for the weights");
    if (!st) st = b->kb->to_host(b->kb, host, params, bytes);
    if (!st) st = b->kb->sync(b->kb);
    params = host;
  }
  if (!st) st = st_writer_new(&w);
  if (!st) st = st_writer_meta(w, "config", ini);
  if (!st) st = dit_write_tensors(b->model, w, "param.", params);
  if (!st) st = objective_write_tensors(&b->ob, w, "batch.");
  if (!st) st = st_writer_commit(w, path);
  st_writer_free(&w);
  free(host);
  free(ini);
  return st ? err_wrap(st, "bench: --dump %s: ", path) : TSR_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static tsr_status write_json(const char *path, json_t *j) {
  if (json_dump_file(j, path, JSON_INDENT(2)))
    return err_set(TSR_EIO, "bench: cannot write %s", path);
  return TSR_OK;
}

// Runs the warm-up and timed steps, prints them and the summary, fills j.
static tsr_status run_steps(bench *b, const options *o, json_t *j) {
  int n = o->warmup + o->steps;
  double *sec = calloc((size_t)n, sizeof *sec), *loss = calloc((size_t)n, sizeof *loss);
  double *sorted = calloc((size_t)o->steps, sizeof *sorted);
  if (!sec || !loss || !sorted) {
    free(sec), free(loss), free(sorted);
    return err_set(TSR_ENOMEM, "bench: no memory");
  }
  long rss_before = max_rss_kb();
  tsr_status st = TSR_OK;
  for (int s = 0; !st && s < n; s++) {
    if (s == o->warmup && b->profiled) kernels_profile_reset(b->kb);  // timed steps only
    double t0 = time_now();
    st = train_once(b, s + 1, &loss[s]);
    sec[s] = time_now() - t0;
    if (!st)
      printf("bench_train_step: %s step %d: %.4f s, loss %.9g\n",
             s < o->warmup ? "warm-up" : "timed", s + 1, sec[s], loss[s]);
  }
  if (!st) {
    double sum = 0;
    json_t *js = json_array(), *jl = json_array();
    for (int s = 0; s < n; s++) json_array_append_new(jl, json_real(loss[s]));
    for (int s = 0; s < o->steps; s++) {
      sorted[s] = sec[o->warmup + s], sum += sorted[s];
      json_array_append_new(js, json_real(sorted[s]));
    }
    qsort(sorted, (size_t)o->steps, sizeof *sorted, cmp_double);
    double med = o->steps % 2 ? sorted[o->steps / 2]
                              : 0.5 * (sorted[o->steps / 2 - 1] + sorted[o->steps / 2]);
    double tps = b->ob.L / med;
    printf("bench_train_step: %d tokens, %d clips, %d threads: median %.4f s, mean %.4f s, "
           "min %.4f s per step over %d steps: %.0f tokens/s\n",
           b->ob.L, b->ob.n_clips, omp_get_max_threads(), med, sum / o->steps, sorted[0],
           o->steps, tps);
    json_object_set_new(j, "step_s", js);
    json_object_set_new(j, "losses", jl);
    json_object_set_new(j, "median_s", json_real(med));
    json_object_set_new(j, "mean_s", json_real(sum / o->steps));
    json_object_set_new(j, "min_s", json_real(sorted[0]));
    json_object_set_new(j, "tokens_per_s", json_real(tps));
    json_object_set_new(j, "max_rss_kb_before_step", json_integer(rss_before));
    json_object_set_new(j, "max_rss_kb_after", json_integer(max_rss_kb()));
    if (b->profiled) {
      profile_report r;
      double wall = 0;
      for (int s = 0; s < o->steps; s++) wall += sec[o->warmup + s];
      st = profile_collect(b->kb, o->steps, wall, &r);
      if (!st) {
        profile_print(stdout, &r);
        json_object_set_new(j, "profile", profile_json(&r));
      }
    }
    // The backend's own count (kernels.h memory_stats): on CUDA the peak of the arena's
    // use, which nvidia-smi cannot see (it shows the whole arena, made once per run).
    size_t peak = 0, cap = 0;
    if (b->kb->memory_stats(b->kb, NULL, &peak, &cap) == TSR_OK) {
      json_object_set_new(j, "backend_peak_bytes", json_integer((json_int_t)peak));
      json_object_set_new(j, "backend_capacity_bytes", json_integer((json_int_t)cap));
      printf("bench_train_step: backend memory peak %.1f MiB%s\n", peak / 1048576.0,
             cap ? "" : " (allocations through kb->alloc)");
    }
    // Which implementation ran (kernels.h path_stats; CUDA only): a GEMM on the plain
    // kernel or attention on the own kernels explains a slow step.
    kernels_path_stats ps;
    if (b->kb->path_stats && b->kb->path_stats(b->kb, &ps) == TSR_OK) {
      json_object_set_new(j, "paths", json_pack("{sI sI sI sI}", "gemm_library", (json_int_t)ps.gemm_library,
                                                "gemm_plain", (json_int_t)ps.gemm_plain,
                                                "attention_library", (json_int_t)ps.attention_library,
                                                "attention_own", (json_int_t)ps.attention_own));
      printf("bench_train_step: calls so far: GEMM %lld on the library, %lld on the plain kernel; "
             "attention %lld on the library, %lld on the own kernels\n", (long long)ps.gemm_library,
             (long long)ps.gemm_plain, (long long)ps.attention_library, (long long)ps.attention_own);
    }
  }
  free(sec), free(loss), free(sorted);
  return st;
}

static void usage(FILE *f) {
  fprintf(f,
    "usage: bench_train_step [--config FILE] [--set KEY=VALUE ...] [--warmup N] [--steps N]\n"
    "                        [--dump FILE] [--json FILE] [--one-clip-tokens N] [--profile]\n\n"
    "Times training steps (zero grad, forward, backward, AdamW) of the DiT on the CPU\n"
    "backend on a fixed synthetic batch and prints tokens/s (bench/train/run.sh).\n\n"
    "  --config FILE          model config (default %s/configs/model/tiny.conf)\n"
    "  --set KEY=VALUE        override a config key, e.g. --set model.recompute=1\n"
    "  --warmup N             untimed steps first (default 2)\n"
    "  --steps N              timed steps (default 10)\n"
    "  --dump FILE            write config, initial weights and batch (safetensors) for\n"
    "                         tools/reference/bench.py\n"
    "  --json FILE            write the results as JSON\n"
    "  --one-clip-tokens N    the batch is one clip of N tokens (peak-memory run); the\n"
    "                         default is 8 clips of mixed grids\n"
    "  --clips SPEC           the batch: comma-separated N (one clip of N tokens) or KxN\n"
    "                         (K clips of N tokens), e.g. 16x4096 or 32768,16384,2x512\n"
    "  --backend B            cpu, cuda or auto (default), as `tessera train`; the config's\n"
    "                         train.precision (fp32 or bf16) picks the kernels\n"
    "  --profile              time every kernel entry (kernels/profile.h) and print the\n"
    "                         time per kernel class and entry of the timed steps\n"
    "Threads: OMP_NUM_THREADS (OpenMP kernels), OPENBLAS_NUM_THREADS (GEMMs).\n",
    TESSERA_SOURCE_DIR);
}

static int parse_options(int argc, char **argv, options *o) {
  enum { O_CONFIG = 1, O_SET, O_WARMUP, O_STEPS, O_DUMP, O_JSON, O_ONE, O_HELP, O_BACKEND, O_CLIPS,
         O_PROFILE };
  static const struct option opts[] = {
      {"config", required_argument, 0, O_CONFIG}, {"set", required_argument, 0, O_SET},
      {"warmup", required_argument, 0, O_WARMUP}, {"steps", required_argument, 0, O_STEPS},
      {"dump", required_argument, 0, O_DUMP},     {"json", required_argument, 0, O_JSON},
      {"one-clip-tokens", required_argument, 0, O_ONE}, {"help", no_argument, 0, O_HELP},
      {"backend", required_argument, 0, O_BACKEND}, {"clips", required_argument, 0, O_CLIPS},
      {"profile", no_argument, 0, O_PROFILE},
      {0, 0, 0, 0}};
  int c;
  tsr_status st = TSR_OK;
  opterr = 0;
  while (!st && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_CONFIG: o->config_path = optarg; break;
    case O_SET: o->sets[o->n_sets++] = optarg; break;
    case O_WARMUP: st = parse_int("--warmup", optarg, 0, 1000000, &o->warmup); break;
    case O_STEPS: st = parse_int("--steps", optarg, 1, 1000000, &o->steps); break;
    case O_DUMP: o->dump_path = optarg; break;
    case O_BACKEND: o->backend = optarg; break;
    case O_JSON: o->json_path = optarg; break;
    case O_CLIPS: o->clips = optarg; break;
    case O_PROFILE: o->profile = 1; break;
    case O_ONE:
      st = parse_int("--one-clip-tokens", optarg, 1, INT32_MAX / 4, &o->one_clip_tokens);
      break;
    case 'h':
    case O_HELP: usage(stdout); return 0;
    default:
      fprintf(stderr, "bench_train_step: unknown option or missing value: %s\n", argv[optind - 1]);
      usage(stderr);
      return 2;
    }
  }
  if (st) {
    fprintf(stderr, "bench_train_step: %s\n", err_msg());
    return 2;
  }
  if (optind < argc) {
    fprintf(stderr, "bench_train_step: unexpected argument %s\n", argv[optind]);
    return 2;
  }
  return -1;  // go on
}

static tsr_status bench_run(const options *o, bench *b) {
  tsr_status st = config_load(o->config_path, o->sets, o->n_sets, &b->mc, &b->tc, NULL);
  if (!st) st = config_validate(&b->mc, &b->tc);
  backend_choice bc;
  if (!st) st = backend_choose(o->backend, &bc);
  if (!st) st = backend_for_precision(&bc, b->tc.precision, &b->kb);
  if (!st && o->profile && !(st = kernels_profiled(b->kb, 1, &b->profiled))) b->kb = b->profiled;
  if (st) return st;
  grid one = one_clip_grid(o->one_clip_tokens > 0 ? o->one_clip_tokens : 1);
  const grid *g = o->one_clip_tokens > 0 ? &one : MIXED;
  int n = o->one_clip_tokens > 0 ? 1 : N_MIXED;
  grid *spec = NULL;
  if (o->clips) {
    if (o->one_clip_tokens > 0)
      return err_set(TSR_EINVAL, "bench: --clips and --one-clip-tokens exclude each other");
    if ((st = parse_clips(o->clips, &spec, &n))) return st;
    g = spec;
  }
  st = build_batch(b, g, n);
  grid first = g[0];
  free(spec);
  g = &first;
  if (st || (st = build_model(b))) return st;
  if (o->dump_path && (st = dump(b, o->dump_path))) return st;

  size_t act = dit_activation_bytes(b->model);
  printf("bench_train_step: %s, %zu parameters, %d clips, %d tokens", o->config_path,
         dit_count_params(b->model), b->ob.n_clips, b->ob.L);
  if (n == 1) printf(" (grid %dx%dx%d)", g->T, g->H, g->W);
  printf(", activation memory %.1f MiB, %d OpenMP threads, backend %s (%s)\n",
         act / 1048576.0, omp_get_max_threads(), b->kb->name,
         config_precision_name(b->tc.precision));
  json_t *j = json_object();
  json_object_set_new(j, "config", json_string(o->config_path));
  if (o->clips) json_object_set_new(j, "clips_spec", json_string(o->clips));
  json_object_set_new(j, "recompute", json_integer(b->mc.recompute));
  json_object_set_new(j, "backend", json_string(b->kb->name));
  json_object_set_new(j, "precision", json_string(config_precision_name(b->tc.precision)));
  json_object_set_new(j, "params", json_integer((json_int_t)dit_count_params(b->model)));
  json_object_set_new(j, "lora_rank", json_integer(b->tc.lora_rank));
  if (b->lora) {
    json_object_set_new(j, "lora_targets", json_string(b->tc.lora_targets));
    json_object_set_new(j, "trained_params", json_integer((json_int_t)dit_lora_num_params(b->model)));
  }
  json_object_set_new(j, "tokens", json_integer(b->ob.L));
  json_object_set_new(j, "clips", json_integer(b->ob.n_clips));
  if (n == 1)
    json_object_set_new(j, "grid", json_pack("[i,i,i]", g->T, g->H, g->W));
  json_object_set_new(j, "threads", json_integer(omp_get_max_threads()));
  json_object_set_new(j, "warmup", json_integer(o->warmup));
  json_object_set_new(j, "steps", json_integer(o->steps));
  json_object_set_new(j, "activation_bytes", json_integer((json_int_t)act));
  st = run_steps(b, o, j);
  if (!st && o->json_path) st = write_json(o->json_path, j);
  json_decref(j);
  return st;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);  // progress lines through a pipe (run.sh)
  options o = {.config_path = TESSERA_SOURCE_DIR "/configs/model/tiny.conf", .warmup = 2,
               .steps = 10, .backend = "auto"};
  if (!(o.sets = calloc((size_t)argc + 1, sizeof *o.sets))) return 1;
  int rc = parse_options(argc, argv, &o);
  if (rc >= 0) {
    free(o.sets);
    return rc;
  }
  bench b = {0};
  tsr_status st = bench_run(&o, &b);
  if (st) fprintf(stderr, "bench_train_step: %s\n", err_msg());
  if (b.kb) {
    b.kb->free(b.kb, b.adam_m);
    b.kb->free(b.kb, b.adam_v);
    b.kb->free(b.kb, b.loss_dev);
    b.kb->free(b.kb, b.adam_segs);
  }
  dit_free(&b.model);
  objective_device_free(&b.dev);
  objective_free(&b.ob);
  kernels_profiled_free(&b.profiled);
  free(o.sets);
  return st ? 1 : 0;
}
