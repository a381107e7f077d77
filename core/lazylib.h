// core/lazylib.h — a shared library opened on the first call of one of its functions, not
// at program start: the CUDA backend's largest libraries (cuBLASLt: 522 MiB of address
// space, NCCL: 183 MiB) are mapped only by the commands that use them, so the CPU-only ones
// (`tessera --version`, ingest, plan) run under a tight `ulimit -v` (docs/gpu.md).
//
// A forwarding shim defines each function of the library under its own name (the header's
// prototype) and calls the real one through lazylib_sym; the build links the shim instead
// of the library (kernels/cuda/cublaslt_lazy.c, comm/nccl_lazy.c).
#ifndef TESSERA_CORE_LAZYLIB_H
#define TESSERA_CORE_LAZYLIB_H

#include <pthread.h>
#include <stdatomic.h>

typedef struct {
  const char *paths[2];  // tried in order: the path the build found, then the soname
  pthread_once_t once;   // PTHREAD_ONCE_INIT
  void *handle;          // NULL until opened, or when neither path opened
  char why[512];         // why it could not be opened (dlerror of each path)
} lazylib;

#define LAZYLIB_INIT(path, soname) {{(path), (soname)}, PTHREAD_ONCE_INIT, NULL, ""}

// The address of function `name` of l (opening l on the first call, thread-safe), or NULL
// when l cannot be opened or lacks it: then lazylib_why says why.
void *lazylib_sym(lazylib *l, const char *name);
// Why l (or its last symbol asked for) is not there; "" when it is.
const char *lazylib_why(const lazylib *l);
// lazylib_sym remembered in *cache (one per function, a shim's static, NULL at first): the
// calls after the first that found it cost one atomic load.
void *lazylib_sym_cached(lazylib *l, _Atomic(void *) *cache, const char *name);

// The forwarding definition of function NAME of l: RET NAME PARAMS, calling the real one
// with ARGS (PARAMS' names), or returning FAIL when l cannot be opened or lacks NAME.
#define LAZYLIB_FORWARD(l, RET, FAIL, NAME, PARAMS, ARGS)                          \
  RET NAME PARAMS {                                                                 \
    static _Atomic(void *) cache;                                                   \
    RET(*f) PARAMS = (RET(*) PARAMS)lazylib_sym_cached(&(l), &cache, #NAME);        \
    return f ? f ARGS : (FAIL);                                                     \
  }

#endif
