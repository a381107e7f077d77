// core/lazylib.c — shared libraries opened at their first use (core/lazylib.h).
#include "core/lazylib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

// The lazylib whose pthread_once runs: pthread_once takes no argument.
static __thread lazylib *opening;

static void open_lib(void) {
  lazylib *l = opening;
  size_t used = 0;
  for (int i = 0; i < 2 && !l->handle; i++) {
    if (!l->paths[i] || !l->paths[i][0]) continue;
    l->handle = dlopen(l->paths[i], RTLD_NOW | RTLD_LOCAL);
    if (!l->handle && used < sizeof l->why) {
      const char *e = dlerror();
      used += (size_t)snprintf(l->why + used, sizeof l->why - used, "%s%s", used ? "; " : "",
                               e ? e : l->paths[i]);
    }
  }
  if (l->handle) l->why[0] = '\0';
}

void *lazylib_sym(lazylib *l, const char *name) {
  opening = l;
  pthread_once(&l->once, open_lib);
  if (!l->handle) return NULL;
  void *f = dlsym(l->handle, name);
  if (!f) snprintf(l->why, sizeof l->why, "%s: no function %s", l->paths[1], name);
  return f;
}

void *lazylib_sym_cached(lazylib *l, _Atomic(void *) *cache, const char *name) {
  void *f = atomic_load_explicit(cache, memory_order_acquire);
  if (!f && (f = lazylib_sym(l, name))) atomic_store_explicit(cache, f, memory_order_release);
  return f;
}

const char *lazylib_why(const lazylib *l) { return l->why; }
