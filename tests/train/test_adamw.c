// tests/train/test_adamw.c — the trainer's AdamW (train_adamw: one adamw_update_multi over
// the segment table of train_adamw_segments) is BITWISE the per-tensor loop it replaced
// (one adamw_update per tensor, weight decay where train_decays says), on the CPU fp32 and
// bf16 backends, for a few steps with clipping and weight decay, on a model with labels
// (y_embed: a matrix that must not decay) — and the table covers every tensor once; the
// bf16 working copy written by the same call is bitwise dit_refresh_weights' cast.
#include <string.h>

#include "check.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/dit.h"
#include "model/train/step.h"

static void run(const kernels_backend *kb) {
  dit_config mc;
  train_config tc;
  config_defaults(&mc, &tc);
  mc.num_classes = 3;
  tc.weight_decay = 0.05f;
  dit_model *m = NULL;
  CHECK_OK(dit_create(&m, &mc, kb, 16, 2));
  CHECK_OK(dit_init(m, 7));
  size_t n = dit_num_params(m);
  int nt = dit_num_tensors(m);
  kernels_param_segment *segs = NULL;
  int ns = 0;
  CHECK_OK(train_adamw_segments(m, &segs, &ns));
  CHECK(ns == nt, "%d segments for %d tensors", ns, nt);
  int decaying = 0;
  for (int i = 0; i < ns && i < nt; i++) {
    const dit_tensor *ti = dit_tensor_info(m, i);
    CHECK(segs[i].offset == (int64_t)ti->offset && segs[i].numel == (int64_t)ti->numel &&
              segs[i].decay == train_decays(ti),
          "segment %d does not describe %s", i, ti->name);
    decaying += segs[i].decay;
  }
  CHECK(decaying > 0 && decaying < ns, "%d of %d tensors decay: the test needs both kinds",
        decaying, ns);
  // Reference state: copies of the weights, the same moments, the per-tensor loop.
  float *w0 = dit_params(m), *g = dit_grads(m);
  float *w1 = malloc(n * sizeof *w1), *m0 = calloc(n, sizeof *m0), *v0 = calloc(n, sizeof *v0);
  float *m1 = calloc(n, sizeof *m1), *v1 = calloc(n, sizeof *v1);
  memcpy(w1, w0, n * sizeof *w1);
  for (int64_t t = 1; t <= 4; t++) {
    for (size_t i = 0; i < n; i++) g[i] = (float)(((i * 2654435761u + (size_t)t * 97) % 2001) - 1000) * 1e-4f;
    float clip = t == 2 ? 0.37f : 1.0f;
    double lr = 1e-3 * (double)t;
    for (int i = 0; i < nt; i++) {
      const dit_tensor *ti = dit_tensor_info(m, i);
      size_t o = ti->offset;
      CHECK_OK(kb->adamw_update(kb, w1 + o, g + o, m1 + o, v1 + o, ti->numel, (float)lr, tc.beta1,
                                tc.beta2, tc.adam_eps, train_decays(ti) ? tc.weight_decay : 0.0f,
                                t, clip));
    }
    CHECK_OK(train_adamw(m, &tc, m0, v0, segs, ns, lr, t, clip));
  }
  CHECK(memcmp(w0, w1, n * sizeof *w1) == 0, "%s: weights differ from the per-tensor loop", kb->name);
  CHECK(memcmp(m0, m1, n * sizeof *m1) == 0, "%s: first moments differ", kb->name);
  CHECK(memcmp(v0, v1, n * sizeof *v1) == 0, "%s: second moments differ", kb->name);
  // the working copy the same call wrote is the one dit_refresh_weights makes (bf16 only)
  void *work = dit_weights_work(m);
  CHECK((work != NULL) == (kb->act_dtype != KERNELS_F32), "%s: a working copy %s", kb->name,
        work ? "with fp32 activations" : "missing with bf16 activations");
  if (work) {
    size_t bytes = n * kernels_dtype_size(kb->act_dtype);
    void *fused = malloc(bytes);
    memcpy(fused, work, bytes);  // CPU backends: host memory
    CHECK_OK(dit_refresh_weights(m));
    CHECK(memcmp(fused, work, bytes) == 0, "%s: the working copy AdamW wrote is not the cast "
          "of the weights", kb->name);
    free(fused);
  }
  free(w1), free(m0), free(v0), free(m1), free(v1);
  kb->free(kb, segs);
  dit_free(&m);
}

int main(void) {
  run(kernels_cpu());
  run(kernels_cpu_bf16());
  return check_done();
}
