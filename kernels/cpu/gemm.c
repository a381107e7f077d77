// kernels/cpu/gemm.c — GEMM and the linear layer through OpenBLAS sgemm (row-major).
#include <string.h>

#include "kernels/check.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu.h"

tsr_status kcpu_gemm_strided(kb_t *kb, int trans_a, int trans_b, int m, int n, int k,
                             float alpha, const float *a, int lda, const float *b, int ldb,
                             float beta, float *c, int ldc) {
  tsr_status st = kernels_check_gemm_strided(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
  if (st || m == 0 || n == 0) return st;
  if (k == 0) {  // c = beta * c; beta == 0 overwrites (NaN in c included)
    for (int i = 0; i < m; i++) {
      float *row = c + (size_t)i * ldc;
      if (beta == 0.0f) memset(row, 0, (size_t)n * sizeof(float));
      else kcpu_scale(kb, row, beta, (size_t)n);
    }
    return TSR_OK;
  }
  return kcpu_blas_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// gemm is gemm_strided with the dense strides (its errors name "gemm").
tsr_status kcpu_gemm(kb_t *kb, int trans_a, int trans_b, int m, int n, int k, float alpha,
                     const float *a, const float *b, float beta, float *c) {
  tsr_status st = kernels_check_gemm(m, n, k, a, b, c);
  if (st || m == 0 || n == 0) return st;
  int lda = trans_a ? m : k, ldb = trans_b ? k : n;  // a is (k, m) when transposed, b (n, k)
  return kcpu_gemm_strided(kb, trans_a, trans_b, m, n, k, alpha, a, lda > 0 ? lda : 1, b,
                           ldb > 0 ? ldb : 1, beta, c, n);
}

// c_i (m, n) = alpha op(a_i) op(b_i) + beta c_i + bias_i for i < batch, one problem after
// another (x_i = x + i stride_x): with a bias, c_i's rows first become beta c_i + bias_i
// (the bias itself when beta == 0) and the product is added with beta 1, as linear_forward.
tsr_status kcpu_gemm_batched(kb_t *kb, int trans_a, int trans_b, int m, int n, int k,
                             float alpha, const float *a, int64_t stride_a, const float *b,
                             int64_t stride_b, float beta, float *c, int64_t stride_c,
                             const float *bias, int64_t stride_bias, int batch) {
  tsr_status st = kernels_check_gemm_batched(trans_a, trans_b, m, n, k, a, stride_a, b, stride_b,
                                             c, stride_c, stride_bias, batch);
  for (int i = 0; !st && i < batch && m > 0 && n > 0; i++) {
    float *ci = c + (size_t)i * (size_t)stride_c, beta_i = beta;
    if (bias) {
      const float *bi = bias + (size_t)i * (size_t)stride_bias;
#pragma omp parallel for schedule(static) if ((size_t)m * n > KCPU_PAR_MIN)
      for (int r = 0; r < m; r++) {
        float *row = ci + (size_t)r * n;
        if (beta == 0.0f) memcpy(row, bi, (size_t)n * sizeof(float));
        else
          for (int j = 0; j < n; j++) row[j] = beta * row[j] + bi[j];
      }
      beta_i = 1.0f;
    }
    st = kcpu_gemm(kb, trans_a, trans_b, m, n, k, alpha, a + (size_t)i * (size_t)stride_a,
                   b + (size_t)i * (size_t)stride_b, beta_i, ci);
  }
  return st;
}

// out: (M, N) = inp (M, K) * w (K, N) + bias (N)
tsr_status kcpu_linear_forward(kb_t *kb, float *out, const float *inp, const float *w,
                               const float *bias, int M, int K, int N) {
  tsr_status st = kernels_check_linear_forward(out, inp, w, M, K, N);
  if (st || M == 0 || N == 0) return st;
  float beta = 0.0f;
  if (bias) {
#pragma omp parallel for schedule(static) if ((size_t)M * N > KCPU_PAR_MIN)
    for (int i = 0; i < M; i++) memcpy(out + (size_t)i * N, bias, (size_t)N * sizeof(float));
    beta = 1.0f;
  }
  return kcpu_gemm(kb, 0, 0, M, N, K, 1.0f, inp, w, beta, out);
}

// dinp: (M, K) = dout (M, N) * w^T; dw: (K, N) += inp^T (K, M) * dout; dbias: (N) += colsum(dout)
tsr_status kcpu_linear_backward(kb_t *kb, float *dinp, float *dw, float *dbias, const float *dout,
                                const float *inp, const float *w, int M, int K, int N) {
  tsr_status st = kernels_check_linear_backward(dinp, dw, dout, inp, w, M, K, N);
  if (st) return st;
  if (dinp && (st = kcpu_gemm(kb, 0, 1, M, K, N, 1.0f, dout, w, 0.0f, dinp))) return st;
  if (dw && (st = kcpu_gemm(kb, 1, 0, K, N, M, 1.0f, inp, dout, 1.0f, dw))) return st;
  if (dbias && (st = kcpu_colsum(dbias, 1, dout, NULL, NULL, NULL, (size_t)M, N, (size_t)N))) return st;
  return TSR_OK;
}
