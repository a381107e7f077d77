// kernels/cuda/rmsnorm.cu — RMSNorm, 3D RoPE and their fusion on q and k
// (qk_norm_rope_*), forward and backward (mirrors kernels/cpu/rmsnorm.c, rope.c and the
// QK half of fused.c). RoPE's frequencies come from the host (libm's pow, as on the CPU);
// angles and their cos/sin are computed in double on the device and rounded to float.
// The norm-weight gradients are deterministic column sums (kcu_colsum in reduce.cu, and a
// fixed block order for the fused entry).
#include <math.h>

#include "kernels/check.h"
#include "kernels/cuda/kcu.h"

// ---- RMSNorm -----------------------------------------------------------------------------
__global__ void k_rmsnorm_fwd(act_t *out, float *rstd, const act_t *inp, const float *w, int R, int C,
                              float eps) {
  KCU_WARP_ROW(i, R);
  const act_t *x = inp + (size_t)i * C;
  double ss = 0.0;
  for (int j = lane; j < C; j += 32) {
    double v = kcu_ld(x, j);
    ss += v * v;
  }
  float r = (float)(1.0 / sqrt(kcu_warp_sum(ss) / C + (double)eps));
  for (int j = lane; j < C; j += 32) kcu_st(out, (size_t)i * C + j, kcu_ld(x, j) * r * w[j]);
  if (lane == 0 && rstd) rstd[i] = r;
  KCU_WARP_ROW_END
}

__global__ void k_rmsnorm_bwd(act_t *dinp, const act_t *dout, const act_t *inp, const float *w,
                              const float *rstd, int R, int C) {
  KCU_WARP_ROW(i, R);
  const act_t *x = inp + (size_t)i * C, *g = dout + (size_t)i * C;
  float r = rstd[i];
  double s = 0.0;
  for (int j = lane; j < C; j += 32) s += (double)(w[j] * kcu_ld(g, j)) * (kcu_ld(x, j) * r);
  float m = (float)(kcu_warp_sum(s) / C);
  for (int j = lane; j < C; j += 32)
    kcu_st(dinp, (size_t)i * C + j, r * (w[j] * kcu_ld(g, j) - kcu_ld(x, j) * r * m));
  KCU_WARP_ROW_END
}

static tsr_status cu_rmsnorm_forward(kb_t *kb, void *out, float *rstd, const void *inp,
                                     const float *weight, int R, int C, float eps) {
  const char *op = "rmsnorm_forward";
  tsr_status st = kernels_check_rmsnorm_forward(out, inp, weight, R, C);
  if (st || R == 0) return st;
  k_rmsnorm_fwd<<<kcu_warp_blocks(R), 256, 0, kcu(kb)->stream>>>(
      (act_t *)out, rstd, (const act_t *)inp, weight, R, C, eps);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

static tsr_status cu_rmsnorm_backward(kb_t *kb, void *dinp, float *dweight, const void *dout,
                                      const void *inp, const float *weight, const float *rstd, int R,
                                      int C) {
  const char *op = "rmsnorm_backward";
  tsr_status st = kernels_check_rmsnorm_backward(dinp, dout, inp, weight, rstd, R, C);
  if (st || R == 0 || C == 0) return st;
  if (dinp) {
    k_rmsnorm_bwd<<<kcu_warp_blocks(R), 256, 0, kcu(kb)->stream>>>(
        (act_t *)dinp, (const act_t *)dout, (const act_t *)inp, weight, rstd, R, C);
    KCU_LAUNCHED(op);
  }
  if (dweight)
    return kcu_colsum(kb, op, dweight, NULL, 1, 0, (const act_t *)dout, (const act_t *)inp, rstd, NULL,
                      NULL, 1, R, C, C);
  return TSR_OK;
}

// ---- RoPE --------------------------------------------------------------------------------
enum { ROPE_MAX_PAIRS = 256 };  // Dh <= 512
struct rope_table {
  double freq[ROPE_MAX_PAIRS];  // computed on the host with libm's pow, as the CPU backend
  unsigned char axis[ROPE_MAX_PAIRS];
};

// One thread per (token, pair): angle in double, cos/sin in double rounded to float, applied
// to every head.
__global__ void k_rope(act_t *out, const act_t *inp, const int32_t *pos, int L, int H, int Dh,
                       double sign, const rope_table tab) {
  int P = Dh / 2;
  KCU_GRID_STRIDE(e, (size_t)L * P) {
    int i = (int)(e / P), p = (int)(e % P);
    double ang = (double)pos[(size_t)i * 3 + tab.axis[p]] * tab.freq[p];
    float c = (float)cos(ang), s = (float)(sign * sin(ang));
    for (int h = 0; h < H; h++) {
      size_t o = ((size_t)i * H + h) * Dh + 2 * (size_t)p;
      float a = kcu_ld(inp, o), b = kcu_ld(inp, o + 1);
      kcu_st(out, o, a * c - b * s);
      kcu_st(out, o + 1, a * s + b * c);
    }
  }
}

// The frequency and axis of every pair (kernels.h's split), checking Dh and theta.
static tsr_status rope_make_table(const char *op, int Dh, float theta, rope_table *tab) {
  if (Dh <= 0 || Dh % 2) return err_set(TSR_EINVAL, "%s: head dimension %d must be even and > 0", op, Dh);
  if (Dh / 2 > ROPE_MAX_PAIRS)
    return err_set(TSR_EINVAL, "%s: head dimension %d is above the CUDA backend's %d", op, Dh,
                   2 * ROPE_MAX_PAIRS);
  if (!(theta > 0.0f)) return err_set(TSR_EINVAL, "%s: theta = %g must be > 0", op, (double)theta);
  int dhw = 2 * (Dh / 6), dt = Dh - 2 * dhw, width[3] = {dt, dhw, dhw}, p = 0;
  for (int a = 0; a < 3; a++)
    for (int j = 0; j < width[a] / 2; j++, p++) {
      tab->freq[p] = pow((double)theta, -2.0 * j / width[a]);
      tab->axis[p] = (unsigned char)a;
    }
  return TSR_OK;
}

static tsr_status rope_apply(kb_t *kb, const char *op, void *out, const void *inp, const int32_t *pos,
                             int L, int H, int Dh, float theta, double sign) {
  KCU_DIM(op, L);
  KCU_DIM(op, H);
  rope_table tab;
  tsr_status st = rope_make_table(op, Dh, theta, &tab);
  if (st) return st;
  if (L == 0 || H == 0) return TSR_OK;
  KCU_NEED(op, out);
  KCU_NEED(op, inp);
  KCU_NEED(op, pos);
  size_t n = (size_t)L * (Dh / 2);
  k_rope<<<KCU_GRID(kb, n)>>>((act_t *)out, (const act_t *)inp, pos, L, H, Dh, sign, tab);
  KCU_LAUNCHED(op);
  return TSR_OK;
}
static tsr_status cu_rope_forward(kb_t *kb, void *out, const void *inp, const int32_t *pos, int L,
                                  int H, int Dh, float theta) {
  return rope_apply(kb, "rope_forward", out, inp, pos, L, H, Dh, theta, 1.0);
}
static tsr_status cu_rope_backward(kb_t *kb, void *dinp, const void *dout, const int32_t *pos, int L,
                                   int H, int Dh, float theta) {
  return rope_apply(kb, "rope_backward", dinp, dout, pos, L, H, Dh, theta, -1.0);
}

// ---- fused: QK-norm + RoPE of q and k ---------------------------------------------------
// One warp per (token, head) row of q and of k: lane l owns the rotation pairs
// p = l, l + 32, ... (Dh/2 <= ROPE_MAX_PAIRS, so at most QK_PAIRS each), whose angle it
// computes once for both tensors.
enum { QK_PAIRS = ROPE_MAX_PAIRS / 32, QK_WARPS = 8, QK_MAX_BLOCKS = 1024 };

__device__ __forceinline__ void qk_angle(const int32_t *pos, int i, const rope_table &tab, int p,
                                         double sign, float *c, float *s) {
  double ang = (double)pos[(size_t)i * 3 + tab.axis[p]] * tab.freq[p];
  *c = (float)cos(ang);
  *s = (float)(sign * sin(ang));
}

__global__ void k_qk_norm_rope_fwd(act_t *q_out, act_t *k_out, float *q_rstd, float *k_rstd,
                                   const act_t *q_in, const act_t *k_in, const float *q_w,
                                   const float *k_w, const int32_t *pos, int L, int H, int Dh,
                                   float eps, const rope_table tab) {
  int P = Dh / 2;
  KCU_WARP_ROW(row, L * H);
  int i = row / H;
  size_t base = (size_t)row * Dh;
  float c[QK_PAIRS], s[QK_PAIRS];
#pragma unroll
  for (int t = 0; t < QK_PAIRS; t++)
    if (lane + 32 * t < P) qk_angle(pos, i, tab, lane + 32 * t, 1.0, &c[t], &s[t]);
  for (int which = 0; which < 2; which++) {
    const act_t *x = (which ? k_in : q_in) + base;
    const float *w = which ? k_w : q_w;
    double ss = 0.0;
#pragma unroll
    for (int t = 0; t < QK_PAIRS; t++) {
      int p = lane + 32 * t;
      if (p < P) {
        double a = kcu_ld(x, 2 * p), b = kcu_ld(x, 2 * p + 1);
        ss += a * a + b * b;
      }
    }
    float r = (float)(1.0 / sqrt(kcu_warp_sum(ss) / Dh + (double)eps));
    act_t *o = (which ? k_out : q_out) + base;
#pragma unroll
    for (int t = 0; t < QK_PAIRS; t++) {
      int p = lane + 32 * t;
      if (p < P) {
        float a = kcu_ld(x, 2 * p) * r * w[2 * p], b = kcu_ld(x, 2 * p + 1) * r * w[2 * p + 1];
        kcu_st(o, 2 * p, a * c[t] - b * s[t]);
        kcu_st(o, 2 * p + 1, a * s[t] + b * c[t]);
      }
    }
    if (lane == 0) (which ? k_rstd : q_rstd)[row] = r;
  }
  KCU_WARP_ROW_END
}

// Backward: per row, tmp = R^T dout (in registers, fp32), dx_in = RMSNorm's backward of tmp;
// each lane sums tmp x rstd for its columns over the rows of its warp, the warps of a block
// add theirs in warp order into part[block] (2 Dh doubles: q's, then k's), and
// k_qk_dweight adds the blocks in block order. The grid is a function of the shape only, so
// the sums are bitwise reproducible.
__global__ void k_qk_norm_rope_bwd(act_t *dq_in, act_t *dk_in, double *part, const act_t *dq,
                                   const act_t *dk, const act_t *q_in, const act_t *k_in,
                                   const float *q_w, const float *k_w, const float *q_rstd,
                                   const float *k_rstd, const int32_t *pos, int L, int H, int Dh,
                                   const rope_table tab) {
  extern __shared__ double qk_sh[];  // (2 Dh): the block's column sums
  int P = Dh / 2, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double acc[2][QK_PAIRS][2];
#pragma unroll
  for (int a = 0; a < 2; a++)
#pragma unroll
    for (int t = 0; t < QK_PAIRS; t++) acc[a][t][0] = acc[a][t][1] = 0.0;
  int R = L * H, nw = gridDim.x * QK_WARPS;
  for (int row = blockIdx.x * QK_WARPS + warp; row < R; row += nw) {
    int i = row / H;
    size_t base = (size_t)row * Dh;
    float c[QK_PAIRS], s[QK_PAIRS];
#pragma unroll
    for (int t = 0; t < QK_PAIRS; t++)
      if (lane + 32 * t < P) qk_angle(pos, i, tab, lane + 32 * t, -1.0, &c[t], &s[t]);
    for (int which = 0; which < 2; which++) {
      const act_t *g = (which ? dk : dq) + base, *x = (which ? k_in : q_in) + base;
      const float *w = which ? k_w : q_w;
      float r = (which ? k_rstd : q_rstd)[row];
      float ta[QK_PAIRS], tb[QK_PAIRS];
      double sm = 0.0;
#pragma unroll
      for (int t = 0; t < QK_PAIRS; t++) {
        int p = lane + 32 * t;
        ta[t] = tb[t] = 0.0f;
        if (p < P) {
          float a = kcu_ld(g, 2 * p), b = kcu_ld(g, 2 * p + 1);
          ta[t] = a * c[t] - b * s[t];
          tb[t] = a * s[t] + b * c[t];
          float xa = kcu_ld(x, 2 * p), xb = kcu_ld(x, 2 * p + 1);
          sm += (double)(w[2 * p] * ta[t]) * (xa * r) + (double)(w[2 * p + 1] * tb[t]) * (xb * r);
          acc[which][t][0] += (double)ta[t] * (double)xa * (double)r;
          acc[which][t][1] += (double)tb[t] * (double)xb * (double)r;
        }
      }
      float m = (float)(kcu_warp_sum(sm) / Dh);
      act_t *dx = (which ? dk_in : dq_in) + base;
#pragma unroll
      for (int t = 0; t < QK_PAIRS; t++) {
        int p = lane + 32 * t;
        if (p < P) {
          kcu_st(dx, 2 * p, r * (w[2 * p] * ta[t] - kcu_ld(x, 2 * p) * r * m));
          kcu_st(dx, 2 * p + 1, r * (w[2 * p + 1] * tb[t] - kcu_ld(x, 2 * p + 1) * r * m));
        }
      }
    }
  }
  if (!part) return;
  for (int w = 0; w < QK_WARPS; w++) {  // the block's sum, warp by warp in order
    if (warp == w)
#pragma unroll
      for (int a = 0; a < 2; a++)
#pragma unroll
        for (int t = 0; t < QK_PAIRS; t++) {
          int p = lane + 32 * t;
          if (p < P) {
            double *o = qk_sh + (size_t)a * Dh + 2 * p;
            o[0] = (w ? o[0] : 0.0) + acc[a][t][0];
            o[1] = (w ? o[1] : 0.0) + acc[a][t][1];
          }
        }
    __syncthreads();
  }
  for (int j = threadIdx.x; j < 2 * Dh; j += blockDim.x) part[(size_t)blockIdx.x * 2 * Dh + j] = qk_sh[j];
}

__global__ void k_qk_dweight(float *dq_w, float *dk_w, const double *part, int blocks, int Dh) {
  for (int j = threadIdx.x; j < 2 * Dh; j += blockDim.x) {
    float *o = j < Dh ? dq_w : dk_w;
    if (!o) continue;
    int col = j < Dh ? j : j - Dh;
    double t = (double)o[col];
    for (int b = 0; b < blocks; b++) t += part[(size_t)b * 2 * Dh + j];
    o[col] = (float)t;
  }
}

static unsigned qk_blocks(int rows) {
  long long b = ((long long)rows + QK_WARPS - 1) / QK_WARPS;
  const long long cap = QK_MAX_BLOCKS;
  return (unsigned)(b < 1 ? 1 : (b > cap ? cap : b));
}

static tsr_status cu_qk_norm_rope_forward(kb_t *kb, void *q_out, void *k_out, float *q_rstd,
                                          float *k_rstd, const void *q_in, const void *k_in,
                                          const float *q_weight, const float *k_weight,
                                          const int32_t *pos, int L, int H, int Dh, float eps,
                                          float theta) {
  const char *op = "qk_norm_rope_forward";
  KCU_DIM(op, L);
  KCU_DIM(op, H);
  rope_table tab;
  tsr_status st = rope_make_table(op, Dh, theta, &tab);
  if (st || L == 0 || H == 0) return st;
  KCU_NEED(op, q_out);
  KCU_NEED(op, k_out);
  KCU_NEED(op, q_rstd);
  KCU_NEED(op, k_rstd);
  KCU_NEED(op, q_in);
  KCU_NEED(op, k_in);
  KCU_NEED(op, q_weight);
  KCU_NEED(op, k_weight);
  KCU_NEED(op, pos);
  k_qk_norm_rope_fwd<<<kcu_warp_blocks(L * H), 256, 0, kcu(kb)->stream>>>(
      (act_t *)q_out, (act_t *)k_out, q_rstd, k_rstd, (const act_t *)q_in, (const act_t *)k_in,
      q_weight, k_weight, pos, L, H, Dh, eps, tab);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

static tsr_status cu_qk_norm_rope_backward(kb_t *kb, void *dq_in, void *dk_in, float *dq_weight,
                                           float *dk_weight, const void *dq, const void *dk,
                                           const void *q_in, const void *k_in,
                                           const float *q_weight, const float *k_weight,
                                           const float *q_rstd, const float *k_rstd,
                                           const int32_t *pos, int L, int H, int Dh, float theta) {
  const char *op = "qk_norm_rope_backward";
  KCU_DIM(op, L);
  KCU_DIM(op, H);
  rope_table tab;
  tsr_status st = rope_make_table(op, Dh, theta, &tab);
  if (st || L == 0 || H == 0) return st;
  KCU_NEED(op, dq_in);
  KCU_NEED(op, dk_in);
  KCU_NEED(op, dq);
  KCU_NEED(op, dk);
  KCU_NEED(op, q_in);
  KCU_NEED(op, k_in);
  KCU_NEED(op, q_weight);
  KCU_NEED(op, k_weight);
  KCU_NEED(op, q_rstd);
  KCU_NEED(op, k_rstd);
  KCU_NEED(op, pos);
  unsigned blocks = qk_blocks(L * H);
  double *part = NULL;
  if (dq_weight || dk_weight) {
    void *ws;
    if ((st = kcu_scratch(kb, op, (size_t)blocks * 2 * Dh * sizeof(double), &ws))) return st;
    part = (double *)ws;
  }
  cudaStream_t s = kcu(kb)->stream;
  k_qk_norm_rope_bwd<<<blocks, 32 * QK_WARPS, 2 * (size_t)Dh * sizeof(double), s>>>(
      (act_t *)dq_in, (act_t *)dk_in, part, (const act_t *)dq, (const act_t *)dk,
      (const act_t *)q_in, (const act_t *)k_in, q_weight, k_weight, q_rstd, k_rstd, pos, L, H, Dh,
      tab);
  KCU_LAUNCHED(op);
  if (part) {
    k_qk_dweight<<<1, 256, 0, s>>>(dq_weight, dk_weight, part, (int)blocks, Dh);
    KCU_LAUNCHED(op);
  }
  return TSR_OK;
}

// ---- this file's entries of the table (backend.cu) --------------------------------
void kcu_rmsnorm_entries(kernels_backend *b) {
  b->rmsnorm_forward = cu_rmsnorm_forward;
  b->rmsnorm_backward = cu_rmsnorm_backward;
  b->rope_forward = cu_rope_forward;
  b->rope_backward = cu_rope_backward;
  b->qk_norm_rope_forward = cu_qk_norm_rope_forward;
  b->qk_norm_rope_backward = cu_qk_norm_rope_backward;
}
