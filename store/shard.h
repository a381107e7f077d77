// store/shard.h — shard files: append-only files of clip blocks (and caption blocks).
//
// Layout: store/shard_format.h and docs/store-format.md.
#ifndef TESSERA_STORE_SHARD_H
#define TESSERA_STORE_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "store/clip.h"
#include "store/settings.h"
#include "store/shard_format.h"

// ---- writer ----
typedef struct shard_writer shard_writer;

// Creates a new shard file at `path` (must not exist) with the header for `s`.
tsr_status shard_writer_create(shard_writer **w, const char *path, const store_settings *s);
// Starts a clip block of (T unknown yet) x H x W tokens at the current end; *offset
// receives its offset. T is only known when a streamed clip ends (shard_writer_end_clip).
tsr_status shard_writer_begin_clip(shard_writer *w, int H, int W, int64_t *offset);
// Appends payload bytes of the open clip (any number of calls, in token order).
tsr_status shard_writer_append(shard_writer *w, const void *data, size_t bytes);
// Finishes the open clip of T*H*W tokens: checks the byte count, writes its header and
// padding. *checksum receives the payload's XXH3-64. Bytes are not yet durable (see sync).
tsr_status shard_writer_end_clip(shard_writer *w, int T, uint64_t *checksum);
// The same, with a metadata trailer (`meta`, meta_bytes <= SHARD_META_MAX; NULL/0 for
// none) written after the payload and covered by its own checksum in the block header.
tsr_status shard_writer_end_clip_meta(shard_writer *w, int T, const void *meta, size_t meta_bytes,
                                      uint64_t *checksum);
// Drops the open clip (e.g. the source failed mid-way): rewinds to its offset.
tsr_status shard_writer_abort_clip(shard_writer *w);
// Appends a complete caption block at the current end (no clip open): embedding (tokens,
// dim) of dtype (STORE_DTYPE_BF16 or STORE_DTYPE_F32) host memory, text of text_bytes
// (not NUL-terminated, may be 0). *offset receives the block's offset, *checksum the
// embedding's XXH3-64. Not yet durable (shard_writer_sync).
tsr_status shard_writer_caption(shard_writer *w, const void *emb, int tokens, int dim,
                                store_dtype dtype, const char *text, size_t text_bytes,
                                int64_t *offset, uint64_t *checksum);
// Cuts the shard back to `offset` (a block offset <= the end, no clip open): drops the
// blocks written since (a caption block of a source that then failed).
tsr_status shard_writer_rewind(shard_writer *w, int64_t offset);
// Makes everything written so far durable (fdatasync).
tsr_status shard_writer_sync(shard_writer *w);
// Current end offset (bytes): the end of the last finished block.
int64_t shard_writer_size(const shard_writer *w);
// Closes (an open clip is aborted first). Does not sync: call shard_writer_sync.
void shard_writer_close(shard_writer **w);

// ---- reader ----
typedef struct shard_reader shard_reader;

// Maps a shard read-only and validates its header against `expect` (NULL: no check).
tsr_status shard_reader_open(shard_reader **r, const char *path, const store_settings *expect);
// Validates the block at `offset` (header checksum, geometry, bounds) and returns a
// pointer to its payload inside the mapping (valid until shard_reader_close). `bytes` is
// the payload size the index records (-1: not checked). A non-zero `checksum` (the
// index's) must equal the block header's. If `verify`, the payload is also hashed and
// compared with the block header's checksum. Failures are TSR_EFORMAT naming the shard
// path and the offset.
tsr_status shard_reader_clip(shard_reader *r, int64_t offset, int64_t bytes, uint64_t checksum,
                             int verify, const uint8_t **payload);
// One block as its header describes it (validated: header checksum, geometry, bounds,
// metadata checksum; with `verify`, the payload's checksum too).
typedef struct {
  int T, H, W;            // token grid
  int64_t bytes;          // payload bytes
  uint64_t checksum;      // payload XXH3-64 as the block header records it
  const uint8_t *payload; // (bytes) inside the mapping
  const char *meta;       // (meta_bytes) metadata trailer inside the mapping, not
                          // NUL-terminated; NULL if the block has none
  size_t meta_bytes;
  int64_t end;            // offset of the byte after the block: where the next block starts
} shard_block;
tsr_status shard_reader_block(shard_reader *r, int64_t offset, int verify, shard_block *b);
// A caption block (validated: header checksum, sizes within the limits and the file, text
// checksum; with `verify`, the embedding's checksum too).
typedef struct {
  int tokens, dim;        // embedding rows and width
  store_dtype dtype;      // bf16 or f32
  const void *emb;        // (tokens, dim) inside the mapping
  int64_t emb_bytes;
  uint64_t checksum;      // XXH3-64 of the embedding as the header records it
  const char *text;       // (text_bytes) UTF-8 inside the mapping, not NUL-terminated
  size_t text_bytes;
  int64_t end;            // offset of the byte after the block
} shard_caption;
tsr_status shard_reader_caption(shard_reader *r, int64_t offset, int verify, shard_caption *c);
// The caption of an index row `c` (c->caption_offset != 0): its block, checked against the
// row's tokens, width and checksum; with `verify` the embedding is hashed too.
tsr_status shard_reader_caption_of(shard_reader *r, const store_clip *c, int verify,
                                   shard_caption *out);
// 1 if a block at `offset` (inside the file) has the caption magic: block walkers use it
// to tell caption blocks from clip blocks.
int shard_reader_is_caption(const shard_reader *r, int64_t offset);
int64_t shard_reader_size(const shard_reader *r);
// The settings recorded in the shard's header: pt, ph, pw, channels, dtype; for version 2
// also fps, short side and max seconds (zero in version 1).
void shard_reader_geometry(const shard_reader *r, store_settings *geom);
// Format version of the shard file (1 or 2).
int shard_reader_version(const shard_reader *r);
void shard_reader_close(shard_reader **r);

// Truncates a shard file to `end` bytes (at least the header) and syncs it. A file
// already `end` bytes long is left alone; a shorter one is TSR_EFORMAT (clips lost).
tsr_status shard_truncate(const char *path, int64_t end);

#endif
