// tests/model/test_lora_layout.c — LoRA files in the three key layouts (model/io/lora_layout.h)
// on a small Wan-family model with adapters on every linear a Wan LoRA adapts:
// - golden keys: each layout's file holds exactly the keys ComfyUI's Wan loader looks up
//   (comfy/lora.py model_lora_keys_unet: for the model's weight "diffusion_model.X.weight"
//   it accepts "diffusion_model.X" and "lora_unet_" + X with '.' -> '_', then reads
//   KEY.lora_A/B.weight or KEY.lora_down/up.weight and KEY.alpha), with A (r, in), B (out, r)
//   and alpha the config's; the diffusers file has transformer.<diffusers name> keys and no alpha;
// - merges: each file loaded into a fresh copy of the base and merged gives the weights of
//   the diffusers file's merge bit for bit, and those weights are ComfyUI's rule on the
//   kohya file's own tensors, W + (alpha / r) up down (r = down's rows), within 1e-6;
// - conversions between layouts keep every tensor's bytes; a kohya file without tessera's
//   metadata (as musubi-tuner writes one) gives its config from its tensors and the same merge;
// - refusals: two alphas in one file, an alpha other than the adapters', a module without
//   an original Wan name (the tessera family's adaln).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/safetensors.h"
#include "model/io/lora_io.h"
#include "model/lora.h"
#include "mt.h"

#define TARGETS "to_q,to_k,to_v,to_out.0,ffn.net.0.proj,ffn.net.2," \
                "condition_embedder.time_embedder.linear_1,condition_embedder.time_proj"
enum { RANK = 2 };
static const float ALPHA = 3.0f;

// An adapted module: its diffusers name (after "blocks.{i}." for block modules), the original
// Wan checkpoint's, tessera's tensor, and the linear's in and out (from the config).
typedef struct {
  const char *dif, *orig, *tsr;
  int block;
} module_row;
static const module_row MODULES[] = {
    {"attn1.to_q", "self_attn.q", "q.weight", 1},
    {"attn1.to_k", "self_attn.k", "k.weight", 1},
    {"attn1.to_v", "self_attn.v", "v.weight", 1},
    {"attn1.to_out.0", "self_attn.o", "proj.weight", 1},
    {"attn2.to_q", "cross_attn.q", "cross.q.weight", 1},
    {"attn2.to_k", "cross_attn.k", "cross.k.weight", 1},
    {"attn2.to_v", "cross_attn.v", "cross.v.weight", 1},
    {"attn2.to_out.0", "cross_attn.o", "cross.proj.weight", 1},
    {"ffn.net.0.proj", "ffn.0", "fc1.weight", 1},
    {"ffn.net.2", "ffn.2", "fc2.weight", 1},
    {"condition_embedder.time_embedder.linear_1", "time_embedding.0", "t_embed.fc1.weight", 0},
    {"condition_embedder.time_proj", "time_projection.1", "time_proj.weight", 0},
};
#define NMOD ((int)(sizeof MODULES / sizeof MODULES[0]))

static char dir[] = "/tmp/tsr_lora_layout_XXXXXX";
static char *path(const char *name) {
  static char p[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
  return p[k];
}

// The perturbed base (the same values every call); with adapters of non-zero A and B if lora.
static dit_model *base(int lora) {
  dit_config c = mt_wan_config();
  dit_model *m = NULL;
  CHECK_OK(dit_create(&m, &c, kernels_cpu(), 64, 4));
  CHECK_OK(mt_perturb(m, 11, 0.2f));
  if (!lora) return m;
  lora_config lc = {.rank = RANK, .alpha = ALPHA};
  snprintf(lc.targets, sizeof lc.targets, "%s", TARGETS);
  CHECK_OK(dit_lora_attach(m, &lc, 5));
  size_t n = dit_lora_num_params(m);
  float *h = dit_lora_params(m);  // the CPU backend's memory is the host's
  rng_key key = {3, 2, 1, RNG_STREAM_INIT};
  for (size_t j = 0; j < n; j++) h[j] += 0.3f * (float)rng_normal(&key, j);
  CHECK_OK(dit_lora_refresh(m));
  return m;
}

// The linear's (in, out) of tessera tensor name tsr in block b (or top-level) of m.
static const dit_tensor *tensor_of(const dit_model *m, const module_row *r, int b) {
  char name[128];
  if (r->block) snprintf(name, sizeof name, "blocks.%d.%s", b, r->tsr);
  else snprintf(name, sizeof name, "%s", r->tsr);
  for (int i = 0; i < dit_num_tensors(m); i++)
    if (!strcmp(dit_tensor_info(m, i)->name, name)) return dit_tensor_info(m, i);
  return NULL;
}

// The key ComfyUI's key map gives module r of block b in layout l, for part p.
static void comfy_key(lora_layout l, const module_row *r, int b, lora_part p, char *out, size_t cap) {
  char x[160];  // the original weight's name without "diffusion_model." and ".weight"
  if (r->block) snprintf(x, sizeof x, "blocks.%d.%s", b, r->orig);
  else snprintf(x, sizeof x, "%s", r->orig);
  static const char *const SUF[3][3] = {{".lora_A.weight", ".lora_B.weight", ""},
                                        {".lora_A.weight", ".lora_B.weight", ".alpha"},
                                        {".lora_down.weight", ".lora_up.weight", ".alpha"}};
  if (l == LORA_LAYOUT_DIFFUSERS) {
    if (r->block) snprintf(out, cap, "transformer.blocks.%d.%s%s", b, r->dif, SUF[0][p]);
    else snprintf(out, cap, "transformer.%s%s", r->dif, SUF[0][p]);
  } else if (l == LORA_LAYOUT_WAN) {
    snprintf(out, cap, "diffusion_model.%s%s", x, SUF[1][p]);
  } else {
    for (char *c = x; *c; c++) *c = *c == '.' ? '_' : *c;
    snprintf(out, cap, "lora_unet_%s%s", x, SUF[2][p]);
  }
}

// The file at p in layout l has exactly the golden keys, shapes and alphas.
static void check_keys(const dit_model *m, lora_layout l, const char *p) {
  st_reader *r = NULL;
  CHECK_OK(st_open(&r, p));
  if (!r) return;
  int depth = mt_wan_config().depth, want = 0;
  for (int i = 0; i < NMOD; i++)
    for (int b = 0; b < (MODULES[i].block ? depth : 1); b++) {
      const dit_tensor *w = tensor_of(m, &MODULES[i], b);
      int64_t in = w->shape[0], out = w->shape[1];
      char k[256];
      for (int part = 0; part < (l == LORA_LAYOUT_DIFFUSERS ? 2 : 3); part++, want++) {
        comfy_key(l, &MODULES[i], b, (lora_part)part, k, sizeof k);
        const st_tensor *t = st_find(r, k);
        CHECK(t != NULL, "%s: no key %s", lora_layout_name(l), k);
        if (!t) continue;
        if (part == LORA_PART_ALPHA) {
          CHECK(t->ndim == 0 && t->dtype == ST_F32 && *(const float *)t->data == ALPHA,
                "%s: %s is no F32 scalar %g", lora_layout_name(l), k, ALPHA);
          continue;
        }
        int64_t d0 = part == LORA_PART_DOWN ? RANK : out, d1 = part == LORA_PART_DOWN ? in : RANK;
        CHECK(t->ndim == 2 && t->shape[0] == d0 && t->shape[1] == d1,
              "%s: %s is (%lld, %lld), want (%lld, %lld)", lora_layout_name(l), k,
              (long long)t->shape[0], (long long)t->shape[1], (long long)d0, (long long)d1);
      }
    }
  CHECK(st_count(r) == want, "%s: %d tensors, want %d", lora_layout_name(l), st_count(r), want);
  const char *meta = st_meta(r, "lora_adapter_metadata");
  CHECK((meta != NULL) == (l == LORA_LAYOUT_DIFFUSERS), "%s: lora_adapter_metadata %s",
        lora_layout_name(l), meta ? "present" : "absent");
  st_close(&r);
}

// The base's weights with the adapters of file p merged (a fresh copy of the base), host floats.
static float *merged(const char *p) {
  dit_model *m = base(0);
  size_t n = dit_num_params(m);
  float *w = malloc(n * sizeof *w);
  CHECK_OK(lora_load(m, p));
  CHECK_OK(dit_lora_merge(m));
  memcpy(w, dit_params(m), n * sizeof *w);
  dit_free(&m);
  return w;
}

static int same(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof *a); }

// ComfyUI's merge of the kohya file p, W (out, in) += (alpha / r) up down, against merged
// weights w (tessera's (in, out)); the largest relative error over every adapted linear.
static double comfy_error(const dit_model *m0, const char *p, const float *w) {
  st_reader *r = NULL;
  CHECK_OK(st_open(&r, p));
  if (!r) return INFINITY;
  const float *W0 = dit_params((dit_model *)m0);
  double worst = 0;
  for (int i = 0; i < NMOD; i++)
    for (int b = 0; b < (MODULES[i].block ? mt_wan_config().depth : 1); b++) {
      const dit_tensor *t = tensor_of(m0, &MODULES[i], b);
      char kd[256], ku[256], ka[256];
      comfy_key(LORA_LAYOUT_KOHYA, &MODULES[i], b, LORA_PART_DOWN, kd, sizeof kd);
      comfy_key(LORA_LAYOUT_KOHYA, &MODULES[i], b, LORA_PART_UP, ku, sizeof ku);
      comfy_key(LORA_LAYOUT_KOHYA, &MODULES[i], b, LORA_PART_ALPHA, ka, sizeof ka);
      const st_tensor *down = st_find(r, kd), *up = st_find(r, ku), *al = st_find(r, ka);
      if (!down || !up || !al) return INFINITY;
      const float *D = down->data, *U = up->data;
      int64_t in = t->shape[0], out = t->shape[1], rk = down->shape[0];
      double s = *(const float *)al->data / (double)rk;
      for (int64_t o = 0; o < out; o++)
        for (int64_t x = 0; x < in; x++) {
          double d = 0;
          for (int64_t k = 0; k < rk; k++) d += (double)U[o * rk + k] * D[k * in + x];
          double want = W0[t->offset + x * out + o] + s * d, got = w[t->offset + x * out + o];
          double e = fabs(got - want) / (fabs(want) > 1 ? fabs(want) : 1);
          if (e > worst) worst = e;
        }
    }
  st_close(&r);
  return worst;
}

// A copy of the kohya file src without any metadata (another tool's file); with bad_alpha,
// the first alpha tensor 2 instead (two alphas in one file).
static void strip_meta(const char *src, const char *dst, int bad_alpha) {
  st_reader *r = NULL;
  st_writer *w = NULL;
  static const float two = 2.0f;
  CHECK_OK(st_open(&r, src));
  CHECK_OK(st_writer_new(&w));
  int altered = 0;
  for (int i = 0; r && w && i < st_count(r); i++) {
    const st_tensor *t = st_at(r, i);
    int alter = bad_alpha && !altered && strstr(t->name, ".alpha");
    altered |= alter;
    CHECK_OK(st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, alter ? &two : t->data));
  }
  CHECK_OK(st_writer_commit(w, dst));
  st_writer_free(&w);
  st_close(&r);
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  dit_model *m = base(1), *m0 = base(0);
  const char *files[3] = {"diffusers.safetensors", "wan.safetensors", "kohya.safetensors"};
  for (int l = 0; l < 3; l++) {
    CHECK_OK(lora_save_as(m, path(files[l]), "test base", NULL, (lora_layout)l, NULL));
    check_keys(m0, (lora_layout)l, path(files[l]));
    st_reader *r = NULL;
    CHECK_OK(st_open(&r, path(files[l])));
    CHECK(r && lora_layout_of(r) == (lora_layout)l, "%s: layout told from its keys", files[l]);
    st_close(&r);
  }
  size_t n = dit_num_params(m0);
  float *ref = merged(path(files[0]));
  for (int l = 1; l < 3; l++) {
    float *w = merged(path(files[l]));
    CHECK(same(w, ref, n), "%s: merged weights differ from the diffusers file's", files[l]);
    free(w);
  }
  double e = comfy_error(m0, path(files[2]), ref);
  CHECK(e <= 1e-6, "ComfyUI's rule on the kohya file: relative error %.3g", e);
  printf("merge: wan and kohya bitwise the diffusers file's; ComfyUI's rule within %.2g\n", e);

  // conversions: diffusers -> kohya -> wan -> diffusers keep every tensor's bytes
  CHECK_OK(lora_convert_file(path(files[0]), path("k2.safetensors"), LORA_LAYOUT_KOHYA));
  CHECK_OK(lora_convert_file(path("k2.safetensors"), path("w2.safetensors"), LORA_LAYOUT_WAN));
  CHECK_OK(lora_convert_file(path("w2.safetensors"), path("d2.safetensors"), LORA_LAYOUT_DIFFUSERS));
  const char *pairs[3][2] = {{"k2.safetensors", "kohya.safetensors"},
                             {"w2.safetensors", "wan.safetensors"},
                             {"d2.safetensors", "diffusers.safetensors"}};
  for (int i = 0; i < 3; i++) {
    st_reader *a = NULL, *b = NULL;
    CHECK_OK(st_open(&a, path(pairs[i][0])));
    CHECK_OK(st_open(&b, path(pairs[i][1])));
    int ok = a && b && st_count(a) == st_count(b);
    for (int j = 0; ok && j < st_count(a); j++) {
      const st_tensor *x = st_at(a, j), *y = st_find(b, x->name);
      ok = y && x->nbytes == y->nbytes && !memcmp(x->data, y->data, x->nbytes);
    }
    CHECK(ok, "converted %s: the tensors of %s", pairs[i][0], pairs[i][1]);
    st_close(&a), st_close(&b);
  }
  check_keys(m0, LORA_LAYOUT_KOHYA, path("k2.safetensors"));

  // a kohya file of another tool: the config from its tensors
  strip_meta(path(files[2]), path("bare.safetensors"), 0);
  lora_config lc;
  CHECK_OK(lora_read_config(path("bare.safetensors"), &lc, NULL, 0));
  CHECK(lc.rank == RANK && lc.alpha == ALPHA, "bare kohya file: rank %d alpha %g", lc.rank, lc.alpha);
  printf("bare kohya file's targets: %s\n", lc.targets);
  float *w = merged(path("bare.safetensors"));
  CHECK(same(w, ref, n), "bare kohya file: merged weights differ from the diffusers file's");
  free(w);

  // refusals
  strip_meta(path(files[2]), path("two.safetensors"), 1);
  CHECK(lora_read_config(path("two.safetensors"), &lc, NULL, 0) == TSR_EFORMAT &&
            strstr(err_msg(), "share one alpha"), "two alphas: %s", err_msg());
  dit_model *x = base(1);
  CHECK(lora_load(x, path("two.safetensors")) == TSR_EMISMATCH && strstr(err_msg(), ".alpha"),
        "an alpha other than the adapters': %s", err_msg());
  dit_free(&x);
  {
    dit_config c = mt_config();  // the tessera family: adaln has no original Wan name
    dit_model *t = NULL;
    lora_config tl = {.rank = 2, .alpha = 2.0f, .targets = "to_q,adaln"};
    CHECK_OK(dit_create(&t, &c, kernels_cpu(), 64, 4));
    CHECK_OK(dit_lora_attach(t, &tl, 1));
    CHECK(lora_save_as(t, path("t.safetensors"), "x", NULL, LORA_LAYOUT_KOHYA, NULL) == TSR_EINVAL &&
              strstr(err_msg(), "adaln"), "adaln in kohya: %s", err_msg());
    CHECK(access(path("t.safetensors"), F_OK) != 0, "nothing written on refusal");
    dit_free(&t);
  }
  lora_layout l;
  CHECK(lora_layout_parse("comfy", &l) == TSR_EINVAL && strstr(err_msg(), "kohya"), "%s", err_msg());

  free(ref);
  dit_free(&m), dit_free(&m0);
  const char *all[] = {"diffusers.safetensors", "wan.safetensors", "kohya.safetensors", "k2.safetensors",
                       "w2.safetensors", "d2.safetensors", "bare.safetensors", "two.safetensors"};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) unlink(path(all[i]));
  rmdir(dir);
  return check_done();
}
