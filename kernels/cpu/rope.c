// kernels/cpu/rope.c — 3D rotary position embedding (time, height, width), Wan 2.1 split.
#include <math.h>
#include <stdlib.h>

#include "kernels/cpu/cpu.h"

// Frequency and position axis (0 = t, 1 = y, 2 = x) of every rotation pair.
// freq: (Dh/2), axis: (Dh/2)
static void rope_table(double *freq, int *axis, int Dh, double theta) {
  int dhw = 2 * (Dh / 6), dt = Dh - 2 * dhw;
  int width[3] = {dt, dhw, dhw};
  int p = 0;
  for (int a = 0; a < 3; a++)
    for (int j = 0; j < width[a] / 2; j++, p++) {
      freq[p] = pow(theta, -2.0 * j / width[a]);
      axis[p] = a;
    }
}

// Rotates every pair of every head by sign * angle(pos). out, inp: (L, H, Dh), pos: (L, 3)
static tsr_status rope_apply(const char *op, float *out, const float *inp, const int32_t *pos,
                             int L, int H, int Dh, float theta, double sign) {
  KCPU_DIM(op, L);
  KCPU_DIM(op, H);
  if (Dh <= 0 || Dh % 2) return err_set(TSR_EINVAL, "%s: head dimension %d must be even and > 0", op, Dh);
  if (!(theta > 0.0f)) return err_set(TSR_EINVAL, "%s: theta = %g must be > 0", op, (double)theta);
  if (L == 0 || H == 0) return TSR_OK;
  KCPU_NEED(op, out);
  KCPU_NEED(op, inp);
  KCPU_NEED(op, pos);
  int P = Dh / 2;
  double *freq = malloc((size_t)P * sizeof(double));
  int *axis = malloc((size_t)P * sizeof(int));
  if (!freq || !axis) {
    free(freq);
    free(axis);
    return err_set(TSR_ENOMEM, "%s: no memory for the frequency table", op);
  }
  rope_table(freq, axis, Dh, theta);
  size_t row = (size_t)H * Dh;
#pragma omp parallel for schedule(static) if ((size_t)L * row > KCPU_PAR_MIN)
  for (int i = 0; i < L; i++) {
    const int32_t *pi = pos + (size_t)i * 3;
    for (int p = 0; p < P; p++) {
      double ang = (double)pi[axis[p]] * freq[p];
      float c = (float)cos(ang), s = (float)(sign * sin(ang));
      for (int h = 0; h < H; h++) {
        size_t o = (size_t)i * row + (size_t)h * Dh + 2 * (size_t)p;
        float a = inp[o], b = inp[o + 1];
        out[o] = a * c - b * s;
        out[o + 1] = a * s + b * c;
      }
    }
  }
  free(freq);
  free(axis);
  return TSR_OK;
}

// out: (L, H, Dh), inp: (L, H, Dh), pos: (L, 3) int32 (t, y, x)
tsr_status kcpu_rope_forward(kb_t *kb, float *out, const float *inp, const int32_t *pos, int L,
                             int H, int Dh, float theta) {
  return rope_apply("rope_forward", out, inp, pos, L, H, Dh, theta, 1.0);
}

// dinp: (L, H, Dh), dout: (L, H, Dh), pos: (L, 3): rotation by -angle (R^T).
tsr_status kcpu_rope_backward(kb_t *kb, float *dinp, const float *dout, const int32_t *pos, int L,
                              int H, int Dh, float theta) {
  return rope_apply("rope_backward", dinp, dout, pos, L, H, Dh, theta, -1.0);
}
