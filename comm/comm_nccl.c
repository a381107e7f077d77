// comm/comm_nccl.c — "nccl": NCCL on device memory (comm/comm.h). Built with NCCL.
//
// Communicators: the world's, made by ncclCommInitRank with an id that rank 0 draws and
// broadcasts over MPI, then one per aligned group of every power-of-two size by
// ncclCommSplit (color = rank / k), and one per stride group of hybrid CP when
// comm_stride_groups_init made them, all once, in comm_nccl_open. One rank per GPU (the
// caller, comm_open, checks it).
//
// Streams: every operation is queued on one communication stream (high priority, so its
// kernels start while the compute kernels run) after an event recorded on the compute
// stream when the operation is called, and records a `done` event; `wait` makes the
// compute stream wait for `done`: the host never blocks, the transfer overlaps whatever
// compute is queued between start and wait. One stream for all communicators keeps every
// rank's NCCL operations in one order (two streams could deadlock two ranks that run them
// in different orders).
//
// Watchdog: every operation stays on a list until its `done` event has fired and the
// caller has waited for it. The watchdog (comm/comm.c) polls the list: an operation whose
// compute-side `ready` event fired more than comm_timeout() seconds ago without `done`,
// or an asynchronous error of a communicator (ncclCommGetAsyncError), ends the job after
// ncclCommAbort of every communicator (which unblocks the stream).
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"

typedef const comm_backend cb_t;

enum { NCCL_MAX_LEVELS = 31 };

typedef struct nccl_op {
  cudaEvent_t ready, done;  // compute stream at the call; communication stream after the op
  const char *what;         // for the watchdog
  int first, size, peer;    // group and the world rank waited on (-1: every member)
  double seen_ready;        // watchdog: when `ready` was first seen fired (0: not yet)
  int waited;               // the caller is done with it (wait, or a blocking entry)
  struct nccl_op *next;
} nccl_op;

typedef struct {
  comm_backend cb;
  int device;
  cudaStream_t compute, comm;
  // by group level (log2 of its size); stride groups (hybrid CP) at NCCL_MAX_LEVELS + the
  // level of their aligned block
  ncclComm_t comms[2 * NCCL_MAX_LEVELS];
  pthread_mutex_t mu;  // guards the list (the watchdog thread reads it)
  nccl_op *ops, *tail;
} nccl_ctx;

static nccl_ctx *ctx_of(cb_t *cb) { return (nccl_ctx *)cb->ctx; }

static tsr_status cuda_check(cudaError_t e, const char *what) {
  return comm_cuda_check(e, "nccl", what);
}

static tsr_status nccl_check(ncclResult_t r, ncclComm_t c, const char *what) {
  if (r == ncclSuccess) return TSR_OK;
  const char *last = c ? ncclGetLastError(c) : NULL;
  return err_set(TSR_ECOMM, "NCCL %s failed: %s%s%s", what, ncclGetErrorString(r),
                 last && *last ? ": " : "", last && *last ? last : "");
}

// ---- operations --------------------------------------------------------------------------

static void op_free(nccl_op *o) {
  if (o->ready) cudaEventDestroy(o->ready);
  if (o->done) cudaEventDestroy(o->done);
  free(o);
}

// Drops finished operations that the caller is done with. Under the lock.
static void retire(nccl_ctx *x) {
  nccl_op **pp = &x->ops, *prev = NULL;
  while (*pp) {
    nccl_op *o = *pp;
    if (o->waited && cudaEventQuery(o->done) == cudaSuccess) {
      *pp = o->next;
      if (x->tail == o) x->tail = prev;
      op_free(o);
    } else {
      cudaGetLastError();
      prev = o;
      pp = &o->next;
    }
  }
}

// Starts an operation: the communication stream waits for the compute stream's work so far.
static tsr_status op_begin(nccl_ctx *x, const char *what, const comm_group *g, int peer,
                           nccl_op **out) {
  nccl_op *o = calloc(1, sizeof *o);
  if (!o) return err_set(TSR_ENOMEM, "nccl: out of memory");
  o->what = what, o->first = g->first, o->size = g->size, o->peer = peer;
  tsr_status st = cuda_check(cudaEventCreateWithFlags(&o->ready, cudaEventDisableTiming), "cudaEventCreate");
  if (!st) st = cuda_check(cudaEventCreateWithFlags(&o->done, cudaEventDisableTiming), "cudaEventCreate");
  if (!st) st = cuda_check(cudaEventRecord(o->ready, x->compute), "cudaEventRecord");
  if (!st) st = cuda_check(cudaStreamWaitEvent(x->comm, o->ready, 0), "cudaStreamWaitEvent");
  if (st) {
    op_free(o);
    return st;
  }
  *out = o;
  return TSR_OK;
}

// Ends an operation whose NCCL calls returned `st`: records `done` and lists it.
static tsr_status op_end(nccl_ctx *x, nccl_op *o, tsr_status st, int waited) {
  if (!st) st = cuda_check(cudaEventRecord(o->done, x->comm), "cudaEventRecord");
  if (st) {
    op_free(o);
    return st;
  }
  o->waited = waited;
  pthread_mutex_lock(&x->mu);
  if (x->tail) x->tail->next = o;
  else x->ops = o;
  x->tail = o;
  retire(x);
  pthread_mutex_unlock(&x->mu);
  return TSR_OK;
}

// The compute stream waits for o; the caller is done with it.
static tsr_status op_wait(nccl_ctx *x, nccl_op *o) {
  tsr_status st = cuda_check(cudaStreamWaitEvent(x->compute, o->done, 0), "cudaStreamWaitEvent");
  pthread_mutex_lock(&x->mu);
  o->waited = 1;
  retire(x);
  pthread_mutex_unlock(&x->mu);
  return st;
}

static ncclComm_t comm_of(nccl_ctx *x, const comm_group *g) {
  return x->comms[(comm_group_stride(g) > 1 ? NCCL_MAX_LEVELS : 0) + g->level];
}

// ---- the table ---------------------------------------------------------------------------

static tsr_status nc_ring_start(cb_t *cb, comm_group *g, const void *send, void *recv,
                                int64_t bytes, comm_request **req) {
  nccl_ctx *x = ctx_of(cb);
  *req = NULL;
  if (bytes < 0) return err_set(TSR_EINVAL, "ring exchange of %lld bytes", (long long)bytes);
  int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
  nccl_op *o;
  tsr_status st = op_begin(x, "ring exchange", g, g->first + prev * g->stride, &o);
  if (st) return st;
  ncclComm_t c = comm_of(x, g);
  // a group of one sends to itself through NCCL too (recv = send)
  ncclResult_t r = ncclGroupStart();
  if (r == ncclSuccess) {
    ncclResult_t a = ncclSend(send, (size_t)bytes, ncclUint8, next, c, x->comm);
    ncclResult_t b = a == ncclSuccess ? ncclRecv(recv, (size_t)bytes, ncclUint8, prev, c, x->comm) : a;
    r = ncclGroupEnd();
    if (b != ncclSuccess) r = b;
  }
  st = op_end(x, o, nccl_check(r, c, "ring exchange (ncclSend/ncclRecv)"), 0);
  if (!st) *req = (comm_request *)o;
  return st;
}

// The collectives that are one NCCL call: the count check, the operation (op_begin, the
// call, op_end) and its `done` event as the request *req. n: values (all-reduce, reduce-scatter: fp32) or
// bytes (all-gather, broadcast) per member; root: the broadcast's group rank.
typedef enum { NC_ALLREDUCE, NC_ALLGATHER, NC_REDUCE_SCATTER, NC_BCAST } nc_kind;
static tsr_status nc_collective(nccl_ctx *x, nc_kind k, comm_group *g, const void *send,
                                void *recv, int64_t n, int root, comm_request **req) {
  static const char *const what[] = {"all-reduce", "all-gather", "reduce-scatter", "broadcast"};
  *req = NULL;
  if (n < 0)
    return err_set(TSR_EINVAL, "%s of %lld %s", what[k], (long long)n,
                   k == NC_ALLREDUCE || k == NC_REDUCE_SCATTER ? "values" : "bytes");
  nccl_op *o;
  TSR_TRY(op_begin(x, what[k], g, k == NC_BCAST ? g->first + root * g->stride : -1, &o));
  ncclComm_t c = comm_of(x, g);
  size_t cnt = (size_t)n;
  ncclResult_t r =
      k == NC_ALLREDUCE ? ncclAllReduce(send, recv, cnt, ncclFloat32, ncclSum, c, x->comm)
      : k == NC_ALLGATHER ? ncclAllGather(send, recv, cnt, ncclUint8, c, x->comm)
      : k == NC_REDUCE_SCATTER ? ncclReduceScatter(send, recv, cnt, ncclFloat32, ncclSum, c, x->comm)
                               : ncclBroadcast(send, recv, cnt, ncclUint8, root, c, x->comm);
  tsr_status st = op_end(x, o, nccl_check(r, c, what[k]), 0);
  if (!st) *req = (comm_request *)o;
  return st;
}

static tsr_status nc_iallreduce(cb_t *cb, comm_group *g, float *x_, int64_t n, comm_request **req) {
  return nc_collective(ctx_of(cb), NC_ALLREDUCE, g, x_, x_, n, 0, req);
}

static tsr_status nc_wait(cb_t *cb, comm_request **req) {
  nccl_op *o = (nccl_op *)*req;
  if (!o) return TSR_OK;
  *req = NULL;
  return op_wait(ctx_of(cb), o);
}

static tsr_status nc_test(cb_t *cb, comm_request *req, int *done) {
  *done = 1;
  if (!req) return TSR_OK;
  cudaError_t e = cudaEventQuery(((nccl_op *)req)->done);
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    *done = 0;
    return TSR_OK;
  }
  return cuda_check(e, "cudaEventQuery");
}

static tsr_status nc_iallgather(cb_t *cb, comm_group *g, const void *send, void *recv,
                                int64_t bytes, comm_request **req) {
  return nc_collective(ctx_of(cb), NC_ALLGATHER, g, send, recv, bytes, 0, req);
}

static tsr_status nc_ireduce_scatter(cb_t *cb, comm_group *g, const float *send, float *recv,
                                     int64_t n, comm_request **req) {
  return nc_collective(ctx_of(cb), NC_REDUCE_SCATTER, g, send, recv, n, 0, req);
}

// Grouped ncclSend/ncclRecv with every member (the own slice too: NCCL copies it); the
// request is the operation's `done` event.
static tsr_status nc_ialltoallv(cb_t *cb, comm_group *g, const void *send, const int64_t *sbytes,
                                const int64_t *sdispl, void *recv, const int64_t *rbytes,
                                const int64_t *rdispl, comm_request **req) {
  nccl_ctx *x = ctx_of(cb);
  *req = NULL;
  tsr_status st = comm_alltoallv_check(g, sbytes, sdispl, rbytes, rdispl);
  if (st) return st;
  nccl_op *o;
  st = op_begin(x, "all-to-all", g, -1, &o);
  if (st) return st;
  ncclComm_t c = comm_of(x, g);
  ncclResult_t r = ncclGroupStart(), e = ncclSuccess;
  for (int j = 0; j < g->size && r == ncclSuccess && e == ncclSuccess; j++) {
    if (sbytes[j])
      e = ncclSend((const char *)send + sdispl[j], (size_t)sbytes[j], ncclUint8, j, c, x->comm);
    if (e == ncclSuccess && rbytes[j])
      e = ncclRecv((char *)recv + rdispl[j], (size_t)rbytes[j], ncclUint8, j, c, x->comm);
  }
  if (r == ncclSuccess) r = ncclGroupEnd();
  if (e != ncclSuccess) r = e;
  st = op_end(x, o, nccl_check(r, c, "all-to-all (ncclSend/ncclRecv)"), 0);
  if (st) return st;
  *req = (comm_request *)o;
  comm_alltoall_count(g, rbytes);
  return TSR_OK;
}

static tsr_status nc_bcast(cb_t *cb, comm_group *g, void *buf, int64_t bytes, int root) {
  comm_request *r;
  TSR_TRY(nc_collective(ctx_of(cb), NC_BCAST, g, buf, buf, bytes, root, &r));
  return op_wait(ctx_of(cb), (nccl_op *)r);
}

// A host barrier: the work queued on both streams is done on every member.
static tsr_status nc_barrier(cb_t *cb, comm_group *g) {
  nccl_ctx *x = ctx_of(cb);
  tsr_status st = cuda_check(cudaStreamSynchronize(x->comm), "cudaStreamSynchronize");
  if (!st) st = cuda_check(cudaStreamSynchronize(x->compute), "cudaStreamSynchronize");
  if (st || g->comm == MPI_COMM_NULL || g->size == 1) return st;
  MPI_Request r;
  st = comm_mpi_check(MPI_Ibarrier(g->comm, &r), "group barrier");
  return st ? st : comm_mpi_wait(1, &r, "barrier", g, -1);
}

// ---- the watchdog's view -----------------------------------------------------------------

static int nc_overdue(void *ctx, double now, double timeout, char *msg, size_t n) {
  nccl_ctx *x = ctx;
  cudaSetDevice(x->device);  // this thread's device: the events and communicators live there
  for (int i = 0; i < 2 * NCCL_MAX_LEVELS; i++) {
    ncclResult_t async = ncclSuccess;
    if (x->comms[i] && ncclCommGetAsyncError(x->comms[i], &async) == ncclSuccess &&
        async != ncclSuccess && async != ncclInProgress) {
      snprintf(msg, n, "NCCL error in the communicator of groups of %d: %s", 1 << i,
               ncclGetErrorString(async));
      return 1;
    }
  }
  int late = 0;
  pthread_mutex_lock(&x->mu);
  retire(x);
  for (nccl_op *o = x->ops; o && !late; o = o->next) {
    if (cudaEventQuery(o->done) == cudaSuccess) continue;
    if (cudaEventQuery(o->ready) != cudaSuccess) {  // the compute stream is not there yet
      cudaGetLastError();
      continue;
    }
    if (o->seen_ready == 0) o->seen_ready = now;
    if (timeout > 0 && now - o->seen_ready > timeout) {
      char peers[96];
      if (o->peer >= 0) snprintf(peers, sizeof peers, "rank %d", o->peer);
      else snprintf(peers, sizeof peers, "the ranks of [%d, %d)", o->first, o->first + o->size);
      snprintf(msg, n, "NCCL %s in group [%d, %d) has waited %.0f s for %s: that rank died, "
               "hangs or is stuck far behind", o->what, o->first, o->first + o->size,
               now - o->seen_ready, peers);
      late = 1;
    }
  }
  pthread_mutex_unlock(&x->mu);
  return late;
}

static void nc_abort(void *ctx) {
  nccl_ctx *x = ctx;
  for (int i = 2 * NCCL_MAX_LEVELS - 1; i >= 0; i--)
    if (x->comms[i]) ncclCommAbort(x->comms[i]), x->comms[i] = NULL;
}

// ---- open and close ----------------------------------------------------------------------

static void destroy(nccl_ctx *x) {
  comm_watch_remove(x);
  if (x->comm) cudaStreamSynchronize(x->comm);
  pthread_mutex_lock(&x->mu);
  while (x->ops) {
    nccl_op *o = x->ops;
    x->ops = o->next;
    op_free(o);
  }
  pthread_mutex_unlock(&x->mu);
  for (int i = 0; i < 2 * NCCL_MAX_LEVELS; i++)
    if (x->comms[i]) ncclCommDestroy(x->comms[i]);
  if (x->comm) cudaStreamDestroy(x->comm);
  pthread_mutex_destroy(&x->mu);
  free(x);
}

tsr_status comm_nccl_open(void *stream, const comm_backend **out) {
  *out = NULL;
  nccl_ctx *x = calloc(1, sizeof *x);
  if (!x) return err_set(TSR_ENOMEM, "nccl: out of memory");
  pthread_mutex_init(&x->mu, NULL);
  x->compute = (cudaStream_t)stream;
  int lo = 0, hi = 0;
  tsr_status st = cuda_check(cudaGetDevice(&x->device), "cudaGetDevice");
  if (!st) st = cuda_check(cudaDeviceGetStreamPriorityRange(&lo, &hi), "cudaDeviceGetStreamPriorityRange");
  if (!st) st = cuda_check(cudaStreamCreateWithPriority(&x->comm, cudaStreamNonBlocking, hi),
                           "cudaStreamCreate (communication stream)");
  // the world's communicator: rank 0's id to everyone over MPI
  const int n = comm_size(), me = comm_rank();
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (!st && me == 0) st = nccl_check(ncclGetUniqueId(&id), NULL, "ncclGetUniqueId");
  if (!st) st = comm_bcast(&id, sizeof id, 0);
  int top = 0;
  while ((1 << top) < n) top++;
  ncclComm_t world = NULL;
  if (!st) {
    comm_watch_begin("NCCL communicator creation", NULL, -1);
    st = nccl_check(ncclCommInitRank(&world, n, id, me), NULL, "ncclCommInitRank (world)");
    comm_watch_end();
  }
  // the world's is the group of level top (log2 n, or one above the largest power of two
  // below n: comm_internal.h)
  x->comms[top] = world;
  // every smaller aligned group, split from the world's (collective over the world); a
  // rank beyond the last whole block of 2^lv ranks is in none (NCCL_SPLIT_NOCOLOR)
  for (int lv = 0; lv < top && (1 << lv) <= n && !st; lv++) {
    int member = me < n / (1 << lv) * (1 << lv);
    comm_watch_begin("NCCL communicator creation", NULL, -1);
    st = nccl_check(ncclCommSplit(world, member ? me >> lv : NCCL_SPLIT_NOCOLOR, me,
                                  &x->comms[lv], NULL), world, "ncclCommSplit (groups)");
    comm_watch_end();
  }
  // the stride groups of hybrid CP (comm_stride_groups_init), likewise
  const int u = comm_stride_u();
  for (int lv = 0; u && lv <= top && (1 << lv) <= n && !st; lv++) {
    if ((1 << lv) <= u) continue;
    int member = me < n / (1 << lv) * (1 << lv);
    comm_watch_begin("NCCL communicator creation", NULL, -1);
    st = nccl_check(ncclCommSplit(world, member ? me - me % (1 << lv) + me % u : NCCL_SPLIT_NOCOLOR,
                                  me, &x->comms[NCCL_MAX_LEVELS + lv], NULL), world,
                    "ncclCommSplit (hybrid CP groups)");
    comm_watch_end();
  }
  comm_watch_source src = {.overdue = nc_overdue, .abort = nc_abort, .ctx = x};
  if (!st) st = comm_watch_add(&src);
  if (st) {
    destroy(x);
    return err_wrap(st, "--comm nccl: ");
  }
  x->cb = (comm_backend){
      .name = "nccl",
      .mem = COMM_MEM_DEVICE,
      .stream = stream,
      .ctx = x,
      COMM_START_WAIT_ENTRIES,
      .iallgather = nc_iallgather,
      .ialltoallv = nc_ialltoallv,
      .ireduce_scatter_sum_f32 = nc_ireduce_scatter,
      .bcast = nc_bcast,
      .barrier = nc_barrier,
      .ring_start = nc_ring_start,
      .iallreduce_sum_f32 = nc_iallreduce,
      .test = nc_test,
      .wait = nc_wait,
  };
  *out = &x->cb;
  return TSR_OK;
}

void comm_nccl_close(const comm_backend *cb) { destroy(ctx_of(cb)); }
