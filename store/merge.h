// store/merge.h — `tessera index merge`: stores of the same settings merged into one,
// their shards hard-linked (copied across file systems), their indexes merged.
//
// Units: counts. Errors name the store and shard concerned.
#ifndef TESSERA_STORE_MERGE_H
#define TESSERA_STORE_MERGE_H

#include <stdint.h>

#include "core/err.h"

typedef struct {
  int64_t stores;        // input stores merged
  int64_t shards_linked, shards_copied;  // shard files hard-linked / copied into OUT
  int64_t clips;         // clips added to OUT
  int64_t skipped;       // sources already done in OUT (or in an earlier input)
} store_merge_result;

// Merges the stores ins[0..n) into `out` (created if needed). All stores must have the
// same settings, the same filters where they record some (index_filters), no unmerged
// parts, and `out` must not be one of them: otherwise it fails (TSR_EMISMATCH /
// TSR_EINVAL, listing every offending store) before writing anything. Shard files go to OUT/shards under a prefix unique to this merge
// ("m<time>-<pid>-<seq>-<i>-<name>"), hard-linked when on the same file system, else copied and
// fsync'ed (via NAME.tmp + rename); then each input's index is merged (one transaction
// each, index_merge_from). A crash leaves only unreferenced shards, which store_recover
// (run at the start and end) removes. The inputs are not modified.
tsr_status store_merge(const char *out, char *const *ins, int n, store_merge_result *res);

#endif
