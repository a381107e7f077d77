// tests/model/test_config.c — presets load, overrides apply, config_to_ini round-trips,
// and every bad input names its key.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "model/config.h"

static char tmpdir[] = "/tmp/tsr_config_XXXXXX";

// Field-wise equality through the INI text (%.9g round-trips floats; structs have padding).
static int same_config(const dit_config *a, const train_config *at, const dit_config *b,
                       const train_config *bt) {
  char *x = config_to_ini(a, at), *y = config_to_ini(b, bt);
  int same = x && y && !strcmp(x, y);
  free(x), free(y);
  return same;
}

static const char *write_conf(const char *name, const char *text) {
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

// config_load must fail and its message must contain `needle`.
static void expect_error(const char *text, char *const *ov, int nov, const char *needle) {
  dit_config m;
  train_config t;
  const char *p = text ? write_conf("bad.conf", text) : NULL;
  tsr_status st = config_load(p, ov, nov, &m, &t);
  CHECK(st != TSR_OK && strstr(err_msg(), needle), "want error with '%s', got %d '%s'", needle, st,
        err_msg());
}

int main(void) {
  if (!mkdtemp(tmpdir)) return 1;
  dit_config m, d;
  train_config t, dt;
  config_defaults(&d, &dt);
  const char *presets[] = {"tiny", "dit-s", "dit-b", "dit-1b"};
  for (int i = 0; i < 4; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/configs/model/%s.conf", TESSERA_SOURCE_DIR, presets[i]);
    CHECK_OK(config_load(path, NULL, 0, &m, &t));
    if (i == 0) {  // tiny.conf spells out the defaults
      CHECK(same_config(&m, &t, &d, &dt), "tiny.conf != config_defaults");
    }
    if (i == 3) CHECK(m.hidden == 2048 && m.depth == 18 && m.heads == 16, "dit-1b shape");
  }

  char *ov[] = {"model.hidden=96", "train.lr=2e-4", "model.heads=6", "train.seed=12345678901"};
  CHECK_OK(config_load(NULL, ov, 4, &m, &t));
  CHECK(m.hidden == 96 && m.heads == 6 && t.lr == 2e-4f && t.seed == 12345678901ll, "overrides");

  // Round trip through the checkpoint text.
  m.num_classes = 10, m.rope_theta = 123.456f, t.t_logit_std = 0.7f;
  char *ini = config_to_ini(&m, &t);
  CHECK(ini != NULL, "config_to_ini");
  dit_config m2;
  train_config t2;
  CHECK_OK(config_from_ini(ini, &m2, &t2));
  CHECK(same_config(&m, &t, &m2, &t2) && m2.num_classes == 10 && m2.rope_theta == 123.456f &&
            t2.t_logit_std == 0.7f, "round trip differs:\n%s", ini);
  free(ini);

  // Errors name the key.
  expect_error("[model]\nhidden = 66\nheads = 4\n", NULL, 0, "model.hidden = 66 is not divisible by model.heads = 4");
  expect_error("[model]\nhidden = 64\nheads = 16\n", NULL, 0, "head dimension");
  expect_error("[model]\nhiden = 64\n", NULL, 0, "unknown key [model] hiden");
  expect_error("[optim]\nlr = 1\n", NULL, 0, "unknown key [optim] lr");
  expect_error("[train]\nlr = fast\n", NULL, 0, "train.lr = 'fast' is not a number");
  expect_error("[model]\ndepth = 2.5\n", NULL, 0, "model.depth = '2.5' is not a whole number");
  expect_error("[model]\ndepth = 0\n", NULL, 0, "model.depth = 0 is out of range");
  expect_error("[train]\nclass_dropout = 1.5\n", NULL, 0, "train.class_dropout");
  expect_error("[model]\nthis line has no equals\n", NULL, 0, "line 2");
  expect_error("[train]\nwarmup = 5000\nsteps = 100\n", NULL, 0, "train.warmup");
  char *bad1[] = {"model.heads"};
  expect_error(NULL, bad1, 1, "expected section.key=value");
  char *bad2[] = {"model.hedas=4"};
  expect_error(NULL, bad2, 1, "unknown key model.hedas");
  char *bad3[] = {"model.heads=x"};
  expect_error(NULL, bad3, 1, "model.heads = 'x'");
  dit_config mm;
  train_config tt;
  CHECK(config_load("/nonexistent/x.conf", NULL, 0, &mm, &tt) == TSR_EIO &&
            strstr(err_msg(), "/nonexistent/x.conf"),
        "missing file: %s", err_msg());
  // The file path is in messages from a file.
  const char *p = write_conf("named.conf", "[model]\nheads = 0\n");
  CHECK(config_load(p, NULL, 0, &mm, &tt) != TSR_OK && strstr(err_msg(), "named.conf") &&
            strstr(err_msg(), "model.heads"),
        "path in message: %s", err_msg());
  remove(write_conf("bad.conf", ""));
  remove(p);
  rmdir(tmpdir);
  return check_done();
}
