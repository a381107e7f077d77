// tests/kernels/test_kernels_objective.c — the two entries that move host work of a step
// onto the backend, against the host code they replace:
// - objective_inputs vs model/objective.c's objective_build: t, x_t and target bitwise
//   equal on the CPU fp32 backend (same keys, same formulas, no FMA), for whole clips,
//   CP chunks starting inside a clip, an empty chunk, odd P; with and without the time
//   shift, and with a range of t (train.t_min, t_max); for uint8 pixel tokens and bf16 and
//   f32 latent tokens; the range against its closed form. On CPU-bf16: t equal,
//   x_t and target equal to the fp32 values rounded to bf16.
// - euler_update vs the update loop of model/sample/sample.c (written out below, as it is
//   inline there): bitwise, guided and unguided.
#include <math.h>
#include <string.h>

#include "check.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/objective.h"

static int same_bits(const float *a, const float *b, size_t n) {
  return memcmp(a, b, n * sizeof(float)) == 0;
}

static void test_objective(const kernels_backend *kb, int64_t shift_tokens, int64_t step,
                           kernels_tokens tdt, float t_min, float t_max) {
  dit_config mc;
  train_config tc;
  config_defaults(&mc, &tc);
  mc.pt = 1, mc.ph = 3, mc.pw = 1, mc.channels = 3;  // P = 9: odd
  mc.num_classes = 0;
  tc.seed = 1234567, tc.t_logit_mean = 0.3f, tc.t_logit_std = 1.1f;
  tc.t_shift_tokens = shift_tokens, tc.t_min = t_min, tc.t_max = t_max;
  const int P = 9;
  // Grids and chunks: a whole clip, a chunk from the middle, an empty chunk, a 1-token
  // chunk at the end of a long clip, a clip id above 2^32 (hashed key part).
  struct { int64_t id; int T, H, W; int64_t first; int len; } cs[] = {
      {7, 2, 3, 5, 0, 30},   {8, 4, 4, 4, 17, 23}, {9, 1, 2, 2, 2, 0},
      {10, 8, 8, 8, 511, 1}, {(1ll << 33) + 5, 3, 1, 7, 4, 9},
  };
  int C = (int)(sizeof cs / sizeof cs[0]), L = 0;
  for (int c = 0; c < C; c++) L += cs[c].len;
  objective_clip clips[8];
  size_t tsz = kernels_tokens_size(tdt);
  char *tok = malloc((size_t)L * P * tsz);
  rng_key tk = {.seed = 77, .stream = RNG_STREAM_SAMPLE};
  for (int i = 0; i < L * P; i++) {
    float f = (float)(2.5 * rng_normal(&tk, (uint64_t)i));  // latents: any real value
    if (tdt == KERNELS_TOKENS_U8) ((uint8_t *)tok)[i] = (uint8_t)((i * 37 + 11) % 256);
    else if (tdt == KERNELS_TOKENS_BF16) ((kernels_bf16 *)tok)[i] = kernels_f32_to_bf16(f);
    else ((float *)tok)[i] = f;
  }
  kernels_clip_key keys[8];
  for (int c = 0, r = 0; c < C; r += cs[c].len, c++) {
    clips[c] = (objective_clip){.clip_id = cs[c].id, .total_tokens = (int64_t)cs[c].T * cs[c].H * cs[c].W,
                                .first_token = cs[c].first, .len = cs[c].len, .T = cs[c].T,
                                .H = cs[c].H, .W = cs[c].W, .label = -1,
                                .tokens = tok + (size_t)r * P * tsz, .tokens_dtype = tdt};
    keys[c] = (kernels_clip_key){cs[c].id, clips[c].total_tokens, cs[c].first, 0};
  }
  objective_batch ob;
  CHECK_OK(objective_alloc(&ob, L, C, P));
  CHECK_OK(objective_build(&ob, &mc, &tc, step, 16, clips, C));

  // Backend buffers (host memory on the CPU, but moved as a device backend needs).
  size_t as = kernels_dtype_size(kb->act_dtype), LP = (size_t)L * P;
  void *d_tok, *d_keys, *d_cu, *d_t, *d_x, *d_v;
  CHECK_OK(kb->alloc(kb, &d_tok, LP * tsz));
  CHECK_OK(kb->alloc(kb, &d_keys, sizeof keys));
  CHECK_OK(kb->alloc(kb, &d_cu, sizeof(int32_t) * (C + 1)));
  CHECK_OK(kb->alloc(kb, &d_t, sizeof(float) * C));
  CHECK_OK(kb->alloc(kb, &d_x, LP * as));
  CHECK_OK(kb->alloc(kb, &d_v, LP * as));
  CHECK_OK(kb->to_device(kb, d_tok, tok, LP * tsz));
  CHECK_OK(kb->to_device(kb, d_keys, keys, sizeof keys));
  CHECK_OK(kb->to_device(kb, d_cu, ob.cu_seqlens, sizeof(int32_t) * (C + 1)));
  CHECK_OK(kb->objective_inputs(kb, d_t, d_x, d_v, d_tok, tdt, d_keys, d_cu, C, L, P,
                                (uint64_t)tc.seed, (uint64_t)step, objective_t_dist(&tc)));
  float *t = malloc(sizeof(float) * C), *x = malloc(LP * 4), *v = malloc(LP * 4);
  CHECK_OK(kb->to_host(kb, t, d_t, sizeof(float) * C));
  void *xa = malloc(LP * as), *va = malloc(LP * as);
  CHECK_OK(kb->to_host(kb, xa, d_x, LP * as));
  CHECK_OK(kb->to_host(kb, va, d_v, LP * as));
  CHECK_OK(kernels_cpu()->cast(kernels_cpu(), x, KERNELS_F32, xa, kb->act_dtype, LP));
  CHECK_OK(kernels_cpu()->cast(kernels_cpu(), v, KERNELS_F32, va, kb->act_dtype, LP));

  // What the backend must give: objective_build's values, rounded once to the act dtype.
  float *ex = malloc(LP * 4), *ev = malloc(LP * 4);
  for (size_t i = 0; i < LP; i++) {
    ex[i] = kb->act_dtype == KERNELS_BF16 ? kernels_bf16_round(ob.x[i]) : ob.x[i];
    ev[i] = kb->act_dtype == KERNELS_BF16 ? kernels_bf16_round(ob.target[i]) : ob.target[i];
  }
  CHECK(same_bits(t, ob.t, (size_t)C), "%s shift %lld tokens %d: t differs from objective_build",
        kb->name, (long long)shift_tokens, (int)tdt);
  CHECK(same_bits(x, ex, LP), "%s shift %lld tokens %d: x_t differs from objective_build",
        kb->name, (long long)shift_tokens, (int)tdt);
  CHECK(same_bits(v, ev, LP), "%s shift %lld tokens %d: target differs from objective_build",
        kb->name, (long long)shift_tokens, (int)tdt);
  // The latents are the clean values themselves: x_t - t' target = x0 up to rounding.
  if (tdt != KERNELS_TOKENS_U8 && kb->act_dtype == KERNELS_F32) {
    double worst = 0;
    for (int c = 0; c < C; c++)
      for (int i = 0; i < cs[c].len * P; i++) {
        size_t e = (size_t)ob.cu_seqlens[c] * P + (size_t)i;
        double x0 = tdt == KERNELS_TOKENS_BF16 ? kernels_bf16_to_f32(((kernels_bf16 *)tok)[e])
                                               : ((float *)tok)[e];
        double d = fabs(x[e] - (double)t[c] * v[e] - x0);
        worst = d > worst ? d : worst;
      }
    CHECK(worst < 1e-5, "%s tokens %d: x_t - t target is not the latent (off by %g)", kb->name,
          (int)tdt, worst);
  }
  // The time shift against its closed form at points where it is exact in double:
  // 4x the shift tokens gives s = 2, t' = 2t / (1 + t).
  for (int i = 0; i <= 8; i++) {
    double u = i / 8.0;
    CHECK(kernels_time_shift(u, 4096, 1024) == 2 * u / (1 + u) &&
              kernels_time_shift(u, 100, 1024) == u && kernels_time_shift(u, 1 << 20, 0) == u,
          "time shift at t = %g", u);
  }

  // A chunk past its clip's end is refused with a message naming the clip.
  keys[1].first_token = clips[1].total_tokens - 1;
  CHECK_OK(kb->to_device(kb, d_keys, keys, sizeof keys));
  tsr_status st = kb->objective_inputs(kb, d_t, d_x, d_v, d_tok, tdt, d_keys, d_cu, C, L, P, 1,
                                       2, objective_t_dist(&tc));
  CHECK(st == TSR_EINVAL && strstr(err_msg(), "objective_inputs"), "chunk past the end: %s",
        err_msg());

  void *bufs[] = {d_tok, d_keys, d_cu, d_t, d_x, d_v};
  for (int i = 0; i < 6; i++) kb->free(kb, bufs[i]);
  free(t), free(x), free(v), free(xa), free(va), free(ex), free(ev), free(tok);
  objective_free(&ob);
}

// train.t_min, t_max against the closed form: for 20,000 clip keys the noise level of a
// range is t_min + (t_max - t_min) t' of the same key's level t' without one (bitwise, in
// double), inside [t_min, t_max]; the range [0, 1] gives t' itself; an expert's range of
// 0.875..1 (Wan 2.2 T2V-A14B's high-noise expert) is filled end to end (draws within 5% of
// both ends).
static void test_t_range(void) {
  kernels_t_dist all = {.logit_mean = 0.2, .logit_std = 1.3, .shift_tokens = 256, .t_min = 0,
                        .t_max = 1};
  const double ranges[][2] = {{0.875, 1.0}, {0.0, 0.875}, {0.3, 0.31}};
  for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++) {
    kernels_t_dist td = all;
    td.t_min = ranges[r][0], td.t_max = ranges[r][1];
    double lo = 1, hi = 0;
    int bad = 0, exact = 1;
    for (int64_t id = 0; id < 20000; id++) {
      int64_t tokens = 64 + id % 3000;
      double t = kernels_objective_timestep(11, 3, id, 0, tokens, &all);
      double u = kernels_objective_timestep(11, 3, id, 0, tokens, &td);
      exact &= u == td.t_min + (td.t_max - td.t_min) * t;
      bad += !(u >= td.t_min && u <= td.t_max);
      lo = fmin(lo, u), hi = fmax(hi, u);
    }
    double w = td.t_max - td.t_min;
    CHECK(exact && !bad, "t range [%g, %g]: %d draws outside, closed form %s", td.t_min,
          td.t_max, bad, exact ? "held" : "failed");
    CHECK(lo < td.t_min + 0.05 * w && hi > td.t_max - 0.05 * w,
          "t range [%g, %g]: draws span only [%g, %g]", td.t_min, td.t_max, lo, hi);
  }
}

// model/sample/sample.c's update, as written there (guided: copy 0 conditional, copy 1 not).
static void host_euler(float *xh, const float *vh, size_t NP, int guided, float g, float dt) {
  for (size_t k = 0; k < NP; k++) {
    float v = guided ? vh[NP + k] + g * (vh[k] - vh[NP + k]) : vh[k];
    xh[k] += dt * v;
  }
}

static void test_euler(const kernels_backend *kb) {
  const size_t NP = 4099;
  rng_key key = {.seed = 5, .stream = RNG_STREAM_SAMPLE};
  float *x0 = malloc(NP * 4), *vh = malloc(2 * NP * 4), *xe = malloc(NP * 4), *xk = malloc(NP * 4);
  rng_normal_fill(&key, 0, x0, (int64_t)NP);
  rng_normal_fill(&key, NP, vh, (int64_t)(2 * NP));
  size_t as = kernels_dtype_size(kb->act_dtype);
  if (kb->act_dtype == KERNELS_BF16)  // the predictions arrive in the act dtype
    for (size_t i = 0; i < 2 * NP; i++) vh[i] = kernels_bf16_round(vh[i]);
  void *d_x, *d_v;
  CHECK_OK(kb->alloc(kb, &d_x, NP * 4));
  CHECK_OK(kb->alloc(kb, &d_v, 2 * NP * as));
  void *va = malloc(2 * NP * as);
  CHECK_OK(kernels_cpu()->cast(kernels_cpu(), va, kb->act_dtype, vh, KERNELS_F32, 2 * NP));
  CHECK_OK(kb->to_device(kb, d_v, va, 2 * NP * as));
  for (int guided = 0; guided < 2; guided++) {
    float g = 4.5f, dt = -0.0371f;
    memcpy(xe, x0, NP * 4);
    host_euler(xe, vh, NP, guided, g, dt);
    host_euler(xe, vh, NP, guided, g, dt * 0.5f);
    CHECK_OK(kb->to_device(kb, d_x, x0, NP * 4));
    const void *vu = guided ? (const char *)d_v + NP * as : NULL;
    CHECK_OK(kb->euler_update(kb, d_x, d_v, vu, g, dt, NP));
    CHECK_OK(kb->euler_update(kb, d_x, d_v, vu, g, dt * 0.5f, NP));
    CHECK_OK(kb->to_host(kb, xk, d_x, NP * 4));
    CHECK(same_bits(xk, xe, NP), "%s: euler_update (guided %d) differs from model/sample/sample.c",
          kb->name, guided);
  }
  kb->free(kb, d_x), kb->free(kb, d_v);
  free(x0), free(vh), free(xe), free(xk), free(va);
}

int main(void) {
  const kernels_backend *cpu[] = {kernels_cpu(), kernels_cpu_bf16()};
  for (int b = 0; b < 2; b++) {
    for (int tdt = KERNELS_TOKENS_U8; tdt <= KERNELS_TOKENS_F32; tdt++) {
      test_objective(cpu[b], 0, 3, (kernels_tokens)tdt, 0.0f, 1.0f);
      test_objective(cpu[b], 16, 1000001, (kernels_tokens)tdt, 0.0f, 1.0f);
      test_objective(cpu[b], 16, 12, (kernels_tokens)tdt, 0.875f, 1.0f);  // an expert's range
    }
    test_euler(cpu[b]);
  }
  test_t_range();
  return check_done();
}
