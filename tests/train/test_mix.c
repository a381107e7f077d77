// tests/train/test_mix.c — dataset mixes (model/train/mix.h) without stores: the INI reader
// (paths resolved, every refusal named by file, line and store), epoch quotas and held-out
// counts against their closed forms, and the mix sampler: every epoch draws each store its
// quota exactly, each clip floor or ceil(quota / clips) times; counted over 4000 batches the
// per-store shares match quota / epoch within 0.5 % (they are exact at every epoch's end)
// and each clip of a store drawn half its clips an epoch comes 200 +- 50 times in 400
// epochs (Binomial(400, 1/2): sd 10, so 5 sd); a one-store mix is the plain sampler;
// seeking a saved (epoch, pos) continues with the same batches.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"
#include "model/train/data.h"
#include "model/train/mix.h"

static char dir[] = "/tmp/tessera-mix.XXXXXX";

static const char *write_ini(const char *name, const char *text) {
  return scratch_write(dir, name, text);
}

static void test_read(void) {
  mix_spec m;
  const char *p = write_ini("ok.ini", "; a mix\n[store.clips]\npath = /data/clips\nweight = 3\n"
                                      "[store.long]\npath = long-store  # beside the INI\n"
                                      "repeat = 2\n[store.plain]\npath = p\n");
  CHECK(mix_is_spec(p) && !mix_is_spec(dir), "a file is a mix, a folder is not");
  CHECK_OK(mix_read(p, &m));
  CHECK(m.n == 3, "%d stores", m.n);
  if (m.n == 3) {
    char want[4200];
    snprintf(want, sizeof want, "%s/long-store", dir);
    CHECK(!strcmp(m.store[0].name, "clips") && !strcmp(m.store[0].path, "/data/clips"),
          "store 0: %s %s", m.store[0].name, m.store[0].path);
    CHECK(m.store[0].weight == 3 && m.store[0].repeat == 0, "weight 3");
    CHECK(!strcmp(m.store[1].path, want), "relative to the INI's folder: %s", m.store[1].path);
    CHECK(m.store[1].repeat == 2 && m.store[1].weight == 0, "repeat 2");
    CHECK(m.store[2].repeat == 1, "neither key: repeat 1");
  }
  mix_free(&m);
  static const struct {
    const char *text, *want;
  } bad[] = {
      {"path = x\n", "bad.ini:1: key 'path' before any [store.NAME] section"},
      {"[stores]\npath = x\n", "bad.ini:2: section [stores]"},
      {"[store.a]\npath = x\nsize = 3\n", "bad.ini:3: store 'a': unknown key 'size'"},
      {"[store.a]\npath = x\nweight = 1\nrepeat = 2\n", "store 'a' has both weight and repeat"},
      {"[store.a]\nweight = 1\n", "store 'a' has no path"},
      {"[store.a]\npath = x\nweight = 0\n", "bad.ini:3: store 'a': weight '0' is not a number > 0"},
      {"[store.a]\npath = x\nweight = nan\n", "weight 'nan' is not a number > 0"},
      {"[store.a]\npath = x\nrepeat = 1.5\n", "repeat '1.5' is not an integer in 1..1000000"},
      {"[store.a]\npath = x\n[store.b]\npath = y\n[store.a]\npath = z\n",
       "bad.ini:6: store 'a' is listed twice"},
      {"[store.a]\npath = x\npath = y\n", "key 'path' given twice"},
      {"; nothing\n", "lists no store"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    p = write_ini("bad.ini", bad[i].text);
    tsr_status st = mix_read(p, &m);
    CHECK(st != TSR_OK && strstr(err_msg(), bad[i].want), "case %zu: %s: got '%s'", i,
          bad[i].want, err_msg());
    err_clear();
  }
}

static mix_spec spec3(double w0, double w1, int64_t r2) {
  static mix_store st[3];
  memset(st, 0, sizeof st);
  snprintf(st[0].name, sizeof st[0].name, "a");
  snprintf(st[1].name, sizeof st[1].name, "b");
  snprintf(st[2].name, sizeof st[2].name, "c");
  st[0].weight = w0, st[1].weight = w1, st[2].repeat = r2;
  return (mix_spec){.path = "t.ini", .n = 3, .store = st};
}

static void test_quotas(void) {
  // weighted a:b = 3:1 share their 10 + 6 clips (12 and 4); c: 2 passes over its 5
  mix_spec m = spec3(3, 1, 2);
  int64_t clips[3] = {10, 6, 5}, q[3], v[3];
  CHECK_OK(mix_quotas(&m, clips, q));
  CHECK(q[0] == 12 && q[1] == 4 && q[2] == 10, "quotas %lld %lld %lld", (long long)q[0],
        (long long)q[1], (long long)q[2]);
  // equal weights over 10 clips: 10/3 each, the one left over to the earliest store
  mix_spec e = spec3(1, 1, 0);
  e.store[2].weight = 1;
  int64_t ten[3] = {4, 3, 3};
  CHECK_OK(mix_quotas(&e, ten, q));
  CHECK(q[0] == 4 && q[1] == 3 && q[2] == 3, "largest remainders %lld %lld %lld",
        (long long)q[0], (long long)q[1], (long long)q[2]);
  // a weight too small for one draw is refused, naming the store
  m = spec3(1000, 1e-3, 1);
  CHECK(mix_quotas(&m, clips, q) == TSR_EINVAL && strstr(err_msg(), "store 'b' (weight 0.001)"),
        "no draw: %s", err_msg());
  err_clear();
  // held out: 5 of 3 stores: one each, then 2 by quotas 12:4:10 (12/26*2 = 0.92, 4/26*2 =
  // 0.31, 10/26*2 = 0.77: the largest remainders are a's and c's)
  m = spec3(3, 1, 2);
  CHECK_OK(mix_val_counts(&m, clips, 5, v));
  CHECK(v[0] == 2 && v[1] == 1 && v[2] == 2, "val %lld %lld %lld", (long long)v[0],
        (long long)v[1], (long long)v[2]);
  CHECK_OK(mix_val_counts(&m, clips, 2, v));  // fewer than stores: by share alone
  CHECK(v[0] == 1 && v[1] == 0 && v[2] == 1, "val of 2: %lld %lld %lld", (long long)v[0],
        (long long)v[1], (long long)v[2]);
}

// `index stats DATASET.ini`'s epoch: the quotas of mix_quotas and their sum; a store
// without clips is refused by name before the quotas are counted.
static void test_epoch_draws(void) {
  mix_spec m = spec3(3, 1, 2);
  int64_t clips[3] = {10, 6, 5}, q[3], draws = -1;
  CHECK_OK(mix_epoch_draws(&m, clips, q, &draws));
  CHECK(q[0] == 12 && q[1] == 4 && q[2] == 10 && draws == 26, "quotas %lld %lld %lld, %lld",
        (long long)q[0], (long long)q[1], (long long)q[2], (long long)draws);
  int64_t none[3] = {10, 0, 5};
  CHECK(mix_epoch_draws(&m, none, q, &draws) == TSR_EINVAL &&
            strstr(err_msg(), "mix t.ini: store 'b' () has no clips"),
        "no clips: %s", err_msg());
  err_clear();
}

// Draws counted by store and clip over `batches` batches of B (n_parts stores, lo, quota);
// also checks every finished epoch's counts exactly.
static void count_draws(int n_parts, const int64_t *lo, const int64_t *quota, int64_t B,
                        int batches, int64_t *per_store, int64_t *per_clip) {
  data_sampler s;
  CHECK_OK(data_sampler_init_mix(&s, n_parts, lo, quota, 5));
  int64_t L = s.n, got, handed = 0, *batch = malloc((size_t)B * sizeof *batch);
  int64_t *epoch_clip = calloc((size_t)lo[n_parts], sizeof *epoch_clip);
  for (int k = 0; k < batches; k++) {
    CHECK_OK(data_sampler_next(&s, B, batch, &got));
    for (int64_t i = 0; i < got; i++) {
      int p = 0;
      while (batch[i] >= lo[p + 1]) p++;
      per_store[p]++;
      per_clip[batch[i]]++;
      epoch_clip[batch[i]]++;
    }
    handed += got;
    if (handed % L) continue;
    for (int p = 0; p < n_parts; p++) {  // an epoch ended: each store its quota, exactly
      int64_t m = lo[p + 1] - lo[p], sum = 0;
      for (int64_t c = lo[p]; c < lo[p + 1]; c++) {
        sum += epoch_clip[c];
        CHECK(epoch_clip[c] == quota[p] / m || epoch_clip[c] == quota[p] / m + 1,
              "clip %lld drawn %lld times in an epoch (quota %lld of %lld clips)", (long long)c,
              (long long)epoch_clip[c], (long long)quota[p], (long long)m);
      }
      CHECK(sum == quota[p], "store %d: %lld draws in an epoch, quota %lld", p, (long long)sum,
            (long long)quota[p]);
    }
    memset(epoch_clip, 0, (size_t)lo[n_parts] * sizeof *epoch_clip);
  }
  free(batch);
  free(epoch_clip);
  data_sampler_free(&s);
}

static void test_draws(void) {
  // three stores: 40 clips drawn 60 an epoch, 40 drawn 20, 10 repeated 3 times (30)
  const int64_t lo[4] = {0, 40, 80, 90}, quota[3] = {60, 20, 30};
  int64_t per_store[3] = {0}, per_clip[90] = {0};
  const int batches = 4000;  // 110 draws an epoch in batches of 8 (13 x 8 + 6): 286 epochs
  count_draws(3, lo, quota, 8, batches, per_store, per_clip);
  int64_t total = per_store[0] + per_store[1] + per_store[2];
  for (int p = 0; p < 3; p++)
    CHECK_NEAR((double)per_store[p] / (double)total, (double)quota[p] / 110.0, 0.005);
  // store 1: every clip has probability 1/2 an epoch; 400 whole epochs of 110 (one batch an
  // epoch, B = 110)
  memset(per_store, 0, sizeof per_store);
  memset(per_clip, 0, sizeof per_clip);
  count_draws(3, lo, quota, 110, 400, per_store, per_clip);
  int64_t lo1 = 1 << 30, hi1 = 0;
  for (int c = 40; c < 80; c++) {
    if (per_clip[c] < lo1) lo1 = per_clip[c];
    if (per_clip[c] > hi1) hi1 = per_clip[c];
  }
  CHECK(per_store[1] == 20 * 400 && lo1 >= 150 && hi1 <= 250,
        "store 1's clips drawn %lld..%lld times in 400 epochs (expected 200 +- 50)",
        (long long)lo1, (long long)hi1);
  for (int c = 0; c < 90; c++) {
    int64_t want = c < 40 ? 0 : c >= 80 ? 3 * 400 : -1;  // store 0: 1 or 2 an epoch
    if (want > 0) CHECK(per_clip[c] == want, "repeated clip %d drawn %lld", c, (long long)per_clip[c]);
    if (c < 40) CHECK(per_clip[c] >= 400 && per_clip[c] <= 800, "clip %d: %lld", c, (long long)per_clip[c]);
  }
}

static void test_one_store_and_seek(void) {
  // a one-store mix of quota = clips is the plain sampler, epoch after epoch
  const int64_t n = 23, lo[2] = {0, 23}, quota[1] = {23};
  data_sampler a, b;
  CHECK_OK(data_sampler_init(&a, n, 9));
  CHECK_OK(data_sampler_init_mix(&b, 1, lo, quota, 9));
  int64_t x[5], y[5], gx, gy, same = 1;
  for (int k = 0; k < 40; k++) {
    CHECK_OK(data_sampler_next(&a, 5, x, &gx));
    CHECK_OK(data_sampler_next(&b, 5, y, &gy));
    same &= gx == gy && !memcmp(x, y, (size_t)gx * sizeof *x);
  }
  CHECK(same, "a one-store mix draws the plain sampler's batches");
  data_sampler_free(&a);
  data_sampler_free(&b);
  // seek: a sampler moved to a saved (epoch, pos) continues with the same batches
  const int64_t lo2[3] = {0, 7, 19}, q2[2] = {14, 5};
  CHECK_OK(data_sampler_init_mix(&a, 2, lo2, q2, 3));
  for (int k = 0; k < 11; k++) CHECK_OK(data_sampler_next(&a, 4, x, &gx));
  CHECK_OK(data_sampler_init_mix(&b, 2, lo2, q2, 3));
  CHECK_OK(data_sampler_seek(&b, a.epoch, a.pos));
  for (int k = 0; k < 20; k++) {
    CHECK_OK(data_sampler_next(&a, 4, x, &gx));
    CHECK_OK(data_sampler_next(&b, 4, y, &gy));
    CHECK(gx == gy && !memcmp(x, y, (size_t)gx * sizeof *x), "after the seek, batch %d", k);
  }
  CHECK(data_sampler_seek(&b, 0, 20) == TSR_EINVAL, "pos past the epoch's 19 draws");
  data_sampler_free(&a);
  data_sampler_free(&b);
  const int64_t lo3[3] = {0, 0, 4}, q3[2] = {1, 4};
  CHECK(data_sampler_init_mix(&a, 2, lo3, q3, 1) == TSR_EINVAL, "a store without clips");
  data_sampler_free(&a);
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  test_read();
  test_quotas();
  test_epoch_draws();
  test_draws();
  test_one_store_and_seek();
  scratch_remove(dir);
  return check_done();
}
