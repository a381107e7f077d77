// store/store.h — a store directory as a whole: creating and opening it, what belongs in it,
// its shards' committed ends and its clips' lengths (store/layout.h names its entries).
//
// Units: times in seconds, sizes in bytes, lengths in frames or tokens as named.
#ifndef TESSERA_STORE_STORE_H
#define TESSERA_STORE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "store/index.h"
#include "store/settings.h"

// Creates STORE (and shards/, parts/) if needed and opens its index (see index_open for
// settings checks). Does not recover; see store_recover. With `create`, an existing
// directory that holds other files but no index is refused (not a store); an existing
// index is checked before any directory is made, so a refused open writes nothing.
tsr_status store_open(store_index **ix, const char *dir, int create,
                      const store_settings *settings);

// 1 if `dir` exists and holds entries other than a store's own (index, shards/, parts/,
// lock, readers/, quarantine/): such a directory is not a store and nothing is written
// into it.
int store_dir_has_foreign_entries(const char *dir);

// Committed end of shard `rel` (file `path`) of the store: the end of the last block a
// row points at, as that block's header gives it (payload + metadata trailer + padding);
// 0 if no row points at the shard. A last block whose header is unreadable falls back to
// the rows' sizes (index_shard_end); rows giving an impossible end (negative, unaligned,
// past 2^62) are TSR_EFORMAT naming the shard, so recovery cuts nothing on their word.
tsr_status store_shard_committed_end(store_index *ix, const char *path, const char *rel,
                                     int64_t *end);

// Clip lengths for the scheduler: arrays of n clip ids and token counts (malloc'ed,
// caller frees), in id order.
tsr_status store_clip_lengths(const char *dir, int64_t **ids, int64_t **tokens, int64_t *n);

#endif
