// tests/kernels/test_cuda_sdpa_plan.c — cuDNN accepts the CUDA backend's attention graphs
// (kernels/cuda/attention_cudnn.cu), checked without a GPU: each graph is built and planned
// for an H100 described by tests/kernels/sdpa_h100.json (cuDNN's device-property JSON; cuDNN
// >= 9.8 plans "devicelessly"), through the same code as the GPU path — cuDNN's heuristics
// keep only engines whose support checks pass, and building the plan compiles the fused
// kernels (without a driver, tests/kernels/sdpa_plan.sh supplies the toolkit's stub
// libcuda, so the last step — loading the compiled module — is the one that cannot run
// here; with a driver the plan is complete).
//
// Shapes: those of test_backend_ops (Dh 16/64/128, 131- and 70-token packings) and of the
// models (dit-b 16 x 4,096 tokens, 12 heads of 64; dit-1b 4 x 4,096, 16 of 128). Also checked:
// cuDNN itself rejects a head dim that is no multiple of 8 (so the test can fail), the
// forward and the atomic backward need a small workspace, and the deterministic backward's
// workspace is the dense b x H x sq x skv bf16 dP of the plan's padded dims (why it is used
// for small microbatches only: kernels/cuda/sdpa.h, docs/gpu.md).
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

// Plans the call; returns its workspace (-1 on failure, the error printed when expected_ok).
static int64_t plan(kcu_sdpa_kind kind, int C, int Lq, int Lk, int H, int Dh, int det, int expected_ok) {
  kcu_sdpa_shape s = {kind, C, Lq, Lk, H, Dh};
  kcu_sdpa_key k = kcu_sdpa_key_of(&s, det);
  int64_t ws = -1;
  char info[160] = "";
  double t0 = now();
  tsr_status st = kcu_sdpa_plan_offline(&k, json, max_workspace, &ws, info, sizeof info);
  printf("  %-15s C %2d Lq %5d Lk %5d H %2d Dh %3d det %d -> b %2d sq %5d skv %5d: %s, workspace %lld, %s "
         "(%.1f s)\n", kcu_sdpa_kind_name(kind), C, Lq, Lk, H, Dh, det, k.b, k.sq, k.skv,
         st ? "rejected" : "planned", (long long)ws, st ? err_msg() : info, now() - t0);
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
    int64_t w = plan(KCU_SDPA_FWD, 6, 131, 131, hs[i], dhs[i], 1, 1);
    CHECK(w >= 0 && w <= small, "forward workspace %lld", (long long)w);
    if (dhs[i] == 128) continue;  // the dit-1b backward below has Dh 128
    w = plan(KCU_SDPA_BWD, 6, 131, 131, hs[i], dhs[i], 0, 1);
    CHECK(w >= 0 && w <= small, "atomic backward workspace %lld", (long long)w);
  }
  int64_t w = plan(KCU_SDPA_PARTIAL_FWD, 4, 70, 64, 2, 64, 1, 1);
  CHECK(w >= 0 && w <= small, "partial forward workspace %lld", (long long)w);
  // Deterministic backward: at least the plan's dense bf16 dP (b 8, H 2, 256 x 256).
  w = plan(KCU_SDPA_BWD, 6, 131, 131, 2, 64, 1, 1);
  CHECK(w >= (int64_t)8 * 2 * 256 * 256 * 2, "deterministic backward workspace %lld", (long long)w);
  // ... which for the models' microbatches exceeds the limit (dit-b 16 x 4,096: b 16, H 12,
  // 65,536^2 tokens: 1.6 TB): no plan, so the GPU path sends it to the own kernels.
  plan(KCU_SDPA_BWD, 16, 65536, 65536, 12, 64, 1, 0);
  CHECK(strstr(err_msg(), "workspace limit") != NULL, "rejected for its workspace: %s", err_msg());
  // The models' microbatches.
  w = plan(KCU_SDPA_FWD, 16, 65536, 65536, 12, 64, 1, 1);
  CHECK(w >= 0 && w <= small, "dit-b forward workspace %lld", (long long)w);
  w = plan(KCU_SDPA_BWD, 16, 65536, 65536, 12, 64, 0, 1);
  CHECK(w >= 0 && w <= small, "dit-b atomic backward workspace %lld", (long long)w);
  w = plan(KCU_SDPA_BWD, 4, 16384, 16384, 16, 128, 0, 1);
  CHECK(w >= 0 && w <= small, "dit-1b atomic backward workspace %lld", (long long)w);
  // cuDNN's own rule (kcu_sdpa_fits keeps such calls away from it): Dh a multiple of 8.
  plan(KCU_SDPA_FWD, 6, 131, 131, 2, 12, 1, 0);
  plan(KCU_SDPA_BWD, 6, 131, 131, 2, 12, 0, 0);
  return check_done();
}
