// tests/kernels/test_profile.c — the profiling wrapper (kernels/profile.h):
// - every entry of a profiled table is set (none left NULL) but the 4 optional graph_*
//   ones, which stay NULL even when the inner table records graphs, and path_stats, which
//   is NULL where the inner table has none and otherwise forwards the inner's counts; the
//   table keeps its inner backend's name, act dtype and memory space;
// - counts: direct calls are counted entry by entry (every other entry stays at 0), and on
//   a whole training step (forward, backward, AdamW) of the test DiT the count of a
//   "spy" entry (an inner table whose linear_forward and attention_backward count their
//   own calls) equals what the wrapper counted; class sums equal the entries' sums;
// - results: that training step on the profiled fp32 and bf16 CPU tables gives bitwise the
//   loss, gradients and updated weights of the plain tables.
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "kernels/profile.h"
#include "../model/mt.h"

static const mt_clip CLIPS[3] = {{2, 2, 3, 1, 0.3f}, {1, 3, 2, 3, 0.7f}, {3, 1, 2, 0, 0.55f}};
static const int IDS[3] = {10, 11, 12};

static const kernels_profile_entry *entry_named(const kernels_profile_entry *e, int n,
                                                const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(e[i].name, name)) return &e[i];
  return NULL;
}

static tsr_status fake_graph_begin(const kernels_backend *kb) {
  (void)kb;
  return TSR_OK;
}

static tsr_status fake_path_stats(const kernels_backend *kb, kernels_path_stats *out) {
  (void)kb;
  *out = (kernels_path_stats){.gemm_library = 7, .gemm_plain = 2, .attention_own = 3};
  return TSR_OK;
}

static void test_table(void) {
  // an inner table that records graphs: the profiled one must not
  kernels_backend inner = *kernels_cpu_bf16();
  inner.graph_begin = fake_graph_begin;
  kernels_backend *p = NULL;
  CHECK_OK(kernels_profiled(&inner, 0, &p));
  if (!p) return;
  CHECK(!p->graph_begin && !p->graph_end && !p->graph_launch && !p->graph_free,
        "a profiled table records no graphs");
  size_t first = offsetof(kernels_backend, alloc);
  int n = (int)((sizeof *p - first) / sizeof(void (*)(void))), null = 0;
  for (int i = 0; i < n; i++) {
    void (*f)(void);
    memcpy(&f, (const char *)p + first + (size_t)i * sizeof f, sizeof f);
    null += f == NULL;
  }
  CHECK(null == 5, "%d of %d entries are NULL (the 4 graph_* ones and path_stats expected)",
        null, n);
  kernels_profile_entry e[128];
  int ne = kernels_profile_read(p, e, 128);
  CHECK(ne == n - 5, "entries %d, struct %d (4 graph_* and path_stats not profiled)", ne, n);
  CHECK(!strcmp(p->name, "cpu-bf16") && p->act_dtype == KERNELS_BF16 && !p->device_memory,
        "name %s", p->name);
  CHECK(kernels_is_profiled(p) && !kernels_is_profiled(kernels_cpu()), "is_profiled");
  CHECK(kernels_profiled_inner(p) == &inner, "inner");
  CHECK(kernels_profile_read(kernels_cpu(), e, 128) == 0, "reading a plain table");
  kernels_profiled_free(&p);
  CHECK(p == NULL, "freed");
  // an inner table that counts its paths: the profiled one forwards them
  inner.path_stats = fake_path_stats;
  CHECK_OK(kernels_profiled(&inner, 0, &p));
  if (!p) return;
  kernels_path_stats ps = {0};
  CHECK(p->path_stats && p->path_stats(p, &ps) == TSR_OK && ps.gemm_library == 7 &&
        ps.gemm_plain == 2 && ps.attention_own == 3 && ps.attention_library == 0,
        "path_stats forwarded: %lld %lld", (long long)ps.gemm_library, (long long)ps.gemm_plain);
  kernels_profiled_free(&p);
}

static void test_direct_counts(void) {
  kernels_backend *p = NULL;
  CHECK_OK(kernels_profiled(kernels_cpu(), 1, &p));
  if (!p) return;
  float a[64], b[64], c[64];
  for (int i = 0; i < 64; i++) a[i] = (float)i, b[i] = 1.0f, c[i] = 0.0f;
  for (int r = 0; r < 3; r++) CHECK_OK(p->gemm(p, 0, 0, 8, 8, 8, 1.0f, a, b, 0.0f, c));
  CHECK_OK(p->axpy(p, c, 2.0f, a, 64));
  CHECK_OK(p->axpy(p, c, 2.0f, a, 64));
  CHECK(p->gemm(p, 0, 0, -1, 8, 8, 1.0f, a, b, 0.0f, c) == TSR_EINVAL, "error passed through");
  kernels_profile_entry e[128];
  int n = kernels_profile_read(p, e, 128);
  uint64_t total = 0;
  for (int i = 0; i < n; i++) total += e[i].calls;
  const kernels_profile_entry *g = entry_named(e, n, "gemm"), *x = entry_named(e, n, "axpy");
  CHECK(g && g->calls == 4 && g->cls == KERNELS_PROFILE_GEMM, "gemm calls");
  CHECK(x && x->calls == 2 && x->cls == KERNELS_PROFILE_ELEMENTWISE, "axpy calls");
  CHECK(total == 6, "%llu calls counted, 6 made", (unsigned long long)total);
  // bytes, from the shapes: a gemm reads a, b and writes c (3 x 64 fp32), an axpy reads x,
  // y and writes y; the failed gemm adds none
  CHECK(g->bytes == 3 * 768.0 && x->bytes == 2 * 768.0, "gemm %g, axpy %g bytes", g->bytes,
        x->bytes);
  uint64_t calls[KERNELS_PROFILE_N_CLASSES];
  double sec[KERNELS_PROFILE_N_CLASSES];
  kernels_profile_by_class(e, n, calls, sec);
  CHECK(calls[KERNELS_PROFILE_GEMM] == 4 && calls[KERNELS_PROFILE_ELEMENTWISE] == 2 &&
            calls[KERNELS_PROFILE_ATTENTION] == 0, "class calls");
  CHECK(sec[KERNELS_PROFILE_GEMM] > 0 && sec[KERNELS_PROFILE_GEMM] == g->seconds, "class time");
  // layernorm_modulate_forward over 4 rows of 8 in 2 clips: inp, out (2 x 32), shift and
  // scale once per clip (2 x 2 x 8), mean, rstd (2 x 4) and cu (3), fp32 here
  int32_t cu[3] = {0, 1, 4};
  float mean[4], rstd[4];
  CHECK_OK(p->layernorm_modulate_forward(p, c, mean, rstd, a, b, b + 16, 8, cu, 2, 4, 8, 1e-6f));
  n = kernels_profile_read(p, e, 128);
  const kernels_profile_entry *lm = entry_named(e, n, "layernorm_modulate_forward");
  CHECK(lm && lm->bytes == (64 + 32) * 4.0 + (8 + 3) * 4.0, "layernorm_modulate_forward %g bytes",
        lm ? lm->bytes : -1.0);
  kernels_profile_reset(p);
  CHECK(kernels_profile_total(p) == 0.0, "reset");
  n = kernels_profile_read(p, e, 128);
  CHECK(entry_named(e, n, "gemm")->bytes == 0.0, "bytes reset");
  kernels_profiled_free(&p);
}

// The spy: the CPU fp32 table with two entries that count their calls.
static int spy_linear, spy_attn_bwd;
static tsr_status spy_linear_forward(const kernels_backend *kb, void *out, const void *inp,
                                     const void *w, const float *bias, int M, int K, int N) {
  spy_linear++;
  return kernels_cpu()->linear_forward(kernels_cpu(), out, inp, w, bias, M, K, N);
}
static tsr_status spy_attention_backward(const kernels_backend *kb, void *dq, void *dk, void *dv,
                                         const void *dout, const void *q, const void *k,
                                         const void *v, const void *out, const float *lse,
                                         const int32_t *cu, int n_clips, int max_len, int L,
                                         int H, int Dh, float scale) {
  spy_attn_bwd++;
  return kernels_cpu()->attention_backward(kernels_cpu(), dq, dk, dv, dout, q, k, v, out, lse,
                                           cu, n_clips, max_len, L, H, Dh, scale);
}

// One training step on kb: forward with the loss, backward, AdamW over the flat buffers
// (one segment per tensor). *loss, and copies of the gradients and updated weights.
static void step(const kernels_backend *kb, double *loss, float *grads, float *params) {
  dit_config c = mt_config();
  dit_model *m = NULL;
  mt_batch mb;
  CHECK_OK(dit_create(&m, &c, kb, 64, 4));
  CHECK_OK(dit_init(m, 3));
  CHECK_OK(mt_perturb(m, 4, 0.05f));
  CHECK_OK(mt_batch_make(&mb, CLIPS, 3, 12, 3, 5, IDS));
  // mt_batch_make's x and target are fp32: a bf16 table reads them in its act dtype.
  void *xt[2] = {NULL, NULL};
  if (kb->act_dtype != KERNELS_F32) {
    size_t nx = (size_t)mb.L * mb.P;
    for (int i = 0; i < 2; i++) {
      CHECK_OK(kb->alloc(kb, &xt[i], kernels_act_bytes(kb, nx)));
      CHECK_OK(kb->cast(kb, xt[i], kb->act_dtype, mb.dev[4 + i], KERNELS_F32, nx));
    }
    mb.b.x = xt[0], mb.b.target = xt[1];
  }
  size_t n = dit_num_params(m);
  int nt = dit_num_tensors(m);
  kernels_param_segment *segs = calloc((size_t)nt, sizeof *segs);
  for (int i = 0; i < nt; i++) {
    const dit_tensor *t = dit_tensor_info(m, i);
    segs[i] = (kernels_param_segment){(int64_t)t->offset, (int64_t)t->numel, i % 2, 0};
  }
  float *am = NULL, *av = NULL;
  CHECK_OK(kb->alloc(kb, (void **)&am, n * sizeof(float)));
  CHECK_OK(kb->alloc(kb, (void **)&av, n * sizeof(float)));
  CHECK_OK(dit_zero_grad(m));
  CHECK_OK(dit_forward(m, &mb.b, NULL, loss));
  CHECK_OK(dit_backward(m, &mb.b));
  memcpy(grads, dit_grads(m), n * sizeof(float));  // CPU tables: host memory
  CHECK_OK(kb->adamw_update_multi(kb, dit_params(m), dit_grads(m), am, av, dit_weights_work(m),
                                  n, segs, nt, 1e-3f, 0.9f, 0.99f, 1e-8f, 0.1f, 1, 1.0f));
  memcpy(params, dit_params(m), n * sizeof(float));
  kb->free(kb, am);
  kb->free(kb, av);
  kb->free(kb, xt[0]);
  kb->free(kb, xt[1]);
  free(segs);
  mt_batch_free(&mb);
  dit_free(&m);
}

static size_t n_params(void) {
  dit_config c = mt_config();
  dit_model *m = NULL;
  size_t n = 0;
  if (dit_create(&m, &c, kernels_cpu(), 64, 4) == TSR_OK) n = dit_num_params(m);
  dit_free(&m);
  return n;
}

static void test_step(const kernels_backend *plain, const char *what) {
  size_t n = n_params();
  float *g0 = calloc(n, sizeof(float)), *g1 = calloc(n, sizeof(float));
  float *p0 = calloc(n, sizeof(float)), *p1 = calloc(n, sizeof(float));
  double l0 = 0, l1 = -1;
  step(plain, &l0, g0, p0);
  CHECK(isfinite(l0) && l0 > 0, "%s: loss %g is not a positive number", what, l0);
  kernels_backend *prof = NULL;
  CHECK_OK(kernels_profiled(plain, 1, &prof));
  if (!prof) return;
  step(prof, &l1, g1, p1);
  CHECK(memcmp(&l0, &l1, sizeof l0) == 0, "%s: loss %.17g vs profiled %.17g", what, l0, l1);
  CHECK(memcmp(g0, g1, n * sizeof(float)) == 0, "%s: gradients differ", what);
  CHECK(memcmp(p0, p1, n * sizeof(float)) == 0, "%s: updated weights differ", what);
  kernels_profile_entry e[128];
  int ne = kernels_profile_read(prof, e, 128);
  const kernels_profile_entry *a = entry_named(e, ne, "adamw_update_multi");
  CHECK(a && a->calls == 1 && a->cls == KERNELS_PROFILE_OPTIMIZER, "%s: adamw calls", what);
  CHECK(kernels_profile_total(prof) > 0, "%s: no time measured", what);
  kernels_profiled_free(&prof);
  free(g0), free(g1), free(p0), free(p1);
}

// Counted calls of a training step equal the calls the inner table saw.
static void test_step_counts(void) {
  kernels_backend spy = *kernels_cpu(), *prof = NULL;
  spy.linear_forward = spy_linear_forward;
  spy.attention_backward = spy_attention_backward;
  CHECK_OK(kernels_profiled(&spy, 0, &prof));
  if (!prof) return;
  size_t n = n_params();
  float *g = calloc(n, sizeof(float)), *p = calloc(n, sizeof(float));
  double l = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  step(prof, &l, g, p);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  kernels_profile_entry e[128];
  int ne = kernels_profile_read(prof, e, 128);
  const kernels_profile_entry *lf = entry_named(e, ne, "linear_forward");
  const kernels_profile_entry *ab = entry_named(e, ne, "attention_backward");
  CHECK(spy_linear > 0 && lf && lf->calls == (uint64_t)spy_linear,
        "linear_forward: %d made, %llu counted", spy_linear,
        lf ? (unsigned long long)lf->calls : 0ULL);
  CHECK(spy_attn_bwd == mt_config().depth && ab && ab->calls == (uint64_t)spy_attn_bwd,
        "attention_backward: %d made, %llu counted", spy_attn_bwd,
        ab ? (unsigned long long)ab->calls : 0ULL);
  double sec[KERNELS_PROFILE_N_CLASSES], sum = 0;
  kernels_profile_by_class(e, ne, NULL, sec);
  for (int c = 0; c < KERNELS_PROFILE_N_CLASSES; c++) sum += sec[c];
  CHECK(sum == kernels_profile_total(prof) || fabs(sum - kernels_profile_total(prof)) < 1e-12,
        "class sums %.9g vs total %.9g", sum, kernels_profile_total(prof));
  CHECK(kernels_profile_total(prof) <= wall, "entries %.6f s > wall %.6f s",
        kernels_profile_total(prof), wall);
  kernels_profiled_free(&prof);
  free(g), free(p);
}

int main(void) {
  test_table();
  test_direct_counts();
  test_step(kernels_cpu(), "cpu");
  test_step(kernels_cpu_bf16(), "cpu-bf16");
  test_step_counts();
  return check_done();
}
