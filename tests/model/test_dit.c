// tests/model/test_dit.c — the whole DiT on the CPU backend:
// - gradient of the loss w.r.t. sampled elements of EVERY parameter tensor and of the
//   input x against central finite differences (fp32 forward);
// - packing invariance: 3 clips packed give the same per-clip outputs and the same summed
//   gradients as each clip alone;
// - recompute = 1 and 2 give bitwise the same loss and gradients as recompute = 0;
// - q, k, v as one batched GEMM give bitwise the same as three linears;
// - init: tensor table, adaLN-Zero (zero output at init), errors on oversized batches.
// Each of the first three also with captions (model.text_dim > 0: cross-attention, the
// text embedding and the null token; clips with 3, 0 and 2 caption tokens), and for the Wan
// family (model.family = wan: the same captions, no null token, ffn_dim 20), and under the
// attention masks (model.attn_mask = block_causal with a window, and window). A mask is
// also causal where it says: under block_causal the prediction of a clip's first frame does
// not move when its last frame's input does (it does under full attention).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "mt.h"

static const mt_clip CLIPS[3] = {{2, 2, 3, 1, 0.3f}, {1, 3, 2, 3, 0.7f}, {3, 1, 2, 0, 0.55f}};
static const int IDS[3] = {10, 11, 12};
static const int TEXT_TOKENS[3] = {3, 0, 2};

// The models tested: the DiT without and with captions, and the Wan family (captions).
enum { V_PLAIN, V_TEXT, V_WAN, V_CAUSAL, V_WINDOW, NVARIANTS };
static const char *const VARIANT_NAME[NVARIANTS] = {"", " (captions)", " (wan)",
                                                    " (block_causal)", " (window)"};

// The model's config, and the batch's captions when it has text.
static dit_config config_of(int v) {
  dit_config c = v == V_WAN ? mt_wan_config() : v == V_TEXT ? mt_text_config() : mt_config();
  if (v == V_CAUSAL) c.attn_mask = KERNELS_MASK_BLOCK_CAUSAL, c.mask_chunk = 1, c.mask_window = 1;
  if (v == V_WINDOW) c.attn_mask = KERNELS_MASK_WINDOW, c.mask_wt = 0, c.mask_wh = 1, c.mask_ww = 1;
  return c;
}
static tsr_status add_text(mt_batch *mb, int v, const int *n_tokens, const int *ids) {
  return v == V_TEXT || v == V_WAN ? mt_batch_text(mb, n_tokens, mt_text_config().text_dim, 77, ids)
                                   : TSR_OK;
}

// Block-causal attention by frames: the first frame's prediction is the same bit for bit
// when the last frame's input changes; under full attention it moves.
static void test_causal(void) {
  const kernels_backend *kb = kernels_cpu();
  const mt_clip clip[1] = {{3, 2, 2, 1, 0.4f}};
  const int id[1] = {5}, P = 12, frame = 2 * 2;
  for (int masked = 0; masked < 2; masked++) {
    dit_config c = config_of(masked ? V_CAUSAL : V_PLAIN);
    dit_model *m;
    CHECK_OK(dit_create(&m, &c, kb, 64, 4));
    CHECK_OK(dit_init(m, 1));
    CHECK_OK(mt_perturb(m, 2, 0.1f));
    mt_batch mb;
    CHECK_OK(mt_batch_make(&mb, clip, 1, P, 1, 9, id));
    float *p0 = malloc(sizeof(float) * mb.L * P), *p1 = malloc(sizeof(float) * mb.L * P);
    CHECK_OK(dit_forward(m, &mb.b, p0, NULL));
    float *x = (float *)mb.b.x;
    for (int j = 2 * frame * P; j < 3 * frame * P; j++) x[j] += 0.5f;  // the last frame
    CHECK_OK(dit_forward(m, &mb.b, p1, NULL));
    int same = !memcmp(p0, p1, sizeof(float) * frame * P);
    CHECK(same == masked, "%s: the first frame's prediction %s when the last frame changes",
          masked ? "block_causal" : "full", same ? "stays" : "moves");
    free(p0), free(p1);
    mt_batch_free(&mb);
    dit_free(&m);
  }
  // a backend without the masked entries (they are optional) is refused naming it and the entry
  kernels_backend none = *kb;
  none.name = "nomask", none.attention_masked_forward = NULL;
  dit_config c = config_of(V_WINDOW);
  dit_model *m = NULL;
  tsr_status st = dit_create(&m, &c, &none, 64, 4);
  CHECK(st == TSR_EINVAL && m == NULL && strstr(err_msg(), "nomask") &&
            strstr(err_msg(), "attention_masked_forward") && strstr(err_msg(), "window"),
        "a backend without masked attention: %s", err_msg());
  c.attn_mask = KERNELS_MASK_FULL;  // full attention needs none of them
  CHECK_OK(dit_create(&m, &c, &none, 64, 4));
  dit_free(&m);
}

static double loss_of(dit_model *m, const dit_batch *b) {
  double l = 0;
  tsr_status st = dit_forward(m, b, NULL, &l);
  CHECK(st == TSR_OK, "forward: %s", err_msg());
  return l;
}

// FD tolerance: the loss is a float (relative rounding ~6e-8 of a loss ~1), so with
// eps = 1e-2 the central difference carries ~1e-5 of noise; truncation error O(eps^2)
// is below 1e-3 relative for these smooth layers. Pass if |fd - g| <= 3e-2 max(|g|,|fd|)
// + 5e-5.
#define FD_EPS 1e-2f
#define FD_REL 3e-2
#define FD_ABS 5e-5

static double worst_rel;  // largest |fd - g| / max(|g|, |fd|) over checked elements with |g| > 1e-3

static void fd_check(dit_model *m, const dit_batch *b, float *val, double analytic,
                     const char *what, size_t idx) {
  float old = *val;
  *val = old + FD_EPS;
  double lp = loss_of(m, b);
  *val = old - FD_EPS;
  double lm = loss_of(m, b);
  *val = old;
  double fd = (lp - lm) / (2.0 * FD_EPS);
  double diff = fabs(fd - analytic), mag = fmax(fabs(fd), fabs(analytic));
  if (fabs(analytic) > 1e-3 && diff / mag > worst_rel) worst_rel = diff / mag;
  CHECK(diff <= FD_REL * mag + FD_ABS, "%s[%zu]: analytic %.6g fd %.6g", what, idx, analytic, fd);
}

static void test_fd(int v) {
  const kernels_backend *kb = kernels_cpu();
  dit_config c = config_of(v);
  worst_rel = 0;
  dit_model *m;
  CHECK_OK(dit_create(&m, &c, kb, 64, 4));
  CHECK_OK(dit_init(m, 1));
  CHECK_OK(mt_perturb(m, 2, 0.1f));
  mt_batch mb;
  CHECK_OK(mt_batch_make(&mb, CLIPS, 3, 12, 3, 5, IDS));
  CHECK_OK(add_text(&mb, v, TEXT_TOKENS, IDS));
  float *dx;
  CHECK_OK(kb->alloc(kb, (void **)&dx, sizeof(float) * mb.L * 12));
  dit_set_input_grad(m, dx);
  CHECK_OK(dit_zero_grad(m));
  double l0;
  CHECK_OK(dit_forward(m, &mb.b, NULL, &l0));
  CHECK_OK(dit_backward(m, &mb.b));
  dit_set_input_grad(m, NULL);
  size_t n = dit_num_params(m);
  float *g = malloc(n * sizeof(float));
  memcpy(g, dit_grads(m), n * sizeof(float));  // CPU backend: host memory
  float *p = dit_params(m);
  int checked = 0;
  for (int i = 0; i < dit_num_tensors(m); i++) {
    const dit_tensor *t = dit_tensor_info(m, i);
    // the largest-gradient element and 3 counter-random ones
    size_t arg = 0;
    double gnorm = 0;
    for (size_t j = 0; j < t->numel; j++) {
      if (fabsf(g[t->offset + j]) > fabsf(g[t->offset + arg])) arg = j;
      gnorm += (double)g[t->offset + j] * g[t->offset + j];
    }
    CHECK(gnorm > 0, "%s: gradient is all zero", t->name);
    rng_key k = {3, 0, (uint64_t)i, RNG_STREAM_SAMPLER};
    size_t pick[4] = {arg, 0, 0, 0};
    for (int s = 1; s < 4; s++) pick[s] = (size_t)(rng_uniform(&k, s) * t->numel);
    for (int s = 0; s < 4; s++) {
      size_t j = pick[s] < t->numel ? pick[s] : t->numel - 1;
      fd_check(m, &mb.b, &p[t->offset + j], g[t->offset + j], t->name, j);
      checked++;
    }
  }
  // inputs: 8 elements of x spread over the clips
  float *x = (float *)mb.b.x;
  for (int s = 0; s < 8; s++) {
    size_t j = (size_t)s * (mb.L * 12 - 1) / 7;
    fd_check(m, &mb.b, &x[j], dx[j], "x", j);
    checked++;
  }
  printf("fd%s: %d elements of %d tensors + x, loss %.6f, worst relative error %.3g "
         "(|g| > 1e-3), tolerance %.0e rel + %.0e abs\n", VARIANT_NAME[v],
         checked, dit_num_tensors(m), l0, worst_rel, FD_REL, FD_ABS);
  free(g);
  kb->free(kb, dx);
  mt_batch_free(&mb);
  dit_free(&m);
}

static double rel_diff(const float *a, const float *b, size_t n) {
  double d = 0, r = 0;
  for (size_t i = 0; i < n; i++) d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), r += (double)b[i] * b[i];
  return r > 0 ? sqrt(d / r) : sqrt(d);
}

// Packed vs alone: fp32 results differ only by reassociation (GEMM row blocking), so
// outputs and summed gradients must agree to 1e-5 relative (norm of difference).
static void test_packing(int v) {
  const kernels_backend *kb = kernels_cpu();
  dit_config c = config_of(v);
  dit_model *m;
  CHECK_OK(dit_create(&m, &c, kb, 64, 4));
  CHECK_OK(dit_init(m, 7));
  CHECK_OK(mt_perturb(m, 8, 0.1f));
  size_t n = dit_num_params(m);
  mt_batch packed;
  CHECK_OK(mt_batch_make(&packed, CLIPS, 3, 12, 3, 9, IDS));
  CHECK_OK(add_text(&packed, v, TEXT_TOKENS, IDS));
  float *pred_packed = calloc((size_t)packed.L * 12, sizeof(float));
  double lp;
  CHECK_OK(dit_zero_grad(m));
  CHECK_OK(dit_forward(m, &packed.b, pred_packed, &lp));
  CHECK_OK(dit_backward(m, &packed.b));
  float *g_packed = malloc(n * sizeof(float));
  memcpy(g_packed, dit_grads(m), n * sizeof(float));
  CHECK_OK(dit_zero_grad(m));  // alone: gradients accumulate over the three clips
  double lsum = 0;
  for (int ci = 0; ci < 3; ci++) {
    mt_batch one;
    CHECK_OK(mt_batch_make(&one, &CLIPS[ci], 1, 12, 3, 9, &IDS[ci]));
    CHECK_OK(add_text(&one, v, &TEXT_TOKENS[ci], &IDS[ci]));
    float *pred = calloc((size_t)one.L * 12, sizeof(float));
    double l;
    CHECK_OK(dit_forward(m, &one.b, pred, &l));
    CHECK_OK(dit_backward(m, &one.b));
    lsum += l;
    double e = rel_diff(pred, pred_packed + (size_t)packed.cu[ci] * 12, (size_t)one.L * 12);
    CHECK(e <= 1e-5, "clip %d: output differs packed vs alone by %.3g", ci, e);
    free(pred);
    mt_batch_free(&one);
  }
  CHECK(fabs(lsum - lp) <= 1e-5 * fabs(lp), "loss packed %.9g vs sum alone %.9g", lp, lsum);
  for (int i = 0; i < dit_num_tensors(m); i++) {
    const dit_tensor *t = dit_tensor_info(m, i);
    double e = rel_diff(dit_grads(m) + t->offset, g_packed + t->offset, t->numel);
    CHECK(e <= 1e-5, "%s: gradient packed vs summed alone differs by %.3g", t->name, e);
  }
  free(g_packed), free(pred_packed);
  mt_batch_free(&packed);
  dit_free(&m);
}

// model.recompute = 1 (whole blocks) and 2 (the cheap token-local layers) against 0: the same
// loss and gradients bit for bit, in less activation memory (2 between 0 and 1).
static void test_recompute(int v) {
  const kernels_backend *kb = kernels_cpu();
  dit_config c = config_of(v);
  enum { NR = 3 };
  dit_model *m[NR];
  double loss[NR];
  mt_batch mb;
  CHECK_OK(mt_batch_make(&mb, CLIPS, 3, 12, 3, 11, IDS));
  CHECK_OK(add_text(&mb, v, TEXT_TOKENS, IDS));
  for (int r = 0; r < NR; r++) {
    c.recompute = r;
    CHECK_OK(dit_create(&m[r], &c, kb, 64, 4));
    CHECK_OK(dit_init(m[r], 3));
    CHECK_OK(mt_perturb(m[r], 4, 0.1f));
    CHECK_OK(dit_zero_grad(m[r]));
    CHECK_OK(dit_forward(m[r], &mb.b, NULL, &loss[r]));
    CHECK_OK(dit_backward(m[r], &mb.b));
  }
  size_t bytes[NR];
  for (int r = 0; r < NR; r++) bytes[r] = dit_activation_bytes(m[r]);
  CHECK(bytes[1] < bytes[2] && bytes[2] < bytes[0],
        "activation bytes: none %zu, block %zu, cheap %zu (want block < cheap < none)", bytes[0],
        bytes[1], bytes[2]);
  for (int r = 1; r < NR; r++) {
    CHECK(loss[0] == loss[r], "recompute %d: loss %.9g vs %.9g", r, loss[r], loss[0]);
    CHECK(!memcmp(dit_grads(m[0]), dit_grads(m[r]), dit_num_params(m[0]) * sizeof(float)),
          "gradients differ with recompute %d", r);
    // a second backward without forward is refused
    CHECK(dit_backward(m[r], &mb.b) == TSR_EINVAL, "recompute %d: backward without forward", r);
  }
  for (int r = 0; r < NR; r++) dit_free(&m[r]);
  mt_batch_free(&mb);
}

// The CPU table with gemm_batched counted (batched) or left out (loop: the stub, so the
// model runs its q, k, v as three linears each).
static int batched_calls;
static tsr_status counted_gemm_batched(const kernels_backend *kb, int ta, int tb, int m, int n,
                                       int k, float alpha, const void *a, int64_t sa,
                                       const void *b, int64_t sb, float beta, void *c, int64_t sc,
                                       kernels_dtype c_dtype, const float *bias, int64_t sbias,
                                       int batch) {
  batched_calls++;
  return kernels_cpu()->gemm_batched(kb, ta, tb, m, n, k, alpha, a, sa, b, sb, beta, c, sc,
                                     c_dtype, bias, sbias, batch);
}

// q, k, v as one batched GEMM (layers.c dit_linears_fwd/bwd, forward and the three dW)
// against three linears each: the same prediction, loss and gradients bit for bit (the CPU
// entry runs the same GEMMs), and the batched entry called twice a block.
static void test_batched_qkv(int v) {
  static kernels_backend batched, loop;
  batched = loop = *kernels_cpu();
  batched.gemm_batched = counted_gemm_batched;
  loop.gemm_batched = NULL;
  kernels_fill_unsupported(&loop);
  const kernels_backend *kbs[2] = {&batched, &loop};
  dit_config c = config_of(v);
  dit_model *m[2];
  double loss[2];
  float *pred[2];
  mt_batch mb;
  CHECK_OK(mt_batch_make(&mb, CLIPS, 3, 12, 3, 11, IDS));
  CHECK_OK(add_text(&mb, v, TEXT_TOKENS, IDS));
  size_t np = (size_t)mb.b.L * 12;
  batched_calls = 0;
  for (int r = 0; r < 2; r++) {
    pred[r] = calloc(np, sizeof(float));
    CHECK_OK(dit_create(&m[r], &c, kbs[r], 64, 4));
    CHECK_OK(dit_init(m[r], 3));
    CHECK_OK(mt_perturb(m[r], 4, 0.1f));
    CHECK_OK(dit_zero_grad(m[r]));
    CHECK_OK(dit_forward(m[r], &mb.b, pred[r], &loss[r]));
    CHECK_OK(dit_backward(m[r], &mb.b));
  }
  CHECK(batched_calls == 2 * c.depth, "%s: gemm_batched called %d times for %d blocks",
        VARIANT_NAME[v], batched_calls, c.depth);
  CHECK(loss[0] == loss[1] && !memcmp(pred[0], pred[1], np * sizeof(float)),
        "batched q, k, v%s: loss %.9g vs %.9g, or the predictions differ", VARIANT_NAME[v],
        loss[0], loss[1]);
  CHECK(!memcmp(dit_grads(m[0]), dit_grads(m[1]), dit_num_params(m[0]) * sizeof(float)),
        "batched q, k, v%s: the gradients differ", VARIANT_NAME[v]);
  for (int r = 0; r < 2; r++) dit_free(&m[r]), free(pred[r]);
  mt_batch_free(&mb);
}

// The largest |prediction| of m on batch mb (12 values a token), the buffer's first value
// set beforehand so that a prediction left unwritten shows.
static float init_output_max(dit_model *m, mt_batch *mb) {
  float *pred = calloc((size_t)mb->L * 12, sizeof(float)), pmax = 0;
  pred[0] = 1;
  CHECK_OK(dit_forward(m, &mb->b, pred, NULL));
  for (int j = 0; j < mb->L * 12; j++) pmax = fmaxf(pmax, fabsf(pred[j]));
  free(pred);
  return pmax;
}

static void test_init(void) {
  const kernels_backend *kb = kernels_cpu();
  dit_config c = mt_config();
  dit_model *m;
  CHECK_OK(dit_create(&m, &c, kb, 64, 4));
  CHECK_OK(dit_init(m, 1));
  int D = 16, F = 32, P = 12;
  size_t expect = (size_t)P * D + D + 16 * D + D + D * D + D + 4 * D +
                  2 * ((size_t)D * 6 * D + 6 * D + 3 * (D * D + D) + 2 * 8 + D * D + D +
                       (size_t)D * F + F + (size_t)F * D + D) +
                  (size_t)D * 2 * D + 2 * D + (size_t)D * P + P;
  CHECK(dit_count_params(m) == expect, "count %zu want %zu", dit_count_params(m), expect);
  int qi = dit_find_tensor(m, "blocks.1.q.weight");
  CHECK(qi >= 0 && dit_tensor_info(m, qi)->shape[0] == D && dit_tensor_info(m, qi)->shape[1] == D,
        "blocks.1.q.weight");
  CHECK(dit_find_tensor(m, "blocks.2.q.weight") == -1, "no block 2");
  int ai = dit_find_tensor(m, "blocks.0.adaln.weight"), ni = dit_find_tensor(m, "blocks.0.k_norm.weight");
  const float *p = dit_params(m);
  float amax = 0;
  for (size_t j = 0; j < dit_tensor_info(m, ai)->numel; j++) amax = fmaxf(amax, fabsf(p[dit_tensor_info(m, ai)->offset + j]));
  CHECK(amax == 0 && p[dit_tensor_info(m, ni)->offset] == 1, "adaLN zero, norm weight one");
  for (int i = 0; i < dit_num_tensors(m); i++)
    CHECK(dit_tensor_info(m, i)->offset % 16 == 0, "tensor %d not aligned", i);
  // adaLN-Zero: the output is exactly zero at init
  mt_batch mb;
  CHECK_OK(mt_batch_make(&mb, CLIPS, 3, 12, 3, 5, IDS));
  float pmax = init_output_max(m, &mb);
  CHECK(pmax == 0, "output at init %g", pmax);
  // oversized batch
  dit_model *small;
  CHECK_OK(dit_create(&small, &c, kb, 8, 4));
  CHECK(dit_forward(small, &mb.b, NULL, NULL) == TSR_EINVAL && strstr(err_msg(), "at most 8"),
        "oversized batch: %s", err_msg());
  // bad config
  dit_model *bad;
  c.heads = 3;
  CHECK(dit_create(&bad, &c, kb, 8, 4) == TSR_EINVAL && strstr(err_msg(), "model.heads"),
        "bad config: %s", err_msg());
  mt_batch_free(&mb);
  dit_free(&small);
  dit_free(&m);
}

// With captions: the table gains the text tensors and 10 a block, every cross.proj is zero
// (so the output at init is still 0 and the text model starts as the plain one), and a
// batch with more caption tokens than the model was made for is refused.
static void test_init_text(void) {
  const kernels_backend *kb = kernels_cpu();
  dit_config c0 = mt_config(), c = mt_text_config();
  dit_model *m0, *m;
  CHECK_OK(dit_create(&m0, &c0, kb, 64, 4));
  CHECK_OK(dit_create(&m, &c, kb, 64, 4));
  int D = 16, Dh = 8, TD = 5;
  size_t extra = (size_t)TD * D + D + D * D + D + D + 2 * (4 * ((size_t)D * D + D) + 2 * Dh);
  CHECK(dit_count_params(m) == dit_count_params(m0) + extra, "text model count %zu, want %zu",
        dit_count_params(m), dit_count_params(m0) + extra);
  CHECK(dit_num_tensors(m) == dit_num_tensors(m0) + 5 + 2 * 10, "tensors %d",
        dit_num_tensors(m));
  CHECK(dit_find_tensor(m, "text_null.weight") >= 0 && dit_find_tensor(m, "blocks.1.cross.k.weight") >= 0 &&
            dit_find_tensor(m0, "blocks.1.cross.k.weight") < 0,
        "cross tensors only with text");
  CHECK_OK(dit_init(m, 1));
  int pi = dit_find_tensor(m, "blocks.0.cross.proj.weight");
  float pmax = 0;
  for (size_t j = 0; j < dit_tensor_info(m, pi)->numel; j++)
    pmax = fmaxf(pmax, fabsf(dit_params(m)[dit_tensor_info(m, pi)->offset + j]));
  CHECK(pmax == 0, "cross.proj is zero at init");
  // the shared tensors get the same init as in the model without text (keyed by name)
  for (int i = 0; i < dit_num_tensors(m0); i++) {
    const dit_tensor *t0 = dit_tensor_info(m0, i);
    int j = dit_find_tensor(m, t0->name);
    CHECK(j >= 0, "%s in the text model", t0->name);
  }
  mt_batch mb;
  CHECK_OK(mt_batch_make(&mb, CLIPS, 3, 12, 3, 5, IDS));
  CHECK_OK(add_text(&mb, V_TEXT, TEXT_TOKENS, IDS));
  mb.b.Lt = 17;  // more than 4 clips x 4 tokens
  CHECK(dit_forward(m, &mb.b, NULL, NULL) == TSR_EINVAL && strstr(err_msg(), "caption tokens"),
        "too many caption tokens: %s", err_msg());
  mb.b.Lt = mb.Lt;
  float omax = init_output_max(m, &mb);
  CHECK(omax == 0, "text model output at init %g", omax);
  mt_batch_free(&mb);
  dit_free(&m0), dit_free(&m);
}

int main(void) {
  test_init();
  test_init_text();
  test_causal();
  for (int v = 0; v < NVARIANTS; v++) {
    test_fd(v);
    test_packing(v);
    test_recompute(v);
    test_batched_qkv(v);
  }
  return check_done();
}
