// tests/model/test_kvcache.c — chunk-by-chunk sampling with the K/V cache (model/kvcache.h)
// against the same sampling with the context recomputed in the model's input every step
// (sample_params.chunk_recompute, the reference), fp32 on the CPU, a 2-block model with
// labels and captions:
// - within 1e-5 for 4 and 5 chunks (a shorter last one too), without a window and with
//   windows of 1 and 2 chunks (the cache's ring replaces the oldest), unguided and guided
//   (label, caption and negative caption: a cache per branch), Euler and UniPC, and with
//   a second expert (a cache per model); with bf16 activations (cpu-bf16) within 1e-2
//   (measured: equal);
// - the tokens through the model (dit_forward_tokens): K (steps + 1) - 1 chunks a branch
//   with the cache, steps K (K + 1) / 2 without, exactly; the cache's bytes as
//   model/kvcache.h gives them;
// - UniPC chunk by chunk: chunk 0 equals the whole clip's UniPC sample's first chunk (the
//   mask hides the later chunks from it), and with a model that does not depend on t (so
//   that both solve one ODE whatever their timesteps) 8 UniPC steps land nearer the
//   converged Euler solution (80 steps) than 8 Euler steps do.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/rng.h"
#include "model/dit.h"
#include "model/kvcache.h"
#include "model/sample/sample.h"

enum { H = 2, W = 3, P = 3, TMAX = 5, NMAX = TMAX * H * W, TEXT = 8, STEPS = 5 };

static dit_config config(int chunk, int window) {
  dit_config mc;
  train_config tc;
  config_defaults(&mc, &tc);
  mc.pt = 1, mc.ph = 1, mc.pw = 1, mc.channels = 3, mc.num_classes = 3;
  mc.hidden = 32, mc.heads = 2, mc.depth = 2, mc.freq_dim = 32;
  mc.text_dim = TEXT, mc.text_len = 4;
  mc.attn_mask = KERNELS_MASK_BLOCK_CAUSAL, mc.mask_chunk = chunk, mc.mask_window = window;
  CHECK_OK(config_validate(&mc, &tc));
  return mc;
}

// Random weights (adaLN-Zero's zeros would make every output 0 and every check trivial).
static const kernels_backend *backend;  // kernels_cpu(), or cpu-bf16 for test_bf16

static dit_model *model(const dit_config *mc, uint64_t seed) {
  dit_model *m = NULL;
  CHECK_OK(dit_create(&m, mc, backend, 2 * NMAX, 4));
  float *p = dit_params(m);
  rng_key k = {seed, 0, 0, 0};
  for (size_t i = 0; i < dit_num_params(m); i++) p[i] = 0.2f * (float)rng_normal(&k, i);
  CHECK_OK(dit_refresh_weights(m));
  return m;
}

static float caption[3 * TEXT], negative[2 * TEXT];

static sample_params params(int T, int guided, sample_solver solver) {
  sample_params sp = {.T = T, .H = H, .W = W, .label = -1, .cfg = 1.0f, .steps = STEPS,
                      .seed = 4, .t_shift_tokens = 16, .chunked = 1, .solver = solver};
  if (solver == SAMPLE_SOLVER_UNIPC) sp.schedule = SAMPLE_SCHEDULE_WAN, sp.shift = 3.0;
  if (guided)
    sp.label = 1, sp.cfg = 3.0f, sp.text = caption, sp.text_tokens = 3, sp.text_neg = negative,
    sp.text_neg_tokens = 2;
  return sp;
}

static double max_diff(const float *a, const float *b, size_t n) {
  double d = 0;
  for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
  return d;
}

// Cached against recomputed; tokens through the model of each (with a second expert,
// Wan 2.2's, of other weights: the steps below the boundary, and a cache of its own).
static void compare(int T, int chunk, int window, int guided, sample_solver solver,
                    int experts) {
  dit_config mc = config(chunk, window);
  dit_model *m = model(&mc, 11), *m2 = experts > 1 ? model(&mc, 13) : NULL;
  sample_params sp = params(T, guided, solver);
  sp.expert2 = m2, sp.boundary = 0.6, sp.cfg2 = 2.0f;
  int N = T * H * W, cs = chunk * H * W, K = (T + chunk - 1) / chunk, C = guided ? 2 : 1;
  float ref[NMAX * P], got[NMAX * P];
  sp.chunk_recompute = 1;
  int64_t t0 = dit_forward_tokens(m) + (m2 ? dit_forward_tokens(m2) : 0);
  CHECK_OK(sample_generate(m, &sp, ref));
  int64_t t1 = dit_forward_tokens(m) + (m2 ? dit_forward_tokens(m2) : 0);
  sp.chunk_recompute = 0;
  CHECK_OK(sample_generate(m, &sp, got));
  int64_t t2 = dit_forward_tokens(m) + (m2 ? dit_forward_tokens(m2) : 0);
  double d = max_diff(ref, got, (size_t)N * P), scale = 0;
  for (int i = 0; i < N * P; i++) scale = fmax(scale, fabs(ref[i]));
  CHECK(d <= 1e-5 * fmax(1.0, scale) && scale > 0.1,
        "T %d, chunks of %d, window %d, %s, %s, %d expert(s): cached and recomputed differ by "
        "%.2e (values up to %.2f)", T, chunk, window, guided ? "guided" : "unguided",
        solver == SAMPLE_SOLVER_UNIPC ? "UniPC" : "Euler", experts, d, scale);
  // recomputed: step s of chunk k runs its k context chunks and itself; cached: the chunk
  // alone, then once more clean unless it is the last
  int64_t want_ref = 0;
  for (int k = 0; k < K; k++)
    want_ref += (int64_t)STEPS * (k * cs + (k == K - 1 ? N - k * cs : cs));
  int64_t want_kv = (int64_t)STEPS * N + (int64_t)(K - 1) * cs * (m2 ? 2 : 1);
  CHECK(t1 - t0 == C * want_ref && t2 - t1 == C * want_kv,
        "tokens through the model: %lld recomputed (want %lld), %lld cached (want %lld)",
        (long long)(t1 - t0), (long long)(C * want_ref), (long long)(t2 - t1),
        (long long)(C * want_kv));
  printf("test_kvcache: T %d, chunks of %d, window %d, %s, %s, %d expert(s): |cached - "
         "recomputed| %.2e; tokens %lld -> %lld (%.2fx)\n", T, chunk, window,
         guided ? "guided" : "unguided", solver == SAMPLE_SOLVER_UNIPC ? "UniPC" : "Euler",
         experts, d, (long long)(t1 - t0), (long long)(t2 - t1),
         (double)(t1 - t0) / (double)(t2 - t1));
  dit_free(&m);
  dit_free(&m2);
}

// The window is the model's: with one chunk back the last chunk differs from the sample that
// sees every chunk before it (the cases above compare like with like), the first two do not.
static void test_window(void) {
  enum { T = 4, N = T * H * W };
  float out[2][N * P];
  for (int w = 0; w < 2; w++) {
    dit_config mc = config(1, w);
    dit_model *m = model(&mc, 11);
    sample_params sp = params(T, 1, SAMPLE_SOLVER_EULER);
    CHECK_OK(sample_generate(m, &sp, out[w]));
    dit_free(&m);
  }
  CHECK(max_diff(out[0], out[1], 2 * H * W * P) == 0, "chunks 0, 1 depend on the window");
  CHECK(max_diff(out[0] + 3 * H * W * P, out[1] + 3 * H * W * P, H * W * P) > 1e-4,
        "chunk 3 does not depend on the window");
}

// bf16 activations: the cache holds the bf16 keys and values the recomputing forward
// attends to, so the two samples differ by the rounding of its other sums only.
static void test_bf16(void) {
  enum { T = 4, N = T * H * W };
  backend = kernels_cpu_bf16();
  dit_config mc = config(1, 1);
  dit_model *m = model(&mc, 11);
  float ref[N * P], got[N * P];
  sample_params sp = params(T, 1, SAMPLE_SOLVER_EULER);
  sp.chunk_recompute = 1;
  CHECK_OK(sample_generate(m, &sp, ref));
  sp.chunk_recompute = 0;
  CHECK_OK(sample_generate(m, &sp, got));
  double d = max_diff(ref, got, N * P), d0 = max_diff(ref, got, H * W * P);
  printf("test_kvcache: bf16, guided, window 1: |cached - recomputed| %.2e (chunk 0: %.2e)\n", d,
         d0);
  CHECK(d0 == 0, "bf16: chunk 0 (no context) differs by %.2e", d0);
  CHECK(d <= 1e-2, "bf16: cached and recomputed differ by %.2e", d);
  dit_free(&m);
  backend = kernels_cpu();
}

static void test_bytes(void) {
  dit_config mc = config(2, 1);
  dit_model *m = model(&mc, 3);
  dit_kv_cache *kv = NULL;
  CHECK_OK(dit_kv_create(&kv, m, 2, 12, 1));
  // depth x clips x (kept + the chunk) tokens x (K, V) x D x fp32, and the positions
  size_t want = 2 * 2 * (size_t)(1 + 1) * 12 * 2 * 32 * 4 + (2 * 12 * 3 + 4) * 4;
  CHECK(kv && dit_kv_bytes(kv) == want, "cache bytes %zu, want %zu", kv ? dit_kv_bytes(kv) : 0,
        want);
  CHECK(kv && dit_kv_context_tokens(kv) == 12, "context tokens");
  CHECK(kv && dit_kv_commit(kv) == TSR_EINVAL, "a commit without a chunk is refused");
  dit_kv_free(&kv);
  CHECK(kv == NULL, "freed");
  dit_free(&m);
  mc.attn_mask = KERNELS_MASK_FULL;
  CHECK_OK(dit_create(&m, &mc, backend, 2 * NMAX, 4));
  CHECK(dit_kv_create(&kv, m, 1, 12, 1) == TSR_EINVAL, "a full-attention model is refused");
  dit_free(&m);
}

// UniPC chunk by chunk: chunk 0 as the whole clip's; nearer the converged flow than Euler.
static void test_unipc(void) {
  dit_config mc = config(1, 0);
  dit_model *m = model(&mc, 11);
  enum { T = 4, N = T * H * W };
  float whole[N * P], chunked[N * P];
  sample_params sp = params(T, 1, SAMPLE_SOLVER_UNIPC);
  CHECK_OK(sample_generate(m, &sp, chunked));
  sp.chunked = 0;
  CHECK_OK(sample_generate(m, &sp, whole));
  double d0 = max_diff(whole, chunked, H * W * P);
  CHECK(d0 <= 1e-5, "UniPC: chunk 0 chunked and whole differ by %.2e", d0);
  CHECK(max_diff(whole, chunked, N * P) > 1e-4, "UniPC: later chunks equal the whole clip's");
  // no dependence on t: the time embedding's weights zero
  const char *names[] = {"t_embed.fc1.weight", "t_embed.fc1.bias", "t_embed.fc2.weight",
                         "t_embed.fc2.bias"};
  for (int i = 0; i < 4; i++) {
    int k = dit_find_tensor(m, names[i]);
    CHECK(k >= 0, "tensor %s", names[i]);
    if (k >= 0) memset(dit_params(m) + dit_tensor_info(m, k)->offset, 0,
                       dit_tensor_info(m, k)->numel * sizeof(float));
  }
  CHECK_OK(dit_refresh_weights(m));
  float fine[N * P], eul[N * P];
  sp = params(T, 1, SAMPLE_SOLVER_EULER);
  sp.schedule = SAMPLE_SCHEDULE_WAN, sp.shift = 3.0, sp.steps = 80;
  CHECK_OK(sample_generate(m, &sp, fine));
  sp.steps = 8;
  CHECK_OK(sample_generate(m, &sp, eul));
  sp.solver = SAMPLE_SOLVER_UNIPC;
  CHECK_OK(sample_generate(m, &sp, chunked));
  double e_euler = max_diff(fine, eul, N * P), e_unipc = max_diff(fine, chunked, N * P);
  printf("test_kvcache: 8 steps chunk by chunk, off 80 Euler steps: Euler %.3e, UniPC %.3e\n",
         e_euler, e_unipc);
  CHECK(e_unipc < 0.5 * e_euler, "UniPC (%.3e) is not nearer the converged flow than Euler "
        "(%.3e)", e_unipc, e_euler);
  dit_free(&m);
}

int main(void) {
  backend = kernels_cpu();
  rng_key k = {5, 0, 0, 0};
  for (int i = 0; i < 3 * TEXT; i++) caption[i] = (float)rng_normal(&k, i);
  for (int i = 0; i < 2 * TEXT; i++) negative[i] = (float)rng_normal(&k, 100 + i);
  compare(4, 1, 0, 0, SAMPLE_SOLVER_EULER, 1);
  compare(4, 1, 0, 1, SAMPLE_SOLVER_EULER, 1);
  compare(4, 1, 1, 1, SAMPLE_SOLVER_EULER, 1);
  compare(5, 1, 2, 1, SAMPLE_SOLVER_EULER, 1);
  compare(5, 2, 1, 0, SAMPLE_SOLVER_EULER, 1);
  compare(5, 2, 0, 1, SAMPLE_SOLVER_UNIPC, 1);
  compare(4, 1, 1, 1, SAMPLE_SOLVER_EULER, 2);
  test_window();
  test_bf16();
  test_bytes();
  test_unipc();
  return check_done();
}
