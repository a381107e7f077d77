// CPU 3D RoPE: closed form of the Wan split (d_h = d_w = 2*(Dh/6), d_t = the rest, pairs
// (2p, 2p+1), frequency theta^(-2j/d_g)), norm preservation, relative-position property
// q(p).k(p') == q(p+s).k(p'+s), each axis group moved only by its own coordinate, backward
// == inverse rotation (round trip) and against finite differences.
// Tolerances: 1e-6 relative for the closed form, norms and round trip (fp32 rotation of
// values ~1 with cos/sin computed in double); 1e-5 for dot products (sums of Dh fp32
// products at positions up to ~200).
#include "kt.h"

static const kernels_backend *kb;

typedef struct { int L, H, Dh; const int32_t *pos; double theta; } rope_ctx;

// Independent closed form in double. in: x (L, H, Dh); out (L, H, Dh)
static void rope_ref(void *vc, double *const *in, double *out) {
  rope_ctx *c = vc;
  int dhw = 2 * (c->Dh / 6), dt = c->Dh - 2 * dhw;
  for (int i = 0; i < c->L; i++)
    for (int h = 0; h < c->H; h++)
      for (int p = 0; p < c->Dh / 2; p++) {
        int axis, j, width;
        if (p < dt / 2) axis = 0, j = p, width = dt;
        else if (p < dt / 2 + dhw / 2) axis = 1, j = p - dt / 2, width = dhw;
        else axis = 2, j = p - dt / 2 - dhw / 2, width = dhw;
        double ang = c->pos[i * 3 + axis] * pow(c->theta, -2.0 * j / width);
        size_t o = ((size_t)i * c->H + h) * c->Dh + 2 * p;
        double a = in[0][o], b = in[0][o + 1];
        out[o] = a * cos(ang) - b * sin(ang);
        out[o + 1] = a * sin(ang) + b * cos(ang);
      }
}

static double dot(const float *a, const float *b, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

int main(void) {
  kb = kernels_cpu();
  kt_seed(3);
  int L = 6, H = 2, Dh = 16;  // d_t = 8, d_h = d_w = 4
  size_t n = (size_t)L * H * Dh;
  int32_t pos[6 * 3] = {0, 0, 0, 1, 2, 3, 5, 0, 7, 17, 9, 1, 3, 31, 30, 200, 4, 8};
  rope_ctx c = {L, H, Dh, pos, 10000.0};
  float *x = kt_rand(n, -1, 1), *y = kt_zeros(n), *back = kt_zeros(n);
  double *in[1] = {kt_dbl(x, n)}, *ref = malloc(n * sizeof(double));
  rope_ref(&c, in, ref);
  CHECK_OK(kb->rope_forward(kb, y, x, pos, L, H, Dh, 10000.0f));
  CHECK(kt_relerr(y, ref, n, 1e-6) < 1e-6, "closed form err %.3g", kt_relerr(y, ref, n, 1e-6));
  // norms preserved per (token, head)
  double nerr = 0;
  for (size_t r = 0; r < (size_t)L * H; r++)
    nerr = fmax(nerr, fabs(sqrt(dot(y + r * Dh, y + r * Dh, Dh)) - sqrt(dot(x + r * Dh, x + r * Dh, Dh))));
  CHECK(nerr < 1e-5, "norm preserved, err %.3g", nerr);
  // position 0 is the identity
  CHECK(!memcmp(y, x, (size_t)H * Dh * sizeof(float)), "position (0,0,0) leaves the vector unchanged");
  // backward = inverse rotation; in place
  CHECK_OK(kb->rope_backward(kb, back, y, pos, L, H, Dh, 10000.0f));
  CHECK(kt_relerr_ff(back, x, n, 1e-6) < 1e-6, "backward(forward(x)) == x");
  memcpy(back, x, n * sizeof(float));
  CHECK_OK(kb->rope_forward(kb, back, back, pos, L, H, Dh, 10000.0f));
  CHECK(!memcmp(back, y, n * sizeof(float)), "in place == out of place");
  float *g = kt_rand(n, -1, 1), *dx = kt_zeros(n);
  double *w = kt_dbl(g, n);
  CHECK_OK(kb->rope_backward(kb, dx, g, pos, L, H, Dh, 10000.0f));
  double e = kt_fd_err(rope_ref, &c, in, 0, n, n, w, dx);
  CHECK(e < 1e-5, "backward FD err %.3g", e);
  // relative position: q at p, k at p', shifted by s on every axis
  {
    int32_t pp[4 * 3] = {3, 5, 7, 1, 9, 2, 3 + 40, 5 + 11, 7 + 100, 1 + 40, 9 + 11, 2 + 100};
    float *q = kt_rand(4 * Dh, -1, 1), *rq = kt_zeros(4 * Dh);
    memcpy(q + 2 * Dh, q, 2 * Dh * sizeof(float));  // rows 2, 3 = rows 0, 1 (q, k)
    CHECK_OK(kb->rope_forward(kb, rq, q, pp, 4, 1, Dh, 10000.0f));
    double d0 = dot(rq, rq + Dh, Dh), d1 = dot(rq + 2 * Dh, rq + 3 * Dh, Dh);
    CHECK(fabs(d0 - d1) < 1e-5 * (1 + fabs(d0)), "q(p).k(p') == q(p+s).k(p'+s): %.9g vs %.9g", d0, d1);
    free(q), free(rq);
  }
  // each group moves only with its own coordinate: change y only -> time and width pairs stay
  {
    int32_t p2[2 * 3] = {4, 1, 6, 4, 9, 6};
    float *a = kt_rand(Dh, -1, 1), *two = kt_zeros(2 * Dh), *r = kt_zeros(2 * Dh);
    memcpy(two, a, Dh * sizeof(float)), memcpy(two + Dh, a, Dh * sizeof(float));
    CHECK_OK(kb->rope_forward(kb, r, two, p2, 2, 1, Dh, 10000.0f));
    int dt = Dh - 4 * (Dh / 6), dh = 2 * (Dh / 6);
    CHECK(!memcmp(r, r + Dh, dt * sizeof(float)), "time pairs independent of y");
    CHECK(memcmp(r + dt, r + Dh + dt, dh * sizeof(float)) != 0, "height pairs follow y");
    CHECK(!memcmp(r + dt + dh, r + Dh + dt + dh, dh * sizeof(float)), "width pairs independent of y");
    free(a), free(two), free(r);
  }
  free(x), free(y), free(back), free(in[0]), free(ref), free(g), free(dx), free(w);
  return check_done();
}
