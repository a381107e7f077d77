// kernels/cpu/backend.c — the CPU backends: host memory entries and the two function
// tables, fp32 ("cpu") and bf16 activations ("cpu-bf16", entries in bf16.c).
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/check.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu.h"

#include <omp.h>

// Bytes held by alloc (both tables share them) and their peak, for memory_stats: counted
// with the allocator's own size of each block (malloc_usable_size), so free needs no
// header. Atomic: the two tables may be used from two threads.
static size_t g_in_use, g_peak;

static tsr_status cpu_alloc(kb_t *kb, void **ptr, size_t bytes) {
  tsr_status st = kernels_check_alloc(ptr, bytes);
  if (st) return st;
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded < bytes) return err_set(TSR_ENOMEM, "alloc: %zu bytes is too large", bytes);
  void *p = aligned_alloc(64, rounded ? rounded : 64);
  if (!p)
    return err_set(TSR_ENOMEM, "out of memory: a host buffer of %zu bytes (%.1f MiB), with %.1f "
                   "MiB of the backend's held already (the machine's memory, or a ulimit -v)",
                   bytes, (double)bytes / (1 << 20),
                   (double)__atomic_load_n(&g_in_use, __ATOMIC_RELAXED) / (1 << 20));
  memset(p, 0, rounded ? rounded : 64);
  size_t now = __atomic_add_fetch(&g_in_use, malloc_usable_size(p), __ATOMIC_RELAXED);
  size_t peak = __atomic_load_n(&g_peak, __ATOMIC_RELAXED);
  while (now > peak &&
         !__atomic_compare_exchange_n(&g_peak, &peak, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  *ptr = p;
  return TSR_OK;
}

static void cpu_free(kb_t *kb, void *ptr) {
  if (ptr) __atomic_sub_fetch(&g_in_use, malloc_usable_size(ptr), __ATOMIC_RELAXED);
  free(ptr);
}

static tsr_status cpu_reserve(kb_t *kb, size_t bytes) { return TSR_OK; }

static tsr_status cpu_memory_stats(kb_t *kb, size_t *in_use, size_t *peak, size_t *capacity) {
  if (in_use) *in_use = __atomic_load_n(&g_in_use, __ATOMIC_RELAXED);
  if (peak) *peak = __atomic_load_n(&g_peak, __ATOMIC_RELAXED);
  if (capacity) *capacity = 0;  // host memory, allocated per call
  return TSR_OK;
}

// MemAvailable and MemTotal of /proc/meminfo (kB lines).
static tsr_status cpu_mem_info(kb_t *kb, size_t *free_bytes, size_t *total_bytes) {
  TSR_TRY(kernels_check_mem_info(free_bytes, total_bytes));
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return err_set(TSR_EIO, "mem_info: cannot read /proc/meminfo");
  char line[256];
  unsigned long long avail = 0, total = 0, v;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "MemAvailable: %llu kB", &v) == 1) avail = v;
    else if (sscanf(line, "MemTotal: %llu kB", &v) == 1) total = v;
  }
  fclose(f);
  if (!total) return err_set(TSR_EIO, "mem_info: no MemTotal in /proc/meminfo");
  *free_bytes = (size_t)avail * 1024;
  *total_bytes = (size_t)total * 1024;
  return TSR_OK;
}

// The three copies are one memcpy here (host memory); bytes == 0 may have NULL ends.
static tsr_status cpu_memcpy(tsr_status st, void *dst, const void *src, size_t bytes) {
  if (!st && bytes) memcpy(dst, src, bytes);
  return st;
}

static tsr_status cpu_to_device(kb_t *kb, void *dst, const void *src_host, size_t bytes) {
  return cpu_memcpy(kernels_check_to_device(dst, src_host, bytes), dst, src_host, bytes);
}

static tsr_status cpu_to_host(kb_t *kb, void *dst_host, const void *src, size_t bytes) {
  return cpu_memcpy(kernels_check_to_host(dst_host, src, bytes), dst_host, src, bytes);
}

static tsr_status cpu_copy(kb_t *kb, void *dst, const void *src, size_t bytes) {
  return cpu_memcpy(kernels_check_copy(dst, src, bytes), dst, src, bytes);
}

static tsr_status cpu_copy_2d(kb_t *kb, void *dst, size_t dst_pitch, const void *src,
                              size_t src_pitch, size_t row_bytes, size_t rows) {
  tsr_status st = kernels_check_copy_2d(dst, dst_pitch, src, src_pitch, row_bytes, rows);
  if (st) return st;
  for (size_t i = 0; i < rows; i++)
    memcpy((char *)dst + i * dst_pitch, (const char *)src + i * src_pitch, row_bytes);
  return TSR_OK;
}

static tsr_status cpu_memset_zero(kb_t *kb, void *ptr, size_t bytes) {
  tsr_status st = kernels_check_memset_zero(ptr, bytes);
  if (st || bytes == 0) return st;
  memset(ptr, 0, bytes);
  return TSR_OK;
}

static tsr_status cpu_sync(kb_t *kb) { return TSR_OK; }

// ---- the fp32 table's [act] entries -------------------------------------------------
// One-line adapters from the table's void * ([act]) to the float * definitions: with
// act_dtype = F32 an [act] tensor is fp32, so the arithmetic is the kcpu_* one, unchanged.

static tsr_status f32_add_act(kb_t *kb, void *out, const void *a, const void *b, size_t n) {
  tsr_status st = kernels_check_add_act(out, a, b, n);
  return st ? st : kcpu_add(kb, out, a, b, n);
}
static tsr_status f32_axpy_act(kb_t *kb, void *y, float alpha, const void *x, size_t n) {
  tsr_status st = kernels_check_axpy_act(y, x, n);
  return st ? st : kcpu_axpy(kb, y, alpha, x, n);
}
static tsr_status f32_u8_affine(kb_t *kb, void *out, const uint8_t *in, float a, float b,
                                size_t n) {
  return kcpu_u8_affine(kb, out, in, a, b, n);
}
static tsr_status f32_gemm(kb_t *kb, int trans_a, int trans_b, int m, int n, int k, float alpha,
                           const void *a, const void *b, float beta, void *c) {
  return kcpu_gemm(kb, trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
}
static tsr_status f32_gemm_strided(kb_t *kb, int trans_a, int trans_b, int m, int n, int k,
                                   float alpha, const void *a, int lda, const void *b, int ldb,
                                   float beta, void *c, int ldc, kernels_dtype c_dtype) {
  if (c_dtype != KERNELS_F32)
    return err_set(TSR_EINVAL, "gemm_strided: c_dtype %s on backend cpu (fp32 only)",
                   kernels_dtype_name(c_dtype));
  return kcpu_gemm_strided(kb, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
static tsr_status f32_gemm_batched(kb_t *kb, int trans_a, int trans_b, int m, int n, int k,
                                   float alpha, const void *a, int64_t stride_a, const void *b,
                                   int64_t stride_b, float beta, void *c, int64_t stride_c,
                                   kernels_dtype c_dtype, const float *bias, int64_t stride_bias,
                                   int batch) {
  if (c_dtype != KERNELS_F32)
    return err_set(TSR_EINVAL, "gemm_batched: c_dtype %s on backend cpu (fp32 only)",
                   kernels_dtype_name(c_dtype));
  return kcpu_gemm_batched(kb, trans_a, trans_b, m, n, k, alpha, a, stride_a, b, stride_b, beta, c,
                           stride_c, bias, stride_bias, batch);
}
static tsr_status f32_linear_forward(kb_t *kb, void *out, const void *inp, const void *w,
                                     const float *bias, int M, int K, int N) {
  return kcpu_linear_forward(kb, out, inp, w, bias, M, K, N);
}
static tsr_status f32_linear_backward(kb_t *kb, void *dinp, float *dw, float *dbias,
                                      const void *dout, const void *inp, const void *w, int M,
                                      int K, int N) {
  return kcpu_linear_backward(kb, dinp, dw, dbias, dout, inp, w, M, K, N);
}
static tsr_status f32_layernorm_forward(kb_t *kb, void *out, float *mean, float *rstd,
                                        const void *inp, int L, int D, float eps) {
  return kcpu_layernorm_forward(kb, out, mean, rstd, inp, L, D, eps);
}
static tsr_status f32_layernorm_backward(kb_t *kb, void *dinp, const void *dout, const void *inp,
                                         const float *mean, const float *rstd, int L, int D) {
  return kcpu_layernorm_backward(kb, dinp, dout, inp, mean, rstd, L, D);
}
static tsr_status f32_rmsnorm_forward(kb_t *kb, void *out, float *rstd, const void *inp,
                                      const float *weight, int R, int C, float eps) {
  return kcpu_rmsnorm_forward(kb, out, rstd, inp, weight, R, C, eps);
}
static tsr_status f32_rmsnorm_backward(kb_t *kb, void *dinp, float *dweight, const void *dout,
                                       const void *inp, const float *weight, const float *rstd,
                                       int R, int C) {
  return kcpu_rmsnorm_backward(kb, dinp, dweight, dout, inp, weight, rstd, R, C);
}
static tsr_status f32_modulate_forward(kb_t *kb, void *out, const void *inp, const void *shift,
                                       const void *scale, int mstride, const int32_t *cu,
                                       int n_clips, int L, int D) {
  return kcpu_modulate_forward(kb, out, inp, shift, scale, mstride, cu, n_clips, L, D);
}
static tsr_status f32_modulate_backward(kb_t *kb, void *dinp, void *dshift, void *dscale,
                                        const void *dout, const void *inp, const void *scale,
                                        int mstride, const int32_t *cu, int n_clips, int L, int D) {
  return kcpu_modulate_backward(kb, dinp, dshift, dscale, dout, inp, scale, mstride, cu, n_clips,
                                L, D);
}
static tsr_status f32_gate_residual_forward(kb_t *kb, void *out, const void *res, const void *inp,
                                            const void *gate, int mstride, const int32_t *cu,
                                            int n_clips, int L, int D) {
  return kcpu_gate_residual_forward(kb, out, res, inp, gate, mstride, cu, n_clips, L, D);
}
static tsr_status f32_gate_residual_backward(kb_t *kb, void *dinp, void *dgate, const void *dout,
                                             const void *inp, const void *gate, int mstride,
                                             const int32_t *cu, int n_clips, int L, int D) {
  return kcpu_gate_residual_backward(kb, dinp, dgate, dout, inp, gate, mstride, cu, n_clips, L, D);
}
static tsr_status f32_rope_forward(kb_t *kb, void *out, const void *inp, const int32_t *pos,
                                   int L, int H, int Dh, float theta) {
  return kcpu_rope_forward(kb, out, inp, pos, L, H, Dh, theta);
}
static tsr_status f32_rope_backward(kb_t *kb, void *dinp, const void *dout, const int32_t *pos,
                                    int L, int H, int Dh, float theta) {
  return kcpu_rope_backward(kb, dinp, dout, pos, L, H, Dh, theta);
}
static tsr_status f32_gelu_forward(kb_t *kb, void *out, const void *inp, size_t n) {
  return kcpu_gelu_forward(kb, out, inp, n);
}
static tsr_status f32_gelu_backward(kb_t *kb, void *dinp, const void *dout, const void *inp,
                                    size_t n) {
  return kcpu_gelu_backward(kb, dinp, dout, inp, n);
}
static tsr_status f32_silu_forward(kb_t *kb, void *out, const void *inp, size_t n) {
  return kcpu_silu_forward(kb, out, inp, n);
}
static tsr_status f32_silu_backward(kb_t *kb, void *dinp, const void *dout, const void *inp,
                                    size_t n) {
  return kcpu_silu_backward(kb, dinp, dout, inp, n);
}
static tsr_status f32_timestep_embedding(kb_t *kb, void *out, const float *t, int n, int dim,
                                         float max_period) {
  return kcpu_timestep_embedding(kb, out, t, n, dim, max_period);
}
static tsr_status f32_embedding_forward(kb_t *kb, void *out, const float *table,
                                        const int32_t *ids, int n, int V, int D) {
  return kcpu_embedding_forward(kb, out, table, ids, n, V, D);
}
static tsr_status f32_embedding_backward(kb_t *kb, float *dtable, const void *dout,
                                         const int32_t *ids, int n, int V, int D) {
  return kcpu_embedding_backward(kb, dtable, dout, ids, n, V, D);
}
static tsr_status f32_attention_forward(kb_t *kb, void *out, float *lse, const void *q,
                                        const void *k, const void *v, const int32_t *cu,
                                        int n_clips, int max_len, int L, int H, int Dh,
                                        float scale) {
  return kcpu_attention_forward(kb, out, lse, q, k, v, cu, n_clips, max_len, L, H, Dh, scale);
}
static tsr_status f32_attention_backward(kb_t *kb, void *dq, void *dk, void *dv, const void *dout,
                                         const void *q, const void *k, const void *v,
                                         const void *out, const float *lse, const int32_t *cu,
                                         int n_clips, int max_len, int L, int H, int Dh,
                                         float scale) {
  return kcpu_attention_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, cu, n_clips, max_len, L,
                                 H, Dh, scale);
}
static tsr_status f32_attention_partial_forward(kb_t *kb, void *out, float *lse, const void *q,
                                                const void *k, const void *v,
                                                const int32_t *cu_q, const int32_t *cu_k,
                                                int n_clips, int max_q, int max_k, int Lq, int Lk,
                                                int H, int Dh, float scale) {
  return kcpu_attention_partial_forward(kb, out, lse, q, k, v, cu_q, cu_k, n_clips, max_q, max_k,
                                        Lq, Lk, H, Dh, scale);
}
static tsr_status f32_attention_merge(kb_t *kb, void *out_a, float *lse_a, const void *out_b,
                                      const float *lse_b, int L, int H, int Dh) {
  return kcpu_attention_merge(kb, out_a, lse_a, out_b, lse_b, L, H, Dh);
}
static tsr_status f32_attention_delta(kb_t *kb, float *delta, const void *dout, const void *out,
                                      int L, int H, int Dh) {
  return kcpu_attention_delta(kb, delta, dout, out, L, H, Dh);
}
static tsr_status f32_attention_partial_backward(kb_t *kb, void *dq, void *dk, void *dv,
                                                 const void *dout, const void *q, const void *k,
                                                 const void *v, const void *out,
                                                 const float *lse, const float *delta,
                                                 const int32_t *cu_q, const int32_t *cu_k,
                                                 int n_clips, int max_q, int max_k, int Lq, int Lk,
                                                 int H, int Dh, float scale) {
  return kcpu_attention_partial_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, delta, cu_q,
                                         cu_k, n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
}
static tsr_status f32_attention_masked_forward(kb_t *kb, void *out, float *lse, const void *q,
                                               const void *k, const void *v, const int32_t *cu_q,
                                               const int32_t *cu_k, const int32_t *pos_q,
                                               const int32_t *pos_k, kernels_mask mask,
                                               int n_clips, int max_q, int max_k, int Lq, int Lk,
                                               int H, int Dh, float scale) {
  return kcpu_attention_masked_forward(kb, out, lse, q, k, v, cu_q, cu_k, pos_q, pos_k, mask,
                                       n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
}
static tsr_status f32_attention_masked_backward(kb_t *kb, void *dq, void *dk, void *dv,
                                                const void *dout, const void *q, const void *k,
                                                const void *v, const void *out, const float *lse,
                                                const int32_t *cu, const int32_t *pos,
                                                kernels_mask mask, int n_clips, int max_len, int L,
                                                int H, int Dh, float scale) {
  return kcpu_attention_masked_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, cu, pos, mask,
                                        n_clips, max_len, L, H, Dh, scale);
}
static tsr_status f32_attention_masked_partial_backward(
    kb_t *kb, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
    const void *v, const void *out, const float *lse, const float *delta, const int32_t *cu_q,
    const int32_t *cu_k, const int32_t *pos_q, const int32_t *pos_k, kernels_mask mask,
    int n_clips, int max_q, int max_k, int Lq, int Lk, int H, int Dh, float scale) {
  return kcpu_attention_masked_partial_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, delta,
                                                cu_q, cu_k, pos_q, pos_k, mask, n_clips, max_q,
                                                max_k, Lq, Lk, H, Dh, scale);
}
static tsr_status f32_objective_inputs(kb_t *kb, float *t, void *x_t, void *target,
                                       const void *tokens, kernels_tokens tokens_dtype,
                                       const kernels_clip_key *clips,
                                       const int32_t *cu, int n_clips, int L, int P,
                                       uint64_t seed, uint64_t step, kernels_t_dist td) {
  return kcpu_objective_inputs(kb, t, x_t, target, tokens, tokens_dtype, clips, cu, n_clips, L, P,
                               seed, step, td);
}
static tsr_status f32_euler_update(kb_t *kb, float *x, const void *v_cond, const void *v_uncond,
                                   float cfg, float dt, size_t n) {
  return kcpu_euler_update(kb, x, v_cond, v_uncond, cfg, dt, n);
}
static tsr_status f32_mse_forward(kb_t *kb, float *loss, float *sse, const void *pred,
                                  const void *target, const float *weight, const int32_t *cu,
                                  int n_clips, int L, int D) {
  return kcpu_mse_forward(kb, loss, sse, pred, target, weight, cu, n_clips, L, D);
}
static tsr_status f32_mse_backward(kb_t *kb, void *dpred, const void *pred, const void *target,
                                   const float *weight, const int32_t *cu, int n_clips, int L,
                                   int D) {
  return kcpu_mse_backward(kb, dpred, pred, target, weight, cu, n_clips, L, D);
}

static tsr_status f32_layernorm_modulate_forward(kb_t *kb, void *out, float *mean, float *rstd,
                                                 const void *inp, const void *shift,
                                                 const void *scale, int mstride,
                                                 const int32_t *cu, int n_clips, int L, int D,
                                                 float eps) {
  return kcpu_layernorm_modulate_forward(kb, out, mean, rstd, inp, shift, scale, mstride, cu,
                                         n_clips, L, D, eps);
}
static tsr_status f32_layernorm_modulate_backward(kb_t *kb, void *dinp, void *dshift,
                                                  void *dscale, const void *dout,
                                                  const void *inp, const float *mean,
                                                  const float *rstd, const void *scale,
                                                  int mstride, const int32_t *cu, int n_clips,
                                                  int L, int D) {
  return kcpu_layernorm_modulate_backward(kb, dinp, dshift, dscale, dout, inp, mean, rstd, scale,
                                          mstride, cu, n_clips, L, D);
}
static tsr_status f32_qk_norm_rope_forward(kb_t *kb, void *q_out, void *k_out, float *q_rstd,
                                           float *k_rstd, const void *q_in, const void *k_in,
                                           const float *q_weight, const float *k_weight,
                                           const int32_t *pos, int L, int H, int Dh, float eps,
                                           float theta) {
  return kcpu_qk_norm_rope_forward(kb, q_out, k_out, q_rstd, k_rstd, q_in, k_in, q_weight,
                                   k_weight, pos, L, H, Dh, eps, theta);
}
static tsr_status f32_qk_norm_rope_backward(kb_t *kb, void *dq_in, void *dk_in, float *dq_weight,
                                            float *dk_weight, const void *dq, const void *dk,
                                            const void *q_in, const void *k_in,
                                            const float *q_weight, const float *k_weight,
                                            const float *q_rstd, const float *k_rstd,
                                            const int32_t *pos, int L, int H, int Dh,
                                            float theta) {
  return kcpu_qk_norm_rope_backward(kb, dq_in, dk_in, dq_weight, dk_weight, dq, dk, q_in, k_in,
                                    q_weight, k_weight, q_rstd, k_rstd, pos, L, H, Dh, theta);
}
static tsr_status f32_linear_gelu_forward(kb_t *kb, void *out, void *pre, const void *inp,
                                          const void *w, const float *bias, int M, int K, int N) {
  return kcpu_linear_gelu_forward(kb, out, pre, inp, w, bias, M, K, N);
}
static tsr_status f32_linear_backward_dgelu(kb_t *kb, void *dpre, float *dw, float *dbias,
                                            const void *dout, const void *inp, const void *w,
                                            const void *pre, int M, int K, int N) {
  return kcpu_linear_backward_dgelu(kb, dpre, dw, dbias, dout, inp, w, pre, M, K, N);
}

// The entries that do not depend on the act dtype (memory, [f32] helpers, cast, optimizer)
// are the same functions in both tables.
#define KCPU_SHARED_ENTRIES            \
  .ctx = NULL,                         \
  .alloc = cpu_alloc,                  \
  .free = cpu_free,                    \
  .to_device = cpu_to_device,          \
  .to_host = cpu_to_host,              \
  .copy = cpu_copy,                    \
  .copy_2d = cpu_copy_2d,              \
  .memset_zero = cpu_memset_zero,      \
  .sync = cpu_sync,                    \
  .reserve = cpu_reserve,              \
  .memory_stats = cpu_memory_stats,    \
  .mem_info = cpu_mem_info,            \
  .cast = kcpu_cast,                   \
  .fill = kcpu_fill,                   \
  .scale = kcpu_scale,                 \
  .add = kcpu_add,                     \
  .axpy = kcpu_axpy,                   \
  .sumsq = kcpu_sumsq,                 \
  .adamw_update = kcpu_adamw_update,   \
  .adamw_update_multi = kcpu_adamw_update_multi, \
  .ema_update = kcpu_ema_update

static kernels_backend cpu_backend = {
    .name = "cpu",
    .act_dtype = KERNELS_F32,
    KCPU_SHARED_ENTRIES,
};

static kernels_backend cpu_bf16_backend = {
    .name = "cpu-bf16",
    .act_dtype = KERNELS_BF16,
    KCPU_SHARED_ENTRIES,
};

// The ACT rows of kernels/entries.h: f32_NAME above in the fp32 table, bf16.c's kbf_NAME in
// the bf16 one. Then an entry a table leaves out (one that lands on the fp32 table first)
// gets the unsupported stub before anything can call it (kernels.h "unsupported entries").
#define KCPU_ROW_ACT(NAME)                \
  cpu_backend.NAME = f32_##NAME;          \
  cpu_bf16_backend.NAME = kbf_##NAME;
#define KCPU_ROW_ANY(NAME)
__attribute__((constructor)) static void fill_tables(void) {
#define KERNELS_ENTRY(RET, NAME, CLASS, ACT, PARAMS, ARGS, BYTES, FLOPS) KCPU_ROW_##ACT(NAME)
#include "kernels/entries.h"
#undef KERNELS_ENTRY
  kernels_fill_unsupported(&cpu_backend);
  kernels_fill_unsupported(&cpu_bf16_backend);
}

const kernels_backend *kernels_cpu(void) { return &cpu_backend; }

const kernels_backend *kernels_cpu_bf16(void) { return &cpu_bf16_backend; }

void kernels_cpu_set_threads(int n) {
  if (n <= 0) return;
  omp_set_num_threads(n);
  kcpu_blas_set_threads(n);
}
