// bench/kernels/attention_mask.c — the CPU backend's masked attention against its full
// attention on one clip, in the same run: forward + backward seconds of each mask, their
// ratio to full attention's, and the mask's area (allowed (query, key) pairs, counted here
// one pair at a time) as a fraction of L^2, the ratio the cost model predicts (docs/plan.md
// "Attention masks"). Usage: bench_attention_mask [T ROWS COLS [REPEATS]] (default a clip
// of 16 frames of 16 x 16 tokens, 4 heads of 64, 3 repeats, the best taken).
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/kernels.h"

enum { H = 4, DH = 64 };

// Seconds of the best of `reps` forward + backward runs under mask m (NULL: the unmasked
// entries). Tensors: (L, H, DH) each; pos: (L, 3).
static double run(const kernels_backend *kb, const kernels_mask *m, int reps, int L,
                  const int32_t *cu, const int32_t *pos, float *const *t) {
  float *q = t[0], *k = t[1], *v = t[2], *dout = t[3], *out = t[4], *dq = t[5], *dk = t[6],
        *dv = t[7], *lse = t[8];
  double best = INFINITY;
  const float sc = 1.0f / sqrtf((float)DH);
  for (int r = 0; r < reps; r++) {
    double t0 = omp_get_wtime();
    tsr_status st =
        m ? kb->attention_masked_forward(kb, out, lse, q, k, v, cu, cu, pos, pos, *m, 1, L, L, L,
                                         L, H, DH, sc)
          : kb->attention_forward(kb, out, lse, q, k, v, cu, 1, L, L, H, DH, sc);
    if (!st)
      st = m ? kb->attention_masked_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, cu, pos, *m,
                                             1, L, L, H, DH, sc)
             : kb->attention_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, cu, 1, L, L, H, DH,
                                      sc);
    if (st) {
      fprintf(stderr, "bench_attention_mask: %s\n", err_msg());
      exit(1);
    }
    double s = omp_get_wtime() - t0;
    if (s < best) best = s;
  }
  return best;
}

// The mask's allowed pairs over L^2, by kernels.h's definition, one pair at a time.
static double area_fraction(const kernels_mask *m, int L, const int32_t *pos) {
  double n = 0;
  for (int i = 0; i < L; i++)
    for (int j = 0; j < L; j++) {
      const int32_t *a = pos + 3 * i, *b = pos + 3 * j;
      if (m->kind == KERNELS_MASK_BLOCK_CAUSAL) {
        int cq = a[0] / m->chunk, ck = b[0] / m->chunk;
        n += ck <= cq && (m->window == 0 || cq - ck <= m->window);
      } else {
        n += abs(a[0] / m->tile_t - b[0] / m->tile_t) <= m->wt &&
             abs(a[1] / m->tile_h - b[1] / m->tile_h) <= m->wh &&
             abs(a[2] / m->tile_w - b[2] / m->tile_w) <= m->ww;
      }
    }
  return n / ((double)L * L);
}

int main(int argc, char **argv) {
  int T = argc > 3 ? atoi(argv[1]) : 16, R = argc > 3 ? atoi(argv[2]) : 16;
  int C = argc > 3 ? atoi(argv[3]) : 16, reps = argc > 4 ? atoi(argv[4]) : 3;
  if (T < 1 || R < 1 || C < 1 || reps < 1 || (double)T * R * C > 1 << 20) {
    fprintf(stderr, "usage: bench_attention_mask [T ROWS COLS [REPEATS]] (at most 2^20 tokens)\n");
    return 2;
  }
  const int L = T * R * C;
  const kernels_backend *kb = kernels_cpu();
  int32_t cu[2] = {0, L}, *pos = malloc(sizeof(int32_t) * 3 * L);
  for (int i = 0; i < L; i++) pos[3 * i] = i / (R * C), pos[3 * i + 1] = i / C % R, pos[3 * i + 2] = i % C;
  float *t[9];
  size_t n = (size_t)L * H * DH;
  uint64_t s = 1;
  for (int a = 0; a < 9; a++) {
    t[a] = malloc(n * sizeof(float));
    for (size_t e = 0; e < n; e++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      t[a][e] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
    }
  }
  const kernels_mask masks[3] = {
      {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 2, .window = 0},
      {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 2, .window = 1},
      {.kind = KERNELS_MASK_WINDOW, .wt = 1, .wh = 1, .ww = 1, .tile_t = 2, .tile_h = 4, .tile_w = 4}};
  const char *names[3] = {"block_causal chunk 2", "block_causal chunk 2, window 1",
                          "window tiles 2x4x4, radii 1"};
  double full = run(kb, NULL, reps, L, cu, pos, t);
  printf("one clip of %d x %d x %d = %d tokens, %d heads of %d, %d threads, best of %d\n", T, R,
         C, L, H, DH, omp_get_max_threads(), reps);
  printf("%-32s %9s %12s %12s\n", "attention (forward + backward)", "seconds", "vs full", "area / L^2");
  printf("%-32s %9.3f %12.3f %12.3f\n", "full (baseline)", full, 1.0, 1.0);
  for (int i = 0; i < 3; i++) {
    double sec = run(kb, &masks[i], reps, L, cu, pos, t);
    printf("%-32s %9.3f %12.3f %12.3f\n", names[i], sec, sec / full,
           area_fraction(&masks[i], L, pos));
  }
  for (int a = 0; a < 9; a++) free(t[a]);
  free(pos);
  return 0;
}
