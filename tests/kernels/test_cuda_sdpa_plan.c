// tests/kernels/test_cuda_sdpa_plan.c — cuDNN accepts the CUDA backend's attention graphs
// (kernels/cuda/attention_cudnn.cu), checked without a GPU: each graph is built and planned
// for an H100 described by tests/kernels/sdpa_h100.json (cuDNN's device-property JSON; cuDNN
// >= 9.8 plans "devicelessly"), through the same code as the GPU path — cuDNN's heuristics
// keep only engines whose support checks pass, and building the plan compiles the fused
// kernels (without a driver, tests/kernels/sdpa_plan.sh supplies the toolkit's stub
// libcuda, so the last step — loading the compiled module — is the one that cannot run
// here; with a driver the plan is complete).
//
// Shapes: those of test_backend_ops (Dh 16/64/128, 131- and 70-token packings, longest
// clips 65 and 52) and of the models (dit-b 16 x 4,096 and 64 x 1,024 tokens, 12 heads of
// 64; dit-1b 4 x 4,096, 16 of 128), each planned by its longest clip (sdpa.h). Also
// checked: cuDNN itself rejects a head dim that is no multiple of 8 (so the test can fail),
// the forward and the atomic backward need a small workspace, and the deterministic
// backward's workspace is the dense b x H x sq x skv bf16 dS of the plan's padded dims
// (sq = skv = the longest clip rounded up): it fits the limit for dit-b's 16 x 4,096 and
// 64 x 1,024 microbatches, not for one clip of 65,536 tokens (kernels/cuda/sdpa.h,
// docs/gpu.md). And the masked entries' pair list (block_causal): the same partial graphs on
// clips x KCU_SDPA_MASK_GROUPS sequences.
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "core/err.h"
#include "kernels/cuda/sdpa.h"

static char json[8192];

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

// The GPU path's workspace limit on an H100: an eighth of its memory (totalGlobalMem).
static const int64_t max_workspace = 85029158912 / 8;

// Plans the call of C clips of at most mq x mk tokens, Lq x Lk in all; returns its workspace
// (-1 on failure, the error printed when expected_ok).
static int64_t plan(kcu_sdpa_kind kind, int C, int mq, int mk, int Lq, int Lk, int H, int Dh, int det,
                    int expected_ok) {
  kcu_sdpa_shape s = {kind, C, mq, mk, Lq, Lk, H, Dh};
  kcu_sdpa_key k = kcu_sdpa_key_of(&s, det);
  int64_t ws = -1;
  char info[160] = "";
  double t0 = now();
  tsr_status st = kcu_sdpa_plan_offline(&k, json, max_workspace, &ws, info, sizeof info);
  printf("  %-15s C %2d Lq %5d Lk %5d (clips <= %5d x %5d) H %2d Dh %3d det %d -> b %2d sq %5d skv %5d: "
         "%s, workspace %lld, %s (%.1f s)\n", kcu_sdpa_kind_name(kind), C, Lq, Lk, mq, mk, H, Dh, det,
         k.b, k.sq, k.skv, st ? "rejected" : "planned", (long long)ws, st ? err_msg() : info, now() - t0);
  CHECK((st == TSR_OK) == expected_ok, "%s Dh %d: %s", kcu_sdpa_kind_name(kind), Dh, st ? err_msg() : info);
  return st ? -1 : ws;
}

int main(void) {
  FILE *f = fopen(SDPA_DEVICE_JSON, "rb");
  CHECK(f != NULL, "open %s", SDPA_DEVICE_JSON);
  if (!f) return check_done();
  size_t n = fread(json, 1, sizeof json - 1, f);
  fclose(f);
  json[n] = 0;

  const int64_t small = 1 << 20;
  // test_backend_ops's shapes.
  int dhs[] = {16, 64, 128}, hs[] = {2, 2, 1};
  for (int i = 0; i < 3; i++) {
    int64_t w = plan(KCU_SDPA_FWD, 6, 65, 65, 131, 131, hs[i], dhs[i], 0, 1);
    CHECK(w >= 0 && w <= small, "forward workspace %lld", (long long)w);
    if (dhs[i] == 128) continue;  // the dit-1b backward below has Dh 128
    w = plan(KCU_SDPA_BWD, 6, 65, 65, 131, 131, hs[i], dhs[i], 0, 1);
    CHECK(w >= 0 && w <= small, "atomic backward workspace %lld", (long long)w);
  }
  int64_t w = plan(KCU_SDPA_PARTIAL_FWD, 4, 52, 41, 70, 64, 2, 64, 0, 1);
  CHECK(w >= 0 && w <= small, "partial forward workspace %lld", (long long)w);
  // The partial backward (the backward graph with sq != skv): test_backend_ops's ring block
  // (131 queries, clips of at most 65, against 86 keys, clips of at most 38), atomic and
  // deterministic (dense dS of b 8, H 2, 128 x 64), and a ring step of dit-b at CP 4 (16
  // clips of 4,096: chunks of 1,024 queries against blocks of 1,024 keys).
  w = plan(KCU_SDPA_PARTIAL_BWD, 6, 65, 38, 131, 86, 2, 64, 0, 1);
  CHECK(w >= 0 && w <= small, "partial backward workspace %lld", (long long)w);
  w = plan(KCU_SDPA_PARTIAL_BWD, 6, 65, 38, 131, 86, 2, 64, 1, 1);
  CHECK(w >= (int64_t)8 * 2 * 128 * 64 * 2, "deterministic partial backward workspace %lld",
        (long long)w);
  w = plan(KCU_SDPA_PARTIAL_BWD, 16, 1024, 1024, 16384, 16384, 12, 64, 0, 1);
  CHECK(w >= 0 && w <= small, "dit-b CP 4 ring step: partial backward workspace %lld", (long long)w);
  // Deterministic backward: at least the plan's dense bf16 dS (b 8, H 2, 128 x 128).
  w = plan(KCU_SDPA_BWD, 6, 65, 65, 131, 131, 2, 64, 1, 1);
  CHECK(w >= (int64_t)8 * 2 * 128 * 128 * 2, "deterministic backward workspace %lld", (long long)w);
  // The models' microbatches, 65,536 tokens each: dit-b as 16 clips of 4,096 and as 64 of
  // 1,024 (b-64x1024), dit-1b as 4 of 4,096.
  w = plan(KCU_SDPA_FWD, 16, 4096, 4096, 65536, 65536, 12, 64, 0, 1);
  CHECK(w >= 0 && w <= small, "dit-b 16 x 4,096 forward workspace %lld", (long long)w);
  w = plan(KCU_SDPA_BWD, 16, 4096, 4096, 65536, 65536, 12, 64, 0, 1);
  CHECK(w >= 0 && w <= small, "dit-b 16 x 4,096 atomic backward workspace %lld", (long long)w);
  w = plan(KCU_SDPA_FWD, 64, 1024, 1024, 65536, 65536, 12, 64, 0, 1);
  CHECK(w >= 0 && w <= small, "dit-b 64 x 1,024 forward workspace %lld", (long long)w);
  w = plan(KCU_SDPA_BWD, 64, 1024, 1024, 65536, 65536, 12, 64, 0, 1);
  CHECK(w >= 0 && w <= small, "dit-b 64 x 1,024 atomic backward workspace %lld", (long long)w);
  w = plan(KCU_SDPA_BWD, 4, 4096, 4096, 16384, 16384, 16, 128, 0, 1);
  CHECK(w >= 0 && w <= small, "dit-1b atomic backward workspace %lld", (long long)w);
  // The deterministic backward's dS now fits the limit for dit-b's microbatches (16 x 12 x
  // 4,096^2 x 2 bytes = 6.4 GB; 64 x 12 x 1,024^2 x 2 = 1.6 GB) ...
  w = plan(KCU_SDPA_BWD, 16, 4096, 4096, 65536, 65536, 12, 64, 1, 1);
  CHECK(w >= (int64_t)16 * 12 * 4096 * 4096 * 2, "dit-b 16 x 4,096 deterministic workspace %lld",
        (long long)w);
  w = plan(KCU_SDPA_BWD, 64, 1024, 1024, 65536, 65536, 12, 64, 1, 1);
  CHECK(w >= (int64_t)64 * 12 * 1024 * 1024 * 2, "dit-b 64 x 1,024 deterministic workspace %lld",
        (long long)w);
  // ... but not for one clip of 65,536 tokens (12 x 65,536^2 x 2 bytes = 103 GB): no plan, so
  // the GPU path sends it to the own kernels.
  plan(KCU_SDPA_BWD, 1, 65536, 65536, 65536, 65536, 12, 64, 1, 0);
  CHECK(strstr(err_msg(), "workspace limit") != NULL, "rejected for its workspace: %s", err_msg());
  // The masked entries' pair list under block_causal (attention_cudnn.h): the partial graphs
  // on clips x KCU_SDPA_MASK_GROUPS sequences, each a chunk's rows against its visible range
  // (the same graphs; their dims are the new part): test_backend_ops's masked packing (6
  // clips of at most 65 tokens, H 2 of 16) and dit-b's 16 x 4,096 microbatch.
  const int G = KCU_SDPA_MASK_GROUPS;
  w = plan(KCU_SDPA_PARTIAL_FWD, 6 * G, 65, 65, 131, 131, 2, 16, 0, 1);
  CHECK(w >= 0 && w <= small, "pair list forward workspace %lld", (long long)w);
  w = plan(KCU_SDPA_PARTIAL_BWD, 6 * G, 65, 65, 131, 131, 2, 16, 0, 1);
  CHECK(w >= 0 && w <= small, "pair list backward workspace %lld", (long long)w);
  // the one-batch backward's graph: dK, dV at ragged offsets of their own
  w = plan(KCU_SDPA_MASKED_BWD, 6 * G, 65, 65, 131, 131, 2, 16, 0, 1);
  CHECK(w >= 0 && w <= small, "pair list one-batch backward workspace %lld", (long long)w);
  w = plan(KCU_SDPA_MASKED_BWD, 6 * G, 65, 65, 131, 131, 2, 16, 1, 1);
  CHECK(w >= 0, "pair list one-batch deterministic backward workspace %lld", (long long)w);
  w = plan(KCU_SDPA_PARTIAL_FWD, 16 * G, 4096, 4096, 65536, 65536, 12, 64, 0, 1);
  CHECK(w >= 0 && w <= small, "dit-b pair list forward workspace %lld", (long long)w);
  w = plan(KCU_SDPA_PARTIAL_BWD, 16 * G, 4096, 4096, 65536, 65536, 12, 64, 0, 1);
  CHECK(w >= 0 && w <= small, "dit-b pair list atomic backward workspace %lld", (long long)w);
  w = plan(KCU_SDPA_MASKED_BWD, 16 * G, 4096, 4096, 65536, 65536, 12, 64, 0, 1);
  CHECK(w >= 0 && w <= small, "dit-b pair list one-batch backward workspace %lld", (long long)w);
  // cuDNN's own rule (kcu_sdpa_fits keeps such calls away from it): Dh a multiple of 8.
  plan(KCU_SDPA_FWD, 6, 65, 65, 131, 131, 2, 12, 0, 0);
  plan(KCU_SDPA_BWD, 6, 65, 65, 131, 131, 2, 12, 0, 0);
  return check_done();
}
