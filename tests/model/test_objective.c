// tests/model/test_objective.c — rectified-flow inputs: chunked builds equal the whole
// clip's rows (t, noise, positions independent of chunking and packing), x_t and target
// are consistent with x0, t's logit-normal moments and the length shift, label dropout
// rate, errors naming the clip, model.text_pad's zero rows (host and backend builds), and a
// clip built from runs of its tokens (objective_device_build_runs) against those runs
// built as chunks.
#include <math.h>
#include <string.h>

#include "check.h"
#include "core/rng.h"
#include "model/objective.h"

int main(void) {
  dit_config mc;
  train_config tc;
  config_defaults(&mc, &tc);
  mc.pt = 1, mc.ph = 2, mc.pw = 2, mc.channels = 3, mc.num_classes = 5;
  tc.seed = 42, tc.class_dropout = 0.25f, tc.t_shift_tokens = 16;
  const int P = 12, T = 3, H = 4, W = 5, N = T * H * W;
  uint8_t tok[60 * 12];
  for (int i = 0; i < N * P; i++) tok[i] = (uint8_t)(i * 37 + 11);

  objective_batch whole, parts;
  CHECK_OK(objective_alloc(&whole, 128, 4, P));
  CHECK_OK(objective_alloc(&parts, 128, 4, P));
  objective_clip c = {.clip_id = 77, .total_tokens = N, .first_token = 0, .len = N, .T = T,
                      .H = H, .W = W, .label = 2, .tokens = tok};
  CHECK_OK(objective_build(&whole, &mc, &tc, 9, 8, &c, 1));
  // the same clip as three CP chunks [0, 17), [17, 40), [40, 60), packed with another clip first
  uint8_t other[7 * 12] = {0};
  objective_clip ch[4] = {
      {.clip_id = 5, .total_tokens = 7, .len = 7, .T = 1, .H = 1, .W = 7, .label = -1, .tokens = other},
      c, c, c};
  int starts[4] = {0, 17, 40, 60};
  for (int i = 0; i < 3; i++) {
    ch[i + 1].first_token = starts[i], ch[i + 1].len = starts[i + 1] - starts[i];
    ch[i + 1].tokens = tok + (size_t)starts[i] * P;
  }
  CHECK_OK(objective_build(&parts, &mc, &tc, 9, 8, ch, 4));
  CHECK(parts.L == 7 + N && parts.cu_seqlens[1] == 7 && parts.cu_seqlens[4] == 7 + N, "cu");
  CHECK(!memcmp(parts.x + 7 * P, whole.x, sizeof(float) * N * P), "x_t differs when chunked");
  CHECK(!memcmp(parts.target + 7 * P, whole.target, sizeof(float) * N * P), "target differs");
  CHECK(!memcmp(parts.pos + 7 * 3, whole.pos, sizeof(int32_t) * N * 3), "positions differ");
  for (int i = 1; i < 4; i++)
    CHECK(parts.t[i] == whole.t[0] && parts.labels[i] == whole.labels[0] &&
              parts.loss_weight[i] == whole.loss_weight[0],
          "chunk %d: t/label/weight differ", i);
  CHECK(parts.labels[0] == 5, "no label -> num_classes, got %d", parts.labels[0]);
  CHECK(whole.loss_weight[0] == kernels_mse_weight(8, N, P), "loss weight");
  // position of token 33 = (1, 2, 3) in a 3x4x5 grid; x0 recovered from x_t - t v
  CHECK(whole.pos[33 * 3] == 1 && whole.pos[33 * 3 + 1] == 2 && whole.pos[33 * 3 + 2] == 3, "pos");
  double maxerr = 0, s1 = 0, s2 = 0;
  float t = whole.t[0];
  for (int i = 0; i < N * P; i++) {
    float x0 = tok[i] * (2.0f / 255.0f) - 1.0f;
    maxerr = fmax(maxerr, fabs(whole.x[i] - t * whole.target[i] - x0));
    double e = whole.target[i] + x0;  // the noise
    s1 += e, s2 += e * e;
  }
  CHECK(maxerr < 1e-5, "x_t - t v != x0 (%g)", maxerr);  // float rounding of 3 ops on |x| < 5
  CHECK(fabs(s1 / (N * P)) < 0.15 && fabs(s2 / (N * P) - 1) < 0.25, "noise moments %g %g",
        s1 / (N * P), s2 / (N * P));
  // a different step draws different noise
  CHECK_OK(objective_build(&parts, &mc, &tc, 10, 8, &c, 1));
  CHECK(memcmp(parts.x, whole.x, sizeof(float) * N * P) != 0, "step does not change noise");

  // t: logit-normal moments with the shift off (n = 200000, se of mean logit 2.2e-3)
  tc.t_shift_tokens = 0, tc.t_logit_mean = 0.5f, tc.t_logit_std = 0.8f;
  const int n = 200000;
  double m1 = 0, m2 = 0, tm = 0;
  int dropped = 0;
  for (int i = 0; i < n; i++) {
    double tt = objective_timestep(&tc, 3, i, 1000);
    double lg = log(tt / (1 - tt));
    m1 += lg, m2 += lg * lg, tm += tt;
    dropped += objective_label(&mc, &tc, 3, i, 1) == mc.num_classes;
  }
  CHECK_NEAR(m1 / n, 0.5, 0.012);
  CHECK_NEAR(sqrt(m2 / n - (m1 / n) * (m1 / n)), 0.8, 0.012);
  CHECK_NEAR((double)dropped / n, 0.25, 0.005);  // se 1e-3
  // shift: s = sqrt(4096 / 1024) = 2 gives t' = 2t / (1 + t) for the same draw
  double t0 = objective_timestep(&tc, 3, 99, 4096);
  tc.t_shift_tokens = 1024;
  double t1 = objective_timestep(&tc, 3, 99, 4096), t2 = objective_timestep(&tc, 3, 99, 512);
  CHECK_NEAR(t1, 2 * t0 / (1 + t0), 1e-12);
  CHECK(t2 == t0, "clips shorter than t_shift_tokens are not shifted");

  // errors name the clip
  objective_clip bad = c;
  bad.first_token = 50, bad.len = 20;
  CHECK(objective_build(&parts, &mc, &tc, 0, 1, &bad, 1) == TSR_EINVAL &&
            strstr(err_msg(), "clip 77"),
        "chunk outside: %s", err_msg());
  bad = c, bad.W = 6;
  CHECK(objective_build(&parts, &mc, &tc, 0, 1, &bad, 1) == TSR_EINVAL && strstr(err_msg(), "grid"),
        "grid: %s", err_msg());
  bad = c, bad.label = 5;
  CHECK(objective_build(&parts, &mc, &tc, 0, 1, &bad, 1) == TSR_EINVAL && strstr(err_msg(), "label"),
        "label: %s", err_msg());

  // model.text_pad: every clip gets text_len rows, its kept caption then zero rows (a clip
  // without a caption, or with it dropped, all zeros), on the host and the backend alike
  {
    dit_config mp = mc;
    train_config tp = tc;
    mp.text_dim = 3, mp.text_len = 4, mp.text_pad = 1, tp.caption_dropout = 0.5f;
    float cap[2 * 3] = {1, 2, 3, 4, 5, 6};
    objective_clip two[2] = {c, c};
    two[0].text = cap, two[0].text_tokens = 2, two[0].text_dtype = KERNELS_TOKENS_F32;
    two[1].clip_id = 78;
    objective_batch hb;
    objective_device db;
    CHECK_OK(objective_alloc(&hb, 128, 4, P));
    CHECK_OK(objective_alloc_text(&hb, 3, 16));
    CHECK_OK(objective_device_alloc(&db, kernels_cpu(), 128, 4, P));
    int seen[2] = {0, 0};
    for (int64_t step = 0; step < 16; step++) {
      CHECK_OK(objective_build(&hb, &mp, &tp, step, 2, two, 2));
      int kept = objective_caption_kept(&tp, step, 77);
      seen[kept] = 1;
      CHECK(hb.Lt == 8 && hb.cu_text[1] == 4 && hb.cu_text[2] == 8, "step %lld: Lt %d, cu_text "
            "%d %d", (long long)step, hb.Lt, hb.cu_text[1], hb.cu_text[2]);
      int ok = 1;
      for (int k = 0; k < 8 * 3; k++) ok &= hb.text[k] == (kept && k < 6 ? cap[k] : 0.0f);
      CHECK(ok, "step %lld: padded rows (kept %d)", (long long)step, kept);
      CHECK_OK(objective_device_build(&db, &mp, &tp, step, 2, two, 2));
      CHECK(db.batch.Lt == 8 && !memcmp(db.batch.text, hb.text, sizeof(float) * 8 * 3),
            "step %lld: the backend's padded captions differ from the host's", (long long)step);
    }
    CHECK(seen[0] && seen[1], "16 steps saw a kept and a dropped caption");
    objective_device_free(&db);
    objective_free(&hb);
  }

  // a clip held in runs (a CP placement's segments, objective_device_build_runs): every
  // token's inputs are the rows of the same runs built as chunks on the host (the CPU
  // backend's build is bitwise the host's), and the batch has one clip per clip_of value
  // with its first run's t', label and loss weight
  {
    objective_clip runs[4] = {c, c, c, ch[0]};
    int rs[3][2] = {{0, 10}, {25, 40}, {50, 60}}, clip_of[4] = {0, 0, 0, 1};
    for (int i = 0; i < 3; i++) {
      runs[i].first_token = rs[i][0], runs[i].len = rs[i][1] - rs[i][0];
      runs[i].tokens = tok + (size_t)rs[i][0] * P;
    }
    objective_batch ref;
    CHECK_OK(objective_alloc(&ref, 128, 4, P));
    CHECK_OK(objective_build(&ref, &mc, &tc, 9, 8, runs, 4));
    objective_device rd;
    CHECK_OK(objective_device_alloc(&rd, kernels_cpu(), 128, 4, P));
    CHECK_OK(objective_device_build_runs(&rd, &mc, &tc, 9, 8, runs, clip_of, 4));
    const dit_batch *b = &rd.batch;
    CHECK(b->n_clips == 2 && b->L == 42 && b->cu_seqlens[1] == 35 && b->cu_seqlens[2] == 42 &&
              b->max_len == 35,
          "runs: %d clips, %d tokens, cu %d %d, max_len %d", b->n_clips, b->L, b->cu_seqlens[1],
          b->cu_seqlens[2], b->max_len);
    CHECK(!memcmp(b->x, ref.x, sizeof(float) * 42 * P) &&
              !memcmp(b->target, ref.target, sizeof(float) * 42 * P) &&
              !memcmp(b->pos, ref.pos, sizeof(int32_t) * 42 * 3),
          "runs: x_t, target or positions differ from the runs built as chunks");
    CHECK(b->t[0] == ref.t[0] && ref.t[1] == ref.t[0] && b->t[1] == ref.t[3] && b->labels[0] == ref.labels[0] &&
              b->labels[1] == ref.labels[3] && b->loss_weight[0] == ref.loss_weight[0] &&
              b->loss_weight[1] == ref.loss_weight[3],
          "runs: a clip's t' (%g %g / %g %g), label (%d %d / %d %d) or loss weight (%g %g / %g %g) is not its first run's", b->t[0], b->t[1], ref.t[0], ref.t[3], b->labels[0], b->labels[1], ref.labels[0], ref.labels[3], b->loss_weight[0], b->loss_weight[1], ref.loss_weight[0], ref.loss_weight[3]);
    int bad[4] = {0, 0, 2, 2};  // a clip number skipped
    CHECK(objective_device_build_runs(&rd, &mc, &tc, 9, 8, runs, bad, 4) == TSR_EINVAL,
          "runs: clip_of skipping a clip is refused");
    objective_device_free(&rd);
    objective_free(&ref);
  }

  // upload gives a dit_batch over backend copies
  objective_device dev;
  const kernels_backend *kb = kernels_cpu();
  CHECK_OK(objective_device_alloc(&dev, kb, 128, 4, P));
  CHECK_OK(objective_upload(&dev, &whole, mc.num_classes));
  CHECK(dev.batch.L == N && dev.batch.n_clips == 1 && dev.batch.labels &&
            !memcmp(dev.batch.x, whole.x, sizeof(float) * N * P) &&
            dev.batch.cu_seqlens[1] == N,
        "upload");
  CHECK_OK(objective_upload(&dev, &whole, 0));
  CHECK(dev.batch.labels == NULL, "unconditional batch has no labels");
  objective_device_free(&dev);
  objective_free(&whole), objective_free(&parts);
  return check_done();
}
