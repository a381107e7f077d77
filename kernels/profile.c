// kernels/profile.c — the profiling wrapper of a backend table (kernels/profile.h).
//
// One forwarder per entry of kernels_backend: it times the inner entry and counts it. The
// forwarders and the entry list follow the fields of kernels_backend in order; a new entry
// of kernels.h needs its line in each (the static assert below counts them against the
// struct's size, and tests/kernels/test_profile.c checks that none is NULL).
#include "kernels/profile.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"  // time_now

typedef const kernels_backend kb_t;

enum { PROF_MAGIC = 0x70726f66 };  // "prof"

typedef struct prof prof;

// ---- the entries, in the order of kernels_backend's fields, and their classes ----
enum {
  E_alloc,
  E_free,
  E_to_device,
  E_to_host,
  E_copy,
  E_copy_2d,
  E_memset_zero,
  E_sync,
  E_reserve,
  E_memory_stats,
  E_mem_info,
  E_cast,
  E_fill,
  E_scale,
  E_add,
  E_axpy,
  E_add_act,
  E_axpy_act,
  E_u8_affine,
  E_gemm,
  E_gemm_strided,
  E_linear_forward,
  E_linear_backward,
  E_layernorm_forward,
  E_layernorm_backward,
  E_rmsnorm_forward,
  E_rmsnorm_backward,
  E_modulate_forward,
  E_modulate_backward,
  E_gate_residual_forward,
  E_gate_residual_backward,
  E_rope_forward,
  E_rope_backward,
  E_gelu_forward,
  E_gelu_backward,
  E_silu_forward,
  E_silu_backward,
  E_timestep_embedding,
  E_embedding_forward,
  E_embedding_backward,
  E_attention_forward,
  E_attention_backward,
  E_attention_partial_forward,
  E_attention_merge,
  E_attention_delta,
  E_attention_partial_backward,
  E_attention_masked_forward,
  E_attention_masked_backward,
  E_attention_masked_partial_backward,
  E_objective_inputs,
  E_euler_update,
  E_mse_forward,
  E_mse_backward,
  E_sumsq,
  E_adamw_update,
  E_ema_update,
  E_adamw_update_multi,
  E_layernorm_modulate_forward,
  E_layernorm_modulate_backward,
  E_qk_norm_rope_forward,
  E_qk_norm_rope_backward,
  E_linear_gelu_forward,
  E_linear_backward_dgelu,
  N_ENTRIES
};
static const struct {
  const char *name;
  kernels_profile_class cls;
} ENTRY[N_ENTRIES] = {
    [E_alloc] = {"alloc", KERNELS_PROFILE_MEMORY},
    [E_free] = {"free", KERNELS_PROFILE_MEMORY},
    [E_to_device] = {"to_device", KERNELS_PROFILE_MEMORY},
    [E_to_host] = {"to_host", KERNELS_PROFILE_MEMORY},
    [E_copy] = {"copy", KERNELS_PROFILE_MEMORY},
    [E_copy_2d] = {"copy_2d", KERNELS_PROFILE_MEMORY},
    [E_memset_zero] = {"memset_zero", KERNELS_PROFILE_MEMORY},
    [E_sync] = {"sync", KERNELS_PROFILE_OTHER},
    [E_reserve] = {"reserve", KERNELS_PROFILE_OTHER},
    [E_memory_stats] = {"memory_stats", KERNELS_PROFILE_OTHER},
    [E_mem_info] = {"mem_info", KERNELS_PROFILE_OTHER},
    [E_cast] = {"cast", KERNELS_PROFILE_ELEMENTWISE},
    [E_fill] = {"fill", KERNELS_PROFILE_ELEMENTWISE},
    [E_scale] = {"scale", KERNELS_PROFILE_ELEMENTWISE},
    [E_add] = {"add", KERNELS_PROFILE_ELEMENTWISE},
    [E_axpy] = {"axpy", KERNELS_PROFILE_ELEMENTWISE},
    [E_add_act] = {"add_act", KERNELS_PROFILE_ELEMENTWISE},
    [E_axpy_act] = {"axpy_act", KERNELS_PROFILE_ELEMENTWISE},
    [E_u8_affine] = {"u8_affine", KERNELS_PROFILE_ELEMENTWISE},
    [E_gemm] = {"gemm", KERNELS_PROFILE_GEMM},
    [E_gemm_strided] = {"gemm_strided", KERNELS_PROFILE_GEMM},
    [E_linear_forward] = {"linear_forward", KERNELS_PROFILE_GEMM},
    [E_linear_backward] = {"linear_backward", KERNELS_PROFILE_GEMM},
    [E_layernorm_forward] = {"layernorm_forward", KERNELS_PROFILE_ELEMENTWISE},
    [E_layernorm_backward] = {"layernorm_backward", KERNELS_PROFILE_ELEMENTWISE},
    [E_rmsnorm_forward] = {"rmsnorm_forward", KERNELS_PROFILE_ELEMENTWISE},
    [E_rmsnorm_backward] = {"rmsnorm_backward", KERNELS_PROFILE_ELEMENTWISE},
    [E_modulate_forward] = {"modulate_forward", KERNELS_PROFILE_ELEMENTWISE},
    [E_modulate_backward] = {"modulate_backward", KERNELS_PROFILE_ELEMENTWISE},
    [E_gate_residual_forward] = {"gate_residual_forward", KERNELS_PROFILE_ELEMENTWISE},
    [E_gate_residual_backward] = {"gate_residual_backward", KERNELS_PROFILE_ELEMENTWISE},
    [E_rope_forward] = {"rope_forward", KERNELS_PROFILE_ELEMENTWISE},
    [E_rope_backward] = {"rope_backward", KERNELS_PROFILE_ELEMENTWISE},
    [E_gelu_forward] = {"gelu_forward", KERNELS_PROFILE_ELEMENTWISE},
    [E_gelu_backward] = {"gelu_backward", KERNELS_PROFILE_ELEMENTWISE},
    [E_silu_forward] = {"silu_forward", KERNELS_PROFILE_ELEMENTWISE},
    [E_silu_backward] = {"silu_backward", KERNELS_PROFILE_ELEMENTWISE},
    [E_timestep_embedding] = {"timestep_embedding", KERNELS_PROFILE_ELEMENTWISE},
    [E_embedding_forward] = {"embedding_forward", KERNELS_PROFILE_ELEMENTWISE},
    [E_embedding_backward] = {"embedding_backward", KERNELS_PROFILE_ELEMENTWISE},
    [E_attention_forward] = {"attention_forward", KERNELS_PROFILE_ATTENTION},
    [E_attention_backward] = {"attention_backward", KERNELS_PROFILE_ATTENTION},
    [E_attention_partial_forward] = {"attention_partial_forward", KERNELS_PROFILE_ATTENTION},
    [E_attention_merge] = {"attention_merge", KERNELS_PROFILE_ATTENTION},
    [E_attention_delta] = {"attention_delta", KERNELS_PROFILE_ATTENTION},
    [E_attention_partial_backward] = {"attention_partial_backward", KERNELS_PROFILE_ATTENTION},
    [E_attention_masked_forward] = {"attention_masked_forward", KERNELS_PROFILE_ATTENTION},
    [E_attention_masked_backward] = {"attention_masked_backward", KERNELS_PROFILE_ATTENTION},
    [E_attention_masked_partial_backward] = {"attention_masked_partial_backward",
                                             KERNELS_PROFILE_ATTENTION},
    [E_objective_inputs] = {"objective_inputs", KERNELS_PROFILE_OBJECTIVE},
    [E_euler_update] = {"euler_update", KERNELS_PROFILE_OBJECTIVE},
    [E_mse_forward] = {"mse_forward", KERNELS_PROFILE_OBJECTIVE},
    [E_mse_backward] = {"mse_backward", KERNELS_PROFILE_OBJECTIVE},
    [E_sumsq] = {"sumsq", KERNELS_PROFILE_OPTIMIZER},
    [E_adamw_update] = {"adamw_update", KERNELS_PROFILE_OPTIMIZER},
    [E_ema_update] = {"ema_update", KERNELS_PROFILE_OPTIMIZER},
    [E_adamw_update_multi] = {"adamw_update_multi", KERNELS_PROFILE_OPTIMIZER},
    [E_layernorm_modulate_forward] = {"layernorm_modulate_forward", KERNELS_PROFILE_ELEMENTWISE},
    [E_layernorm_modulate_backward] = {"layernorm_modulate_backward", KERNELS_PROFILE_ELEMENTWISE},
    [E_qk_norm_rope_forward] = {"qk_norm_rope_forward", KERNELS_PROFILE_ELEMENTWISE},
    [E_qk_norm_rope_backward] = {"qk_norm_rope_backward", KERNELS_PROFILE_ELEMENTWISE},
    [E_linear_gelu_forward] = {"linear_gelu_forward", KERNELS_PROFILE_GEMM},
    [E_linear_backward_dgelu] = {"linear_backward_dgelu", KERNELS_PROFILE_GEMM},
};


// The state behind a profiled table (its ctx).
struct prof {
  int magic;  // PROF_MAGIC: kernels_is_profiled
  int sync;   // sync the inner backend around each call (profile.h)
  const kernels_backend *inner;
  uint64_t calls[N_ENTRIES];
  double seconds[N_ENTRIES];
  double bytes[N_ENTRIES];  // summed bytes the calls must move (MOVES below)
  double pending;           // the bytes of the call being timed, added when it succeeds
};

// Start of a timed call: with sync, the device has finished everything queued before it.
// A failed sync (an earlier entry's error, reported late by the device) is returned by the
// forwarder instead of calling the entry, so the timers never swallow an error.
static tsr_status prof_begin(prof *p, double *t0) {
  tsr_status st = p->sync ? p->inner->sync(p->inner) : TSR_OK;
  *t0 = time_now();
  return st;
}

// End of a timed call: with sync, after the entry's own work; its error is returned.
static tsr_status prof_end(prof *p, int e, double t0, tsr_status call) {
  tsr_status st = p->sync ? p->inner->sync(p->inner) : TSR_OK;
  p->seconds[e] += time_now() - t0;
  p->calls[e]++;
  if (!call) p->bytes[e] += p->pending;
  p->pending = 0.0;
  return st;
}

#define TIMED_CALL(op, call)                               \
  prof *p = kb->ctx;                                       \
  double t0;                                               \
  tsr_status st = prof_begin(p, &t0);                      \
  if (st) return st;                                       \
  st = call;                                               \
  tsr_status st_end = prof_end(p, E_##op, t0, st);         \
  return st ? st : st_end
#define TIMED(op, ...) TIMED_CALL(op, p->inner->op(p->inner, __VA_ARGS__))
#define TIMED0(op) TIMED_CALL(op, p->inner->op(p->inner))
// free has no status to report a sync error with: it is timed without one.
#define TIMED_VOID(op, ...)                                \
  prof *p = kb->ctx;                                       \
  double t0;                                               \
  (void)prof_begin(p, &t0);                                \
  p->inner->op(p->inner, __VA_ARGS__);                     \
  (void)prof_end(p, E_##op, t0, TSR_OK)

// The bytes a call must move at least, counted from its shapes: every input read once, every
// output written once, an accumulated output read and written; A(n) of n [act] elements,
// F(n) of n fp32 (4 bytes), n int32 index entries as F too. Per-clip vectors are counted
// once per clip. Counted where the entry moves its operands (the token-local entries,
// the optimizer, the objective, the GEMM operands, the attention tensors); 0 elsewhere.
// A call that fails adds none.
#define A(n) ((double)(n) * (double)kernels_dtype_size(kb->act_dtype))
#define F(n) ((double)(n) * 4.0)
// Counted into the entry when the call succeeds (prof_end).
#define MOVES(op, bytes) (((prof *)kb->ctx)->pending = (bytes))

// ---- one forwarder per entry ----
static tsr_status p_alloc(kb_t *kb, void **ptr, size_t bytes) {
  TIMED(alloc, ptr, bytes);
}
static void p_free(kb_t *kb, void *ptr) {
  TIMED_VOID(free, ptr);
}
static tsr_status p_to_device(kb_t *kb, void *dst, const void *src_host, size_t bytes) {
  TIMED(to_device, dst, src_host, bytes);
}
static tsr_status p_to_host(kb_t *kb, void *dst_host, const void *src, size_t bytes) {
  TIMED(to_host, dst_host, src, bytes);
}
static tsr_status p_copy(kb_t *kb, void *dst, const void *src, size_t bytes) {
  MOVES(copy, 2.0 * (double)bytes);
  TIMED(copy, dst, src, bytes);
}
static tsr_status p_copy_2d(kb_t *kb, void *dst, size_t dst_pitch, const void *src,
                           size_t src_pitch, size_t row_bytes, size_t rows) {
  MOVES(copy_2d, 2.0 * (double)row_bytes * (double)rows);
  TIMED(copy_2d, dst, dst_pitch, src, src_pitch, row_bytes, rows);
}
static tsr_status p_memset_zero(kb_t *kb, void *ptr, size_t bytes) {
  MOVES(memset_zero, (double)bytes);
  TIMED(memset_zero, ptr, bytes);
}
static tsr_status p_sync(kb_t *kb) {
  TIMED0(sync);
}
static tsr_status p_reserve(kb_t *kb, size_t bytes) {
  TIMED(reserve, bytes);
}
static tsr_status p_memory_stats(kb_t *kb, size_t *in_use_host, size_t *peak_host,
                                 size_t *capacity_host) {
  TIMED(memory_stats, in_use_host, peak_host, capacity_host);
}
static tsr_status p_mem_info(kb_t *kb, size_t *free_bytes, size_t *total_bytes) {
  TIMED(mem_info, free_bytes, total_bytes);
}
// Not timed (a count read, no device work); set only when the inner backend has it.
static tsr_status p_path_stats(kb_t *kb, kernels_path_stats *out_host) {
  const kernels_backend *in = ((prof *)kb->ctx)->inner;
  return in->path_stats(in, out_host);
}
static tsr_status p_cast(kb_t *kb, void *dst, kernels_dtype dst_dtype, const void *src,
                         kernels_dtype src_dtype, size_t n) {
  MOVES(cast, (double)n * (double)(kernels_dtype_size(dst_dtype) + kernels_dtype_size(src_dtype)));
  TIMED(cast, dst, dst_dtype, src, src_dtype, n);
}
static tsr_status p_fill(kb_t *kb, float *x, float value, size_t n) {
  MOVES(fill, F(n));
  TIMED(fill, x, value, n);
}
static tsr_status p_scale(kb_t *kb, float *x, float alpha, size_t n) {
  MOVES(scale, F(2.0 * n));
  TIMED(scale, x, alpha, n);
}
static tsr_status p_add(kb_t *kb, float *out, const float *a, const float *b, size_t n) {
  MOVES(add, F(3.0 * n));
  TIMED(add, out, a, b, n);
}
static tsr_status p_axpy(kb_t *kb, float *y, float alpha, const float *x, size_t n) {
  MOVES(axpy, F(3.0 * n));
  TIMED(axpy, y, alpha, x, n);
}
static tsr_status p_add_act(kb_t *kb, void *out, const void *a, const void *b, size_t n) {
  MOVES(add_act, A(3.0 * n));
  TIMED(add_act, out, a, b, n);
}
static tsr_status p_axpy_act(kb_t *kb, void *y, float alpha, const void *x, size_t n) {
  MOVES(axpy_act, A(3.0 * n));
  TIMED(axpy_act, y, alpha, x, n);
}
static tsr_status p_u8_affine(kb_t *kb, void *out, const uint8_t *in, float a, float b, size_t n) {
  MOVES(u8_affine, (double)n + A(n));
  TIMED(u8_affine, out, in, a, b, n);
}
static tsr_status p_gemm(kb_t *kb, int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const void *a, const void *b, float beta, void *c) {
  MOVES(gemm, A((double)m * k + (double)k * n + (double)m * n * (beta != 0.0f ? 2 : 1)));
  TIMED(gemm, trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
}
static tsr_status p_gemm_strided(kb_t *kb, int trans_a, int trans_b, int m, int n, int k,
                                 float alpha, const void *a, int lda, const void *b, int ldb,
                                 float beta, void *c, int ldc, kernels_dtype c_dtype) {
  TIMED(gemm_strided, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, c_dtype);
}
static tsr_status p_linear_forward(kb_t *kb, void *out, const void *inp, const void *w,
                                   const float *bias, int M, int K, int N) {
  MOVES(linear_forward, A((double)M * K + (double)K * N + (double)M * N) + (bias ? F(N) : 0));
  TIMED(linear_forward, out, inp, w, bias, M, K, N);
}
static tsr_status p_linear_backward(kb_t *kb, void *dinp, float *dw, float *dbias,
                                    const void *dout, const void *inp, const void *w, int M, int K,
                                    int N) {
  MOVES(linear_backward, A((double)M * N + (double)K * N + (double)M * K * (dinp ? 2 : 1))
        + (dw ? F(2.0 * K * N) : 0) + (dbias ? F(2.0 * N) : 0));
  TIMED(linear_backward, dinp, dw, dbias, dout, inp, w, M, K, N);
}
static tsr_status p_layernorm_forward(kb_t *kb, void *out, float *mean, float *rstd,
                                      const void *inp, int L, int D, float eps) {
  MOVES(layernorm_forward, A(2.0 * L * D) + F(2.0 * L));
  TIMED(layernorm_forward, out, mean, rstd, inp, L, D, eps);
}
static tsr_status p_layernorm_backward(kb_t *kb, void *dinp, const void *dout, const void *inp,
                                       const float *mean, const float *rstd, int L, int D) {
  MOVES(layernorm_backward, A(3.0 * L * D) + F(2.0 * L));
  TIMED(layernorm_backward, dinp, dout, inp, mean, rstd, L, D);
}
static tsr_status p_rmsnorm_forward(kb_t *kb, void *out, float *rstd, const void *inp,
                                    const float *weight, int R, int C, float eps) {
  MOVES(rmsnorm_forward, A(2.0 * R * C) + F((double)R + C));
  TIMED(rmsnorm_forward, out, rstd, inp, weight, R, C, eps);
}
static tsr_status p_rmsnorm_backward(kb_t *kb, void *dinp, float *dweight, const void *dout,
                                     const void *inp, const float *weight, const float *rstd,
                                     int R, int C) {
  MOVES(rmsnorm_backward, A((dinp ? 3.0 : 2.0) * R * C)
        + F((double)R + C + (dweight ? 2.0 * C : 0)));
  TIMED(rmsnorm_backward, dinp, dweight, dout, inp, weight, rstd, R, C);
}
static tsr_status p_modulate_forward(kb_t *kb, void *out, const void *inp, const void *shift,
                                     const void *scale, int mstride, const int32_t *cu_seqlens,
                                     int n_clips, int L, int D) {
  MOVES(modulate_forward, A(2.0 * L * D + 2.0 * n_clips * D) + F(n_clips + 1.0));
  TIMED(modulate_forward, out, inp, shift, scale, mstride, cu_seqlens, n_clips, L, D);
}
static tsr_status p_modulate_backward(kb_t *kb, void *dinp, void *dshift, void *dscale,
                                      const void *dout, const void *inp, const void *scale,
                                      int mstride, const int32_t *cu_seqlens, int n_clips, int L,
                                      int D) {
  double mb_rows = (double)L * D * (1 + (dinp != NULL) + (dscale != NULL));
  double mb_vecs = (double)n_clips * D * ((dinp != NULL) + (dshift != NULL) + (dscale != NULL));
  MOVES(modulate_backward, A(mb_rows + mb_vecs) + F(n_clips + 1.0));
  TIMED(modulate_backward, dinp, dshift, dscale, dout, inp, scale, mstride, cu_seqlens, n_clips, L,
        D);
}
static tsr_status p_gate_residual_forward(kb_t *kb, void *out, const void *res, const void *inp,
                                          const void *gate, int mstride, const int32_t *cu_seqlens,
                                          int n_clips, int L, int D) {
  MOVES(gate_residual_forward, A(3.0 * L * D + (double)n_clips * D) + F(n_clips + 1.0));
  TIMED(gate_residual_forward, out, res, inp, gate, mstride, cu_seqlens, n_clips, L, D);
}
static tsr_status p_gate_residual_backward(kb_t *kb, void *dinp, void *dgate, const void *dout,
                                           const void *inp, const void *gate, int mstride,
                                           const int32_t *cu_seqlens, int n_clips, int L, int D) {
  double gb_rows = (double)L * D * (1 + (dinp != NULL) + (dgate != NULL));
  double gb_vecs = (double)n_clips * D * ((dinp != NULL) + (dgate != NULL));
  MOVES(gate_residual_backward, A(gb_rows + gb_vecs) + F(n_clips + 1.0));
  TIMED(gate_residual_backward, dinp, dgate, dout, inp, gate, mstride, cu_seqlens, n_clips, L, D);
}
static tsr_status p_rope_forward(kb_t *kb, void *out, const void *inp, const int32_t *pos, int L,
                                 int H, int Dh, float theta) {
  MOVES(rope_forward, A(2.0 * L * H * Dh) + F(3.0 * L));
  TIMED(rope_forward, out, inp, pos, L, H, Dh, theta);
}
static tsr_status p_rope_backward(kb_t *kb, void *dinp, const void *dout, const int32_t *pos,
                                  int L, int H, int Dh, float theta) {
  MOVES(rope_backward, A(2.0 * L * H * Dh) + F(3.0 * L));
  TIMED(rope_backward, dinp, dout, pos, L, H, Dh, theta);
}
static tsr_status p_gelu_forward(kb_t *kb, void *out, const void *inp, size_t n) {
  MOVES(gelu_forward, A(2.0 * n));
  TIMED(gelu_forward, out, inp, n);
}
static tsr_status p_gelu_backward(kb_t *kb, void *dinp, const void *dout, const void *inp,
                                  size_t n) {
  MOVES(gelu_backward, A(3.0 * n));
  TIMED(gelu_backward, dinp, dout, inp, n);
}
static tsr_status p_silu_forward(kb_t *kb, void *out, const void *inp, size_t n) {
  MOVES(silu_forward, A(2.0 * n));
  TIMED(silu_forward, out, inp, n);
}
static tsr_status p_silu_backward(kb_t *kb, void *dinp, const void *dout, const void *inp,
                                  size_t n) {
  MOVES(silu_backward, A(3.0 * n));
  TIMED(silu_backward, dinp, dout, inp, n);
}
static tsr_status p_timestep_embedding(kb_t *kb, void *out, const float *t, int n, int dim,
                                       float max_period) {
  TIMED(timestep_embedding, out, t, n, dim, max_period);
}
static tsr_status p_embedding_forward(kb_t *kb, void *out, const float *table, const int32_t *ids,
                                      int n, int V, int D) {
  MOVES(embedding_forward, A((double)n * D) + F((double)n * D + n));
  TIMED(embedding_forward, out, table, ids, n, V, D);
}
static tsr_status p_embedding_backward(kb_t *kb, float *dtable, const void *dout,
                                       const int32_t *ids, int n, int V, int D) {
  TIMED(embedding_backward, dtable, dout, ids, n, V, D);
}
static tsr_status p_attention_forward(kb_t *kb, void *out, float *lse, const void *q,
                                      const void *k, const void *v, const int32_t *cu_seqlens,
                                      int n_clips, int max_len, int L, int H, int Dh,
                                      float scale) {
  MOVES(attention_forward, A(4.0 * L * H * Dh) + F((double)L * H + n_clips + 1.0));
  TIMED(attention_forward, out, lse, q, k, v, cu_seqlens, n_clips, max_len, L, H, Dh, scale);
}
static tsr_status p_attention_backward(kb_t *kb, void *dq, void *dk, void *dv, const void *dout,
                                       const void *q, const void *k, const void *v,
                                       const void *out, const float *lse,
                                       const int32_t *cu_seqlens, int n_clips, int max_len, int L,
                                       int H, int Dh, float scale) {
  MOVES(attention_backward, A(8.0 * L * H * Dh) + F((double)L * H + n_clips + 1.0));
  TIMED(attention_backward, dq, dk, dv, dout, q, k, v, out, lse, cu_seqlens, n_clips, max_len, L,
        H, Dh, scale);
}
static tsr_status p_attention_partial_forward(kb_t *kb, void *out, float *lse, const void *q,
                                              const void *k, const void *v, const int32_t *cu_q,
                                              const int32_t *cu_k, int n_clips, int max_q,
                                              int max_k, int Lq, int Lk, int H, int Dh,
                                              float scale) {
  TIMED(attention_partial_forward, out, lse, q, k, v, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk, H,
        Dh, scale);
}
static tsr_status p_attention_merge(kb_t *kb, void *out_a, float *lse_a, const void *out_b,
                                    const float *lse_b, int L, int H, int Dh) {
  MOVES(attention_merge, A(3.0 * L * H * Dh) + F(3.0 * L * H));
  TIMED(attention_merge, out_a, lse_a, out_b, lse_b, L, H, Dh);
}
static tsr_status p_attention_delta(kb_t *kb, float *delta, const void *dout, const void *out,
                                    int L, int H, int Dh) {
  MOVES(attention_delta, A(2.0 * L * H * Dh) + F((double)L * H));
  TIMED(attention_delta, delta, dout, out, L, H, Dh);
}
static tsr_status p_attention_partial_backward(kb_t *kb, void *dq, void *dk, void *dv,
                                               const void *dout, const void *q, const void *k,
                                               const void *v, const float *lse, const float *delta,
                                               const int32_t *cu_q, const int32_t *cu_k,
                                               int n_clips, int max_q, int max_k, int Lq, int Lk,
                                               int H, int Dh, float scale) {
  TIMED(attention_partial_backward, dq, dk, dv, dout, q, k, v, lse, delta, cu_q, cu_k, n_clips,
        max_q, max_k, Lq, Lk, H, Dh, scale);
}
static tsr_status p_attention_masked_forward(kb_t *kb, void *out, float *lse, const void *q,
                                             const void *k, const void *v, const int32_t *cu_q,
                                             const int32_t *cu_k, const int32_t *pos_q,
                                             const int32_t *pos_k, kernels_mask mask, int n_clips,
                                             int max_q, int max_k, int Lq, int Lk, int H, int Dh,
                                             float scale) {
  TIMED(attention_masked_forward, out, lse, q, k, v, cu_q, cu_k, pos_q, pos_k, mask, n_clips,
        max_q, max_k, Lq, Lk, H, Dh, scale);
}
static tsr_status p_attention_masked_backward(kb_t *kb, void *dq, void *dk, void *dv,
                                              const void *dout, const void *q, const void *k,
                                              const void *v, const void *out, const float *lse,
                                              const int32_t *cu, const int32_t *pos,
                                              kernels_mask mask, int n_clips, int max_len, int L,
                                              int H, int Dh, float scale) {
  TIMED(attention_masked_backward, dq, dk, dv, dout, q, k, v, out, lse, cu, pos, mask, n_clips,
        max_len, L, H, Dh, scale);
}
static tsr_status p_attention_masked_partial_backward(
    kb_t *kb, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
    const void *v, const float *lse, const float *delta, const int32_t *cu_q, const int32_t *cu_k,
    const int32_t *pos_q, const int32_t *pos_k, kernels_mask mask, int n_clips, int max_q,
    int max_k, int Lq, int Lk, int H, int Dh, float scale) {
  TIMED(attention_masked_partial_backward, dq, dk, dv, dout, q, k, v, lse, delta, cu_q, cu_k,
        pos_q, pos_k, mask, n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
}
static tsr_status p_objective_inputs(kb_t *kb, float *t, void *x_t, void *target,
                                     const void *tokens, kernels_tokens tokens_dtype,
                                     const kernels_clip_key *clips, const int32_t *cu_seqlens,
                                     int n_clips, int L, int P, uint64_t seed, uint64_t step,
                                     kernels_t_dist td) {
  TIMED(objective_inputs, t, x_t, target, tokens, tokens_dtype, clips, cu_seqlens, n_clips, L, P,
        seed, step, td);
}
static tsr_status p_euler_update(kb_t *kb, float *x, const void *v_cond, const void *v_uncond,
                                 float cfg, float dt, size_t n) {
  MOVES(euler_update, F(2.0 * n) + A((v_uncond ? 2.0 : 1.0) * n));
  TIMED(euler_update, x, v_cond, v_uncond, cfg, dt, n);
}
static tsr_status p_mse_forward(kb_t *kb, float *loss, float *sse, const void *pred,
                                const void *target, const float *weight, const int32_t *cu_seqlens,
                                int n_clips, int L, int D) {
  MOVES(mse_forward, A(2.0 * L * D) + F(3.0 * n_clips + 2.0));
  TIMED(mse_forward, loss, sse, pred, target, weight, cu_seqlens, n_clips, L, D);
}
static tsr_status p_mse_backward(kb_t *kb, void *dpred, const void *pred, const void *target,
                                 const float *weight, const int32_t *cu_seqlens, int n_clips,
                                 int L, int D) {
  MOVES(mse_backward, A(3.0 * L * D) + F(2.0 * n_clips + 1.0));
  TIMED(mse_backward, dpred, pred, target, weight, cu_seqlens, n_clips, L, D);
}
static tsr_status p_sumsq(kb_t *kb, double *result_host, const float *x, size_t n) {
  MOVES(sumsq, F(n));
  TIMED(sumsq, result_host, x, n);
}
static tsr_status p_adamw_update(kb_t *kb, float *param, const float *grad, float *m, float *v,
                                 size_t n, float lr, float beta1, float beta2, float eps,
                                 float weight_decay, int64_t step, float grad_scale) {
  MOVES(adamw_update, F(7.0 * n));
  TIMED(adamw_update, param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step, grad_scale);
}
static tsr_status p_ema_update(kb_t *kb, float *ema, const float *param, size_t n, float decay) {
  MOVES(ema_update, F(3.0 * n));
  TIMED(ema_update, ema, param, n, decay);
}
static tsr_status p_adamw_update_multi(kb_t *kb, float *param, const float *grad, float *m,
                                       float *v, void *work, size_t n,
                                       const kernels_param_segment *segs, int n_segs, float lr,
                                       float beta1, float beta2, float eps, float weight_decay,
                                       int64_t step, float grad_scale) {
  // param, m, v read and written, grad read; the working copy written
  MOVES(adamw_update_multi, F(7.0 * n) + (work ? A(n) : 0.0));
  TIMED(adamw_update_multi, param, grad, m, v, work, n, segs, n_segs, lr, beta1, beta2, eps,
        weight_decay, step, grad_scale);
}
static tsr_status p_layernorm_modulate_forward(kb_t *kb, void *out, float *mean, float *rstd,
                                               const void *inp, const void *shift,
                                               const void *scale, int mstride,
                                               const int32_t *cu_seqlens, int n_clips, int L,
                                               int D, float eps) {
  MOVES(layernorm_modulate_forward, A(2.0 * L * D + 2.0 * n_clips * D) + F(2.0 * L + n_clips + 1.0));
  TIMED(layernorm_modulate_forward, out, mean, rstd, inp, shift, scale, mstride, cu_seqlens,
        n_clips, L, D, eps);
}
static tsr_status p_layernorm_modulate_backward(kb_t *kb, void *dinp, void *dshift, void *dscale,
                                                const void *dout, const void *inp,
                                                const float *mean, const float *rstd,
                                                const void *scale, int mstride,
                                                const int32_t *cu_seqlens, int n_clips, int L,
                                                int D) {
  // dout; inp for dinp or dscale; dinp read and written
  double lb_rows = (double)L * D * (1 + (dinp || dscale) + 2 * (dinp != NULL));
  double lb_vecs = (double)n_clips * D * ((dinp != NULL) + (dshift != NULL) + (dscale != NULL));
  MOVES(layernorm_modulate_backward,
        A(lb_rows + lb_vecs) + F(((dinp || dscale) ? 2.0 * L : 0) + n_clips + 1.0));
  TIMED(layernorm_modulate_backward, dinp, dshift, dscale, dout, inp, mean, rstd, scale, mstride,
        cu_seqlens, n_clips, L, D);
}
static tsr_status p_qk_norm_rope_forward(kb_t *kb, void *q_out, void *k_out, float *q_rstd,
                                         float *k_rstd, const void *q_in, const void *k_in,
                                         const float *q_weight, const float *k_weight,
                                         const int32_t *pos, int L, int H, int Dh, float eps,
                                         float theta) {
  MOVES(qk_norm_rope_forward, A(4.0 * L * H * Dh) + F(2.0 * L * H + 2.0 * Dh + 3.0 * L));
  TIMED(qk_norm_rope_forward, q_out, k_out, q_rstd, k_rstd, q_in, k_in, q_weight, k_weight, pos, L,
        H, Dh, eps, theta);
}
static tsr_status p_qk_norm_rope_backward(kb_t *kb, void *dq_in, void *dk_in, float *dq_weight,
                                          float *dk_weight, const void *dq, const void *dk,
                                          const void *q_in, const void *k_in,
                                          const float *q_weight, const float *k_weight,
                                          const float *q_rstd, const float *k_rstd,
                                          const int32_t *pos, int L, int H, int Dh, float theta) {
  double qb_dw = (dq_weight ? 2.0 * Dh : 0) + (dk_weight ? 2.0 * Dh : 0);
  MOVES(qk_norm_rope_backward, A(6.0 * L * H * Dh) + F(2.0 * L * H + 2.0 * Dh + 3.0 * L + qb_dw));
  TIMED(qk_norm_rope_backward, dq_in, dk_in, dq_weight, dk_weight, dq, dk, q_in, k_in, q_weight,
        k_weight, q_rstd, k_rstd, pos, L, H, Dh, theta);
}
static tsr_status p_linear_gelu_forward(kb_t *kb, void *out, void *pre, const void *inp,
                                        const void *w, const float *bias, int M, int K, int N) {
  MOVES(linear_gelu_forward, A((double)M * K + (double)K * N + 2.0 * M * N) + (bias ? F(N) : 0));
  TIMED(linear_gelu_forward, out, pre, inp, w, bias, M, K, N);
}
static tsr_status p_linear_backward_dgelu(kb_t *kb, void *dpre, float *dw, float *dbias,
                                          const void *dout, const void *inp, const void *w,
                                          const void *pre, int M, int K, int N) {
  MOVES(linear_backward_dgelu, A(3.0 * M * N + (double)K * N + (double)M * K)
        + (dw ? F(2.0 * K * N) : 0) + (dbias ? F(2.0 * N) : 0));
  TIMED(linear_backward_dgelu, dpre, dw, dbias, dout, inp, w, pre, M, K, N);
}

// Every entry of the table: the timed forwarders above.
static void fill_entries(kernels_backend *t) {
  t->alloc = p_alloc;
  t->free = p_free;
  t->to_device = p_to_device;
  t->to_host = p_to_host;
  t->copy = p_copy;
  t->copy_2d = p_copy_2d;
  t->memset_zero = p_memset_zero;
  t->sync = p_sync;
  t->reserve = p_reserve;
  t->memory_stats = p_memory_stats;
  t->mem_info = p_mem_info;
  t->cast = p_cast;
  t->fill = p_fill;
  t->scale = p_scale;
  t->add = p_add;
  t->axpy = p_axpy;
  t->add_act = p_add_act;
  t->axpy_act = p_axpy_act;
  t->u8_affine = p_u8_affine;
  t->gemm = p_gemm;
  t->gemm_strided = p_gemm_strided;
  t->linear_forward = p_linear_forward;
  t->linear_backward = p_linear_backward;
  t->layernorm_forward = p_layernorm_forward;
  t->layernorm_backward = p_layernorm_backward;
  t->rmsnorm_forward = p_rmsnorm_forward;
  t->rmsnorm_backward = p_rmsnorm_backward;
  t->modulate_forward = p_modulate_forward;
  t->modulate_backward = p_modulate_backward;
  t->gate_residual_forward = p_gate_residual_forward;
  t->gate_residual_backward = p_gate_residual_backward;
  t->rope_forward = p_rope_forward;
  t->rope_backward = p_rope_backward;
  t->gelu_forward = p_gelu_forward;
  t->gelu_backward = p_gelu_backward;
  t->silu_forward = p_silu_forward;
  t->silu_backward = p_silu_backward;
  t->timestep_embedding = p_timestep_embedding;
  t->embedding_forward = p_embedding_forward;
  t->embedding_backward = p_embedding_backward;
  t->attention_forward = p_attention_forward;
  t->attention_backward = p_attention_backward;
  t->attention_partial_forward = p_attention_partial_forward;
  t->attention_merge = p_attention_merge;
  t->attention_delta = p_attention_delta;
  t->attention_partial_backward = p_attention_partial_backward;
  t->objective_inputs = p_objective_inputs;
  t->euler_update = p_euler_update;
  t->mse_forward = p_mse_forward;
  t->mse_backward = p_mse_backward;
  t->sumsq = p_sumsq;
  t->adamw_update = p_adamw_update;
  t->ema_update = p_ema_update;
  t->adamw_update_multi = p_adamw_update_multi;
  t->layernorm_modulate_forward = p_layernorm_modulate_forward;
  t->layernorm_modulate_backward = p_layernorm_modulate_backward;
  t->qk_norm_rope_forward = p_qk_norm_rope_forward;
  t->qk_norm_rope_backward = p_qk_norm_rope_backward;
  t->linear_gelu_forward = p_linear_gelu_forward;
  t->linear_backward_dgelu = p_linear_backward_dgelu;
}

// Every field of kernels_backend before the entries: name, ctx, act_dtype, device_memory,
// stream; the rest are the N_ENTRIES function pointers, the 4 optional graph_* entries,
// which a profiled table leaves NULL (kernels_profiled says why), and path_stats, which it
// forwards untimed.
enum { N_UNPROFILED = 5 };
_Static_assert(sizeof(kernels_backend) == offsetof(kernels_backend, alloc) +
                                              (N_ENTRIES + N_UNPROFILED) * sizeof(void (*)(void)),
               "kernels_backend has an entry that profile.c does not forward");

static const char *const CLASS_NAME[KERNELS_PROFILE_N_CLASSES] = {
    "gemm", "attention", "elementwise", "optimizer", "objective", "memory", "other"};

const char *kernels_profile_class_name(kernels_profile_class c) {
  return (unsigned)c < KERNELS_PROFILE_N_CLASSES ? CLASS_NAME[c] : "?";
}

// The table and its state in one allocation, so that kernels_profiled_free frees both.
typedef struct {
  kernels_backend table;
  prof state;
} profiled;

tsr_status kernels_profiled(const kernels_backend *inner, int sync, kernels_backend **out) {
  if (!inner || !out)
    return err_set(TSR_EINVAL, "kernels_profiled: %s is NULL", inner ? "out" : "inner");
  profiled *pb = calloc(1, sizeof *pb);
  if (!pb) return err_set(TSR_ENOMEM, "kernels_profiled: no memory");
  pb->state = (prof){.magic = PROF_MAGIC, .sync = sync != 0, .inner = inner};
  pb->table = *inner;  // name, act_dtype, device_memory, stream
  pb->table.ctx = &pb->state;
  fill_entries(&pb->table);
  // No recorded graphs through a profiled table: a replayed graph runs many entries in one
  // launch, so their time could not be told apart, and the sync around each entry is refused
  // while recording. The model then runs every phase eagerly (kernels.h: graph_* optional).
  pb->table.graph_begin = NULL;
  pb->table.graph_end = NULL;
  pb->table.graph_launch = NULL;
  pb->table.graph_free = NULL;
  pb->table.path_stats = inner->path_stats ? p_path_stats : NULL;
  // The optional masked attention stays absent where the inner table has none.
  pb->table.attention_masked_forward =
      inner->attention_masked_forward ? p_attention_masked_forward : NULL;
  pb->table.attention_masked_backward =
      inner->attention_masked_backward ? p_attention_masked_backward : NULL;
  pb->table.attention_masked_partial_backward =
      inner->attention_masked_partial_backward ? p_attention_masked_partial_backward : NULL;
  *out = &pb->table;
  return TSR_OK;
}

static prof *state_of(const kernels_backend *kb) {
  prof *p = kb ? kb->ctx : NULL;
  // Only a profiled table's ctx is a prof; the CPU's is NULL, CUDA's is its own state, so
  // the forwarder check comes first and the magic second.
  return p && kb->alloc == p_alloc && p->magic == PROF_MAGIC ? p : NULL;
}

void kernels_profiled_free(kernels_backend **kb) {
  if (!kb || !*kb || !state_of(*kb)) return;
  free((profiled *)*kb);  // the table is the first member
  *kb = NULL;
}

int kernels_is_profiled(const kernels_backend *kb) { return state_of(kb) != NULL; }

const kernels_backend *kernels_profiled_inner(const kernels_backend *kb) {
  prof *p = state_of(kb);
  return p ? p->inner : NULL;
}

void kernels_profile_reset(const kernels_backend *kb) {
  prof *p = state_of(kb);
  if (!p) return;
  memset(p->calls, 0, sizeof p->calls);
  memset(p->seconds, 0, sizeof p->seconds);
  memset(p->bytes, 0, sizeof p->bytes);
}

int kernels_profile_read(const kernels_backend *kb, kernels_profile_entry *out, int max) {
  prof *p = state_of(kb);
  if (!p) return 0;
  for (int e = 0; e < N_ENTRIES && e < max; e++)
    out[e] = (kernels_profile_entry){ENTRY[e].name, ENTRY[e].cls, p->calls[e], p->seconds[e],
                                     p->bytes[e]};
  return N_ENTRIES;
}

void kernels_profile_by_class(const kernels_profile_entry *e, int n, uint64_t *calls,
                              double *seconds) {
  for (int c = 0; c < KERNELS_PROFILE_N_CLASSES; c++) {
    if (calls) calls[c] = 0;
    if (seconds) seconds[c] = 0.0;
  }
  for (int i = 0; i < n; i++) {
    if ((unsigned)e[i].cls >= KERNELS_PROFILE_N_CLASSES) continue;
    if (calls) calls[e[i].cls] += e[i].calls;
    if (seconds) seconds[e[i].cls] += e[i].seconds;
  }
}

double kernels_profile_total(const kernels_backend *kb) {
  prof *p = state_of(kb);
  double s = 0.0;
  for (int e = 0; p && e < N_ENTRIES; e++) s += p->seconds[e];
  return s;
}
