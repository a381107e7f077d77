// Ring attention and Ulysses attention across CP groups of 1, 2 and 4 ranks equal
// single-rank attention: outputs, log-sum-exp and the gradients dq, dk, dv of every rank's
// chunks, for random packed clips whose lengths include ones not divisible by the group
// size and clips shorter than the group (some ranks then hold empty chunks), with 2 and 3
// heads (Ulysses splits heads unevenly, and at 4 ranks some ranks hold no head).
// Reference: the CPU backend's full attention_forward/backward over the whole
// microbatch, computed on every rank. Ring tolerances (relative to the reference's
// largest entry): 1e-5 for out and lse, 1e-4 for gradients — the ring merges partial
// softmaxes and sums gradient contributions in another order (float reassociation).
// Ulysses runs the same entry on whole clips for a subset of heads, so it must equal the
// reference bitwise, blocking (1 chunk) and pipelined over 2 and 3 head chunks (every third
// case has 7 heads, so that a rank holds several: 4 and 3 at 2 ranks, 2, 2, 2 and 1 at 4).
// Hybrid (at 4 ranks: Ulysses over pairs, ring across the two pairs, its own chunking) is
// held to the ring's tolerances, and pipelined must equal its blocking run bitwise. Masked
// ring, Ulysses and hybrid attention (block-causal and window masks) against the masked
// entries over the whole microbatch: Ulysses bitwise, the others at the ring's tolerances.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "masked_full.h"
#include "rand.h"
#include "comm/comm.h"
#include "kernels/kernels.h"
#include "model/dist/ring_attention.h"
#include "model/dist/ulysses_attention.h"

static uint64_t rng_state;  // seeded alike on every rank: the same cases everywhere

// Chunks of a group of k in blocks of u (hybrid_chunk; u = 1: the ring's and Ulysses'
// chunks). Max |a - b| over the rows of this rank's chunks; a: local (Lq, E), b: full (L, E).
static double chunk_err(const float *local, const float *full, const int64_t *lens, int n,
                        const int32_t *cu_full, int k, int u, int p, size_t E) {
  double e = 0;
  size_t row = 0;
  for (int c = 0; c < n; c++) {
    int64_t first, len;
    hybrid_chunk(lens[c], k, u, p, &first, &len);
    for (int64_t i = 0; i < len; i++, row++) {
      const float *f = full + ((size_t)cu_full[c] + (size_t)(first + i)) * E;
      for (size_t j = 0; j < E; j++) e = fmax(e, fabs((double)local[row * E + j] - f[j]));
    }
  }
  return e;
}

// This rank's chunks of full (L, E), packed in clip order into local (Lq, E); returns Lq.
static int64_t gather(float *local, const float *full, const int64_t *lens, int n,
                      const int32_t *cu_full, int k, int u, int p, size_t E) {
  int64_t row = 0;
  for (int c = 0; c < n; c++) {
    int64_t f, l;
    hybrid_chunk(lens[c], k, u, p, &f, &l);
    if (local) memcpy(local + row * E, full + ((size_t)cu_full[c] + (size_t)f) * E, (size_t)l * E * 4);
    row += l;
  }
  return row;
}

// One case's tensors: on the whole microbatch, the inputs q, k, v, dout (L, E) and the
// reference's out, lse (L, H), dq, dk, dv; or this rank's chunks of them (each of lf floats).
typedef struct {
  float *q, *k, *v, *dout, *out, *lse, *dq, *dk, *dv;
} att_set;

static void att_alloc(att_set *s, size_t nf, size_t nlse) {
  s->q = malloc(nf * 4), s->k = malloc(nf * 4), s->v = malloc(nf * 4), s->dout = malloc(nf * 4);
  s->out = malloc(nf * 4), s->lse = malloc(nlse * 4), s->dq = malloc(nf * 4);
  s->dk = malloc(nf * 4), s->dv = malloc(nf * 4);
}

static void att_free(att_set *s) {
  free(s->q), free(s->k), free(s->v), free(s->dout), free(s->out), free(s->lse);
  free(s->dq), free(s->dk), free(s->dv);
}

// The whole microbatch's set for L tokens of H heads of Dh: inputs uniform in [-1, 1).
static void att_random(att_set *s, int L, int H, int Dh) {
  size_t nf = (size_t)L * H * Dh;
  att_alloc(s, nf, (size_t)L * H);
  for (size_t i = 0; i < nf; i++) {
    s->q[i] = (float)(2 * test_urand(&rng_state) - 1);
    s->k[i] = (float)(2 * test_urand(&rng_state) - 1);
    s->v[i] = (float)(2 * test_urand(&rng_state) - 1);
    s->dout[i] = (float)(2 * test_urand(&rng_state) - 1);
  }
}

// *l = this rank's chunks (groups of k, blocks of u) of f's inputs, packed in clip order;
// returns lf, the floats of each of l's tensors.
static size_t att_gather(att_set *l, const att_set *f, const int64_t *lens, int n,
                         const int32_t *cu, int k, int u, int p, size_t E) {
  size_t lf = (size_t)gather(NULL, f->q, lens, n, cu, k, u, p, E) * E + 1;
  att_alloc(l, lf, lf);
  gather(l->q, f->q, lens, n, cu, k, u, p, E), gather(l->k, f->k, lens, n, cu, k, u, p, E);
  gather(l->v, f->v, lens, n, cu, k, u, p, E), gather(l->dout, f->dout, lens, n, cu, k, u, p, E);
  return lf;
}

// e = the errors of l's out, lse, dq, dk, dv against f's on this rank's chunks, relative to
// the reference's largest entry (L tokens, H heads of E / H).
static void att_errors(double e[5], const att_set *l, const att_set *f, const int64_t *lens,
                       int n, const int32_t *cu, int k, int u, int p, size_t E, int H) {
  const int L = cu[n];
  size_t nf = (size_t)L * E;
  e[0] = chunk_err(l->out, f->out, lens, n, cu, k, u, p, E) /
         fmax(test_max_abs(f->out, nf), 1e-30);
  e[1] = chunk_err(l->lse, f->lse, lens, n, cu, k, u, p, H) /
         fmax(test_max_abs(f->lse, (size_t)L * H), 1e-30);
  e[2] = chunk_err(l->dq, f->dq, lens, n, cu, k, u, p, E) / fmax(test_max_abs(f->dq, nf), 1e-30);
  e[3] = chunk_err(l->dk, f->dk, lens, n, cu, k, u, p, E) / fmax(test_max_abs(f->dk, nf), 1e-30);
  e[4] = chunk_err(l->dv, f->dv, lens, n, cu, k, u, p, E) / fmax(test_max_abs(f->dv, nf), 1e-30);
}

// Draws 1 to NMAX clips of lengths from CHOICES[0..nchoices): lens, their offsets cu
// (n + 1) and the longest; returns n.
static int draw_clips(int nmax, const int64_t *choices, int nchoices, int64_t lens[8],
                      int32_t cu[9], int *longest) {
  const int n = 1 + (int)(test_urand(&rng_state) * nmax);
  cu[0] = 0, *longest = 0;
  for (int c = 0; c < n; c++) {
    lens[c] = choices[(int)(test_urand(&rng_state) * nchoices)];
    cu[c + 1] = cu[c] + (int32_t)lens[c];
    if (lens[c] > *longest) *longest = (int)lens[c];
  }
  return n;
}

// Ring attention on group g over l's chunks of the n clips lens (under mask m at the
// positions lpos when m is given): l's out, lse, dq, dk and dv.
static void ring_run(const kernels_backend *kb, comm_group *g, int n, const int64_t *lens,
                     const kernels_mask *m, const int32_t *lpos, att_set *l, int H, int Dh,
                     float scale) {
  ring_attention *ra = NULL;
  CHECK_OK(ring_attention_create(&ra, kb, comm_mpi(), g));
  CHECK_OK(ring_attention_set_clips(ra, n, lens));
  if (m) CHECK_OK(ring_attention_set_mask(ra, *m, lpos));
  CHECK_OK(ring_attention_forward(ra, l->out, l->lse, l->q, l->k, l->v, H, Dh, scale));
  CHECK_OK(ring_attention_backward(ra, l->dq, l->dk, l->dv, l->dout, l->q, l->k, l->v, l->out,
                                   l->lse, H, Dh, scale));
  ring_attention_free(&ra);
}

// Hybrid CP on group g (k >= 4): Ulysses over blocks of 2 ranks, ring over the k/2 blocks;
// the reference f as in one_case, the ring's tolerances.
static void hybrid_case(const kernels_backend *kb, comm_group *g, int ncase, int H,
                        const int64_t *lens, int n, const int32_t *cu, int longest,
                        const att_set *f) {
  const int k = comm_group_size(g), p = comm_group_rank(g), Dh = 8;
  const size_t E = (size_t)H * Dh;
  const int L = cu[n];
  int64_t sup[8], first;
  for (int c = 0; c < n; c++) ring_chunk(lens[c], k / 2, p / 2, &first, &sup[c]);  // super-chunks
  att_set l;
  size_t lf = att_gather(&l, f, lens, n, cu, k, 2, p, E);
  ring_attention *ring = NULL;
  ulysses_attention *ua = NULL;
  CHECK_OK(ring_attention_create(&ring, kb, comm_mpi(), comm_stride_group(k)));
  CHECK_OK(ulysses_attention_create(&ua, kb, comm_mpi(), comm_group_get(2), ring));
  CHECK_OK(ring_attention_set_clips(ring, n, lens));
  CHECK_OK(ulysses_attention_set_clips(ua, n, sup));
  float *res[2][5];  // blocking, pipelined: out, lse, dq, dk, dv
  for (int pipe = 0; pipe < 2; pipe++) {
    ulysses_attention_set_chunks(ua, pipe ? 2 : 1);
    CHECK_OK(ulysses_attention_forward(ua, l.out, l.lse, l.q, l.k, l.v, H, Dh, 1.0f / sqrtf((float)Dh)));
    CHECK_OK(ulysses_attention_backward(ua, l.dq, l.dk, l.dv, l.dout, l.q, l.k, l.v, l.out, l.lse, H,
                                        Dh, 1.0f / sqrtf((float)Dh)));
    float *from[5] = {l.out, l.lse, l.dq, l.dk, l.dv};
    for (int i = 0; i < 5; i++) res[pipe][i] = malloc(lf * 4), memcpy(res[pipe][i], from[i], lf * 4);
  }
  ulysses_attention_free(&ua);
  ring_attention_free(&ring);
  size_t lrows = (size_t)gather(NULL, f->q, lens, n, cu, k, 2, p, E), sizes[5] = {E, H, E, E, E};
  int same = 1;
  for (int i = 0; i < 5; i++) {
    same &= !memcmp(res[0][i], res[1][i], lrows * sizes[i] * 4);
    free(res[0][i]), free(res[1][i]);
  }
  CHECK(same, "hybrid case %d k=%d H=%d rank %d: pipelined over 2 head chunks differs from "
        "blocking (must be bitwise)", ncase, k, H, p);
  double e[5];
  att_errors(e, &l, f, lens, n, cu, k, 2, p, E, H);
  CHECK(e[0] <= 1e-5 && e[1] <= 1e-5 && e[2] <= 1e-4 && e[3] <= 1e-4 && e[4] <= 1e-4,
        "hybrid case %d k=%d H=%d rank %d (%d clips, L=%d, longest %d): out %.2e lse %.2e dq "
        "%.2e dk %.2e dv %.2e", ncase, k, H, p, n, L, longest, e[0], e[1], e[2], e[3], e[4]);
  att_free(&l);
}

static void one_case(const kernels_backend *kb, comm_group *g, int ncase) {
  const int k = comm_group_size(g), p = comm_group_rank(g), Dh = 8;
  const int H = ncase % 3 == 2 ? 7 : 2 + ncase % 2;
  const size_t E = (size_t)H * Dh;
  static const int64_t choices[] = {1, 2, 3, 5, 17, 64, 97, 130};
  int64_t lens[8];
  int32_t cu[9];
  int longest;  // the attention entries' max_len
  const int n = draw_clips(5, choices, 8, lens, cu, &longest);
  const int L = cu[n];
  att_set f, l;
  att_random(&f, L, H, Dh);
  const float scale = 1.0f / sqrtf((float)Dh);
  CHECK_OK(kb->attention_forward(kb, f.out, f.lse, f.q, f.k, f.v, cu, n, longest, L, H, Dh, scale));
  CHECK_OK(kb->attention_backward(kb, f.dq, f.dk, f.dv, f.dout, f.q, f.k, f.v, f.out, f.lse, cu, n,
                                  longest, L, H, Dh, scale));

  // this rank's chunks, packed in clip order
  size_t lf = att_gather(&l, &f, lens, n, cu, k, 1, p, E);
  ring_run(kb, g, n, lens, NULL, NULL, &l, H, Dh, scale);

  double e[5];
  att_errors(e, &l, &f, lens, n, cu, k, 1, p, E, H);
  CHECK(e[0] <= 1e-5 && e[1] <= 1e-5, "case %d k=%d rank %d (%d clips, L=%d): out err %.2e lse err %.2e",
        ncase, k, p, n, L, e[0], e[1]);
  CHECK(e[2] <= 1e-4 && e[3] <= 1e-4 && e[4] <= 1e-4,
        "case %d k=%d rank %d (%d clips, L=%d): dq %.2e dk %.2e dv %.2e", ncase, k, p, n, L, e[2],
        e[3], e[4]);

  ulysses_attention *ua = NULL;
  CHECK_OK(ulysses_attention_create(&ua, kb, comm_mpi(), g, NULL));
  CHECK_OK(ulysses_attention_set_clips(ua, n, lens));
  for (int chunks = 1; chunks <= 3; chunks++) {  // blocking, then pipelined over 2 and 3
    ulysses_attention_set_chunks(ua, chunks);
    memset(l.out, 0, lf * 4), memset(l.lse, 0, lf * 4), memset(l.dq, 0, lf * 4);
    memset(l.dk, 0, lf * 4), memset(l.dv, 0, lf * 4);
    CHECK_OK(ulysses_attention_forward(ua, l.out, l.lse, l.q, l.k, l.v, H, Dh, scale));
    CHECK_OK(ulysses_attention_backward(ua, l.dq, l.dk, l.dv, l.dout, l.q, l.k, l.v, l.out, l.lse, H,
                                        Dh, scale));
    double eo = chunk_err(l.out, f.out, lens, n, cu, k, 1, p, E);
    double el = chunk_err(l.lse, f.lse, lens, n, cu, k, 1, p, H);
    double eq = chunk_err(l.dq, f.dq, lens, n, cu, k, 1, p, E);
    double ek = chunk_err(l.dk, f.dk, lens, n, cu, k, 1, p, E);
    double ev = chunk_err(l.dv, f.dv, lens, n, cu, k, 1, p, E);
    CHECK(eo == 0 && el == 0 && eq == 0 && ek == 0 && ev == 0,
          "Ulysses case %d k=%d H=%d chunks %d rank %d (%d clips, L=%d): out %.2e lse %.2e dq "
          "%.2e dk %.2e dv %.2e (must be bitwise)", ncase, k, H, chunks, p, n, L, eo, el, eq, ek,
          ev);
  }
  ulysses_attention_free(&ua);
  if (k >= 4) hybrid_case(kb, g, ncase, H, lens, n, cu, longest, &f);
  att_free(&f), att_free(&l);
}

// This rank's masked results (out, lse, dq, dk, dv of its chunks in blocks of u) against the
// whole microbatch's (full[5]): the ring's tolerances, or bitwise (exact).
static void masked_check(const char *what, int ncase, const kernels_mask *m, int k, int u,
                         int p, float *const local[5], float *const full[5], const int64_t *lens,
                         int n, const int32_t *cu, int H, size_t E, int exact) {
  const int L = cu[n];
  double e[5];
  for (int i = 0; i < 5; i++) {
    size_t w = i == 1 ? (size_t)H : E;
    e[i] = chunk_err(local[i], full[i], lens, n, cu, k, u, p, w) /
           fmax(test_max_abs(full[i], (size_t)L * w), 1e-30);
  }
  int ok = exact ? e[0] == 0 && e[1] == 0 && e[2] == 0 && e[3] == 0 && e[4] == 0
                 : e[0] <= 1e-5 && e[1] <= 1e-5 && e[2] <= 1e-4 && e[3] <= 1e-4 && e[4] <= 1e-4;
  CHECK(ok, "masked %s case %d (mask %d) k=%d H=%d rank %d (%d clips, L=%d): out %.2e lse %.2e "
        "dq %.2e dk %.2e dv %.2e%s", what, ncase, m->kind, k, H, p, n, L, e[0], e[1], e[2], e[3],
        e[4], exact ? " (must be bitwise)" : "");
}

// Masked ring, Ulysses and (at 4 ranks) hybrid attention (their set_mask): every pair of the
// ring, and the whole clips of Ulysses' head layout, under a block-causal (one chunk of
// frames back) or window mask, against the backend's masked entries over the whole
// microbatch; clips in frames of 2 x 3 tokens, raster order; 2 or 3 heads (Ulysses splits 3
// unevenly, and at 4 ranks some ranks hold none). Ring and hybrid at the ring's tolerances;
// Ulysses runs the masked entry on whole clips for its heads: bitwise, blocking and pipelined.
static void masked_case(const kernels_backend *kb, comm_group *g, int ncase) {
  const int k = comm_group_size(g), p = comm_group_rank(g), Dh = 8, H = 2 + ncase % 3 / 2;
  const size_t E = (size_t)H * Dh;
  const kernels_mask masks[2] = {
      {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 1, .window = 1},
      {.kind = KERNELS_MASK_WINDOW, .wt = 1, .wh = 0, .ww = 1, .tile_t = 1, .tile_h = 1, .tile_w = 2}};
  const kernels_mask m = masks[ncase % 2];
  static const int64_t choices[] = {1, 5, 17, 64, 97, 130};
  int64_t lens[8];
  int32_t cu[9];
  int longest;
  const int n = draw_clips(4, choices, 6, lens, cu, &longest);
  masked_full mf;
  masked_full_make(&mf, kb, m, cu, n, longest, H, Dh, &rng_state);
  const att_set f = {mf.q, mf.k, mf.v, mf.dout, mf.out, mf.lse, mf.dq, mf.dk, mf.dv};
  const float *pos = (const float *)mf.pos;  // int32 positions, gathered as floats' bits
  const float scale = mf.scale;
  float *const full[5] = {f.out, f.lse, f.dq, f.dk, f.dv};
  for (int u = 1; u <= 2; u++) {  // this rank's chunks: the ring's and Ulysses', hybrid's
    if (u == 2 && k < 4) break;
    att_set l;
    size_t lf = att_gather(&l, &f, lens, n, cu, k, u, p, E);
    float *lpos = malloc(lf * 4);
    gather(lpos, pos, lens, n, cu, k, u, p, 3);
    const int32_t *lp = (const int32_t *)lpos;
    float *const local[5] = {l.out, l.lse, l.dq, l.dk, l.dv};
    if (u == 1) {
      ring_run(kb, g, n, lens, &m, lp, &l, H, Dh, scale);
      masked_check("ring", ncase, &m, k, 1, p, local, full, lens, n, cu, H, E, 0);
    }
    ring_attention *inner = NULL;
    int64_t sup[8], first;
    if (u == 2) {  // hybrid: Ulysses over pairs holding super-chunks, the ring across them
      for (int c = 0; c < n; c++) ring_chunk(lens[c], k / 2, p / 2, &first, &sup[c]);
      CHECK_OK(ring_attention_create(&inner, kb, comm_mpi(), comm_stride_group(k)));
      CHECK_OK(ring_attention_set_clips(inner, n, lens));
    }
    ulysses_attention *ua = NULL;
    CHECK_OK(ulysses_attention_create(&ua, kb, comm_mpi(), u == 2 ? comm_group_get(2) : g, inner));
    CHECK_OK(ulysses_attention_set_clips(ua, n, u == 2 ? sup : lens));
    CHECK_OK(ulysses_attention_set_mask(ua, m, lp));
    for (int chunks = 1; chunks <= 2; chunks++) {
      ulysses_attention_set_chunks(ua, chunks);
      CHECK_OK(ulysses_attention_forward(ua, l.out, l.lse, l.q, l.k, l.v, H, Dh, scale));
      CHECK_OK(ulysses_attention_backward(ua, l.dq, l.dk, l.dv, l.dout, l.q, l.k, l.v, l.out,
                                          l.lse, H, Dh, scale));
      masked_check(u == 2 ? "hybrid" : chunks > 1 ? "Ulysses (pipelined)" : "Ulysses", ncase, &m,
                   k, u, p, local, full, lens, n, cu, H, E, u == 1);
    }
    ulysses_attention_free(&ua);
    ring_attention_free(&inner);
    att_free(&l), free(lpos);
  }
  masked_full_free(&mf);
}

int main(int argc, char **argv) {
  if (comm_init(&argc, &argv)) return 1;
  CHECK_OK(comm_groups_init());
  CHECK_OK(comm_stride_groups_init(2));  // hybrid: Ulysses over pairs, ring across them
  const kernels_backend *kb = kernels_cpu();
  for (int k = 1; k <= comm_size() && k <= 4; k *= 2) {
    rng_state = 12345 + (uint64_t)k;  // every rank draws the same cases
    for (int c = 0; c < 12; c++) one_case(kb, comm_group_get(k), c);
    for (int c = 0; c < 6; c++) masked_case(kb, comm_group_get(k), c);
  }
  int rc = check_done();
  comm_finalize();
  return rc;
}
