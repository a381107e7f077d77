// tests/gpu/test_mask.c (gpu_mask) — the DiT under attention masks (model.attn_mask) on the
// CUDA backend, whose masked entries are its own kernels with a test per score
// (kernels/cuda/attention.cu), or under TESSERA_CUDA_ATTENTION=cudnn (gpu_mask_cudnn) cuDNN
// on the pair list for block_causal and a frame-wide window (kernels/cuda/attention_cudnn.h):
// - against cpu-bf16 (the reference with the same activation dtype): for full, block_causal
//   (chunks of 1 frame, one chunk back) and window masks (radii 1 frame and 0 rows, 1
//   column: narrower than the 2 x 3 frame, on the own kernels; and 1 frame, 1 row, 2
//   columns: the whole frame, on the pair list), the same packed batch (2 clips,
//   built on each backend by the trainer's objective_device_build) gives the loss within
//   5e-3 relative and every gradient tensor within 5e-2 (the bf16 bounds of
//   tests/dist/test_plan_invariance.c: the two round in different places), and the masked
//   losses differ from full attention's by more than 10 times the backends' difference;
// - the mask is applied, not only accepted: under block_causal the first frame's prediction
//   of a clip stays bit for bit when the tokens of its last frame change (the objective's
//   noise depends on the token index alone), so it does under the frame-wide window (frame
//   3 is 3 frames from frame 0, out of reach of 2 layers of radius 1), and under full
//   attention it moves.
// Exit 77 (skip) without a GPU (tests/gpu/run.sh checks first).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/cuda/cuda.h"
#include "model/config.h"
#include "model/dit.h"
#include "model/objective.h"
#include "model/mt.h"

enum { NC = 2, T = 4, GH = 2, GW = 3, FRAME = GH * GW, P = 48 };

// Cases: the three kinds, then (WIDE) the window covering the frame.
enum { WIDE = 3, N_CASES = 4 };
static void setup(dit_config *mc, train_config *tc, int mi) {
  const int mask = mi == WIDE ? KERNELS_MASK_WINDOW : mi;
  config_defaults(mc, tc);
  mc->hidden = 32, mc->depth = 2, mc->heads = 2;
  mc->pt = 1, mc->ph = 4, mc->pw = 4, mc->channels = 3, mc->num_classes = 3;
  tc->seed = 5;
  if (mask == KERNELS_MASK_BLOCK_CAUSAL) mc->mask_chunk = 1, mc->mask_window = 1;
  if (mask == KERNELS_MASK_WINDOW) mc->mask_wt = 1, mc->mask_wh = 0, mc->mask_ww = 1;
  if (mi == WIDE) mc->mask_wh = GH - 1, mc->mask_ww = GW - 1;
  mc->attn_mask = mask;
}

// The loss, the gradients (host copy into g, n floats) and the prediction (host floats,
// (L, P)) of the batch made from tok on kb.
static double run(const kernels_backend *kb, int mask, uint8_t *const tok[NC], float *g,
                  size_t *n, float *pred) {
  dit_config mc;
  train_config tc;
  setup(&mc, &tc, mask);
  dit_model *m = NULL;
  const int L = NC * T * FRAME;
  CHECK_OK(dit_create(&m, &mc, kb, L, NC));
  if (!m) return NAN;
  CHECK_OK(dit_init(m, 7));
  CHECK_OK(mt_perturb(m, 8, 0.1f));
  objective_clip clips[NC];
  for (int c = 0; c < NC; c++)
    clips[c] = (objective_clip){.clip_id = 40 + c, .total_tokens = T * FRAME, .len = T * FRAME,
                                .T = T, .H = GH, .W = GW, .label = c, .tokens = tok[c]};
  objective_device d;
  CHECK_OK(objective_device_alloc(&d, kb, L, NC, P));
  CHECK_OK(objective_device_build(&d, &mc, &tc, 3, NC, clips, NC));
  void *dpred = NULL;
  CHECK_OK(kb->alloc(kb, &dpred, kernels_act_bytes(kb, (size_t)L * P)));
  float *fpred = NULL;
  CHECK_OK(kb->alloc(kb, (void **)&fpred, (size_t)L * P * sizeof(float)));
  double loss = NAN;
  CHECK_OK(dit_zero_grad(m));
  CHECK_OK(dit_forward(m, &d.batch, dpred, &loss));
  CHECK_OK(dit_backward(m, &d.batch));
  CHECK_OK(kb->cast(kb, fpred, KERNELS_F32, dpred, kb->act_dtype, (size_t)L * P));
  CHECK_OK(kb->to_host(kb, pred, fpred, (size_t)L * P * sizeof(float)));
  *n = dit_num_params(m);
  if (g) CHECK_OK(kb->to_host(kb, g, dit_grads(m), *n * sizeof(float)));
  kb->free(kb, dpred), kb->free(kb, fpred);
  objective_device_free(&d);
  dit_free(&m);
  return loss;
}

int main(void) {
  const kernels_backend *cu = kernels_cuda(), *ref = kernels_cpu_bf16();
  if (!cu) {
    printf("SKIP: no CUDA backend\n");
    return 77;
  }
  uint8_t *tok[NC];
  for (int c = 0; c < NC; c++) {
    tok[c] = malloc((size_t)T * FRAME * P);
    for (int j = 0; j < T * FRAME * P; j++) tok[c][j] = (uint8_t)((c * 37 + j * 11 + j / P * 5) % 256);
  }
  const int L = NC * T * FRAME;
  float *p0 = malloc(sizeof(float) * L * P), *p1 = malloc(sizeof(float) * L * P);
  static const char *const names[N_CASES] = {"full", "block_causal", "window", "window (frame-wide)"};
  double full_loss = NAN;  // cuda's under full attention
  for (int mask = 0; mask < N_CASES; mask++) {
    size_t n = 0;
    dit_config mc;
    train_config tc;
    setup(&mc, &tc, mask);
    dit_table tab;
    CHECK_OK(dit_table_make(&mc, &tab));
    float *gc = malloc(tab.n_params * sizeof(float)), *gr = malloc(tab.n_params * sizeof(float));
    double lc = run(cu, mask, tok, gc, &n, p0), lr = run(ref, mask, tok, gr, &n, p1);
    CHECK(fabs(lc - lr) <= 5e-3 * fabs(lr), "%s: loss cuda %.9g vs cpu-bf16 %.9g", names[mask],
          lc, lr);
    double worst = 0;
    for (int i = 0; i < tab.n; i++) {
      double d = 0, r = 0;
      for (size_t j = 0; j < tab.t[i].numel; j++) {
        double x = gr[tab.t[i].offset + j], y = gc[tab.t[i].offset + j];
        d += (x - y) * (x - y), r += x * x;
      }
      double rel = sqrt(d) / fmax(sqrt(r), 1e-30);
      worst = fmax(worst, rel);
      CHECK(rel <= 5e-2, "%s: gradient %s: cuda vs cpu-bf16 relative %.3g", names[mask],
            tab.t[i].name, rel);
    }
    if (mask == KERNELS_MASK_FULL) full_loss = lc;
    else  // the mask moves the loss by far more than the backends differ
      CHECK(fabs(lc - full_loss) > 10 * fabs(lc - lr), "%s: cuda's loss %.9g against full "
            "attention's %.9g, the backends differ by %.3g", names[mask], lc, full_loss, lc - lr);
    printf("%s: loss cuda %.9g, cpu-bf16 %.9g; worst gradient tensor %.3g\n", names[mask], lc, lr,
           worst);
    free(gc), free(gr);
    dit_table_free(&tab);
    if (mask == KERNELS_MASK_WINDOW) continue;
    // causality on cuda: the last frame of clip 0 changed, the first frame's prediction
    run(cu, mask, tok, NULL, &n, p0);
    for (int j = (T - 1) * FRAME * P; j < T * FRAME * P; j++) tok[0][j] = (uint8_t)(tok[0][j] + 97);
    run(cu, mask, tok, NULL, &n, p1);
    for (int j = (T - 1) * FRAME * P; j < T * FRAME * P; j++) tok[0][j] = (uint8_t)(tok[0][j] - 97);
    int same = !memcmp(p0, p1, sizeof(float) * FRAME * P);
    CHECK(same == (mask == KERNELS_MASK_BLOCK_CAUSAL || mask == WIDE),
          "%s on cuda: the first frame's prediction %s when the last frame changes", names[mask],
          same ? "stays" : "moves");
  }
  free(p0), free(p1);
  for (int c = 0; c < NC; c++) free(tok[c]);
  static char report[16384];  // which path each mask took (docs/gpu.md)
  kernels_cuda_attention_report(report, sizeof report);
  printf("%s", report);
  return check_done();
}
