// store/shard_walk.c — a shard's blocks in order, resynchronised past damage
// (store/shard_walk.h).
#include "store/shard_walk.h"

#include <stdio.h>

// The block at `off` validated as the walk reads it (caption or clip, payload hashed with
// `verify`) into *it; TSR_EFORMAT when there is none.
static tsr_status read_block(shard_reader *sr, int64_t off, int verify, shard_walk_item *it) {
  it->offset = off;
  if (shard_reader_is_caption(sr, off)) {
    it->kind = SHARD_WALK_CAPTION;
    tsr_status st = shard_reader_caption(sr, off, verify, &it->caption);
    it->end = it->caption.end;
    return st;
  }
  it->kind = SHARD_WALK_CLIP;
  tsr_status st = shard_reader_block(sr, off, verify, &it->clip);
  it->end = it->clip.end;
  return st;
}

// The next 4096-byte boundary after `off` where a block header is valid (header checksum,
// sizes inside the file; the payload is not hashed here: the walk does that when it reads
// the block), or the file's size when none is left.
static int64_t resync(shard_reader *sr, int64_t off) {
  int64_t size = shard_reader_size(sr);
  for (int64_t at = off + SHARD_ALIGN; at < size; at += SHARD_ALIGN) {
    shard_walk_item probe;
    if (read_block(sr, at, 0, &probe) == TSR_OK) return at;
  }
  err_clear();
  return size;
}

tsr_status shard_walk(shard_reader *sr, int64_t from, int verify,
                      tsr_status (*fn)(const shard_walk_item *item, void *ctx), void *ctx) {
  int64_t size = shard_reader_size(sr), off = from;
  tsr_status st = TSR_OK;
  while (!st && off < size) {
    shard_walk_item it = {0};
    if (read_block(sr, off, verify, &it) == TSR_OK) {
      st = fn(&it, ctx);
      off = it.end;
      continue;
    }
    char why[1024];
    snprintf(why, sizeof why, "%s", err_msg());
    err_clear();
    shard_walk_item bad = {.kind = SHARD_WALK_DAMAGED, .offset = off, .end = resync(sr, off),
                           .why = why};
    st = fn(&bad, ctx);
    off = bad.end;
  }
  return st;
}
