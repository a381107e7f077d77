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
// Every entry has its check here (the attention entries' in kernels/check_attention.h) but
// those tests/header_lists.py lists in EXEMPT with the reason (nothing to check, CUDA-only
// state). That script (run by tests/layout.sh) holds this list to the code: each check is
// named for a row of kernels/entries.h (or is one of its SHARED_CHECKS), each backend's
// definition of that entry calls it and checks nothing else with the backends' own NULL and
// size macros, and a row without a check fails unless it is EXEMPT.
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

// ptr given (bytes may be 0: a valid pointer to free).
tsr_status kernels_check_alloc(void *const *ptr, size_t bytes);
// to_device, to_host, copy: for bytes > 0, both pointers given.
tsr_status kernels_check_to_device(const void *dst, const void *src_host, size_t bytes);
tsr_status kernels_check_to_host(const void *dst_host, const void *src, size_t bytes);
tsr_status kernels_check_copy(const void *dst, const void *src, size_t bytes);
// For bytes > 0: ptr given.
tsr_status kernels_check_memset_zero(const void *ptr, size_t bytes);
// The elementwise entries: for n > 0, each tensor given.
tsr_status kernels_check_fill(const float *x, size_t n);
tsr_status kernels_check_scale(const float *x, size_t n);
tsr_status kernels_check_add(const float *out, const float *a, const float *b, size_t n);
tsr_status kernels_check_axpy(const float *y, const float *x, size_t n);
tsr_status kernels_check_add_act(const void *out, const void *a, const void *b, size_t n);
tsr_status kernels_check_axpy_act(const void *y, const void *x, size_t n);
tsr_status kernels_check_u8_affine(const void *out, const uint8_t *in, size_t n);
// free_bytes and total_bytes given.
tsr_status kernels_check_mem_info(const size_t *free_bytes, const size_t *total_bytes);
// Both dtypes known; dst and src given when n > 0.
tsr_status kernels_check_cast(const void *dst, kernels_dtype dst_dtype, const void *src,
                              kernels_dtype src_dtype, size_t n);
// The adaLN entries (modulate, gate_residual): L, D >= 0, mstride >= D, n_clips >= 0 and
// cu_seqlens given (its values are the backend's). Forward: for L, D > 0 every tensor given.
tsr_status kernels_check_modulate_forward(const void *out, const void *inp, const void *shift,
                                          const void *scale, int mstride,
                                          const int32_t *cu_seqlens, int n_clips, int L, int D);
// For L, D > 0: dout given, scale when dinp is, inp when dshift or dscale is (the per-clip
// sums are formed in one pass that reads it).
tsr_status kernels_check_modulate_backward(const void *dinp, const void *dshift,
                                           const void *dscale, const void *dout, const void *inp,
                                           const void *scale, int mstride,
                                           const int32_t *cu_seqlens, int n_clips, int L, int D);
tsr_status kernels_check_gate_residual_forward(const void *out, const void *res, const void *inp,
                                               const void *gate, int mstride,
                                               const int32_t *cu_seqlens, int n_clips, int L,
                                               int D);
// For L, D > 0: dout given, gate when dinp is, inp when dgate is.
tsr_status kernels_check_gate_residual_backward(const void *dinp, const void *dgate,
                                                const void *dout, const void *inp,
                                                const void *gate, int mstride,
                                                const int32_t *cu_seqlens, int n_clips, int L,
                                                int D);
// As the adaLN entries; for L > 0: D > 0 and every tensor given (mean, rstd required).
tsr_status kernels_check_layernorm_modulate_forward(const void *out, const float *mean,
                                                    const float *rstd, const void *inp,
                                                    const void *shift, const void *scale,
                                                    int mstride, const int32_t *cu_seqlens,
                                                    int n_clips, int L, int D);
// As the adaLN entries; for L, D > 0: dout given, inp, mean and rstd when dinp or dscale
// is, scale when dinp is.
tsr_status kernels_check_layernorm_modulate_backward(const void *dinp, const void *dscale,
                                                     const void *dout, const void *inp,
                                                     const float *mean, const float *rstd,
                                                     const void *scale, int mstride,
                                                     const int32_t *cu_seqlens, int n_clips,
                                                     int L, int D);
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
// The rotary entries: L, H >= 0, Dh even and > 0, theta > 0; for L, H > 0 every tensor given.
tsr_status kernels_check_rope_forward(const void *out, const void *inp, const int32_t *pos, int L,
                                      int H, int Dh, float theta);
tsr_status kernels_check_rope_backward(const void *dinp, const void *dout, const int32_t *pos,
                                       int L, int H, int Dh, float theta);
tsr_status kernels_check_qk_norm_rope_forward(const void *q_out, const void *k_out,
                                              const float *q_rstd, const float *k_rstd,
                                              const void *q_in, const void *k_in,
                                              const float *q_weight, const float *k_weight,
                                              const int32_t *pos, int L, int H, int Dh,
                                              float theta);
// (dq_weight and dk_weight may be NULL: not accumulated.)
tsr_status kernels_check_qk_norm_rope_backward(const void *dq_in, const void *dk_in,
                                               const void *dq, const void *dk, const void *q_in,
                                               const void *k_in, const float *q_weight,
                                               const float *k_weight, const float *q_rstd,
                                               const float *k_rstd, const int32_t *pos, int L,
                                               int H, int Dh, float theta);
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
// n, V, D >= 0; for n > 0: out, table and ids given. (The ids' values are the backend's
// to check: the CPU reads them, CUDA reports at the next sync.)
tsr_status kernels_check_embedding_forward(const void *out, const float *table,
                                           const int32_t *ids, int n, int V, int D);
// n, V, D >= 0; for n > 0 and dtable given: dout and ids given.
tsr_status kernels_check_embedding_backward(const float *dtable, const void *dout,
                                            const int32_t *ids, int n, int V, int D);
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
// For n > 0: param, grad, m and v given. (The scalars are kernels_adamw_prepare's,
// kernels/adamw.h, which each backend calls first.)
tsr_status kernels_check_adamw_update(const float *param, const float *grad, const float *m,
                                      const float *v, size_t n);
// n_segs >= 0, work (may be NULL) not param itself; for n, n_segs > 0: segs, param, grad,
// m and v given. (The segments' values are the backend's: the CPU reads them, CUDA reports
// at the next sync; the scalars are kernels_adamw_prepare's.)
tsr_status kernels_check_adamw_update_multi(const float *param, const float *grad,
                                            const float *m, const float *v, const void *work,
                                            size_t n, const kernels_param_segment *segs,
                                            int n_segs);
// result_host given; x given when n > 0.
tsr_status kernels_check_sumsq(const double *result_host, const float *x, size_t n);
// decay in [0, 1]; ema and param given when n > 0.
tsr_status kernels_check_ema_update(const float *ema, const float *param, size_t n, float decay);
// m, n, k >= 0; for m, n > 0: c given, and a and b for k > 0.
tsr_status kernels_check_gemm(int m, int n, int k, const void *a, const void *b, const void *c);
// M, K, N >= 0; for M, N > 0: out given, and inp and w for K > 0.
tsr_status kernels_check_linear_forward(const void *out, const void *inp, const void *w, int M,
                                        int K, int N);
// M, K, N >= 0; dout given for M, N > 0; w when dinp is (N, K > 0), inp when dw is (M, K > 0).
tsr_status kernels_check_linear_backward(const void *dinp, const float *dw, const void *dout,
                                         const void *inp, const void *w, int M, int K, int N);
// As linear_forward, with pre given too.
tsr_status kernels_check_linear_gelu_forward(const void *out, const void *pre, const void *inp,
                                             const void *w, int M, int K, int N);
// As linear_backward with dpre for dinp, and pre given when dpre is (M, K > 0).
tsr_status kernels_check_linear_backward_dgelu(const void *dpre, const float *dw,
                                               const void *dout, const void *inp, const void *w,
                                               const void *pre, int M, int K, int N);
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
#ifdef __cplusplus
}
#endif

#endif
