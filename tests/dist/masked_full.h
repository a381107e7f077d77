// tests/dist/masked_full.h — the whole-microbatch reference of the masked CP attention tests
// (test_ring_attention, test_placed_attention): inputs every rank draws alike, and the
// backend's masked entries over all of them, against which each rank's share is checked.
#ifndef TESSERA_TESTS_DIST_MASKED_FULL_H
#define TESSERA_TESTS_DIST_MASKED_FULL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/kernels.h"
#include "rand.h"

typedef struct {
  float *q, *k, *v, *dout;          // (L, H, Dh), uniform in [-1, 1)
  float *out, *lse, *dq, *dk, *dv;  // the masked entries' results; lse: (L, H)
  int32_t *pos;                     // (L, 3): each clip's tokens in frames of 2 x 3, raster order
  float scale;                      // 1 / sqrt(Dh)
} masked_full;

// f for the n clips of cu (C + 1; the longest `longest` tokens) under mask m, with H heads
// of Dh: q, k, v, dout drawn from *rng (token after token, q k v dout each), then kb's
// masked forward and backward.
static void masked_full_make(masked_full *f, const kernels_backend *kb, kernels_mask m,
                             const int32_t *cu, int n, int longest, int H, int Dh,
                             uint64_t *rng) {
  const int L = cu[n];
  const size_t nf = (size_t)L * H * Dh;
  f->q = malloc(nf * 4), f->k = malloc(nf * 4), f->v = malloc(nf * 4), f->dout = malloc(nf * 4);
  f->out = malloc(nf * 4), f->lse = malloc((size_t)L * H * 4), f->dq = malloc(nf * 4);
  f->dk = malloc(nf * 4), f->dv = malloc(nf * 4);
  f->pos = malloc((size_t)L * 3 * 4);
  for (size_t i = 0; i < nf; i++) {
    f->q[i] = (float)(2 * test_urand(rng) - 1);
    f->k[i] = (float)(2 * test_urand(rng) - 1);
    f->v[i] = (float)(2 * test_urand(rng) - 1);
    f->dout[i] = (float)(2 * test_urand(rng) - 1);
  }
  for (int c = 0; c < n; c++)
    for (int i = 0; i < cu[c + 1] - cu[c]; i++) {
      int32_t *ps = f->pos + 3 * (cu[c] + i);
      ps[0] = i / 6, ps[1] = i / 3 % 2, ps[2] = i % 3;
    }
  f->scale = 1.0f / sqrtf((float)Dh);
  CHECK_OK(kb->attention_masked_forward(kb, f->out, f->lse, f->q, f->k, f->v, cu, cu, f->pos,
                                        f->pos, m, n, longest, longest, L, L, H, Dh, f->scale));
  CHECK_OK(kb->attention_masked_backward(kb, f->dq, f->dk, f->dv, f->dout, f->q, f->k, f->v,
                                         f->out, f->lse, cu, f->pos, m, n, longest, L, H, Dh,
                                         f->scale));
}

static void masked_full_free(masked_full *f) {
  free(f->q), free(f->k), free(f->v), free(f->dout), free(f->out), free(f->lse);
  free(f->dq), free(f->dk), free(f->dv), free(f->pos);
}

#endif
