// kernels/cuda/rmsnorm.cu — RMSNorm, 3D RoPE and their fusion on q and k
// (qk_norm_rope_*), forward and backward (mirrors kernels/cpu/rmsnorm.c, rope.c and the
// QK half of fused.c). RoPE's frequencies come from the host (libm's pow, as on the CPU);
// the plain RoPE entries compute angles and their cos/sin in double on the device and
// round them to float; the fused entries read the same values from a table made on the
// host.
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

tsr_status kcu_rmsnorm_forward(kb_t *kb, void *out, float *rstd, const void *inp,
                                     const float *weight, int R, int C, float eps) {
  const char *op = "rmsnorm_forward";
  tsr_status st = kernels_check_rmsnorm_forward(out, inp, weight, R, C);
  if (st || R == 0) return st;
  k_rmsnorm_fwd<<<kcu_warp_blocks(R), 256, 0, kcu(kb)->stream>>>(
      (act_t *)out, rstd, (const act_t *)inp, weight, R, C, eps);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

tsr_status kcu_rmsnorm_backward(kb_t *kb, void *dinp, float *dweight, const void *dout,
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
    return kcu_colsum(kb, op, dweight, (const act_t *)dout, (const act_t *)inp, rstd, R, C);
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

// The frequency and axis of every pair (kernels.h's split), for Dh and theta the entry's
// check passed; checks this backend's own bound on Dh.
static tsr_status rope_make_table(const char *op, int Dh, float theta, rope_table *tab) {
  if (Dh / 2 > ROPE_MAX_PAIRS)
    return err_set(TSR_EINVAL, "%s: head dimension %d is above the CUDA backend's %d", op, Dh,
                   2 * ROPE_MAX_PAIRS);
  int dhw = 2 * (Dh / 6), dt = Dh - 2 * dhw, width[3] = {dt, dhw, dhw}, p = 0;
  for (int a = 0; a < 3; a++)
    for (int j = 0; j < width[a] / 2; j++, p++) {
      tab->freq[p] = pow((double)theta, -2.0 * j / width[a]);
      tab->axis[p] = (unsigned char)a;
    }
  return TSR_OK;
}

// After the entry's check (st).
static tsr_status rope_apply(tsr_status st, kb_t *kb, const char *op, void *out, const void *inp,
                             const int32_t *pos, int L, int H, int Dh, float theta, double sign) {
  rope_table tab;
  if (st || (st = rope_make_table(op, Dh, theta, &tab))) return st;
  if (L == 0 || H == 0) return TSR_OK;
  size_t n = (size_t)L * (Dh / 2);
  k_rope<<<KCU_GRID(kb, n)>>>((act_t *)out, (const act_t *)inp, pos, L, H, Dh, sign, tab);
  KCU_LAUNCHED(op);
  return TSR_OK;
}
tsr_status kcu_rope_forward(kb_t *kb, void *out, const void *inp, const int32_t *pos, int L,
                                  int H, int Dh, float theta) {
  return rope_apply(kernels_check_rope_forward(out, inp, pos, L, H, Dh, theta), kb,
                    "rope_forward", out, inp, pos, L, H, Dh, theta, 1.0);
}
tsr_status kcu_rope_backward(kb_t *kb, void *dinp, const void *dout, const int32_t *pos, int L,
                                   int H, int Dh, float theta) {
  return rope_apply(kernels_check_rope_backward(dinp, dout, pos, L, H, Dh, theta), kb,
                    "rope_backward", dinp, dout, pos, L, H, Dh, theta, -1.0);
}

// ---- fused: QK-norm + RoPE of q and k ---------------------------------------------------
// One warp per token over all its heads of q and k: lane l owns the rotation pairs
// p = l + 32 t (t < T, Dh/2 <= 32 T), whose cos and sin it reads once per token from the
// table below and applies to the 2 H rows. RMSNorm's sum of squares and the backward's row
// sum: fp32 in pair order, then the butterfly.
//
// The table: cos and sin of pos * freq[p] for every position in [0, QK_POS) of every
// pair, computed on the host in double and rounded to float (the CPU backend's values:
// kernels/cpu/rows.h kcpu_rope_trig), (QK_POS, Dh/2) float2, made at the first call for a
// (Dh, theta) and kept. A position outside [0, QK_POS) is reported (the device error word)
// and clamped.
enum { QK_POS = 4096, QK_WARPS = 8, QK_MAX_BLOCKS = 1024 };

struct qk_axes {
  int p1, p2;  // pairs [0, p1) rotate by t, [p1, p2) by y, [p2, Dh/2) by x
};

// This lane's cos and sin of token i for its pairs (sign -1: the inverse rotation).
template <int T>
__device__ __forceinline__ void qk_trig(const float2 *cs, const int32_t *pos, int i, int P,
                                        qk_axes ax, float sign, int lane, int entry,
                                        kcu_dev_error *err, float *c, float *s) {
  int v[3];
  for (int a = 0; a < 3; a++) {
    v[a] = pos[(size_t)i * 3 + a];
    if (v[a] < 0 || v[a] >= QK_POS) {
      if (lane == 0) kcu_report(err, KCU_BAD_IDS, entry, v[a], (long long)i * 3 + a);
      v[a] = v[a] < 0 ? 0 : QK_POS - 1;
    }
  }
#pragma unroll
  for (int t = 0; t < T; t++) {
    int p = lane + 32 * t;
    c[t] = 1.0f, s[t] = 0.0f;
    if (p < P) {
      float2 e = cs[(size_t)v[p < ax.p1 ? 0 : (p < ax.p2 ? 1 : 2)] * P + p];
      c[t] = e.x, s[t] = sign * e.y;
    }
  }
}

template <int T>
__device__ __forceinline__ void qk_fwd_tokens(act_t *q_out, act_t *k_out, float *q_rstd,
                                              float *k_rstd, const act_t *q_in,
                                              const act_t *k_in, const float *q_w,
                                              const float *k_w, const int32_t *pos,
                                              const float2 *cs, qk_axes ax, kcu_dev_error *err,
                                              int L, int H, int Dh, float eps) {
  int P = Dh / 2, lane = threadIdx.x & 31;
  for (int i = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32); i < L;
       i += (int)((size_t)gridDim.x * blockDim.x / 32)) {
    float c[T], s[T];
    qk_trig<T>(cs, pos, i, P, ax, 1.0f, lane, KCU_E_QK_F, err, c, s);
    for (int which = 0; which < 2; which++) {
      const float *w = which ? k_w : q_w;
      for (int h = 0; h < H; h++) {
        size_t row = (size_t)i * H + h, base = row * Dh;
        const act_t *x = (which ? k_in : q_in) + base;
        float ss = 0.0f;
#pragma unroll
        for (int t = 0; t < T; t++) {
          int p = lane + 32 * t;
          if (p < P) {
            float a = kcu_ld(x, 2 * p), b = kcu_ld(x, 2 * p + 1);
            ss += a * a + b * b;
          }
        }
        float r = 1.0f / sqrtf(kcu_warp_sumf(ss) / (float)Dh + eps);
        act_t *o = (which ? k_out : q_out) + base;
#pragma unroll
        for (int t = 0; t < T; t++) {
          int p = lane + 32 * t;
          if (p < P) {
            float a = kcu_ld(x, 2 * p) * r * w[2 * p], b = kcu_ld(x, 2 * p + 1) * r * w[2 * p + 1];
            kcu_st(o, 2 * p, a * c[t] - b * s[t]);
            kcu_st(o, 2 * p + 1, a * s[t] + b * c[t]);
          }
        }
        if (lane == 0) (which ? k_rstd : q_rstd)[row] = r;
      }
    }
  }
}

// Backward: per row, tmp = R^T dout (registers, fp32), dx_in = RMSNorm's backward of tmp;
// each lane sums tmp x rstd for its columns over its warp's rows, the warps of a block add
// theirs in warp order into part[block] (2 Dh fp32: q's, then k's), and k_qk_dweight adds
// the blocks in block order. The grid is a function of the shape only, so the sums are
// bitwise reproducible.
template <int T>
__device__ __forceinline__ void qk_bwd_tokens(act_t *dq_in, act_t *dk_in, float *part,
                                              const act_t *dq, const act_t *dk,
                                              const act_t *q_in, const act_t *k_in,
                                              const float *q_w, const float *k_w,
                                              const float *q_rstd, const float *k_rstd,
                                              const int32_t *pos, const float2 *cs, qk_axes ax,
                                              kcu_dev_error *err, int L, int H, int Dh) {
  extern __shared__ float qk_sh[];  // (2 Dh): the block's column sums
  int P = Dh / 2, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float acc[2][T][2];
#pragma unroll
  for (int t = 0; t < T; t++) acc[0][t][0] = acc[0][t][1] = acc[1][t][0] = acc[1][t][1] = 0.0f;
  for (int i = blockIdx.x * QK_WARPS + warp; i < L; i += gridDim.x * QK_WARPS) {
    float c[T], s[T];
    qk_trig<T>(cs, pos, i, P, ax, -1.0f, lane, KCU_E_QK_B, err, c, s);
#pragma unroll
    for (int which = 0; which < 2; which++) {
      const float *w = which ? k_w : q_w;
      for (int h = 0; h < H; h++) {
        size_t row = (size_t)i * H + h, base = row * Dh;
        const act_t *g = (which ? dk : dq) + base, *x = (which ? k_in : q_in) + base;
        float r = (which ? k_rstd : q_rstd)[row];
        float ta[T], tb[T], sm = 0.0f;
#pragma unroll
        for (int t = 0; t < T; t++) {
          int p = lane + 32 * t;
          ta[t] = tb[t] = 0.0f;
          if (p < P) {
            float a = kcu_ld(g, 2 * p), b = kcu_ld(g, 2 * p + 1);
            ta[t] = a * c[t] - b * s[t];
            tb[t] = a * s[t] + b * c[t];
            float xa = kcu_ld(x, 2 * p), xb = kcu_ld(x, 2 * p + 1);
            sm += (w[2 * p] * ta[t]) * (xa * r) + (w[2 * p + 1] * tb[t]) * (xb * r);
            acc[which][t][0] += ta[t] * xa * r;
            acc[which][t][1] += tb[t] * xb * r;
          }
        }
        float m = kcu_warp_sumf(sm) / (float)Dh;
        act_t *dx = (which ? dk_in : dq_in) + base;
#pragma unroll
        for (int t = 0; t < T; t++) {
          int p = lane + 32 * t;
          if (p < P) {
            kcu_st(dx, 2 * p, r * (w[2 * p] * ta[t] - kcu_ld(x, 2 * p) * r * m));
            kcu_st(dx, 2 * p + 1, r * (w[2 * p + 1] * tb[t] - kcu_ld(x, 2 * p + 1) * r * m));
          }
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
        for (int t = 0; t < T; t++) {
          int p = lane + 32 * t;
          if (p < P) {
            float *o = qk_sh + (size_t)a * Dh + 2 * p;
            o[0] = (w ? o[0] : 0.0f) + acc[a][t][0];
            o[1] = (w ? o[1] : 0.0f) + acc[a][t][1];
          }
        }
    __syncthreads();
  }
  for (int j = threadIdx.x; j < 2 * Dh; j += blockDim.x) part[(size_t)blockIdx.x * 2 * Dh + j] = qk_sh[j];
}

#define QK_FWD_ARGS                                                                          \
  act_t *q_out, act_t *k_out, float *q_rstd, float *k_rstd, const act_t *q_in,               \
      const act_t *k_in, const float *q_w, const float *k_w, const int32_t *pos,             \
      const float2 *cs, qk_axes ax, kcu_dev_error *err, int L, int H, int Dh, float eps
#define QK_FWD_PASS \
  q_out, k_out, q_rstd, k_rstd, q_in, k_in, q_w, k_w, pos, cs, ax, err, L, H, Dh, eps
#define QK_BWD_ARGS                                                                          \
  act_t *dq_in, act_t *dk_in, float *part, const act_t *dq, const act_t *dk,                 \
      const act_t *q_in, const act_t *k_in, const float *q_w, const float *k_w,              \
      const float *q_rstd, const float *k_rstd, const int32_t *pos, const float2 *cs,        \
      qk_axes ax, kcu_dev_error *err, int L, int H, int Dh
#define QK_BWD_PASS \
  dq_in, dk_in, part, dq, dk, q_in, k_in, q_w, k_w, q_rstd, k_rstd, pos, cs, ax, err, L, H, Dh
// T = 1, 2, 4, 8 pairs a lane: Dh <= 64, 128, 256, 512.
__global__ void k_qk_fwd_t1(QK_FWD_ARGS) { qk_fwd_tokens<1>(QK_FWD_PASS); }
__global__ void k_qk_fwd_t2(QK_FWD_ARGS) { qk_fwd_tokens<2>(QK_FWD_PASS); }
__global__ void k_qk_fwd_t4(QK_FWD_ARGS) { qk_fwd_tokens<4>(QK_FWD_PASS); }
__global__ void k_qk_fwd_t8(QK_FWD_ARGS) { qk_fwd_tokens<8>(QK_FWD_PASS); }
__global__ void __launch_bounds__(32 * QK_WARPS) k_qk_bwd_t1(QK_BWD_ARGS) {
  qk_bwd_tokens<1>(QK_BWD_PASS);
}
__global__ void __launch_bounds__(32 * QK_WARPS) k_qk_bwd_t2(QK_BWD_ARGS) {
  qk_bwd_tokens<2>(QK_BWD_PASS);
}
__global__ void __launch_bounds__(32 * QK_WARPS) k_qk_bwd_t4(QK_BWD_ARGS) {
  qk_bwd_tokens<4>(QK_BWD_PASS);
}
__global__ void __launch_bounds__(32 * QK_WARPS) k_qk_bwd_t8(QK_BWD_ARGS) {
  qk_bwd_tokens<8>(QK_BWD_PASS);
}

__global__ void k_qk_dweight(float *dq_w, float *dk_w, const float *part, int blocks, int Dh) {
  for (int j = threadIdx.x; j < 2 * Dh; j += blockDim.x) {
    float *o = j < Dh ? dq_w : dk_w;
    if (!o) continue;
    int col = j < Dh ? j : j - Dh;
    float t = 0.0f;
    for (int b = 0; b < blocks; b++) t += part[(size_t)b * 2 * Dh + j];
    o[col] += t;
  }
}

// The table of (Dh, theta) on the device (made and uploaded at its first use, in the
// backend's own part of the arena like the scratch; not while a graph is recorded: the
// recording then fails and the eager run makes it), and the pairs' axes.
static tsr_status qk_table(kb_t *kb, const char *op, int Dh, float theta, const rope_table *tab,
                           const float2 **cs, qk_axes *ax) {
  int P = Dh / 2, dhw = 2 * (Dh / 6), dt = Dh - 2 * dhw;
  ax->p1 = dt / 2, ax->p2 = dt / 2 + dhw / 2;
  kcu_ctx *x = kcu(kb);
  if (!(x->qk_cs && x->qk_dh == Dh && x->qk_theta == theta)) {
    size_t n = (size_t)QK_POS * P;
    float2 *h = (float2 *)malloc(n * sizeof(float2));
    if (!h) return err_set(TSR_ENOMEM, "%s: no host memory for the RoPE table", op);
    for (int v = 0; v < QK_POS; v++)
      for (int p = 0; p < P; p++) {
        double ang = (double)v * tab->freq[p];
        h[(size_t)v * P + p] = make_float2((float)cos(ang), (float)sin(ang));
      }
    if (x->qk_cs) kcu_own_free(kb, x->qk_cs);
    x->qk_cs = NULL;
    void *d = NULL;
    tsr_status st = kcu_own_upload(kb, op, h, n * sizeof(float2), &d);
    free(h);
    if (st) return st;
    x->qk_cs = d, x->qk_dh = Dh, x->qk_theta = theta;
  }
  *cs = (const float2 *)x->qk_cs;
  return TSR_OK;
}

static int qk_pairs_per_lane(int Dh) {
  int P = Dh / 2;
  return P <= 32 ? 1 : (P <= 64 ? 2 : (P <= 128 ? 4 : 8));
}

static unsigned qk_blocks(int tokens) {
  long long b = ((long long)tokens + QK_WARPS - 1) / QK_WARPS;
  const long long cap = QK_MAX_BLOCKS;
  return (unsigned)(b < 1 ? 1 : (b > cap ? cap : b));
}

tsr_status kcu_qk_norm_rope_forward(kb_t *kb, void *q_out, void *k_out, float *q_rstd,
                                          float *k_rstd, const void *q_in, const void *k_in,
                                          const float *q_weight, const float *k_weight,
                                          const int32_t *pos, int L, int H, int Dh, float eps,
                                          float theta) {
  const char *op = "qk_norm_rope_forward";
  rope_table tab;
  tsr_status st = kernels_check_qk_norm_rope_forward(q_out, k_out, q_rstd, k_rstd, q_in, k_in,
                                                     q_weight, k_weight, pos, L, H, Dh, theta);
  if (!st) st = rope_make_table(op, Dh, theta, &tab);
  if (st || L == 0 || H == 0) return st;
  const float2 *cs;
  qk_axes ax;
  if ((st = qk_table(kb, op, Dh, theta, &tab, &cs, &ax))) return st;
  int T = qk_pairs_per_lane(Dh);
  void (*fn)(QK_FWD_ARGS) =
      T == 1 ? k_qk_fwd_t1 : T == 2 ? k_qk_fwd_t2 : T == 4 ? k_qk_fwd_t4 : k_qk_fwd_t8;
  fn<<<kcu_warp_blocks(L), 256, 0, kcu(kb)->stream>>>(
      (act_t *)q_out, (act_t *)k_out, q_rstd, k_rstd, (const act_t *)q_in, (const act_t *)k_in,
      q_weight, k_weight, pos, cs, ax, kcu(kb)->err, L, H, Dh, eps);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

tsr_status kcu_qk_norm_rope_backward(kb_t *kb, void *dq_in, void *dk_in, float *dq_weight,
                                           float *dk_weight, const void *dq, const void *dk,
                                           const void *q_in, const void *k_in,
                                           const float *q_weight, const float *k_weight,
                                           const float *q_rstd, const float *k_rstd,
                                           const int32_t *pos, int L, int H, int Dh, float theta) {
  const char *op = "qk_norm_rope_backward";
  rope_table tab;
  tsr_status st = kernels_check_qk_norm_rope_backward(dq_in, dk_in, dq, dk, q_in, k_in, q_weight,
                                                      k_weight, q_rstd, k_rstd, pos, L, H, Dh,
                                                      theta);
  if (!st) st = rope_make_table(op, Dh, theta, &tab);
  if (st || L == 0 || H == 0) return st;
  const float2 *cs;
  qk_axes ax;
  if ((st = qk_table(kb, op, Dh, theta, &tab, &cs, &ax))) return st;
  unsigned blocks = qk_blocks(L);
  float *part = NULL;
  if (dq_weight || dk_weight) {
    void *ws;
    if ((st = kcu_scratch(kb, op, (size_t)blocks * 2 * Dh * sizeof(float), &ws))) return st;
    part = (float *)ws;
  }
  cudaStream_t s = kcu(kb)->stream;
  int T = qk_pairs_per_lane(Dh);
  void (*fn)(QK_BWD_ARGS) =
      T == 1 ? k_qk_bwd_t1 : T == 2 ? k_qk_bwd_t2 : T == 4 ? k_qk_bwd_t4 : k_qk_bwd_t8;
  fn<<<blocks, 32 * QK_WARPS, 2 * (size_t)Dh * sizeof(float), s>>>(
      (act_t *)dq_in, (act_t *)dk_in, part, (const act_t *)dq, (const act_t *)dk,
      (const act_t *)q_in, (const act_t *)k_in, q_weight, k_weight, q_rstd, k_rstd, pos, cs, ax,
      kcu(kb)->err, L, H, Dh);
  KCU_LAUNCHED(op);
  if (part) {
    k_qk_dweight<<<1, 256, 0, s>>>(dq_weight, dk_weight, part, (int)blocks, Dh);
    KCU_LAUNCHED(op);
  }
  return TSR_OK;
}
