// store/quarantine.h — what store recovery may cut, decided by reading it, and the
// quarantine folder for what it may not (store/recover.h; docs/store-format.md
// "Durability and recovery"). Used by store/recover.c only.
//
// Bytes past a shard's committed end, and shards no row points at, are read before
// anything is cut, so that a shard copied in from a store of other settings, or the intact
// clips after a damaged block, are never lost:
//   garbage  (cut or deleted): no complete clip block (an unfinished write, a shard file
//            shorter than its header); or only blocks the index makes redundant: sources
//            it records as done (a superseded ingest), sources whose last clip is not there
//            (an interrupted ingest, which a rerun redoes);
//   data     (moved into STORE/quarantine/W/, never deleted): a complete ingest of a source
//            the index does not record, blocks of a format-1 shard (which has no metadata
//            to tell them apart), a shard of other settings or whose header is unreadable;
//            with keep_blocks every complete clip block. (A block without metadata in a
//            shard of format 2 or later is not one ingest writes: garbage.)
// A whole shard is moved (renamed) as it is; a tail is copied behind a copy of its shard's
// header into W/NAME-tail-OFFSET.tshard, a shard file whose blocks are the tail's (so
// `tessera index recover` on a store holding it reads them), fsync'ed before the shard is
// cut.
#ifndef TESSERA_STORE_QUARANTINE_H
#define TESSERA_STORE_QUARANTINE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "store/index.h"
#include "store/settings.h"

// What one recovery moved into quarantine (moved, never deleted).
typedef struct {
  int64_t shards, tails, bytes;  // whole shards, shard tails, and their bytes
  char dir[4200];                // the folder they went to ("" while nothing was moved)
} store_quarantined;

// Reads bytes [from, end of file) of shard `path` (from: its committed end, or
// SHARD_HEADER_BYTES for a shard no row points at, whose header is then compared with the
// store's settings `s`) and sets *keep = 1, with the reason in why (n bytes), when they
// hold data as above; *keep = 0 when they are garbage. Errors only for the index.
tsr_status store_range_verdict(store_index *ix, const store_settings *s, const char *path,
                               int64_t from, int keep_blocks, int *keep, char *why, size_t n);

// Moves shard `path` (file name `name`) whole into the quarantine folder of store `dir`,
// made on first use (STORE/quarantine/YYYYmmddTHHMMSS-PID/, its path into q->dir).
tsr_status store_quarantine_shard(const char *dir, const char *path, const char *name,
                                  store_quarantined *q);
// Copies bytes [from, size) of shard `path` behind its header into the quarantine folder
// (as above) and makes the copy durable; the caller then cuts the shard at `from`.
tsr_status store_quarantine_tail(const char *dir, const char *path, const char *name,
                                 int64_t from, int64_t size, store_quarantined *q);

#endif
