// core/fs.h — small file-system helpers for crash-safe writes.
//
// A file's new name (rename, create) is durable only once its directory is synced;
// these helpers do that with errors that name the directory.
#ifndef TESSERA_CORE_FS_H
#define TESSERA_CORE_FS_H

#include <stddef.h>

#include "core/err.h"

// mkdir -p: creates `dir` and its missing parents (0755). A path component that exists
// and is not a directory, or any other failure, is TSR_EIO naming it.
tsr_status fs_mkdir_p(const char *dir);
// fsync of a directory (after creating, renaming or removing entries in it).
tsr_status fs_fsync_dir(const char *dir);
// fsync of the directory that holds `path`.
tsr_status fs_fsync_parent(const char *path);

// "a/b" into out (n bytes); TSR_EINVAL naming both parts when it does not fit.
tsr_status fs_join(char *out, size_t n, const char *a, const char *b);
// 1 if `s` ends with `suffix` (byte for byte / ASCII case ignored, for file extensions).
int fs_has_suffix(const char *s, const char *suffix);
int fs_has_suffix_nocase(const char *s, const char *suffix);

// ---- regular files only -----------------------------------------------------------------
// Everything tessera reads by name (checkpoints, latent and caption files, configs, cost and
// length tables, source lists, shards, videos) and every file it writes must be a regular
// file (a symbolic link to one is fine). Opening a FIFO blocks until something writes to it,
// so one left where a file was expected hangs a whole run; a device or socket is no file of
// ours, and replacing one by a rename (as root, `--out /dev/null`) breaks the machine.
// Errors are TSR_EINVAL naming the path and what it is ("a FIFO (named pipe)", "a character
// device", ...), or TSR_EIO naming the path and the system's reason it cannot be reached.
//
// Opens `path` for reading only if it is a regular file: *fd is then open (O_CLOEXEC,
// blocking reads); the check is made on the opened file, so nothing can swap the name in
// between, and opening never blocks (a FIFO is opened without waiting, then refused).
tsr_status fs_open_regular(const char *path, int *fd);
// fs_open_regular with options. FS_PIPE_OK, for text read from start to end (configs, cost
// and length tables, @LIST): an anonymous pipe is taken too (`--lengths <(...)`, a file
// piped to /dev/stdin): the process that made it holds its write end, so reading ends when
// that process is done. A named FIFO (mkfifo), which may have no writer ever, is still
// refused; so are devices (/dev/zero would be read forever) and sockets.
enum { FS_PIPE_OK = 1 };
tsr_status fs_open_input(const char *path, int flags, int *fd);
// The same check without opening, for a file that a library opens itself (libav's demuxer):
// TSR_OK if `path` is a regular file now.
tsr_status fs_check_regular(const char *path);
// For a file about to be written or replaced: TSR_OK if `path` does not exist or is a
// regular file; TSR_EINVAL naming it if it is anything else (a directory included).
tsr_status fs_check_output(const char *path);

// ---- atomic file writes -----------------------------------------------------------------
// The one way tessera replaces a file (checkpoints, metrics, cost files, videos, index
// copies): write it under PATH.tmp beside it, make its bytes durable, rename it over PATH,
// make the rename durable. Readers, and a crash at any moment, see the old file or the
// whole new one, never a part (a crash may leave PATH.tmp, which the next writer
// overwrites and the owners' recovery removes). One writer per PATH at a time.
//
//   fs_atomic a;
//   tsr_status st = fs_atomic_open(&a, path);      // a.f: the temporary file ("wb")
//   ... write to a.f ...                            // (or fs_atomic_name, then a library
//   if (!st) st = fs_atomic_commit(&a);             //  writes a.tmp itself)
//   fs_atomic_abort(&a);                            // always: removes a.tmp unless committed
typedef struct {
  char path[4096];
  char tmp[4096 + 8];
  void *f;            // FILE * open on tmp (fs_atomic_open), or NULL
  int live;           // tmp may exist and was not committed
} fs_atomic;

// Names PATH.tmp and opens it for writing in a->f. TSR_EIO naming it if it cannot be made.
// PATH and PATH.tmp must each be absent or a regular file (fs_check_output; PATH.tmp not even
// a symbolic link): a device, FIFO or socket is refused, never replaced or written into.
tsr_status fs_atomic_open(fs_atomic *a, const char *path);
// Names PATH.tmp only, for a library that creates and writes the file itself (libav), after
// the same checks of PATH and PATH.tmp.
tsr_status fs_atomic_name(fs_atomic *a, const char *path);
// Flushes and closes a->f (if open), fsyncs the temporary file, renames it to PATH and
// fsyncs the directory. Errors name the file and the step (disk full included).
tsr_status fs_atomic_commit(fs_atomic *a);
// Closes a->f and removes the temporary file unless the write was committed. Idempotent.
void fs_atomic_abort(fs_atomic *a);

#endif
