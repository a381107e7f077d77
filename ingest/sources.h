// ingest/sources.h — expand command-line sources into a sorted list of files.
//
// A source argument is a file (taken whatever its extension), a directory (walked
// recursively; only files the caller's filter takes, by default those with a video
// extension, see sources_is_video_name, and no hidden entries), or @LIST (a text file with one path per line; blank lines and lines
// starting with '#' are skipped; relative paths are relative to the list's folder).
// Paths become absolute and canonical (symlinks resolved) and duplicates are dropped;
// the result is sorted by path so every rank of a job sees the same list.
// Sources are what they are: each file is listed once, by device and inode, under the first
// of its names in path order (a symbolic or hard link to a file already listed is dropped
// and counted in `links`); a directory is walked once (a link back to a directory above, a
// loop, is not followed again), its entries in name order. A path that cannot be accessed,
// and a path that is not valid UTF-8 (the index and the shards' metadata record paths as
// UTF-8 text), is kept with `error` set, so it is recorded as a failed source on its own
// rather than silently ignored or failing the others.
#ifndef TESSERA_INGEST_SOURCES_H
#define TESSERA_INGEST_SOURCES_H

#include <stdint.h>
#include "core/err.h"

typedef struct {
  char *path;       // absolute path (malloc'ed)
  int64_t size;     // bytes
  int64_t mtime;    // seconds since the epoch
  char *error;      // NULL, or why the path cannot be read (malloc'ed)
  uint64_t dev, ino; // the file's identity (0, 0 when `error` is set)
} source_file;

typedef struct {
  source_file *v;
  int64_t n, cap;
  int64_t links;    // paths dropped as links to a file listed under another name
} source_list;

// Expands args into *out (initialised by the call). A directory walk takes the files whose
// name `accept` takes (NULL: sources_is_video_name); files named directly or in a list are
// taken whatever their name. Fails only for an unreadable @LIST file or out of memory;
// unreadable sources are listed with their error.
tsr_status sources_expand(char **args, int nargs, int (*accept)(const char *name),
                          source_list *out);
void sources_free(source_list *l);
int sources_is_video_name(const char *name);

#endif
