// kernels/cpu/rope.c — 3D rotary position embedding (time, height, width), Wan 2.1 split
// (row arithmetic: kernels/cpu/rows.h).
#include <math.h>
#include <stdlib.h>

#include <omp.h>

#include "kernels/check.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/rows.h"

tsr_status kcpu_rope_table(const char *op, int Dh, float theta, double **freq, int **axis) {
  *freq = NULL, *axis = NULL;
  int P = Dh / 2;
  double *f = malloc((size_t)P * sizeof(double));
  int *a = malloc((size_t)P * sizeof(int));
  if (!f || !a) {
    free(f);
    free(a);
    return err_set(TSR_ENOMEM, "%s: no memory for the frequency table", op);
  }
  int dhw = 2 * (Dh / 6), dt = Dh - 2 * dhw;
  int width[3] = {dt, dhw, dhw};
  int p = 0;
  for (int g = 0; g < 3; g++)
    for (int j = 0; j < width[g] / 2; j++, p++) {
      f[p] = pow((double)theta, -2.0 * j / width[g]);
      a[p] = g;
    }
  *freq = f, *axis = a;
  return TSR_OK;
}

// Rotates every pair of every head by sign * angle(pos), after the entry's check (st).
// out, inp: (L, H, Dh), pos: (L, 3)
static tsr_status rope_apply(tsr_status st, const char *op, float *out, const float *inp,
                             const int32_t *pos, int L, int H, int Dh, float theta, double sign) {
  if (st || L == 0 || H == 0) return st;
  double *freq;
  int *axis;
  if ((st = kcpu_rope_table(op, Dh, theta, &freq, &axis))) return st;
  int P = Dh / 2;
  size_t per = 2 * (size_t)P;
  float *trig = kcpu_thread_scratch(op, &per);
  if (!trig) {
    st = TSR_ENOMEM;
    goto done;
  }
  size_t row = (size_t)H * Dh;
#pragma omp parallel for schedule(static) if ((size_t)L * row > KCPU_PAR_MIN)
  for (int i = 0; i < L; i++) {
    float *c = trig + (size_t)omp_get_thread_num() * per, *s = c + P;
    kcpu_rope_trig(c, s, pos + (size_t)i * 3, freq, axis, P, sign);
    kcpu_rope_row(out + (size_t)i * row, inp + (size_t)i * row, c, s, H, Dh);
  }
  free(trig);
done:
  free(freq);
  free(axis);
  return st;
}

// out: (L, H, Dh), inp: (L, H, Dh), pos: (L, 3) int32 (t, y, x)
tsr_status kcpu_rope_forward(kb_t *kb, float *out, const float *inp, const int32_t *pos, int L,
                             int H, int Dh, float theta) {
  return rope_apply(kernels_check_rope_forward(out, inp, pos, L, H, Dh, theta), "rope_forward",
                    out, inp, pos, L, H, Dh, theta, 1.0);
}

// dinp: (L, H, Dh), dout: (L, H, Dh), pos: (L, 3): rotation by -angle (R^T).
tsr_status kcpu_rope_backward(kb_t *kb, float *dinp, const float *dout, const int32_t *pos, int L,
                              int H, int Dh, float theta) {
  return rope_apply(kernels_check_rope_backward(dinp, dout, pos, L, H, Dh, theta),
                    "rope_backward", dinp, dout, pos, L, H, Dh, theta, -1.0);
}
