// tests/train/test_ckpt_finite.c — no checkpoint holds a non-finite value (issue 24, 6): a
// state with a NaN weight or an Inf Adam moment is refused by ckpt_save, naming the tensor,
// and no file is left at the path (a diverged run used to write its NaN weights); the same
// state when finite is written and read back, metadata checked on the way (ckpt_read_meta).
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "kernels/kernels.h"
#include "model/io/checkpoint.h"

int main(void) {
  const kernels_backend *kb = kernels_cpu();
  dit_config mc;
  train_config tc;
  config_defaults(&mc, &tc);
  mc.hidden = 16, mc.heads = 2, mc.depth = 1, mc.freq_dim = 8, mc.pt = 1, mc.ph = 2, mc.pw = 2;
  dit_model *m = NULL;
  CHECK_OK(dit_create(&m, &mc, kb, 16, 1));
  CHECK_OK(dit_init(m, 3));
  size_t n = dit_num_params(m);
  float *ema = NULL, *am = NULL, *av = NULL;
  CHECK_OK(kb->alloc(kb, (void **)&ema, n * sizeof(float)));
  CHECK_OK(kb->alloc(kb, (void **)&am, n * sizeof(float)));
  CHECK_OK(kb->alloc(kb, (void **)&av, n * sizeof(float)));
  memcpy(ema, dit_params(m), n * sizeof(float));
  memset(am, 0, n * sizeof(float));
  memset(av, 0, n * sizeof(float));
  store_settings s = {.fps_num = 8, .fps_den = 1, .short_side = 32, .pt = 1, .ph = 2, .pw = 2,
                      .channels = 3, .dtype = STORE_DTYPE_U8, .max_seconds = 0};
  ckpt_state cs = {.model = m, .ema = ema, .adam_m = am, .adam_v = av, .mc = &mc, .tc = &tc,
                   .step = 3, .sampler_epoch = 1, .sampler_pos = 2, .store = &s,
                   .store_clips = 5};
  char path[256];
  snprintf(path, sizeof path, "%s/tessera-ckpt-finite-%d.safetensors",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());

  CHECK_OK(ckpt_save(path, &cs));
  ckpt_meta cm;
  CHECK_OK(ckpt_read_meta(path, &cm));
  CHECK(cm.step == 3 && cm.sampler_epoch == 1 && cm.sampler_pos == 2 && cm.clips == 5,
        "metadata read back: step %lld, epoch %lld, pos %lld, clips %lld", (long long)cm.step,
        (long long)cm.sampler_epoch, (long long)cm.sampler_pos, (long long)cm.clips);
  ckpt_meta_free(&cm);
  unlink(path);

  const dit_tensor *t1 = dit_tensor_info(m, 1);
  float keep = dit_params(m)[t1->offset + 1];
  dit_params(m)[t1->offset + 1] = NAN;
  tsr_status st = ckpt_save(path, &cs);
  CHECK(st == TSR_EINVAL && strstr(err_msg(), t1->name) && strstr(err_msg(), "non-finite"),
        "a NaN weight: %s: %s", err_name(st), err_msg());
  CHECK(access(path, F_OK) != 0, "a file was left at %s", path);
  dit_params(m)[t1->offset + 1] = keep;

  av[7] = INFINITY;
  st = ckpt_save(path, &cs);
  CHECK(st == TSR_EINVAL && strstr(err_msg(), "adam_v."), "an Inf moment: %s: %s", err_name(st),
        err_msg());
  CHECK(access(path, F_OK) != 0, "a file was left at %s", path);
  av[7] = 0;
  CHECK_OK(ckpt_save(path, &cs));  // finite again: written
  unlink(path);

  kb->free(kb, ema), kb->free(kb, am), kb->free(kb, av);
  dit_free(&m);
  return check_done();
}
