// kernels/cpu/bf16.c — the entries of the "cpu-bf16" backend (kernels_cpu_bf16()).
//
// Each entry converts its bf16 [act] inputs to fp32 scratch, calls the fp32 definition
// (kcpu_*: one definition of the math, so the two tables cannot drift apart), and rounds
// each [act] output to bf16 once when storing it (kernels/dtype.h: nearest even). An
// accumulated [act] output (gemm with beta != 0, attention_merge's out_a,
// attention_partial_backward's dq/dk/dv, axpy_act's y, layernorm_modulate_backward's dinp)
// is loaded into the scratch first,
// so the sum is formed in fp32 and rounded once. [f32] arguments pass straight through.
// So for inputs that are bf16 values, an output here is bitwise the fp32 backend's output
// rounded to bf16 — the property tests/kernels/test_backend_ops.c relies on.
//
// The scratch is malloc'd per call and freed before returning (at most a few times the
// entry's own tensors; the CPU backend is the reference, not the fast path). Per-clip
// vectors (C, mstride) are converted over their whole span and stored back row by row,
// D values each, so the rest of each stride (other adaLN vectors) is never written.
// Argument errors come from the fp32 entry: a NULL tensor stays NULL, a negative size
// gives an empty scratch, and the fp32 entry names the entry and the argument (gemm_batched,
// which runs its problems one by one, checks the batch itself first: kernels/check.h).
#include <stdlib.h>

#include "kernels/check.h"
#include "kernels/cpu/cpu.h"

enum { KBF_MAX = 8 };

typedef struct {
  void *p[KBF_MAX];
  int n;
  int oom;
} kbf_scratch;

static float kbf_empty[1];  // scratch of an empty tensor (never read or written)

// n elements, 0 when a size is negative (the fp32 entry reports that).
static size_t kbf_n(int64_t a, int64_t b) { return a < 0 || b < 0 ? 0 : (size_t)a * (size_t)b; }
static size_t kbf_n3(int64_t a, int64_t b, int64_t c) { return kbf_n(a, b) * (c < 0 ? 0 : (size_t)c); }
// Elements spanned by C rows of D values with stride mstride: (C - 1) mstride + D.
static size_t kbf_span(int C, int mstride, int D) {
  return C <= 0 || D <= 0 || mstride < D ? 0 : (size_t)(C - 1) * (size_t)mstride + (size_t)D;
}

// An fp32 buffer of n elements for tensor p (NULL when p is NULL).
static float *kbf_alloc(kbf_scratch *s, const void *p, size_t n) {
  if (!p) return NULL;
  if (n == 0) return kbf_empty;
  float *f = malloc(n * sizeof(float));
  if (!f || s->n == KBF_MAX) {
    free(f);
    s->oom = 1;
    return kbf_empty;
  }
  s->p[s->n++] = f;
  return f;
}

// fp32 copy of the n bf16 values at src (an input, or an output that is accumulated).
static float *kbf_load(kbf_scratch *s, const void *src, size_t n) {
  float *f = kbf_alloc(s, src, n);
  if (f && f != kbf_empty) {
    const kernels_bf16 *h = src;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) f[i] = kernels_bf16_to_f32(h[i]);
  }
  return f;
}

// dst = bf16(src), n elements (nothing when dst is NULL).
static void kbf_store(void *dst, const float *src, size_t n) {
  if (!dst || src == kbf_empty) return;
  kernels_bf16 *h = dst;
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (size_t i = 0; i < n; i++) h[i] = kernels_f32_to_bf16(src[i]);
}

// The D values of each of C rows of stride mstride (per-clip vectors).
static void kbf_store_rows(void *dst, const float *src, int C, int mstride, int D) {
  if (!dst || src == kbf_empty) return;
  for (int c = 0; c < C; c++)
    kbf_store((kernels_bf16 *)dst + (size_t)c * mstride, src + (size_t)c * mstride, (size_t)D);
}

// Frees the scratch; returns st, or TSR_ENOMEM if a buffer could not be had (then the
// fp32 entry was not called).
static tsr_status kbf_done(kbf_scratch *s, tsr_status st) {
  for (int i = 0; i < s->n; i++) free(s->p[i]);
  return st;
}

#define KBF_OOM(op, s) \
  if ((s).oom) return kbf_done(&(s), err_set(TSR_ENOMEM, "%s: no memory for the bf16 scratch", (op)))

tsr_status kbf_add_act(kb_t *kb, void *out, const void *a, const void *b, size_t n) {
  tsr_status st = kernels_check_add_act(out, a, b, n);
  if (st) return st;
  kbf_scratch s = {0};
  float *fa = kbf_load(&s, a, n), *fb = kbf_load(&s, b, n), *fo = kbf_alloc(&s, out, n);
  KBF_OOM("add_act", s);
  st = kcpu_add(kb, fo, fa, fb, n);
  if (!st) kbf_store(out, fo, n);
  return kbf_done(&s, st);
}

tsr_status kbf_axpy_act(kb_t *kb, void *y, float alpha, const void *x, size_t n) {
  tsr_status st = kernels_check_axpy_act(y, x, n);
  if (st) return st;
  kbf_scratch s = {0};
  float *fy = kbf_load(&s, y, n), *fx = kbf_load(&s, x, n);
  KBF_OOM("axpy_act", s);
  st = kcpu_axpy(kb, fy, alpha, fx, n);
  if (!st) kbf_store(y, fy, n);
  return kbf_done(&s, st);
}

tsr_status kbf_u8_affine(kb_t *kb, void *out, const uint8_t *in, float a, float b, size_t n) {
  kbf_scratch s = {0};
  float *fo = kbf_alloc(&s, out, n);
  KBF_OOM("u8_affine", s);
  tsr_status st = kcpu_u8_affine(kb, fo, in, a, b, n);
  if (!st) kbf_store(out, fo, n);
  return kbf_done(&s, st);
}

tsr_status kbf_gemm(kb_t *kb, int trans_a, int trans_b, int m, int n, int k, float alpha,
                    const void *a, const void *b, float beta, void *c) {
  kbf_scratch s = {0};
  size_t mn = kbf_n(m, n);
  float *fa = kbf_load(&s, a, kbf_n(m, k)), *fb = kbf_load(&s, b, kbf_n(k, n));
  // beta == 0 ignores c's old contents, so they need not be loaded.
  float *fc = beta != 0.0f ? kbf_load(&s, c, mn) : kbf_alloc(&s, c, mn);
  KBF_OOM("gemm", s);
  tsr_status st = kcpu_gemm(kb, trans_a, trans_b, m, n, k, alpha, fa, fb, beta, fc);
  if (!st) kbf_store(c, fc, mn);
  return kbf_done(&s, st);
}

// The strided form: each operand converted over its span ((rows - 1) ld + row length, the
// gaps included: converting them is harmless and keeps the strides), c stored back row by
// row (kbf_store_rows), so the gaps of c are never written; an fp32 c passes straight through.
tsr_status kbf_gemm_strided(kb_t *kb, int trans_a, int trans_b, int m, int n, int k, float alpha,
                            const void *a, int lda, const void *b, int ldb, float beta, void *c,
                            int ldc, kernels_dtype c_dtype) {
  if (c_dtype != KERNELS_F32 && c_dtype != KERNELS_BF16)
    return err_set(TSR_EINVAL, "gemm_strided: c_dtype %s on backend cpu-bf16 (bf16 or f32)",
                   kernels_dtype_name(c_dtype));
  kbf_scratch s = {0};
  size_t span_a = trans_a ? kbf_span(k, lda, m) : kbf_span(m, lda, k);
  size_t span_b = trans_b ? kbf_span(n, ldb, k) : kbf_span(k, ldb, n);
  size_t span_c = kbf_span(m, ldc, n);
  float *fa = kbf_load(&s, a, span_a), *fb = kbf_load(&s, b, span_b), *fc = c;
  if (c_dtype == KERNELS_BF16)  // beta == 0 ignores c's old contents: no load
    fc = beta != 0.0f ? kbf_load(&s, c, span_c) : kbf_alloc(&s, c, span_c);
  KBF_OOM("gemm_strided", s);
  tsr_status st = kcpu_gemm_strided(kb, trans_a, trans_b, m, n, k, alpha, fa, lda, fb, ldb, beta,
                                    fc, ldc);
  if (!st && c_dtype == KERNELS_BF16) kbf_store_rows(c, fc, m, ldc, n);
  return kbf_done(&s, st);
}

// One problem after another, each converted to fp32, computed by the fp32 entry and its
// [act] c rounded once.
tsr_status kbf_gemm_batched(kb_t *kb, int trans_a, int trans_b, int m, int n, int k,
                            float alpha, const void *a, int64_t stride_a, const void *b,
                            int64_t stride_b, float beta, void *c, int64_t stride_c,
                            kernels_dtype c_dtype, const float *bias, int64_t stride_bias,
                            int batch) {
  if (c_dtype != KERNELS_F32 && c_dtype != KERNELS_BF16)
    return err_set(TSR_EINVAL, "gemm_batched: c_dtype %s on backend cpu-bf16 (bf16 or f32)",
                   kernels_dtype_name(c_dtype));
  tsr_status st = kernels_check_gemm_batched(trans_a, trans_b, m, n, k, a, stride_a, b, stride_b,
                                             c, stride_c, stride_bias, batch);
  const size_t csz = kernels_dtype_size(c_dtype);
  for (int i = 0; !st && i < batch && m > 0 && n > 0; i++) {
    kbf_scratch s = {0};
    const void *ai = k > 0 ? (const kernels_bf16 *)a + (size_t)i * (size_t)stride_a : NULL;
    const void *bi = k > 0 ? (const kernels_bf16 *)b + (size_t)i * (size_t)stride_b : NULL;
    void *ci = (char *)c + (size_t)i * (size_t)stride_c * csz;
    float *fa = kbf_load(&s, ai, kbf_n(m, k)), *fb = kbf_load(&s, bi, kbf_n(k, n)), *fc = ci;
    if (c_dtype == KERNELS_BF16)  // beta == 0 ignores c's old contents: no load
      fc = beta != 0.0f ? kbf_load(&s, ci, kbf_n(m, n)) : kbf_alloc(&s, ci, kbf_n(m, n));
    KBF_OOM("gemm_batched", s);
    st = kcpu_gemm_batched(kb, trans_a, trans_b, m, n, k, alpha, fa, 0, fb, 0, beta, fc, 0,
                           bias ? bias + (size_t)i * (size_t)stride_bias : NULL, 0, 1);
    if (!st && c_dtype == KERNELS_BF16) kbf_store(ci, fc, kbf_n(m, n));
    st = kbf_done(&s, st);
  }
  return st;
}

tsr_status kbf_linear_forward(kb_t *kb, void *out, const void *inp, const void *w,
                              const float *bias, int M, int K, int N) {
  kbf_scratch s = {0};
  float *fi = kbf_load(&s, inp, kbf_n(M, K)), *fw = kbf_load(&s, w, kbf_n(K, N));
  float *fo = kbf_alloc(&s, out, kbf_n(M, N));
  KBF_OOM("linear_forward", s);
  tsr_status st = kcpu_linear_forward(kb, fo, fi, fw, bias, M, K, N);
  if (!st) kbf_store(out, fo, kbf_n(M, N));
  return kbf_done(&s, st);
}

tsr_status kbf_linear_backward(kb_t *kb, void *dinp, float *dw, float *dbias, const void *dout,
                               const void *inp, const void *w, int M, int K, int N) {
  kbf_scratch s = {0};
  float *fd = kbf_load(&s, dout, kbf_n(M, N));
  float *fi = dw ? kbf_load(&s, inp, kbf_n(M, K)) : NULL;  // inp only for dw, w only for dinp
  float *fw = dinp ? kbf_load(&s, w, kbf_n(K, N)) : NULL;
  float *fdi = kbf_alloc(&s, dinp, kbf_n(M, K));
  KBF_OOM("linear_backward", s);
  tsr_status st = kcpu_linear_backward(kb, fdi, dw, dbias, fd, fi, fw, M, K, N);
  if (!st) kbf_store(dinp, fdi, kbf_n(M, K));
  return kbf_done(&s, st);
}

tsr_status kbf_layernorm_forward(kb_t *kb, void *out, float *mean, float *rstd, const void *inp,
                                 int L, int D, float eps) {
  kbf_scratch s = {0};
  size_t n = kbf_n(L, D);
  float *fi = kbf_load(&s, inp, n), *fo = kbf_alloc(&s, out, n);
  KBF_OOM("layernorm_forward", s);
  tsr_status st = kcpu_layernorm_forward(kb, fo, mean, rstd, fi, L, D, eps);
  if (!st) kbf_store(out, fo, n);
  return kbf_done(&s, st);
}

tsr_status kbf_layernorm_backward(kb_t *kb, void *dinp, const void *dout, const void *inp,
                                  const float *mean, const float *rstd, int L, int D) {
  kbf_scratch s = {0};
  size_t n = kbf_n(L, D);
  float *fd = kbf_load(&s, dout, n), *fi = kbf_load(&s, inp, n), *fdi = kbf_alloc(&s, dinp, n);
  KBF_OOM("layernorm_backward", s);
  tsr_status st = kcpu_layernorm_backward(kb, fdi, fd, fi, mean, rstd, L, D);
  if (!st) kbf_store(dinp, fdi, n);
  return kbf_done(&s, st);
}

tsr_status kbf_rmsnorm_forward(kb_t *kb, void *out, float *rstd, const void *inp,
                               const float *weight, int R, int C, float eps) {
  kbf_scratch s = {0};
  size_t n = kbf_n(R, C);
  float *fi = kbf_load(&s, inp, n), *fo = kbf_alloc(&s, out, n);
  KBF_OOM("rmsnorm_forward", s);
  tsr_status st = kcpu_rmsnorm_forward(kb, fo, rstd, fi, weight, R, C, eps);
  if (!st) kbf_store(out, fo, n);
  return kbf_done(&s, st);
}

tsr_status kbf_rmsnorm_backward(kb_t *kb, void *dinp, float *dweight, const void *dout,
                                const void *inp, const float *weight, const float *rstd, int R,
                                int C) {
  kbf_scratch s = {0};
  size_t n = kbf_n(R, C);
  float *fd = kbf_load(&s, dout, n), *fi = kbf_load(&s, inp, n), *fdi = kbf_alloc(&s, dinp, n);
  KBF_OOM("rmsnorm_backward", s);
  tsr_status st = kcpu_rmsnorm_backward(kb, fdi, dweight, fd, fi, weight, rstd, R, C);
  if (!st) kbf_store(dinp, fdi, n);
  return kbf_done(&s, st);
}

tsr_status kbf_modulate_forward(kb_t *kb, void *out, const void *inp, const void *shift,
                                const void *scale, int mstride, const int32_t *cu, int n_clips,
                                int L, int D) {
  kbf_scratch s = {0};
  size_t n = kbf_n(L, D), span = kbf_span(n_clips, mstride, D);
  float *fi = kbf_load(&s, inp, n), *fsh = kbf_load(&s, shift, span);
  float *fsc = kbf_load(&s, scale, span), *fo = kbf_alloc(&s, out, n);
  KBF_OOM("modulate_forward", s);
  tsr_status st = kcpu_modulate_forward(kb, fo, fi, fsh, fsc, mstride, cu, n_clips, L, D);
  if (!st) kbf_store(out, fo, n);
  return kbf_done(&s, st);
}

tsr_status kbf_modulate_backward(kb_t *kb, void *dinp, void *dshift, void *dscale,
                                 const void *dout, const void *inp, const void *scale,
                                 int mstride, const int32_t *cu, int n_clips, int L, int D) {
  kbf_scratch s = {0};
  size_t n = kbf_n(L, D), span = kbf_span(n_clips, mstride, D);
  float *fd = kbf_load(&s, dout, n);
  float *fi = dscale ? kbf_load(&s, inp, n) : NULL;     // inp only for dscale,
  float *fsc = dinp ? kbf_load(&s, scale, span) : NULL;  // scale only for dinp
  float *fdi = kbf_alloc(&s, dinp, n), *fdsh = kbf_alloc(&s, dshift, span);
  float *fdsc = kbf_alloc(&s, dscale, span);
  KBF_OOM("modulate_backward", s);
  tsr_status st = kcpu_modulate_backward(kb, fdi, fdsh, fdsc, fd, fi, fsc, mstride, cu, n_clips,
                                         L, D);
  if (!st) {
    kbf_store(dinp, fdi, n);
    kbf_store_rows(dshift, fdsh, n_clips, mstride, D);
    kbf_store_rows(dscale, fdsc, n_clips, mstride, D);
  }
  return kbf_done(&s, st);
}

tsr_status kbf_gate_residual_forward(kb_t *kb, void *out, const void *res, const void *inp,
                                     const void *gate, int mstride, const int32_t *cu,
                                     int n_clips, int L, int D) {
  kbf_scratch s = {0};
  size_t n = kbf_n(L, D);
  float *fr = kbf_load(&s, res, n), *fi = kbf_load(&s, inp, n);
  float *fg = kbf_load(&s, gate, kbf_span(n_clips, mstride, D)), *fo = kbf_alloc(&s, out, n);
  KBF_OOM("gate_residual_forward", s);
  tsr_status st = kcpu_gate_residual_forward(kb, fo, fr, fi, fg, mstride, cu, n_clips, L, D);
  if (!st) kbf_store(out, fo, n);
  return kbf_done(&s, st);
}

tsr_status kbf_gate_residual_backward(kb_t *kb, void *dinp, void *dgate, const void *dout,
                                      const void *inp, const void *gate, int mstride,
                                      const int32_t *cu, int n_clips, int L, int D) {
  kbf_scratch s = {0};
  size_t n = kbf_n(L, D), span = kbf_span(n_clips, mstride, D);
  float *fd = kbf_load(&s, dout, n);
  float *fi = dgate ? kbf_load(&s, inp, n) : NULL;    // inp only for dgate,
  float *fg = dinp ? kbf_load(&s, gate, span) : NULL;  // gate only for dinp
  float *fdi = kbf_alloc(&s, dinp, n), *fdg = kbf_alloc(&s, dgate, span);
  KBF_OOM("gate_residual_backward", s);
  tsr_status st = kcpu_gate_residual_backward(kb, fdi, fdg, fd, fi, fg, mstride, cu, n_clips, L, D);
  if (!st) {
    kbf_store(dinp, fdi, n);
    kbf_store_rows(dgate, fdg, n_clips, mstride, D);
  }
  return kbf_done(&s, st);
}

// RoPE's forward and backward share one shape: out = f(inp) rotated by the positions
// (backward: dinp = f(dout)).
typedef tsr_status (*kbf_rope_fn)(kb_t *, float *, const float *, const int32_t *, int, int,
                                  int, float);

static tsr_status kbf_rope(const char *op, kbf_rope_fn f, kb_t *kb, void *out, const void *inp,
                           const int32_t *pos, int L, int H, int Dh, float theta) {
  kbf_scratch s = {0};
  size_t n = kbf_n3(L, H, Dh);
  float *fi = kbf_load(&s, inp, n), *fo = kbf_alloc(&s, out, n);
  KBF_OOM(op, s);
  tsr_status st = f(kb, fo, fi, pos, L, H, Dh, theta);
  if (!st) kbf_store(out, fo, n);
  return kbf_done(&s, st);
}

tsr_status kbf_rope_forward(kb_t *kb, void *out, const void *inp, const int32_t *pos, int L,
                            int H, int Dh, float theta) {
  return kbf_rope("rope_forward", kcpu_rope_forward, kb, out, inp, pos, L, H, Dh, theta);
}

tsr_status kbf_rope_backward(kb_t *kb, void *dinp, const void *dout, const int32_t *pos, int L,
                             int H, int Dh, float theta) {
  return kbf_rope("rope_backward", kcpu_rope_backward, kb, dinp, dout, pos, L, H, Dh, theta);
}

// The four activation entries share one shape: out = f(inp) or dinp = f(dout, inp).
typedef tsr_status (*kbf_unary_fn)(kb_t *, float *, const float *, size_t);
typedef tsr_status (*kbf_binary_fn)(kb_t *, float *, const float *, const float *, size_t);

static tsr_status kbf_unary(const char *op, kbf_unary_fn f, kb_t *kb, void *out, const void *inp,
                            size_t n) {
  kbf_scratch s = {0};
  float *fi = kbf_load(&s, inp, n), *fo = kbf_alloc(&s, out, n);
  KBF_OOM(op, s);
  tsr_status st = f(kb, fo, fi, n);
  if (!st) kbf_store(out, fo, n);
  return kbf_done(&s, st);
}

static tsr_status kbf_binary(const char *op, kbf_binary_fn f, kb_t *kb, void *dinp,
                             const void *dout, const void *inp, size_t n) {
  kbf_scratch s = {0};
  float *fd = kbf_load(&s, dout, n), *fi = kbf_load(&s, inp, n), *fdi = kbf_alloc(&s, dinp, n);
  KBF_OOM(op, s);
  tsr_status st = f(kb, fdi, fd, fi, n);
  if (!st) kbf_store(dinp, fdi, n);
  return kbf_done(&s, st);
}

tsr_status kbf_gelu_forward(kb_t *kb, void *out, const void *inp, size_t n) {
  return kbf_unary("gelu_forward", kcpu_gelu_forward, kb, out, inp, n);
}
tsr_status kbf_gelu_backward(kb_t *kb, void *dinp, const void *dout, const void *inp, size_t n) {
  return kbf_binary("gelu_backward", kcpu_gelu_backward, kb, dinp, dout, inp, n);
}
tsr_status kbf_silu_forward(kb_t *kb, void *out, const void *inp, size_t n) {
  return kbf_unary("silu_forward", kcpu_silu_forward, kb, out, inp, n);
}
tsr_status kbf_silu_backward(kb_t *kb, void *dinp, const void *dout, const void *inp, size_t n) {
  return kbf_binary("silu_backward", kcpu_silu_backward, kb, dinp, dout, inp, n);
}

tsr_status kbf_timestep_embedding(kb_t *kb, void *out, const float *t, int n, int dim,
                                  float max_period) {
  kbf_scratch s = {0};
  float *fo = kbf_alloc(&s, out, kbf_n(n, dim));
  KBF_OOM("timestep_embedding", s);
  tsr_status st = kcpu_timestep_embedding(kb, fo, t, n, dim, max_period);
  if (!st) kbf_store(out, fo, kbf_n(n, dim));
  return kbf_done(&s, st);
}

tsr_status kbf_embedding_forward(kb_t *kb, void *out, const float *table, const int32_t *ids,
                                 int n, int V, int D) {
  kbf_scratch s = {0};
  float *fo = kbf_alloc(&s, out, kbf_n(n, D));
  KBF_OOM("embedding_forward", s);
  tsr_status st = kcpu_embedding_forward(kb, fo, table, ids, n, V, D);
  if (!st) kbf_store(out, fo, kbf_n(n, D));
  return kbf_done(&s, st);
}

tsr_status kbf_embedding_backward(kb_t *kb, float *dtable, const void *dout, const int32_t *ids,
                                  int n, int V, int D) {
  kbf_scratch s = {0};
  float *fd = kbf_load(&s, dout, kbf_n(n, D));
  KBF_OOM("embedding_backward", s);
  return kbf_done(&s, kcpu_embedding_backward(kb, dtable, fd, ids, n, V, D));
}

tsr_status kbf_attention_forward(kb_t *kb, void *out, float *lse, const void *q, const void *k,
                                 const void *v, const int32_t *cu, int n_clips, int max_len, int L,
                                 int H, int Dh, float scale) {
  kbf_scratch s = {0};
  size_t n = kbf_n3(L, H, Dh);
  float *fq = kbf_load(&s, q, n), *fk = kbf_load(&s, k, n), *fv = kbf_load(&s, v, n);
  float *fo = kbf_alloc(&s, out, n);
  KBF_OOM("attention_forward", s);
  tsr_status st =
      kcpu_attention_forward(kb, fo, lse, fq, fk, fv, cu, n_clips, max_len, L, H, Dh, scale);
  if (!st) kbf_store(out, fo, n);
  return kbf_done(&s, st);
}

tsr_status kbf_attention_backward(kb_t *kb, void *dq, void *dk, void *dv, const void *dout,
                                  const void *q, const void *k, const void *v, const void *out,
                                  const float *lse, const int32_t *cu, int n_clips, int max_len,
                                  int L, int H, int Dh, float scale) {
  kbf_scratch s = {0};
  size_t n = kbf_n3(L, H, Dh);
  float *fdo = kbf_load(&s, dout, n), *fq = kbf_load(&s, q, n), *fk = kbf_load(&s, k, n);
  float *fv = kbf_load(&s, v, n), *fo = kbf_load(&s, out, n);
  float *fdq = kbf_alloc(&s, dq, n), *fdk = kbf_alloc(&s, dk, n), *fdv = kbf_alloc(&s, dv, n);
  KBF_OOM("attention_backward", s);
  tsr_status st = kcpu_attention_backward(kb, fdq, fdk, fdv, fdo, fq, fk, fv, fo, lse, cu,
                                          n_clips, max_len, L, H, Dh, scale);
  if (!st) {
    kbf_store(dq, fdq, n);
    kbf_store(dk, fdk, n);
    kbf_store(dv, fdv, n);
  }
  return kbf_done(&s, st);
}

tsr_status kbf_attention_partial_forward(kb_t *kb, void *out, float *lse, const void *q,
                                         const void *k, const void *v, const int32_t *cu_q,
                                         const int32_t *cu_k, int n_clips, int max_q, int max_k,
                                         int Lq, int Lk, int H, int Dh, float scale) {
  kbf_scratch s = {0};
  size_t nq = kbf_n3(Lq, H, Dh), nk = kbf_n3(Lk, H, Dh);
  float *fq = kbf_load(&s, q, nq), *fk = kbf_load(&s, k, nk), *fv = kbf_load(&s, v, nk);
  float *fo = kbf_alloc(&s, out, nq);
  KBF_OOM("attention_partial_forward", s);
  tsr_status st = kcpu_attention_partial_forward(kb, fo, lse, fq, fk, fv, cu_q, cu_k, n_clips,
                                                 max_q, max_k, Lq, Lk, H, Dh, scale);
  if (!st) kbf_store(out, fo, nq);
  return kbf_done(&s, st);
}

tsr_status kbf_attention_merge(kb_t *kb, void *out_a, float *lse_a, const void *out_b,
                               const float *lse_b, int L, int H, int Dh) {
  kbf_scratch s = {0};
  size_t n = kbf_n3(L, H, Dh);
  float *fa = kbf_load(&s, out_a, n), *fb = kbf_load(&s, out_b, n);
  KBF_OOM("attention_merge", s);
  tsr_status st = kcpu_attention_merge(kb, fa, lse_a, fb, lse_b, L, H, Dh);
  if (!st) kbf_store(out_a, fa, n);
  return kbf_done(&s, st);
}

tsr_status kbf_attention_delta(kb_t *kb, float *delta, const void *dout, const void *out, int L,
                               int H, int Dh) {
  kbf_scratch s = {0};
  size_t n = kbf_n3(L, H, Dh);
  float *fd = kbf_load(&s, dout, n), *fo = kbf_load(&s, out, n);
  KBF_OOM("attention_delta", s);
  return kbf_done(&s, kcpu_attention_delta(kb, delta, fd, fo, L, H, Dh));
}

tsr_status kbf_attention_partial_backward(kb_t *kb, void *dq, void *dk, void *dv,
                                          const void *dout, const void *q, const void *k,
                                          const void *v, const void *out, const float *lse,
                                          const float *delta, const int32_t *cu_q,
                                          const int32_t *cu_k, int n_clips, int max_q, int max_k,
                                          int Lq, int Lk, int H, int Dh, float scale) {
  kbf_scratch s = {0};
  size_t nq = kbf_n3(Lq, H, Dh), nk = kbf_n3(Lk, H, Dh);
  float *fdo = kbf_load(&s, dout, nq), *fq = kbf_load(&s, q, nq);
  float *fk = kbf_load(&s, k, nk), *fv = kbf_load(&s, v, nk);
  // Accumulated outputs: loaded, summed in fp32 by the fp32 entry, rounded once.
  float *fdq = kbf_load(&s, dq, nq), *fdk = kbf_load(&s, dk, nk), *fdv = kbf_load(&s, dv, nk);
  KBF_OOM("attention_partial_backward", s);
  // out is passed for its check only: the fp32 entry reads delta, not out
  tsr_status st = kcpu_attention_partial_backward(kb, fdq, fdk, fdv, fdo, fq, fk, fv, out, lse,
                                                  delta, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk,
                                                  H, Dh, scale);
  if (!st) {
    kbf_store(dq, fdq, nq);
    kbf_store(dk, fdk, nk);
    kbf_store(dv, fdv, nk);
  }
  return kbf_done(&s, st);
}

tsr_status kbf_attention_masked_forward(kb_t *kb, void *out, float *lse, const void *q,
                                        const void *k, const void *v, const int32_t *cu_q,
                                        const int32_t *cu_k, const int32_t *pos_q,
                                        const int32_t *pos_k, kernels_mask mask, int n_clips,
                                        int max_q, int max_k, int Lq, int Lk, int H, int Dh,
                                        float scale) {
  kbf_scratch s = {0};
  size_t nq = kbf_n3(Lq, H, Dh), nk = kbf_n3(Lk, H, Dh);
  float *fq = kbf_load(&s, q, nq), *fk = kbf_load(&s, k, nk), *fv = kbf_load(&s, v, nk);
  float *fo = kbf_alloc(&s, out, nq);
  KBF_OOM("attention_masked_forward", s);
  tsr_status st = kcpu_attention_masked_forward(kb, fo, lse, fq, fk, fv, cu_q, cu_k, pos_q, pos_k,
                                                mask, n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
  if (!st) kbf_store(out, fo, nq);
  return kbf_done(&s, st);
}

tsr_status kbf_attention_masked_backward(kb_t *kb, void *dq, void *dk, void *dv, const void *dout,
                                         const void *q, const void *k, const void *v,
                                         const void *out, const float *lse, const int32_t *cu,
                                         const int32_t *pos, kernels_mask mask, int n_clips,
                                         int max_len, int L, int H, int Dh, float scale) {
  kbf_scratch s = {0};
  size_t n = kbf_n3(L, H, Dh);
  float *fdo = kbf_load(&s, dout, n), *fq = kbf_load(&s, q, n), *fk = kbf_load(&s, k, n);
  float *fv = kbf_load(&s, v, n), *fo = kbf_load(&s, out, n);
  float *fdq = kbf_alloc(&s, dq, n), *fdk = kbf_alloc(&s, dk, n), *fdv = kbf_alloc(&s, dv, n);
  KBF_OOM("attention_masked_backward", s);
  tsr_status st = kcpu_attention_masked_backward(kb, fdq, fdk, fdv, fdo, fq, fk, fv, fo, lse, cu,
                                                 pos, mask, n_clips, max_len, L, H, Dh, scale);
  if (!st) {
    kbf_store(dq, fdq, n);
    kbf_store(dk, fdk, n);
    kbf_store(dv, fdv, n);
  }
  return kbf_done(&s, st);
}

tsr_status kbf_attention_masked_partial_backward(kb_t *kb, void *dq, void *dk, void *dv,
                                                 const void *dout, const void *q, const void *k,
                                                 const void *v, const void *out, const float *lse,
                                                 const float *delta, const int32_t *cu_q,
                                                 const int32_t *cu_k, const int32_t *pos_q,
                                                 const int32_t *pos_k, kernels_mask mask,
                                                 int n_clips, int max_q, int max_k, int Lq, int Lk,
                                                 int H, int Dh, float scale) {
  kbf_scratch s = {0};
  size_t nq = kbf_n3(Lq, H, Dh), nk = kbf_n3(Lk, H, Dh);
  float *fdo = kbf_load(&s, dout, nq), *fq = kbf_load(&s, q, nq);
  float *fk = kbf_load(&s, k, nk), *fv = kbf_load(&s, v, nk);
  float *fdq = kbf_load(&s, dq, nq), *fdk = kbf_load(&s, dk, nk), *fdv = kbf_load(&s, dv, nk);
  KBF_OOM("attention_masked_partial_backward", s);
  tsr_status st = kcpu_attention_masked_partial_backward(kb, fdq, fdk, fdv, fdo, fq, fk, fv, out,
                                                         lse, delta, cu_q, cu_k, pos_q, pos_k,
                                                         mask, n_clips, max_q, max_k, Lq, Lk, H,
                                                         Dh, scale);
  if (!st) {
    kbf_store(dq, fdq, nq);
    kbf_store(dk, fdk, nk);
    kbf_store(dv, fdv, nk);
  }
  return kbf_done(&s, st);
}

tsr_status kbf_objective_inputs(kb_t *kb, float *t, void *x_t, void *target,
                                const void *tokens, kernels_tokens tokens_dtype,
                                const kernels_clip_key *clips,
                                const int32_t *cu, int n_clips, int L, int P, uint64_t seed,
                                uint64_t step, kernels_t_dist td) {
  kbf_scratch s = {0};
  size_t n = kbf_n(L, P);
  float *fx = kbf_alloc(&s, x_t, n), *fv = kbf_alloc(&s, target, n);
  KBF_OOM("objective_inputs", s);
  tsr_status st = kcpu_objective_inputs(kb, t, fx, fv, tokens, tokens_dtype, clips, cu, n_clips,
                                        L, P, seed, step, td);
  if (!st) {
    kbf_store(x_t, fx, n);
    kbf_store(target, fv, n);
  }
  return kbf_done(&s, st);
}

tsr_status kbf_euler_update(kb_t *kb, float *x, const void *v_cond, const void *v_uncond,
                            float cfg, float dt, size_t n) {
  kbf_scratch s = {0};
  float *fc = kbf_load(&s, v_cond, n), *fu = kbf_load(&s, v_uncond, n);
  KBF_OOM("euler_update", s);
  return kbf_done(&s, kcpu_euler_update(kb, x, fc, fu, cfg, dt, n));
}

tsr_status kbf_mse_forward(kb_t *kb, float *loss, float *sse, const void *pred,
                           const void *target, const float *weight, const int32_t *cu,
                           int n_clips, int L, int D) {
  kbf_scratch s = {0};
  size_t n = kbf_n(L, D);
  float *fp = kbf_load(&s, pred, n), *ft = kbf_load(&s, target, n);
  KBF_OOM("mse_forward", s);
  return kbf_done(&s, kcpu_mse_forward(kb, loss, sse, fp, ft, weight, cu, n_clips, L, D));
}

tsr_status kbf_mse_backward(kb_t *kb, void *dpred, const void *pred, const void *target,
                            const float *weight, const int32_t *cu, int n_clips, int L, int D) {
  kbf_scratch s = {0};
  size_t n = kbf_n(L, D);
  float *fp = kbf_load(&s, pred, n), *ft = kbf_load(&s, target, n);
  float *fd = kbf_alloc(&s, dpred, n);
  KBF_OOM("mse_backward", s);
  tsr_status st = kcpu_mse_backward(kb, fd, fp, ft, weight, cu, n_clips, L, D);
  if (!st) kbf_store(dpred, fd, n);
  return kbf_done(&s, st);
}

// ---- fused entries ----------------------------------------------------------------------
tsr_status kbf_layernorm_modulate_forward(kb_t *kb, void *out, float *mean, float *rstd,
                                          const void *inp, const void *shift, const void *scale,
                                          int mstride, const int32_t *cu, int n_clips, int L,
                                          int D, float eps) {
  kbf_scratch s = {0};
  size_t n = kbf_n(L, D), span = kbf_span(n_clips, mstride, D);
  float *fi = kbf_load(&s, inp, n), *fsh = kbf_load(&s, shift, span);
  float *fsc = kbf_load(&s, scale, span), *fo = kbf_alloc(&s, out, n);
  KBF_OOM("layernorm_modulate_forward", s);
  tsr_status st = kcpu_layernorm_modulate_forward(kb, fo, mean, rstd, fi, fsh, fsc, mstride, cu,
                                                  n_clips, L, D, eps);
  if (!st) kbf_store(out, fo, n);
  return kbf_done(&s, st);
}

tsr_status kbf_layernorm_modulate_backward(kb_t *kb, void *dinp, void *dshift, void *dscale,
                                           const void *dout, const void *inp, const float *mean,
                                           const float *rstd, const void *scale, int mstride,
                                           const int32_t *cu, int n_clips, int L, int D) {
  kbf_scratch s = {0};
  size_t n = kbf_n(L, D), span = kbf_span(n_clips, mstride, D);
  float *fd = kbf_load(&s, dout, n);
  float *fi = dinp || dscale ? kbf_load(&s, inp, n) : NULL;
  float *fsc = dinp ? kbf_load(&s, scale, span) : NULL;
  float *fdi = kbf_load(&s, dinp, n);  // accumulated: loaded, summed in fp32, rounded once
  float *fdsh = kbf_alloc(&s, dshift, span), *fdsc = kbf_alloc(&s, dscale, span);
  KBF_OOM("layernorm_modulate_backward", s);
  tsr_status st = kcpu_layernorm_modulate_backward(kb, fdi, fdsh, fdsc, fd, fi, mean, rstd, fsc,
                                                   mstride, cu, n_clips, L, D);
  if (!st) {
    kbf_store(dinp, fdi, n);
    kbf_store_rows(dshift, fdsh, n_clips, mstride, D);
    kbf_store_rows(dscale, fdsc, n_clips, mstride, D);
  }
  return kbf_done(&s, st);
}

tsr_status kbf_qk_norm_rope_forward(kb_t *kb, void *q_out, void *k_out, float *q_rstd,
                                    float *k_rstd, const void *q_in, const void *k_in,
                                    const float *q_weight, const float *k_weight,
                                    const int32_t *pos, int L, int H, int Dh, float eps,
                                    float theta) {
  kbf_scratch s = {0};
  size_t n = kbf_n3(L, H, Dh);
  float *fq = kbf_load(&s, q_in, n), *fk = kbf_load(&s, k_in, n);
  float *fqo = kbf_alloc(&s, q_out, n), *fko = kbf_alloc(&s, k_out, n);
  KBF_OOM("qk_norm_rope_forward", s);
  tsr_status st = kcpu_qk_norm_rope_forward(kb, fqo, fko, q_rstd, k_rstd, fq, fk, q_weight,
                                            k_weight, pos, L, H, Dh, eps, theta);
  if (!st) {
    kbf_store(q_out, fqo, n);
    kbf_store(k_out, fko, n);
  }
  return kbf_done(&s, st);
}

tsr_status kbf_qk_norm_rope_backward(kb_t *kb, void *dq_in, void *dk_in, float *dq_weight,
                                     float *dk_weight, const void *dq, const void *dk,
                                     const void *q_in, const void *k_in, const float *q_weight,
                                     const float *k_weight, const float *q_rstd,
                                     const float *k_rstd, const int32_t *pos, int L, int H, int Dh,
                                     float theta) {
  kbf_scratch s = {0};
  size_t n = kbf_n3(L, H, Dh);
  float *fdq = kbf_load(&s, dq, n), *fdk = kbf_load(&s, dk, n);
  float *fq = kbf_load(&s, q_in, n), *fk = kbf_load(&s, k_in, n);
  float *fdqi = kbf_alloc(&s, dq_in, n), *fdki = kbf_alloc(&s, dk_in, n);
  KBF_OOM("qk_norm_rope_backward", s);
  tsr_status st = kcpu_qk_norm_rope_backward(kb, fdqi, fdki, dq_weight, dk_weight, fdq, fdk, fq,
                                             fk, q_weight, k_weight, q_rstd, k_rstd, pos, L, H,
                                             Dh, theta);
  if (!st) {
    kbf_store(dq_in, fdqi, n);
    kbf_store(dk_in, fdki, n);
  }
  return kbf_done(&s, st);
}

tsr_status kbf_linear_gelu_forward(kb_t *kb, void *out, void *pre, const void *inp, const void *w,
                                   const float *bias, int M, int K, int N) {
  kbf_scratch s = {0};
  size_t mn = kbf_n(M, N);
  float *fi = kbf_load(&s, inp, kbf_n(M, K)), *fw = kbf_load(&s, w, kbf_n(K, N));
  float *fo = kbf_alloc(&s, out, mn), *fp = kbf_alloc(&s, pre, mn);
  KBF_OOM("linear_gelu_forward", s);
  tsr_status st = kcpu_linear_gelu_forward(kb, fo, fp, fi, fw, bias, M, K, N);
  if (!st) {
    kbf_store(out, fo, mn);
    kbf_store(pre, fp, mn);
  }
  return kbf_done(&s, st);
}

tsr_status kbf_linear_backward_dgelu(kb_t *kb, void *dpre, float *dw, float *dbias,
                                     const void *dout, const void *inp, const void *w,
                                     const void *pre, int M, int K, int N) {
  kbf_scratch s = {0};
  size_t mk = kbf_n(M, K);
  float *fd = kbf_load(&s, dout, kbf_n(M, N));
  float *fi = dw ? kbf_load(&s, inp, mk) : NULL;  // inp only for dw; w and pre only for dpre
  float *fw = dpre ? kbf_load(&s, w, kbf_n(K, N)) : NULL;
  float *fp = dpre ? kbf_load(&s, pre, mk) : NULL;
  float *fdp = kbf_alloc(&s, dpre, mk);
  KBF_OOM("linear_backward_dgelu", s);
  tsr_status st = kcpu_linear_backward_dgelu(kb, fdp, dw, dbias, fd, fi, fw, fp, M, K, N);
  if (!st) kbf_store(dpre, fdp, mk);
  return kbf_done(&s, st);
}
