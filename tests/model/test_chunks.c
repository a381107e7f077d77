// tests/model/test_chunks.c — diffusion forcing (train.noise_per_chunk) and chunk-by-chunk
// sampling of a block_causal model:
// - the objective cuts a clip into one segment a mask chunk, chunk k's level is the
//   counter-k draw (chunk 0's the clip's own), x_t of its rows uses it, and a CP split
//   gives the whole clip's rows bitwise, and so do a placement's runs of the clip (each run
//   cut at its chunks, the whole clip's level of each; train.placement = blockwise);
// - with every chunk at one level (t_logit_std 0) the segmented batch is the per-clip one:
//   the same inputs bitwise, loss and gradients within float rounding;
// - with distinct levels the gradients match finite differences of the loss;
// - chunk-by-chunk sampling's first chunk equals the whole clip's sampling's first chunk
//   (the mask hides the later chunks from it), every value finite; a full-attention model
//   is refused.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/rng.h"
#include "model/dit.h"
#include "model/objective.h"
#include "model/sample/sample.h"

enum { T = 4, H = 2, W = 3, N = T * H * W, P = 3 };

static void configs(dit_config *mc, train_config *tc) {
  config_defaults(mc, tc);
  mc->pt = 1, mc->ph = 1, mc->pw = 1, mc->channels = 3, mc->num_classes = 0;
  mc->hidden = 32, mc->heads = 2, mc->depth = 1, mc->freq_dim = 32;
  mc->attn_mask = KERNELS_MASK_BLOCK_CAUSAL, mc->mask_chunk = 1;
  tc->seed = 7, tc->t_shift_tokens = 16, tc->noise_per_chunk = 1;
}

// Random weights (adaLN-Zero's zeros would make every output 0 and every check trivial).
static void random_weights(dit_model *m, uint64_t seed) {
  float *p = dit_params(m);
  rng_key k = {seed, 0, 0, 0};
  for (size_t i = 0; i < dit_num_params(m); i++) p[i] = 0.2f * (float)rng_normal(&k, i);
  CHECK_OK(dit_refresh_weights(m));
}

static void test_objective(const dit_config *mc, const train_config *tc, const uint8_t *tok) {
  objective_batch whole, parts;
  CHECK_OK(objective_alloc(&whole, 64, objective_max_segments(mc, tc, 64, 2), P));
  CHECK_OK(objective_alloc(&parts, 64, objective_max_segments(mc, tc, 64, 2), P));
  objective_clip c = {.clip_id = 3, .total_tokens = N, .len = N, .T = T, .H = H, .W = W,
                      .label = -1, .tokens = tok};
  CHECK_OK(objective_build(&whole, mc, tc, 5, 1, &c, 1));
  CHECK(whole.n_clips == T && whole.attn_clips == 1 && whole.attn_cu[1] == N &&
            whole.max_len == N, "%d segments, %d clips of attention", whole.n_clips,
        whole.attn_clips);
  CHECK(whole.t[0] == (float)objective_timestep(tc, 5, 3, N), "chunk 0 has the clip's level");
  for (int k = 0; k < T; k++) {
    CHECK(whole.cu_seqlens[k] == k * H * W, "segment %d starts at %d", k, whole.cu_seqlens[k]);
    CHECK(whole.t[k] == (float)objective_chunk_timestep(tc, 5, 3, k, N), "chunk %d's level", k);
    for (int i = k * H * W; i < (k + 1) * H * W; i++)
      for (int q = 0; q < P; q++) {
        float x0 = (float)tok[i * P + q] * (2.0f / 255.0f) - 1.0f;
        float got = whole.x[i * P + q] - whole.t[k] * whole.target[i * P + q];
        CHECK(fabsf(got - x0) < 1e-5f, "token %d: x_t - t v = %g, x0 %g", i, got, x0);
      }
  }
  CHECK(whole.t[1] != whole.t[0] && whole.t[2] != whole.t[1], "the chunks' levels differ");
  // CP chunks [0, 5) and [5, 24): segments [0, 5), [5, 6), [6, 12), ...
  objective_clip ch[2] = {c, c};
  ch[0].len = 5, ch[1].first_token = 5, ch[1].len = N - 5, ch[1].tokens = tok + 5 * P;
  CHECK_OK(objective_build(&parts, mc, tc, 5, 1, ch, 2));
  CHECK(parts.n_clips == T + 1 && parts.attn_clips == 2 && parts.attn_cu[1] == 5, "split");
  CHECK(parts.t[0] == whole.t[0] && parts.t[1] == whole.t[0] && parts.t[2] == whole.t[1],
        "a CP split keeps each chunk's level");
  CHECK(!memcmp(parts.x, whole.x, sizeof(float) * N * P), "x_t differs when CP-split");
  CHECK(!memcmp(parts.target, whole.target, sizeof(float) * N * P), "target differs");
  objective_free(&whole);
  objective_free(&parts);
}

// Placed runs (objective_device_build_runs, a blockwise placement's tokens of one rank):
// clip 3 held as runs [0, 5) and [14, 24), then clip 4 of which the rank holds nothing (an
// empty run). Each run is cut at its mask chunks into segments with the whole clip's level
// of that chunk, its x_t and target rows are the whole clip's at those tokens (bitwise, on
// the CPU), and the clips of attention are the two clips.
static void test_runs(const dit_config *mc, const train_config *tc, const uint8_t *tok) {
  const kernels_backend *kb = kernels_cpu();
  int C = objective_max_segments(mc, tc, 64, 4);
  objective_device whole, runs;
  CHECK_OK(objective_device_alloc(&whole, kb, 64, C, P));
  CHECK_OK(objective_device_alloc(&runs, kb, 64, C, P));
  objective_clip c = {.clip_id = 3, .total_tokens = N, .len = N, .T = T, .H = H, .W = W,
                      .label = -1, .tokens = tok};
  CHECK_OK(objective_device_build(&whole, mc, tc, 5, 2, &c, 1));
  objective_clip r[3] = {c, c, c};
  r[0].len = 5;
  r[1].first_token = 14, r[1].len = N - 14, r[1].tokens = tok + 14 * P;
  r[2].clip_id = 4, r[2].len = 0, r[2].tokens = NULL;
  int clip_of[3] = {0, 0, 1};
  CHECK_OK(objective_device_build_runs(&runs, mc, tc, 5, 2, r, clip_of, 3));
  const dit_batch *w = &whole.batch, *b = &runs.batch;
  // segments: [0, 5) chunk 0, [14, 18) chunk 2, [18, 24) chunk 3, and clip 4's empty one
  int32_t cu[5], acu[3];
  float tw[T], tb[4], xw[N * P], xb[N * P], vw[N * P], vb[N * P];
  CHECK(b->n_clips == 4 && b->attn_clips == 2 && b->L == N - 9, "%d segments, %d clips of "
        "attention, %d tokens", b->n_clips, b->attn_clips, b->L);
  CHECK_OK(kb->to_host(kb, cu, b->cu_seqlens, sizeof cu));
  CHECK_OK(kb->to_host(kb, acu, b->attn_cu, sizeof acu));
  CHECK(cu[1] == 5 && cu[2] == 9 && cu[3] == 15 && cu[4] == 15 && acu[1] == 15 && acu[2] == 15,
        "segments end at %d %d %d %d, clips at %d %d", cu[1], cu[2], cu[3], cu[4], acu[1], acu[2]);
  CHECK_OK(kb->to_host(kb, tw, w->t, sizeof tw));
  CHECK_OK(kb->to_host(kb, tb, b->t, sizeof tb));
  CHECK(tb[0] == tw[0] && tb[1] == tw[2] && tb[2] == tw[3], "the runs' segments' levels %g %g "
        "%g, the whole clip's chunks 0, 2, 3: %g %g %g", tb[0], tb[1], tb[2], tw[0], tw[2], tw[3]);
  CHECK_OK(kb->to_host(kb, xw, w->x, sizeof xw));
  CHECK_OK(kb->to_host(kb, vw, w->target, sizeof vw));
  CHECK_OK(kb->to_host(kb, xb, b->x, sizeof(float) * (size_t)b->L * P));
  CHECK_OK(kb->to_host(kb, vb, b->target, sizeof(float) * (size_t)b->L * P));
  size_t head = 5 * P * sizeof(float), tail = (size_t)(N - 14) * P * sizeof(float);
  CHECK(!memcmp(xb, xw, head) && !memcmp(xb + 5 * P, xw + 14 * P, tail), "x_t of the runs is "
        "not the whole clip's at their tokens");
  CHECK(!memcmp(vb, vw, head) && !memcmp(vb + 5 * P, vw + 14 * P, tail), "target of the runs "
        "is not the whole clip's at their tokens");
  objective_device_free(&whole);
  objective_device_free(&runs);
}

static double loss_of(dit_model *m, const dit_batch *b) {
  double l;
  CHECK_OK(dit_forward(m, b, NULL, &l));
  return l;
}

// Loss and gradients of the segmented batch against the per-clip one at one shared level,
// then finite differences at distinct levels.
static void test_model(const dit_config *mc, const train_config *tc, const uint8_t *tok) {
  const kernels_backend *kb = kernels_cpu();
  int C = objective_max_segments(mc, tc, N, 1);
  dit_model *m;
  CHECK_OK(dit_create(&m, mc, kb, N, C));
  CHECK_OK(dit_init(m, 1));
  random_weights(m, 11);
  size_t np = dit_num_params(m);
  objective_clip c = {.clip_id = 3, .total_tokens = N, .len = N, .T = T, .H = H, .W = W,
                      .label = -1, .tokens = tok};
  train_config one = *tc, clip = *tc;
  one.t_logit_std = 0.0f, one.t_logit_mean = 0.3f;  // every chunk at sigmoid(0.3)
  clip = one, clip.noise_per_chunk = 0;
  objective_batch ob[2];
  objective_device dev[2];
  double loss[2];
  float *g[2];
  for (int v = 0; v < 2; v++) {
    CHECK_OK(objective_alloc(&ob[v], N, C, P));
    CHECK_OK(objective_device_alloc(&dev[v], kb, N, C, P));
    CHECK_OK(objective_build(&ob[v], mc, v ? &one : &clip, 2, 1, &c, 1));
    CHECK_OK(objective_upload(&dev[v], &ob[v], 0));
    CHECK_OK(dit_zero_grad(m));
    loss[v] = loss_of(m, &dev[v].batch);
    CHECK_OK(dit_backward(m, &dev[v].batch));
    g[v] = malloc(np * sizeof(float));
    memcpy(g[v], dit_grads(m), np * sizeof(float));
  }
  CHECK(ob[1].n_clips == T && ob[0].n_clips == 1, "segments %d, clips %d", ob[1].n_clips,
        ob[0].n_clips);
  CHECK(!memcmp(ob[0].x, ob[1].x, sizeof(float) * N * P), "one level: the same x_t");
  CHECK(fabs(loss[0] - loss[1]) <= 1e-6 * fabs(loss[0]), "loss %.9g per clip, %.9g per chunk",
        loss[0], loss[1]);
  double worst = 0, gmax = 0;
  for (size_t i = 0; i < np; i++) {
    worst = fmax(worst, fabs((double)g[0][i] - g[1][i]));
    gmax = fmax(gmax, fabs((double)g[0][i]));
  }
  CHECK(gmax > 0 && worst <= 1e-5 * gmax, "gradients differ by %g (largest %g)", worst, gmax);
  // distinct levels: dL/dp against central differences for a spread of parameters
  objective_batch fb;
  objective_device fd;
  CHECK_OK(objective_alloc(&fb, N, C, P));
  CHECK_OK(objective_device_alloc(&fd, kb, N, C, P));
  CHECK_OK(objective_build(&fb, mc, tc, 2, 1, &c, 1));
  CHECK_OK(objective_upload(&fd, &fb, 0));
  CHECK_OK(dit_zero_grad(m));
  loss_of(m, &fd.batch);
  CHECK_OK(dit_backward(m, &fd.batch));
  memcpy(g[0], dit_grads(m), np * sizeof(float));
  float *p = dit_params(m);
  int checked = 0;
  for (size_t i = 0; i < np; i += np / 97 + 1) {
    if (fabsf(g[0][i]) < 1e-3f) continue;
    float keep = p[i], h = 1e-2f;
    p[i] = keep + h;
    double up = loss_of(m, &fd.batch);
    p[i] = keep - h;
    double dn = loss_of(m, &fd.batch);
    p[i] = keep;
    double num = (up - dn) / (2.0 * h);
    CHECK(fabs(num - g[0][i]) <= 2e-2 * fmax(fabs(num), fabs(g[0][i])) + 1e-4,
          "param %zu: analytic %g, finite differences %g", i, g[0][i], num);
    checked++;
  }
  CHECK(checked >= 10, "only %d parameters with a gradient", checked);
  for (int v = 0; v < 2; v++) objective_free(&ob[v]), objective_device_free(&dev[v]), free(g[v]);
  objective_free(&fb);
  objective_device_free(&fd);
  dit_free(&m);
}

static void test_sample(dit_config mc) {
  const kernels_backend *kb = kernels_cpu();
  dit_model *m;
  CHECK_OK(dit_create(&m, &mc, kb, 2 * N, 4));
  CHECK_OK(dit_init(m, 1));
  random_weights(m, 12);
  sample_params sp = {.T = T, .H = H, .W = W, .label = -1, .cfg = 1.0f, .steps = 6, .seed = 4,
                      .t_shift_tokens = 16};
  float full[N * P], chunked[N * P];
  CHECK_OK(sample_generate(m, &sp, full));
  sp.chunked = 1;
  CHECK_OK(sample_generate(m, &sp, chunked));
  double d0 = 0, rest = 0;
  for (int i = 0; i < N * P; i++) {
    CHECK(isfinite(chunked[i]), "value %d is %g", i, chunked[i]);
    if (i < H * W * P) d0 = fmax(d0, fabs((double)full[i] - chunked[i]));
    else rest = fmax(rest, fabs((double)full[i] - chunked[i]));
  }
  CHECK(d0 <= 1e-5, "chunk 0: chunked and whole sampling differ by %g", d0);
  CHECK(rest > 1e-4, "later chunks: chunked sampling (clean context) equals the whole clip's");
  dit_free(&m);
  mc.attn_mask = KERNELS_MASK_FULL;
  CHECK_OK(dit_create(&m, &mc, kb, 2 * N, 4));
  CHECK(sample_generate(m, &sp, chunked) == TSR_EINVAL, "--chunked on a full-attention model");
  dit_free(&m);
}

int main(void) {
  dit_config mc;
  train_config tc;
  configs(&mc, &tc);
  CHECK_OK(config_validate(&mc, &tc));
  uint8_t tok[N * P];
  for (int i = 0; i < N * P; i++) tok[i] = (uint8_t)(i * 53 + 7);
  test_objective(&mc, &tc, tok);
  test_model(&mc, &tc, tok);
  test_sample(mc);
  dit_config full = mc;
  full.attn_mask = KERNELS_MASK_FULL;
  CHECK(config_validate(&full, &tc) == TSR_EINVAL, "noise_per_chunk without block_causal");
  train_config placed = tc;
  placed.placement = TRAIN_PLACE_BLOCKWISE;
  CHECK_OK(config_validate(&mc, &placed));
  test_runs(&mc, &tc, tok);
  printf("test_chunks: ok\n");
  return 0;
}
