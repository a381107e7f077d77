// fuzz_shard: a shard file's header and every clip block it claims to hold, through the
// validating reader (ingest/shard.h), as `tessera train` and `index verify` use it.
// The first 8 input bytes choose a block offset and a payload size the "index" claims;
// the rest is the shard file.
#include <string.h>

#include "fuzz_util.h"
#include "ingest/shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 8) return 0;
  uint32_t off_sel, bytes_sel;
  memcpy(&off_sel, data, 4);
  memcpy(&bytes_sel, data + 4, 4);
  const char *path = fuzz_scratch_path(".tshard");
  fuzz_write_file(path, data + 8, size - 8);

  shard_reader *r = NULL;
  if (shard_reader_open(&r, path, NULL) == TSR_OK) {
    int64_t n = shard_reader_size(r);
    // Every aligned block the file could hold, and one offset chosen by the input.
    for (int64_t off = SHARD_HEADER_BYTES; off < n; off += SHARD_ALIGN) {
      const uint8_t *payload = NULL;
      (void)shard_reader_clip(r, off, -1, 0, 1, &payload);
    }
    const uint8_t *payload = NULL;
    (void)shard_reader_clip(r, (int64_t)off_sel, bytes_sel ? (int64_t)bytes_sel : -1, 0, 1,
                            &payload);
    shard_reader_close(&r);
  }
  unlink(path);
  return 0;
}
