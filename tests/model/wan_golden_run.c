// tests/model/wan_golden_run.c — one forward and backward of a model from a checkpoint on
// a packed batch given in a file, for the comparison with diffusers (wan_golden.py):
//   usage: wan_golden_run CKPT INPUTS OUT [ADAPTERS ADAPTERS_OUT]
// CKPT: a tessera checkpoint (`tessera convert`'s output), loaded as `tessera sample --raw`
// loads it. INPUTS: safetensors of F32/I32 tensors batch.x (L, P),
// batch.target (L, P), batch.t (C), batch.loss_weight (C), batch.pos (L, 3),
// batch.cu_seqlens (C + 1), batch.text (Lt, text_dim), batch.cu_text (C + 1). OUT: pred
// (L, P), dx (L, P) = dL/dx, grad.<name> for every tensor, metadata loss (%.17g), on the
// CPU fp32 backend. ADAPTERS: a LoRA file (model/io/lora_io.h) loaded onto the model; OUT
// then also holds lora_grad.<name> of every adapter tensor, and the adapters are written
// back to ADAPTERS_OUT by lora_save (the file diffusers loads in wan_lora_golden.py).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "model/io/checkpoint.h"
#include "model/io/dit_io.h"
#include "model/io/lora_io.h"

#define TRY(call)                                                      \
  do {                                                                 \
    tsr_status st_ = (call);                                           \
    if (st_) {                                                         \
      fprintf(stderr, "wan_golden_run: %s: %s\n", #call, err_msg());   \
      exit(1);                                                         \
    }                                                                  \
  } while (0)

static const kernels_backend *kb;
static void *inputs[8];  // the backend copies input() made, freed at the end
static int n_inputs;

// Backend copy of INPUTS' tensor `name` (its bytes as stored; dtype checked), and its shape.
static void *input(const st_reader *r, const char *name, st_dtype dt, int64_t *d0, int64_t *d1) {
  const st_tensor *t = st_find(r, name);
  if (!t || t->dtype != dt) {
    fprintf(stderr, "wan_golden_run: %s: no %s tensor '%s'\n", st_path(r), st_dtype_name(dt), name);
    exit(1);
  }
  *d0 = t->ndim > 0 ? t->shape[0] : 1;
  if (d1) *d1 = t->ndim > 1 ? t->shape[1] : 1;
  void *p;
  TRY(kb->alloc(kb, &p, t->nbytes));
  TRY(kb->to_device(kb, p, t->data, t->nbytes));
  return inputs[n_inputs++] = p;
}

// The model of CKPT's config with its weights, read as `tessera sample --raw` reads them
// (metadata, every checksum).
static dit_model *load_model(const char *path, int L, int C) {
  ckpt_meta cm;
  TRY(ckpt_read_meta(path, &cm));
  dit_model *m;
  TRY(dit_create(&m, &cm.mc, kb, L, C));
  TRY(ckpt_load_model(path, m, 0));
  ckpt_meta_free(&cm);
  return m;
}

// OUT: pred, dx, the base's and the adapters' gradients, the loss in the metadata.
static void write_out(dit_model *m, const char *path, double loss, const float *pred,
                      const float *dx, int64_t L, int64_t P) {
  st_writer *w;
  char lossbuf[64];
  snprintf(lossbuf, sizeof lossbuf, "%.17g", loss);
  TRY(st_writer_new(&w));
  TRY(st_writer_meta(w, "loss", lossbuf));
  TRY(st_writer_add(w, "pred", ST_F32, 2, (int64_t[]){L, P}, pred));
  TRY(st_writer_add(w, "dx", ST_F32, 2, (int64_t[]){L, P}, dx));  // CPU: host memory
  TRY(dit_write_tensors(m, w, "grad.", dit_grads(m)));
  for (int i = 0; i < dit_lora_num_tensors(m); i++) {
    const dit_tensor *t = dit_lora_tensor_info(m, i);
    char name[128];
    snprintf(name, sizeof name, "lora_grad.%s", t->name);
    TRY(st_writer_add(w, name, ST_F32, 2, t->shape, dit_lora_grads(m) + t->offset));
  }
  TRY(st_writer_commit(w, path));
  st_writer_free(&w);
}

int main(int argc, char **argv) {
  if (argc != 4 && argc != 6) {
    fprintf(stderr, "usage: wan_golden_run CKPT INPUTS OUT [ADAPTERS ADAPTERS_OUT]\n");
    return 2;
  }
  kb = kernels_cpu();
  st_reader *in;
  TRY(st_open(&in, argv[2]));
  int64_t L, P, C1, Lt, unused;
  dit_batch b = {0};
  b.x = input(in, "batch.x", ST_F32, &L, &P);
  b.target = input(in, "batch.target", ST_F32, &L, &P);
  b.cu_seqlens = input(in, "batch.cu_seqlens", ST_I32, &C1, NULL);
  b.t = input(in, "batch.t", ST_F32, &unused, NULL);
  b.loss_weight = input(in, "batch.loss_weight", ST_F32, &unused, NULL);
  b.pos = input(in, "batch.pos", ST_I32, &unused, NULL);
  b.text = input(in, "batch.text", ST_F32, &Lt, &unused);
  b.cu_text = input(in, "batch.cu_text", ST_I32, &unused, NULL);
  b.n_clips = (int)C1 - 1, b.L = (int)L, b.max_len = (int)L, b.Lt = (int)Lt;
  dit_model *m = load_model(argv[1], (int)L, b.n_clips);
  if (argc == 6) TRY(lora_load(m, argv[4]));
  void *dx;
  TRY(kb->alloc(kb, &dx, sizeof(float) * (size_t)(L * P)));
  dit_set_input_grad(m, dx);
  float *pred = malloc(sizeof(float) * (size_t)(L * P));
  double loss;
  TRY(dit_zero_grad(m));
  TRY(dit_lora_zero_grad(m));
  TRY(dit_forward(m, &b, pred, &loss));
  TRY(dit_backward(m, &b));
  write_out(m, argv[3], loss, pred, dx, L, P);
  if (argc == 6) TRY(lora_save(m, argv[5], argv[1], NULL));
  printf("wan_golden_run: %d clips, %lld tokens, %lld caption tokens, %d tensors, %d adapter "
         "tensors, loss %.9g\n", b.n_clips, (long long)L, (long long)Lt, dit_num_tensors(m),
         dit_lora_num_tensors(m), loss);
  st_close(&in);
  dit_free(&m);
  for (int i = 0; i < n_inputs; i++) kb->free(kb, inputs[i]);
  kb->free(kb, dx);
  free(pred);
  return 0;
}
