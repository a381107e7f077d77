// kernels/check.h — the argument checks of kernels.h's entries that do not depend on the
// backend, written once for every backend (private to kernels/: the backends include it,
// nothing above kernels/ does).
//
// kernels_check_<entry> takes the entry's arguments (without kb; tensors as plain
// pointers) and checks what can be checked on the host without reading backend memory:
// sizes, dtypes, scalar ranges, and the pointers the entry needs for those sizes. It
// returns TSR_OK or TSR_EINVAL with the entry's "op: what" message (kernels.h "Errors").
// An entry of every backend calls it first and then checks only what is its own: the
// contents of index arrays (the CPU reads them; CUDA checks them on the device and reports
// at the next sync) and its own limits. TSR_OK from a check does not mean there is work:
// the entry still returns early for empty sizes as its contract says.
//
// Entries not listed here still check their arguments in each backend (their checks
// differ in order or substance between the backends, e.g. where an empty size returns).
// tests/header_lists.py (run by tests/layout.sh) holds this list to the code: each check is
// named for a row of kernels/entries.h (or is one of its SHARED_CHECKS) and each backend's
// definition of that entry calls it.
#ifndef TESSERA_KERNELS_CHECK_H
#define TESSERA_KERNELS_CHECK_H

#include <stddef.h>
#include <stdint.h>

// C linkage for the CUDA backend's C++ too, including err_set and the kernels.h helpers,
// which have no guard of their own (a C++ file may include this header first).
#ifdef __cplusplus
extern "C" {
#endif

#include "core/err.h"
#include "kernels/kernels.h"

// Both dtypes known; dst and src given when n > 0.
tsr_status kernels_check_cast(const void *dst, kernels_dtype dst_dtype, const void *src,
                              kernels_dtype src_dtype, size_t n);
// L, D >= 0; for L > 0: D > 0, out and inp given.
tsr_status kernels_check_layernorm_forward(const void *out, const void *inp, int L, int D);
// L, D >= 0; for L, D > 0 and dinp given: dout, inp, mean and rstd given.
tsr_status kernels_check_layernorm_backward(const void *dinp, const void *dout, const void *inp,
                                            const float *mean, const float *rstd, int L, int D);
// R, C >= 0; for R > 0: C > 0, out, inp and weight given.
tsr_status kernels_check_rmsnorm_forward(const void *out, const void *inp, const float *weight,
                                         int R, int C);
// R, C >= 0; for R, C > 0: dout, inp and rstd given, and weight when dinp is.
tsr_status kernels_check_rmsnorm_backward(const void *dinp, const void *dout, const void *inp,
                                          const float *weight, const float *rstd, int R, int C);
// n, dim >= 0, max_period > 0; for n, dim > 0: out and t given.
tsr_status kernels_check_timestep_embedding(const void *out, const float *t, int n, int dim,
                                            float max_period);
// L, P >= 0, a known token dtype, n_clips >= 0 and cu_seqlens given; t and clips given for
// n_clips > 0; x_t, target and tokens for L, P > 0. (cu_seqlens' values and each clip
// key's rows are the backend's to check.)
tsr_status kernels_check_objective_inputs(const float *t, const void *x_t, const void *target,
                                          const void *tokens, kernels_tokens tokens_dtype,
                                          const kernels_clip_key *clips,
                                          const int32_t *cu_seqlens, int n_clips, int L, int P);
// x and v_cond given when n > 0 (v_uncond may be NULL).
tsr_status kernels_check_euler_update(const float *x, const void *v_cond, size_t n);
// L, D >= 0, n_clips >= 0 and cu_seqlens given; weight given for n_clips > 0, pred and
// target for L, D > 0; loss always (forward). (cu_seqlens' values are the backend's.)
tsr_status kernels_check_mse_forward(const float *loss, const void *pred, const void *target,
                                     const float *weight, const int32_t *cu_seqlens, int n_clips,
                                     int L, int D);
// As the forward, with dpred given for L, D > 0 in place of loss.
tsr_status kernels_check_mse_backward(const void *dpred, const void *pred, const void *target,
                                      const float *weight, const int32_t *cu_seqlens, int n_clips,
                                      int L, int D);
// result_host given; x given when n > 0.
tsr_status kernels_check_sumsq(const double *result_host, const float *x, size_t n);
// decay in [0, 1]; ema and param given when n > 0.
tsr_status kernels_check_ema_update(const float *ema, const float *param, size_t n, float decay);
// m, n, k >= 0; every row stride at least its row's length (a (m, k) or (k, m), b (k, n) or
// (n, k), c (m, n)); for m, n > 0: c given, and a and b for k > 0.
tsr_status kernels_check_gemm_strided(int trans_a, int trans_b, int m, int n, int k,
                                      const void *a, int lda, const void *b, int ldb,
                                      const void *c, int ldc);
// m, n, k, batch >= 0; batch strides >= 0, stride_c >= m n when batch > 1; for m, n,
// batch > 0: c given, and a and b for k > 0.
tsr_status kernels_check_gemm_batched(int trans_a, int trans_b, int m, int n, int k,
                                      const void *a, int64_t stride_a, const void *b,
                                      int64_t stride_b, const void *c, int64_t stride_c,
                                      int64_t stride_bias, int batch);
// For rows, row_bytes > 0: dst and src given, both pitches at least row_bytes.
tsr_status kernels_check_copy_2d(const void *dst, size_t dst_pitch, const void *src,
                                 size_t src_pitch, size_t row_bytes, size_t rows);
// The activations' entries (op: gelu_forward, silu_forward): for n > 0, out and inp given.
tsr_status kernels_check_activation_forward(const char *op, const void *out, const void *inp,
                                            size_t n);
// op: gelu_backward, silu_backward: for n > 0, dinp, dout and inp given.
tsr_status kernels_check_activation_backward(const char *op, const void *dinp, const void *dout,
                                             const void *inp, size_t n);
// L, H, Dh >= 0; for L, H > 0: out_a, lse_a, out_b and lse_b given.
tsr_status kernels_check_attention_merge(const void *out_a, const float *lse_a,
                                         const void *out_b, const float *lse_b, int L, int H,
                                         int Dh);
// L, H, Dh >= 0; for L, H > 0: delta, dout and out given.
tsr_status kernels_check_attention_delta(const float *delta, const void *dout, const void *out,
                                         int L, int H, int Dh);
// For the masked attention entries (op: the entry's name): the mask's kind known and its
// sizes in range (kernels.h kernels_mask), and unless it is FULL the positions of the
// queries and keys given (pos_q: (Lq, 3), pos_k: (Lk, 3)); their values are the backend's
// to check (the CPU reads them, CUDA takes them as they are).
tsr_status kernels_check_mask(const char *op, const kernels_mask *m, const int32_t *pos_q,
                              int Lq, const int32_t *pos_k, int Lk);

#ifdef __cplusplus
}
#endif

#endif
