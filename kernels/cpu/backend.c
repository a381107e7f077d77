// kernels/cpu/backend.c — the CPU backend: host memory entries and the function table.
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

#include <cblas.h>
#include <omp.h>

static tsr_status cpu_alloc(kb_t *kb, void **ptr, size_t bytes) {
  if (!ptr) return err_set(TSR_EINVAL, "alloc: ptr is NULL");
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded < bytes) return err_set(TSR_ENOMEM, "alloc: %zu bytes is too large", bytes);
  void *p = aligned_alloc(64, rounded ? rounded : 64);
  if (!p) return err_set(TSR_ENOMEM, "alloc: no memory for %zu bytes", bytes);
  memset(p, 0, rounded ? rounded : 64);
  *ptr = p;
  return TSR_OK;
}

static void cpu_free(kb_t *kb, void *ptr) { free(ptr); }

static tsr_status cpu_memcpy(const char *op, void *dst, const void *src, size_t bytes) {
  if (bytes == 0) return TSR_OK;
  KCPU_NEED(op, dst);
  KCPU_NEED(op, src);
  memcpy(dst, src, bytes);
  return TSR_OK;
}

static tsr_status cpu_to_device(kb_t *kb, void *dst, const void *src_host, size_t bytes) {
  return cpu_memcpy("to_device", dst, src_host, bytes);
}

static tsr_status cpu_to_host(kb_t *kb, void *dst_host, const void *src, size_t bytes) {
  return cpu_memcpy("to_host", dst_host, src, bytes);
}

static tsr_status cpu_copy(kb_t *kb, void *dst, const void *src, size_t bytes) {
  return cpu_memcpy("copy", dst, src, bytes);
}

static tsr_status cpu_memset_zero(kb_t *kb, void *ptr, size_t bytes) {
  if (bytes == 0) return TSR_OK;
  KCPU_NEED("memset_zero", ptr);
  memset(ptr, 0, bytes);
  return TSR_OK;
}

static tsr_status cpu_sync(kb_t *kb) { return TSR_OK; }

static const kernels_backend cpu_backend = {
    .name = "cpu",
    .ctx = NULL,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .to_device = cpu_to_device,
    .to_host = cpu_to_host,
    .copy = cpu_copy,
    .memset_zero = cpu_memset_zero,
    .sync = cpu_sync,
    .fill = kcpu_fill,
    .scale = kcpu_scale,
    .add = kcpu_add,
    .axpy = kcpu_axpy,
    .u8_affine = kcpu_u8_affine,
    .gemm = kcpu_gemm,
    .linear_forward = kcpu_linear_forward,
    .linear_backward = kcpu_linear_backward,
    .layernorm_forward = kcpu_layernorm_forward,
    .layernorm_backward = kcpu_layernorm_backward,
    .rmsnorm_forward = kcpu_rmsnorm_forward,
    .rmsnorm_backward = kcpu_rmsnorm_backward,
    .modulate_forward = kcpu_modulate_forward,
    .modulate_backward = kcpu_modulate_backward,
    .gate_residual_forward = kcpu_gate_residual_forward,
    .gate_residual_backward = kcpu_gate_residual_backward,
    .rope_forward = kcpu_rope_forward,
    .rope_backward = kcpu_rope_backward,
    .gelu_forward = kcpu_gelu_forward,
    .gelu_backward = kcpu_gelu_backward,
    .silu_forward = kcpu_silu_forward,
    .silu_backward = kcpu_silu_backward,
    .timestep_embedding = kcpu_timestep_embedding,
    .embedding_forward = kcpu_embedding_forward,
    .embedding_backward = kcpu_embedding_backward,
    .attention_forward = kcpu_attention_forward,
    .attention_backward = kcpu_attention_backward,
    .attention_partial_forward = kcpu_attention_partial_forward,
    .attention_merge = kcpu_attention_merge,
    .attention_delta = kcpu_attention_delta,
    .attention_partial_backward = kcpu_attention_partial_backward,
    .mse_forward = kcpu_mse_forward,
    .mse_backward = kcpu_mse_backward,
    .sumsq = kcpu_sumsq,
    .adamw_update = kcpu_adamw_update,
    .ema_update = kcpu_ema_update,
};

const kernels_backend *kernels_cpu(void) { return &cpu_backend; }

void kernels_cpu_set_threads(int n) {
  if (n <= 0) return;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}
