// store/verify.h — `tessera index verify`: every shard and clip of a store checked against
// its index, every payload hashed; nothing is changed.
//
// Units: bytes, counts. Messages of problems and errors name the shard, offset, clip id and
// source concerned.
#ifndef TESSERA_STORE_VERIFY_H
#define TESSERA_STORE_VERIFY_H

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

// store_verify as `tessera index verify` runs it: under the store's reader lock
// (store_lock_read: no recovery cuts the shard bytes it maps meanwhile), and without the
// writer lock, so it never stops a writer; when a writer is active, a note (through
// `report`, is_problem 0) says so first, since that writer's uncommitted shard tails and
// parts then show as notes.
tsr_status store_verify_as_reader(const char *dir,
                                  void (*report)(const char *line, int is_problem, void *ctx),
                                  void *ctx, store_verify_result *res);

#endif
