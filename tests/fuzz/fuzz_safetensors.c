// fuzz_safetensors: a checkpoint file through the whole load path as far as it parses
// bytes: the validating safetensors reader (layout, exact size), every tensor's recorded
// checksum (st_verify), every tensor read with its own dtype and shape, the checkpoint
// metadata (ckpt_read_meta: format, version, config INI, store settings, labels JSON) and,
// for a small model config, ckpt_load_model of the raw and the EMA weights (names, shapes,
// set checksums), as `tessera train --resume/--init` and `tessera sample` use them.
// The input is the file.
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "kernels/kernels.h"
#include "model/io/checkpoint.h"
#include "core/safetensors.h"

// Models this small are built and loaded; larger configs (a fuzzed hidden = 10^6) would
// only measure the allocator.
static int small_model(const dit_config *c) {
  return c->hidden <= 64 && c->depth <= 2 && c->mlp_ratio <= 4 && c->freq_dim <= 256 &&
         c->num_classes <= 64 && (int64_t)c->pt * c->ph * c->pw * c->channels <= 4096;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_scratch_path(".safetensors");
  fuzz_write_file(path, data, size);

  st_reader *r = NULL;
  if (st_open(&r, path) == TSR_OK) {
    (void)st_verify(r, 1);
    for (int i = 0; i < st_count(r); i++) {
      const st_tensor *t = st_at(r, i);
      void *buf = malloc(t->nbytes ? t->nbytes : 1);  // nbytes <= size: inside the file
      if (buf) (void)st_read(r, t->name, t->dtype, t->ndim, t->shape, buf);
      free(buf);
    }
    (void)st_meta(r, "format");
    st_close(&r);
  }

  ckpt_meta cm = {0};
  if (ckpt_read_meta(path, &cm) == TSR_OK) {
    dit_model *m = NULL;
    if (small_model(&cm.mc) && dit_create(&m, &cm.mc, kernels_cpu(), 16, 1) == TSR_OK) {
      (void)ckpt_load_model(path, m, 0);
      (void)ckpt_load_model(path, m, 1);
    }
    dit_free(&m);
    ckpt_meta_free(&cm);
  }
  unlink(path);
  return 0;
}
