// tests/train/test_eta.c — the trainer's time left (model/train/eta.h) against closed forms:
// the events due between a step and the stop (multiples of the cadence, and the last step),
// each kind at its measured mean, and the estimates before a kind is measured.
#include "check.h"
#include "model/config.h"
#include "model/train/eta.h"

int main(void) {
  // multiples of 10 in (0, 25] = 10, 20; and 25 itself (the last step)
  CHECK(train_eta_due(0, 25, 10) == 3, "due(0, 25, 10) = %lld", (long long)train_eta_due(0, 25, 10));
  CHECK(train_eta_due(10, 20, 10) == 1, "due(10, 20, 10): only 20");
  CHECK(train_eta_due(9, 20, 10) == 2, "due(9, 20, 10): 10 and 20");
  CHECK(train_eta_due(20, 20, 10) == 0 && train_eta_due(3, 20, 0) == 0, "none due");
  dit_config m;
  train_config t;
  config_defaults(&m, &t);
  t.val_every = 10, t.sample_every = 50, t.ckpt_every = 20, t.val_clips = 8, t.global_batch = 4;
  t.sample_steps = 30, t.sample_cfg = 1.0f;
  train_eta e = {0};
  CHECK(train_eta_left(&e, &t, 0, 100, 1) < 0, "no step measured: unknown");
  // measured: 0.5 s a step, 3 s a validation, 20 s a sample, 1 s a checkpoint
  e = (train_eta){.step_s = 5, .steps = 10, .val_s = 6, .vals = 2, .sample_s = 40,
                  .samples = 2, .ckpt_s = 2, .ckpts = 2};
  // at step 50 of 100, its validation done: 50 steps, validations at 60..100 (5), samples
  // at 50 and 100 (2), checkpoints at 60, 80, 100 (3)
  double want = 50 * 0.5 + 5 * 3.0 + 2 * 20.0 + 3 * 1.0;
  CHECK_NEAR(train_eta_left(&e, &t, 50, 100, 1), want, 1e-12);
  CHECK_NEAR(train_eta_left(&e, &t, 50, 100, 0), want - 15, 1e-12);  // no validation clips
  // not measured yet: a validation 5 levels x 8/4 batches of forwards (a third of a step
  // each), a sample 30 forwards (twice with guidance); at step 30 of 40: the validation at
  // 40, and the sample of the last step
  e = (train_eta){.step_s = 3, .steps = 2};
  double fwd = 1.5 / 3;
  want = 10 * 1.5 + 1 * (5 * fwd * 2) + 1 * (30 * fwd);
  CHECK_NEAR(train_eta_left(&e, &t, 30, 40, 1), want, 1e-12);
  t.sample_cfg = 3.0f;
  CHECK_NEAR(train_eta_left(&e, &t, 49, 50, 0), 1.5 + 2 * 30 * fwd, 1e-12);
  return check_done();
}
