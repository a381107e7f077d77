// fuzz_lengths: the clip-length CSV reader (tokens or duration_s columns), then a batch
// sampled from whatever loaded. The first 2 input bytes pick the token geometry and caps
// (none, tokens per second, fps/size/patch; max seconds; cap tokens); the rest is the CSV.
#include <stdlib.h>

#include "fuzz_util.h"
#include "sched/cost.h"
#include "sched/lengths.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  const char *path = fuzz_scratch_path(".csv");
  fuzz_write_file(path, data + 2, size - 2);
  lengths_opts o = {0};
  switch (data[0] % 3) {
  case 1: o.tokens_per_second = data[0] & 0x80 ? 1e9 : 1800; break;
  case 2: o = (lengths_opts){.fps = 8, .height = 480, .width = 848, .pt = 4, .ph = 16, .pw = 16};
  }
  if (data[1] & 1) o.max_seconds = 300;
  if (data[1] & 2) o.cap_tokens = 65536;
  lengths_set ls = {0};
  if (lengths_load_csv(&ls, path, 1.0, &o) == TSR_OK) {
    for (int64_t i = 0; i < ls.n; i++)
      if (ls.tokens[i] < 1 || ls.tokens[i] > SCHED_MAX_TOKENS ||
          (o.cap_tokens && ls.tokens[i] > o.cap_tokens))
        abort();
    int64_t ids[8], tok[8];
    if (lengths_sample(&ls, 1, 0, 8, ids, tok) != TSR_OK) abort();
  }
  lengths_free(&ls);
  unlink(path);
  return 0;
}
