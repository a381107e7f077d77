// fuzz_ckpt_meta: the checkpoint metadata parser (model/io/checkpoint.h ckpt_read_meta:
// format, version, step, sampler position, clips, config INI, store settings, labels JSON,
// the resume keys) and what trusts its result: the sampler seeks to the recorded position
// and draws past an epoch boundary (a crafted epoch of 2^63-1 overflowed there), the
// schedule and EMA decay at the recorded step, the store's token size.
// The input is the metadata, as pairs KEY NUL VALUE NUL (the last value may run to the end):
// the target writes a safetensors file of those pairs and one small tensor, so every input
// reaches the metadata parser instead of the file-layout checks fuzz_safetensors covers.
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "fuzz_util.h"
#include "model/io/checkpoint.h"
#include "model/train/data.h"
#include "model/train/lr.h"

// Adds the pairs of data to w; 1 if a pair could not be added (a reserved or repeated key:
// the writer refuses it, so the input says nothing of the parser).
static int add_pairs(st_writer *w, const uint8_t *data, size_t size) {
  char *text = malloc(size + 2);
  if (!text) return 1;
  memcpy(text, data, size);
  text[size] = text[size + 1] = 0;
  int bad = 0;
  for (char *p = text; !bad && p < text + size;) {
    char *key = p, *val = key + strlen(key) + 1;
    if (val > text + size) val = text + size + 1;  // a key without a value: the empty one
    p = val + strlen(val) + 1;
    bad = st_writer_meta(w, key, val) != TSR_OK;
  }
  free(text);
  return bad;
}

// What a resume and `tessera sample` do with the values ckpt_read_meta accepted.
static void use(const ckpt_meta *m) {
  data_sampler s;
  int64_t n = m->clips < 64 ? m->clips : 64, batch[8], count;
  if (data_sampler_init(&s, n, (uint64_t)m->tc.seed) == TSR_OK &&
      data_sampler_seek(&s, m->sampler_epoch, m->sampler_pos < n ? m->sampler_pos : n) == TSR_OK)
    for (int i = 0; i < 3; i++) (void)data_sampler_next(&s, 8, batch, &count);
  data_sampler_free(&s);
  (void)lr_schedule(&m->tc, m->step);
  (void)ema_decay_at(&m->tc, m->step);
  (void)store_token_bytes(&m->store);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_scratch_path(".safetensors");
  st_writer *w = NULL;
  static const float one = 1.0f;
  static const int64_t shape[1] = {1};
  if (st_writer_new(&w) || st_writer_add(w, "x", ST_F32, 1, shape, &one) ||
      add_pairs(w, data, size) || st_writer_commit(w, path)) {
    st_writer_free(&w);
    return 0;
  }
  st_writer_free(&w);
  ckpt_meta m = {0};
  if (ckpt_read_meta(path, &m) == TSR_OK) {
    use(&m);
    ckpt_meta_free(&m);
  }
  unlink(path);
  return 0;
}
