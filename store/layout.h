// store/layout.h — the names of a store directory's entries.
//
// A store is a directory:
//   STORE/index.sqlite        the index (settings, sources, clips); docs/store-format.md
//   STORE/shards/*.tshard     append-only shard files of clip blocks (store/shard.h)
//   STORE/lock                the writer and reader locks (store/lock.h) and the writer
//   STORE/readers/NAME        one file per process reading the store: who it is
//   STORE/parts/rank-R.sqlite per-rank indexes of a running multi-rank ingest; merged
//                             into index.sqlite by rank 0 at the end (or by the next run)
//   STORE/quarantine/W/       what recovery could not use, moved there (never deleted)
//
// Durability rule: a clip's shard bytes are fdatasync'ed before the index transaction
// that records the clip commits. A crash at any moment therefore leaves shard tails
// that no index row points at; store_recover (store/recover.h) cuts them off (truncate) and deletes
// shards that no row points at, so a rerun resumes with no duplicate and no lost clip,
// once it has read them and found nothing the index does not hold elsewhere.
//
// Units: times in seconds, sizes in bytes, lengths in frames or tokens as named.
// Ownership: handles returned by *_open are freed with the matching *_close/*_free.
// Threads: a store_index handle is used by one thread at a time (callers lock).
#ifndef TESSERA_STORE_LAYOUT_H
#define TESSERA_STORE_LAYOUT_H


#define STORE_INDEX_NAME "index.sqlite"
#define STORE_SHARD_DIR "shards"
#define STORE_PARTS_DIR "parts"
#define STORE_LOCK_NAME "lock"
#define STORE_READERS_DIR "readers"
#define STORE_QUARANTINE_DIR "quarantine"

#endif
