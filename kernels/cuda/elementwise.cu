// kernels/cuda/elementwise.cu — the elementwise entries of the CUDA backend (kernels.h):
// cast, fill, scale, add, axpy and their [act] forms, u8_affine, and the activations GELU
// and SiLU with their backwards (mirrors kernels/cpu/elementwise.c, gelu.c, silu.c,
// objective.c's cast). One thread per element (grid-stride), fp32 arithmetic, [act]
// rounded once on store. Also the [act] pieces gemm.cu runs when it has no epilogue
// (kcu_scale_act, kcu_gelu_act, kcu_dgelu_act).
#include <math.h>

#include "kernels/check.h"
#include "kernels/cuda/kcu.h"

__global__ void k_f32_to_bf16(act_t *d, const float *s, size_t n) { KCU_GRID_STRIDE(i, n) kcu_st(d, i, s[i]); }
__global__ void k_bf16_to_f32(float *d, const act_t *s, size_t n) { KCU_GRID_STRIDE(i, n) d[i] = kcu_ld(s, i); }

tsr_status kcu_cast(kb_t *kb, void *dst, kernels_dtype dst_dtype, const void *src,
                          kernels_dtype src_dtype, size_t n) {
  tsr_status st = kernels_check_cast(dst, dst_dtype, src, src_dtype, n);
  if (st || n == 0) return st;
  if (dst_dtype == src_dtype) {
    KCU_CUDA("cast", cudaMemcpyAsync(dst, src, n * kernels_dtype_size(dst_dtype),
                                     cudaMemcpyDeviceToDevice, kcu(kb)->stream));
    return TSR_OK;
  }
  if (dst_dtype == KERNELS_BF16)
    k_f32_to_bf16<<<KCU_GRID(kb, n)>>>((act_t *)dst, (const float *)src, n);
  else
    k_bf16_to_f32<<<KCU_GRID(kb, n)>>>((float *)dst, (const act_t *)src, n);
  KCU_LAUNCHED("cast");
  return TSR_OK;
}

__global__ void k_fill(float *x, float v, size_t n) { KCU_GRID_STRIDE(i, n) x[i] = v; }
__global__ void k_scale(float *x, float a, size_t n) { KCU_GRID_STRIDE(i, n) x[i] *= a; }
__global__ void k_add(float *o, const float *a, const float *b, size_t n) { KCU_GRID_STRIDE(i, n) o[i] = a[i] + b[i]; }
__global__ void k_axpy(float *y, float a, const float *x, size_t n) { KCU_GRID_STRIDE(i, n) y[i] += a * x[i]; }
__global__ void k_add_act(act_t *o, const act_t *a, const act_t *b, size_t n) {
  KCU_GRID_STRIDE(i, n) kcu_st(o, i, kcu_ld(a, i) + kcu_ld(b, i));
}
__global__ void k_axpy_act(act_t *y, float a, const act_t *x, size_t n) {
  KCU_GRID_STRIDE(i, n) kcu_st(y, i, kcu_ld(y, i) + a * kcu_ld(x, i));
}
__global__ void k_scale_act(act_t *y, float a, size_t n) { KCU_GRID_STRIDE(i, n) kcu_st(y, i, a * kcu_ld(y, i)); }
__global__ void k_u8_affine(act_t *o, const uint8_t *in, float a, float b, size_t n) {
  KCU_GRID_STRIDE(i, n) kcu_st(o, i, a * (float)in[i] + b);
}

tsr_status kcu_fill(kb_t *kb, float *x, float value, size_t n) {
  tsr_status st = kernels_check_fill(x, n);
  if (st || !n) return st;
  k_fill<<<KCU_GRID(kb, n)>>>(x, value, n);
  KCU_LAUNCHED("fill");
  return TSR_OK;
}
tsr_status kcu_scale(kb_t *kb, float *x, float alpha, size_t n) {
  tsr_status st = kernels_check_scale(x, n);
  if (st || !n) return st;
  k_scale<<<KCU_GRID(kb, n)>>>(x, alpha, n);
  KCU_LAUNCHED("scale");
  return TSR_OK;
}
tsr_status kcu_add(kb_t *kb, float *out, const float *a, const float *b, size_t n) {
  tsr_status st = kernels_check_add(out, a, b, n);
  if (st || !n) return st;
  k_add<<<KCU_GRID(kb, n)>>>(out, a, b, n);
  KCU_LAUNCHED("add");
  return TSR_OK;
}
tsr_status kcu_axpy(kb_t *kb, float *y, float alpha, const float *x, size_t n) {
  tsr_status st = kernels_check_axpy(y, x, n);
  if (st || !n) return st;
  k_axpy<<<KCU_GRID(kb, n)>>>(y, alpha, x, n);
  KCU_LAUNCHED("axpy");
  return TSR_OK;
}
tsr_status kcu_add_act(kb_t *kb, void *out, const void *a, const void *b, size_t n) {
  tsr_status st = kernels_check_add_act(out, a, b, n);
  if (st || !n) return st;
  k_add_act<<<KCU_GRID(kb, n)>>>((act_t *)out, (const act_t *)a, (const act_t *)b, n);
  KCU_LAUNCHED("add_act");
  return TSR_OK;
}
tsr_status kcu_axpy_act(kb_t *kb, void *y, float alpha, const void *x, size_t n) {
  tsr_status st = kernels_check_axpy_act(y, x, n);
  if (st || !n) return st;
  k_axpy_act<<<KCU_GRID(kb, n)>>>((act_t *)y, alpha, (const act_t *)x, n);
  KCU_LAUNCHED("axpy_act");
  return TSR_OK;
}
// [act] y *= alpha, for gemm with k == 0 (gemm.cu).
extern "C" tsr_status kcu_scale_act(kb_t *kb, void *y, float alpha, size_t n) {
  if (!n) return TSR_OK;
  if (alpha == 0.0f) {
    KCU_CUDA("gemm", cudaMemsetAsync(y, 0, n * sizeof(act_t), kcu(kb)->stream));
    return TSR_OK;
  }
  k_scale_act<<<KCU_GRID(kb, n)>>>((act_t *)y, alpha, n);
  KCU_LAUNCHED("gemm");
  return TSR_OK;
}
tsr_status kcu_u8_affine(kb_t *kb, void *out, const uint8_t *in, float a, float b, size_t n) {
  tsr_status st = kernels_check_u8_affine(out, in, n);
  if (st || !n) return st;
  k_u8_affine<<<KCU_GRID(kb, n)>>>((act_t *)out, in, a, b, n);
  KCU_LAUNCHED("u8_affine");
  return TSR_OK;
}

// ---- GELU, SiLU (libm-accurate tanhf/expf, no fast math) ---------------------------------
#define GELU_K 0.7978845608028654f
#define GELU_C 0.044715f
__global__ void k_gelu_fwd(act_t *out, const act_t *inp, size_t n) {
  KCU_GRID_STRIDE(i, n) {
    float x = kcu_ld(inp, i);
    kcu_st(out, i, 0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_C * x * x * x))));
  }
}
__global__ void k_gelu_bwd(act_t *dinp, const act_t *dout, const act_t *inp, size_t n) {
  KCU_GRID_STRIDE(i, n) {
    float x = kcu_ld(inp, i);
    float th = tanhf(GELU_K * (x + GELU_C * x * x * x));
    float d = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_C * x * x);
    kcu_st(dinp, i, d * kcu_ld(dout, i));
  }
}
__global__ void k_silu_fwd(act_t *out, const act_t *inp, size_t n) {
  KCU_GRID_STRIDE(i, n) {
    float x = kcu_ld(inp, i);
    kcu_st(out, i, x / (1.0f + expf(-x)));
  }
}
__global__ void k_silu_bwd(act_t *dinp, const act_t *dout, const act_t *inp, size_t n) {
  KCU_GRID_STRIDE(i, n) {
    float x = kcu_ld(inp, i), s = 1.0f / (1.0f + expf(-x));
    kcu_st(dinp, i, kcu_ld(dout, i) * s * (1.0f + x * (1.0f - s)));
  }
}

tsr_status kcu_gelu_forward(kb_t *kb, void *out, const void *inp, size_t n) {
  tsr_status st = kernels_check_activation_forward("gelu_forward", out, inp, n);
  if (st || !n) return st;
  k_gelu_fwd<<<KCU_GRID(kb, n)>>>((act_t *)out, (const act_t *)inp, n);
  KCU_LAUNCHED("gelu_forward");
  return TSR_OK;
}
tsr_status kcu_gelu_backward(kb_t *kb, void *dinp, const void *dout, const void *inp, size_t n) {
  tsr_status st = kernels_check_activation_backward("gelu_backward", dinp, dout, inp, n);
  if (st || !n) return st;
  k_gelu_bwd<<<KCU_GRID(kb, n)>>>((act_t *)dinp, (const act_t *)dout, (const act_t *)inp, n);
  KCU_LAUNCHED("gelu_backward");
  return TSR_OK;
}
extern "C" tsr_status kcu_gelu_act(kb_t *kb, const char *op, void *out, const void *pre, size_t n) {
  if (!n) return TSR_OK;
  k_gelu_fwd<<<KCU_GRID(kb, n)>>>((act_t *)out, (const act_t *)pre, n);
  KCU_LAUNCHED(op);
  return TSR_OK;
}
extern "C" tsr_status kcu_dgelu_act(kb_t *kb, const char *op, void *dinp, const void *dout,
                                    const void *pre, size_t n) {
  if (!n) return TSR_OK;
  k_gelu_bwd<<<KCU_GRID(kb, n)>>>((act_t *)dinp, (const act_t *)dout, (const act_t *)pre, n);
  KCU_LAUNCHED(op);
  return TSR_OK;
}
tsr_status kcu_silu_forward(kb_t *kb, void *out, const void *inp, size_t n) {
  tsr_status st = kernels_check_activation_forward("silu_forward", out, inp, n);
  if (st || !n) return st;
  k_silu_fwd<<<KCU_GRID(kb, n)>>>((act_t *)out, (const act_t *)inp, n);
  KCU_LAUNCHED("silu_forward");
  return TSR_OK;
}
tsr_status kcu_silu_backward(kb_t *kb, void *dinp, const void *dout, const void *inp, size_t n) {
  tsr_status st = kernels_check_activation_backward("silu_backward", dinp, dout, inp, n);
  if (st || !n) return st;
  k_silu_bwd<<<KCU_GRID(kb, n)>>>((act_t *)dinp, (const act_t *)dout, (const act_t *)inp, n);
  KCU_LAUNCHED("silu_backward");
  return TSR_OK;
}
