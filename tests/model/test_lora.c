// tests/model/test_lora.c — LoRA adapters (model/lora.h) on the CPU backend:
// - fresh adapters (B = 0) leave the model bitwise unchanged: prediction, loss and the base
//   gradients equal those of the model without adapters, for every target at once;
// - with non-zero B, the adapter gradients against central finite differences of the loss
//   (every adapter tensor, as tests/model/test_dit.c checks the base's);
// - model.recompute = 1 and 2 give the adapters' gradients bitwise as 0 does;
// - a bf16 frozen base without fp32 masters of its linear weights (dit_create_frozen_base)
//   gives dit_create_frozen's loss, prediction and adapter gradients bit for bit;
// - a frozen base (dit_create_frozen: no base gradients computed) gives the adapters' loss,
//   prediction and gradients bitwise as the model that computes the base's too;
// - bf16 activations (kernels_cpu_bf16: every [act] output rounded once) give the adapter
//   gradients of the fp32 model within bf16's error (8% of each tensor's max-norm);
// - the fast path (groups of adapters that share an input, the merged weight) gives the
//   loss, prediction and gradients of the per-adapter path (TESSERA_LORA_PER_ADAPTER=1)
//   within fp32 rounding;
// - forward-only adapters (dit_lora_attach_frozen): no gradient buffer, the same forward
//   bitwise, no backward;
// - the adapter table: names, shapes (PEFT's layout), the init's bound, and refusals.
// On the tessera DiT without captions, the Wan family with captions, and the tessera DiT
// with captions and its null token (whose cross-attention k/v adapters run twice a forward).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/lora.h"
#include "mt.h"

static const mt_clip CLIPS[3] = {{2, 2, 3, 1, 0.3f}, {1, 3, 2, 3, 0.7f}, {3, 1, 2, 0, 0.55f}};
static const int IDS[3] = {10, 11, 12};
static const int TEXT_TOKENS[3] = {3, 0, 2};

#define ALL_WAN "attn1.to_q,attn1.to_k,attn1.to_v,attn1.to_out.0,attn2.to_q,attn2.to_k," \
                "attn2.to_v,attn2.to_out.0,ffn.net.0.proj,ffn.net.2"
#define ALL_SELF "attn1.to_q,attn1.to_k,attn1.to_v,attn1.to_out.0,ffn.net.0.proj,ffn.net.2"
// the modulation: the time embedding's linears, and the per-block adaLN (tessera) or the
// shared modulation projection (Wan)
#define TIME_EMB "condition_embedder.time_embedder.linear_1," \
                 "condition_embedder.time_embedder.linear_2"
#define MOD_TESSERA "," TIME_EMB ",adaln"
#define MOD_WAN "," TIME_EMB ",condition_embedder.time_proj"

enum { V_PLAIN, V_WAN, V_TEXT, NVARIANTS };
static const char *const VARIANT_NAME[NVARIANTS] = {"tessera", "wan (captions)",
                                                    "tessera (captions, null token)"};

static lora_config lora_of(int v, int rank, float alpha) {
  lora_config lc = {.rank = rank, .alpha = alpha};
  snprintf(lc.targets, sizeof lc.targets, "%s",
           v == V_PLAIN ? ALL_SELF MOD_TESSERA : v == V_WAN ? ALL_WAN MOD_WAN : ALL_WAN MOD_TESSERA);
  return lc;
}

// A perturbed model of variant v (with model.recompute = rc) on backend kb, its base frozen
// (1: dit_create_frozen, 2: dit_create_frozen_base, its weights put in tensor by tensor from
// an fp32 model's) or not, and its batch (captions for Wan).
static dit_model *make_model_on(int v, int rc, const kernels_backend *kb, int frozen,
                                mt_batch *mb) {
  dit_config c = v == V_WAN ? mt_wan_config() : v == V_TEXT ? mt_text_config() : mt_config();
  c.recompute = rc;
  dit_model *m = NULL;
  if (frozen == 2) {
    dit_model *w = NULL;
    CHECK_OK(dit_create(&w, &c, kernels_cpu(), 64, 4));
    CHECK_OK(dit_init(w, 1));
    CHECK_OK(mt_perturb(w, 2, 0.1f));
    CHECK_OK(dit_create_frozen_base(&m, &c, kb, 64, 4));
    if (kb->act_dtype != KERNELS_F32)
      CHECK(!dit_params(m) && dit_init(m, 1) == TSR_EINVAL,
            "a bf16 frozen base has whole fp32 masters, or dit_init accepts it");
    for (int i = 0; i < dit_num_tensors(m); i++)
      CHECK_OK(dit_put_tensor(m, i, dit_params(w) + dit_tensor_info(w, i)->offset));
    dit_free(&w);
  } else {
    CHECK_OK(frozen ? dit_create_frozen(&m, &c, kb, 64, 4) : dit_create(&m, &c, kb, 64, 4));
    CHECK_OK(dit_init(m, 1));
    CHECK_OK(mt_perturb(m, 2, 0.1f));
  }
  CHECK_OK(mt_batch_make(mb, CLIPS, 3, 12, 3, 5, IDS));
  if (v != V_PLAIN) CHECK_OK(mt_batch_text(mb, TEXT_TOKENS, c.text_dim, 77, IDS));
  return m;
}
static dit_model *make_model_rc(int v, int rc, mt_batch *mb) {
  return make_model_on(v, rc, kernels_cpu(), 0, mb);
}
static dit_model *make_model(int v, mt_batch *mb) { return make_model_rc(v, 0, mb); }

// Forward and backward from zero gradients; pred (L, P) [act] and the base gradients copied
// out (grads NULL: not copied).
static double run(dit_model *m, const dit_batch *b, void *pred, float *grads) {
  double loss = 0;
  CHECK_OK(dit_zero_grad(m));
  CHECK_OK(dit_lora_zero_grad(m));
  CHECK_OK(dit_forward(m, b, pred, &loss));
  CHECK_OK(dit_backward(m, b));
  if (grads) memcpy(grads, dit_grads(m), sizeof(float) * dit_num_params(m));  // CPU: host memory
  return loss;
}

static void test_step0_bitwise(int v) {
  mt_batch mb;
  dit_model *m = make_model(v, &mb);
  size_t np = dit_num_params(m), npred = (size_t)mb.L * 12;
  float *p0 = malloc(sizeof(float) * npred), *p1 = malloc(sizeof(float) * npred);
  float *g0 = malloc(sizeof(float) * np), *g1 = malloc(sizeof(float) * np);
  double l0 = run(m, &mb.b, p0, g0);
  lora_config lc = lora_of(v, 4, 8.0f);
  CHECK_OK(dit_lora_attach(m, &lc, 5));
  double l1 = run(m, &mb.b, p1, g1);
  CHECK(l0 == l1, "%s: loss %.9g with fresh adapters, %.9g without", VARIANT_NAME[v], l1, l0);
  CHECK(!memcmp(p0, p1, sizeof(float) * npred), "%s: prediction changed", VARIANT_NAME[v]);
  CHECK(!memcmp(g0, g1, sizeof(float) * np), "%s: base gradients changed", VARIANT_NAME[v]);
  printf("step 0 (%s): %d adapter tensors of B = 0, prediction, loss and base gradients "
         "bitwise equal\n", VARIANT_NAME[v], dit_lora_num_tensors(m));
  free(p0), free(p1), free(g0), free(g1);
  mt_batch_free(&mb);
  dit_free(&m);
}

// Same tolerance argument as test_dit.c: central differences of an fp32 loss with eps 1e-2.
#define FD_EPS 1e-2f
#define FD_REL 3e-2
#define FD_ABS 5e-5

static double worst_rel;

static void fd_check(dit_model *m, const dit_batch *b, float *val, double g, const char *what,
                     size_t j) {
  float old = *val;
  double lp = 0, lm = 0;
  *val = old + FD_EPS;
  CHECK_OK(dit_forward(m, b, NULL, &lp));
  *val = old - FD_EPS;
  CHECK_OK(dit_forward(m, b, NULL, &lm));
  *val = old;
  double fd = (lp - lm) / (2.0 * FD_EPS), diff = fabs(fd - g), mag = fmax(fabs(fd), fabs(g));
  if (fabs(g) > 1e-3 && diff / mag > worst_rel) worst_rel = diff / mag;
  CHECK(diff <= FD_REL * mag + FD_ABS, "%s[%zu]: analytic %.6g fd %.6g", what, j, g, fd);
}

// B (and A) += 0.3 N(0, 1): a trained-looking adapter whose every gradient is non-trivial.
static void perturb_adapters(dit_model *m) {
  float *p = dit_lora_params(m);
  for (int i = 0; i < dit_lora_num_tensors(m); i++) {
    const dit_tensor *t = dit_lora_tensor_info(m, i);
    rng_key key = {9, 1, (uint64_t)i, RNG_STREAM_INIT};
    for (size_t j = 0; j < t->numel; j++) p[t->offset + j] += 0.3f * (float)rng_normal(&key, j);
  }
}

static void test_fd(int v) {
  mt_batch mb;
  dit_model *m = make_model(v, &mb);
  lora_config lc = lora_of(v, 2, 3.0f);
  CHECK_OK(dit_lora_attach(m, &lc, 5));
  perturb_adapters(m);
  size_t n = dit_lora_num_params(m);
  float *g = malloc(sizeof(float) * n), *base = malloc(sizeof(float) * dit_num_params(m));
  run(m, &mb.b, NULL, base);
  memcpy(g, dit_lora_grads(m), sizeof(float) * n);
  float *p = dit_lora_params(m);
  worst_rel = 0;
  int checked = 0;
  for (int i = 0; i < dit_lora_num_tensors(m); i++) {
    const dit_tensor *t = dit_lora_tensor_info(m, i);
    size_t arg = 0;  // the largest-gradient element and 2 spread ones
    for (size_t j = 0; j < t->numel; j++)
      if (fabsf(g[t->offset + j]) > fabsf(g[t->offset + arg])) arg = j;
    CHECK(g[t->offset + arg] != 0, "%s: gradient is all zero", t->name);
    size_t pick[3] = {arg, t->numel / 3, t->numel - 1};
    for (int s = 0; s < 3; s++, checked++)
      fd_check(m, &mb.b, &p[t->offset + pick[s]], g[t->offset + pick[s]], t->name, pick[s]);
  }
  printf("fd (%s): %d elements of %d adapter tensors, worst relative error %.3g (|g| > 1e-3), "
         "tolerance %.0e rel + %.0e abs\n", VARIANT_NAME[v], checked, dit_lora_num_tensors(m),
         worst_rel, FD_REL, FD_ABS);
  free(g), free(base);
  mt_batch_free(&mb);
  dit_free(&m);
}

// Variant v on kb, frozen or not, with perturbed adapters of rank 2: its loss, and its adapter
// gradients and prediction (L, P, as fp32) in fresh buffers.
static double adapted_run(int v, const kernels_backend *kb, int frozen, float **g, float **pred,
                          size_t *n, size_t *npred) {
  mt_batch mb;
  dit_model *m = make_model_on(v, 0, kb, frozen, &mb);
  lora_config lc = lora_of(v, 2, 3.0f);
  CHECK_OK(dit_lora_attach(m, &lc, 5));
  perturb_adapters(m);
  CHECK_OK(dit_lora_refresh(m));  // perturb_adapters wrote the fp32 adapters
  *n = dit_lora_num_params(m), *npred = (size_t)mb.L * 12;
  void *p = malloc(kernels_act_bytes(kb, *npred));
  // the batch's [act] arrays in kb's dtype (mt builds fp32 ones; CPU backends: host memory)
  size_t nx = (size_t)mb.L * 12, nt = (size_t)mb.Lt * (size_t)mb.text_dim;
  void *x = malloc(kernels_act_bytes(kb, nx) + 4), *y = malloc(kernels_act_bytes(kb, nx) + 4);
  void *txt = malloc(kernels_act_bytes(kb, nt) + 4);
  CHECK_OK(kb->cast(kb, x, kb->act_dtype, mb.b.x, KERNELS_F32, nx));
  CHECK_OK(kb->cast(kb, y, kb->act_dtype, mb.b.target, KERNELS_F32, nx));
  mb.b.x = x, mb.b.target = y;
  if (mb.b.text) {
    CHECK_OK(kb->cast(kb, txt, kb->act_dtype, mb.b.text, KERNELS_F32, nt));
    mb.b.text = txt;
  }
  double loss = run(m, &mb.b, p, NULL);
  free(x), free(y), free(txt);
  CHECK(!frozen || (dit_grads(m) == NULL && dit_num_buckets(m) == 0),
        "a frozen model has a gradient buffer or buckets");
  *g = malloc(sizeof(float) * *n), *pred = malloc(sizeof(float) * *npred);
  memcpy(*g, dit_lora_grads(m), sizeof(float) * *n);
  CHECK_OK(kernels_cpu()->cast(kernels_cpu(), *pred, KERNELS_F32, p, kb->act_dtype, *npred));
  free(p);
  mt_batch_free(&mb);
  dit_free(&m);
  return loss;
}

// Checks that adapted_run of bases A and B (on backend K) give the same loss, prediction and
// adapter gradients, bit for bit (a failure names WHAT); the count of adapter gradients.
static size_t same_adapted(int v, const kernels_backend *k, int a, int b, const char *what) {
  float *ga, *gb, *pa, *pb;
  size_t n, np;
  double la = adapted_run(v, k, a, &ga, &pa, &n, &np);
  double lb = adapted_run(v, k, b, &gb, &pb, &n, &np);
  CHECK(la == lb && !memcmp(ga, gb, sizeof(float) * n) && !memcmp(pa, pb, sizeof(float) * np),
        "%s: the %s changes the loss (%.9g vs %.9g), prediction or adapter gradients",
        VARIANT_NAME[v], what, lb, la);
  free(ga), free(gb), free(pa), free(pb);
  return n;
}

static void test_frozen(int v) {
  size_t n = same_adapted(v, kernels_cpu(), 0, 1, "frozen base");
  printf("frozen base (%s): loss, prediction and %zu adapter gradients bitwise as with the "
         "base's gradients computed\n", VARIANT_NAME[v], n);
}

// dit_create_frozen_base with bf16 activations (the trainer's LoRA base): fp32 masters of the
// tensors the kernels read in fp32 only, the weights put in tensor by tensor: the loss, the
// prediction and every adapter gradient of dit_create_frozen's bit for bit; and a copy of it
// (dit_copy_weights, the trainer's sampling model) predicts the same.
static void test_frozen_base(int v) {
  size_t n = same_adapted(v, kernels_cpu_bf16(), 1, 2, "bf16 frozen base");
  mt_batch mb;
  dit_model *a = make_model_on(v, 0, kernels_cpu_bf16(), 2, &mb), *b = NULL;
  const dit_config *c = dit_get_config(a);
  CHECK_OK(dit_create_frozen_base(&b, c, kernels_cpu_bf16(), 64, 4));
  CHECK_OK(dit_copy_weights(b, a));
  dit_model *f = NULL;  // a model of another kind is refused
  CHECK_OK(dit_create_frozen(&f, c, kernels_cpu_bf16(), 64, 4));
  CHECK(dit_copy_weights(f, a) == TSR_EINVAL, "dit_copy_weights across kinds: %s", err_msg());
  size_t nx = (size_t)mb.L * 12, nt = (size_t)mb.Lt * (size_t)mb.text_dim;
  const kernels_backend *kb = kernels_cpu_bf16();
  void *x = malloc(kernels_act_bytes(kb, nx)), *txt = malloc(kernels_act_bytes(kb, nt) + 4);
  void *pa = malloc(kernels_act_bytes(kb, nx)), *pb = malloc(kernels_act_bytes(kb, nx));
  CHECK_OK(kb->cast(kb, x, kb->act_dtype, mb.b.x, KERNELS_F32, nx));
  if (mb.b.text) CHECK_OK(kb->cast(kb, txt, kb->act_dtype, mb.b.text, KERNELS_F32, nt));
  dit_batch fwd = mb.b;
  fwd.x = x, fwd.text = mb.b.text ? txt : NULL, fwd.target = NULL, fwd.loss_weight = NULL;
  CHECK_OK(dit_forward(a, &fwd, pa, NULL));
  CHECK_OK(dit_forward(b, &fwd, pb, NULL));
  CHECK(!memcmp(pa, pb, kernels_act_bytes(kb, nx)), "%s: the copied frozen base predicts otherwise",
        VARIANT_NAME[v]);
  printf("bf16 frozen base (%s): loss, prediction and %zu adapter gradients bitwise as with "
         "every fp32 master kept; a copy predicts the same\n", VARIANT_NAME[v], n);
  free(x), free(txt), free(pa), free(pb);
  mt_batch_free(&mb);
  dit_free(&a), dit_free(&b), dit_free(&f);
}

// The fast path (model/lora.c: adapters that share an input as one group, one down-projection
// for the self-attention's q, k, v and the cross-attention's k, v, their dA and input gradient
// one GEMM each; with fp32 activations and M >= in the base linear on the merged weight
// W + s A^T B^T) against the per-adapter path (TESSERA_LORA_PER_ADAPTER=1: four GEMMs an
// adapter, as before both): the same math with the sums in another order, so the loss, the
// prediction, every adapter gradient and every base gradient (the input gradients flow
// through them) agree within fp32 rounding: 1e-5 of each tensor's max-norm. In these tiny
// models q, k, v, to_out and fc1 run merged (in 16 <= 24 rows), fc2 (in 32) and the
// cross-attention's k, v (5 caption rows, 3 null rows) grouped but not merged.
#define GROUPED_REL 1e-5
static double rel_err(const float *a, const float *b, size_t n) {
  double amax = 0, dmax = 0;
  for (size_t j = 0; j < n; j++) {
    amax = fmax(amax, fabs(b[j]));
    dmax = fmax(dmax, fabs(a[j] - b[j]));
  }
  return amax > 0 ? dmax / amax : dmax;
}
static void test_grouped(int v) {
  double loss[2], worst = 0;
  float *pred[2], *base[2], *ad[2];
  size_t npred = 0, nbase = 0, nad = 0;
  int nt = 0;
  for (int k = 0; k < 2; k++) {
    CHECK(setenv("TESSERA_LORA_PER_ADAPTER", k ? "1" : "0", 1) == 0, "setenv");
    mt_batch mb;
    dit_model *m = make_model(v, &mb);
    lora_config lc = lora_of(v, 2, 3.0f);
    CHECK_OK(dit_lora_attach(m, &lc, 5));
    perturb_adapters(m);
    npred = (size_t)mb.L * 12, nbase = dit_num_params(m), nt = dit_lora_num_tensors(m);
    pred[k] = malloc(sizeof(float) * npred), base[k] = malloc(sizeof(float) * nbase);
    loss[k] = run(m, &mb.b, pred[k], base[k]);
    ad[k] = malloc(sizeof(float) * dit_lora_num_params(m));  // packed in table order
    nad = 0;
    for (int i = 0; i < nt; i++) {
      const dit_tensor *t = dit_lora_tensor_info(m, i);
      memcpy(ad[k] + nad, dit_lora_grads(m) + t->offset, sizeof(float) * t->numel);
      nad += t->numel;
    }
    mt_batch_free(&mb);
    dit_free(&m);
  }
  unsetenv("TESSERA_LORA_PER_ADAPTER");
  CHECK(fabs(loss[0] - loss[1]) <= GROUPED_REL * fabs(loss[1]), "%s: fast path's loss %.9g, per "
        "adapter %.9g", VARIANT_NAME[v], loss[0], loss[1]);
  double e = rel_err(pred[0], pred[1], npred);
  CHECK(e <= GROUPED_REL, "%s: fast path's prediction off by %.3g", VARIANT_NAME[v], e);
  worst = fmax(worst, e);
  e = rel_err(base[0], base[1], nbase);
  CHECK(e <= GROUPED_REL, "%s: fast path's base gradients off by %.3g", VARIANT_NAME[v], e);
  worst = fmax(worst, e);
  mt_batch mb;  // the table again, for the tensors' sizes
  dit_model *m = make_model(v, &mb);
  lora_config lc = lora_of(v, 2, 3.0f);
  CHECK_OK(dit_lora_attach(m, &lc, 5));
  size_t at = 0;
  for (int i = 0; i < nt; i++) {
    const dit_tensor *t = dit_lora_tensor_info(m, i);
    e = rel_err(ad[0] + at, ad[1] + at, t->numel);
    CHECK(e <= GROUPED_REL, "%s %s: fast path's gradient off by %.3g", VARIANT_NAME[v], t->name, e);
    worst = fmax(worst, e);
    at += t->numel;
  }
  printf("grouped and merged (%s): loss %.9g vs %.9g per adapter; prediction, base and %d "
         "adapter gradients within %.3g of each tensor's max (tolerance %.0e)\n", VARIANT_NAME[v],
         loss[0], loss[1], nt, worst, GROUPED_REL);
  for (int k = 0; k < 2; k++) free(pred[k]), free(base[k]), free(ad[k]);
  mt_batch_free(&mb);
  dit_free(&m);
}

// Forward-only adapters (dit_lora_attach_frozen, the trainer's sampling model): no gradient
// buffer, the prediction and loss bitwise those of the same adapters attached for training,
// and a backward refused.
static void test_attach_frozen(int v) {
  mt_batch mb;
  float *pred[2];
  double loss[2];
  size_t npred = 0;
  for (int k = 0; k < 2; k++) {
    dit_model *m = make_model_on(v, 0, kernels_cpu(), 1, &mb);
    lora_config lc = lora_of(v, 2, 3.0f);
    CHECK_OK(k ? dit_lora_attach_frozen(m, &lc, 5) : dit_lora_attach(m, &lc, 5));
    perturb_adapters(m);
    npred = (size_t)mb.L * 12;
    pred[k] = malloc(sizeof(float) * npred);
    CHECK_OK(dit_forward(m, &mb.b, pred[k], &loss[k]));
    if (k) {
      CHECK(dit_lora_grads(m) == NULL, "%s: forward-only adapters have a gradient buffer",
            VARIANT_NAME[v]);
      CHECK(dit_backward(m, &mb.b) == TSR_EINVAL, "%s: a backward of forward-only adapters "
            "is not refused", VARIANT_NAME[v]);
    }
    mt_batch_free(&mb);
    dit_free(&m);
  }
  CHECK(loss[0] == loss[1] && !memcmp(pred[0], pred[1], sizeof(float) * npred),
        "%s: forward-only adapters change the loss (%.9g vs %.9g) or prediction",
        VARIANT_NAME[v], loss[1], loss[0]);
  printf("forward-only adapters (%s): no gradient buffer, loss and prediction bitwise, "
         "backward refused\n", VARIANT_NAME[v]);
  free(pred[0]), free(pred[1]);
}

// Per adapter tensor: max |g_bf16 - g_f32| <= 8% of max |g_f32|. The bf16 backend rounds every
// [act] output (u, du, each linear's and attention's output) once, 2^-8 relative each; the
// gradients pass a dozen of them forward and back, and the keys' through the softmax
// (measured: 2.1% worst on the tessera DiT, 4.5% on Wan's attn1.to_k, whose gradient is
// the smallest). Any fault of the bf16 path (a stale working copy, a wrong operand) is
// off by the whole gradient.
#define BF16_REL 0.08
static void test_bf16(int v) {
  float *g32, *g16, *p32, *p16;
  size_t n, np;
  double l32 = adapted_run(v, kernels_cpu(), 1, &g32, &p32, &n, &np);
  double l16 = adapted_run(v, kernels_cpu_bf16(), 1, &g16, &p16, &n, &np);
  mt_batch mb;
  dit_model *m = make_model(v, &mb);  // the adapter table, for the tensors' ranges
  lora_config lc = lora_of(v, 2, 3.0f);
  CHECK_OK(dit_lora_attach(m, &lc, 5));
  double worst = 0;
  for (int i = 0; i < dit_lora_num_tensors(m); i++) {
    const dit_tensor *t = dit_lora_tensor_info(m, i);
    double amax = 0, dmax = 0;
    for (size_t j = 0; j < t->numel; j++) {
      amax = fmax(amax, fabs(g32[t->offset + j]));
      dmax = fmax(dmax, fabs(g16[t->offset + j] - g32[t->offset + j]));
    }
    CHECK(amax > 0 && dmax <= BF16_REL * amax, "%s %s: bf16 gradient off by %.3g of max %.3g",
          VARIANT_NAME[v], t->name, dmax, amax);
    if (amax > 0 && dmax / amax > worst) worst = dmax / amax;
  }
  CHECK(fabs(l16 - l32) <= 0.02 * fabs(l32), "%s: bf16 loss %.6g vs fp32 %.6g", VARIANT_NAME[v],
        l16, l32);
  printf("bf16 (%s): loss %.6g vs fp32 %.6g; adapter gradients within %.3g of each tensor's "
         "max (tolerance %.2g)\n", VARIANT_NAME[v], l16, l32, worst, BF16_REL);
  free(g32), free(g16), free(p32), free(p16);
  mt_batch_free(&mb);
  dit_free(&m);
}

// The adapters' u is kept per adapter, outside the buffers recompute shares or re-runs.
static void test_recompute(int v) {
  float *g[3] = {NULL, NULL, NULL};
  double loss[3];
  size_t n = 0;
  for (int rc = 0; rc < 3; rc++) {
    mt_batch mb;
    dit_model *m = make_model_rc(v, rc, &mb);
    lora_config lc = lora_of(v, 2, 3.0f);
    CHECK_OK(dit_lora_attach(m, &lc, 5));
    perturb_adapters(m);
    n = dit_lora_num_params(m);
    float *base = malloc(sizeof(float) * dit_num_params(m));
    loss[rc] = run(m, &mb.b, NULL, base);
    g[rc] = malloc(sizeof(float) * n);
    memcpy(g[rc], dit_lora_grads(m), sizeof(float) * n);
    free(base);
    mt_batch_free(&mb);
    dit_free(&m);
  }
  for (int rc = 1; rc < 3; rc++)
    CHECK(loss[rc] == loss[0] && !memcmp(g[rc], g[0], sizeof(float) * n),
          "%s: recompute %d changes the loss or the adapter gradients", VARIANT_NAME[v], rc);
  printf("recompute (%s): 1 and 2 give the adapter gradients of 0 bitwise\n", VARIANT_NAME[v]);
  for (int rc = 0; rc < 3; rc++) free(g[rc]);
}

// Names and shapes in PEFT's layout, A within PEFT's bound, B zero; a suffix selects.
static void test_table(void) {
  mt_batch mb;
  dit_model *m = make_model(V_WAN, &mb);
  lora_config lc = {.rank = 3, .alpha = 6.0f, .targets = "blocks.1.attn2.to_out.0,ffn.net.2"};
  CHECK_OK(dit_lora_attach(m, &lc, 5));
  CHECK(dit_lora_num_tensors(m) == 6, "tensors %d, want 6", dit_lora_num_tensors(m));
  const char *want[6] = {"blocks.0.ffn.net.2.lora_A.weight", "blocks.0.ffn.net.2.lora_B.weight",
                         "blocks.1.attn2.to_out.0.lora_A.weight",
                         "blocks.1.attn2.to_out.0.lora_B.weight",
                         "blocks.1.ffn.net.2.lora_A.weight", "blocks.1.ffn.net.2.lora_B.weight"};
  int F = mt_wan_config().ffn_dim, D = mt_wan_config().hidden;
  for (int i = 0; i < 6 && i < dit_lora_num_tensors(m); i++) {
    const dit_tensor *t = dit_lora_tensor_info(m, i);
    CHECK(!strcmp(t->name, want[i]), "tensor %d is %s, want %s", i, t->name, want[i]);
    int in = i >= 2 && i < 4 ? D : F;
    int64_t s0 = i % 2 ? D : 3, s1 = i % 2 ? 3 : in;
    CHECK(t->shape[0] == s0 && t->shape[1] == s1, "%s: shape (%lld, %lld)", t->name,
          (long long)t->shape[0], (long long)t->shape[1]);
    const float *p = dit_lora_params(m) + t->offset;
    float amax = 0;
    for (size_t j = 0; j < t->numel; j++) amax = fmaxf(amax, fabsf(p[j]));
    if (i % 2) CHECK(amax == 0, "%s: B not zero", t->name);
    else CHECK(amax > 0 && amax <= 1 / sqrtf((float)in), "%s: |A| max %g", t->name, amax);
  }
  CHECK(dit_lora_attach(m, &lc, 5) == TSR_EINVAL, "a second attach is refused");
  dit_free(&m);
  mt_batch_free(&mb);
  m = make_model(V_WAN, &mb);
  lora_config bad = {.rank = 2, .alpha = 2.0f, .targets = "attn1.to_q,attn1.to_x"};
  CHECK(dit_lora_attach(m, &bad, 5) == TSR_EINVAL && strstr(err_msg(), "attn1.to_x"),
        "a target matching nothing is refused, named: %s", err_msg());
  CHECK(dit_lora_num_tensors(m) == 0, "a refused attach leaves no adapters");
  dit_free(&m);
  mt_batch_free(&mb);
}

int main(void) {
  test_table();
  for (int v = 0; v < NVARIANTS; v++) {
    test_step0_bitwise(v);
    test_fd(v);
    test_recompute(v);
    test_frozen(v);
    test_frozen_base(v);
    test_bf16(v);
    test_grouped(v);
    test_attach_frozen(v);
  }
  return check_done();
}
