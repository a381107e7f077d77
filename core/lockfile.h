// core/lockfile.h — an advisory lock on one byte of a lock file, and who holds it.
//
// The one lock machinery of tessera: the store's writer and reader locks (store/lock.h,
// docs/store-format.md "Locks") and the run directory's lock of `tessera train`
// (docs/train.md) are all made of it. A lock is an open-file-description lock
// (fcntl F_OFD_SETLK / F_OFD_SETLKW) on one byte, shared or exclusive:
//   - the kernel drops it when the process ends, however it ends (kill -9 included), so
//     no stale lock ever blocks the next run;
//   - it works on NFS (as a POSIX lock) where flock is emulated or absent;
//   - F_OFD_GETLK asks whether a conflicting lock is held without taking one;
//   - locks on different bytes of one file are independent, so one file can carry a
//     writer byte and a reader byte.
// Two open file descriptions conflict even inside one process (unlike classic POSIX
// locks, which a process never conflicts with): a process must not take the same byte
// twice in conflicting modes.
//
// The holder describes itself in the file's text (lockfile_write_self): "pid P on host H,
// command 'C', since YYYY-MM-DD HH:MM:SS UTC (unix T)", which refusals quote. The text is
// informative; whether a lock is held is asked of the kernel, never read from the text.
#ifndef TESSERA_CORE_LOCKFILE_H
#define TESSERA_CORE_LOCKFILE_H

#include <stddef.h>
#include "core/err.h"

typedef struct lockfile lockfile;

typedef enum { LOCKFILE_SHARED = 0, LOCKFILE_EXCLUSIVE = 1 } lockfile_mode;

// Opens `path` (created 0644 if missing, when the directory is writable) and locks byte
// `byte` (0..) in `mode`. wait = 1 blocks until the lock is granted; wait = 0 returns
// TSR_OK with *out = NULL when another open file description holds a conflicting lock.
// A shared lock on a file this process may only read is taken on a read-only descriptor.
// Errors (TSR_EIO) name the file and the reason (no permission, no such directory).
tsr_status lockfile_take(lockfile **out, const char *path, int byte, lockfile_mode mode,
                         int wait);
// Drops the lock (closing its descriptor) and frees l; *l = NULL. NULL is fine.
void lockfile_release(lockfile **l);
// Replaces the file's text with this process's description (one line). TSR_EIO naming the
// file when it cannot be written (a lock taken read-only cannot).
tsr_status lockfile_write_self(lockfile *l);
// The path given to lockfile_take.
const char *lockfile_path(const lockfile *l);

// 1 when another open file description holds a lock on byte `byte` of `path` that would
// conflict with `mode` (F_OFD_GETLK); 0 when none does or the file cannot be opened.
int lockfile_conflicts(const char *path, int byte, lockfile_mode mode);
// The first line of the file's text into out (n bytes): a holder's description, "a process
// that has not written its details yet" when empty, or "" when the file cannot be read.
void lockfile_read_text(const char *path, char *out, size_t n);
// This process's description, as lockfile_write_self writes it.
void lockfile_describe_self(char *out, size_t n);

#endif
