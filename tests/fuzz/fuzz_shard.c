// fuzz_shard: a shard file's header, every clip block and caption block it holds and
// their metadata trailers, through the validating reader (store/shard.h) as `tessera
// train` and `index verify` use it, the trailer parser (store/clip_meta.h), and the index
// rebuild that `tessera index recover` runs on a store of that one shard (store_rebuild,
// store/rebuild.h).
// The first 8 input bytes choose a block offset and a payload size the "index" claims;
// the rest is the shard file.
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"
#include "store/clip_meta.h"
#include "store/shard.h"
#include "store/clip.h"
#include "store/rebuild.h"

static void quiet(const char *line, void *ctx) {
  (void)line;
  (void)ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 8) return 0;
  uint32_t off_sel, bytes_sel;
  memcpy(&off_sel, data, 4);
  memcpy(&bytes_sel, data + 4, 4);
  // A store of one shard: STORE/shards/f.tshard holds the input.
  static char dir[600], sdir[700], path[800], ix[800];
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "%s", fuzz_scratch_path(".store"));
    snprintf(sdir, sizeof sdir, "%s/shards", dir);
    snprintf(path, sizeof path, "%s/f.tshard", sdir);
    snprintf(ix, sizeof ix, "%s/index.sqlite", dir);
    mkdir(dir, 0755);
    mkdir(sdir, 0755);
  }
  fuzz_write_file(path, data + 8, size - 8);

  shard_reader *r = NULL;
  if (shard_reader_open(&r, path, NULL) == TSR_OK) {
    int64_t n = shard_reader_size(r);
    // The blocks one after another, as the rebuild walks them, with their trailers.
    shard_block b;
    clip_meta *m = malloc(sizeof *m);
    for (int64_t off = SHARD_HEADER_BYTES; m && off < n; off = b.end) {
      shard_caption c;
      if (shard_reader_is_caption(r, off)) {  // a source's caption before its clips
        if (shard_reader_caption(r, off, 1, &c) != TSR_OK) break;
        b.end = c.end;
        continue;
      }
      if (shard_reader_block(r, off, 1, &b) != TSR_OK) break;
      if (b.meta) {
        (void)clip_meta_decode(b.meta, b.meta_bytes, m);
        clip_meta_release(m);
      }
    }
    free(m);
    // Every other aligned offset (a row may claim any), and one chosen by the input.
    for (int64_t off = SHARD_HEADER_BYTES; off < n; off += SHARD_ALIGN) {
      shard_caption c;
      store_clip row = {.caption_offset = off, .caption_tokens = (int)(bytes_sel & 0xff) + 1,
                        .caption_dim = (int)(bytes_sel >> 8 & 0xff) + 1};
      (void)shard_reader_clip(r, off, -1, 0, 1, NULL);
      (void)shard_reader_caption_of(r, &row, 1, &c);
    }
    (void)shard_reader_clip(r, (int64_t)off_sel, bytes_sel ? (int64_t)bytes_sel : -1, 0, 1, NULL);
    shard_reader_close(&r);
    // The rebuild of a store holding this shard (only worth it for a readable header).
    char why[512];
    (void)store_index_state(dir, why, sizeof why);
    (void)store_rebuild(dir, quiet, NULL, NULL);
    unlink(ix);  // every input starts without an index, so none is ever moved aside
  }
  unlink(path);
  return 0;
}
