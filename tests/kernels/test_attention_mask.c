// tests/kernels/test_attention_mask.c — masked attention (kernels.h attention_masked_*) of
// the CPU backends against a dense masked reference written out here in double: for every
// query the scores of the keys the mask allows, their softmax, the output and its
// log-sum-exp; the backward against the reference's analytic gradients, which are checked
// in turn against central finite differences of the reference's forward. Also: the FULL
// kind is the unmasked entries bit for bit; the partial backward over two key blocks sums
// to the whole one; a query with no key allowed in a block gets out 0 and lse -inf; bad
// masks are refused naming the entry.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rand.h"
#include "kernels/kernels.h"

enum { H = 2, DH = 16, NCLIP = 2 };
// Two clips' token grids (frames, rows, columns): 120 and 36 tokens, so that the first one
// spans several 64-token tiles and tiles are skipped whole under the masks.
static const int GRID[NCLIP][3] = {{6, 4, 5}, {4, 3, 3}};


// The reference's mask, spelled out from kernels.h's definition.
static int ref_allows(const kernels_mask *m, const int32_t *a, const int32_t *b) {
  if (m->kind == KERNELS_MASK_BLOCK_CAUSAL) {
    int cq = a[0] / m->chunk, ck = b[0] / m->chunk;
    if (ck > cq) return 0;
    return m->window == 0 || cq - ck <= m->window;
  }
  if (m->kind == KERNELS_MASK_WINDOW) {
    int d[3] = {a[0] / m->tile_t - b[0] / m->tile_t, a[1] / m->tile_h - b[1] / m->tile_h,
                a[2] / m->tile_w - b[2] / m->tile_w};
    return abs(d[0]) <= m->wt && abs(d[1]) <= m->wh && abs(d[2]) <= m->ww;
  }
  return 1;
}

// Dense masked attention in double: queries [cq[c], cq[c+1]) against keys [ck[c],
// ck[c+1]). out: (Lq, H, DH), lse: (Lq, H); q: (Lq, H, DH), k, v: (Lk, H, DH) (double).
static void ref_forward(double *out, double *lse, const double *q, const double *k,
                        const double *v, const int32_t *cq, const int32_t *ck, const int32_t *pq,
                        const int32_t *pk, const kernels_mask *m, double scale) {
  for (int c = 0; c < NCLIP; c++)
    for (int i = cq[c]; i < cq[c + 1]; i++)
      for (int h = 0; h < H; h++) {
        double mx = -INFINITY, sum = 0, *o = out + ((size_t)i * H + h) * DH;
        memset(o, 0, DH * sizeof *o);
        for (int j = ck[c]; j < ck[c + 1]; j++) {
          if (!ref_allows(m, pq + 3 * i, pk + 3 * j)) continue;
          double s = 0;
          for (int d = 0; d < DH; d++) s += q[(i * H + h) * DH + d] * k[(j * H + h) * DH + d];
          if (s * scale > mx) mx = s * scale;
        }
        for (int j = ck[c]; j < ck[c + 1]; j++) {
          if (!ref_allows(m, pq + 3 * i, pk + 3 * j)) continue;
          double s = 0;
          for (int d = 0; d < DH; d++) s += q[(i * H + h) * DH + d] * k[(j * H + h) * DH + d];
          double p = exp(s * scale - mx);
          sum += p;
          for (int d = 0; d < DH; d++) o[d] += p * v[(j * H + h) * DH + d];
        }
        for (int d = 0; d < DH; d++) o[d] = sum > 0 ? o[d] / sum : 0;
        lse[i * H + h] = sum > 0 ? mx + log(sum) : -INFINITY;
      }
}

// The reference's gradients of sum(out * dout) (whole clips: cq == ck, pq == pk):
// dq, dk, dv: (L, H, DH), overwritten.
static void ref_backward(double *dq, double *dk, double *dv, const double *dout,
                         const double *q, const double *k, const double *v, const int32_t *cu,
                         const int32_t *pos, const kernels_mask *m, double scale, int L) {
  size_t n = (size_t)L * H * DH;
  double *out = malloc(n * sizeof *out), *lse = malloc((size_t)L * H * sizeof *lse);
  ref_forward(out, lse, q, k, v, cu, cu, pos, pos, m, scale);
  memset(dq, 0, n * sizeof *dq), memset(dk, 0, n * sizeof *dk), memset(dv, 0, n * sizeof *dv);
  for (int c = 0; c < NCLIP; c++)
    for (int i = cu[c]; i < cu[c + 1]; i++)
      for (int h = 0; h < H; h++) {
        const double *o = out + ((size_t)i * H + h) * DH, *g = dout + ((size_t)i * H + h) * DH;
        double delta = 0;
        for (int d = 0; d < DH; d++) delta += o[d] * g[d];
        for (int j = cu[c]; j < cu[c + 1]; j++) {
          if (!ref_allows(m, pos + 3 * i, pos + 3 * j)) continue;
          double s = 0, dp = 0;
          for (int d = 0; d < DH; d++) {
            s += q[(i * H + h) * DH + d] * k[(j * H + h) * DH + d];
            dp += g[d] * v[(j * H + h) * DH + d];
          }
          double p = exp(s * scale - lse[i * H + h]), ds = p * (dp - delta);
          for (int d = 0; d < DH; d++) {
            dv[(j * H + h) * DH + d] += p * g[d];
            dq[(i * H + h) * DH + d] += scale * ds * k[(j * H + h) * DH + d];
            dk[(j * H + h) * DH + d] += scale * ds * q[(i * H + h) * DH + d];
          }
        }
      }
  free(out);
  free(lse);
}

// sum(out * dout) of the reference's forward (for finite differences).
static double ref_loss(const double *dout, const double *q, const double *k, const double *v,
                       const int32_t *cu, const int32_t *pos, const kernels_mask *m, double scale,
                       int L) {
  size_t n = (size_t)L * H * DH;
  double *out = malloc(n * sizeof *out), *lse = malloc((size_t)L * H * sizeof *lse), f = 0;
  ref_forward(out, lse, q, k, v, cu, cu, pos, pos, m, scale);
  for (size_t e = 0; e < n; e++) f += out[e] * dout[e];
  free(out);
  free(lse);
  return f;
}

static float *to_f(const double *x, size_t n) {
  float *f = malloc(n * sizeof *f);
  for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
  return f;
}

// Largest |a - b| / (|b| + 1) over n values (float a, double b).
static double max_rel(const float *a, const double *b, size_t n) {
  double w = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs(a[i] - b[i]) / (fabs(b[i]) + 1.0);
    if (!(e <= w)) w = e;
  }
  return w;
}

typedef struct {
  int L;
  int32_t cu[NCLIP + 1];
  int32_t *pos;          // (L, 3), raster order (t, y, x) in each clip
  double *q, *k, *v, *dout;
} problem;

static void problem_make(problem *p, uint64_t seed) {
  p->cu[0] = 0;
  for (int c = 0; c < NCLIP; c++) p->cu[c + 1] = p->cu[c] + GRID[c][0] * GRID[c][1] * GRID[c][2];
  p->L = p->cu[NCLIP];
  p->pos = malloc((size_t)p->L * 3 * sizeof *p->pos);
  for (int c = 0, i = 0; c < NCLIP; c++)
    for (int t = 0; t < GRID[c][0]; t++)
      for (int y = 0; y < GRID[c][1]; y++)
        for (int x = 0; x < GRID[c][2]; x++, i++)
          p->pos[3 * i] = t, p->pos[3 * i + 1] = y, p->pos[3 * i + 2] = x;
  size_t n = (size_t)p->L * H * DH;
  double **t[4] = {&p->q, &p->k, &p->v, &p->dout};
  for (int a = 0; a < 4; a++) {
    *t[a] = malloc(n * sizeof(double));
    for (size_t e = 0; e < n; e++)  // float-exact
      (*t[a])[e] = (float)(1.5 * (test_urand(&seed) * 2.0 - 1.0));
  }
}

static void problem_free(problem *p) {
  free(p->pos), free(p->q), free(p->k), free(p->v), free(p->dout);
}

static const char *mask_label(const kernels_mask *m) {
  return m->kind == KERNELS_MASK_FULL ? "full"
         : m->kind == KERNELS_MASK_BLOCK_CAUSAL ? (m->window ? "block_causal windowed" : "block_causal")
                                                : "window";
}

// Forward and backward of the fp32 backend kb under mask m against the reference (the
// bf16 one against it: test_backend_ops).
static void test_mask(const kernels_backend *kb, const problem *p, const kernels_mask *m,
                      double tol) {
  const int L = p->L;
  const float scale = 1.0f / sqrtf((float)DH);
  size_t n = (size_t)L * H * DH, nl = (size_t)L * H;
  double *ro = malloc(n * sizeof *ro), *rl = malloc(nl * sizeof *rl);
  ref_forward(ro, rl, p->q, p->k, p->v, p->cu, p->cu, p->pos, p->pos, m, scale);
  float *q = to_f(p->q, n), *k = to_f(p->k, n), *v = to_f(p->v, n), *g = to_f(p->dout, n);
  float *o = malloc(n * sizeof *o), *lse = malloc(nl * sizeof *lse);
  int mx = GRID[0][0] * GRID[0][1] * GRID[0][2];
  CHECK_OK(kb->attention_masked_forward(kb, o, lse, q, k, v, p->cu, p->cu, p->pos, p->pos, *m,
                                        NCLIP, mx, mx, L, L, H, DH, scale));
  double eo = max_rel(o, ro, n), el = max_rel(lse, rl, nl);
  CHECK(eo <= tol && el <= tol, "%s forward: out %.3g, lse %.3g (tol %.3g)", mask_label(m), eo,
        el, tol);
  // backward: the reference's gradients, the entry's against them
  double *rdq = malloc(n * sizeof *rdq), *rdk = malloc(n * sizeof *rdk), *rdv = malloc(n * sizeof *rdv);
  ref_backward(rdq, rdk, rdv, p->dout, p->q, p->k, p->v, p->cu, p->pos, m, scale, L);
  float *dq = malloc(n * sizeof *dq), *dk = malloc(n * sizeof *dk), *dv = malloc(n * sizeof *dv);
  CHECK_OK(kb->attention_masked_backward(kb, dq, dk, dv, g, q, k, v, o, lse, p->cu, p->pos, *m,
                                         NCLIP, mx, L, H, DH, scale));
  double e1 = max_rel(dq, rdq, n), e2 = max_rel(dk, rdk, n), e3 = max_rel(dv, rdv, n);
  CHECK(e1 <= tol && e2 <= tol && e3 <= tol, "%s backward: dq %.3g, dk %.3g, dv %.3g (tol %.3g)",
        mask_label(m), e1, e2, e3, tol);
  free(ro), free(rl), free(q), free(k), free(v), free(g), free(o), free(lse);
  free(rdq), free(rdk), free(rdv), free(dq), free(dk), free(dv);
}

// The reference's analytic gradients against central differences of its forward, at a
// spread of entries of q, k and v.
static void test_reference_gradients(const problem *p, const kernels_mask *m) {
  const int L = p->L;
  const double scale = 1.0 / sqrt((double)DH), eps = 1e-5;
  size_t n = (size_t)L * H * DH;
  double *g[3] = {malloc(n * sizeof(double)), malloc(n * sizeof(double)), malloc(n * sizeof(double))};
  ref_backward(g[0], g[1], g[2], p->dout, p->q, p->k, p->v, p->cu, p->pos, m, scale, L);
  double *x[3] = {p->q, p->k, p->v}, worst = 0;
  for (int a = 0; a < 3; a++)
    for (size_t e = 7; e < n; e += 311) {
      double keep = x[a][e];
      x[a][e] = keep + eps;
      double fp = ref_loss(p->dout, p->q, p->k, p->v, p->cu, p->pos, m, scale, L);
      x[a][e] = keep - eps;
      double fm = ref_loss(p->dout, p->q, p->k, p->v, p->cu, p->pos, m, scale, L);
      x[a][e] = keep;
      double fd = (fp - fm) / (2 * eps), w = fabs(fd - g[a][e]) / (fabs(fd) + 1e-3);
      if (w > worst) worst = w;
    }
  CHECK(worst <= 1e-5, "%s reference gradients against finite differences: %.3g", mask_label(m),
        worst);
  free(g[0]), free(g[1]), free(g[2]);
}

// The FULL kind is the unmasked entries, bit for bit; a mask that allows every pair
// (block_causal with one chunk spanning every clip) too.
static void test_full_is_unmasked(const problem *p) {
  const kernels_backend *kb = kernels_cpu();
  const int L = p->L, mx = L;
  const float scale = 0.3f;
  size_t n = (size_t)L * H * DH, nl = (size_t)L * H;
  float *q = to_f(p->q, n), *k = to_f(p->k, n), *v = to_f(p->v, n), *g = to_f(p->dout, n);
  float *o1 = malloc(n * 4), *o2 = malloc(n * 4), *l1 = malloc(nl * 4), *l2 = malloc(nl * 4);
  float *d1 = malloc(3 * n * 4), *d2 = malloc(3 * n * 4);
  kernels_mask masks[2] = {{.kind = KERNELS_MASK_FULL},
                           {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 1000, .window = 0}};
  CHECK_OK(kb->attention_forward(kb, o1, l1, q, k, v, p->cu, NCLIP, mx, L, H, DH, scale));
  CHECK_OK(kb->attention_backward(kb, d1, d1 + n, d1 + 2 * n, g, q, k, v, o1, l1, p->cu, NCLIP, mx,
                                  L, H, DH, scale));
  for (int i = 0; i < 2; i++) {
    CHECK_OK(kb->attention_masked_forward(kb, o2, l2, q, k, v, p->cu, p->cu, p->pos, p->pos,
                                          masks[i], NCLIP, mx, mx, L, L, H, DH, scale));
    CHECK_OK(kb->attention_masked_backward(kb, d2, d2 + n, d2 + 2 * n, g, q, k, v, o2, l2, p->cu,
                                           p->pos, masks[i], NCLIP, mx, L, H, DH, scale));
    CHECK(!memcmp(o1, o2, n * 4) && !memcmp(l1, l2, nl * 4) && !memcmp(d1, d2, 3 * n * 4),
          "mask %d that allows every pair: not the unmasked attention bit for bit", i);
  }
  free(q), free(k), free(v), free(g), free(o1), free(o2), free(l1), free(l2), free(d1), free(d2);
}

// Ring-style blocks: clip 0's keys split in two blocks; the partial forwards merged and the
// partial backwards summed give the whole clip's masked attention; a query block whose keys
// all lie in later chunks gets out 0 and lse -inf.
static void test_partial_blocks(const problem *p) {
  const kernels_backend *kb = kernels_cpu();
  const int L0 = p->cu[1], half = L0 / 2;  // clip 0 only
  const float scale = 0.25f;
  kernels_mask m = {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 2, .window = 1};
  size_t n = (size_t)L0 * H * DH, nl = (size_t)L0 * H, nh = (size_t)half * H * DH;
  float *q = to_f(p->q, n), *k = to_f(p->k, n), *v = to_f(p->v, n), *g = to_f(p->dout, n);
  int32_t cu[2] = {0, L0}, cuh[2] = {0, half};
  float *ow = malloc(n * 4), *lw = malloc(nl * 4), *ob = malloc(n * 4), *lb = malloc(nl * 4);
  float *oa = malloc(n * 4), *la = malloc(nl * 4);
  CHECK_OK(kb->attention_masked_forward(kb, ow, lw, q, k, v, cu, cu, p->pos, p->pos, m, 1, L0, L0,
                                        L0, L0, H, DH, scale));
  CHECK_OK(kb->attention_masked_forward(kb, oa, la, q, k, v, cu, cuh, p->pos, p->pos, m, 1, L0,
                                        half, L0, half, H, DH, scale));
  CHECK_OK(kb->attention_masked_forward(kb, ob, lb, q, k + nh, v + nh, cu, cuh, p->pos,
                                        p->pos + 3 * half, m, 1, L0, half, L0, half, H, DH, scale));
  // the first frames' queries see nothing of the second half's keys (later chunks)
  int empty = 1;
  for (int h = 0; h < H; h++) empty &= lb[h] == -INFINITY && ob[h * DH] == 0.0f;
  CHECK(empty, "query 0 against later chunks: lse %g, out %g", lb[0], ob[0]);
  CHECK_OK(kb->attention_merge(kb, oa, la, ob, lb, L0, H, DH));
  double eo = 0;
  for (size_t e = 0; e < n; e++) eo = fmax(eo, fabs(oa[e] - ow[e]));
  for (size_t e = 0; e < nl; e++) eo = fmax(eo, fabs(la[e] - lw[e]));
  CHECK(eo <= 1e-5, "merged partial forwards against the whole: %.3g", eo);
  float *dw = malloc(3 * n * 4), *ds = calloc(3 * n, 4), *delta = malloc(nl * 4);
  CHECK_OK(kb->attention_masked_backward(kb, dw, dw + n, dw + 2 * n, g, q, k, v, ow, lw, cu,
                                         p->pos, m, 1, L0, L0, H, DH, scale));
  CHECK_OK(kb->attention_delta(kb, delta, g, ow, L0, H, DH));
  for (int b = 0; b < 2; b++)
    CHECK_OK(kb->attention_masked_partial_backward(
        kb, ds, ds + n + b * nh, ds + 2 * n + b * nh, g, q, k + b * nh, v + b * nh, ow, lw, delta, cu,
        cuh, p->pos, p->pos + 3 * (size_t)b * half, m, 1, L0, half, L0, half, H, DH, scale));
  double ed = 0;
  for (size_t e = 0; e < 3 * n; e++) ed = fmax(ed, fabs(ds[e] - dw[e]) / (fabs(dw[e]) + 1));
  CHECK(ed <= 1e-5, "partial backwards over two key blocks against the whole: %.3g", ed);
  free(q), free(k), free(v), free(g), free(ow), free(lw), free(ob), free(lb), free(oa), free(la);
  free(dw), free(ds), free(delta);
}

static void test_errors(const problem *p) {
  const kernels_backend *kb = kernels_cpu();
  size_t n = (size_t)p->L * H * DH;
  float *x = calloc(n, 4), *lse = calloc((size_t)p->L * H, 4);
  kernels_mask bad[3] = {{.kind = 7},
                         {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 0},
                         {.kind = KERNELS_MASK_WINDOW, .tile_t = 1, .tile_h = 1, .tile_w = 1, .wt = -1}};
  for (int i = 0; i < 3; i++) {
    tsr_status st = kb->attention_masked_forward(kb, x, lse, x, x, x, p->cu, p->cu, p->pos, p->pos,
                                                 bad[i], NCLIP, p->L, p->L, p->L, p->L, H, DH, 1);
    CHECK(st == TSR_EINVAL && strstr(err_msg(), "attention_masked_forward"),
          "bad mask %d: %s", i, err_msg());
  }
  kernels_mask m = {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 1};
  tsr_status st = kb->attention_masked_backward(kb, x, x, x, x, x, x, x, x, lse, p->cu, NULL, m,
                                                NCLIP, p->L, p->L, H, DH, 1);
  CHECK(st == TSR_EINVAL && strstr(err_msg(), "positions"), "no positions: %s", err_msg());
  free(x), free(lse);
}

int main(void) {
  problem p;
  problem_make(&p, 12345);
  kernels_mask masks[] = {
      {.kind = KERNELS_MASK_FULL},
      {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 2, .window = 0},
      {.kind = KERNELS_MASK_BLOCK_CAUSAL, .chunk = 1, .window = 2},
      {.kind = KERNELS_MASK_WINDOW, .wt = 1, .wh = 0, .ww = 1, .tile_t = 2, .tile_h = 2, .tile_w = 2},
      {.kind = KERNELS_MASK_WINDOW, .wt = 0, .wh = 1, .ww = 1, .tile_t = 1, .tile_h = 1, .tile_w = 1},
  };
  for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
    test_mask(kernels_cpu(), &p, &masks[i], 1e-5);
    test_reference_gradients(&p, &masks[i]);
  }
  test_full_is_unmasked(&p);
  test_partial_blocks(&p);
  test_errors(&p);
  problem_free(&p);
  return check_done();
}
