// tests/kernels/test_backend_ops.c — every entry of every built backend against the CPU
// fp32 backend (in the spirit of ggml's test-backend-ops).
//
// For each backend of kernels_backends() other than the reference (the first, "cpu"):
// random inputs, several shapes (ragged cu_seqlens with empty and 1-token clips, odd
// sizes, L not a multiple of the 64-token attention tile, the head dims of the configs
// 16, 64, 128), the same inputs to both backends — [act] inputs rounded to the tested
// backend's act dtype first, so the comparison measures the entry's own error and not the
// rounding of its inputs — and every output compared. Accumulated outputs start from the
// same (rounded) values on both sides. The backend under test gets its tensors through
// alloc/to_device/to_host, so a device backend runs here unchanged.
//
// Error of an output: max |out - ref| / max |ref| (relative to the reference's max-norm,
// meaningful also for outputs with tiny elements). Tolerances (tol_of):
//   fp32 output: 2^-14. The same math in fp32 in another order (another GEMM blocking,
//     another reduction tree) differs by at most about K u Σ|terms| (u = 2^-24); for the
//     K <= 512-term sums here, with inputs of magnitude <= 2 that is far below 2^-14 of the
//     max-norm, which leaves room for cancellation in sums.
//   bf16 output: 2^-8 + 2^-14. bf16 keeps 8 significant bits, so storing a value rounds it
//     by at most u = 2^-8 of itself (nearest even), hence at most 2^-8 of the max-norm;
//     plus the fp32 term above for the arithmetic before the one rounding. A backend that
//     rounds inside an entry too (e.g. the probabilities P to bf16 in a flash-attention
//     kernel) must add its own slack for that entry in tol_of, with the reason.
//   cuDNN's fused attention (the CUDA backend unless TESSERA_CUDA_ATTENTION=own) rounds P
//     (forward) and P, dS (backward) to bf16 before its tensor-core products, which adds up
//     to about 2^-8 of the max-norm again: its bf16 outputs get 3 * 2^-8 (emulated in double
//     on these inputs by attention_bf16_error.py, 100 draws: at most 2^-7.45 including the
//     store, so a 2x margin). The partial backward on cuDNN stores its share in bf16 and
//     then adds it to the accumulated gradient (one more rounding, u = 2^-8: 2^-7.45 + 2^-8
//     is still below 3 * 2^-8); the masked entries get the same under the FULL mask, where
//     they are the unmasked ones, and under block_causal, where cuDNN runs the same graphs on
//     the pair list (each gradient a share stored in bf16 and added once, as the partial
//     backward's). The emulated device has cuDNN's roundings with TESSERA_EMU_CUDNN=1
//     (kernels/cuda/emu/cudnn.cpp: the gpu_backend_ops_cudnn* runs of an EMU build).
//   Run to run: attention_backward is repeated on the same inputs and must give bitwise the
//     same gradients (the backends' determinism), except where cuDNN's backward may run with
//     its atomic dQ (TESSERA_CUDA_ATTENTION_DETERMINISTIC unset or 0, the default).
// The attention entries get the longest clip as max_len (kernels.h), once also a larger
// bound (same results), and a bound below the longest clip must be reported: by the call on
// the CPU, by the next sync on a device backend.
// Also, cpu-bf16 is DEFINED as "the fp32 entry on the same inputs, rounded once", so for
// it every [act] output must equal the reference rounded to bf16 bit for bit, and every
// [f32] output must equal the reference bit for bit (exact mismatches are counted).
// And a bad argument that the shared checks refuse (kernels/check.h) gives every backend
// the CPU fp32 table's TSR_EINVAL and message, word for word (test_same_errors).
//
// Usage: test_backend_ops [--require NAME] [-e ENTRY[,ENTRY...]] [--perf]
//   --require NAME  a backend named NAME must be among the built and usable ones (the
//                   gpu-labelled runs), so a GPU machine cannot pass by skipping it
//   -e LIST         only the case groups that cover the named entries run, and only those
//                   entries' outputs are compared (an unknown name is an error listing the
//                   known ones); without it every group runs and every entry of
//                   kernels/entries.h that a backend implements must have been compared
//   --perf          each tested backend runs through a profiled table (kernels/profile.h,
//                   synced around each call): every compared call prints its time against
//                   its floor, max(bytes / memory bandwidth, flops / GEMM rate), both
//                   measured on that backend in the same run (docs/kernels.md "Testing")
#include <string.h>
#include <time.h>

#ifdef TESSERA_TEST_CUDA
#include "kernels/cuda/cuda.h"  // kernels_cuda_attention_report (gpu_backend_ops)
#endif
#include "backend_ops.h"
#include "backend_ops_cases.h"
#include "backend_ops_fused.h"
#include "kernels/profile.h"
#include "kt.h"

// ---- the entries and the case groups -----------------------------------------------------
// Every entry of kernels/entries.h with its class; the ones of the classes below MEMORY and
// OTHER compute, and each must be compared by some case group.
static const struct {
  const char *name, *cls;
} ENTRIES[] = {
#define KERNELS_ENTRY(RET, NAME, CLASS, ACT, PARAMS, ARGS, BYTES, FLOPS) {#NAME, #CLASS},
#include "kernels/entries.h"
#undef KERNELS_ENTRY
};
enum { N_ENTRIES = sizeof ENTRIES / sizeof ENTRIES[0] };

static int computes(const char *cls) {
  return strcmp(cls, "MEMORY") && strcmp(cls, "OTHER") && strcmp(cls, "NONE");
}

// Whether kb implements the entry named `name` (kernels_has by name).
#define HAS_tsr_status(kb, NAME) kernels_has(kb, NAME)
#define HAS_void(kb, NAME) ((kb)->NAME != NULL)
static int has_entry(const kernels_backend *kb, const char *name) {
#define KERNELS_ENTRY(RET, NAME, CLASS, ACT, PARAMS, ARGS, BYTES, FLOPS) \
  if (!strcmp(name, #NAME)) return HAS_##RET(kb, NAME);
#include "kernels/entries.h"
#undef KERNELS_ENTRY
  return 0;
}

// The case groups, in the order they run, with the entries whose outputs each compares
// (<group>_entries, next to the group's function: check_out fails on an output of an entry
// its group does not list). ref: on the CPU fp32
// reference alone, once (the bitwise definitions); own_decline: the group itself handles a
// backend without its entries.
typedef struct {
  const char *name;
  void (*run)(void);
  const char *entries;  // ",a,b,"
  int ref, own_decline;
} group;
static const group GROUPS[] = {
    {"fused_vs_composition", fused_vs_composition, fused_vs_composition_entries, 1, 0},
    {"strided_vs_dense", strided_vs_dense, strided_vs_dense_entries, 1, 0},
    {"batched_vs_loop", batched_vs_loop, batched_vs_loop_entries, 1, 0},
    {"helpers", test_helpers, test_helpers_entries, 0, 0},
    {"gemm", test_gemm, test_gemm_entries, 0, 0},
    {"gemm_strided", test_gemm_strided, test_gemm_strided_entries, 0, 0},
    {"gemm_batched", test_gemm_batched, test_gemm_batched_entries, 0, 0},
    {"norms", test_norms, test_norms_entries, 0, 0},
    {"modulate", test_modulate, test_modulate_entries, 0, 0},
    {"adaln_tiles", test_adaln_tiles, test_adaln_tiles_entries, 0, 0},
    {"rope_act_cond", test_rope_act_cond, test_rope_act_cond_entries, 0, 0},
    {"attention", test_attention, test_attention_entries, 0, 0},
    {"attention_masked", test_attention_masked, test_attention_masked_entries, 0, 1},
    {"attention_masked_pairs", test_attention_masked_pairs, test_attention_masked_pairs_entries, 0,
     1},
    {"objective_loss_optim", test_objective_loss_optim, test_objective_loss_optim_entries, 0, 0},
    {"fused", test_fused, test_fused_entries, 0, 0},
};
enum { N_GROUPS = sizeof GROUPS / sizeof GROUPS[0] };

// Whether group g has an entry that -e selected (every group without -e).
static int group_selected(const group *g) {
  if (!SELECT[0]) return 1;
  for (int e = 0; e < N_ENTRIES; e++)
    if (in_list(SELECT, ENTRIES[e].name) && in_list(g->entries, ENTRIES[e].name)) return 1;
  return 0;
}

// Runs group g on KB: a backend that leaves one of its entries out declines the group (a
// new entry may land on the CPU first, kernels.h "unsupported entries").
static void run_group(const group *g) {
  if (!group_selected(g)) return;
  if (!g->own_decline && !g->ref)
    for (int e = 0; e < N_ENTRIES; e++)
      if (in_list(g->entries, ENTRIES[e].name) && !has_entry(KB, ENTRIES[e].name)) {
        printf("%s: leaves %s out: case group %s declined\n", KB->name, ENTRIES[e].name, g->name);
        return;
      }
  GROUP = g->entries;
  g->run();
  GROUP = NULL;
}

// -e LIST: SELECT = ",a,b,", every name an entry with a case. 0, or 2 with the known names.
static int parse_select(const char *list) {
  char buf[sizeof SELECT];
  snprintf(buf, sizeof buf, "%s", list);
  SELECT[0] = 0;
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    int known = 0, cased = 0;
    for (int e = 0; e < N_ENTRIES; e++) known |= !strcmp(ENTRIES[e].name, tok);
    for (int g = 0; g < N_GROUPS; g++) cased |= in_list(GROUPS[g].entries, tok);
    if (!known || !cased) {
      fprintf(stderr, "test_backend_ops -e: %s is %s; the entries with cases are:\n", tok,
              known ? "an entry without a case here (memory and sync entries are exercised by "
                      "every case)" : "not an entry of kernels/entries.h");
      for (int e = 0; e < N_ENTRIES; e++)
        for (int g = 0; g < N_GROUPS; g++)
          if (in_list(GROUPS[g].entries, ENTRIES[e].name)) {
            fprintf(stderr, " %s", ENTRIES[e].name);
            break;
          }
      fputc('\n', stderr);
      return 2;
    }
    add_to_list(SELECT, sizeof SELECT, tok);
  }
  if (!SELECT[0]) {
    fprintf(stderr, "test_backend_ops -e: no entry named (-e ENTRY[,ENTRY...])\n");
    return 2;
  }
  return 0;
}

// ---- an entry a backend leaves out --------------------------------------------------------
// A table without rope_forward (as a backend where it has not landed yet): after
// kernels_fill_unsupported, calling it is TSR_EINVAL naming the entry and the backend, also
// through a profiled table, and kernels_has says so; its other entries still run. Every
// entry of a built backend is set (an implementation or the stub).
static void test_unsupported(void) {
  kernels_backend t = *REF;
  t.name = "cpu-partial";
  t.rope_forward = NULL;
  kernels_fill_unsupported(&t);
  CHECK(!kernels_has(&t, rope_forward) && kernels_has(&t, rope_backward),
        "kernels_has: rope_forward %d, rope_backward %d", kernels_has(&t, rope_forward),
        kernels_has(&t, rope_backward));
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6];
  int32_t pos[3] = {1, 2, 3};
  kernels_backend *pt = NULL;
  CHECK_OK(kernels_profiled(&t, 0, &pt));
  const kernels_backend *tables[2] = {&t, pt};
  for (int i = 0; i < 2 && pt; i++) {
    const kernels_backend *kb = tables[i];
    tsr_status st = kb->rope_forward(kb, y, x, pos, 1, 1, 6, 10000.0f);
    CHECK(st == TSR_EINVAL && strstr(err_msg(), "rope_forward") &&
              strstr(err_msg(), "cpu-partial") && strstr(err_msg(), "not supported"),
          "%s an unsupported entry: %s: %s", i ? "profiled," : "plain,", err_name(st), err_msg());
    CHECK(!kernels_has(kb, rope_forward), "kernels_has(rope_forward) on the %s table",
          i ? "profiled" : "plain");
    CHECK_OK(kb->rope_backward(kb, y, x, pos, 1, 1, 6, 10000.0f));
  }
  kernels_profiled_free(&pt);
  const kernels_backend *all[8];
  int nb = kernels_backends(all, 8);
  for (int b = 0; b < nb && b < 8; b++) {
    int unset = 0;
#define KERNELS_ENTRY(RET, NAME, CLASS, ACT, PARAMS, ARGS, BYTES, FLOPS)                        \
  if (strcmp(#CLASS, "NONE") && all[b]->NAME == NULL) {                                     \
    fprintf(stderr, "%s: %s is NULL (kernels_fill_unsupported not called)\n", all[b]->name, \
            #NAME);                                                                         \
    unset++;                                                                                \
  }
#include "kernels/entries.h"
#undef KERNELS_ENTRY
    CHECK(unset == 0, "%s: %d entries NULL", all[b]->name, unset);
  }
}

// ---- the same error whichever backend -----------------------------------------------------
// Calls with a bad argument that the shared checks (kernels/check.h) refuse before any
// memory is touched: each backend gives TSR_EINVAL with the CPU fp32 table's message, word
// for word, and that message names what is wrong. Pointers are a host buffer that no call
// reaches.
static float SPARE[1024];
static const char *const BAD_WHAT[] = {
    "fill: x is NULL", "add_act: a is NULL", "to_host: dst_host is NULL",
    "to_device: src_host is NULL", "alloc: ptr is NULL", "mem_info: free_bytes is NULL",
    "u8_affine: in is NULL", "gemm: a is NULL", "linear_forward: M = -1 is negative",
    "linear_backward_dgelu: pre is NULL", "modulate_forward: mstride = 2 is smaller than D = 3",
    "modulate_backward: inp is NULL", "layernorm_modulate_forward: mean is NULL",
    "rope_forward: head dimension 5 must be even and > 0", "qk_norm_rope_backward: pos is NULL",
    "embedding_backward: ids is NULL", "adamw_update_multi: work is param itself",
    "attention_forward: lse is NULL", "attention_backward: max_len = -1 is negative",
    "attention_partial_forward: 4 tokens but no clips (n_clips = 0)",
    "attention_partial_backward: dk and dv must both be given or both be NULL",
    "attention_masked_forward: unknown mask kind 7",
    "attention_masked_backward: a mask needs the positions of the queries and keys",
    "attention_masked_partial_backward: delta is NULL",
};
enum { N_BAD = sizeof BAD_WHAT / sizeof BAD_WHAT[0] };

static tsr_status bad_call(const kernels_backend *kb, int i) {
  void *p = SPARE;
  float *f = SPARE;
  const int32_t *cu = (const int32_t *)SPARE;
  size_t total;
  kernels_param_segment seg = {0, 4, 1, 0};
  kernels_mask odd = {.kind = 7}, causal = {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 1};
  kernels_mask full = {.kind = KERNELS_MASK_FULL};
  switch (i) {
    case 0: return kb->fill(kb, NULL, 1.0f, 4);
    case 1: return kb->add_act(kb, p, NULL, p, 4);
    case 2: return kb->to_host(kb, NULL, p, 4);
    case 3: return kb->to_device(kb, p, NULL, 4);
    case 4: return kb->alloc(kb, NULL, 16);
    case 5: return kb->mem_info(kb, NULL, &total);
    case 6: return kb->u8_affine(kb, p, NULL, 1.0f, 0.0f, 4);
    case 7: return kb->gemm(kb, 0, 0, 2, 2, 2, 1.0f, NULL, p, 0.0f, p);
    case 8: return kb->linear_forward(kb, p, p, p, NULL, -1, 2, 3);
    case 9: return kb->linear_backward_dgelu(kb, p, NULL, NULL, p, p, p, NULL, 2, 2, 2);
    case 10: return kb->modulate_forward(kb, p, p, p, p, 2, cu, 1, 4, 3);
    case 11: return kb->modulate_backward(kb, NULL, p, NULL, p, NULL, p, 3, cu, 1, 4, 3);
    case 12: return kb->layernorm_modulate_forward(kb, p, NULL, f, p, p, p, 3, cu, 1, 4, 3, 1e-6f);
    case 13: return kb->rope_forward(kb, p, p, cu, 1, 1, 5, 10000.0f);
    case 14: return kb->qk_norm_rope_backward(kb, p, p, NULL, NULL, p, p, p, p, f, f, f, f, NULL,
                                              1, 1, 4, 10000.0f);
    case 15: return kb->embedding_backward(kb, f, p, NULL, 2, 4, 3);
    case 16: return kb->adamw_update_multi(kb, f, f, f, f, f, 4, &seg, 1, 1e-3f, 0.9f, 0.999f,
                                           1e-8f, 0.0f, 1, 1.0f);
    case 17: return kb->attention_forward(kb, p, NULL, p, p, p, cu, 1, 4, 4, 1, 4, 0.5f);
    case 18: return kb->attention_backward(kb, p, p, p, p, p, p, p, p, f, cu, 1, -1, 4, 1, 4, 0.5f);
    case 19: return kb->attention_partial_forward(kb, p, f, p, p, p, cu, cu, 0, 4, 4, 4, 4, 1, 4,
                                                  0.5f);
    // no keys, so nothing to compute: the pair rule holds all the same
    case 20: return kb->attention_partial_backward(kb, p, p, NULL, p, p, p, p, p, f, f, cu, cu, 1,
                                                   4, 0, 4, 0, 1, 4, 0.5f);
    case 21: return kb->attention_masked_forward(kb, p, f, p, p, p, cu, cu, cu, cu, odd, 1, 4, 4,
                                                 4, 4, 1, 4, 0.5f);
    case 22: return kb->attention_masked_backward(kb, p, p, p, p, p, p, p, p, f, cu, NULL, causal,
                                                  1, 4, 4, 1, 4, 0.5f);
    // under FULL a masked entry is its unmasked one, but errors keep the masked name
    case 23: return kb->attention_masked_partial_backward(kb, p, p, p, p, p, p, p, p, f, NULL, cu,
                                                          cu, cu, cu, full, 1, 4, 4, 4, 4, 1, 4,
                                                          0.5f);
  }
  return TSR_OK;
}

static void test_same_errors(const kernels_backend *kb) {
  char want[512];
  for (int i = 0; i < N_BAD; i++) {
    tsr_status st = bad_call(REF, i);
    snprintf(want, sizeof want, "%s", err_msg());
    CHECK(st == TSR_EINVAL && strstr(want, BAD_WHAT[i]), "%s: bad call %d: %s: %s (want %s)",
          REF->name, i, err_name(st), want, BAD_WHAT[i]);
    st = bad_call(kb, i);
    CHECK(st == TSR_EINVAL && !strcmp(err_msg(), want), "%s: bad call %d: %s: %s (the cpu "
          "table's: %s)", kb->name, i, err_name(st), err_msg(), want);
  }
}

// ---- --perf -------------------------------------------------------------------------------
static kernels_backend *PROFILED;           // the profiled table of the backend under test
static kernels_profile_entry PREV[256];     // its counters at each entry's last report
static double BANDWIDTH, GEMM_RATE;         // bytes/s of copy, flop/s of gemm on it

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Seconds of the best of `reps` calls of a copy (which = 0) or an n^3 gemm (which = 1).
static double best_of(const kernels_backend *kb, int which, void *a, void *b, void *c, size_t bytes,
                      int n, int reps) {
  double best = INFINITY;
  for (int r = 0; r < reps; r++) {
    CHECK_OK(kb->sync(kb));
    double t0 = now_s();
    if (which == 0) CHECK_OK(kb->copy(kb, b, a, bytes));
    else CHECK_OK(kb->gemm(kb, 0, 0, n, n, n, 1.0f, a, b, 0.0f, c));
    CHECK_OK(kb->sync(kb));
    double t = now_s() - t0;
    if (t < best) best = t;
  }
  return best;
}

// The floors' rates on kb, now: a copy of 64 MiB (2 x its bytes moved) and a square gemm
// grown until one takes 20 ms or n is 4096 (so the emulated device stays quick), each the
// best of a few calls after one to warm up (the CPU opens OpenBLAS at its first GEMM).
static void measure_rates(const kernels_backend *kb) {
  size_t bytes = (size_t)64 << 20;
  void *a = NULL, *b = NULL, *c = NULL;
  CHECK_OK(kb->alloc(kb, &a, bytes));
  CHECK_OK(kb->alloc(kb, &b, bytes));
  CHECK_OK(kb->alloc(kb, &c, bytes));
  BANDWIDTH = 2.0 * (double)bytes / best_of(kb, 0, a, b, c, bytes, 0, 5);
  int n = 128;
  (void)best_of(kb, 1, a, b, c, 0, n, 1);
  double t = best_of(kb, 1, a, b, c, 0, n, 3);
  while (n < 4096 && t < 0.02) t = best_of(kb, 1, a, b, c, 0, n *= 2, 3);
  GEMM_RATE = 2.0 * n * (double)n * n / t;
  printf("perf %s: memory %.1f GB/s (copy of 64 MiB), GEMM %.1f GFLOP/s (gemm %d^3), measured "
         "now; each line: time per call, the bytes and flops it must move and do, and time / "
         "floor with floor = max(bytes / memory, flops / GEMM)\n",
         kb->name, BANDWIDTH / 1e9, GEMM_RATE / 1e9, n);
  kb->free(kb, a), kb->free(kb, b), kb->free(kb, c);
}

// PERF_HOOK: the calls of `entry` since its last report (one case, one shape).
static void perf_report(const char *entry) {
  kernels_profile_entry now[256];
  int n = kernels_profile_read(PROFILED, now, 256);
  for (int i = 0; i < n && i < 256; i++) {
    if (strcmp(now[i].name, entry)) continue;
    uint64_t calls = now[i].calls - PREV[i].calls;
    double s = now[i].seconds - PREV[i].seconds, by = now[i].bytes - PREV[i].bytes;
    double fl = now[i].flops - PREV[i].flops;
    PREV[i] = now[i];
    if (!calls) return;
    double floor = fmax(by / BANDWIDTH, fl / GEMM_RATE);
    char ratio[32] = "no floor";
    if (floor > 0) snprintf(ratio, sizeof ratio, "%.2fx floor", s / floor);
    printf("  perf %-34s %2llu call%s %10.1f us/call %12.0f B %12.4g flop  %s\n", entry,
           (unsigned long long)calls, calls == 1 ? " " : "s", 1e6 * s / (double)calls,
           by / (double)calls, fl / (double)calls, ratio);
    return;
  }
}

int main(int argc, char **argv) {
  const char *require = NULL;
  int perf = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--require") && i + 1 < argc) require = argv[++i];
    else if (!strcmp(argv[i], "-e") && i + 1 < argc) {
      if (parse_select(argv[++i])) return 2;
    } else if (!strcmp(argv[i], "--perf")) perf = 1;
    else {
      fprintf(stderr, "usage: test_backend_ops [--require NAME] [-e ENTRY[,ENTRY...]] [--perf] "
              "(%s: unknown)\n", argv[i]);
      return 2;
    }
  }
  const kernels_backend *all[8];
  int nb = kernels_backends(all, 8);
  if (require) {
    int found = 0;
    for (int b = 0; b < nb && b < 8; b++) found |= !strcmp(all[b]->name, require);
    CHECK(found, "backend %s is not among the usable backends of this build", require);
  }
  REF = all[0];
  CHECK(REF == kernels_cpu() && REF->act_dtype == KERNELS_F32,
        "the first backend must be the CPU fp32 reference");
  test_unsupported();
  kt_seed(999);
  for (int g = 0; g < N_GROUPS; g++)
    if (GROUPS[g].ref && group_selected(&GROUPS[g])) GROUPS[g].run();
  for (int b = 1; b < nb && b < 8; b++) {
    KB = all[b];
    EXACT = KB == kernels_cpu_bf16();
    if (perf) {
      measure_rates(KB);
      CHECK_OK(kernels_profiled(all[b], 1, &PROFILED));
      KB = PROFILED;
      kernels_profile_read(PROFILED, PREV, 256);
      PERF_HOOK = perf_report;
    }
    test_same_errors(KB);
    n_stats = 0;
    SEEN[0] = 0;
    kt_seed(1000 + (uint64_t)b);
    for (int g = 0; g < N_GROUPS; g++)
      if (!GROUPS[g].ref) run_group(&GROUPS[g]);
    // Without -e every entry the backend implements has been compared by some case.
    for (int e = 0; e < N_ENTRIES && !SELECT[0]; e++)
      if (computes(ENTRIES[e].cls) && has_entry(KB, ENTRIES[e].name))
        CHECK(in_list(SEEN, ENTRIES[e].name), "%s: no case compared %s (add one to a group of "
              "test_backend_ops.c, docs/kernels.md \"Adding an entry\")", KB->name,
              ENTRIES[e].name);
    printf("backend %s (act %s) vs %s:%s\n", KB->name, kernels_dtype_name(KB->act_dtype),
           REF->name, EXACT ? " exact check: [act] outputs = the reference rounded once" : "");
    printf("  %-44s %10s %10s %10s  %s\n", "entry.output", "max err", "tol", "inexact", "result");
    for (int i = 0; i < n_stats; i++)
      printf("  %-44s %10.3g %10.3g %10ld  %s\n", stats[i].entry, stats[i].err, stats[i].tol,
             stats[i].mismatches, stats[i].fails ? "FAIL" : "ok");
#ifdef TESSERA_TEST_CUDA
    if (!strcmp(KB->name, "cuda")) {  // which attention path ran (cuDNN plans, own kernels)
      static char report[16384];
      kernels_cuda_attention_report(report, sizeof report);
      printf("%s", report);
    }
#endif
    if (perf) {
      PERF_HOOK = NULL;
      KB = all[b];
      kernels_profiled_free(&PROFILED);
    }
  }
  return check_done();
}
