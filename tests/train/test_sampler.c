// tests/train/test_sampler.c — epoch sampler (model/train/data.h) and LR schedule (model/train/lr.c).
// Sampler: pure function of (seed, epoch); every clip exactly once per epoch, never twice
// in a batch; a sampler seeked to a saved position continues with the same batches.
// LR: the closed form of model/train/lr.h at warmup, peak, mid-cosine and end (exact up
// to 1e-12 relative: the schedule is computed in double).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/train/data.h"
#include "model/train/lr.h"

static void test_permutation(void) {
  enum { N = 97 };
  int64_t a[N], b[N], c[N];
  data_epoch_permutation(7, 3, N, a);
  data_epoch_permutation(7, 3, N, b);
  data_epoch_permutation(7, 4, N, c);
  CHECK(!memcmp(a, b, sizeof a), "same (seed, epoch) gives the same permutation");
  CHECK(memcmp(a, c, sizeof a), "another epoch gives another permutation");
  data_epoch_permutation(8, 3, N, c);
  CHECK(memcmp(a, c, sizeof a), "another seed gives another permutation");
  int seen[N] = {0}, fixed = 0;
  for (int i = 0; i < N; i++) {
    if (a[i] >= 0 && a[i] < N) seen[a[i]]++;
    fixed += a[i] == i;
  }
  for (int i = 0; i < N; i++) CHECK(seen[i] == 1, "clip %d seen %d times", i, seen[i]);
  CHECK(fixed < 10, "shuffled: %d fixed points of 97", fixed);
}

// Runs `steps` batches of B over n clips; checks coverage per epoch and no repeats in a
// batch; returns the concatenated sequence in seq (steps * B, -1 padded).
static void run_batches(int64_t n, int64_t B, int steps, uint64_t seed, int64_t *seq) {
  data_sampler s;
  CHECK_OK(data_sampler_init(&s, n, seed));
  int64_t *cnt = calloc((size_t)n, sizeof *cnt), *batch = malloc((size_t)B * sizeof *batch);
  int64_t handed = 0, got;
  for (int k = 0; k < steps; k++) {
    CHECK_OK(data_sampler_next(&s, B, batch, &got));
    CHECK(got >= 1 && got <= B, "batch size %lld", (long long)got);
    for (int64_t i = 0; i < B; i++) seq[k * B + i] = i < got ? batch[i] : -1;
    for (int64_t i = 0; i < got; i++)
      for (int64_t j = 0; j < i; j++) CHECK(batch[i] != batch[j], "clip twice in a batch");
    for (int64_t i = 0; i < got; i++) cnt[batch[i]]++;
    handed += got;
    if (handed % n == 0) {  // an epoch is complete: every clip exactly epoch times
      for (int64_t i = 0; i < n; i++)
        CHECK(cnt[i] == handed / n, "clip %lld seen %lld times after %lld epochs", (long long)i,
              (long long)cnt[i], (long long)(handed / n));
    }
  }
  CHECK(handed >= n, "ran at least one epoch");
  free(cnt);
  free(batch);
  data_sampler_free(&s);
}

static void test_batches_and_resume(void) {
  const int64_t n = 23, B = 5;
  const int steps = 30;  // 5 epochs of 5 batches (5,5,5,5,3)
  int64_t *a = malloc(steps * B * sizeof *a), *b = malloc(steps * B * sizeof *b);
  run_batches(n, B, steps, 11, a);
  run_batches(n, B, steps, 11, b);
  CHECK(!memcmp(a, b, steps * B * sizeof *a), "deterministic");
  // Resume: stop after k batches, save (epoch, pos), seek a fresh sampler, continue.
  for (int k = 1; k < steps; k += 4) {
    data_sampler s, t;
    CHECK_OK(data_sampler_init(&s, n, 11));
    int64_t batch[5], got;
    for (int i = 0; i < k; i++) CHECK_OK(data_sampler_next(&s, B, batch, &got));
    CHECK_OK(data_sampler_init(&t, n, 11));
    CHECK_OK(data_sampler_seek(&t, s.epoch, s.pos));
    for (int i = k; i < steps; i++) {
      CHECK_OK(data_sampler_next(&t, B, batch, &got));
      for (int64_t j = 0; j < B; j++)
        CHECK((j < got ? batch[j] : -1) == a[i * B + j], "resume after %d: step %d differs", k, i);
    }
    data_sampler_free(&s);
    data_sampler_free(&t);
  }
  run_batches(3, 8, 4, 1, b);  // batch larger than the store: one epoch per batch
  for (int k = 0; k < 4; k++) CHECK(b[k * 8 + 3] == -1 && b[k * 8 + 2] >= 0, "3 clips a batch");
  data_sampler s;
  CHECK(data_sampler_init(&s, 0, 1) == TSR_EINVAL, "no clips");
  data_sampler_free(&s);
  CHECK_OK(data_sampler_init(&s, 4, 1));
  CHECK(data_sampler_seek(&s, 0, 5) == TSR_EINVAL, "pos > n");
  CHECK(data_sampler_seek(&s, -1, 0) == TSR_EINVAL, "negative epoch");
  data_sampler_free(&s);
  free(a);
  free(b);
}

static void test_lr(void) {
  train_config t = {.steps = 1000, .warmup = 100, .lr = 1e-3f, .min_lr = 1e-4f};
  double lr = t.lr, mn = t.min_lr;
  // EMA warm-up: min(ema_decay, (1 + s) / (10 + s))
  t.ema_decay = 0.999f;
  CHECK_NEAR(ema_decay_at(&t, 0), 0.1, 1e-15);
  CHECK_NEAR(ema_decay_at(&t, 90), 91.0 / 100.0, 1e-15);
  CHECK_NEAR(ema_decay_at(&t, 100000), (double)0.999f, 1e-15);
  CHECK_NEAR(lr_schedule(&t, 0), lr / 100, 1e-15);
  CHECK_NEAR(lr_schedule(&t, 49), lr * 50 / 100, 1e-15);
  CHECK_NEAR(lr_schedule(&t, 99), lr, 1e-15);
  CHECK_NEAR(lr_schedule(&t, 100), lr, 1e-15);                       // cosine starts at peak
  CHECK_NEAR(lr_schedule(&t, 550), mn + (lr - mn) * 0.5, 1e-15);     // half way: mean
  double p = 325.0 / 900.0;
  CHECK_NEAR(lr_schedule(&t, 425), mn + (lr - mn) * 0.5 * (1 + cos(M_PI * p)), 1e-15);
  CHECK_NEAR(lr_schedule(&t, 1000), mn, 1e-15);                      // end of schedule
  CHECK_NEAR(lr_schedule(&t, 5000), mn, 1e-15);                      // beyond: min_lr
  for (int64_t s = 101; s < 1000; s++)
    CHECK(lr_schedule(&t, s) <= lr_schedule(&t, s - 1), "non-increasing after warmup at %lld",
          (long long)s);
  t.warmup = 0;
  CHECK_NEAR(lr_schedule(&t, 0), lr, 1e-15);
  // train.lr_schedule_steps > 0 spans the schedule instead of train.steps (a fresh run's
  // --steps sets it): half way through 200 steps, the mean of lr and min_lr
  t.warmup = 100;
  t.lr_schedule_steps = 300;
  CHECK(lr_schedule_length(&t) == 300, "lr_schedule_length %lld", (long long)lr_schedule_length(&t));
  CHECK_NEAR(lr_schedule(&t, 99), lr, 1e-15);
  CHECK_NEAR(lr_schedule(&t, 200), mn + (lr - mn) * 0.5, 1e-15);
  CHECK_NEAR(lr_schedule(&t, 300), mn, 1e-15);
  t.lr_schedule_steps = 0;
  CHECK(lr_schedule_length(&t) == 1000, "0: train.steps");
}

int main(void) {
  test_permutation();
  test_batches_and_resume();
  test_lr();
  return check_done();
}
