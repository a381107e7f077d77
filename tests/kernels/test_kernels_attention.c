// CPU attention over packed variable-length clips: forward (out, lse) against a naive
// softmax in double; backward against central differences of that reference (small case)
// and against the analytic double backward (tiles crossed); packing invariance (bitwise);
// ring-attention partials: partial forward + merge == full, partial backward == full; the
// bound max_len of the clips' lengths (kernels.h): a larger one changes nothing, a smaller
// one is an error naming the clip.
// Tolerances, relative to the reference's max-norm: forward 1e-5 (fp32 dot products of
// Dh <= 32 terms and fp32 exp), lse 1e-5 absolute, backward 1e-4 (fp32 accumulation over
// up to 130 keys), merge/partial vs full 1e-5 (different fp32 summation order only).
#include <omp.h>

#include "kt.h"

static const kernels_backend *kb;

typedef struct {
  int n_clips, L, H, Dh;
  const int32_t *cu;
  double scale;
  double *lse;  // (L, H) written by the reference when non-NULL
} att_ctx;

// in: q, k, v (L, H, Dh); out (L, H, Dh)
static void att_ref(void *vc, double *const *in, double *out) {
  att_ctx *c = vc;
  int H = c->H, Dh = c->Dh;
  double *s = malloc((size_t)c->L * sizeof(double));
  for (int cl = 0; cl < c->n_clips; cl++)
    for (int h = 0; h < H; h++)
      for (int i = c->cu[cl]; i < c->cu[cl + 1]; i++) {
        const double *qi = in[0] + ((size_t)i * H + h) * Dh;
        double mx = -INFINITY, sum = 0;
        for (int j = c->cu[cl]; j < c->cu[cl + 1]; j++) {
          const double *kj = in[1] + ((size_t)j * H + h) * Dh;
          double d = 0;
          for (int e = 0; e < Dh; e++) d += qi[e] * kj[e];
          s[j] = d * c->scale;
          mx = fmax(mx, s[j]);
        }
        for (int j = c->cu[cl]; j < c->cu[cl + 1]; j++) sum += (s[j] = exp(s[j] - mx));
        double *o = out + ((size_t)i * H + h) * Dh;
        for (int e = 0; e < Dh; e++) o[e] = 0;
        for (int j = c->cu[cl]; j < c->cu[cl + 1]; j++)
          for (int e = 0; e < Dh; e++) o[e] += s[j] / sum * in[2][((size_t)j * H + h) * Dh + e];
        if (c->lse) c->lse[(size_t)i * H + h] = mx + log(sum);
      }
  free(s);
}

// Analytic backward in double: g (L, H, Dh) -> dq, dk, dv (L, H, Dh).
static void att_ref_backward(att_ctx *c, double *const *in, const double *g, double *dq,
                             double *dk, double *dv) {
  int H = c->H, Dh = c->Dh;
  size_t n = (size_t)c->L * H * Dh;
  memset(dq, 0, n * sizeof(double));
  memset(dk, 0, n * sizeof(double));
  memset(dv, 0, n * sizeof(double));
  double *p = malloc((size_t)c->L * sizeof(double)), *dp = malloc((size_t)c->L * sizeof(double));
  for (int cl = 0; cl < c->n_clips; cl++)
    for (int h = 0; h < H; h++)
      for (int i = c->cu[cl]; i < c->cu[cl + 1]; i++) {
        size_t oi = ((size_t)i * H + h) * Dh;
        double mx = -INFINITY, sum = 0, delta = 0;
        for (int j = c->cu[cl]; j < c->cu[cl + 1]; j++) {
          double d = 0;
          for (int e = 0; e < Dh; e++) d += in[0][oi + e] * in[1][((size_t)j * H + h) * Dh + e];
          p[j] = d * c->scale;
          mx = fmax(mx, p[j]);
        }
        for (int j = c->cu[cl]; j < c->cu[cl + 1]; j++) sum += (p[j] = exp(p[j] - mx));
        for (int j = c->cu[cl]; j < c->cu[cl + 1]; j++) {
          p[j] /= sum;
          double d = 0;
          for (int e = 0; e < Dh; e++) d += g[oi + e] * in[2][((size_t)j * H + h) * Dh + e];
          dp[j] = d;
          delta += p[j] * d;
        }
        for (int j = c->cu[cl]; j < c->cu[cl + 1]; j++) {
          size_t oj = ((size_t)j * H + h) * Dh;
          double ds = p[j] * (dp[j] - delta) * c->scale;
          for (int e = 0; e < Dh; e++) {
            dq[oi + e] += ds * in[1][oj + e];
            dk[oj + e] += ds * in[0][oi + e];
            dv[oj + e] += p[j] * g[oi + e];
          }
        }
      }
  free(p), free(dp);
}

typedef struct {
  int n_clips, H, Dh, L;
  int max_len;  // the longest clip
  int32_t cu[16];
  size_t n;  // L * H * Dh
  float *q, *k, *v, *out, *lse, *dout;
} att_case;

static void case_init(att_case *a, const int *lens, int n_clips, int H, int Dh) {
  memset(a, 0, sizeof *a);
  a->n_clips = n_clips, a->H = H, a->Dh = Dh;
  for (int c = 0; c < n_clips; c++) {
    a->cu[c + 1] = a->cu[c] + lens[c];
    if (lens[c] > a->max_len) a->max_len = lens[c];
  }
  a->L = a->cu[n_clips];
  a->n = (size_t)a->L * H * Dh;
  a->q = kt_rand(a->n, -1.5, 1.5), a->k = kt_rand(a->n, -1.5, 1.5), a->v = kt_rand(a->n, -1, 1);
  a->dout = kt_rand(a->n, -1, 1);
  a->out = kt_zeros(a->n), a->lse = kt_zeros((size_t)a->L * H);
}

static void case_free(att_case *a) {
  free(a->q), free(a->k), free(a->v), free(a->out), free(a->lse), free(a->dout);
}

// Forward vs reference (out, lse) and backward vs FD (fd = 1) or the analytic reference.
static void check_case(const char *name, const int *lens, int n_clips, int H, int Dh, int fd) {
  att_case a;
  case_init(&a, lens, n_clips, H, Dh);
  float scale = 1.0f / sqrtf((float)Dh);
  size_t rows = (size_t)a.L * H;
  CHECK_OK(kb->attention_forward(kb, a.out, a.lse, a.q, a.k, a.v, a.cu, n_clips, a.max_len, a.L, H,
                                 Dh, scale));
  double *in[3] = {kt_dbl(a.q, a.n), kt_dbl(a.k, a.n), kt_dbl(a.v, a.n)};
  double *ref = malloc(a.n * sizeof(double)), *rlse = malloc(rows * sizeof(double));
  att_ctx c = {n_clips, a.L, H, Dh, a.cu, scale, rlse};
  att_ref(&c, in, ref);
  double e = kt_relerr(a.out, ref, a.n, 1e-6), el = 0;
  for (size_t r = 0; r < rows; r++) el = fmax(el, fabs(a.lse[r] - rlse[r]));
  CHECK(e < 1e-5, "%s: forward err %.3g", name, e);
  CHECK(el < 1e-5, "%s: lse err %.3g", name, el);
  float *dq = kt_rand(a.n, 5, 6), *dk = kt_rand(a.n, 5, 6), *dv = kt_rand(a.n, 5, 6);  // overwritten
  CHECK_OK(kb->attention_backward(kb, dq, dk, dv, a.dout, a.q, a.k, a.v, a.out, a.lse, a.cu, n_clips,
                                  a.max_len, a.L, H, Dh, scale));
  double *w = kt_dbl(a.dout, a.n);
  c.lse = NULL;
  if (fd) {
    double e0 = kt_fd_err(att_ref, &c, in, 0, a.n, a.n, w, dq);
    double e1 = kt_fd_err(att_ref, &c, in, 1, a.n, a.n, w, dk);
    double e2 = kt_fd_err(att_ref, &c, in, 2, a.n, a.n, w, dv);
    CHECK(e0 < 1e-4 && e1 < 1e-4 && e2 < 1e-4, "%s: backward FD errs dq %.3g dk %.3g dv %.3g", name, e0, e1, e2);
  } else {
    double *rq = malloc(a.n * sizeof(double)), *rk = malloc(a.n * sizeof(double)), *rv = malloc(a.n * sizeof(double));
    att_ref_backward(&c, in, w, rq, rk, rv);
    double e0 = kt_relerr(dq, rq, a.n, 1e-6), e1 = kt_relerr(dk, rk, a.n, 1e-6), e2 = kt_relerr(dv, rv, a.n, 1e-6);
    CHECK(e0 < 1e-4 && e1 < 1e-4 && e2 < 1e-4, "%s: backward vs double errs dq %.3g dk %.3g dv %.3g", name, e0, e1, e2);
    free(rq), free(rk), free(rv);
  }
  free(dq), free(dk), free(dv), free(ref), free(rlse), free(w);
  for (int i = 0; i < 3; i++) free(in[i]);
  case_free(&a);
}

// Each clip computed alone (n_clips = 1 on its slice) equals the packed result bitwise.
static void test_packing(void) {
  int lens[5] = {1, 70, 2, 129, 1};
  att_case a;
  case_init(&a, lens, 5, 2, 16);
  float scale = 0.25f;
  int H = a.H, Dh = a.Dh;
  float *dq = kt_zeros(a.n), *dk = kt_zeros(a.n), *dv = kt_zeros(a.n);
  CHECK_OK(kb->attention_forward(kb, a.out, a.lse, a.q, a.k, a.v, a.cu, 5, a.max_len, a.L, H, Dh, scale));
  CHECK_OK(kb->attention_backward(kb, dq, dk, dv, a.dout, a.q, a.k, a.v, a.out, a.lse, a.cu, 5, a.max_len,
                                  a.L, H, Dh, scale));
  int same = 1;
  for (int c = 0; c < 5; c++) {
    size_t o = (size_t)a.cu[c] * H * Dh, m = (size_t)lens[c] * H * Dh, ol = (size_t)a.cu[c] * H;
    int32_t cu1[2] = {0, lens[c]};
    float *out = kt_zeros(m), *lse = kt_zeros((size_t)lens[c] * H), *gq = kt_zeros(m), *gk = kt_zeros(m), *gv = kt_zeros(m);
    CHECK_OK(kb->attention_forward(kb, out, lse, a.q + o, a.k + o, a.v + o, cu1, 1, lens[c], lens[c], H, Dh,
                                   scale));
    CHECK_OK(kb->attention_backward(kb, gq, gk, gv, a.dout + o, a.q + o, a.k + o, a.v + o, out, lse, cu1, 1,
                                    lens[c], lens[c], H, Dh, scale));
    same &= !memcmp(out, a.out + o, m * sizeof(float)) && !memcmp(lse, a.lse + ol, (size_t)lens[c] * H * sizeof(float));
    same &= !memcmp(gq, dq + o, m * sizeof(float)) && !memcmp(gk, dk + o, m * sizeof(float)) &&
            !memcmp(gv, dv + o, m * sizeof(float));
    free(out), free(lse), free(gq), free(gk), free(gv);
  }
  CHECK(same, "packed clips == each clip alone (bitwise, forward and backward)");
  free(dq), free(dk), free(dv);
  case_free(&a);
}

// Ring attention: the keys of every clip split into NB blocks (some empty); partial
// forwards merged == full forward; partial backwards with the final lse/delta == full.
#define NB 3
static void test_partial(void) {
  int lens[4] = {1, 100, 7, 66};
  att_case a;
  case_init(&a, lens, 4, 2, 8);
  int H = a.H, Dh = a.Dh, C = 4;
  size_t row = (size_t)H * Dh, rows = (size_t)a.L * H;
  float scale = 1.0f / sqrtf(8.0f);
  // block b of clip c = keys [cut[c][b], cut[c][b+1]) of the clip
  int cut[4][NB + 1] = {{0, 0, 1, 1}, {0, 40, 41, 100}, {0, 3, 7, 7}, {0, 64, 65, 66}};
  int32_t cuk[NB][5];
  float *kb_[NB], *vb_[NB], *ob[NB], *lb[NB];
  int Lk[NB], mk[NB];  // block b's keys, and the most of one clip
  for (int b = 0; b < NB; b++) {
    cuk[b][0] = 0, mk[b] = 0;
    for (int c = 0; c < C; c++) {
      cuk[b][c + 1] = cuk[b][c] + cut[c][b + 1] - cut[c][b];
      if (cut[c][b + 1] - cut[c][b] > mk[b]) mk[b] = cut[c][b + 1] - cut[c][b];
    }
    Lk[b] = cuk[b][C];
    kb_[b] = kt_zeros(Lk[b] * row), vb_[b] = kt_zeros(Lk[b] * row);
    for (int c = 0; c < C; c++) {
      size_t src = (size_t)(a.cu[c] + cut[c][b]) * row, dst = (size_t)cuk[b][c] * row;
      size_t m = (size_t)(cut[c][b + 1] - cut[c][b]) * row;
      memcpy(kb_[b] + dst, a.k + src, m * sizeof(float));
      memcpy(vb_[b] + dst, a.v + src, m * sizeof(float));
    }
    ob[b] = kt_zeros(a.n), lb[b] = kt_zeros(rows);
    CHECK_OK(kb->attention_partial_forward(kb, ob[b], lb[b], a.q, kb_[b], vb_[b], a.cu, cuk[b], C,
                                           a.max_len, mk[b], a.L, Lk[b], H, Dh, scale));
  }
  CHECK(lb[0][0] == -INFINITY && ob[0][0] == 0.0f, "clip without keys in a block: lse -inf, out 0");
  CHECK_OK(kb->attention_forward(kb, a.out, a.lse, a.q, a.k, a.v, a.cu, C, a.max_len, a.L, H, Dh, scale));
  double *full = kt_dbl(a.out, a.n), *full_lse = kt_dbl(a.lse, rows);
  // merge in order 0,1,2 and in order 2,0,1
  for (int order = 0; order < 2; order++) {
    int seq[2][NB] = {{0, 1, 2}, {2, 0, 1}};
    float *acc = kt_zeros(a.n), *lacc = kt_zeros(rows);
    memcpy(acc, ob[seq[order][0]], a.n * sizeof(float));
    memcpy(lacc, lb[seq[order][0]], rows * sizeof(float));
    for (int i = 1; i < NB; i++)
      CHECK_OK(kb->attention_merge(kb, acc, lacc, ob[seq[order][i]], lb[seq[order][i]], a.L, H, Dh));
    double e = kt_relerr(acc, full, a.n, 1e-6), el = 0;
    for (size_t r = 0; r < rows; r++) el = fmax(el, fabs(lacc[r] - full_lse[r]));
    CHECK(e < 1e-5 && el < 1e-5, "merge order %d == full: out err %.3g, lse err %.3g", order, e, el);
    free(acc), free(lacc);
  }
  // backward
  float *dq = kt_zeros(a.n), *dk = kt_zeros(a.n), *dv = kt_zeros(a.n), *delta = kt_zeros(rows);
  CHECK_OK(kb->attention_backward(kb, dq, dk, dv, a.dout, a.q, a.k, a.v, a.out, a.lse, a.cu, C, a.max_len,
                                  a.L, H, Dh, scale));
  CHECK_OK(kb->attention_delta(kb, delta, a.dout, a.out, a.L, H, Dh));
  float *pq = kt_zeros(a.n), *pk = kt_zeros(a.n), *pv = kt_zeros(a.n);
  for (int b = 0; b < NB; b++) {
    float *gk = kt_zeros(Lk[b] * row), *gv = kt_zeros(Lk[b] * row);
    CHECK_OK(kb->attention_partial_backward(kb, pq, gk, gv, a.dout, a.q, kb_[b], vb_[b], a.out, a.lse,
                                            delta, a.cu, cuk[b], C, a.max_len, mk[b], a.L, Lk[b], H,
                                            Dh, scale));
    for (int c = 0; c < C; c++) {  // scatter the block's dk, dv back to the owner's rows
      size_t dst = (size_t)(a.cu[c] + cut[c][b]) * row, src = (size_t)cuk[b][c] * row;
      size_t m = (size_t)(cut[c][b + 1] - cut[c][b]) * row;
      memcpy(pk + dst, gk + src, m * sizeof(float));
      memcpy(pv + dst, gv + src, m * sizeof(float));
    }
    free(gk), free(gv);
  }
  double e0 = kt_relerr_ff(pq, dq, a.n, 1e-6), e1 = kt_relerr_ff(pk, dk, a.n, 1e-6), e2 = kt_relerr_ff(pv, dv, a.n, 1e-6);
  CHECK(e0 < 1e-5 && e1 < 1e-5 && e2 < 1e-5, "partial backward == full: dq %.3g dk %.3g dv %.3g", e0, e1, e2);
  for (int b = 0; b < NB; b++) free(kb_[b]), free(vb_[b]), free(ob[b]), free(lb[b]);
  free(full), free(full_lse), free(dq), free(dk), free(dv), free(delta), free(pq), free(pk), free(pv);
  case_free(&a);
}

// Forward and backward bitwise equal with 1 thread and with several. 9 (clip, head) items:
// with 1 and 2 threads the backward runs one item per (clip, head) (their longest-first
// makespan is within 1.5x of an even share), with 8 threads the two passes of tiles (the
// largest item alone is above it; kernels/cpu/attention.c clip_items): the same bits
// either way.
static void test_threads(void) {
  int lens[3] = {100, 1, 150};
  att_case a;
  case_init(&a, lens, 3, 3, 16);
  float *r[3][5];
  int nt = omp_get_max_threads(), threads[3] = {1, nt > 1 ? nt : 2, 8};
  for (int run = 0; run < 3; run++) {
    omp_set_num_threads(threads[run]);
    for (int i = 0; i < 3; i++) r[run][i] = kt_zeros(a.n);
    r[run][3] = kt_zeros(a.n), r[run][4] = kt_zeros((size_t)a.L * 3);
    CHECK_OK(kb->attention_forward(kb, r[run][3], r[run][4], a.q, a.k, a.v, a.cu, 3, a.max_len, a.L, 3, 16,
                                   0.25f));
    CHECK_OK(kb->attention_backward(kb, r[run][0], r[run][1], r[run][2], a.dout, a.q, a.k, a.v, r[run][3],
                                    r[run][4], a.cu, 3, a.max_len, a.L, 3, 16, 0.25f));
  }
  omp_set_num_threads(nt);
  for (int run = 1; run < 3; run++) {
    int same = !memcmp(r[0][4], r[run][4], (size_t)a.L * 3 * sizeof(float));
    for (int i = 0; i < 4; i++) same &= !memcmp(r[0][i], r[run][i], a.n * sizeof(float));
    CHECK(same, "attention bitwise equal with 1 and %d threads", threads[run]);
  }
  for (int run = 0; run < 3; run++)
    for (int i = 0; i < 5; i++) free(r[run][i]);
  case_free(&a);
}

static void test_errors(void) {
  float x[16] = {0};
  int32_t cu[3] = {0, 2, 1};
  CHECK(kb->attention_forward(kb, x, x, x, x, x, cu, 2, 2, 1, 1, 4, 0.5f) == TSR_EINVAL, "bad cu_seqlens");
  int32_t cu2[2] = {0, 2};
  CHECK(kb->attention_forward(kb, x, x, x, x, x, cu2, 1, 2, 2, 1, 0, 0.5f) == TSR_EINVAL, "Dh = 0");
  CHECK(kb->attention_forward(kb, x, NULL, x, x, x, cu2, 1, 2, 2, 1, 4, 0.5f) == TSR_EINVAL, "NULL lse");
}

// max_len bounds every clip: a looser bound gives bitwise the same results, a bound below
// the longest clip (or a negative one) is TSR_EINVAL naming the clip, on every entry.
static void test_bound(void) {
  int lens[3] = {5, 0, 9};
  att_case a;
  case_init(&a, lens, 3, 2, 8);
  int H = a.H, Dh = a.Dh;
  size_t rows = (size_t)a.L * H;
  float *out2 = kt_zeros(a.n), *lse2 = kt_zeros(rows), *delta = kt_zeros(rows);
  float *g[3], *g2[3];
  for (int i = 0; i < 3; i++) g[i] = kt_zeros(a.n), g2[i] = kt_zeros(a.n);
  CHECK_OK(kb->attention_forward(kb, a.out, a.lse, a.q, a.k, a.v, a.cu, 3, 9, a.L, H, Dh, 0.3f));
  CHECK_OK(kb->attention_forward(kb, out2, lse2, a.q, a.k, a.v, a.cu, 3, 1000, a.L, H, Dh, 0.3f));
  CHECK_OK(kb->attention_backward(kb, g[0], g[1], g[2], a.dout, a.q, a.k, a.v, a.out, a.lse, a.cu, 3,
                                  9, a.L, H, Dh, 0.3f));
  CHECK_OK(kb->attention_backward(kb, g2[0], g2[1], g2[2], a.dout, a.q, a.k, a.v, a.out, a.lse, a.cu,
                                  3, a.L, a.L, H, Dh, 0.3f));
  int same = !memcmp(a.out, out2, a.n * sizeof(float)) && !memcmp(a.lse, lse2, rows * sizeof(float));
  for (int i = 0; i < 3; i++) same &= !memcmp(g[i], g2[i], a.n * sizeof(float));
  CHECK(same, "a looser max_len: bitwise the same forward and backward");

  CHECK(kb->attention_forward(kb, out2, lse2, a.q, a.k, a.v, a.cu, 3, 8, a.L, H, Dh, 0.3f) == TSR_EINVAL,
        "max_len 8 < the 9-token clip");
  CHECK(strstr(err_msg(), "clip 2") && strstr(err_msg(), "9 tokens") && strstr(err_msg(), "max_len = 8"),
        "the error names the clip, its length and the bound: %s", err_msg());
  CHECK(kb->attention_forward(kb, out2, lse2, a.q, a.k, a.v, a.cu, 3, -1, a.L, H, Dh, 0.3f) == TSR_EINVAL,
        "negative max_len");
  CHECK(kb->attention_backward(kb, g2[0], g2[1], g2[2], a.dout, a.q, a.k, a.v, a.out, a.lse, a.cu, 3, 8,
                               a.L, H, Dh, 0.3f) == TSR_EINVAL, "backward: max_len 8");
  CHECK_OK(kb->attention_delta(kb, delta, a.dout, a.out, a.L, H, Dh));
  // partial entries: queries against the same clips as keys, with separate bounds
  int32_t cuk[4] = {0, 5, 5, 14};
  CHECK(kb->attention_partial_forward(kb, out2, lse2, a.q, a.k, a.v, a.cu, cuk, 3, 9, 8, a.L, a.L, H, Dh,
                                      0.3f) == TSR_EINVAL, "partial forward: max_k 8");
  CHECK(strstr(err_msg(), "max_k = 8") != NULL, "names max_k: %s", err_msg());
  CHECK(kb->attention_partial_forward(kb, out2, lse2, a.q, a.k, a.v, a.cu, cuk, 3, 8, 9, a.L, a.L, H, Dh,
                                      0.3f) == TSR_EINVAL, "partial forward: max_q 8");
  CHECK(strstr(err_msg(), "max_q = 8") != NULL, "names max_q: %s", err_msg());
  CHECK(kb->attention_partial_backward(kb, g2[0], g2[1], g2[2], a.dout, a.q, a.k, a.v, a.out, a.lse,
                                       delta, a.cu, cuk, 3, 9, 4, a.L, a.L, H, Dh, 0.3f) == TSR_EINVAL,
        "partial backward: max_k 4");
  CHECK(kb->attention_partial_backward(kb, g2[0], g2[1], g2[2], a.dout, a.q, a.k, a.v, NULL, a.lse,
                                       delta, a.cu, cuk, 3, 9, 9, a.L, a.L, H, Dh, 0.3f) == TSR_EINVAL &&
            strstr(err_msg(), "out") != NULL,
        "partial backward: the final out is required (%s)", err_msg());
  CHECK_OK(kb->attention_partial_forward(kb, out2, lse2, a.q, a.k, a.v, a.cu, cuk, 3, 9, 9, a.L, a.L, H,
                                         Dh, 0.3f));
  CHECK(!memcmp(a.out, out2, a.n * sizeof(float)), "partial forward over the same keys == full");
  free(out2), free(lse2), free(delta);
  for (int i = 0; i < 3; i++) free(g[i]), free(g2[i]);
  case_free(&a);
}

int main(void) {
  kb = kernels_cpu();
  kt_seed(4);
  int small[4] = {1, 5, 67, 9};
  check_case("small (FD)", small, 4, 2, 4, 1);
  int tiles[6] = {1, 130, 64, 65, 3, 1};
  check_case("tiles", tiles, 6, 3, 32, 0);
  test_packing();
  test_partial();
  test_threads();
  test_errors();
  test_bound();
  return check_done();
}
