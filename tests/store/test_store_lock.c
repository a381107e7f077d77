// The lock module (core/lockfile.h) and the store's locks built on it (store/lock.h
// "Locks"), in one process: OFD locks of two descriptions conflict even here, which is
// what lets one process play writer and readers.
//  - byte locks: exclusive excludes all, shared ones coexist, release frees, bytes are
//    independent, the holder's text is written and read back;
//  - store: one writer; readers do not block the writer but block the exclusion (and are
//    named: pid and host), which succeeds once they are gone; a reader entry whose process
//    ended (no lock on it) is not counted and is removed; a directory that is no store
//    gets no lock file from a reader.
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"
#include "core/lockfile.h"
#include "store/layout.h"
#include "store/lock.h"

static char root[256];

static int exists(const char *p) { return access(p, F_OK) == 0; }

static void test_bytes(void) {
  char path[512], text[1024], me[1024];
  snprintf(path, sizeof path, "%s/bytes.lock", root);
  lockfile *a = NULL, *b = NULL, *c = NULL;
  CHECK_OK(lockfile_take(&a, path, 0, LOCKFILE_EXCLUSIVE, 0));
  CHECK(a != NULL, "exclusive lock of a fresh file");
  CHECK_OK(lockfile_take(&b, path, 0, LOCKFILE_SHARED, 0));
  CHECK(b == NULL, "a shared lock is refused while another description holds it exclusively");
  CHECK(lockfile_conflicts(path, 0, LOCKFILE_SHARED), "GETLK sees the exclusive holder");
  CHECK_OK(lockfile_take(&c, path, 1, LOCKFILE_EXCLUSIVE, 0));
  CHECK(c != NULL, "byte 1 is independent of byte 0");
  lockfile_release(&c);
  CHECK_OK(lockfile_write_self(a));
  lockfile_read_text(path, text, sizeof text);
  lockfile_describe_self(me, sizeof me);
  char pid[32];
  snprintf(pid, sizeof pid, "pid %d on host ", (int)getpid());
  CHECK(strstr(text, pid) == text, "holder text names this process: %s", text);
  lockfile_release(&a);
  CHECK(a == NULL && !lockfile_conflicts(path, 0, LOCKFILE_SHARED), "released");
  CHECK_OK(lockfile_take(&a, path, 0, LOCKFILE_SHARED, 0));
  CHECK_OK(lockfile_take(&b, path, 0, LOCKFILE_SHARED, 1));
  CHECK(a && b, "two shared locks coexist");
  CHECK(lockfile_conflicts(path, 0, LOCKFILE_EXCLUSIVE) && !lockfile_conflicts(path, 0, LOCKFILE_SHARED),
        "shared holders conflict with exclusive only");
  CHECK_OK(lockfile_take(&c, path, 0, LOCKFILE_EXCLUSIVE, 0));
  CHECK(c == NULL, "exclusive refused while shared locks are held");
  lockfile_release(&a);
  lockfile_release(&b);
  lockfile_release(&b);  // NULL-safe
}

static void test_store(void) {
  char store[512], who[2048], stale[640], notstore[512], lockf[640];
  snprintf(store, sizeof store, "%s/store", root);
  store_lock *w = NULL, *r1 = NULL, *r2 = NULL, *g = NULL;
  CHECK_OK(store_lock_acquire(&w, store, 1));
  CHECK(store_lock_holder(store, who, sizeof who), "writer held");
  // a store needs an index for readers to lock it: an empty file stands in
  char idx[640];
  snprintf(idx, sizeof idx, "%s/%s", store, STORE_INDEX_NAME);
  FILE *f = fopen(idx, "w");
  if (f) fclose(f);
  CHECK_OK(store_lock_read(&r1, store));
  CHECK_OK(store_lock_read(&r2, store));
  CHECK(r1 && r2, "two readers beside the writer");
  CHECK(store_lock_readers(store, who, sizeof who) == 2, "two readers listed: %s", who);
  char pid[32];
  snprintf(pid, sizeof pid, "pid %d on host ", (int)getpid());
  CHECK(strstr(who, pid) != NULL, "readers are named: %s", who);
  // an entry of a reader that was killed (no lock on it) is no reader
  snprintf(stale, sizeof stale, "%s/%s/deadhost-1-0", store, STORE_READERS_DIR);
  f = fopen(stale, "w");
  if (f) {
    fputs("pid 1 on host deadhost, command 'x', since long ago\n", f);
    fclose(f);
  }
  CHECK(store_lock_readers(store, who, sizeof who) == 2 && !strstr(who, "deadhost"),
        "a stale entry is not counted: %s", who);
  CHECK(!exists(stale), "and it is removed");
  CHECK_OK(store_lock_exclude_readers(&g, store, who, sizeof who));
  CHECK(g == NULL && strstr(who, pid), "exclusion refused while readers hold it: %s", who);
  store_lock_release(&r1);
  store_lock_release(&r2);
  CHECK(store_lock_readers(store, who, sizeof who) == 0, "no reader after release: %s", who);
  CHECK_OK(store_lock_exclude_readers(&g, store, who, sizeof who));
  CHECK(g != NULL, "exclusion taken once the readers are gone");
  store_lock_release(&g);
  store_lock_release(&w);
  CHECK(!store_lock_holder(store, who, sizeof who), "writer released");
  // a reader drops no lock file into a directory that is not a store
  snprintf(notstore, sizeof notstore, "%s/plain", root);
  mkdir(notstore, 0755);
  CHECK_OK(store_lock_read(&r1, notstore));
  snprintf(lockf, sizeof lockf, "%s/%s", notstore, STORE_LOCK_NAME);
  CHECK(r1 == NULL && !exists(lockf), "no lock file in a directory without an index");
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/tessera-test-store-lock-%d", (int)getpid());
  mkdir(root, 0755);
  test_bytes();
  test_store();
  scratch_remove(root);
  return check_done();
}
