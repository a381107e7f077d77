// tests/model/test_null_caption.c — train.null_caption (model/objective.h
// objective_set_null_caption): a clip whose caption is dropped, or that has none, gets the
// null caption's rows exactly as if they were its caption. Reference: the same clips given
// that embedding as their caption, with caption_dropout 0 and no null caption. Checked
// bitwise on the host batch, on the backend batch (objective_device_build), and through a
// Wan-family model: prediction, loss and every parameter gradient; with model.text_pad 0
// and 1. Without a null caption, a dropped caption still gives no rows (text_pad 0) or
// zero rows (text_pad 1), as before the key existed. A null caption longer than text_len
// is refused.
#include <string.h>

#include "check.h"
#include "mt.h"
#include "model/objective.h"

enum { NCLIP = 3, P = 12, TD = 5, TLEN = 6, NNULL = 2 };

typedef struct {
  double loss;
  float pred[64 * P];
  float *grads;
  int Lt;
  float text[NCLIP * TLEN * TD];
} run_out;

// Builds the batch of `clips` on the CPU backend with (tc, null) and runs the model: its
// prediction, loss and gradients into *o.
static void run(dit_model *m, const dit_config *mc, const train_config *tc, const float *null,
                const objective_clip *clips, run_out *o) {
  const kernels_backend *kb = dit_backend(m);
  objective_device d;
  CHECK_OK(objective_device_alloc(&d, kb, 64, NCLIP, P));
  objective_device_set_null_caption(&d, null, NNULL);
  CHECK_OK(objective_device_build(&d, mc, tc, 3, NCLIP, clips, NCLIP));
  o->Lt = d.batch.Lt;
  CHECK(o->Lt <= NCLIP * TLEN, "Lt %d", o->Lt);
  memcpy(o->text, d.batch.text, sizeof(float) * (size_t)o->Lt * TD);  // CPU: host memory
  CHECK_OK(dit_zero_grad(m));
  CHECK_OK(dit_forward(m, &d.batch, o->pred, &o->loss));
  CHECK_OK(dit_backward(m, &d.batch));
  size_t n = dit_num_params(m);
  o->grads = malloc(n * sizeof(float));
  memcpy(o->grads, dit_grads(m), n * sizeof(float));
  // the host build gives the same captions
  objective_batch hb;
  CHECK_OK(objective_alloc(&hb, 64, NCLIP, P));
  CHECK_OK(objective_alloc_text(&hb, TD, NCLIP * TLEN));
  objective_set_null_caption(&hb, null, NNULL);
  CHECK_OK(objective_build(&hb, mc, tc, 3, NCLIP, clips, NCLIP));
  CHECK(hb.Lt == o->Lt && !memcmp(hb.text, o->text, sizeof(float) * (size_t)o->Lt * TD),
        "host and backend captions differ");
  objective_free(&hb);
  objective_device_free(&d);
}

int main(void) {
  float cap0[3 * TD], cap2[1 * TD], null[NNULL * TD];
  rng_key k = {5, 0, 0, RNG_STREAM_SAMPLE};
  for (int i = 0; i < 3 * TD; i++) cap0[i] = (float)rng_normal(&k, i);
  for (int i = 0; i < TD; i++) cap2[i] = (float)rng_normal(&k, 100 + i);
  for (int i = 0; i < NNULL * TD; i++) null[i] = (float)rng_normal(&k, 200 + i);
  uint8_t tok[24 * P];
  for (int i = 0; i < 24 * P; i++) tok[i] = (uint8_t)(i * 29 + 3);
  // clips of 12, 6 and 6 tokens: captions of 3, none and 1 tokens
  objective_clip clips[NCLIP] = {
      {.clip_id = 11, .total_tokens = 12, .len = 12, .T = 1, .H = 3, .W = 4, .label = -1,
       .tokens = tok, .text = cap0, .text_tokens = 3, .text_dtype = KERNELS_TOKENS_F32},
      {.clip_id = 12, .total_tokens = 6, .len = 6, .T = 1, .H = 2, .W = 3, .label = -1,
       .tokens = tok + 12 * P},
      {.clip_id = 13, .total_tokens = 6, .len = 6, .T = 2, .H = 1, .W = 3, .label = -1,
       .tokens = tok + 18 * P, .text = cap2, .text_tokens = 1, .text_dtype = KERNELS_TOKENS_F32},
  };
  // the reference: every clip given the null caption as its own
  objective_clip given[NCLIP];
  memcpy(given, clips, sizeof clips);
  for (int c = 0; c < NCLIP; c++)
    given[c].text = null, given[c].text_tokens = NNULL, given[c].text_dtype = KERNELS_TOKENS_F32;

  for (int pad = 0; pad <= 1; pad++) {
    dit_config mc = mt_wan_config();
    mc.text_dim = TD, mc.text_len = TLEN, mc.text_pad = pad;
    train_config tc;
    dit_config unused;
    config_defaults(&unused, &tc);
    tc.seed = 9, tc.t_shift_tokens = 8, tc.class_dropout = 0;
    dit_model *m;
    CHECK_OK(dit_create(&m, &mc, kernels_cpu(), 64, NCLIP));
    CHECK_OK(dit_init(m, 1));
    CHECK_OK(mt_perturb(m, 2, 0.1f));
    size_t n = dit_num_params(m);

    run_out *dropped = calloc(1, sizeof *dropped), *ref = calloc(1, sizeof *ref);
    tc.caption_dropout = 1.0f;  // every caption dropped: each clip gets the null caption
    run(m, &mc, &tc, null, clips, dropped);
    tc.caption_dropout = 0.0f;
    run(m, &mc, &tc, NULL, given, ref);
    CHECK(dropped->Lt == ref->Lt && dropped->Lt == NCLIP * (pad ? TLEN : NNULL),
          "text_pad %d: caption rows %d and %d", pad, dropped->Lt, ref->Lt);
    CHECK(!memcmp(dropped->text, ref->text, sizeof(float) * (size_t)ref->Lt * TD),
          "text_pad %d: the null caption's rows differ from the same caption given", pad);
    CHECK(dropped->loss == ref->loss, "text_pad %d: loss %.9g vs %.9g given", pad,
          dropped->loss, ref->loss);
    CHECK(!memcmp(dropped->pred, ref->pred, sizeof(float) * 24 * P),
          "text_pad %d: prediction differs from the same clips given the null caption", pad);
    CHECK(!memcmp(dropped->grads, ref->grads, n * sizeof(float)),
          "text_pad %d: gradients differ from the same clips given the null caption", pad);

    // kept captions are untouched by a null caption; only clip 1 (none) gets it
    run_out *kept = calloc(1, sizeof *kept), *plain = calloc(1, sizeof *plain);
    run(m, &mc, &tc, null, clips, kept);
    objective_clip mixed[NCLIP];
    memcpy(mixed, clips, sizeof clips);
    mixed[1] = given[1];
    run(m, &mc, &tc, NULL, mixed, plain);
    CHECK(kept->loss == plain->loss && !memcmp(kept->pred, plain->pred, sizeof(float) * 24 * P),
          "text_pad %d: a clip without a caption vs the same clip given the null caption", pad);

    // no null caption: a dropped caption gives no rows, or text_pad's zero rows (as before)
    run_out *none = calloc(1, sizeof *none);
    tc.caption_dropout = 1.0f;
    run(m, &mc, &tc, NULL, clips, none);
    int zeros = 1;
    for (int i = 0; i < none->Lt * TD; i++) zeros &= none->text[i] == 0.0f;
    CHECK(none->Lt == (pad ? NCLIP * TLEN : 0) && zeros, "text_pad %d: without a null caption %d "
          "rows (zero: %d)", pad, none->Lt, zeros);
    CHECK(none->loss != dropped->loss, "text_pad %d: the null caption changes nothing", pad);

    // a null caption longer than text_len is refused
    objective_device d;
    CHECK_OK(objective_device_alloc(&d, kernels_cpu(), 64, NCLIP, P));
    float big[(TLEN + 1) * TD] = {0};
    objective_device_set_null_caption(&d, big, TLEN + 1);
    CHECK(objective_device_build(&d, &mc, &tc, 3, NCLIP, clips, NCLIP) == TSR_EINVAL &&
              strstr(err_msg(), "null caption"), "a null caption of %d tokens: %s", TLEN + 1,
          err_msg());
    objective_device_free(&d);

    run_out *all[] = {dropped, ref, kept, plain, none};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]->grads), free(all[i]);
    dit_free(&m);
  }
  return check_done();
}
