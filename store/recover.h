// store/recover.h — bringing a store to a consistent state after a crash.
#ifndef TESSERA_STORE_RECOVER_H
#define TESSERA_STORE_RECOVER_H

#include <stdint.h>

#include "core/err.h"
#include "store/index.h"
#include "store/quarantine.h"
#include "store/rebuild.h"

// Brings a store to a consistent state after a crash: merges leftover parts/*.sqlite
// into the index, then (holding the readers out, store_lock_exclude_readers) truncates
// every shard to its committed end and removes shards no clip points at (and stray *.tmp
// files). Bytes are read before they are cut (store/quarantine.c): a tail or a shard with
// no rows is cut only when it holds no complete block the index does not have elsewhere
// (an interrupted source's blocks, a superseded ingest of a source the index records,
// bytes of an unfinished block); anything else (a complete source the index lacks, blocks
// of a format-1 shard, a shard of other settings or with an unreadable header) is moved into
// STORE/quarantine/W/ instead, W named in the report and the log. The caller holds the
// writer lock (rank 0 before others write). Idempotent and itself crash-safe: a part is
// deleted only after its merge commits, and merging a part twice skips its sources
// (index_merge_from). Hard-linked shards (st_nlink > 1, e.g. shared with another store by
// `tessera index merge`) are never truncated, only unlinked when unreferenced. `report`
// (may be NULL) receives what was done.
typedef struct {
  int64_t parts_merged, clips_merged, sources_skipped;
  int64_t shards_truncated, bytes_cut, shards_removed, tmp_removed;
  store_quarantined quarantined;  // what was moved into quarantine, and where
  int deferred;             // readers were active: no shard byte was cut or removed
  char readers[1024];       // their descriptions when deferred
} store_recovery;
typedef struct {
  // 1: keep every complete block, cutting only bytes of unfinished blocks (`index
  // recover` after a rebuild: a damaged store, where no block is known to be garbage).
  int keep_blocks;
  // 1: the caller already holds store_lock_exclude_readers for the whole run (`index
  // recover`, which refuses rather than defers); 0: recovery takes it for its shard pass
  // and defers the cutting when readers are active.
  int readers_excluded;
} store_recover_opts;
tsr_status store_recover(const char *dir, store_index *ix);
tsr_status store_recover_report(const char *dir, store_index *ix, store_recovery *report);
tsr_status store_recover_with(const char *dir, store_index *ix, const store_recover_opts *o,
                              store_recovery *report);

// The whole repair of `tessera index recover`, by one process with the store to itself:
// takes the writer lock (refused, naming its holder, while an ingest or merge writes) and
// keeps readers out for the whole run (refused, naming them, while a process reads the
// store: recovery may cut bytes a reader has mapped); nothing is changed when refused.
// When the index is unusable (store_index_state) it says why through `say`, rebuilds the
// index from the shards (store_rebuild, whose lines also go to `say`; `say` NULL: the log)
// and then keeps every complete block (store_recover_opts.keep_blocks); then it recovers
// (store_recover_with). `rep` (not NULL) receives what was done; rep->rebuild only when
// rep->rebuilt.
typedef struct {
  int rebuilt;                   // the index was rebuilt from the shards
  store_rebuild_report rebuild;  // what the rebuild found (when rebuilt)
  store_recovery recovery;       // what recovery did
} store_repair_report;
tsr_status store_repair(const char *dir, void (*say)(const char *line, void *ctx), void *ctx,
                        store_repair_report *rep);

#endif
