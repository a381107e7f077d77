// Error messages: set, wrap with context, thread-locality.
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "core/err.h"

static void *other_thread(void *arg) {
  err_set(TSR_EIO, "thread message");
  return NULL;
}

int main(void) {
  CHECK(err_set(TSR_EIO, "open %s: %s", "a.mp4", "No such file") == TSR_EIO, "returns code");
  CHECK(!strcmp(err_msg(), "open a.mp4: No such file"), "got '%s'", err_msg());
  CHECK(err_wrap(TSR_EIO, "source %d: ", 3) == TSR_EIO, "wrap returns code");
  CHECK(!strcmp(err_msg(), "source 3: open a.mp4: No such file"), "got '%s'", err_msg());
  pthread_t t;
  pthread_create(&t, NULL, other_thread, NULL);
  pthread_join(t, NULL);
  CHECK(!strcmp(err_msg(), "source 3: open a.mp4: No such file"), "thread-local, got '%s'", err_msg());
  err_clear();
  CHECK(err_msg()[0] == '\0', "cleared");
  CHECK(!strcmp(err_name(TSR_EMISMATCH), "settings mismatch"), "name");
  return check_done();
}
