// core/fs.h — small file-system helpers for crash-safe writes.
//
// A file's new name (rename, create) is durable only once its directory is synced;
// these helpers do that with errors that name the directory.
#ifndef TESSERA_CORE_FS_H
#define TESSERA_CORE_FS_H

#include <stddef.h>
#include <stdio.h>

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

// ---- inside a store or run directory: no link followed ---------------------------------
// A store or run directory received from someone else is untrusted input: a symbolic link
// planted in it (its lock, metrics.jsonl, train.log, tensorboard/, quarantine/, shards/)
// must not make tessera create, truncate, write, move into or delete a file outside it.
// These open the last component with O_NOFOLLOW (folders: lstat) and refuse a link with
// TSR_EINVAL naming it; anything else that is not a regular file (folder) is refused too.
//
// open(2) of `path` with `oflags` (O_CREAT makes it 0644) plus O_NOFOLLOW, never waiting
// on a FIFO: *fd (O_CLOEXEC, blocking) on a regular file.
tsr_status fs_open_nofollow(const char *path, int oflags, int *fd);
// The same as a FILE *: mode "w" (created or truncated), "a" (created or appended to).
tsr_status fs_fopen_nofollow(const char *path, const char *mode, FILE **f);
// TSR_OK if `path` is a folder and not a link; an absent one is made (0755) when `create`,
// else TSR_OK too.
tsr_status fs_dir_nofollow(const char *path, int create);
// TSR_OK if none of the entries `names` (n) of folder `dir` is a symbolic link.
tsr_status fs_refuse_links(const char *dir, const char *const *names, int n);

// ---- atomic file writes -----------------------------------------------------------------
// The one way tessera replaces a file (checkpoints, LoRA files, metrics, cost files, videos,
// reports, index copies): write it under a temporary name beside it that no other writer
// uses (PATH.tmp.PID.RAND, created O_EXCL, so never a link, FIFO or another writer's file),
// make its bytes durable, rename it over PATH, make the rename durable. Readers, and a crash
// at any moment, see the old file or one writer's whole new one, never a part; two writers
// at once each write their own temporary file and the last rename wins whole. A crash may
// leave PATH.tmp.PID.RAND, which the owners' recovery removes (fs_is_atomic_tmp).
//
//   fs_atomic a;
//   tsr_status st = fs_atomic_open(&a, path);      // a.f: the temporary file ("wb")
//   ... write to a.f ...                            // (or fs_atomic_name, then a library
//   if (!st) st = fs_atomic_commit(&a);             //  writes a.tmp itself)
//   fs_atomic_abort(&a);                            // always: removes a.tmp unless committed
typedef struct {
  char path[4096];
  char tmp[4096 + 40];
  void *f;            // FILE * open on tmp (fs_atomic_open), or NULL
  int live;           // tmp may exist and was not committed
} fs_atomic;

// Creates the temporary file and opens it for writing in a->f. TSR_EIO naming it if it
// cannot be made. PATH must be absent or a regular file (fs_check_output): a device, FIFO or
// socket is refused, never replaced.
tsr_status fs_atomic_open(fs_atomic *a, const char *path);
// Creates the temporary file (empty) and closes it, for a library that opens a->tmp by name
// and writes it itself (libav, SQLite), after the same check of PATH.
tsr_status fs_atomic_name(fs_atomic *a, const char *path);
// Flushes and closes a->f (if open), fsyncs the temporary file, renames it to PATH and
// fsyncs the directory. Errors name the file and the step (disk full included).
tsr_status fs_atomic_commit(fs_atomic *a);
// Closes a->f and removes the temporary file unless the write was committed. Idempotent.
void fs_atomic_abort(fs_atomic *a);
// 1 if file name `name` is a temporary name of fs_atomic or fs_atomic_dir (NAME.tmp.PID.RAND,
// or NAME.tmp as older versions wrote), for the recovery that removes a crash's leftovers.
int fs_is_atomic_tmp(const char *name);

// ---- atomic folder writes ---------------------------------------------------------------
// A folder written whole (a diffusers model folder): its files are written into a fresh
// folder DIR.tmp.PID.RAND beside DIR, which is then swapped in for DIR in one step
// (renameat2 RENAME_EXCHANGE; a plain rename when DIR is new), and the old folder emptied.
// Readers and a crash see the old folder or a whole new one; two writers at once each fill
// their own folder and the last swap wins whole; no file of the old folder's outputs
// survives beside the new one (a stale layout's index and shards included). Entries of the
// old folder that the caller's `replaced` does not claim (a README, a user's notes) are
// moved into the new one. DIR given as a link to a folder writes that folder.
typedef struct {
  char path[4096];      // DIR
  char tmp[4096 + 40];  // the fresh folder to write the files into
  int live;             // tmp exists and was not swapped in
} fs_atomic_dir;
// Creates d->tmp. DIR must be absent or a folder.
tsr_status fs_atomic_dir_open(fs_atomic_dir *d, const char *path);
// fsyncs d->tmp (its files must be durable already: fs_atomic writes them so), swaps it in,
// fsyncs the parent; then removes the old folder's entries that replaced(name) claims and
// keeps the others.
tsr_status fs_atomic_dir_commit(fs_atomic_dir *d, int (*replaced)(const char *name));
// Removes d->tmp and its files unless committed; keeps the caller's error message.
void fs_atomic_dir_abort(fs_atomic_dir *d);

#endif
