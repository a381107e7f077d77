// store/lock.h — the writer and reader locks of a store (docs/store-format.md "Locks").
#ifndef TESSERA_STORE_LOCK_H
#define TESSERA_STORE_LOCK_H

#include <stddef.h>

#include "core/err.h"

// STORE/lock carries two locks (core/lockfile.h: OFD locks, dropped by the kernel when
// their process ends, kill -9 included, so a crashed process never blocks the next):
//   byte 0, the writer lock: a store has one writer at a time. Every command that modifies
//     a store (ingest, `index recover`, `index merge` for its output) takes it before it
//     reads or changes anything and holds it to the end (a multi-rank ingest on rank 0
//     for the whole job); its holder's description is the file's text.
//   byte 1, the reader lock: every process that maps shards (train, `index export`,
//     `index verify`, merge's inputs) holds it shared while it reads, and names itself in
//     STORE/readers/. A writer that would truncate or delete shard bytes (recovery) holds
//     it exclusively for that work, so it never cuts bytes a reader may have mapped (the
//     reader would die of SIGBUS): with readers active, ingest and merge only append and
//     leave the cutting to a later recovery; `index recover` refuses, naming the readers.
//     A reader that starts during such work waits for it (seconds).
typedef struct store_lock store_lock;

// Takes the writer lock of store `dir` (STORE/lock, created if missing; with `create`,
// `dir` is created too if missing). A directory that is not a store (other files, no
// index) is refused without writing into it. Then writes this process's description into
// the lock file (pid, host, command line, since when). A store locked by another process:
// TSR_EINVAL whose message names that holder; nothing is changed.
tsr_status store_lock_acquire(store_lock **lock, const char *dir, int create);
// Releases a writer, reader or exclusion lock (NULL-safe; sets *lock to NULL); a reader's
// file in STORE/readers/ is removed.
void store_lock_release(store_lock **lock);
// 1 if another process holds the writer lock of `dir` (its description in who, n bytes);
// 0 if none (or no lock file). Takes no lock, so it never gets in a writer's way.
int store_lock_holder(const char *dir, char *who, size_t n);

// Takes the reader lock of store `dir` for a process that maps its shards: shared,
// waiting (with a log line) while a writer cuts shard bytes; then records this process in
// STORE/readers/. Take it before reading the rows, hold it until the last mapping is gone.
// A directory without an index is no store: *lock = NULL, TSR_OK, nothing written (the
// caller's open of the store says what is wrong). A store this process may not write (no
// lock file can be made) is read without the lock: *lock = NULL, TSR_OK, and a warning
// says that writers will not see this reader.
tsr_status store_lock_read(store_lock **lock, const char *dir);
// The processes holding the reader lock of `dir`: their count (0: none), their
// descriptions "; "-joined into who (n bytes). Entries of STORE/readers/ whose process has
// ended are removed on the way.
int store_lock_readers(const char *dir, char *who, size_t n);
// For a writer about to truncate or delete shard bytes: takes the reader lock of `dir`
// exclusively, without waiting. *guard is the held lock (release it when the cutting is
// done; readers that start meanwhile wait), or NULL when readers are active, their
// descriptions then in who (n bytes).
tsr_status store_lock_exclude_readers(store_lock **guard, const char *dir, char *who, size_t n);

#endif
