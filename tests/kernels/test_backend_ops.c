// tests/kernels/test_backend_ops.c — every entry of every built backend against the CPU
// fp32 backend (in the spirit of ggml's test-backend-ops).
//
// For each backend of kernels_backends() other than the reference (the first, "cpu"):
// random inputs, several shapes (ragged cu_seqlens with empty and 1-token clips, odd
// sizes, L not a multiple of the 64-token attention tile, the head dims of the configs
// 16, 64, 128), the same inputs to both backends — [act] inputs rounded to the tested
// backend's act dtype first, so the comparison measures the entry's own error and not the
// rounding of its inputs — and every output compared. Accumulated outputs start from the
// same (rounded) values on both sides. The backend under test gets its tensors through
// alloc/to_device/to_host, so a device backend runs here unchanged.
//
// Error of an output: max |out - ref| / max |ref| (relative to the reference's max-norm,
// meaningful also for outputs with tiny elements). Tolerances (tol_of):
//   fp32 output: 2^-14. The same math in fp32 in another order (another GEMM blocking,
//     another reduction tree) differs by at most about K u Σ|terms| (u = 2^-24); for the
//     K <= 512-term sums here, with inputs of magnitude <= 2 that is far below 2^-14 of the
//     max-norm, which leaves room for cancellation in sums.
//   bf16 output: 2^-8 + 2^-14. bf16 keeps 8 significant bits, so storing a value rounds it
//     by at most u = 2^-8 of itself (nearest even), hence at most 2^-8 of the max-norm;
//     plus the fp32 term above for the arithmetic before the one rounding. A backend that
//     rounds inside an entry too (e.g. the probabilities P to bf16 in a flash-attention
//     kernel) must add its own slack for that entry in tol_of, with the reason.
//   cuDNN's fused attention (the CUDA backend unless TESSERA_CUDA_ATTENTION=own) rounds P
//     (forward) and P, dS (backward) to bf16 before its tensor-core products, which adds up
//     to about 2^-8 of the max-norm again: its bf16 outputs get 3 * 2^-8 (emulated in double
//     on these inputs by attention_bf16_error.py, 100 draws: at most 2^-7.45 including the
//     store, so a 2x margin).
//   Run to run: attention_backward is repeated on the same inputs and must give bitwise the
//     same gradients (the backends' determinism), except where cuDNN's backward may run with
//     its atomic dQ (TESSERA_CUDA_ATTENTION_DETERMINISTIC unset or 0, the default).
// The attention entries get the longest clip as max_len (kernels.h), once also a larger
// bound (same results), and a bound below the longest clip must be reported: by the call on
// the CPU, by the next sync on a device backend.
// Also, cpu-bf16 is DEFINED as "the fp32 entry on the same inputs, rounded once", so for
// it every [act] output must equal the reference rounded to bf16 bit for bit, and every
// [f32] output must equal the reference bit for bit (exact mismatches are counted).
#include <string.h>

#include "backend_ops.h"
#include "kt.h"
#ifdef TESSERA_TEST_CUDA
#include "kernels/cuda/cuda.h"  // kernels_cuda_attention_report (gpu_backend_ops)
#endif

// ---- the entries ------------------------------------------------------------------------
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

static void test_modulate(void) {
  for (int p = 0; p < N_PACK; p++)
    for (int Di = 0; Di < 2; Di++) modulate_case(&packings[p], Di ? 33 : 64, 6 * (Di ? 33 : 64));
}

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
    REF->gelu_forward(REF, out.h, inp.h, n);
    CHECK_OK(KB->gelu_forward(KB, out.d, inp.d, n));
    check_out("gelu_forward", "out", &out);
    REF->gelu_backward(REF, out.h, dout.h, inp.h, n);
    CHECK_OK(KB->gelu_backward(KB, out.d, dout.d, inp.d, n));
    check_out("gelu_backward", "dinp", &out);
    REF->silu_forward(REF, out.h, inp.h, n);
    CHECK_OK(KB->silu_forward(KB, out.d, inp.d, n));
    check_out("silu_forward", "out", &out);
    REF->silu_backward(REF, out.h, dout.h, inp.h, n);
    CHECK_OK(KB->silu_backward(KB, out.d, dout.d, inp.d, n));
    check_out("silu_backward", "dinp", &out);
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
static void test_attention_masked(void) {
  if (!KB->attention_masked_forward) {
    CHECK(!KB->attention_masked_backward && !KB->attention_masked_partial_backward,
          "%s: the masked entries come together", KB->name);
    printf("%s: no masked attention entries (declined: the model refuses a mask)\n", KB->name);
    return;
  }
  const kernels_mask masks[] = {
      {.kind = KERNELS_MASK_FULL},
      {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 2, .window = 1},
      {.kind = KERNELS_MASK_WINDOW, .wt = 1, .wh = 0, .ww = 1, .tile_t = 1, .tile_h = 1, .tile_w = 2},
  };
  const int H = 2, Dh = 16;
  for (int p = 0; p < N_PACK; p++)
    for (int mi = 0; mi < 3; mi++) {
      const packing *pk = &packings[p];
      const kernels_mask m = masks[mi];
      int C = pk->n_clips, L = pk->L, mx = longest_of(pk->cu, C);
      float sc = 1.0f / sqrtf((float)Dh);
      size_t n = (size_t)L * H * Dh, nl = (size_t)L * H;
      // each clip a grid of frames of 2 x 3 tokens, in raster order
      int32_t *pos = malloc(sizeof(int32_t) * 3 * (L ? L : 1));
      for (int c = 0; c < C; c++)
        for (int i = 0; i < pk->cu[c + 1] - pk->cu[c]; i++) {
          int32_t *ps = pos + 3 * (pk->cu[c] + i);
          ps[0] = i / 6, ps[1] = i / 3 % 2, ps[2] = i % 3;
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
      REF->attention_masked_partial_backward(REF, dq.h, dk.h, dv.h, dout.h, q.h, k.h, v.h, lse.h,
                                             delta.h, pk->cu, pk->cu, pos, pos, m, C, mx, mx, L, L,
                                             H, Dh, sc);
      CHECK_OK(KB->attention_masked_partial_backward(KB, dq.d, dk.d, dv.d, dout.d, q.d, k.d, v.d,
                                                     lse.d, delta.d, cu, cu, dpos, dpos, m, C, mx,
                                                     mx, L, L, H, Dh, sc));
      check_out("attention_masked_partial_backward", "dq", &dq);
      check_out("attention_masked_partial_backward", "dk", &dk);
      check_out("attention_masked_partial_backward", "dv", &dv);
      tens all[] = {q, k, v, out, lse, dout, dq, dk, dv, delta};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
      KB->free(KB, cu), KB->free(KB, dpos), free(pos);
    }
}

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
      REF->attention_partial_backward(REF, dq.h, dkb.h, dvb.h, dout.h, q.h, kb2.h, vb2.h, lse.h,
                                      delta.h, pk->cu, cuk, C, mx, mk, L, Lk, H, Dh, sc);
      CHECK_OK(KB->attention_partial_backward(KB, dq.d, dkb.d, dvb.d, dout.d, q.d, kb2.d, vb2.d,
                                              lse.d, delta.d, cu, dcuk, C, mx, mk, L, Lk, H, Dh,
                                              sc));
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
                                                            kb2.d, vb2.d, lse.d, delta.d, cu, dcuk,
                                                            C, mx - 1, mk, L, Lk, H, Dh, sc),
                             "attention_partial_backward");
      }
      tens all[] = {q, k, v, out, lse, dout, dq, dk, dv, kb2, vb2, ob, lb, delta, dkb, dvb};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
      KB->free(KB, cu), KB->free(KB, dcuk);
    }
}

static void test_objective_loss_optim(void) {
  for (int p = 0; p < 2 * N_PACK; p++) {  // P = 9, then 16 (whole 16-byte vectors of bf16)
    const packing *pk = &packings[p % N_PACK];
    int C = pk->n_clips, L = pk->L, P = p < N_PACK ? 9 : 16;
    size_t n = (size_t)L * P;
    int32_t *cu = d_cu(pk);
    kernels_clip_key keys[8];
    for (int c = 0; c < C; c++)
      keys[c] = (kernels_clip_key){100 + c, 3 * (pk->cu[c + 1] - pk->cu[c]) + 2, c % 2};
    void *dkeys = t_raw(keys, sizeof(kernels_clip_key) * C);
    tens t = t_f32(C, 0, 1), x = t_act(n, 0, 1), target = t_act(n, 0, 1);
    // tokens of each store dtype: uint8 pixels, bf16 and f32 latents
    for (int tdt = KERNELS_TOKENS_U8; tdt <= KERNELS_TOKENS_F32; tdt++) {
      size_t tsz = kernels_tokens_size((kernels_tokens)tdt);
      char *u = malloc(n * tsz);
      for (size_t i = 0; i < n; i++) {
        float f = (float)((int)(i * 131 % 256) - 128) / 37.0f;
        if (tdt == KERNELS_TOKENS_U8) ((uint8_t *)u)[i] = (uint8_t)(i * 131 % 256);
        else if (tdt == KERNELS_TOKENS_BF16) ((kernels_bf16 *)u)[i] = kernels_f32_to_bf16(f);
        else ((float *)u)[i] = f;
      }
      void *du = t_raw(u, n * tsz);
      // the length shift and a range of t (train.t_min, t_max)
      kernels_t_dist td = {.logit_mean = 0.0, .logit_std = 1.0, .shift_tokens = 64,
                           .t_min = 0.125, .t_max = 0.875};
      REF->objective_inputs(REF, t.h, x.h, target.h, u, (kernels_tokens)tdt, keys, pk->cu, C, L,
                            P, 42, 7, td);
      CHECK_OK(KB->objective_inputs(KB, t.d, x.d, target.d, du, (kernels_tokens)tdt, dkeys, cu, C,
                                    L, P, 42, 7, td));
      check_out("objective_inputs", "t", &t);
      check_out("objective_inputs", "x_t", &x);
      check_out("objective_inputs", "target", &target);
      KB->free(KB, du);
      free(u);
    }

    tens pred = t_act(n, -3, 3), w = t_f32(C, 0, 0.01), loss = t_f32(1, 0, 1), sse = t_f32(C, 0, 1);
    REF->mse_forward(REF, loss.h, sse.h, pred.h, target.h, w.h, pk->cu, C, L, P);
    CHECK_OK(KB->mse_forward(KB, loss.d, sse.d, pred.d, target.d, w.d, cu, C, L, P));
    check_out("mse_forward", "loss", &loss);
    check_out("mse_forward", "sse", &sse);
    REF->mse_backward(REF, x.h, pred.h, target.h, w.h, pk->cu, C, L, P);
    CHECK_OK(KB->mse_backward(KB, x.d, pred.d, target.d, w.d, cu, C, L, P));
    check_out("mse_backward", "dpred", &x);

    // Euler: state fp32, predictions [act]; guided and not.
    tens xs = t_f32(n, -2, 2), vc = t_act(n, -2, 2), vu = t_act(n, -2, 2);
    REF->euler_update(REF, xs.h, vc.h, vu.h, 3.5f, -0.05f, n);
    CHECK_OK(KB->euler_update(KB, xs.d, vc.d, vu.d, 3.5f, -0.05f, n));
    REF->euler_update(REF, xs.h, vc.h, NULL, 1.0f, -0.125f, n);
    CHECK_OK(KB->euler_update(KB, xs.d, vc.d, NULL, 1.0f, -0.125f, n));
    check_out("euler_update", "x", &xs);

    tens all[] = {t, x, target, pred, w, loss, sse, xs, vc, vu};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
    KB->free(KB, cu), KB->free(KB, dkeys);
  }
  size_t n = 40001;
  tens p = t_f32(n, -1, 1), g = t_f32(n, -1, 1), m = t_f32(n, -0.1, 0.1), v = t_f32(n, 0, 0.01);
  tens ema = t_f32(n, -1, 1), ss = t_f32(2, 0, 1);  // sumsq's double, as two floats' bytes
  double rs, ks;
  REF->sumsq(REF, &rs, g.h, n);
  CHECK_OK(KB->sumsq(KB, &ks, g.d, n));
  ss.h[0] = (float)rs, ss.h[1] = (float)(rs - (float)rs);
  float kk[2] = {(float)ks, (float)(ks - (float)ks)};
  CHECK_OK(KB->to_device(KB, ss.d, kk, sizeof kk));
  check_out("sumsq", "result", &ss);
  REF->adamw_update(REF, p.h, g.h, m.h, v.h, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.7f);
  CHECK_OK(KB->adamw_update(KB, p.d, g.d, m.d, v.d, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.7f));
  check_out("adamw_update", "param", &p);
  check_out("adamw_update", "m", &m);
  check_out("adamw_update", "v", &v);
  REF->ema_update(REF, ema.h, p.h, n, 0.999f);
  CHECK_OK(KB->ema_update(KB, ema.d, p.d, n, 0.999f));
  check_out("ema_update", "ema", &ema);
  tens all[] = {p, g, m, v, ema, ss};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
}

// ---- the fused entries against the reference's (on every backend) ---------------------
// layernorm_modulate forward and backward on packing pk, rows of D, vectors at stride ms.
static void ln_mod_case(const packing *pk, int D, int ms) {
  int C = pk->n_clips, L = pk->L;
  size_t n = (size_t)L * D, nv = (size_t)C * ms, as = act_size();
  int32_t *cu = d_cu(pk);
  tens ada = t_act(nv, -1, 1), dada = t_act(nv, -1, 1), inp = t_act(n, -2, 3);
  tens out = t_act(n, 0, 1), mean = t_f32(L, 0, 1), rstd = t_f32(L, 0, 1);
#define AH(t, k) ((t).h + (size_t)(k) * D)
#define AD(t, k) ((void *)((char *)(t).d + (size_t)(k) * D * as))
  REF->layernorm_modulate_forward(REF, out.h, mean.h, rstd.h, inp.h, AH(ada, 0), AH(ada, 1),
                                  ms, pk->cu, C, L, D, 1e-6f);
  CHECK_OK(KB->layernorm_modulate_forward(KB, out.d, mean.d, rstd.d, inp.d, AD(ada, 0),
                                          AD(ada, 1), ms, cu, C, L, D, 1e-6f));
  check_out("layernorm_modulate_forward", "out", &out);
  check_out("layernorm_modulate_forward", "mean", &mean);
  check_out("layernorm_modulate_forward", "rstd", &rstd);
  tens dout = t_act(n, -1, 1), dinp = t_act(n, -1, 1);  // dinp accumulated
  REF->layernorm_modulate_backward(REF, dinp.h, AH(dada, 0), AH(dada, 1), dout.h, inp.h,
                                   mean.h, rstd.h, AH(ada, 1), ms, pk->cu, C, L, D);
  CHECK_OK(KB->layernorm_modulate_backward(KB, dinp.d, AD(dada, 0), AD(dada, 1), dout.d, inp.d,
                                           mean.d, rstd.d, AD(ada, 1), ms, cu, C, L, D));
  check_out("layernorm_modulate_backward", "dinp", &dinp);
  check_out("layernorm_modulate_backward", "dshift+dscale+stride", &dada);
  {  // run to run: the per-clip sums again on the same inputs, bitwise (fixed orders on a GPU)
    size_t vb = nv * as;
    char *h[2] = {malloc(vb ? vb : 1), malloc(vb ? vb : 1)};
    for (int k = 0; k < 2; k++) {
      CHECK_OK(KB->layernorm_modulate_backward(KB, NULL, AD(dada, 0), AD(dada, 1), dout.d, inp.d,
                                               mean.d, rstd.d, AD(ada, 1), ms, cu, C, L, D));
      CHECK_OK(KB->to_host(KB, h[k], dada.d, vb));
    }
    CHECK(memcmp(h[0], h[1], vb) == 0, "%s layernorm_modulate_backward: dshift/dscale differ run "
          "to run (L %d, D %d)", KB->name, L, D);
    free(h[0]), free(h[1]);
  }
#undef AH
#undef AD
  tens all[] = {ada, dada, inp, out, mean, rstd, dout, dinp};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
  KB->free(KB, cu);
}

// The adaLN entries on many clips of odd lengths (empty ones, 1-token ones, clips longer
// than a device block's rows and spanning several), rows of whole 16-byte vectors or not
// (D = 40 and 264: vectors, 264 = 33 of them, more than a warp's lanes; D = 36: scalars),
// and a stride that breaks the vectors' alignment (6D + 4); rows wide enough that the CUDA
// backward's column sums take more than 48 KiB of shared memory (D = 1032, 8 warps) or
// fewer warps a block (D = 2056: 5).
static void test_adaln_tiles(void) {
  static const packing many = {13, 399, {0, 0, 1, 34, 41, 105, 105, 200, 231, 263, 265, 394,
                                         399, 399}};
  int cases[][2] = {{40, 240}, {264, 6 * 264}, {36, 216}, {40, 244}, {1032, 3 * 1032},
                    {2056, 3 * 2056}};
  for (int i = 0; i < 6; i++) {
    if (i < 4) modulate_case(&many, cases[i][0], cases[i][1]);  // the wide ones: one is enough
    ln_mod_case(&many, cases[i][0], cases[i][1]);
  }
}

// adamw_update_multi's working copy w->d against KB's own updated weights p->d rounded by
// KB->cast: bit for bit inside the segments (AdamW then cast, fused), and outside them the
// values w->h it held before the call.
static void check_work(const tens *w, const tens *p, const kernels_param_segment *segs,
                       int n_segs) {
  size_t n = w->n, as = act_size();
  void *cast_d = NULL;
  CHECK_OK(KB->alloc(KB, &cast_d, n * as));
  CHECK_OK(KB->cast(KB, cast_d, KB->act_dtype, p->d, KERNELS_F32, n));
  unsigned char *got = malloc(n * as), *want = malloc(n * as), *before = malloc(n * as);
  CHECK_OK(KB->to_host(KB, got, w->d, n * as));
  CHECK_OK(KB->to_host(KB, want, cast_d, n * as));
  REF->cast(REF, before, KB->act_dtype, w->h, KERNELS_F32, n);
  long bad_in = 0, bad_gap = 0;
  int s = 0;
  for (size_t i = 0; i < n; i++) {
    while (s < n_segs && (size_t)(segs[s].offset + segs[s].numel) <= i) s++;
    int in = s < n_segs && (size_t)segs[s].offset <= i;
    if (memcmp(got + i * as, (in ? want : before) + i * as, as)) in ? bad_in++ : bad_gap++;
  }
  CHECK(bad_in == 0 && bad_gap == 0, "%s adamw_update_multi.work: %ld updated elements differ "
        "from cast of the weights, %ld elements outside the segments changed", KB->name, bad_in,
        bad_gap);
  free(got), free(want), free(before);
  KB->free(KB, cast_d);
}

static void test_fused(void) {
  for (int p = 0; p < N_PACK; p++)
    for (int Di = 0; Di < 2; Di++) ln_mod_case(&packings[p], Di ? 33 : 64, 6 * (Di ? 33 : 64));
  // Dh 16 to 512: 1 to 8 rotation pairs a lane on the CUDA backend; the last case has
  // positions up to 4095 (the end of the CUDA backend's table of cos and sin).
  int Dhs[] = {16, 64, 128, 256, 512};
  for (int s = 0; s < 5; s++) {
    int L = 70, H = s == 2 || s == 4 ? 1 : 3, Dh = Dhs[s];
    size_t n = (size_t)L * H * Dh, nr = (size_t)L * H;
    int32_t *pos = malloc(sizeof(int32_t) * 3 * L);
    for (int i = 0; i < L; i++) pos[3 * i] = i / 12, pos[3 * i + 1] = (i / 4) % 3, pos[3 * i + 2] = i % 4;
    if (s == 4)
      for (int i = 0; i < L; i++) pos[3 * i] = 4095 - i, pos[3 * i + 2] = 4095 - 2 * i;
    void *dpos = t_raw(pos, sizeof(int32_t) * 3 * L);
    tens q = t_act(n, -2, 2), k = t_act(n, -2, 2), wq = t_f32(Dh, 0.5, 1.5), wk = t_f32(Dh, 0.5, 1.5);
    tens qo = t_act(n, 0, 1), ko = t_act(n, 0, 1), qr = t_f32(nr, 0, 1), kr = t_f32(nr, 0, 1);
    REF->qk_norm_rope_forward(REF, qo.h, ko.h, qr.h, kr.h, q.h, k.h, wq.h, wk.h, pos, L, H, Dh,
                              1e-6f, 10000.0f);
    CHECK_OK(KB->qk_norm_rope_forward(KB, qo.d, ko.d, qr.d, kr.d, q.d, k.d, wq.d, wk.d, dpos, L, H,
                                      Dh, 1e-6f, 10000.0f));
    check_out("qk_norm_rope_forward", "q_out", &qo);
    check_out("qk_norm_rope_forward", "k_out", &ko);
    check_out("qk_norm_rope_forward", "q_rstd", &qr);
    check_out("qk_norm_rope_forward", "k_rstd", &kr);
    tens dq = t_act(n, -1, 1), dk = t_act(n, -1, 1), dqi = t_act(n, 0, 1), dki = t_act(n, 0, 1);
    tens dwq = t_f32(Dh, -1, 1), dwk = t_f32(Dh, -1, 1);  // accumulated
    REF->qk_norm_rope_backward(REF, dqi.h, dki.h, dwq.h, dwk.h, dq.h, dk.h, q.h, k.h, wq.h, wk.h,
                               qr.h, kr.h, pos, L, H, Dh, 10000.0f);
    CHECK_OK(KB->qk_norm_rope_backward(KB, dqi.d, dki.d, dwq.d, dwk.d, dq.d, dk.d, q.d, k.d, wq.d,
                                       wk.d, qr.d, kr.d, dpos, L, H, Dh, 10000.0f));
    check_out("qk_norm_rope_backward", "dq_in", &dqi);
    check_out("qk_norm_rope_backward", "dk_in", &dki);
    check_out("qk_norm_rope_backward", "dq_weight", &dwq);
    check_out("qk_norm_rope_backward", "dk_weight", &dwk);
    tens all[] = {q, k, wq, wk, qo, ko, qr, kr, dq, dk, dqi, dki, dwq, dwk};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
    KB->free(KB, dpos), free(pos);
  }
  if (!strcmp(KB->name, "cuda")) {  // a position past its table of cos and sin is reported
    int32_t pos[6] = {0, 1, 2, 4096, 0, 0};
    void *dpos = t_raw(pos, sizeof pos);
    tens q = t_act(32, -1, 1), w = t_f32(16, 0.5, 1.5), o = t_act(32, 0, 1), r = t_f32(2, 0, 1);
    tsr_status st = KB->qk_norm_rope_forward(KB, o.d, o.d, r.d, r.d, q.d, q.d, w.d, w.d, dpos, 2,
                                             1, 16, 1e-6f, 10000.0f);
    if (!st) st = KB->sync(KB);
    CHECK(st == TSR_EINVAL && strstr(err_msg(), "qk_norm_rope_forward"),
          "cuda qk_norm_rope_forward: position 4096 not reported (%s: %s)", err_name(st),
          err_msg());
    tens all[] = {q, w, o, r};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
    KB->free(KB, dpos);
  }
  // M, K, N: a shape cuBLASLt's GELU epilogues take (N, K multiples of 8), odd ones that
  // need the fallback, and one row; with and without bias.
  int lin[][3] = {{131, 64, 256}, {70, 33, 17}, {1, 8, 24}};
  for (int s = 0; s < 3; s++)
    for (int with_bias = 0; with_bias < 2; with_bias++) {
      int M = lin[s][0], K = lin[s][1], N = lin[s][2];
      tens inp = t_act((size_t)M * K, -1, 1), w = t_act((size_t)K * N, -0.4, 0.4);
      tens bias = t_f32(N, -1, 1), out = t_act((size_t)M * N, 0, 1), pre = t_act((size_t)M * N, 0, 1);
      REF->linear_gelu_forward(REF, out.h, pre.h, inp.h, w.h, with_bias ? bias.h : NULL, M, K, N);
      CHECK_OK(KB->linear_gelu_forward(KB, out.d, pre.d, inp.d, w.d, with_bias ? bias.d : NULL, M,
                                       K, N));
      check_out("linear_gelu_forward", "pre", &pre);
      check_out("linear_gelu_forward", "out", &out);
      // the next layer (M, N) -> (M, K): dpre = gelu'(pre) (dout w2^T)
      tens w2 = t_act((size_t)N * K, -0.4, 0.4), dout = t_act((size_t)M * K, -1, 1);
      tens dpre = t_act((size_t)M * N, 0, 1), dw = t_f32((size_t)N * K, -1, 1), db = t_f32(K, -1, 1);
      REF->linear_backward_dgelu(REF, dpre.h, dw.h, with_bias ? db.h : NULL, dout.h, out.h, w2.h,
                                 pre.h, M, N, K);
      CHECK_OK(KB->linear_backward_dgelu(KB, dpre.d, dw.d, with_bias ? db.d : NULL, dout.d, out.d,
                                         w2.d, pre.d, M, N, K));
      check_out("linear_backward_dgelu", "dpre", &dpre);
      check_out("linear_backward_dgelu", "dw", &dw);
      check_out("linear_backward_dgelu", "dbias", &db);
      tens all[] = {inp, w, bias, out, pre, w2, dout, dpre, dw, db};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
    }
  {  // AdamW over a segment table: gaps, an empty segment, decaying and not; with the
     // working copy written in the same call
    kernels_param_segment segs[] = {{0, 5, 1, 0}, {5, 0, 0, 0}, {8, 40001, 0, 0},
                                    {40009, 9000, 1, 0}, {49100, 3, 1, 0}};
    size_t n = 49110;
    void *dsegs = t_raw(segs, sizeof segs);
    tens p = t_f32(n, -1, 1), g = t_f32(n, -1, 1), m = t_f32(n, -0.1, 0.1), v = t_f32(n, 0, 0.01);
    tens w = t_act(n, -1, 1);  // its values before: the gaps must keep them
    REF->adamw_update_multi(REF, p.h, g.h, m.h, v.h, NULL, n, segs, 5, 1e-3f, 0.9f, 0.95f, 1e-8f,
                            0.1f, 3, 0.7f);
    CHECK_OK(KB->adamw_update_multi(KB, p.d, g.d, m.d, v.d, w.d, n, dsegs, 5, 1e-3f, 0.9f, 0.95f,
                                    1e-8f, 0.1f, 3, 0.7f));
    CHECK_OK(KB->sync(KB));  // a device backend reports a bad table here
    check_work(&w, &p, segs, 5);
    check_out("adamw_update_multi", "param", &p);
    check_out("adamw_update_multi", "m", &m);
    check_out("adamw_update_multi", "v", &v);
    tens all[] = {p, g, m, v, w};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
    KB->free(KB, dsegs);
  }
}

// ---- the fused entries ---------------------------------------------------------------
// (a) On the CPU fp32 backend each fused entry is BITWISE its composition (kernels.h,
// "Fused entries"): run both on the same inputs and compare every output bit for bit.
static long bit_mismatches(const float *a, const float *b, size_t n, double *maxdiff) {
  long mism = 0;
  *maxdiff = 0;
  for (size_t i = 0; i < n; i++)
    if (memcmp(&a[i], &b[i], sizeof a[i]) != 0) {
      mism++;
      double d = fabs((double)a[i] - b[i]);
      if (d > *maxdiff || isnan(d)) *maxdiff = isnan(d) ? INFINITY : d;
    }
  return mism;
}
#define SAME_BITS(what, a, b, n)                                                            \
  do {                                                                                      \
    double md_;                                                                             \
    long mm_ = bit_mismatches((a), (b), (n), &md_);                                         \
    CHECK(mm_ == 0, "cpu fused != composition: %s: %ld of %zu elements differ (max %.3g)", \
          (what), mm_, (size_t)(n), md_);                                                   \
  } while (0)

static float *copy_of(const float *x, size_t n) {
  float *y = malloc((n ? n : 1) * sizeof *y);
  memcpy(y, x, n * sizeof *y);
  return y;
}

// The reference's gemm_strided against its gemm on dense copies of the slices: within the
// fp32 tolerance (OpenBLAS may block a strided operand otherwise), bitwise with dense
// strides (kernels.h: it then is gemm), the gaps of c untouched.
static void strided_vs_dense(void) {
  const kernels_backend *R = REF;
  for (int s = 0; s < N_STRIDED; s++)
    for (int tr = 0; tr < 4; tr++)
      for (int beta_i = 0; beta_i < 2; beta_i++) {
        strided_case q = strided_of(strided_shapes[s], tr);
        float beta = beta_i ? 1.0f : 0.0f;
        size_t nc = (size_t)q.m * q.ldc, mn = (size_t)q.m * q.n;
        float *a = kt_rand((size_t)q.ra * q.lda, -1, 1), *b = kt_rand((size_t)q.rb * q.ldb, -1, 1);
        float *c = kt_rand(nc, -1, 1), *c0 = copy_of(c, nc);
        float *ad = dense_of(a, q.ra, q.ca, q.lda), *bd = dense_of(b, q.rb, q.cb, q.ldb);
        float *cd = dense_of(c, q.m, q.n, q.ldc), *cd2 = copy_of(cd, mn);
        CHECK_OK(R->gemm_strided(R, q.ta, q.tb, q.m, q.n, q.k, 0.5f, a, q.lda, b, q.ldb, beta, c,
                                 q.ldc, KERNELS_F32));
        CHECK_OK(R->gemm(R, q.ta, q.tb, q.m, q.n, q.k, 0.5f, ad, bd, beta, cd));
        float *got = dense_of(c, q.m, q.n, q.ldc);
        double e = kt_relerr_ff(got, cd, mn, 1e-30);
        CHECK(e <= 0x1p-14, "cpu gemm_strided vs gemm of the dense slices (m %d n %d k %d tr %d):"
              " error %.3g", q.m, q.n, q.k, tr, e);
        for (int i = 0; i < q.m; i++)
          for (int j = q.n; j < q.ldc; j++)
            CHECK(c[(size_t)i * q.ldc + j] == c0[(size_t)i * q.ldc + j],
                  "cpu gemm_strided wrote the gap of c at row %d column %d", i, j);
        int lda = q.ta ? q.m : q.k, ldb = q.tb ? q.k : q.n;  // dense strides: gemm itself
        CHECK_OK(R->gemm_strided(R, q.ta, q.tb, q.m, q.n, q.k, 0.5f, ad, lda > 0 ? lda : 1, bd,
                                 ldb > 0 ? ldb : 1, beta, cd2, q.n > 0 ? q.n : 1, KERNELS_F32));
        double md;
        long mm = bit_mismatches(cd2, cd, mn, &md);
        CHECK(mm == 0, "cpu gemm_strided with dense strides != gemm: %ld of %zu elements differ "
              "(max %.3g)", mm, mn, md);
        float *all[] = {a, b, c, c0, ad, bd, cd, cd2, got};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
      }
}

static void fused_vs_composition(void) {
  const kernels_backend *R = REF;
  for (int p = 0; p < N_PACK; p++)
    for (int Di = 0; Di < 2; Di++) {  // LayerNorm + modulate
      const packing *pk = &packings[p];
      int C = pk->n_clips, L = pk->L, D = Di ? 33 : 64, ms = 6 * D;
      size_t n = (size_t)L * D, nv = (size_t)C * ms;
      float *inp = kt_rand(n, -2, 3), *ada = kt_rand(nv, -1, 1), *dout = kt_rand(n, -1, 1);
      float *ln = kt_zeros(n), *o1 = kt_zeros(n), *o2 = kt_zeros(n);
      float *mu1 = kt_zeros(L), *rs1 = kt_zeros(L), *mu2 = kt_zeros(L), *rs2 = kt_zeros(L);
      float *sh = ada, *sc = ada + D;
      CHECK_OK(R->layernorm_forward(R, ln, mu1, rs1, inp, L, D, 1e-6f));
      CHECK_OK(R->modulate_forward(R, o1, ln, sh, sc, ms, pk->cu, C, L, D));
      CHECK_OK(R->layernorm_modulate_forward(R, o2, mu2, rs2, inp, sh, sc, ms, pk->cu, C, L, D, 1e-6f));
      SAME_BITS("layernorm_modulate_forward.out", o1, o2, n);
      SAME_BITS("layernorm_modulate_forward.mean", mu1, mu2, L);
      SAME_BITS("layernorm_modulate_forward.rstd", rs1, rs2, L);
      float *d1 = kt_rand(n, -1, 1), *d2 = copy_of(d1, n), *t1 = kt_zeros(n), *t2 = kt_zeros(n);
      float *g1 = kt_rand(nv, -1, 1), *g2 = copy_of(g1, nv);  // the stride's other values stay
      CHECK_OK(R->modulate_backward(R, t1, g1, g1 + D, dout, ln, sc, ms, pk->cu, C, L, D));
      CHECK_OK(R->layernorm_backward(R, t2, t1, inp, mu1, rs1, L, D));
      CHECK_OK(R->axpy_act(R, d1, 1.0f, t2, n));
      CHECK_OK(R->layernorm_modulate_backward(R, d2, g2, g2 + D, dout, inp, mu1, rs1, sc, ms,
                                              pk->cu, C, L, D));
      SAME_BITS("layernorm_modulate_backward.dinp", d1, d2, n);
      SAME_BITS("layernorm_modulate_backward.dshift+dscale+stride", g1, g2, nv);
      float *all[] = {inp, ada, dout, ln, o1, o2, mu1, rs1, mu2, rs2, d1, d2, t1, t2, g1, g2};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    }
  int Dhs[] = {16, 64, 128};
  for (int s = 0; s < 3; s++) {  // QK-norm + RoPE
    int L = 70, H = s == 2 ? 1 : 3, Dh = Dhs[s], R_ = L * H;
    size_t n = (size_t)L * H * Dh;
    int32_t *pos = malloc(sizeof(int32_t) * 3 * L);
    for (int i = 0; i < L; i++) pos[3 * i] = i / 12, pos[3 * i + 1] = (i / 4) % 3, pos[3 * i + 2] = i % 4;
    float *x[2], *w[2], *o1[2], *o2[2], *r1[2], *r2[2], *dx[2], *di1[2], *di2[2], *dw1[2], *dw2[2];
    for (int t = 0; t < 2; t++) {
      x[t] = kt_rand(n, -2, 2), w[t] = kt_rand(Dh, 0.5, 1.5), dx[t] = kt_rand(n, -1, 1);
      o1[t] = kt_zeros(n), o2[t] = kt_zeros(n), r1[t] = kt_zeros(R_), r2[t] = kt_zeros(R_);
      di1[t] = kt_zeros(n), di2[t] = kt_zeros(n), dw1[t] = kt_rand(Dh, -1, 1);
      dw2[t] = copy_of(dw1[t], Dh);
      CHECK_OK(R->rmsnorm_forward(R, o1[t], r1[t], x[t], w[t], R_, Dh, 1e-6f));
      CHECK_OK(R->rope_forward(R, o1[t], o1[t], pos, L, H, Dh, 10000.0f));
      float *tmp = kt_zeros(n);
      CHECK_OK(R->rope_backward(R, tmp, dx[t], pos, L, H, Dh, 10000.0f));
      CHECK_OK(R->rmsnorm_backward(R, di1[t], dw1[t], tmp, x[t], w[t], r1[t], R_, Dh));
      free(tmp);
    }
    CHECK_OK(R->qk_norm_rope_forward(R, o2[0], o2[1], r2[0], r2[1], x[0], x[1], w[0], w[1], pos,
                                     L, H, Dh, 1e-6f, 10000.0f));
    CHECK_OK(R->qk_norm_rope_backward(R, di2[0], di2[1], dw2[0], dw2[1], dx[0], dx[1], x[0], x[1],
                                      w[0], w[1], r1[0], r1[1], pos, L, H, Dh, 10000.0f));
    for (int t = 0; t < 2; t++) {
      char what[64];
      snprintf(what, sizeof what, "qk_norm_rope Dh %d %c: out", Dh, "qk"[t]);
      SAME_BITS(what, o1[t], o2[t], n);
      snprintf(what, sizeof what, "qk_norm_rope Dh %d %c: rstd", Dh, "qk"[t]);
      SAME_BITS(what, r1[t], r2[t], R_);
      snprintf(what, sizeof what, "qk_norm_rope Dh %d %c: dinp", Dh, "qk"[t]);
      SAME_BITS(what, di1[t], di2[t], n);
      snprintf(what, sizeof what, "qk_norm_rope Dh %d %c: dweight", Dh, "qk"[t]);
      SAME_BITS(what, dw1[t], dw2[t], Dh);
      float *all[] = {x[t], w[t], o1[t], o2[t], r1[t], r2[t], dx[t], di1[t], di2[t], dw1[t], dw2[t]};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    }
    free(pos);
  }
  int lin[][3] = {{1, 3, 5}, {131, 64, 256}, {70, 33, 17}};
  for (int s = 0; s < 3; s++) {  // linear + GELU, and the backward through GELU
    int M = lin[s][0], K = lin[s][1], N = lin[s][2];
    float *inp = kt_rand((size_t)M * K, -1, 1), *w = kt_rand((size_t)K * N, -0.5, 0.5);
    float *bias = kt_rand(N, -1, 1), *pre1 = kt_zeros((size_t)M * N), *pre2 = kt_zeros((size_t)M * N);
    float *o1 = kt_zeros((size_t)M * N), *o2 = kt_zeros((size_t)M * N);
    CHECK_OK(R->linear_forward(R, pre1, inp, w, bias, M, K, N));
    CHECK_OK(R->gelu_forward(R, o1, pre1, (size_t)M * N));
    CHECK_OK(R->linear_gelu_forward(R, o2, pre2, inp, w, bias, M, K, N));
    SAME_BITS("linear_gelu_forward.pre", pre1, pre2, (size_t)M * N);
    SAME_BITS("linear_gelu_forward.out", o1, o2, (size_t)M * N);
    // the layer after GELU: inp2 = GELU(pre) (M, N) -> (M, K2)
    int K2 = 7 + s;
    float *w2 = kt_rand((size_t)N * K2, -0.5, 0.5), *dout = kt_rand((size_t)M * K2, -1, 1);
    float *dw1 = kt_rand((size_t)N * K2, -1, 1), *dw2 = copy_of(dw1, (size_t)N * K2);
    float *db1 = kt_rand(K2, -1, 1), *db2 = copy_of(db1, K2);
    float *tmp = kt_zeros((size_t)M * N), *dp1 = kt_zeros((size_t)M * N), *dp2 = kt_zeros((size_t)M * N);
    CHECK_OK(R->linear_backward(R, tmp, dw1, db1, dout, o1, w2, M, N, K2));
    CHECK_OK(R->gelu_backward(R, dp1, tmp, pre1, (size_t)M * N));
    CHECK_OK(R->linear_backward_dgelu(R, dp2, dw2, db2, dout, o1, w2, pre1, M, N, K2));
    SAME_BITS("linear_backward_dgelu.dpre", dp1, dp2, (size_t)M * N);
    SAME_BITS("linear_backward_dgelu.dw", dw1, dw2, (size_t)N * K2);
    SAME_BITS("linear_backward_dgelu.dbias", db1, db2, K2);
    float *all[] = {inp, w, bias, pre1, pre2, o1, o2, w2, dout, dw1, dw2, db1, db2, tmp, dp1, dp2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
  }
  {  // AdamW over segments (with gaps, decaying and not) == one adamw_update per segment
    kernels_param_segment segs[] = {{0, 5, 1, 0}, {5, 0, 0, 0}, {8, 40001, 0, 0},
                                    {40009, 9000, 1, 0}, {49100, 3, 1, 0}};
    int ns = 5;
    size_t n = 49110;
    float *p1 = kt_rand(n, -1, 1), *g = kt_rand(n, -1, 1), *m1 = kt_rand(n, -0.1, 0.1);
    float *v1 = kt_rand(n, 0, 0.01);
    float *p2 = copy_of(p1, n), *m2 = copy_of(m1, n), *v2 = copy_of(v1, n);
    for (int st = 1; st <= 3; st++) {
      for (int i = 0; i < ns; i++) {
        size_t o = (size_t)segs[i].offset;
        CHECK_OK(R->adamw_update(R, p1 + o, g + o, m1 + o, v1 + o, (size_t)segs[i].numel, 1e-3f,
                                 0.9f, 0.95f, 1e-8f, segs[i].decay ? 0.1f : 0.0f, st, 0.7f));
      }
      CHECK_OK(R->adamw_update_multi(R, p2, g, m2, v2, NULL, n, segs, ns, 1e-3f, 0.9f, 0.95f,
                                     1e-8f, 0.1f, st, 0.7f));
    }
    SAME_BITS("adamw_update_multi.param", p1, p2, n);
    SAME_BITS("adamw_update_multi.m", m1, m2, n);
    SAME_BITS("adamw_update_multi.v", v1, v2, n);
    kernels_param_segment bad[] = {{0, 10, 1, 0}, {5, 10, 0, 0}};  // overlapping: refused
    CHECK(R->adamw_update_multi(R, p2, g, m2, v2, NULL, n, bad, 2, 1e-3f, 0.9f, 0.95f, 1e-8f,
                                0.1f, 4, 1.0f) == TSR_EINVAL, "overlapping segments accepted");
    CHECK(R->adamw_update_multi(R, p2, g, m2, v2, p2, n, segs, ns, 1e-3f, 0.9f, 0.95f, 1e-8f,
                                0.1f, 4, 1.0f) == TSR_EINVAL, "work = param accepted");
    float *all[] = {p1, g, m1, v1, p2, m2, v2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
  }
}

// test_backend_ops [--require NAME]: with --require (the gpu-labelled run), a backend named
// NAME must be among the built and usable ones, so a GPU machine cannot pass by skipping it.
int main(int argc, char **argv) {
  const kernels_backend *all[8];
  int nb = kernels_backends(all, 8);
  if (argc == 3 && !strcmp(argv[1], "--require")) {
    int found = 0;
    for (int b = 0; b < nb && b < 8; b++) found |= !strcmp(all[b]->name, argv[2]);
    CHECK(found, "backend %s is not among the usable backends of this build", argv[2]);
  }
  REF = all[0];
  CHECK(REF == kernels_cpu() && REF->act_dtype == KERNELS_F32,
        "the first backend must be the CPU fp32 reference");
  kt_seed(999);
  fused_vs_composition();
  strided_vs_dense();
  for (int b = 1; b < nb && b < 8; b++) {
    KB = all[b];
    EXACT = KB == kernels_cpu_bf16();
    n_stats = 0;
    kt_seed(1000 + (uint64_t)b);
    test_helpers();
    test_gemm();
    test_gemm_strided();
    test_norms();
    test_modulate();
    test_adaln_tiles();
    test_rope_act_cond();
    test_attention();
    test_attention_masked();
    test_objective_loss_optim();
    test_fused();
    printf("backend %s (act %s) vs %s:%s\n", KB->name, kernels_dtype_name(KB->act_dtype),
           REF->name, EXACT ? " exact check: [act] outputs = the reference rounded once" : "");
    printf("  %-44s %10s %10s %10s  %s\n", "entry.output", "max err", "tol", "inexact", "result");
    for (int i = 0; i < n_stats; i++)
      printf("  %-44s %10.3g %10.3g %10ld  %s\n", stats[i].entry, stats[i].err, stats[i].tol,
             stats[i].mismatches, stats[i].fails ? "FAIL" : "ok");
#ifdef TESSERA_TEST_CUDA
    if (!strcmp(KB->name, "cuda")) {  // which attention path ran (cuDNN plans, own kernels)
      static char report[16384];
      kernels_cuda_attention_report(report, sizeof report);
      printf("%s", report);
    }
#endif
  }
  return check_done();
}
