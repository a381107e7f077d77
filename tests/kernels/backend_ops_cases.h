// tests/kernels/backend_ops_cases.h — the cases of test_backend_ops.c, first half: the
// elementwise helpers, the GEMMs, the norms, adaLN modulation, RoPE, activations,
// conditioning and attention, each against the CPU fp32 reference (test_backend_ops.c's
// header comment says what is compared and the tolerances). Definitions, included by that
// one translation unit after backend_ops.h, like kt.h.
#ifndef TESSERA_TESTS_KERNELS_BACKEND_OPS_CASES_H
#define TESSERA_TESTS_KERNELS_BACKEND_OPS_CASES_H

#include "backend_ops.h"

// ---- the entries ------------------------------------------------------------------------
static const char test_helpers_entries[] = ",fill,scale,add,axpy,add_act,axpy_act,u8_affine,cast,"
    "copy_2d,";
static void test_helpers(void) {
  size_t ns[] = {1, 1000, 40001};  // 40001: above the OpenMP threshold, odd
  for (int c = 0; c < 3; c++) {
    size_t n = ns[c];
    tens x = t_f32(n, -2, 2), y = t_f32(n, -2, 2), o = t_f32(n, -1, 1);
    REF->fill(REF, o.h, 0.75f, n);
    CHECK_OK(KB->fill(KB, o.d, 0.75f, n));
    check_out("fill", "x", &o);
    REF->scale(REF, x.h, -1.5f, n);
    CHECK_OK(KB->scale(KB, x.d, -1.5f, n));
    check_out("scale", "x", &x);
    REF->add(REF, o.h, x.h, y.h, n);
    CHECK_OK(KB->add(KB, o.d, x.d, y.d, n));
    check_out("add", "out", &o);
    REF->axpy(REF, y.h, 0.3f, x.h, n);
    CHECK_OK(KB->axpy(KB, y.d, 0.3f, x.d, n));
    check_out("axpy", "y", &y);
    t_free(&x), t_free(&y), t_free(&o);

    tens a = t_act(n, -2, 2), b = t_act(n, -2, 2), out = t_act(n, -1, 1);
    REF->add_act(REF, out.h, a.h, b.h, n);
    CHECK_OK(KB->add_act(KB, out.d, a.d, b.d, n));
    check_out("add_act", "out", &out);
    REF->add_act(REF, a.h, a.h, b.h, n);
    CHECK_OK(KB->add_act(KB, a.d, a.d, b.d, n));  // in place
    check_out("add_act", "out==a", &a);
    REF->axpy_act(REF, b.h, -0.7f, out.h, n);
    CHECK_OK(KB->axpy_act(KB, b.d, -0.7f, out.d, n));
    check_out("axpy_act", "y", &b);
    uint8_t *u = malloc(n);
    for (size_t i = 0; i < n; i++) u[i] = (uint8_t)(i * 7919 % 256);
    void *du = t_raw(u, n);
    REF->u8_affine(REF, out.h, u, 2.0f / 255, -1.0f, n);
    CHECK_OK(KB->u8_affine(KB, out.d, du, 2.0f / 255, -1.0f, n));
    check_out("u8_affine", "out", &out);
    KB->free(KB, du), free(u);

    // cast f32 -> act -> f32 on the backend: the act dtype's rounding of the input.
    tens f = t_f32(n, -3, 3), back = t_f32(n, 0, 1);
    void *mid;
    CHECK_OK(KB->alloc(KB, &mid, n * act_size()));
    CHECK_OK(KB->cast(KB, mid, KB->act_dtype, f.d, KERNELS_F32, n));
    CHECK_OK(KB->cast(KB, back.d, KERNELS_F32, mid, KB->act_dtype, n));
    for (size_t i = 0; i < n; i++) back.h[i] = q_act(f.h[i]);
    check_out("cast", "f32->act->f32", &back);
    KB->free(KB, mid);
    t_free(&f), t_free(&back), t_free(&a), t_free(&b), t_free(&out);

    // copy_2d: columns [4, 9) of a (rows, 12) matrix into columns [1, 6) of a (rows, 7) one
    size_t rows = n % 997 + 1, fs = sizeof(float);
    tens src = t_f32(rows * 12, -2, 2), dst = t_f32(rows * 7, -1, 1);
    REF->copy_2d(REF, dst.h + 1, 7 * fs, src.h + 4, 12 * fs, 5 * fs, rows);
    CHECK_OK(KB->copy_2d(KB, (float *)dst.d + 1, 7 * fs, (float *)src.d + 4, 12 * fs, 5 * fs, rows));
    check_out("copy_2d", "dst", &dst);
    t_free(&src), t_free(&dst);
  }
}

static const char test_gemm_entries[] = ",gemm,linear_forward,linear_backward,";
static void test_gemm(void) {
  int shapes[][3] = {{1, 1, 1}, {37, 19, 53}, {64, 96, 130}, {5, 0, 7}};
  for (int s = 0; s < 4; s++)
    for (int tr = 0; tr < 4; tr++)
      for (int bi = 0; bi < 2; bi++) {
        int m = shapes[s][0], k = shapes[s][1], n = shapes[s][2], ta = tr & 1, tb = tr >> 1;
        float beta = bi ? 1.0f : 0.0f;
        tens a = t_act((size_t)m * k, -1, 1), b = t_act((size_t)k * n, -1, 1);
        tens c = t_act((size_t)m * n, -1, 1);
        REF->gemm(REF, ta, tb, m, n, k, 0.5f, a.h, b.h, beta, c.h);
        CHECK_OK(KB->gemm(KB, ta, tb, m, n, k, 0.5f, a.d, b.d, beta, c.d));
        check_out("gemm", "c", &c);
        t_free(&a), t_free(&b), t_free(&c);
      }
  // the last: dbias over 777 rows, several of the CUDA column sums' row slices
  int lin[][3] = {{1, 3, 5}, {131, 64, 192}, {70, 33, 17}, {777, 8, 40}};
  for (int s = 0; s < 4; s++)
    for (int with_bias = 0; with_bias < 2; with_bias++) {
      int M = lin[s][0], K = lin[s][1], N = lin[s][2];
      tens inp = t_act((size_t)M * K, -1, 1), w = t_act((size_t)K * N, -0.3, 0.3);
      tens bias = t_f32((size_t)N, -1, 1), out = t_act((size_t)M * N, -1, 1);
      REF->linear_forward(REF, out.h, inp.h, w.h, with_bias ? bias.h : NULL, M, K, N);
      CHECK_OK(KB->linear_forward(KB, out.d, inp.d, w.d, with_bias ? bias.d : NULL, M, K, N));
      check_out("linear_forward", "out", &out);
      tens dout = t_act((size_t)M * N, -1, 1), dinp = t_act((size_t)M * K, -1, 1);
      tens dw = t_f32((size_t)K * N, -1, 1), db = t_f32((size_t)N, -1, 1);  // accumulated
      REF->linear_backward(REF, dinp.h, dw.h, db.h, dout.h, inp.h, w.h, M, K, N);
      CHECK_OK(KB->linear_backward(KB, dinp.d, dw.d, db.d, dout.d, inp.d, w.d, M, K, N));
      check_out("linear_backward", "dinp", &dinp);
      check_out("linear_backward", "dw", &dw);
      check_out("linear_backward", "dbias", &db);
      tens all[] = {inp, w, bias, out, dout, dinp, dw, db};
      for (int i = 0; i < 8; i++) t_free(&all[i]);
    }
}

// gemm_strided's operands: a (ra, ca) stored with rows of lda >= ca, for shape s and
// transposes tr; the strides pad every row (3, 5 and 2 elements past a, b and c's rows).
typedef struct {
  int m, n, k, ta, tb, ra, ca, rb, cb, lda, ldb, ldc;
} strided_case;
static strided_case strided_of(const int *shape, int tr) {
  strided_case q = {.m = shape[0], .n = shape[2], .k = shape[1], .ta = tr & 1, .tb = tr >> 1};
  q.ra = q.ta ? q.k : q.m, q.ca = q.ta ? q.m : q.k;
  q.rb = q.tb ? q.n : q.k, q.cb = q.tb ? q.k : q.n;
  q.lda = q.ca + 3, q.ldb = q.cb + 5, q.ldc = q.n + 2;
  return q;
}
static const int strided_shapes[][3] = {{1, 1, 1}, {37, 19, 53}, {64, 48, 16}, {70, 16, 33},
                                        {5, 0, 7}};
enum { N_STRIDED = sizeof strided_shapes / sizeof strided_shapes[0] };

// Rows x cols of a strided matrix packed densely.
static float *dense_of(const float *x, int rows, int cols, int ld) {
  float *d = kt_zeros((size_t)rows * cols);
  for (int i = 0; i < rows; i++) memcpy(d + (size_t)i * cols, x + (size_t)i * ld, sizeof(float) * cols);
  return d;
}

static const char test_gemm_strided_entries[] = ",gemm_strided,";
static void test_gemm_strided(void) {
  for (int s = 0; s < N_STRIDED; s++)
    for (int tr = 0; tr < 4; tr++)
      for (int v = 0; v < 4; v++) {  // beta 0 / 1, c [act] / [f32]
        strided_case q = strided_of(strided_shapes[s], tr);
        float beta = (v & 1) ? 1.0f : 0.0f;
        int c_f32 = v >> 1;
        tens a = t_act((size_t)q.ra * q.lda, -1, 1), b = t_act((size_t)q.rb * q.ldb, -1, 1);
        size_t nc = (size_t)q.m * q.ldc;
        tens c = c_f32 ? t_f32(nc, -1, 1) : t_act(nc, -1, 1);
        CHECK_OK(REF->gemm_strided(REF, q.ta, q.tb, q.m, q.n, q.k, 0.5f, a.h, q.lda, b.h, q.ldb,
                                   beta, c.h, q.ldc, KERNELS_F32));
        CHECK_OK(KB->gemm_strided(KB, q.ta, q.tb, q.m, q.n, q.k, 0.5f, a.d, q.lda, b.d, q.ldb,
                                  beta, c.d, q.ldc, c_f32 ? KERNELS_F32 : KB->act_dtype));
        check_out("gemm_strided", c_f32 ? "c_f32" : "c", &c);  // the gaps included
        t_free(&a), t_free(&b), t_free(&c);
      }
  // a stride below its row's length and an output dtype that is neither are refused
  tens a = t_act(12, -1, 1), c = t_act(12, -1, 1);
  CHECK(KB->gemm_strided(KB, 0, 0, 3, 4, 3, 1.0f, a.d, 3, a.d, 4, 0.0f, c.d, 3,
                         KB->act_dtype) == TSR_EINVAL, "%s gemm_strided: ldc 3 < n 4 accepted", KB->name);
  CHECK(KB->gemm_strided(KB, 0, 0, 3, 4, 3, 1.0f, a.d, 3, a.d, 4, 0.0f, c.d, 4,
                         (kernels_dtype)7) == TSR_EINVAL, "%s gemm_strided: c_dtype 7 accepted", KB->name);
  t_free(&a), t_free(&c);
}

// gemm_batched's problems: batch of shape (m, n, k), transposes tr, the batch strides (a
// stride 0: one operand for all; the others past the problem's size by a gap, as the
// model's q, k, v weights with their biases between them), beta, bias, c's dtype.
typedef struct {
  int m, n, k, ta, tb, batch;
  int64_t sa, sb, sc, sbias;
} batched_case;
static batched_case batched_of(int m, int n, int k, int tr, int batch, int share_a) {
  batched_case q = {m, n, k, tr & 1, tr >> 1, batch, 0, 0, 0, 0};
  q.sa = share_a ? 0 : (int64_t)m * k + 3;
  q.sb = (int64_t)k * n + 16;
  q.sc = (int64_t)m * n + 8;
  q.sbias = n + 16;
  return q;
}
// Elements spanned by `batch` matrices of `size` elements, `stride` apart (at least one).
static size_t batched_span(int batch, int64_t stride, size_t size) {
  return (batch > 1 ? (size_t)(batch - 1) * (size_t)stride : 0) + (size ? size : 1);
}

static const char test_gemm_batched_entries[] = ",gemm_batched,";
static void test_gemm_batched(void) {
  // (m, n, k, batch, share a): the model's q, k, v forward (L 70 / 131 tokens, D 64) and
  // their dW (transposed a: the input, shared), odd sizes, one problem, none, k = 0
  const int shapes[][5] = {{70, 64, 64, 3, 1}, {131, 48, 48, 3, 1}, {37, 53, 19, 2, 0},
                           {33, 17, 70, 3, 1}, {5, 7, 3, 1, 0}, {4, 4, 4, 0, 0}, {5, 7, 0, 2, 1}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int tr = 0; tr < 4; tr++)
      for (int v = 0; v < 8; v++) {  // beta 0 / 1, bias or not, c [act] / [f32]
        batched_case q = batched_of(shapes[s][0], shapes[s][1], shapes[s][2], tr, shapes[s][3],
                                    shapes[s][4]);
        float beta = (v & 1) ? 1.0f : 0.0f;
        int with_bias = (v >> 1) & 1, c_f32 = v >> 2;
        tens a = t_act(batched_span(q.batch, q.sa, (size_t)q.m * q.k), -1, 1);
        tens b = t_act(batched_span(q.batch, q.sb, (size_t)q.k * q.n), -1, 1);
        tens bias = t_f32(batched_span(q.batch, q.sbias, (size_t)q.n), -1, 1);
        size_t nc = batched_span(q.batch, q.sc, (size_t)q.m * q.n);
        tens c = c_f32 ? t_f32(nc, -1, 1) : t_act(nc, -1, 1);
        CHECK_OK(REF->gemm_batched(REF, q.ta, q.tb, q.m, q.n, q.k, 0.5f, a.h, q.sa, b.h, q.sb,
                                   beta, c.h, q.sc, KERNELS_F32, with_bias ? bias.h : NULL,
                                   q.sbias, q.batch));
        CHECK_OK(KB->gemm_batched(KB, q.ta, q.tb, q.m, q.n, q.k, 0.5f, a.d, q.sa, b.d, q.sb, beta,
                                  c.d, q.sc, c_f32 ? KERNELS_F32 : KB->act_dtype,
                                  with_bias ? bias.d : NULL, q.sbias, q.batch));
        check_out("gemm_batched", c_f32 ? "c_f32" : "c", &c);  // the gaps included
        t_free(&a), t_free(&b), t_free(&bias), t_free(&c);
      }
  // overlapping outputs, a negative stride or batch, an output dtype that is neither
  tens a = t_act(64, -1, 1), c = t_act(64, -1, 1);
  CHECK(KB->gemm_batched(KB, 0, 0, 3, 4, 3, 1.0f, a.d, 0, a.d, 12, 0.0f, c.d, 11, KB->act_dtype,
                         NULL, 0, 2) == TSR_EINVAL, "%s gemm_batched: stride_c 11 < 12 accepted",
        KB->name);
  CHECK(KB->gemm_batched(KB, 0, 0, 3, 4, 3, 1.0f, a.d, -1, a.d, 12, 0.0f, c.d, 12, KB->act_dtype,
                         NULL, 0, 2) == TSR_EINVAL, "%s gemm_batched: stride_a -1 accepted",
        KB->name);
  CHECK(KB->gemm_batched(KB, 0, 0, 3, 4, 3, 1.0f, a.d, 0, a.d, 12, 0.0f, c.d, 12, KB->act_dtype,
                         NULL, 0, -1) == TSR_EINVAL, "%s gemm_batched: batch -1 accepted", KB->name);
  CHECK(KB->gemm_batched(KB, 0, 0, 3, 4, 3, 1.0f, a.d, 0, a.d, 12, 0.0f, c.d, 12,
                         (kernels_dtype)7, NULL, 0, 2) == TSR_EINVAL,
        "%s gemm_batched: c_dtype 7 accepted", KB->name);
  t_free(&a), t_free(&c);
}

static const char test_norms_entries[] = ",layernorm_forward,layernorm_backward,rmsnorm_forward,"
    "rmsnorm_backward,";
static void test_norms(void) {
  int shapes[][2] = {{1, 1}, {131, 64}, {70, 67}, {262, 16}};
  for (int s = 0; s < 4; s++) {
    int L = shapes[s][0], D = shapes[s][1];
    size_t n = (size_t)L * D;
    tens inp = t_act(n, -2, 3), out = t_act(n, 0, 1), mean = t_f32(L, 0, 1), rstd = t_f32(L, 0, 1);
    REF->layernorm_forward(REF, out.h, mean.h, rstd.h, inp.h, L, D, 1e-6f);
    CHECK_OK(KB->layernorm_forward(KB, out.d, mean.d, rstd.d, inp.d, L, D, 1e-6f));
    check_out("layernorm_forward", "out", &out);
    check_out("layernorm_forward", "mean", &mean);
    check_out("layernorm_forward", "rstd", &rstd);
    tens dout = t_act(n, -1, 1), dinp = t_act(n, 0, 1);
    REF->layernorm_backward(REF, dinp.h, dout.h, inp.h, mean.h, rstd.h, L, D);
    CHECK_OK(KB->layernorm_backward(KB, dinp.d, dout.d, inp.d, mean.d, rstd.d, L, D));
    check_out("layernorm_backward", "dinp", &dinp);

    tens w = t_f32(D, 0.5, 1.5), dw = t_f32(D, -1, 1);
    REF->rmsnorm_forward(REF, out.h, rstd.h, inp.h, w.h, L, D, 1e-6f);
    CHECK_OK(KB->rmsnorm_forward(KB, out.d, rstd.d, inp.d, w.d, L, D, 1e-6f));
    check_out("rmsnorm_forward", "out", &out);
    check_out("rmsnorm_forward", "rstd", &rstd);
    REF->rmsnorm_backward(REF, dinp.h, dw.h, dout.h, inp.h, w.h, rstd.h, L, D);
    CHECK_OK(KB->rmsnorm_backward(KB, dinp.d, dw.d, dout.d, inp.d, w.d, rstd.d, L, D));
    // With D = 1, dinp = r w g (1 - x^2 r^2) is the difference of two equal terms (r^2 =
    // 1 / (x^2 + eps)): every backend returns rounding noise of r w g there, which no
    // relative tolerance can compare (the emulated CUDA device: 3.1e-7 against 3.0e-7).
    if (D > 1) check_out("rmsnorm_backward", "dinp", &dinp);
    check_out("rmsnorm_backward", "dweight", &dw);
    tens all[] = {inp, out, mean, rstd, dout, dinp, w, dw};
    for (int i = 0; i < 8; i++) t_free(&all[i]);
  }
}

// modulate and gate + residual, forward and backward, on packing pk with rows of D and the
// adaLN vectors at stride ms.
static void modulate_case(const packing *pk, int D, int ms) {
  int C = pk->n_clips, L = pk->L;
  size_t n = (size_t)L * D, nv = (size_t)C * ms;
  int32_t *cu = d_cu(pk);
  // The adaLN output (C, 6D): shift, scale, gate are its 1st, 2nd, 3rd D-column blocks.
  tens ada = t_act(nv, -1, 1), dada = t_act(nv, -1, 1);
  tens inp = t_act(n, -2, 2), res = t_act(n, -2, 2), out = t_act(n, 0, 1);
  size_t as = act_size();
#define AH(t, k) ((t).h + (size_t)(k) * D)
#define AD(t, k) ((void *)((char *)(t).d + (size_t)(k) * D * as))
  REF->modulate_forward(REF, out.h, inp.h, AH(ada, 0), AH(ada, 1), ms, pk->cu, C, L, D);
  CHECK_OK(KB->modulate_forward(KB, out.d, inp.d, AD(ada, 0), AD(ada, 1), ms, cu, C, L, D));
  check_out("modulate_forward", "out", &out);
  REF->modulate_forward(REF, inp.h, inp.h, AH(ada, 0), AH(ada, 1), ms, pk->cu, C, L, D);
  CHECK_OK(KB->modulate_forward(KB, inp.d, inp.d, AD(ada, 0), AD(ada, 1), ms, cu, C, L, D));
  check_out("modulate_forward", "out==inp", &inp);
  tens dout = t_act(n, -1, 1), dinp = t_act(n, 0, 1);
  REF->modulate_backward(REF, dinp.h, AH(dada, 0), AH(dada, 1), dout.h, inp.h, AH(ada, 1), ms,
                         pk->cu, C, L, D);
  CHECK_OK(KB->modulate_backward(KB, dinp.d, AD(dada, 0), AD(dada, 1), dout.d, inp.d,
                                 AD(ada, 1), ms, cu, C, L, D));
  check_out("modulate_backward", "dinp", &dinp);
  check_out("modulate_backward", "dshift+dscale+stride", &dada);
  REF->gate_residual_forward(REF, out.h, res.h, inp.h, AH(ada, 2), ms, pk->cu, C, L, D);
  CHECK_OK(KB->gate_residual_forward(KB, out.d, res.d, inp.d, AD(ada, 2), ms, cu, C, L, D));
  check_out("gate_residual_forward", "out", &out);
  REF->gate_residual_forward(REF, res.h, res.h, inp.h, AH(ada, 2), ms, pk->cu, C, L, D);
  CHECK_OK(KB->gate_residual_forward(KB, res.d, res.d, inp.d, AD(ada, 2), ms, cu, C, L, D));
  check_out("gate_residual_forward", "out==res", &res);
  REF->gate_residual_backward(REF, dinp.h, AH(dada, 2), dout.h, inp.h, AH(ada, 2), ms, pk->cu,
                              C, L, D);
  CHECK_OK(KB->gate_residual_backward(KB, dinp.d, AD(dada, 2), dout.d, inp.d, AD(ada, 2), ms,
                                      cu, C, L, D));
  check_out("gate_residual_backward", "dinp", &dinp);
  check_out("gate_residual_backward", "dgate", &dada);
#undef AH
#undef AD
  tens all[] = {ada, dada, inp, res, out, dout, dinp};
  for (int i = 0; i < 7; i++) t_free(&all[i]);
  KB->free(KB, cu);
}

static const char test_modulate_entries[] = ",modulate_forward,modulate_backward,"
    "gate_residual_forward,gate_residual_backward,";
static void test_modulate(void) {
  for (int p = 0; p < N_PACK; p++)
    for (int Di = 0; Di < 2; Di++) modulate_case(&packings[p], Di ? 33 : 64, 6 * (Di ? 33 : 64));
}

// NAME_forward (out from inp) and NAME_backward (dinp, into out, from dout and inp) of an
// activation with gelu's contract (kernels/entries.h), rf/rb the reference's, kf/kb the
// tested backend's, compared.
typedef tsr_status (*act_forward)(const kernels_backend *, void *, const void *, size_t);
typedef tsr_status (*act_backward)(const kernels_backend *, void *, const void *, const void *,
                                   size_t);
static void check_activation(const char *name, act_forward rf, act_forward kf, act_backward rb,
                             act_backward kb, tens *inp, tens *dout, tens *out) {
  char fwd[32], bwd[32];
  snprintf(fwd, sizeof fwd, "%s_forward", name);
  snprintf(bwd, sizeof bwd, "%s_backward", name);
  size_t n = inp->n;
  rf(REF, out->h, inp->h, n);
  CHECK_OK(kf(KB, out->d, inp->d, n));
  check_out(fwd, "out", out);
  rb(REF, out->h, dout->h, inp->h, n);
  CHECK_OK(kb(KB, out->d, dout->d, inp->d, n));
  check_out(bwd, "dinp", out);
}

static const char test_rope_act_cond_entries[] = ",rope_forward,rope_backward,gelu_forward,"
    "gelu_backward,silu_forward,silu_backward,timestep_embedding,embedding_forward,"
    "embedding_backward,";
static void test_rope_act_cond(void) {
  int Dhs[] = {16, 64, 128};
  for (int s = 0; s < 3; s++) {
    int L = 70, H = 2, Dh = Dhs[s];
    size_t n = (size_t)L * H * Dh;
    int32_t *pos = malloc(sizeof(int32_t) * 3 * L);
    for (int i = 0; i < L; i++) pos[3 * i] = i / 12, pos[3 * i + 1] = (i / 4) % 3, pos[3 * i + 2] = i % 4;
    void *dpos = t_raw(pos, sizeof(int32_t) * 3 * L);
    tens inp = t_act(n, -2, 2), out = t_act(n, 0, 1);
    REF->rope_forward(REF, out.h, inp.h, pos, L, H, Dh, 10000.0f);
    CHECK_OK(KB->rope_forward(KB, out.d, inp.d, dpos, L, H, Dh, 10000.0f));
    check_out("rope_forward", "out", &out);
    REF->rope_backward(REF, out.h, inp.h, pos, L, H, Dh, 10000.0f);
    CHECK_OK(KB->rope_backward(KB, out.d, inp.d, dpos, L, H, Dh, 10000.0f));
    check_out("rope_backward", "dinp", &out);
    t_free(&inp), t_free(&out), KB->free(KB, dpos), free(pos);
  }
  size_t ns[] = {1, 999, 40001};
  for (int s = 0; s < 3; s++) {
    size_t n = ns[s];
    tens inp = t_act(n, -5, 5), dout = t_act(n, -1, 1), out = t_act(n, 0, 1);
    check_activation("gelu", REF->gelu_forward, KB->gelu_forward, REF->gelu_backward,
                     KB->gelu_backward, &inp, &dout, &out);
    check_activation("silu", REF->silu_forward, KB->silu_forward, REF->silu_backward,
                     KB->silu_backward, &inp, &dout, &out);
    t_free(&inp), t_free(&dout), t_free(&out);
  }
  int dims[] = {256, 33};
  for (int s = 0; s < 2; s++) {
    int n = 5, dim = dims[s], V = 11, D = 67;
    tens t = t_f32(n, 0, 1000), out = t_act((size_t)n * dim, 0, 1);
    REF->timestep_embedding(REF, out.h, t.h, n, dim, 10000.0f);
    CHECK_OK(KB->timestep_embedding(KB, out.d, t.d, n, dim, 10000.0f));
    check_out("timestep_embedding", "out", &out);
    int32_t ids[5] = {3, 0, 10, 3, 7};
    void *dids = t_raw(ids, sizeof ids);
    tens table = t_f32((size_t)V * D, -1, 1), eo = t_act((size_t)n * D, 0, 1);
    tens dout = t_act((size_t)n * D, -1, 1), dtable = t_f32((size_t)V * D, -1, 1);
    REF->embedding_forward(REF, eo.h, table.h, ids, n, V, D);
    CHECK_OK(KB->embedding_forward(KB, eo.d, table.d, dids, n, V, D));
    check_out("embedding_forward", "out", &eo);
    REF->embedding_backward(REF, dtable.h, dout.h, ids, n, V, D);
    CHECK_OK(KB->embedding_backward(KB, dtable.d, dout.d, dids, n, V, D));
    check_out("embedding_backward", "dtable", &dtable);
    tens all[] = {t, out, table, eo, dout, dtable};
    for (int i = 0; i < 6; i++) t_free(&all[i]);
    KB->free(KB, dids);
  }
}

// attention_backward again on the same inputs: bitwise the same dq, dk, dv (all [act],
// L*H*Dh each), unless cuDNN's atomic backward may have run (only
// TESSERA_CUDA_ATTENTION_DETERMINISTIC=1 excludes it).
static void check_repeatable(const void *dq, const void *dk, const void *dv, size_t n,
                             const void *dout, const void *q, const void *k, const void *v,
                             const void *out, const float *lse, const int32_t *cu, int C,
                             int max_len, int L, int H, int Dh, float sc) {
  const char *det = getenv("TESSERA_CUDA_ATTENTION_DETERMINISTIC");
  if (cudnn_attention(KB, "attention_backward") && !(det && !strcmp(det, "1"))) return;
  size_t bytes = n * act_size();
  void *g2[3], *h1 = malloc(bytes ? bytes : 1), *h2 = malloc(bytes ? bytes : 1);
  const void *g1[3] = {dq, dk, dv};
  for (int i = 0; i < 3; i++) CHECK_OK(KB->alloc(KB, &g2[i], bytes));
  CHECK_OK(KB->attention_backward(KB, g2[0], g2[1], g2[2], dout, q, k, v, out, lse, cu, C, max_len,
                                  L, H, Dh, sc));
  for (int i = 0; i < 3; i++) {
    CHECK_OK(KB->to_host(KB, h1, g1[i], bytes));
    CHECK_OK(KB->to_host(KB, h2, g2[i], bytes));
    CHECK(!memcmp(h1, h2, bytes), "%s attention_backward %s: a second run differs (L %d, H %d, Dh %d)",
          KB->name, i == 0 ? "dq" : i == 1 ? "dk" : "dv", L, H, Dh);
    KB->free(KB, g2[i]);
  }
  free(h1), free(h2);
}

// A max_len below the longest clip: TSR_EINVAL from the call (the CPU checks there) or
// from the next sync (a device backend checks on the device). `at_call`: the call's status.
static void check_bound_reported(tsr_status at_call, const char *entry) {
  tsr_status st = at_call ? at_call : KB->sync(KB);
  CHECK(st == TSR_EINVAL, "%s %s: a max_len below the longest clip is not reported (%s)",
        KB->name, entry, err_name(st));
  CHECK(st != TSR_EINVAL || strstr(err_msg(), "attention") != NULL, "the error names the entry: %s",
        err_msg());
}

// The masked entries (optional, kernels.h) of every mask kind, where KB has them; a backend
// without them has none of the three (the model refuses a mask there: model/mask.h).
static const char test_attention_masked_entries[] = ",attention_masked_forward,"
    "attention_masked_backward,attention_masked_partial_backward,";
// The CUDA backend's masked calls of `mask` ("block_causal", "window") queued on cuDNN's pair
// list, forward plus backward, from its attention report (0 before the first attention
// call); -1 where the report is not built in.
static long pair_list_calls(const char *mask) {
#ifdef TESSERA_TEST_CUDA
  static char r[16384];
  char key[96];
  unsigned long f = 0, b = 0;
  kernels_cuda_attention_report(r, sizeof r);
  snprintf(key, sizeof key, "masked (%s) on cuDNN's pair list: forward ", mask);
  const char *s = strstr(r, key);
  if (s && sscanf(s + strlen(key), "%lu, backward %lu", &f, &b) != 2) return -1;
  return (long)(f + b);
#else
  (void)mask;
  return -1;
#endif
}

static void test_attention_masked(void) {
  if (!kernels_has(KB, attention_masked_forward)) {
    CHECK(!kernels_has(KB, attention_masked_backward) &&
              !kernels_has(KB, attention_masked_partial_backward),
          "%s: the masked entries come together", KB->name);
    printf("%s: no masked attention entries (declined: the model refuses a mask)\n", KB->name);
    return;
  }
  const kernels_mask masks[] = {
      {.kind = KERNELS_MASK_FULL},
      {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 2, .window = 1},
      {.kind = KERNELS_MASK_WINDOW, .wt = 1, .wh = 0, .ww = 1, .tile_t = 1, .tile_h = 1, .tile_w = 2},
      {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 1, .window = 0},
      {.kind = KERNELS_MASK_WINDOW, .wt = 1, .wh = 1, .ww = 1, .tile_t = 1, .tile_h = 1, .tile_w = 2},
      {.kind = KERNELS_MASK_WINDOW, .wt = 2, .wh = 0, .ww = 0, .tile_t = 2, .tile_h = 2, .tile_w = 3},
  };
  enum { N_MASKS = sizeof masks / sizeof masks[0] };
  const int H = 2, Dh = 16;
  // (CUDA: block_causal's window 1 takes the pair list's one-batch backward, window 0 its
  // two batches; the windows of masks 4 (wt 1: one batch) and 5 (wt 2: two) cover the 2 x 3
  // frames and take the pair list too, mask 2's (wh 0) does not and stays on the own
  // kernels.) Case N_MASKS: block_causal on clips whose frames are in reverse order (rows
  // out of order of t: the CUDA backend's pair list does not take it, its gated own kernels do)
  const char *mode = getenv("TESSERA_CUDA_ATTENTION");
  const int forced = !strcmp(KB->name, "cuda") && mode && !strcmp(mode, "cudnn");
  for (int p = 0; p < N_PACK; p++)
    for (int mi = 0; mi <= N_MASKS; mi++) {
      const packing *pk = &packings[p];
      const kernels_mask m = masks[mi == N_MASKS ? 1 : mi];
      mask_now(mi == N_MASKS ? NULL : &m, 2, 3);
      const long queued = pair_list_calls("window");
      int C = pk->n_clips, L = pk->L, mx = longest_of(pk->cu, C);
      float sc = 1.0f / sqrtf((float)Dh);
      size_t n = (size_t)L * H * Dh, nl = (size_t)L * H;
      // each clip a grid of frames of 2 x 3 tokens, in raster order
      int32_t *pos = malloc(sizeof(int32_t) * 3 * (L ? L : 1));
      for (int c = 0; c < C; c++)
        for (int i = 0, len = pk->cu[c + 1] - pk->cu[c]; i < len; i++) {
          int32_t *ps = pos + 3 * (pk->cu[c] + i);
          ps[0] = mi == N_MASKS ? (len - 1 - i) / 6 : i / 6, ps[1] = i / 3 % 2, ps[2] = i % 3;
        }
      int32_t *cu = d_cu(pk), *dpos = t_raw(pos, sizeof(int32_t) * 3 * (L ? L : 1));
      tens q = t_act(n, -2, 2), k = t_act(n, -2, 2), v = t_act(n, -1, 1);
      tens out = t_act(n, 0, 1), lse = t_f32(nl, 0, 1), dout = t_act(n, -1, 1);
      tens dq = t_act(n, 0, 1), dk = t_act(n, 0, 1), dv = t_act(n, 0, 1), delta = t_f32(nl, 0, 1);
      REF->attention_masked_forward(REF, out.h, lse.h, q.h, k.h, v.h, pk->cu, pk->cu, pos, pos, m,
                                    C, mx, mx, L, L, H, Dh, sc);
      CHECK_OK(KB->attention_masked_forward(KB, out.d, lse.d, q.d, k.d, v.d, cu, cu, dpos, dpos, m,
                                            C, mx, mx, L, L, H, Dh, sc));
      check_out("attention_masked_forward", "out", &out);
      check_out("attention_masked_forward", "lse", &lse);
      REF->attention_masked_backward(REF, dq.h, dk.h, dv.h, dout.h, q.h, k.h, v.h, out.h, lse.h,
                                     pk->cu, pos, m, C, mx, L, H, Dh, sc);
      CHECK_OK(KB->attention_masked_backward(KB, dq.d, dk.d, dv.d, dout.d, q.d, k.d, v.d, out.d,
                                             lse.d, cu, dpos, m, C, mx, L, H, Dh, sc));
      check_out("attention_masked_backward", "dq", &dq);
      check_out("attention_masked_backward", "dk", &dk);
      check_out("attention_masked_backward", "dv", &dv);
      REF->attention_delta(REF, delta.h, dout.h, out.h, L, H, Dh);
      CHECK_OK(KB->attention_delta(KB, delta.d, dout.d, out.d, L, H, Dh));
      REF->attention_masked_partial_backward(REF, dq.h, dk.h, dv.h, dout.h, q.h, k.h, v.h, out.h,
                                             lse.h, delta.h, pk->cu, pk->cu, pos, pos, m, C, mx,
                                             mx, L, L, H, Dh, sc);
      CHECK_OK(KB->attention_masked_partial_backward(KB, dq.d, dk.d, dv.d, dout.d, q.d, k.d, v.d,
                                                     out.d, lse.d, delta.d, cu, cu, dpos, dpos, m,
                                                     C, mx, mx, L, L, H, Dh, sc));
      check_out("attention_masked_partial_backward", "dq", &dq);
      check_out("attention_masked_partial_backward", "dk", &dk);
      check_out("attention_masked_partial_backward", "dv", &dv);
      // forced onto cuDNN, every window call is queued on the pair list (the device sends
      // a window narrower than the frame to the gated own kernels)
      if (forced && queued >= 0 && m.kind == KERNELS_MASK_WINDOW)
        CHECK(pair_list_calls("window") == queued + 3, "cuda: packing %d, window mask %d: %ld of its 3 "
              "calls on the pair list", p, mi, pair_list_calls("window") - queued);
      tens all[] = {q, k, v, out, lse, dout, dq, dk, dv, delta};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
      KB->free(KB, cu), KB->free(KB, dpos), free(pos);
    }
  mask_now(NULL, 0, 0);
}

// The masked partial entries on (query chunk, key block) pairs as ring attention makes
// them: per clip, the queries of one half against the keys of the other (or the same) half,
// each side with its own true positions (pos_q != pos_k, cu_q != cu_k), under both masks
// (a window narrower than the 2 x 3 frames and one covering them: CUDA's own kernels and its
// pair list; the halves start mid-frame); under block-causal the first half's queries
// against the second half's keys have none (out = 0, lse = -inf).
static const char test_attention_masked_pairs_entries[] = ",attention_masked_forward,"
    "attention_masked_partial_backward,";
static void test_attention_masked_pairs(void) {
  if (!kernels_has(KB, attention_masked_forward)) return;  // declined by the group above
  const kernels_mask masks[] = {
      {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 2, .window = 1},
      {.kind = KERNELS_MASK_WINDOW, .wt = 1, .wh = 0, .ww = 1, .tile_t = 1, .tile_h = 1, .tile_w = 2},
      {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 1, .window = 0},
      {.kind = KERNELS_MASK_WINDOW, .wt = 1, .wh = 1, .ww = 2, .tile_t = 1, .tile_h = 1,
       .tile_w = 1},
  };
  const int H = 2, Dh = 16;
  const float sc = 1.0f / sqrtf((float)Dh);
  for (int p = 0; p < N_PACK; p++)
    for (int mi = 0; mi < (int)(sizeof masks / sizeof masks[0]); mi++)
      for (int pair = 0; pair < 3; pair++) {  // (queries, keys): (2nd, 1st), (1st, 2nd), (2nd, 2nd)
        const packing *pk = &packings[p];
        const int C = pk->n_clips, qh = pair != 1, kh = pair != 0;
        int32_t *cq = malloc(sizeof(int32_t) * (C + 1)), *ck = malloc(sizeof(int32_t) * (C + 1));
        int32_t *pq = malloc(sizeof(int32_t) * 3 * (pk->L + 1)), *pkk = malloc(sizeof(int32_t) * 3 * (pk->L + 1));
        cq[0] = ck[0] = 0;
        for (int c = 0; c < C; c++) {
          int len = pk->cu[c + 1] - pk->cu[c], half = len / 2;
          int q0 = qh ? half : 0, q1 = qh ? len : half, k0 = kh ? half : 0, k1 = kh ? len : half;
          cq[c + 1] = cq[c] + q1 - q0, ck[c + 1] = ck[c] + k1 - k0;
          for (int i = q0; i < q1; i++) {  // frames of 2 x 3 tokens, raster order
            int32_t *ps = pq + 3 * (cq[c] + i - q0);
            ps[0] = i / 6, ps[1] = i / 3 % 2, ps[2] = i % 3;
          }
          for (int i = k0; i < k1; i++) {
            int32_t *ps = pkk + 3 * (ck[c] + i - k0);
            ps[0] = i / 6, ps[1] = i / 3 % 2, ps[2] = i % 3;
          }
        }
        const int Lq = cq[C], Lk = ck[C], mq = longest_of(cq, C), mk = longest_of(ck, C);
        const kernels_mask m = masks[mi];
        mask_now(&m, 2, 3);
        size_t nq = (size_t)Lq * H * Dh, nk = (size_t)Lk * H * Dh;
        int32_t *dcq = t_raw(cq, sizeof(int32_t) * (C + 1)), *dck = t_raw(ck, sizeof(int32_t) * (C + 1));
        int32_t *dpq = t_raw(pq, sizeof(int32_t) * 3 * (Lq + 1));
        int32_t *dpk = t_raw(pkk, sizeof(int32_t) * 3 * (Lk + 1));
        tens q = t_act(nq, -2, 2), k = t_act(nk, -2, 2), v = t_act(nk, -1, 1);
        tens out = t_act(nq, 0, 1), lse = t_f32((size_t)Lq * H, 0, 1), dout = t_act(nq, -1, 1);
        tens dq = t_act(nq, 0, 1), dk = t_act(nk, 0, 1), dv = t_act(nk, 0, 1);
        tens delta = t_f32((size_t)Lq * H, -1, 1);
        REF->attention_masked_forward(REF, out.h, lse.h, q.h, k.h, v.h, cq, ck, pq, pkk, m, C, mq,
                                      mk, Lq, Lk, H, Dh, sc);
        CHECK_OK(KB->attention_masked_forward(KB, out.d, lse.d, q.d, k.d, v.d, dcq, dck, dpq, dpk,
                                              m, C, mq, mk, Lq, Lk, H, Dh, sc));
        check_out("attention_masked_forward", "out (pairs)", &out);
        check_out("attention_masked_forward", "lse (pairs)", &lse);
        // the pair's out and lse stand for the final ones; delta agrees with them (kernels.h)
        REF->attention_delta(REF, delta.h, dout.h, out.h, Lq, H, Dh);
        KB->free(KB, delta.d);
        upload(&delta);
        REF->attention_masked_partial_backward(REF, dq.h, dk.h, dv.h, dout.h, q.h, k.h, v.h, out.h,
                                               lse.h, delta.h, cq, ck, pq, pkk, m, C, mq, mk, Lq,
                                               Lk, H, Dh, sc);
        CHECK_OK(KB->attention_masked_partial_backward(KB, dq.d, dk.d, dv.d, dout.d, q.d, k.d, v.d,
                                                       out.d, lse.d, delta.d, dcq, dck, dpq, dpk,
                                                       m, C, mq, mk, Lq, Lk, H, Dh, sc));
        check_out("attention_masked_partial_backward", "dq (pairs)", &dq);
        check_out("attention_masked_partial_backward", "dk (pairs)", &dk);
        check_out("attention_masked_partial_backward", "dv (pairs)", &dv);
        tens all[] = {q, k, v, out, lse, dout, dq, dk, dv, delta};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
        KB->free(KB, dcq), KB->free(KB, dck), KB->free(KB, dpq), KB->free(KB, dpk);
        free(cq), free(ck), free(pq), free(pkk);
      }
  mask_now(NULL, 0, 0);
}

static const char test_attention_entries[] = ",attention_forward,attention_backward,"
    "attention_partial_forward,attention_merge,attention_delta,attention_partial_backward,";
static void test_attention(void) {
  int Dhs[] = {16, 64, 128};
  for (int p = 0; p < N_PACK; p++)
    for (int s = 0; s < 3; s++) {
      const packing *pk = &packings[p];
      int C = pk->n_clips, L = pk->L, H = s == 2 ? 1 : 2, Dh = Dhs[s];
      int mx = longest_of(pk->cu, C);
      float sc = 1.0f / sqrtf((float)Dh);
      size_t n = (size_t)L * H * Dh, nl = (size_t)L * H;
      int32_t *cu = d_cu(pk);
      tens q = t_act(n, -2, 2), k = t_act(n, -2, 2), v = t_act(n, -1, 1);
      tens out = t_act(n, 0, 1), lse = t_f32(nl, 0, 1);
      REF->attention_forward(REF, out.h, lse.h, q.h, k.h, v.h, pk->cu, C, mx, L, H, Dh, sc);
      // a looser bound (L, on the second head dim) computes the same
      int bound = s == 1 ? L : mx;
      CHECK_OK(KB->attention_forward(KB, out.d, lse.d, q.d, k.d, v.d, cu, C, bound, L, H, Dh, sc));
      check_out("attention_forward", "out", &out);
      check_out("attention_forward", "lse", &lse);
      tens dout = t_act(n, -1, 1), dq = t_act(n, 0, 1), dk = t_act(n, 0, 1), dv = t_act(n, 0, 1);
      REF->attention_backward(REF, dq.h, dk.h, dv.h, dout.h, q.h, k.h, v.h, out.h, lse.h, pk->cu,
                              C, mx, L, H, Dh, sc);
      CHECK_OK(KB->attention_backward(KB, dq.d, dk.d, dv.d, dout.d, q.d, k.d, v.d, out.d, lse.d,
                                      cu, C, bound, L, H, Dh, sc));
      check_repeatable(dq.d, dk.d, dv.d, n, dout.d, q.d, k.d, v.d, out.d, lse.d, cu, C, bound, L,
                       H, Dh, sc);
      check_out("attention_backward", "dq", &dq);
      check_out("attention_backward", "dk", &dk);
      check_out("attention_backward", "dv", &dv);

      // Ring pieces: local queries = this packing, one K/V block of other lengths per clip
      // (some clips without keys in the block).
      int32_t cuk[8];
      cuk[0] = 0;
      for (int c = 0; c < C; c++) cuk[c + 1] = cuk[c] + (c % 3 == 1 ? 0 : 5 + 23 * c % 41);
      int Lk = cuk[C], mk = longest_of(cuk, C);
      size_t nk = (size_t)Lk * H * Dh;
      int32_t *dcuk = t_raw(cuk, sizeof(int32_t) * (C + 1));
      tens kb2 = t_act(nk, -2, 2), vb2 = t_act(nk, -1, 1), ob = t_act(n, 0, 1), lb = t_f32(nl, 0, 1);
      REF->attention_partial_forward(REF, ob.h, lb.h, q.h, kb2.h, vb2.h, pk->cu, cuk, C, mx, mk, L,
                                     Lk, H, Dh, sc);
      CHECK_OK(KB->attention_partial_forward(KB, ob.d, lb.d, q.d, kb2.d, vb2.d, cu, dcuk, C, mx, mk,
                                             L, Lk, H, Dh, sc));
      check_out("attention_partial_forward", "out", &ob);
      check_out("attention_partial_forward", "lse", &lb);
      REF->attention_merge(REF, out.h, lse.h, ob.h, lb.h, L, H, Dh);
      CHECK_OK(KB->attention_merge(KB, out.d, lse.d, ob.d, lb.d, L, H, Dh));
      check_out("attention_merge", "out_a", &out);
      check_out("attention_merge", "lse_a", &lse);
      tens delta = t_f32(nl, 0, 1);
      REF->attention_delta(REF, delta.h, dout.h, out.h, L, H, Dh);
      CHECK_OK(KB->attention_delta(KB, delta.d, dout.d, out.d, L, H, Dh));
      check_out("attention_delta", "delta", &delta);
      tens dkb = t_act(nk, -1, 1), dvb = t_act(nk, -1, 1);  // accumulated, as dq
      // out, lse: the merged (final) ones of the queries, delta from them: a ring step's
      // inputs (the CUDA backend's cuDNN path reads out, the own kernels delta)
      REF->attention_partial_backward(REF, dq.h, dkb.h, dvb.h, dout.h, q.h, kb2.h, vb2.h, out.h,
                                      lse.h, delta.h, pk->cu, cuk, C, mx, mk, L, Lk, H, Dh, sc);
      CHECK_OK(KB->attention_partial_backward(KB, dq.d, dkb.d, dvb.d, dout.d, q.d, kb2.d, vb2.d,
                                              out.d, lse.d, delta.d, cu, dcuk, C, mx, mk, L, Lk, H,
                                              Dh, sc));
      check_out("attention_partial_backward", "dq", &dq);
      check_out("attention_partial_backward", "dk", &dkb);
      check_out("attention_partial_backward", "dv", &dvb);
      if (s == 0) {  // bounds one token short of the longest clip (outputs then undefined)
        check_bound_reported(KB->attention_forward(KB, out.d, lse.d, q.d, k.d, v.d, cu, C, mx - 1,
                                                   L, H, Dh, sc), "attention_forward");
        check_bound_reported(KB->attention_backward(KB, dq.d, dk.d, dv.d, dout.d, q.d, k.d, v.d,
                                                    out.d, lse.d, cu, C, mx - 1, L, H, Dh, sc),
                             "attention_backward");
        check_bound_reported(KB->attention_partial_forward(KB, ob.d, lb.d, q.d, kb2.d, vb2.d, cu,
                                                           dcuk, C, mx, mk - 1, L, Lk, H, Dh, sc),
                             "attention_partial_forward");
        check_bound_reported(KB->attention_partial_backward(KB, dq.d, dkb.d, dvb.d, dout.d, q.d,
                                                            kb2.d, vb2.d, out.d, lse.d, delta.d,
                                                            cu, dcuk, C, mx - 1, mk, L, Lk, H, Dh,
                                                            sc),
                             "attention_partial_backward");
      }
      tens all[] = {q, k, v, out, lse, dout, dq, dk, dv, kb2, vb2, ob, lb, delta, dkb, dvb};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
      KB->free(KB, cu), KB->free(KB, dcuk);
    }
}

#endif
