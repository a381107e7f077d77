// tests/model/test_dit_graphs.c — the model's use of recorded graphs (dit.c run_phase,
// kernels.h graph_*) without a GPU, on a "recording" CPU backend: the CPU table with graph
// entries that count their calls. The CPU runs every entry at once, so a "recorded" phase
// has run by graph_end; the fake's first launch of a graph is therefore a no-op and later
// launches (replays) cannot redo the work: those steps are checked by their calls only
// (bitwise results of real replays: tests/gpu/test_graphs.c on a GPU). Checked:
// - step 1 of a shape runs eagerly (no graph call), step 2 records the forward and the
//   backward (two graphs) and launches each, step 3 replays those two, in order; losses
//   and gradients of steps 1-2 bitwise those of the plain CPU backend;
// - graph_begin failing: one warning, the phase runs eagerly (bitwise the plain backend's
//   results for 3 steps) and that shape is never recorded again;
// - a stale graph (the backend's scratch moved) runs eagerly: bitwise results;
// - no graph call with dit_set_graphs(m, 0) or an attention hook that is not recordable;
//   a recordable hook is recorded; no recording of the backward while a bucket hook is set
//   (the ring and the all-reduce work on the host), while the forward's is; the attention
//   hook is part of the key;
// - the bound of the clips' length the attention entries get (dit_batch.max_len, rounded)
//   is part of the key: new contents of the same buffers with the same token and clip
//   counts but a longest clip in another power-of-two range run eagerly (a replay would use
//   the plan of the other bound), and contents in the same range replay.
#include <string.h>

#include "check.h"
#include "mt.h"

static const mt_clip CLIPS[3] = {{2, 2, 3, 1, 0.3f}, {1, 3, 2, 3, 0.7f}, {3, 1, 2, 0, 0.55f}};
static const int IDS[3] = {10, 11, 12};

enum { MODE_RECORD, MODE_FAIL_BEGIN, MODE_STALE };
typedef struct {
  int id, launched;
} fake_graph;
static struct {
  int mode, recording;
  int begins, ends, launches, replays, frees, next_id;
  int order[16], n_order;  // ids of the launched graphs
} F;

static tsr_status fake_begin(const kernels_backend *kb) {
  F.begins++;
  if (F.mode == MODE_FAIL_BEGIN) return err_set(TSR_EIO, "fake: no recording here");
  F.recording = 1;
  return TSR_OK;
}
static tsr_status fake_end(const kernels_backend *kb, void **graph) {
  F.ends++;
  F.recording = 0;
  fake_graph *g = calloc(1, sizeof *g);
  g->id = ++F.next_id;
  *graph = g;
  return TSR_OK;
}
static tsr_status fake_launch(const kernels_backend *kb, void *graph, int *stale) {
  fake_graph *g = graph;
  *stale = F.mode == MODE_STALE && g->launched;  // replays go stale
  if (*stale) return TSR_OK;
  F.launches++;
  if (g->launched) F.replays++;
  g->launched = 1;
  if (F.n_order < 16) F.order[F.n_order++] = g->id;
  return TSR_OK;
}
static void fake_free(const kernels_backend *kb, void *graph) {
  F.frees++;
  free(graph);
}

static kernels_backend recording_backend(int mode) {
  memset(&F, 0, sizeof F);
  F.mode = mode;
  kernels_backend b = *kernels_cpu();
  b.graph_begin = fake_begin, b.graph_end = fake_end, b.graph_launch = fake_launch;
  b.graph_free = fake_free;
  return b;
}

static void step(dit_model *m, const dit_batch *b, double *loss) {
  CHECK_OK(dit_zero_grad(m));
  CHECK_OK(dit_forward(m, b, NULL, loss));
  CHECK_OK(dit_backward(m, b));
}

static dit_model *model_sized(const kernels_backend *kb, int max_tokens) {
  dit_config c = mt_config();
  dit_model *m = NULL;
  CHECK_OK(dit_create(&m, &c, kb, max_tokens, 4));
  CHECK_OK(dit_init(m, 3));
  CHECK_OK(mt_perturb(m, 4, 0.1f));
  return m;
}
static dit_model *model_on(const kernels_backend *kb) { return model_sized(kb, 64); }

static int same(dit_model *a, dit_model *b, double la, double lb) {
  return la == lb && !memcmp(dit_grads(a), dit_grads(b), dit_num_params(a) * sizeof(float));
}

static void test_record_replay(const mt_batch *mb) {
  kernels_backend rb = recording_backend(MODE_RECORD);
  dit_model *g = model_on(&rb), *e = model_on(kernels_cpu());
  double lg, le;
  step(g, &mb->b, &lg), step(e, &mb->b, &le);
  CHECK(F.begins == 0 && F.launches == 0, "step 1: %d recordings, %d launches", F.begins, F.launches);
  CHECK(same(g, e, lg, le), "step 1 (eager) differs from the plain backend");
  step(g, &mb->b, &lg), step(e, &mb->b, &le);
  CHECK(F.begins == 2 && F.ends == 2 && F.launches == 2 && F.replays == 0,
        "step 2: %d begins, %d ends, %d launches, %d replays", F.begins, F.ends, F.launches,
        F.replays);
  CHECK(same(g, e, lg, le), "step 2 (recorded) differs from the plain backend");
  step(g, &mb->b, &lg);
  CHECK(F.begins == 2 && F.replays == 2 && F.n_order == 4 && F.order[2] == F.order[0] &&
            F.order[3] == F.order[1] && F.order[0] != F.order[1],
        "step 3: %d begins, %d replays, launch order %d %d %d %d", F.begins, F.replays,
        F.order[0], F.order[1], F.order[2], F.order[3]);
  kgraph_stats s = dit_graph_stats(g);
  CHECK(s.captures == 2 && s.replays == 2 && s.eager == 2 && s.graphs == 2,
        "stats: captures %lld replays %lld eager %lld graphs %d", (long long)s.captures,
        (long long)s.replays, (long long)s.eager, s.graphs);
  dit_free(&g), dit_free(&e);
  CHECK(F.frees == 2, "dit_free freed %d of 2 graphs", F.frees);
}

static void test_fallbacks(const mt_batch *mb) {
  for (int mode = MODE_FAIL_BEGIN; mode <= MODE_STALE; mode++) {
    kernels_backend rb = recording_backend(mode);
    dit_model *g = model_on(&rb), *e = model_on(kernels_cpu());
    for (int s = 1; s <= 4; s++) {
      double lg, le;
      step(g, &mb->b, &lg), step(e, &mb->b, &le);
      CHECK(same(g, e, lg, le), "%s, step %d: results differ from the plain backend",
            mode == MODE_STALE ? "stale graphs" : "failed recording", s);
    }
    if (mode == MODE_FAIL_BEGIN)
      CHECK(F.begins == 2 && F.launches == 0 && dit_graph_stats(g).failures == 2,
            "failed recording: %d begins (want 2: one per phase, then eager for good)", F.begins);
    else  // recorded at step 2, stale at 3 (cache cleared: eager), recorded again later
      CHECK(F.begins >= 2 && F.replays == 0, "stale: %d begins, %d replays", F.begins,
            F.replays);
    dit_free(&g), dit_free(&e);
  }
}

static tsr_status hook_fwd(void *ctx, const kernels_backend *kb, const dit_batch *b, void *out,
                           float *lse, const void *q, const void *k, const void *v, int H,
                           int Dh, float scale) {
  return kb->attention_forward(kb, out, lse, q, k, v, b->cu_seqlens, b->n_clips, b->max_len, b->L,
                               H, Dh, scale);
}
static tsr_status hook_bwd(void *ctx, const kernels_backend *kb, const dit_batch *b, void *dq,
                           void *dk, void *dv, const void *dout, const void *q, const void *k,
                           const void *v, const void *out, const float *lse, int H, int Dh,
                           float scale) {
  return kb->attention_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, b->cu_seqlens,
                                b->n_clips, b->max_len, b->L, H, Dh, scale);
}
static void no_bucket(void *ctx, int bucket) { (void)ctx, (void)bucket; }
static int yes(void *ctx) { return ctx == NULL; }

static void test_not_recorded(const mt_batch *mb) {
  kernels_backend rb = recording_backend(MODE_RECORD);
  dit_model *g = model_on(&rb);
  double l;
  dit_set_graphs(g, 0);
  for (int s = 0; s < 3; s++) step(g, &mb->b, &l);
  CHECK(F.begins == 0, "dit_set_graphs(0): %d recordings", F.begins);
  dit_set_graphs(g, 1);
  dit_attention hook = {hook_fwd, hook_bwd, NULL, NULL};
  dit_set_attention(g, &hook);
  for (int s = 0; s < 3; s++) step(g, &mb->b, &l);
  CHECK(F.begins == 0, "attention hook: %d recordings", F.begins);
  hook.recordable = yes;  // a hook that queues backend entries only: recorded
  dit_set_attention(g, &hook);
  for (int s = 0; s < 3; s++) step(g, &mb->b, &l);
  CHECK(F.begins == 2 && F.replays == 2, "recordable hook: %d recordings, %d replays", F.begins,
        F.replays);
  dit_set_attention(g, NULL);
  dit_set_bucket_hook(g, no_bucket, NULL);
  int replays = F.replays;
  for (int s = 0; s < 3; s++) step(g, &mb->b, &l);
  // the forward is another key (another attention): recorded at its 2nd use, replayed at
  // the 3rd; the backward never
  CHECK(F.begins == 3 && F.replays == replays + 1,
        "bucket hook: %d recordings, %d replays (want the forward's only)", F.begins,
        F.replays - replays);
  dit_free(&g);
}

// Copies batch `from`'s contents into the buffers of `into` (same clip and token counts on
// the CPU backend) and returns into's batch with from's longest clip: the trainer's case of
// one set of buffers refilled for each microbatch.
static dit_batch refill(mt_batch *into, const mt_batch *from) {
  size_t sz[7] = {sizeof(int32_t) * (from->C + 1), sizeof(int32_t) * (from->L * 3 + 1),
                  sizeof(int32_t) * from->C, sizeof(float) * from->C,
                  sizeof(float) * ((size_t)from->L * from->P + 1),
                  sizeof(float) * ((size_t)from->L * from->P + 1), sizeof(float) * from->C};
  for (int i = 0; i < 7; i++) memcpy(into->dev[i], from->dev[i], sz[i]);
  dit_batch b = into->b;
  b.max_len = from->b.max_len;
  return b;
}

static void test_bound_in_key(void) {
  // 130 tokens in 2 clips each: longest 65 (bound 128), 129 (bound 130) and 66 (bound 128)
  static const mt_clip A[2] = {{5, 13, 1, 0, 0.4f}, {5, 13, 1, 1, 0.6f}};
  static const mt_clip B[2] = {{1, 1, 1, 2, 0.4f}, {3, 43, 1, 0, 0.6f}};
  static const mt_clip C[2] = {{4, 16, 1, 1, 0.4f}, {6, 11, 1, 2, 0.6f}};
  const int ids[2] = {20, 21};
  mt_batch a, b, c;
  CHECK_OK(mt_batch_make(&a, A, 2, 12, 2, 5, ids));
  CHECK_OK(mt_batch_make(&b, B, 2, 12, 2, 6, ids));
  CHECK_OK(mt_batch_make(&c, C, 2, 12, 2, 7, ids));
  CHECK(a.L == 130 && b.L == 130 && c.L == 130, "130 tokens each: %d %d %d", a.L, b.L, c.L);
  kernels_backend rb = recording_backend(MODE_RECORD);
  dit_model *g = model_sized(&rb, 130), *e = model_sized(kernels_cpu(), 130);
  double lg, le;
  step(g, &a.b, &lg), step(g, &a.b, &lg);
  CHECK(F.begins == 2 && F.replays == 0, "longest 65: recorded at step 2 (%d recordings)", F.begins);
  dit_batch bb = refill(&a, &b);
  step(g, &bb, &lg), step(e, &b.b, &le);
  CHECK(F.begins == 2 && F.replays == 0, "longest 129: a new key, eager (%d recordings, %d replays)",
        F.begins, F.replays);
  CHECK(same(g, e, lg, le), "longest 129 in the refilled buffers: the plain backend's results");
  dit_batch bc = refill(&a, &c);
  step(g, &bc, &lg);
  CHECK(F.begins == 2 && F.replays == 2, "longest 66: the graphs of longest 65 replayed (%d replays)",
        F.replays);
  dit_free(&g), dit_free(&e);
  mt_batch_free(&a), mt_batch_free(&b), mt_batch_free(&c);
}

int main(void) {
  mt_batch mb;
  CHECK_OK(mt_batch_make(&mb, CLIPS, 3, 12, 3, 11, IDS));
  test_record_replay(&mb);
  test_fallbacks(&mb);
  test_not_recorded(&mb);
  mt_batch_free(&mb);
  test_bound_in_key();
  return check_done();
}
