// tests/model/test_config.c — presets load, overrides apply, config_to_ini round-trips,
// and every bad input names its key.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"
#include "model/config.h"
#include "model/dit.h"
#include "sched/placement.h"

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
  return scratch_write(tmpdir, name, text);
}

// config_load must fail and its message must contain `needle`.
static void expect_error(const char *text, char *const *ov, int nov, const char *needle) {
  dit_config m;
  train_config t;
  const char *p = text ? write_conf("bad.conf", text) : NULL;
  tsr_status st = config_load(p, ov, nov, &m, &t, NULL);
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
    CHECK_OK(config_load(path, NULL, 0, &m, &t, NULL));  // presets: test_config_presets.c
    if (i == 0) {  // tiny's values are the defaults
      CHECK(same_config(&m, &t, &d, &dt), "tiny.conf != config_defaults");
    }
    if (i == 3) CHECK(m.hidden == 2048 && m.depth == 18 && m.heads == 16, "dit-1b shape");
  }
  // The Wan presets: the parameter counts of the published models
  // (diffusers' WanTransformer3DModel of each config, counted on the meta device).
  const char *wan[] = {"wan2.1-t2v-1.3b", "wan2.1-t2v-14b", "wan2.2-ti2v-5b", "wan-tiny"};
  const int64_t wan_params[] = {1418996800, 14288491584, 4999787712, 0};
  for (int i = 0; i < 4; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/configs/model/%s.conf", TESSERA_SOURCE_DIR, wan[i]);
    CHECK_OK(config_load(path, NULL, 0, &m, &t, NULL));
    CHECK(m.family == DIT_FAMILY_WAN, "%s: family wan", wan[i]);
    dit_table tab;
    CHECK_OK(dit_table_make(&m, &tab));
    int64_t n = 0;
    for (int k = 0; k < tab.n; k++) n += (int64_t)tab.t[k].numel;
    CHECK(!wan_params[i] || n == wan_params[i], "%s: %lld parameters, diffusers' model has %lld",
          wan[i], (long long)n, (long long)wan_params[i]);
    dit_table_free(&tab);
  }
  // family = wan needs captions and no labels; a family is a name
  char *wan_labels[] = {"model.family=wan", "model.text_dim=8", "model.text_len=4",
                        "model.num_classes=3"};
  expect_error(NULL, wan_labels, 4, "Wan is conditioned on captions only");
  char *bad_family[] = {"model.family=sora"};
  expect_error(NULL, bad_family, 1, "model.family = 'sora': use tessera or wan");

  char *ov[] = {"model.hidden=96", "train.lr=2e-4", "model.heads=6", "train.seed=12345678901"};
  CHECK_OK(config_load(NULL, ov, 4, &m, &t, NULL));
  CHECK(m.hidden == 96 && m.heads == 6 && t.lr == 2e-4f && t.seed == 12345678901ll, "overrides");

  // train.precision speaks the CLI's dtype names (kernels_dtype_parse): fp32/float32/f32,
  // bf16/bfloat16; the text written back is the canonical one
  const char *spell[][2] = {{"float32", "fp32"}, {"f32", "fp32"}, {"bfloat16", "bf16"}, {"BF16", "bf16"}};
  for (int i = 0; i < 4; i++) {
    char kv[64], *pov[] = {kv};
    snprintf(kv, sizeof kv, "train.precision=%s", spell[i][0]);
    CHECK_OK(config_load(NULL, pov, 1, &m, &t, NULL));
    char *txt = config_to_ini(&m, &t), want[64];
    snprintf(want, sizeof want, "precision = %s", spell[i][1]);
    CHECK(txt && strstr(txt, want), "train.precision=%s is written back as %s", spell[i][0], spell[i][1]);
    free(txt);
  }
  char *bad_prec[] = {"train.precision=fp16"};
  expect_error(NULL, bad_prec, 1, "train.precision = 'fp16'");
  CHECK_OK(config_load(NULL, ov, 4, &m, &t, NULL));

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

  // LoRA keys round-trip; a checkpoint from before them ([lora] absent) trains no adapters.
  char *lov[] = {"lora.rank=4", "lora.alpha=16", "lora.targets=attn1.to_q,ffn.net.2",
                 "lora.format=kohya"};
  CHECK_OK(config_load(NULL, lov, 4, &m, &t, NULL));
  CHECK((ini = config_to_ini(&m, &t)) != NULL, "config_to_ini");
  CHECK_OK(config_from_ini(ini, &m2, &t2));
  CHECK(t2.lora_rank == 4 && t2.lora_alpha == 16.0f &&
            !strcmp(t2.lora_targets, "attn1.to_q,ffn.net.2") && t2.lora_format == 2 &&
            strstr(ini, "format = kohya"), "LoRA keys differ:\n%s", ini);
  *strstr(ini, "[lora]") = '\0';
  CHECK_OK(config_from_ini(ini, &m2, &t2));
  CHECK(t2.lora_rank == 0 && t2.lora_format == 0,
        "a config without [lora] has lora.rank %d, lora.format %d", t2.lora_rank, t2.lora_format);
  char *lfbad[] = {"lora.format=comfy"};
  expect_error(NULL, lfbad, 1, "lora.format = 'comfy'");
  free(ini);
  char *lbad[] = {"lora.rank=4", "lora.targets="};
  expect_error(NULL, lbad, 2, "lora.rank = 4 needs lora.targets");

  // train.placement: a pinned kind is the planner's blockwise pricing with that
  // sched/placement.h kind; metis only where libmetis is built, refused by name otherwise
  const char *kinds[] = {"zigzag", "balanced", "greedy", "metis"};
  for (int i = 0; i < 4; i++) {
    char ov[64];
    snprintf(ov, sizeof ov, "train.placement=%s", kinds[i]);
    char *pov[] = {ov};
    if (i == 3 && PLACE_NKINDS <= PLACE_METIS) {
      expect_error(NULL, pov, 1, "no libmetis (install libmetis-dev");
      continue;
    }
    CHECK_OK(config_load(NULL, pov, 1, &m, &t, NULL));
    CHECK(!strcmp(config_placement_name(t.placement), kinds[i]) &&
              config_cost_place(t.placement) == COST_PLACE_BLOCKWISE &&
              config_cost_pin(t.placement) == place_kind_parse(kinds[i]) + 1,
          "train.placement = %s: place %d, pin %d", kinds[i], config_cost_place(t.placement),
          config_cost_pin(t.placement));
  }
  CHECK(config_cost_pin(TRAIN_PLACE_BLOCKWISE) == 0 && config_cost_pin(TRAIN_PLACE_CONTIGUOUS) == 0 &&
            config_cost_place(TRAIN_PLACE_CONTIGUOUS) == COST_PLACE_EVEN,
        "blockwise and contiguous pin no kind");
  char *pbad[] = {"train.placement=spiral"};
  expect_error(NULL, pbad, 1, "spiral");

  dit_config mm;
  train_config tt;
  // Errors name the key. SHAPE: the required keys but hidden and heads.
#define SHAPE "[model]\ndepth = 2\npt = 1\nph = 4\npw = 4\nchannels = 3\n"
  expect_error(SHAPE "hidden = 66\nheads = 4\n", NULL, 0, "model.hidden = 66 is not divisible by model.heads = 4");
  expect_error(SHAPE "hidden = 64\nheads = 16\n", NULL, 0, "head dimension");
  expect_error("[model]\nhiden = 64\n", NULL, 0, "unknown key [model] hiden");
  expect_error("[optim]\nlr = 1\n", NULL, 0, "unknown key [optim] lr");
  expect_error("[train]\nlr = fast\n", NULL, 0, "train.lr = 'fast' is not a number");
  expect_error("[model]\ndepth = 2.5\n", NULL, 0, "model.depth = '2.5' is not a whole number");
  expect_error("[model]\ndepth = 0\n", NULL, 0, "model.depth = 0 is out of range");
  expect_error("[train]\nclass_dropout = 1.5\n", NULL, 0, "train.class_dropout");
  expect_error("[model]\nthis line has no equals\n", NULL, 0,
               "bad.conf:2: not a 'key = value' line: 'this line has no equals'");
  expect_error(SHAPE "hidden = 64\nheads = 4\n[train]\nwarmup = 5000\nsteps = 100\n", NULL, 0,
               "train.warmup");

  // Issue 9, part 7: no silent defaults, no silent repeats, garbage quoted with file:line.
  expect_error("", NULL, 0, "missing model.hidden, model.depth, model.heads, model.pt");
  expect_error("# only a comment\n[train]\nlr = 1e-3\n", NULL, 0, "missing model.hidden");
  expect_error(SHAPE "hidden = 64\nheads = 4\nhidden = 128\n", NULL, 0,
               "bad.conf:9: model.hidden given twice (lines 7 and 9)");
  expect_error("hidden = 64\n", NULL, 0, "bad.conf:1: key 'hidden' before any [model], [train] or [lora]");
  expect_error("[model]\n[]\n", NULL, 0, "bad.conf:2: not a 'key = value' line: '[]'");
  expect_error("[model]\n= 5\n", NULL, 0, "bad.conf:2: not a 'key = value' line: '= 5'");
  expect_error("[model\n", NULL, 0, "bad.conf:1: not a 'key = value' line: '[model'");
  char *twice[] = {"train.lr=1e-3", "train.lr=2e-3"};  // later options override earlier ones
  CHECK_OK(config_load(NULL, twice, 2, &mm, &tt, NULL));
  CHECK(tt.lr == 2e-3f, "the last --set wins");
  // Numbers: NaN, infinities, overflow, hex and trailing text are refused.
  expect_error("[train]\nlr = nan\n", NULL, 0, "train.lr = 'nan' is not a number");
  expect_error("[train]\nlr = inf\n", NULL, 0, "train.lr = inf is out of range");
  expect_error("[train]\nlr = 1e999\n", NULL, 0, "train.lr = 1e999 is out of range");
  expect_error("[train]\nseed = 99999999999999999999\n", NULL, 0, "train.seed = 99999999999999999999 is out of range");
  expect_error("[train]\nsteps = 0x10\n", NULL, 0, "train.steps = '0x10' is not a whole number");
  expect_error("[train]\nmem_tokens = 1000000000000\n", NULL, 0, "train.mem_tokens");
  char *nan_set[] = {"train.lr=NaN"};
  expect_error(NULL, nan_set, 1, "train.lr = 'NaN' is not a number");
  // A file with the required keys only: the rest comes from the defaults, and says so.
  {
    const char *q = write_conf("min.conf", SHAPE "hidden = 64\nheads = 4 ; inline\n"
                                           "[train]\nlr = 2e-3  # inline too\n");
    char *defaults = NULL;
    char *ov1[] = {"train.warmup=5", "model.depth=3"};
    CHECK_OK(config_load(q, ov1, 2, &mm, &tt, &defaults));
    CHECK(tt.lr == 2e-3f && tt.warmup == 5 && mm.depth == 3 && mm.heads == 4, "min.conf values");
    CHECK(defaults && !strncmp(defaults, "model.mlp_ratio, model.freq_dim, model.num_classes, ", 52) &&
              !strstr(defaults, "train.lr,") && !strstr(defaults, "train.warmup") &&
              !strstr(defaults, "model.depth") && strstr(defaults, "train.steps") &&
              strstr(defaults, "train.log_every"),
          "defaults list: %s", defaults ? defaults : "(none)");
    free(defaults);
    remove(q);
  }
  // A checkpoint's config text must hold every key (config_to_ini writes them all).
  CHECK(config_from_ini("[model]\nhidden = 64\n", &mm, &tt) == TSR_EFORMAT &&
            strstr(err_msg(), "checkpoint config: key model.depth missing"),
        "%s", err_msg());
  char *bad1[] = {"model.heads"};
  expect_error(NULL, bad1, 1, "expected section.key=value");
  char *bad2[] = {"model.hedas=4"};
  expect_error(NULL, bad2, 1, "unknown key model.hedas");
  char *bad3[] = {"model.heads=x"};
  expect_error(NULL, bad3, 1, "model.heads = 'x'");
  CHECK(config_load("/nonexistent/x.conf", NULL, 0, &mm, &tt, NULL) == TSR_EIO &&
            strstr(err_msg(), "/nonexistent/x.conf"),
        "missing file: %s", err_msg());
  // The file path is in messages from a file.
  const char *p = write_conf("named.conf", "[model]\nheads = 0\n");
  CHECK(config_load(p, NULL, 0, &mm, &tt, NULL) != TSR_OK && strstr(err_msg(), "named.conf") &&
            strstr(err_msg(), "model.heads"),
        "path in message: %s", err_msg());
  remove(write_conf("bad.conf", ""));
  remove(p);
  rmdir(tmpdir);
  return check_done();
}
