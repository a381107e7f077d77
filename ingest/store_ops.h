// ingest/store_ops.h — whole-store operations behind `tessera index`: verify and merge.
//
// Units: bytes, counts. Both take store directories (store.h). Messages of problems and
// errors name the shard, offset, clip id and source concerned.
#ifndef TESSERA_INGEST_STORE_OPS_H
#define TESSERA_INGEST_STORE_OPS_H

#include <stdint.h>
#include "core/err.h"

typedef struct {
  int64_t shards, shards_bad;  // shard files checked / with an unreadable or invalid header
  int64_t clips, clips_bad;    // clip rows checked / whose block or payload is bad or missing
  int64_t bytes;               // payload bytes hashed
  int64_t orphan_shards;       // shard files no clip points at (store_recover removes them)
  int64_t tail_bytes;          // bytes past committed shard ends (store_recover cuts them)
  int64_t parts;               // unmerged per-rank parts (store_recover merges them)
} store_verify_result;

// Checks every shard's header and every clip's block header and payload checksum against
// the index (read-only). Each problem is passed to `report` (may be NULL) as one line;
// notes about what recovery would tidy (orphans, tails, parts) are passed with
// `is_problem` = 0. Returns TSR_OK when the check ran (corruption is counted in `res`:
// shards_bad + clips_bad > 0); an error when the store cannot be read at all.
tsr_status store_verify(const char *dir,
                        void (*report)(const char *line, int is_problem, void *ctx), void *ctx,
                        store_verify_result *res);

typedef struct {
  int64_t stores;        // input stores merged
  int64_t shards_linked, shards_copied;  // shard files hard-linked / copied into OUT
  int64_t clips;         // clips added to OUT
  int64_t skipped;       // sources already done in OUT (or in an earlier input)
} store_merge_result;

// Merges the stores ins[0..n) into `out` (created if needed). All stores must have the
// same settings and no unmerged parts, and `out` must not be one of them: otherwise it
// fails (TSR_EMISMATCH / TSR_EINVAL, listing every offending store) before writing
// anything. Shard files go to OUT/shards under a prefix unique to this merge
// ("m<time>-<pid>-<seq>-<i>-<name>"), hard-linked when on the same file system, else copied and
// fsync'ed (via NAME.tmp + rename); then each input's index is merged (one transaction
// each, index_merge_from). A crash leaves only unreferenced shards, which store_recover
// (run at the start and end) removes. The inputs are not modified.
tsr_status store_merge(const char *out, char *const *ins, int n, store_merge_result *res);

#endif
