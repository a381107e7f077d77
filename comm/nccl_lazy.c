// comm/nccl_lazy.c — NCCL opened when `--comm nccl` (or auto on GPUs) first sets it up, not at
// program start (core/lazylib.h): the functions of nccl.h that comm_nccl.c calls, each
// forwarding to the library's own. The build links this file instead of libnccl
// (comm/CMakeLists.txt: TSR_NCCL_PATH, TSR_NCCL_SONAME).
#include <nccl.h>
#include <stdio.h>

#include "core/lazylib.h"

static lazylib lib = LAZYLIB_INIT(TSR_NCCL_PATH, TSR_NCCL_SONAME);

// A forwarding definition of NCCL function NAME (PARAMS, called with ARGS).
#define FORWARD(NAME, PARAMS, ARGS) \
  LAZYLIB_FORWARD(lib, ncclResult_t, ncclSystemError, NAME, PARAMS, ARGS)

FORWARD(ncclGetUniqueId, (ncclUniqueId *id), (id))
FORWARD(ncclCommInitRank, (ncclComm_t *comm, int nranks, ncclUniqueId id, int rank),
        (comm, nranks, id, rank))
FORWARD(ncclCommSplit, (ncclComm_t comm, int color, int key, ncclComm_t *out, ncclConfig_t *cfg),
        (comm, color, key, out, cfg))
FORWARD(ncclCommAbort, (ncclComm_t comm), (comm))
FORWARD(ncclCommDestroy, (ncclComm_t comm), (comm))
FORWARD(ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *err), (comm, err))
FORWARD(ncclGroupStart, (void), ())
FORWARD(ncclGroupEnd, (void), ())
FORWARD(ncclAllReduce,
        (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
         cudaStream_t stream),
        (s, r, n, t, op, comm, stream))
FORWARD(ncclAllGather,
        (const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t comm, cudaStream_t stream),
        (s, r, n, t, comm, stream))
FORWARD(ncclReduceScatter,
        (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
         cudaStream_t stream),
        (s, r, n, t, op, comm, stream))
FORWARD(ncclBroadcast,
        (const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t comm,
         cudaStream_t stream),
        (s, r, n, t, root, comm, stream))
FORWARD(ncclSend,
        (const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t stream),
        (s, n, t, peer, comm, stream))
FORWARD(ncclRecv,
        (void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t stream),
        (r, n, t, peer, comm, stream))

// The texts: when the library could not be opened, why (every caller's message goes through
// one of these).
static const char *not_opened(void) {
  static __thread char why[600];
  snprintf(why, sizeof why, "NCCL could not be opened (%s)", lazylib_why(&lib));
  return why;
}

const char *ncclGetErrorString(ncclResult_t result) {
  static _Atomic(void *) cache;
  const char *(*f)(ncclResult_t) =
      (const char *(*)(ncclResult_t))lazylib_sym_cached(&lib, &cache, "ncclGetErrorString");
  return f ? f(result) : not_opened();
}

const char *ncclGetLastError(ncclComm_t comm) {
  static _Atomic(void *) cache;
  const char *(*f)(ncclComm_t) =
      (const char *(*)(ncclComm_t))lazylib_sym_cached(&lib, &cache, "ncclGetLastError");
  return f ? f(comm) : not_opened();
}
