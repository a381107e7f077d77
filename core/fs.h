// core/fs.h — small file-system helpers for crash-safe writes.
//
// A file's new name (rename, create) is durable only once its directory is synced;
// these helpers do that with errors that name the directory.
#ifndef TESSERA_CORE_FS_H
#define TESSERA_CORE_FS_H

#include "core/err.h"

// mkdir -p: creates `dir` and its missing parents (0755). A path component that exists
// and is not a directory, or any other failure, is TSR_EIO naming it.
tsr_status fs_mkdir_p(const char *dir);
// fsync of a directory (after creating, renaming or removing entries in it).
tsr_status fs_fsync_dir(const char *dir);
// fsync of the directory that holds `path`.
tsr_status fs_fsync_parent(const char *path);

#endif
