// store/lock.c — the store's writer and reader locks (store/lock.h), made of
// core/lockfile.h's byte locks on STORE/lock: byte 0 for the one writer, byte 1 shared
// by readers and taken exclusively by a writer while it cuts shard bytes. Readers name
// themselves in STORE/readers/ (an OFD lock reports no pid), each in a file it holds
// locked for its life, so a writer can tell live readers from the leftovers of killed ones.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/lock.h"

#include "core/fs.h"
#include "core/lockfile.h"
#include "core/log.h"
#include "store/layout.h"
#include "store/store.h"

enum { BYTE_WRITER = 0, BYTE_READERS = 1 };

struct store_lock {
  lockfile *lock;    // byte 0 exclusive (writer), byte 1 shared (reader) or exclusive (guard)
  lockfile *entry;   // a reader's own file in STORE/readers/, locked while it reads
  char *entry_name;  // its path (the lock was taken under a temporary name)
};

static tsr_status lock_path(char *out, size_t n, const char *dir) {
  if (snprintf(out, n, "%s/%s", dir, STORE_LOCK_NAME) >= (int)n)
    return err_set(TSR_EINVAL, "path too long: %s", dir);
  return TSR_OK;
}

static tsr_status wrap(store_lock **out, lockfile *lf) {
  store_lock *l = calloc(1, sizeof *l);
  if (!l) {
    lockfile_release(&lf);
    return err_set(TSR_ENOMEM, "out of memory locking a store");
  }
  l->lock = lf;
  *out = l;
  return TSR_OK;
}

// The store directory is made (create) or must be one: a lock file is never dropped into
// someone else's directory.
static tsr_status check_dir(const char *dir, int create) {
  char idx[PATH_MAX];
  if (snprintf(idx, sizeof idx, "%s/%s", dir, STORE_INDEX_NAME) >= (int)sizeof idx)
    return err_set(TSR_EINVAL, "path too long: %s", dir);
  struct stat sb;
  if (stat(dir, &sb) != 0) {
    if (!create) return err_set(TSR_EIO, "store %s does not exist: %s", dir, strerror(errno));
    tsr_status st = fs_mkdir_p(dir);
    return st ? err_wrap(st, "store %s: ", dir) : TSR_OK;
  }
  if (!S_ISDIR(sb.st_mode))
    return err_set(TSR_EINVAL, "store %s is not a directory (a store is a directory made by "
                   "`tessera ingest`)", dir);
  if (stat(idx, &sb) != 0 && store_dir_has_foreign_entries(dir))
    return err_set(TSR_EINVAL, "directory %s exists and is not a tessera store (no %s, other "
                   "files present); give a new or empty directory", dir, STORE_INDEX_NAME);
  // What a writer creates, writes, moves into or deletes: none of it through a link
  // planted in a store received from someone else (core/fs.h).
  static const char *const own[] = {STORE_INDEX_NAME, STORE_INDEX_NAME "-journal",
                                     STORE_INDEX_NAME "-wal", STORE_SHARD_DIR, STORE_PARTS_DIR,
                                     STORE_READERS_DIR, STORE_QUARANTINE_DIR};
  tsr_status st = fs_refuse_links(dir, own, (int)(sizeof own / sizeof *own));
  return st ? err_wrap(st, "store %s: ", dir) : TSR_OK;
}

tsr_status store_lock_acquire(store_lock **out, const char *dir, int create) {
  *out = NULL;
  char path[PATH_MAX];
  tsr_status st = lock_path(path, sizeof path, dir);
  if (!st) st = check_dir(dir, create);
  if (st) return st;
  lockfile *lf = NULL;
  if ((st = lockfile_take(&lf, path, BYTE_WRITER, LOCKFILE_EXCLUSIVE, 0)))
    return err_wrap(st, "store %s (a writer needs write access to the store): ", dir);
  if (!lf) {
    char who[1024];
    lockfile_read_text(path, who, sizeof who);
    return err_set(TSR_EINVAL, "store %s is being written by another process (%s); a store has "
                   "one writer at a time: wait for it to finish or stop it, then run again. "
                   "Nothing was changed", dir, who);
  }
  if ((st = lockfile_write_self(lf))) {
    lockfile_release(&lf);
    return err_wrap(st, "store %s: ", dir);
  }
  return wrap(out, lf);
}

void store_lock_release(store_lock **pl) {
  store_lock *l = *pl;
  if (!l) return;
  // A reader's file goes first, while its lock still says it is live: a writer listing
  // readers meanwhile sees it gone or live, never a stale file it would remove.
  if (l->entry_name) unlink(l->entry_name);
  lockfile_release(&l->entry);
  free(l->entry_name);
  // The writer's description is left for the next holder to overwrite; an unlocked file
  // says nothing (holders are asked of the kernel, not the file).
  lockfile_release(&l->lock);
  free(l);
  *pl = NULL;
}

int store_lock_holder(const char *dir, char *who, size_t n) {
  if (n) who[0] = 0;
  char path[PATH_MAX];
  if (lock_path(path, sizeof path, dir)) return 0;
  int held = lockfile_conflicts(path, BYTE_WRITER, LOCKFILE_SHARED);
  if (held && n) lockfile_read_text(path, who, n);
  return held;
}

// ---- readers ----------------------------------------------------------------------------

// Records this process in STORE/readers/HOST-PID-SEQ: made as a dot file, locked and
// described, then renamed into place, so a writer never sees an entry not yet locked (and
// would remove it as stale). Best effort: a store this process may not write has no entry.
static void add_entry(store_lock *l, const char *dir) {
  static int seq;  // several readers of one store in one process (tests, merge's inputs)
  char rdir[PATH_MAX], tmp[PATH_MAX], name[PATH_MAX], host[128] = "host";
  gethostname(host, sizeof host);
  host[sizeof host - 1] = 0;
  for (char *p = host; *p; p++)
    if (*p == '/' || *p == '.') *p = '_';
  int me = __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED);
  if (snprintf(rdir, sizeof rdir, "%s/%s", dir, STORE_READERS_DIR) >= (int)sizeof rdir ||
      snprintf(name, sizeof name, "%s/%s-%d-%d", rdir, host, (int)getpid(), me) >= (int)sizeof name ||
      snprintf(tmp, sizeof tmp, "%s/.%s-%d-%d", rdir, host, (int)getpid(), me) >= (int)sizeof tmp)
    return;
  if (fs_dir_nofollow(rdir, 1)) {
    err_clear();
    return;
  }
  lockfile *e = NULL;
  if (lockfile_take(&e, tmp, 0, LOCKFILE_EXCLUSIVE, 0) || !e) {
    err_clear();
    return;
  }
  // The lock stays on the file through the rename (it belongs to the open file).
  if (lockfile_write_self(e) || !(l->entry_name = strdup(name)) || rename(tmp, name) != 0) {
    unlink(tmp);
    lockfile_release(&e);
    free(l->entry_name);
    l->entry_name = NULL;
    err_clear();
    return;
  }
  l->entry = e;
}

tsr_status store_lock_read(store_lock **out, const char *dir) {
  *out = NULL;
  char path[PATH_MAX], idx[PATH_MAX];
  tsr_status st = lock_path(path, sizeof path, dir);
  if (st) return st;
  // Not a store (the caller's open says so): no lock file is dropped into it.
  struct stat sb;
  if (snprintf(idx, sizeof idx, "%s/%s", dir, STORE_INDEX_NAME) >= (int)sizeof idx ||
      stat(idx, &sb) != 0)
    return TSR_OK;
  lockfile *lf = NULL;
  st = lockfile_take(&lf, path, BYTE_READERS, LOCKFILE_SHARED, 0);
  if (!st && !lf) {  // a writer is cutting shard bytes: wait for it, saying so
    char who[1024];
    lockfile_read_text(path, who, sizeof who);
    log_info("store %s: waiting for its writer (%s) to finish cutting shard bytes before "
             "reading it", dir, who);
    st = lockfile_take(&lf, path, BYTE_READERS, LOCKFILE_SHARED, 1);
  }
  if (st) {
    log_warn("store %s: reading it without the reader lock (%s): a writer of this store will "
             "not know that this process reads it", dir, err_msg());
    err_clear();
    return TSR_OK;
  }
  if ((st = wrap(out, lf))) return st;
  add_entry(*out, dir);
  return TSR_OK;
}

int store_lock_readers(const char *dir, char *who, size_t n) {
  if (n) who[0] = 0;
  char path[PATH_MAX], rdir[PATH_MAX], entry[PATH_MAX + 256], text[1024];
  if (lock_path(path, sizeof path, dir) ||
      snprintf(rdir, sizeof rdir, "%s/%s", dir, STORE_READERS_DIR) >= (int)sizeof rdir)
    return 0;
  int count = 0;
  size_t len = 0;
  DIR *d = opendir(rdir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;  // ".", "..", and entries still being made
    snprintf(entry, sizeof entry, "%s/%s", rdir, e->d_name);
    if (!lockfile_conflicts(entry, 0, LOCKFILE_SHARED)) {
      unlink(entry);  // its reader ended without removing it (killed): not a reader
      continue;
    }
    lockfile_read_text(entry, text, sizeof text);
    if (len < n) len += (size_t)snprintf(who + len, n - len, "%s%s", count ? "; " : "", text);
    count++;
  }
  if (d) closedir(d);
  // The lock is the truth: a reader may hold it without an entry (no write access, or
  // between taking the lock and writing the entry).
  if (!count && lockfile_conflicts(path, BYTE_READERS, LOCKFILE_EXCLUSIVE)) {
    if (n) snprintf(who, n, "a process that could not record its details in %s", rdir);
    count = 1;
  }
  return count;
}

tsr_status store_lock_exclude_readers(store_lock **guard, const char *dir, char *who, size_t n) {
  *guard = NULL;
  if (n) who[0] = 0;
  char path[PATH_MAX];
  tsr_status st = lock_path(path, sizeof path, dir);
  lockfile *lf = NULL;
  if (!st) st = lockfile_take(&lf, path, BYTE_READERS, LOCKFILE_EXCLUSIVE, 0);
  if (st) return err_wrap(st, "store %s: ", dir);
  if (!lf) {
    if (!store_lock_readers(dir, who, n) && n)  // the last reader just ended
      snprintf(who, n, "a reader that has just ended");
    return TSR_OK;
  }
  return wrap(guard, lf);
}
