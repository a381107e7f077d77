// tests/gpu/test_graphs.c (gpu_graphs) — recorded graphs on the CUDA backend
// (TESSERA_CUDA_GRAPHS=1, kernels/cuda/graph.cu, model/dit.c run_phase): two identical
// models on the same device, one with graphs turned off (dit_set_graphs(m, 0)), train 3
// steps each (zero_grad, forward with the loss, backward, AdamW) on the same packed batch;
// step 1 runs eagerly, step 2 records the forward and the backward, step 3 replays them.
// Every step's loss and every gradient must be bitwise the eager model's, the weights
// after the 3 AdamW steps too (so the replays read the weights of their step), and the
// graphed model's stats must show 2 recordings and 2 replays (the test cannot pass with
// graphs silently off). For model.recompute 0 and 2 (the cheap recomputation), on a model
// whose head dimension (64) cuDNN's fused attention takes, with cuDNN's deterministic
// attention backward (TESSERA_CUDA_ATTENTION_DETERMINISTIC=1, set here: the default atomic
// dQ would make two eager runs differ in their last bits, so bitwise equality would test
// nothing). Exit 77 (skip) without a GPU (tests/gpu/run.sh checks first).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/cuda/cuda.h"
#include "model/dit.h"
#include "model/train/step.h"
#include "model/mt.h"

static const mt_clip CLIPS[3] = {{4, 8, 8, 1, 0.3f}, {2, 8, 10, 2, 0.7f}, {1, 6, 6, 0, 0.55f}};
static const int IDS[3] = {10, 11, 12};

// The host batch of mt_batch_make on the CUDA backend: index and f32 arrays as they are,
// x and target cast to the backend's act dtype.
typedef struct {
  void *buf[9];
  dit_batch b;
} dev_batch;

static tsr_status upload(const kernels_backend *kb, void **dst, const void *src, size_t bytes) {
  tsr_status st = kb->alloc(kb, dst, bytes);
  return st ? st : kb->to_device(kb, *dst, src, bytes);
}

static tsr_status to_act(const kernels_backend *kb, void **dst, void **tmp, const float *src,
                         size_t n) {
  tsr_status st = upload(kb, tmp, src, n * sizeof(float));
  if (!st) st = kb->alloc(kb, dst, kernels_act_bytes(kb, n));
  if (!st) st = kb->cast(kb, *dst, kb->act_dtype, *tmp, KERNELS_F32, n);
  return st;
}

static tsr_status device_batch(const kernels_backend *kb, const mt_batch *mb, dev_batch *d) {
  memset(d, 0, sizeof *d);
  int C = mb->C, L = mb->L;
  size_t n = (size_t)L * mb->P;
  tsr_status st = upload(kb, &d->buf[0], mb->cu, sizeof(int32_t) * (C + 1));
  if (!st) st = upload(kb, &d->buf[1], mb->pos, sizeof(int32_t) * 3 * (size_t)L);
  if (!st) st = upload(kb, &d->buf[2], mb->labels, sizeof(int32_t) * C);
  if (!st) st = upload(kb, &d->buf[3], mb->t, sizeof(float) * C);
  if (!st) st = upload(kb, &d->buf[4], mb->w, sizeof(float) * C);
  if (!st) st = to_act(kb, &d->buf[5], &d->buf[6], mb->x, n);
  if (!st) st = to_act(kb, &d->buf[7], &d->buf[8], mb->target, n);
  d->b = (dit_batch){.n_clips = C, .L = L, .max_len = mb->b.max_len, .cu_seqlens = d->buf[0],
                     .pos = d->buf[1],
                     .labels = d->buf[2], .t = d->buf[3], .loss_weight = d->buf[4],
                     .x = d->buf[5], .target = d->buf[7]};
  return st;
}

typedef struct {
  dit_model *m;
  float *adam_m, *adam_v;
  kernels_param_segment *segs;
  int n_segs;
} trained;

static void make(const kernels_backend *kb, const dit_config *c, trained *t) {
  memset(t, 0, sizeof *t);
  CHECK_OK(dit_create(&t->m, c, kb, 512, 4));
  CHECK_OK(dit_init(t->m, 3));
  CHECK_OK(mt_perturb(t->m, 4, 0.05f));
  size_t bytes = dit_num_params(t->m) * sizeof(float);
  CHECK_OK(kb->alloc(kb, (void **)&t->adam_m, bytes));
  CHECK_OK(kb->alloc(kb, (void **)&t->adam_v, bytes));
  CHECK_OK(train_adamw_segments(t->m, &t->segs, &t->n_segs));
}

static void drop(const kernels_backend *kb, trained *t) {
  kb->free(kb, t->adam_m), kb->free(kb, t->adam_v), kb->free(kb, t->segs);
  dit_free(&t->m);
}

static double one_step(trained *t, const dit_batch *b) {
  double loss = 0;
  CHECK_OK(dit_zero_grad(t->m));
  CHECK_OK(dit_forward(t->m, b, NULL, &loss));
  CHECK_OK(dit_backward(t->m, b));
  return loss;
}

static void to_host(const kernels_backend *kb, float *h, const float *d, size_t n) {
  CHECK_OK(kb->to_host(kb, h, d, n * sizeof(float)));
}

static void run(const kernels_backend *kb, int recompute) {
  dit_config c = mt_config();
  c.hidden = 128, c.heads = 2, c.depth = 2, c.recompute = recompute;  // head dim 64
  train_config tc;
  dit_config unused;
  config_defaults(&unused, &tc);
  tc.lr = 1e-3f;
  mt_batch mb;
  CHECK_OK(mt_batch_make(&mb, CLIPS, 3, 12, 3, 11, IDS));
  dev_batch db;
  CHECK_OK(device_batch(kb, &mb, &db));
  trained e, g;
  make(kb, &c, &e), make(kb, &c, &g);
  dit_set_graphs(e.m, 0);
  size_t n = dit_num_params(e.m);
  float *he = malloc(n * sizeof(float)), *hg = malloc(n * sizeof(float));
  for (int64_t s = 1; s <= 3; s++) {
    double le = one_step(&e, &db.b), lg = one_step(&g, &db.b);
    CHECK(le == lg, "recompute %d, step %lld: loss %.9g eager vs %.9g graphs", recompute,
          (long long)s, le, lg);
    to_host(kb, he, dit_grads(e.m), n), to_host(kb, hg, dit_grads(g.m), n);
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp(&he[i], &hg[i], sizeof(float)) != 0;
    CHECK(diff == 0, "recompute %d, step %lld: %zu of %zu gradients differ", recompute,
          (long long)s, diff, n);
    CHECK_OK(train_adamw(e.m, &tc, e.adam_m, e.adam_v, e.segs, e.n_segs, tc.lr, s, 1.0f));
    CHECK_OK(train_adamw(g.m, &tc, g.adam_m, g.adam_v, g.segs, g.n_segs, tc.lr, s, 1.0f));
    printf("recompute %d, step %lld: loss %.9g, both modes\n", recompute, (long long)s, le);
  }
  to_host(kb, he, dit_params(e.m), n), to_host(kb, hg, dit_params(g.m), n);
  CHECK(!memcmp(he, hg, n * sizeof(float)), "recompute %d: weights differ after 3 steps",
        recompute);
  kgraph_stats st = dit_graph_stats(g.m), off = dit_graph_stats(e.m);
  CHECK(st.captures == 2 && st.replays == 2 && st.failures == 0,
        "recompute %d: %lld recordings, %lld replays, %lld failures (want 2, 2, 0)", recompute,
        (long long)st.captures, (long long)st.replays, (long long)st.failures);
  CHECK(off.captures == 0 && off.replays == 0, "graphs off: %lld recordings", (long long)off.captures);
  CHECK_OK(kb->sync(kb));
  free(he), free(hg);
  drop(kb, &e), drop(kb, &g);
  for (int i = 0; i < 9; i++) kb->free(kb, db.buf[i]);
  mt_batch_free(&mb);
}

// argv[1], if given: the one recompute mode to run (0 or 2; the emulated device's build
// registers each as a test of its own, so that ctest -j2 runs them side by side).
int main(int argc, char **argv) {
  int only = argc > 1 ? atoi(argv[1]) : -1;
  if (argc > 1 && only != 0 && only != 2) {
    fprintf(stderr, "gpu_graphs: recompute mode '%s': 0 or 2\n", argv[1]);
    return 1;
  }
  setenv("TESSERA_CUDA_GRAPHS", "1", 1);  // read when the backend is created, below
  setenv("TESSERA_CUDA_ATTENTION_DETERMINISTIC", "1", 1);  // read at the first attention call
  char why[256];
  if (!kernels_cuda_available(why, sizeof why)) {
    printf("SKIP: %s\n", why);
    return 77;
  }
  const kernels_backend *kb = kernels_cuda();
  CHECK(kb->graph_begin && kb->graph_end && kb->graph_launch && kb->graph_free,
        "TESSERA_CUDA_GRAPHS=1 but the CUDA table has no graph entries");
  if (kb->graph_begin) {
    if (only != 2) run(kb, 0);
    if (only != 0) run(kb, 2);
  }
  char rep[4096];
  kernels_cuda_attention_report(rep, sizeof rep);
  printf("%s", rep);
  return check_done();
}
