// ingest/store_quarantine.h — what store recovery may cut, decided by reading it, and the
// quarantine folder for what it may not (store.h, store_recover; docs/store-format.md
// "Durability and recovery"). Used by store.c's recovery only.
//
// Recovery used to cut every byte past a shard's committed end and delete every shard no
// row points at without reading them: a shard copied in from a store of other settings,
// or the intact clips after a damaged block, were lost. Now such bytes are read first:
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
#ifndef TESSERA_INGEST_STORE_QUARANTINE_H
#define TESSERA_INGEST_STORE_QUARANTINE_H

#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "ingest/store.h"

// Reads bytes [from, end of file) of shard `path` (from: its committed end, or
// SHARD_HEADER_BYTES for a shard no row points at, whose header is then compared with the
// store's settings `s`) and sets *keep = 1, with the reason in why (n bytes), when they
// hold data as above; *keep = 0 when they are garbage. Errors only for the index.
tsr_status store_range_verdict(store_index *ix, const store_settings *s, const char *path,
                               int64_t from, int keep_blocks, int *keep, char *why, size_t n);

// Moves shard `path` (file name `name`) whole into the quarantine folder of store `dir`,
// made on first use (STORE/quarantine/YYYYmmddTHHMMSS-PID/, its path into
// rep->quarantine).
tsr_status store_quarantine_shard(const char *dir, const char *path, const char *name,
                                  store_recovery *rep);
// Copies bytes [from, size) of shard `path` behind its header into the quarantine folder
// (as above) and makes the copy durable; the caller then cuts the shard at `from`.
tsr_status store_quarantine_tail(const char *dir, const char *path, const char *name,
                                 int64_t from, int64_t size, store_recovery *rep);

#endif
