// tests/model/golden_dump.c — writes the inputs and outputs of one training step of a
// small DiT to a safetensors file for the PyTorch reference (tools/reference/golden.py):
// config (metadata "config"), every parameter ("param.<name>"), the batch ("batch.*"),
// the C prediction ("pred"), loss (metadata "loss", %.17g) and every gradient
// ("grad.<name>").
// The parameters are dit_init plus TEST-ONLY noise (mt_perturb, scale 0.1) so that adaLN
// and final.linear are non-zero and every gradient is non-trivial. The batch: 3 clips of
// different grids and lengths, two labels and one "no label", built by model/objective.c
// from counter-random uint8 tokens.
// With --text the model has captions (model.text_dim 5, text_len 4: cross-attention in
// every block, the text embedding and the null token): clip 0 has a caption of 3 tokens
// (f32), clip 1 of 4 (bf16), clip 2 none; the batch gets "batch.text" and "batch.cu_text".
// usage: golden_dump OUT.safetensors [--text]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt.h"
#include "model/objective.h"
#include "model/io/dit_io.h"

#define TRY(call)                                                            \
  do {                                                                       \
    tsr_status st_ = (call);                                                 \
    if (st_) {                                                               \
      fprintf(stderr, "golden_dump: %s: %s\n", #call, err_msg());            \
      return 1;                                                              \
    }                                                                        \
  } while (0)

int main(int argc, char **argv) {
  int text = argc == 3 && !strcmp(argv[2], "--text");
  if (argc != 2 && !text) {
    fprintf(stderr, "usage: golden_dump OUT.safetensors [--text]\n");
    return 2;
  }
  const kernels_backend *kb = kernels_cpu();
  dit_config mc = text ? mt_text_config() : mt_config();
  mc.hidden = 24, mc.heads = 2;  // Dh = 12: RoPE groups t/y/x = 4/4/4
  train_config tc;
  dit_config unused;
  config_defaults(&unused, &tc);
  tc.seed = 1234, tc.class_dropout = 0, tc.caption_dropout = 0, tc.t_shift_tokens = 8;
  int P = mc.pt * mc.ph * mc.pw * mc.channels;

  // batch: grids (T, H, W) 2x2x3, 1x3x2, 3x2x2; labels 0, 2, none
  int grids[3][3] = {{2, 2, 3}, {1, 3, 2}, {3, 2, 2}}, labels[3] = {0, 2, -1};
  objective_clip clips[3];
  uint8_t *tok[3];
  for (int c = 0; c < 3; c++) {
    int n = grids[c][0] * grids[c][1] * grids[c][2];
    tok[c] = malloc((size_t)n * P);
    rng_key k = {99, 0, (uint64_t)c, RNG_STREAM_SAMPLER};
    for (int i = 0; i < n * P; i++) tok[c][i] = (uint8_t)(rng_uniform(&k, (uint64_t)i) * 256);
    clips[c] = (objective_clip){.clip_id = 100 + c, .total_tokens = n, .first_token = 0, .len = n,
                                .T = grids[c][0], .H = grids[c][1], .W = grids[c][2],
                                .label = labels[c], .tokens = tok[c]};
  }
  // captions: 3 tokens (f32), 4 tokens (bf16), none
  float cap0[3 * 5];
  uint16_t cap1[4 * 5];
  rng_key ck = {98, 0, 0, RNG_STREAM_SAMPLER};
  for (int i = 0; i < 15; i++) cap0[i] = (float)rng_normal(&ck, (uint64_t)i);
  for (int i = 0; i < 20; i++) cap1[i] = kernels_f32_to_bf16((float)rng_normal(&ck, 100 + (uint64_t)i));
  if (text) {
    clips[0].text = cap0, clips[0].text_tokens = 3, clips[0].text_dtype = KERNELS_TOKENS_F32;
    clips[1].text = cap1, clips[1].text_tokens = 4, clips[1].text_dtype = KERNELS_TOKENS_BF16;
  }
  objective_batch ob;
  objective_device dev;
  TRY(objective_alloc(&ob, 64, 4, P));
  if (text) TRY(objective_alloc_text(&ob, mc.text_dim, 4 * mc.text_len));
  TRY(objective_build(&ob, &mc, &tc, 5, 3, clips, 3));
  TRY(objective_device_alloc(&dev, kb, 64, 4, P));
  TRY(objective_upload(&dev, &ob, mc.num_classes));

  dit_model *m;
  TRY(dit_create(&m, &mc, kb, 64, 4));
  TRY(dit_init(m, 2024));
  TRY(mt_perturb(m, 2025, 0.1f));
  TRY(dit_zero_grad(m));
  float *pred = malloc(sizeof(float) * (size_t)ob.L * P);
  double loss;
  TRY(dit_forward(m, &dev.batch, pred, &loss));
  TRY(dit_backward(m, &dev.batch));

  st_writer *w;
  TRY(st_writer_new(&w));
  char *ini = config_to_ini(&mc, &tc), lossbuf[64];
  snprintf(lossbuf, sizeof lossbuf, "%.17g", loss);
  TRY(st_writer_meta(w, "config", ini));
  TRY(st_writer_meta(w, "loss", lossbuf));
  TRY(dit_write_tensors(m, w, "param.", dit_params(m)));  // CPU backend: host memory
  TRY(dit_write_tensors(m, w, "grad.", dit_grads(m)));
  TRY(objective_write_tensors(&ob, w, "batch."));
  int64_t L = ob.L;
  TRY(st_writer_add(w, "pred", ST_F32, 2, (int64_t[]){L, P}, pred));
  TRY(st_writer_commit(w, argv[1]));
  printf("golden_dump: %d clips, %d tokens, %d tensors, loss %.9g -> %s\n", ob.n_clips, ob.L,
         dit_num_tensors(m), loss, argv[1]);
  st_writer_free(&w);
  free(ini), free(pred);
  for (int c = 0; c < 3; c++) free(tok[c]);
  dit_free(&m);
  objective_device_free(&dev);
  objective_free(&ob);
  return 0;
}
