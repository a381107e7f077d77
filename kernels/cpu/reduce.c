// kernels/cpu/reduce.c — shared argument checks and deterministic reductions.
//
// Reductions split the rows (or elements) into blocks of a FIXED size, sum each block
// sequentially in double, then add the block sums in block order. The result depends
// only on the inputs, never on the number of OpenMP threads or their scheduling.
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

enum { ROW_BLOCK = 512, COL_CHUNK = 64, SUM_BLOCK = 8192 };

tsr_status kcpu_check_cu(const char *op, const char *name, const int32_t *cu, int n_clips, int L) {
  if (n_clips < 0) return err_set(TSR_EINVAL, "%s: n_clips = %d is negative", op, n_clips);
  if (!cu) return err_set(TSR_EINVAL, "%s: %s is NULL", op, name);
  if (cu[0] != 0) return err_set(TSR_EINVAL, "%s: %s[0] = %d, must be 0", op, name, cu[0]);
  for (int c = 0; c < n_clips; c++)
    if (cu[c + 1] < cu[c])
      return err_set(TSR_EINVAL, "%s: %s decreases at clip %d (%d -> %d)", op, name, c, cu[c],
                     cu[c + 1]);
  if (cu[n_clips] != L)
    return err_set(TSR_EINVAL, "%s: %s[%d] = %d but the tensor has %d tokens", op, name, n_clips,
                   cu[n_clips], L);
  return TSR_OK;
}

tsr_status kcpu_colsum(float *out, int accumulate, const float *a, const float *b,
                       const float *rs, const float *bmean, size_t rows, int cols, size_t ld) {
  if (cols <= 0) return TSR_OK;
  size_t nrb = (rows + ROW_BLOCK - 1) / ROW_BLOCK;
  if (nrb == 0) {
    if (!accumulate) memset(out, 0, (size_t)cols * sizeof(float));
    return TSR_OK;
  }
  size_t ncc = ((size_t)cols + COL_CHUNK - 1) / COL_CHUNK;
  double *part = malloc(nrb * (size_t)cols * sizeof(double));
  if (!part) return err_set(TSR_ENOMEM, "column sum: no memory for %zu x %d partial sums", nrb, cols);
  ptrdiff_t items = (ptrdiff_t)(nrb * ncc);
#pragma omp parallel for schedule(static) if (rows * (size_t)cols > KCPU_PAR_MIN)
  for (ptrdiff_t it = 0; it < items; it++) {
    size_t rb = (size_t)it / ncc;
    int c0 = (int)((size_t)it % ncc) * COL_CHUNK;
    int w = cols - c0 < COL_CHUNK ? cols - c0 : COL_CHUNK;
    size_t r0 = rb * ROW_BLOCK, r1 = r0 + ROW_BLOCK < rows ? r0 + ROW_BLOCK : rows;
    double acc[COL_CHUNK] = {0};
    for (size_t r = r0; r < r1; r++) {
      const float *ar = a + r * ld + c0;
      double s = rs && !bmean ? (double)rs[r] : 1.0;
      if (b && bmean) {  // b normalised first, in float: (b - bmean) rs, as LayerNorm stores it
        const float *br = b + r * ld + c0;
        float mu = bmean[r], rr = rs[r];
        for (int j = 0; j < w; j++) {
          float bh = (br[j] - mu) * rr;
          acc[j] += (double)ar[j] * (double)bh * s;
        }
      } else if (b) {
        const float *br = b + r * ld + c0;
        for (int j = 0; j < w; j++) acc[j] += (double)ar[j] * (double)br[j] * s;
      } else {
        for (int j = 0; j < w; j++) acc[j] += (double)ar[j] * s;
      }
    }
    memcpy(part + rb * (size_t)cols + c0, acc, (size_t)w * sizeof(double));
  }
  for (int j = 0; j < cols; j++) {
    double s = accumulate ? (double)out[j] : 0.0;
    for (size_t rb = 0; rb < nrb; rb++) s += part[rb * (size_t)cols + j];
    out[j] = (float)s;
  }
  free(part);
  return TSR_OK;
}

tsr_status kcpu_clip_colsum(float *out, const float *a, const float *b, const float *rs,
                            const float *bmean, int mstride, const int32_t *cu, int n_clips, int D) {
  for (int c = 0; c < n_clips; c++) {
    size_t r0 = (size_t)cu[c], rows = (size_t)(cu[c + 1] - cu[c]);
    tsr_status st = kcpu_colsum(out + (size_t)c * mstride, 0, a + r0 * D, b ? b + r0 * D : NULL,
                                rs ? rs + r0 : NULL, bmean ? bmean + r0 : NULL, rows, D, (size_t)D);
    if (st) return st;
  }
  return TSR_OK;
}

float *kcpu_thread_scratch(const char *op, size_t *per_thread) {
  *per_thread = (*per_thread + 15) / 16 * 16;  // whole 64-byte lines
  size_t n = (size_t)omp_get_max_threads() * (*per_thread ? *per_thread : 16);
  float *p = aligned_alloc(64, n * sizeof(float));
  if (!p) err_set(TSR_ENOMEM, "%s: no memory for %zu floats of per-thread scratch", op, n);
  return p;
}

tsr_status kcpu_sumsq_diff(double *result, const float *a, const float *b, size_t n) {
  size_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
  *result = 0.0;
  if (nb == 0) return TSR_OK;
  double *part = malloc(nb * sizeof(double));
  if (!part) return err_set(TSR_ENOMEM, "sum of squares: no memory for %zu partial sums", nb);
#pragma omp parallel for schedule(static) if (n > KCPU_PAR_MIN)
  for (ptrdiff_t ib = 0; ib < (ptrdiff_t)nb; ib++) {
    size_t i0 = (size_t)ib * SUM_BLOCK, i1 = i0 + SUM_BLOCK < n ? i0 + SUM_BLOCK : n;
    double s = 0.0;
    if (b) {
      for (size_t i = i0; i < i1; i++) {
        double d = (double)a[i] - (double)b[i];
        s += d * d;
      }
    } else {
      for (size_t i = i0; i < i1; i++) s += (double)a[i] * (double)a[i];
    }
    part[ib] = s;
  }
  double s = 0.0;
  for (size_t ib = 0; ib < nb; ib++) s += part[ib];
  free(part);
  *result = s;
  return TSR_OK;
}
