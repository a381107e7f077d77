// store/shard_walk.h — the blocks of a shard in file order, past damage.
//
// A walk reads the blocks of an open shard (shard.h) from a block offset to the end of the
// file: caption blocks and clip blocks, each validated (with `verify`, its payload hashed).
// A stretch that is no valid block (a flipped bit, an unfinished write, bytes from
// elsewhere) is reported once as damaged, and the walk goes on at the next 4096-byte
// boundary where a valid block header starts: one bad block must not hide the intact
// blocks after it (recovery used to stop at the first bad block and treat the rest of the
// shard as garbage). The rebuild of a lost index and recovery's check of what it may cut
// both walk shards this way.
#ifndef TESSERA_STORE_SHARD_WALK_H
#define TESSERA_STORE_SHARD_WALK_H

#include <stdint.h>
#include "core/err.h"
#include "store/shard.h"

typedef enum { SHARD_WALK_CLIP, SHARD_WALK_CAPTION, SHARD_WALK_DAMAGED } shard_walk_kind;

typedef struct {
  shard_walk_kind kind;
  int64_t offset, end;    // the block's (or the damaged stretch's) bytes [offset, end)
  shard_block clip;       // SHARD_WALK_CLIP
  shard_caption caption;  // SHARD_WALK_CAPTION
  const char *why;        // SHARD_WALK_DAMAGED: why the first block there is invalid
} shard_walk_item;

// Calls fn(item, ctx) for every block and damaged stretch of `sr` in [from, its size), in
// file order (from: a block offset >= SHARD_HEADER_BYTES). fn returns TSR_OK to go on, or
// an error, which ends the walk and is returned.
tsr_status shard_walk(shard_reader *sr, int64_t from, int verify,
                      tsr_status (*fn)(const shard_walk_item *item, void *ctx), void *ctx);

#endif
