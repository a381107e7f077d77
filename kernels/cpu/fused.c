// kernels/cpu/fused.c — the fused entries of kernels.h on the CPU: each runs the row
// functions of kernels/cpu/rows.h that its composition's entries run, one token at a
// time in a thread's scratch instead of one entry at a time over the whole tensor. The
// tensors are read and written once (not once per entry), one OpenMP region replaces
// several, and RoPE's angles are computed once for q and k — with the composition's
// bits (the rows are the same statements; sums in the same fixed blocks).
#include <stdlib.h>

#include <omp.h>

#include "kernels/check.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/rows.h"

// out: (L, D), mean, rstd: (L), inp: (L, D), shift/scale: (C, mstride), cu: (C + 1)
tsr_status kcpu_layernorm_modulate_forward(kb_t *kb, float *out, float *mean, float *rstd,
                                           const float *inp, const float *shift,
                                           const float *scale, int mstride, const int32_t *cu,
                                           int n_clips, int L, int D, float eps) {
  const char *op = "layernorm_modulate_forward";
  tsr_status st = kernels_check_layernorm_modulate_forward(out, mean, rstd, inp, shift, scale,
                                                           mstride, cu, n_clips, L, D);
  if (!st) st = kcpu_check_cu(op, "cu_seqlens", cu, n_clips, L);
  if (st || L == 0) return st;
  size_t per = (size_t)D;
  float *ln = kcpu_thread_scratch(op, &per);
  if (!ln) return TSR_ENOMEM;
#pragma omp parallel for schedule(static) if ((size_t)L * D > KCPU_PAR_MIN)
  for (int i = 0; i < L; i++) {
    float *x = ln + (size_t)omp_get_thread_num() * per;
    size_t c = (size_t)kcpu_clip_of(cu, n_clips, i) * mstride;
    kcpu_ln_row(x, &mean[i], &rstd[i], inp + (size_t)i * D, D, eps);
    kcpu_mod_row(out + (size_t)i * D, x, shift + c, scale + c, D);
  }
  free(ln);
  return TSR_OK;
}

// dinp: (L, D) accumulated, dshift/dscale: (C, mstride), dout, inp: (L, D), mean, rstd: (L),
// scale: (C, mstride)
tsr_status kcpu_layernorm_modulate_backward(kb_t *kb, float *dinp, float *dshift, float *dscale,
                                            const float *dout, const float *inp,
                                            const float *mean, const float *rstd,
                                            const float *scale, int mstride, const int32_t *cu,
                                            int n_clips, int L, int D) {
  const char *op = "layernorm_modulate_backward";
  tsr_status st = kernels_check_layernorm_modulate_backward(dinp, dscale, dout, inp, mean,
                                                            rstd, scale, mstride, cu, n_clips, L,
                                                            D);
  if (!st) st = kcpu_check_cu(op, "cu_seqlens", cu, n_clips, L);
  if (st || D == 0) return st;
  if (dinp && L > 0) {
    size_t per = 2 * (size_t)D;
    float *tmp = kcpu_thread_scratch(op, &per);
    if (!tmp) return TSR_ENOMEM;
#pragma omp parallel for schedule(static) if ((size_t)L * D > KCPU_PAR_MIN)
    for (int i = 0; i < L; i++) {
      float *gm = tmp + (size_t)omp_get_thread_num() * per, *dx = gm + D;
      const float *sc = scale + (size_t)kcpu_clip_of(cu, n_clips, i) * mstride;
      size_t o = (size_t)i * D;
      kcpu_mod_bwd_row(gm, dout + o, sc, D);                // modulate_backward's dinp
      kcpu_ln_bwd_row(dx, gm, inp + o, mean[i], rstd[i], D);  // layernorm_backward's
      float *y = dinp + o;
      for (int j = 0; j < D; j++) y[j] += dx[j];            // axpy_act(dinp, 1, .)
    }
    free(tmp);
  }
  if (dshift && (st = kcpu_clip_colsum(dshift, dout, NULL, NULL, NULL, mstride, cu, n_clips, D)))
    return st;
  if (dscale && (st = kcpu_clip_colsum(dscale, dout, inp, rstd, mean, mstride, cu, n_clips, D)))
    return st;
  return TSR_OK;
}

// RMSNorm + RoPE of q and k: q_out, k_out: (L, H, Dh), q_rstd, k_rstd: (L*H),
// q_in, k_in: (L, H, Dh), q_weight, k_weight: (Dh), pos: (L, 3)
tsr_status kcpu_qk_norm_rope_forward(kb_t *kb, float *q_out, float *k_out, float *q_rstd,
                                     float *k_rstd, const float *q_in, const float *k_in,
                                     const float *q_weight, const float *k_weight,
                                     const int32_t *pos, int L, int H, int Dh, float eps,
                                     float theta) {
  const char *op = "qk_norm_rope_forward";
  tsr_status st = kernels_check_qk_norm_rope_forward(q_out, k_out, q_rstd, k_rstd, q_in, k_in,
                                                     q_weight, k_weight, pos, L, H, Dh, theta);
  if (st || L == 0 || H == 0) return st;
  double *freq;
  int *axis;
  if ((st = kcpu_rope_table(op, Dh, theta, &freq, &axis))) return st;
  int P = Dh / 2;
  size_t row = (size_t)H * Dh, per = 2 * (size_t)P + row;
  float *scr = kcpu_thread_scratch(op, &per);
  if (!scr) {
    st = TSR_ENOMEM;
    goto done;
  }
#pragma omp parallel for schedule(static) if ((size_t)L * row > KCPU_PAR_MIN / 2)
  for (int i = 0; i < L; i++) {
    float *c = scr + (size_t)omp_get_thread_num() * per, *s = c + P, *y = s + P;
    kcpu_rope_trig(c, s, pos + (size_t)i * 3, freq, axis, P, 1.0);
    for (int t = 0; t < 2; t++) {
      const float *x = (t ? k_in : q_in) + (size_t)i * row, *w = t ? k_weight : q_weight;
      float *rs = (t ? k_rstd : q_rstd) + (size_t)i * H;
      for (int h = 0; h < H; h++) rs[h] = kcpu_rms_row(y + (size_t)h * Dh, x + (size_t)h * Dh, w, Dh, eps);
      kcpu_rope_row((t ? k_out : q_out) + (size_t)i * row, y, c, s, H, Dh);
    }
  }
  free(scr);
done:
  free(freq);
  free(axis);
  return st;
}

// dq_in, dk_in: (L, H, Dh) overwritten, dq_weight, dk_weight: (Dh) accumulated or NULL,
// dq, dk, q_in, k_in: (L, H, Dh), q_weight, k_weight: (Dh), q_rstd, k_rstd: (L*H), pos: (L, 3)
tsr_status kcpu_qk_norm_rope_backward(kb_t *kb, float *dq_in, float *dk_in, float *dq_weight,
                                      float *dk_weight, const float *dq, const float *dk,
                                      const float *q_in, const float *k_in, const float *q_weight,
                                      const float *k_weight, const float *q_rstd,
                                      const float *k_rstd, const int32_t *pos, int L, int H,
                                      int Dh, float theta) {
  const char *op = "qk_norm_rope_backward";
  tsr_status st = kernels_check_qk_norm_rope_backward(dq_in, dk_in, dq, dk, q_in, k_in, q_weight,
                                                      k_weight, q_rstd, k_rstd, pos, L, H, Dh,
                                                      theta);
  if (st || L == 0 || H == 0) return st;
  double *freq;
  int *axis;
  if ((st = kcpu_rope_table(op, Dh, theta, &freq, &axis))) return st;
  int P = Dh / 2, R = L * H;
  size_t row = (size_t)H * Dh;
  size_t per = 2 * (size_t)P;
  float *trig = kcpu_thread_scratch(op, &per);
  if (!trig) {
    st = TSR_ENOMEM;
    goto done;
  }
  // 1. dx_in = R^T dx (rope_backward), kept there as the RMSNorm backward's input
#pragma omp parallel for schedule(static) if ((size_t)L * row > KCPU_PAR_MIN / 2)
  for (int i = 0; i < L; i++) {
    float *c = trig + (size_t)omp_get_thread_num() * per, *s = c + P;
    kcpu_rope_trig(c, s, pos + (size_t)i * 3, freq, axis, P, -1.0);
    kcpu_rope_row(dq_in + (size_t)i * row, dq + (size_t)i * row, c, s, H, Dh);
    kcpu_rope_row(dk_in + (size_t)i * row, dk + (size_t)i * row, c, s, H, Dh);
  }
  free(trig);
  // 2. the weights' gradients from it (rmsnorm_backward's dweight)
  if (dq_weight && (st = kcpu_colsum(dq_weight, 1, dq_in, q_in, q_rstd, NULL, (size_t)R, Dh, (size_t)Dh)))
    goto done;
  if (dk_weight && (st = kcpu_colsum(dk_weight, 1, dk_in, k_in, k_rstd, NULL, (size_t)R, Dh, (size_t)Dh)))
    goto done;
  // 3. dx_in = the RMSNorm backward of it, in place
#pragma omp parallel for schedule(static) if ((size_t)R * Dh > KCPU_PAR_MIN / 2)
  for (int r = 0; r < R; r++) {
    size_t o = (size_t)r * Dh;
    kcpu_rms_bwd_row(dq_in + o, dq_in + o, q_in + o, q_weight, q_rstd[r], Dh);
    kcpu_rms_bwd_row(dk_in + o, dk_in + o, k_in + o, k_weight, k_rstd[r], Dh);
  }
done:
  free(freq);
  free(axis);
  return st;
}

// pre, out: (M, N) = inp (M, K) w (K, N) + bias (N), then GELU
tsr_status kcpu_linear_gelu_forward(kb_t *kb, float *out, float *pre, const float *inp,
                                    const float *w, const float *bias, int M, int K, int N) {
  tsr_status st = kernels_check_linear_gelu_forward(out, pre, inp, w, M, K, N);
  if (st) return st;
  st = kcpu_linear_forward(kb, pre, inp, w, bias, M, K, N);
  return st ? st : kcpu_gelu_forward(kb, out, pre, (size_t)M * N);
}

// dpre: (M, K) = gelu'(pre) (dout w^T); dw: (K, N) += inp^T dout; dbias: (N) += colsum(dout)
tsr_status kcpu_linear_backward_dgelu(kb_t *kb, float *dpre, float *dw, float *dbias,
                                      const float *dout, const float *inp, const float *w,
                                      const float *pre, int M, int K, int N) {
  tsr_status st = kernels_check_linear_backward_dgelu(dpre, dw, dout, inp, w, pre, M, K, N);
  if (st) return st;
  st = kcpu_linear_backward(kb, dpre, dw, dbias, dout, inp, w, M, K, N);
  if (st || !dpre) return st;
  return kcpu_gelu_backward(kb, dpre, dpre, pre, (size_t)M * K);
}
