// model/dit_io.c — the model's tensors to and from safetensors files, by name.
#include <stdio.h>

#include "model/dit_internal.h"

static tsr_status full_name(char *buf, size_t cap, const char *prefix, const char *name) {
  if ((size_t)snprintf(buf, cap, "%s%s", prefix ? prefix : "", name) >= cap)
    return err_set(TSR_EINVAL, "tensor name prefix '%s' is too long", prefix);
  return TSR_OK;
}

tsr_status dit_write_tensors(const dit_model *m, st_writer *w, const char *prefix,
                             const float *flat_host) {
  char name[256];
  for (int i = 0; i < m->n_tensors; i++) {
    const dit_tensor *t = &m->table[i];
    DIT_TRY(full_name(name, sizeof name, prefix, t->name));
    DIT_TRY(st_writer_add(w, name, ST_F32, t->ndim, t->shape, flat_host + t->offset));
  }
  return TSR_OK;
}

tsr_status dit_read_tensors(const dit_model *m, const st_reader *r, const char *prefix,
                            float *flat_host) {
  char name[256];
  for (int i = 0; i < m->n_tensors; i++) {
    const dit_tensor *t = &m->table[i];
    DIT_TRY(full_name(name, sizeof name, prefix, t->name));
    DIT_TRY(st_read(r, name, ST_F32, t->ndim, t->shape, flat_host + t->offset));
  }
  return TSR_OK;
}
