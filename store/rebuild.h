// store/rebuild.h — a store whose index is lost or damaged: telling it apart, and rebuilding
// the index from the shards' blocks.
#ifndef TESSERA_STORE_REBUILD_H
#define TESSERA_STORE_REBUILD_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

// Recovery trusts the index to say which shard bytes are garbage; a store whose index is
// missing, empty, not a tessera index, or records no clip while its shards hold clip
// blocks (and it has committed something since its creation: an index that never did
// belongs to a first ingest interrupted before its first commit, whose blocks are
// garbage) must not be "recovered" (that would delete every shard). Ingest and merge refuse
// such a store; `tessera index recover` rebuilds its index with store_rebuild.

// Sets why (n bytes) to a reason when the store has shard data but no usable index; ""
// when the index is usable or there is nothing to lose. Errors only for unreadable
// directories.
tsr_status store_index_state(const char *dir, char *why, size_t n);

typedef struct {
  int64_t shards, shards_v1, shards_unreadable;  // shards scanned / of format 1 / skipped
  int64_t sources, clips;          // done sources and clips recorded
  int64_t clips_unknown_source;    // of those, clips of format-1 blocks (stand-in sources)
  int64_t blocks_left;             // blocks of interrupted or superseded ingests, left out
  int64_t tail_bytes;              // shard bytes past the last complete block
  int64_t damaged_bytes;           // bytes of damaged blocks with intact blocks after them
  int old_index_kept;              // the unusable index was moved to old_index
  char old_index[4200];
} store_rebuild_report;

// Rebuilds STORE/index.sqlite from the blocks of STORE/shards/*.tshard: settings from the
// version-2 shard headers (which must agree), then per source path the newest complete
// ingest (clips 0..n-1 of one shard, the last marked last) as a done source with its
// clips, exactly as ingest recorded them. Blocks of format-1 shards, which carry no
// metadata, are recorded under a stand-in source "unknown-source:SHARD" per shard. A
// damaged block does not end the walk of its shard: the blocks after it are read on
// (store/shard_walk.h), so one flipped bit loses one source, not the rest of the shard.
// Not recoverable, and said through `say` (NULL: the log): failed sources (no block),
// interrupted sources. Every payload checksum is verified. The new index is built in
// index.sqlite.rebuild, fsync'ed, and renamed over the old one, which is kept as
// index.sqlite.unusable-TIME; a crash at any point leaves the old state or the new.
// The caller holds the writer lock; run store_recover afterwards to tidy the shards.
tsr_status store_rebuild(const char *dir, void (*say)(const char *line, void *ctx), void *ctx,
                         store_rebuild_report *rep);

#endif
