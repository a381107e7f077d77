// model/io/dit_io.c — the model's tensors and a training batch to and from safetensors
// files, by name (model/io/dit_io.h).
#include "model/io/dit_io.h"

#include <stdio.h>

#include "model/lora.h"

static tsr_status full_name(char *buf, size_t cap, const char *prefix, const char *name) {
  if ((size_t)snprintf(buf, cap, "%s%s", prefix ? prefix : "", name) >= cap)
    return err_set(TSR_EINVAL, "tensor name prefix '%s' is too long", prefix);
  return TSR_OK;
}

// A tensor table of m: the model's (dit_tensor_info) or its adapters' (dit_lora_tensor_info).
typedef const dit_tensor *(*tensor_info_fn)(const dit_model *, int);

// Each tensor of the table under prefix + its name: written to w from src (w != NULL), or
// read from r into dst. src, dst: the table's flat host buffer.
static tsr_status table_io(const dit_model *m, int n, tensor_info_fn info, const char *prefix,
                           st_writer *w, const float *src, const st_reader *r, float *dst) {
  char name[256];
  for (int i = 0; i < n; i++) {
    const dit_tensor *t = info(m, i);
    tsr_status st = full_name(name, sizeof name, prefix, t->name);
    if (!st)
      st = w ? st_writer_add(w, name, ST_F32, t->ndim, t->shape, src + t->offset)
             : st_read(r, name, ST_F32, t->ndim, t->shape, dst + t->offset);
    if (st) return st;
  }
  return TSR_OK;
}

tsr_status dit_write_tensors(const dit_model *m, st_writer *w, const char *prefix,
                             const float *flat_host) {
  return table_io(m, dit_num_tensors(m), dit_tensor_info, prefix, w, flat_host, NULL, NULL);
}

tsr_status dit_read_tensors(const dit_model *m, const st_reader *r, const char *prefix,
                            float *flat_host) {
  return table_io(m, dit_num_tensors(m), dit_tensor_info, prefix, NULL, NULL, r, flat_host);
}

tsr_status dit_lora_write_tensors(const dit_model *m, st_writer *w, const char *prefix,
                                  const float *flat_host) {
  return table_io(m, dit_lora_num_tensors(m), dit_lora_tensor_info, prefix, w, flat_host, NULL,
                  NULL);
}

tsr_status objective_write_tensors(const objective_batch *ob, st_writer *w, const char *prefix) {
  int64_t C = ob->n_clips, L = ob->L, P = ob->P;
  struct {
    const char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[2];
    const void *data;
  } parts[] = {
      {"x", ST_F32, 2, {L, P}, ob->x},
      {"target", ST_F32, 2, {L, P}, ob->target},
      {"t", ST_F32, 1, {C}, ob->t},
      {"labels", ST_I32, 1, {C}, ob->labels},
      {"loss_weight", ST_F32, 1, {C}, ob->loss_weight},
      {"pos", ST_I32, 2, {L, 3}, ob->pos},
      {"cu_seqlens", ST_I32, 1, {C + 1}, ob->cu_seqlens},
      // captions (a batch of a model with text): kept caption rows and their offsets
      {"text", ST_F32, 2, {ob->Lt, ob->text_dim}, ob->text},
      {"cu_text", ST_I32, 1, {C + 1}, ob->cu_text},
  };
  size_t n = sizeof parts / sizeof parts[0] - (ob->text_dim > 0 ? 0 : 2);
  for (size_t i = 0; i < n; i++) {
    char name[256];
    if (snprintf(name, sizeof name, "%s%s", prefix, parts[i].name) >= (int)sizeof name)
      return err_set(TSR_EINVAL, "objective_write_tensors: prefix '%s' is too long", prefix);
    tsr_status st = st_writer_add(w, name, parts[i].dtype, parts[i].ndim, parts[i].shape,
                                  parts[i].data);
    if (st) return st;
  }
  return TSR_OK;
}
