// tests/model/test_unipc.c — UniPC's update (model/sample/unipc.h) against the closed form of
// an exact model: when every x0 prediction is the same x0 (the model of one clip, v = (x -
// x0) / sigma), the flow from x = e is x(sigma) = (1 - sigma) x0 + sigma e, and UniPC must
// follow it at every level whatever its order (its difference terms vanish, and its
// exponential integrator is exact for a constant x0: sigma_t / sigma_s x - alpha_t
// (e^{-h} - 1) x0 = (1 - sigma_t) x0 + sigma_t e). Checked for 1, 2, 3 and 9 steps of Wan's
// levels (sample_sigmas, shift 3 and 5): every step within 2e-6 of the closed form (fp32
// arrays, coefficients in double), the last step x0 exactly. The comparison with diffusers
// itself is model_wan_solvers.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/rng.h"
#include "model/sample/sample.h"
#include "model/sample/unipc.h"

int main(void) {
  enum { N = 257 };
  float x0[N], e[N], x[N];
  rng_key k = {.seed = 3, .stream = RNG_STREAM_SAMPLE};
  for (int i = 0; i < N; i++) x0[i] = (float)(2 * rng_normal(&k, i)), e[i] = (float)rng_normal(&k, N + i);
  const int steps[] = {1, 2, 3, 9};
  const double shifts[] = {3.0, 5.0};
  for (size_t a = 0; a < sizeof steps / sizeof *steps; a++)
    for (size_t b = 0; b < 2; b++) {
      sample_params sp = {.steps = steps[a], .schedule = SAMPLE_SCHEDULE_WAN,
                          .shift = shifts[b], .solver = SAMPLE_SOLVER_UNIPC};
      double sig[10];
      sample_sigmas(&sp, 1, sig);
      CHECK(sig[0] < 1.0 && sig[steps[a]] == 0.0, "levels %g .. %g", sig[0], sig[steps[a]]);
      unipc_state u;
      CHECK_OK(unipc_init(&u, N, steps[a], sig));
      for (int i = 0; i < N; i++) x[i] = (float)((1 - sig[0]) * x0[i] + sig[0] * e[i]);
      double worst = 0;
      for (int s = 0; s < steps[a]; s++) {
        unipc_step(&u, s, x, x0);
        for (int i = 0; i < N; i++) {
          double want = (1 - sig[s + 1]) * x0[i] + sig[s + 1] * e[i];
          worst = fmax(worst, fabs(x[i] - want) / (fabs(want) + 1));
        }
      }
      CHECK(worst < 2e-6, "%d steps, shift %g: off the exact flow by %.2e", steps[a], shifts[b],
            worst);
      CHECK(!memcmp(x, x0, sizeof x), "%d steps, shift %g: the last step is not x0", steps[a],
            shifts[b]);
      unipc_free(&u);
    }
  return check_done();
}
