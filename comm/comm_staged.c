// comm/comm_staged.c — "mpi-staged": MPI with device buffers staged through pinned host
// memory (comm/comm.h). Built with CUDA. The fallback for clusters without NCCL and the way
// to run several ranks on one GPU (NCCL refuses that), so the CP logic on GPUs can be
// tested on a one-GPU machine.
//
// Every operation has three stages:
//   0. the device data goes to a pinned host buffer on the copy stream, ordered after the
//      work queued on the compute stream so far (an event), so `start` returns at once;
//   1. MPI moves the host buffer (non-blocking: Isend/Irecv, Iallreduce), started once the
//      copy is done: by `test` (the trainer tests earlier gradient buckets while backward
//      goes on) or at the latest by `wait`;
//   2. the result goes back to the device buffer on the copy stream; `wait` makes the
//      compute stream wait for it (an event) without blocking the host.
// The host blocks only inside `wait` (for the copy out and the MPI transfer), and by then
// it has queued the compute that the transfer overlaps: code written as start, compute,
// wait overlaps the transfer with the compute on the GPU.
//
// Collectives of one communicator must start in the same order on every rank, so the
// non-blocking all-reduces wait in a FIFO and start in issue order; a blocking collective
// first starts every one issued before it. Ring exchanges and all-to-alls (blocking or not:
// the blocking one is the other waited) are point-to-point with a tag per exchange
// (comm_ring_tag): their receives are posted at the start, their sends may start late, in
// any order. An all-to-all copies back only the ranges its members wrote.
//
// Buffers: pinned host buffers are kept in a pool (cudaMallocHost is slow) and reused once
// the copy that last read them is done (an event per buffer).
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"

typedef const comm_backend cb_t;

typedef struct pin_buf {
  struct pin_buf *next;  // in the free list
  void *p;
  size_t cap;
  cudaEvent_t last_use;  // the copy that last read it (NULL: none pending)
} pin_buf;

enum { OP_RING = 0, OP_ALLREDUCE = 1, OP_ALLTOALL = 2 };

typedef struct staged_req {
  int kind, stage;        // OP_*; 0, 1, 2 as in the file comment (3: nothing to do)
  comm_group *g;
  cudaEvent_t d2h, h2d;   // copy out done; copy back done
  pin_buf *sbuf, *rbuf;   // ring, all-to-all: send and receive staging; all-reduce: sbuf
  const void *dsend;      // device buffers
  void *drecv;            // ring, all-to-all: the receive buffer; all-reduce: x
  int64_t bytes;          // copied out (all-to-all: the send extent)
  unsigned seq;           // ring, all-to-all: the group's exchange number (tags)
  int64_t *a2a;           // all-to-all: sbytes, sdispl, rbytes, rdispl (group size each)
  struct staged_req *fifo_next;  // all-reduce: the next one waiting to start
  int nr, nchunks;
  MPI_Request r[];        // ring: a receive then a send per chunk; all-reduce: one per chunk;
                          // all-to-all: the receives, then the sends of every piece
} staged_req;

typedef struct {
  comm_backend cb;
  cudaStream_t compute;   // the compute backend's stream
  cudaStream_t copy;      // staging copies
  pin_buf *pool;          // free pinned buffers
  staged_req *fifo, *fifo_tail;  // all-reduces whose MPI operation has not started
} staged;

static staged *ctx_of(cb_t *cb) { return (staged *)cb->ctx; }

static tsr_status cuda_check(cudaError_t e, const char *what) {
  return comm_cuda_check(e, "mpi-staged", what);
}

static int local(const comm_group *g) { return g->comm == MPI_COMM_NULL || g->size == 1; }

// ---- pinned buffers ------------------------------------------------------------------

static tsr_status pin_get(staged *s, size_t bytes, pin_buf **out) {
  *out = NULL;
  pin_buf **pp = &s->pool;
  for (; *pp; pp = &(*pp)->next)
    if ((*pp)->cap >= bytes) break;
  pin_buf *b = *pp;
  if (b) {
    *pp = b->next;
    if (b->last_use) {
      tsr_status st = cuda_check(cudaEventSynchronize(b->last_use), "cudaEventSynchronize");
      cudaEventDestroy(b->last_use);
      b->last_use = NULL;
      if (st) {
        b->next = s->pool, s->pool = b;
        return st;
      }
    }
    *out = b;
    return TSR_OK;
  }
  if (!(b = calloc(1, sizeof *b))) return err_set(TSR_ENOMEM, "mpi-staged: out of memory");
  b->cap = bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : bytes;
  tsr_status st = cuda_check(cudaMallocHost(&b->p, b->cap), "cudaMallocHost (staging buffer)");
  if (st) {
    free(b);
    return st;
  }
  *out = b;
  return TSR_OK;
}

// Back to the pool; `after` (may be NULL) is the copy that still reads it.
static void pin_put(staged *s, pin_buf *b, cudaStream_t after) {
  if (!b) return;
  if (after && cudaEventCreateWithFlags(&b->last_use, cudaEventDisableTiming) == cudaSuccess &&
      cudaEventRecord(b->last_use, after) != cudaSuccess) {
    cudaEventDestroy(b->last_use);
    b->last_use = NULL;
    cudaStreamSynchronize(after);  // cannot track it: make sure the copy is over
  }
  b->next = s->pool;
  s->pool = b;
}

static void pin_free_all(staged *s) {
  while (s->pool) {
    pin_buf *b = s->pool;
    s->pool = b->next;
    if (b->last_use) cudaEventSynchronize(b->last_use), cudaEventDestroy(b->last_use);
    cudaFreeHost(b->p);
    free(b);
  }
}

// ---- requests --------------------------------------------------------------------------

static void req_free(staged *s, staged_req *q) {
  if (!q) return;
  pin_put(s, q->sbuf, s->copy);  // a copy out may still be writing it
  pin_put(s, q->rbuf, s->copy);
  if (q->d2h) cudaEventDestroy(q->d2h);
  if (q->h2d) cudaEventDestroy(q->h2d);
  free(q->a2a);
  free(q);
}

// A request copying out `bytes` of `dsend`, with room for `nreq` MPI requests (0: a receive
// and a send per chunk of `bytes`), its staging buffers (a receive buffer of `rbytes` unless
// negative), and the copy out queued after the compute stream's work.
static tsr_status req_begin(staged *s, int kind, comm_group *g, const void *dsend, void *drecv,
                            int64_t bytes, int64_t rbytes, int64_t nreq, staged_req **out) {
  *out = NULL;
  int64_t chunks = (bytes + COMM_CHUNK - 1) / COMM_CHUNK;
  if (!nreq) nreq = 2 * chunks + 1;
  staged_req *q = calloc(1, sizeof *q + (size_t)nreq * sizeof(MPI_Request));
  if (!q) return err_set(TSR_ENOMEM, "mpi-staged: out of memory");
  q->kind = kind, q->g = g, q->dsend = dsend, q->drecv = drecv, q->bytes = bytes;
  q->nchunks = (int)chunks;
  cudaEvent_t ready = NULL;
  tsr_status st = pin_get(s, (size_t)bytes, &q->sbuf);
  if (!st && rbytes >= 0) st = pin_get(s, (size_t)rbytes, &q->rbuf);
  if (!st) st = cuda_check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
  if (!st) st = cuda_check(cudaEventCreateWithFlags(&q->d2h, cudaEventDisableTiming), "cudaEventCreate");
  if (!st) st = cuda_check(cudaEventCreateWithFlags(&q->h2d, cudaEventDisableTiming), "cudaEventCreate");
  if (!st) st = cuda_check(cudaEventRecord(ready, s->compute), "cudaEventRecord");
  if (!st) st = cuda_check(cudaStreamWaitEvent(s->copy, ready, 0), "cudaStreamWaitEvent");
  if (!st && bytes)
    st = cuda_check(cudaMemcpyAsync(q->sbuf->p, dsend, (size_t)bytes, cudaMemcpyDeviceToHost,
                                    s->copy), "copy to host");
  if (!st) st = cuda_check(cudaEventRecord(q->d2h, s->copy), "cudaEventRecord");
  if (ready) cudaEventDestroy(ready);
  if (st) {
    req_free(s, q);
    return st;
  }
  *out = q;
  return TSR_OK;
}

// Stage 0 -> 1: the copy out is done (blocking or not); start the MPI operation.
static tsr_status start_mpi(staged *s, staged_req *q, int block, int *started) {
  *started = 0;
  cudaError_t e = block ? cudaEventSynchronize(q->d2h) : cudaEventQuery(q->d2h);
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return TSR_OK;
  }
  tsr_status st = cuda_check(e, "copy to host");
  comm_group *g = q->g;
  int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
  if (q->kind == OP_ALLTOALL && !st) {  // the own slice, then the sends (receives are posted)
    const int64_t k = g->size, *sb = q->a2a, *sd = sb + k, *rd = sb + 3 * k;
    memcpy((char *)q->rbuf->p + rd[g->rank], (char *)q->sbuf->p + sd[g->rank], (size_t)sb[g->rank]);
    st = comm_mpi_alltoallv_post(g, q->seq, 1, q->sbuf->p, sb, sd, q->r, &q->nr);
  }
  for (int c = 0; q->kind != OP_ALLTOALL && c < q->nchunks && !st; c++) {
    int64_t off = (int64_t)c * COMM_CHUNK;
    int64_t len = q->bytes - off > COMM_CHUNK ? COMM_CHUNK : q->bytes - off;
    char *sp = (char *)q->sbuf->p + off;
    if (q->kind == OP_RING) {
      st = comm_mpi_check(MPI_Isend(sp, (int)len, MPI_BYTE, next, comm_ring_tag(q->seq, c),
                                    g->comm, &q->r[q->nr]), "ring send");
    } else {
      (void)prev;
      st = comm_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, sp, (int)(len / (int64_t)sizeof(float)),
                                         MPI_FLOAT, MPI_SUM, g->comm, &q->r[q->nr]),
                          "group all-reduce (non-blocking)");
    }
    if (!st) q->nr++;
  }
  q->stage = 1;
  *started = 1;
  return st;
}

// Starts the all-reduces of the FIFO in issue order: every one up to and including
// `upto` (blocking on their copies out), or, with upto NULL, those whose copy is done.
static tsr_status fifo_advance(staged *s, staged_req *upto, int block) {
  while (s->fifo) {
    staged_req *h = s->fifo;
    int started = 0;
    tsr_status st = start_mpi(s, h, block && upto, &started);
    if (st) return st;
    if (!started) return TSR_OK;
    s->fifo = h->fifo_next;
    if (!s->fifo) s->fifo_tail = NULL;
    if (h == upto) return TSR_OK;
  }
  return TSR_OK;
}

// Moves q on as far as it can go (block: to stage 2).
static tsr_status progress(staged *s, staged_req *q, int block) {
  tsr_status st = TSR_OK;
  if (q->stage == 0) {
    if (q->kind == OP_ALLREDUCE) {
      st = fifo_advance(s, block ? q : NULL, block);
    } else {
      int started;
      st = start_mpi(s, q, block, &started);
    }
    if (st || q->stage == 0) return st;
  }
  if (q->stage == 1) {
    int done = 1;
    const int peer = q->kind == OP_RING ? q->g->first + (q->g->rank + q->g->size - 1) % q->g->size * q->g->stride : -1;
    if (block) {
      st = comm_mpi_wait(q->nr, q->r, q->kind == OP_RING       ? "ring exchange"
                                      : q->kind == OP_ALLTOALL ? "all-to-all"
                                                               : "all-reduce",
                         q->g, peer);
    } else {
      st = comm_mpi_check(MPI_Testall(q->nr, q->r, &done, MPI_STATUSES_IGNORE), "request test");
    }
    if (st || !done) return st;
    q->nr = 0;
    pin_buf *res = q->kind == OP_ALLREDUCE ? q->sbuf : q->rbuf;
    if (q->kind == OP_ALLTOALL) {  // only the ranges the members wrote
      const int64_t k = q->g->size, *rb = q->a2a + 2 * k, *rd = q->a2a + 3 * k;
      for (int64_t j = 0; j < k && !st; j++)
        if (rb[j])
          st = cuda_check(cudaMemcpyAsync((char *)q->drecv + rd[j], (char *)res->p + rd[j],
                                          (size_t)rb[j], cudaMemcpyHostToDevice, s->copy),
                          "copy to the device");
    } else if (q->bytes) {
      st = cuda_check(cudaMemcpyAsync(q->drecv, res->p, (size_t)q->bytes, cudaMemcpyHostToDevice,
                                      s->copy), "copy to the device");
    }
    if (!st) st = cuda_check(cudaEventRecord(q->h2d, s->copy), "cudaEventRecord");
    if (st) return st;
    // the send buffer of a ring or all-to-all is free (MPI is done with it); the result once
    // copied back
    if (q->kind != OP_ALLREDUCE) pin_put(s, q->sbuf, NULL);
    pin_put(s, res, s->copy);
    q->sbuf = q->rbuf = NULL;
    q->stage = 2;
  }
  return st;
}

// ---- the table -------------------------------------------------------------------------

static tsr_status st_wait(cb_t *cb, comm_request **req) {
  staged_req *q = (staged_req *)*req;
  if (!q) return TSR_OK;
  staged *s = ctx_of(cb);
  *req = NULL;
  tsr_status st = TSR_OK;
  if (q->stage < 3) {
    st = progress(s, q, 1);
    if (!st) st = cuda_check(cudaStreamWaitEvent(s->compute, q->h2d, 0), "cudaStreamWaitEvent");
  }
  // After a failure MPI may still write the staging buffers of requests in flight: they
  // are left to the process (which ends: an error here stops the job).
  if (st && q->nr) return st;
  if (st && q->stage == 0 && q->kind == OP_ALLREDUCE) {  // out of the FIFO, whatever happens
    staged_req **pp = &s->fifo, *prev = NULL;
    while (*pp && *pp != q) prev = *pp, pp = &(*pp)->fifo_next;
    if (*pp) {
      *pp = q->fifo_next;
      if (s->fifo_tail == q) s->fifo_tail = prev;
    }
  }
  req_free(s, q);
  return st;
}

static tsr_status st_test(cb_t *cb, comm_request *req, int *done) {
  staged_req *q = (staged_req *)req;
  *done = 1;
  if (!q || q->stage >= 2) return TSR_OK;
  tsr_status st = progress(ctx_of(cb), q, 0);
  *done = q->stage >= 2;
  return st;
}

static tsr_status st_ring_start(cb_t *cb, comm_group *g, const void *send, void *recv,
                                int64_t bytes, comm_request **req) {
  staged *s = ctx_of(cb);
  *req = NULL;
  if (bytes < 0) return err_set(TSR_EINVAL, "ring exchange of %lld bytes", (long long)bytes);
  if (local(g)) {  // a group of one: recv = send, on the compute stream
    staged_req *q = calloc(1, sizeof *q);
    if (!q) return err_set(TSR_ENOMEM, "mpi-staged: out of memory");
    q->stage = 3;
    tsr_status st = bytes ? cuda_check(cudaMemcpyAsync(recv, send, (size_t)bytes,
                                                       cudaMemcpyDeviceToDevice, s->compute),
                                       "ring copy") : TSR_OK;
    if (st) {
      free(q);
      return st;
    }
    *req = (comm_request *)q;
    return TSR_OK;
  }
  staged_req *q;
  tsr_status st = req_begin(s, OP_RING, g, send, recv, bytes, bytes, 0, &q);
  if (st) return st;
  q->seq = g->seq++;
  // the receives can be posted now: nothing orders them
  int prev = (g->rank + g->size - 1) % g->size;
  for (int c = 0; c < q->nchunks && !st; c++) {
    int64_t off = (int64_t)c * COMM_CHUNK;
    int64_t len = bytes - off > COMM_CHUNK ? COMM_CHUNK : bytes - off;
    st = comm_mpi_check(MPI_Irecv((char *)q->rbuf->p + off, (int)len, MPI_BYTE, prev,
                                  comm_ring_tag(q->seq, c), g->comm, &q->r[q->nr]),
                        "ring receive");
    if (!st) q->nr++;
  }
  if (st) {
    for (int i = 0; i < q->nr; i++) MPI_Cancel(&q->r[i]), MPI_Wait(&q->r[i], MPI_STATUS_IGNORE);
    req_free(s, q);
    return st;
  }
  *req = (comm_request *)q;
  return TSR_OK;
}

static tsr_status st_iallreduce(cb_t *cb, comm_group *g, float *x, int64_t n, comm_request **req) {
  staged *s = ctx_of(cb);
  *req = NULL;
  if (n < 0) return err_set(TSR_EINVAL, "all-reduce of %lld values", (long long)n);
  if (local(g)) {
    staged_req *q = calloc(1, sizeof *q);
    if (!q) return err_set(TSR_ENOMEM, "mpi-staged: out of memory");
    q->stage = 3;
    *req = (comm_request *)q;
    return TSR_OK;
  }
  staged_req *q;
  tsr_status st = req_begin(s, OP_ALLREDUCE, g, x, x, n * (int64_t)sizeof(float), -1, 0, &q);
  if (st) return st;
  if (s->fifo_tail) s->fifo_tail->fifo_next = q;
  else s->fifo = q;
  s->fifo_tail = q;
  *req = (comm_request *)q;
  return TSR_OK;
}

// The blocking collectives below run on the host: the compute stream's work so far is
// finished first, and every all-reduce issued before them has started (MPI order).
static tsr_status host_collective_begin(staged *s) {
  tsr_status st = fifo_advance(s, s->fifo_tail, 1);
  if (!st) st = cuda_check(cudaStreamSynchronize(s->compute), "cudaStreamSynchronize");
  return st;
}

// A host collective from device `send` (sbytes) to device `recv` (rbytes): both through
// pinned host buffers, the MPI operation `op` between them.
enum host_op { HOST_ALLGATHER, HOST_REDUCE_SCATTER };
static tsr_status host_roundtrip(staged *s, comm_group *g, enum host_op op, const void *send,
                                 size_t sbytes, void *recv, size_t rbytes) {
  const char *what = op == HOST_ALLGATHER ? "all-gather" : "reduce-scatter";
  pin_buf *a = NULL, *b = NULL;
  tsr_status st = host_collective_begin(s);
  if (!st) st = pin_get(s, sbytes, &a);
  if (!st) st = pin_get(s, rbytes, &b);
  if (!st && sbytes) st = cuda_check(cudaMemcpy(a->p, send, sbytes, cudaMemcpyDeviceToHost),
                                     "copy to host");
  MPI_Request r;
  if (!st) {
    st = comm_mpi_check(op == HOST_ALLGATHER
                            ? MPI_Iallgather(a->p, (int)sbytes, MPI_BYTE, b->p, (int)sbytes,
                                             MPI_BYTE, g->comm, &r)
                            : MPI_Ireduce_scatter_block(a->p, b->p, (int)(rbytes / sizeof(float)),
                                                        MPI_FLOAT, MPI_SUM, g->comm, &r),
                        what);
    if (!st) st = comm_mpi_wait(1, &r, what, g, -1);
  }
  if (!st && rbytes)
    st = cuda_check(cudaMemcpyAsync(recv, b->p, rbytes, cudaMemcpyHostToDevice, s->compute),
                    "copy to the device");
  pin_put(s, a, NULL);
  pin_put(s, b, st ? NULL : s->compute);
  return st;
}

static tsr_status st_allgather(cb_t *cb, comm_group *g, const void *send, void *recv,
                               int64_t bytes) {
  staged *s = ctx_of(cb);
  TSR_TRY(comm_count_check("all-gather", bytes, "bytes"));
  if (local(g))
    return bytes ? cuda_check(cudaMemcpyAsync(recv, send, (size_t)bytes, cudaMemcpyDeviceToDevice,
                                              s->compute), "all-gather copy") : TSR_OK;
  return host_roundtrip(s, g, HOST_ALLGATHER, send, (size_t)bytes, recv,
                        (size_t)bytes * (size_t)g->size);
}

static tsr_status st_reduce_scatter(cb_t *cb, comm_group *g, const float *send, float *recv,
                                    int64_t n) {
  staged *s = ctx_of(cb);
  TSR_TRY(comm_count_check("reduce-scatter", n, "values"));
  size_t slice = (size_t)n * sizeof(float);
  if (local(g))
    return n ? cuda_check(cudaMemcpyAsync(recv, send, slice, cudaMemcpyDeviceToDevice, s->compute),
                          "reduce-scatter copy") : TSR_OK;
  return host_roundtrip(s, g, HOST_REDUCE_SCATTER, send, slice * (size_t)g->size, recv, slice);
}

// The extent of a member-indexed set of ranges: max over j of displ[j] + bytes[j].
static size_t extent(int n, const int64_t *bytes, const int64_t *displ) {
  int64_t e = 0;
  for (int j = 0; j < n; j++)
    if (bytes[j] > 0 && displ[j] + bytes[j] > e) e = displ[j] + bytes[j];
  return (size_t)e;
}

// Staged like a ring exchange (the file comment): the send extent copied out at once, the
// receives posted into the receive staging, the sends and the own slice once the copy is
// done, every member's range copied back.
static tsr_status st_ialltoallv(cb_t *cb, comm_group *g, const void *send, const int64_t *sbytes,
                                const int64_t *sdispl, void *recv, const int64_t *rbytes,
                                const int64_t *rdispl, comm_request **req) {
  staged *s = ctx_of(cb);
  *req = NULL;
  tsr_status st = comm_alltoallv_check(g, sbytes, sdispl, rbytes, rdispl);
  if (st) return st;
  if (local(g)) {  // a group of one: the own slice, on the compute stream
    staged_req *q = calloc(1, sizeof *q);
    if (!q) return err_set(TSR_ENOMEM, "mpi-staged: out of memory");
    q->stage = 3;
    st = sbytes[0] ? cuda_check(cudaMemcpyAsync((char *)recv + rdispl[0],
                                                (const char *)send + sdispl[0], (size_t)sbytes[0],
                                                cudaMemcpyDeviceToDevice, s->compute),
                                "all-to-all copy")
                   : TSR_OK;
    if (st) {
      free(q);
      return st;
    }
    *req = (comm_request *)q;
    return TSR_OK;
  }
  const int k = g->size;
  int64_t nreq = (int64_t)comm_mpi_alltoallv_pieces(g, sbytes) + comm_mpi_alltoallv_pieces(g, rbytes);
  staged_req *q;
  st = req_begin(s, OP_ALLTOALL, g, send, recv, (int64_t)extent(k, sbytes, sdispl),
                 (int64_t)extent(k, rbytes, rdispl), nreq + 1, &q);
  if (st) return st;
  if (!(q->a2a = malloc(4 * (size_t)k * sizeof *q->a2a))) {
    req_free(s, q);
    return err_set(TSR_ENOMEM, "mpi-staged: out of memory");
  }
  memcpy(q->a2a, sbytes, (size_t)k * sizeof *q->a2a);
  memcpy(q->a2a + k, sdispl, (size_t)k * sizeof *q->a2a);
  memcpy(q->a2a + 2 * k, rbytes, (size_t)k * sizeof *q->a2a);
  memcpy(q->a2a + 3 * k, rdispl, (size_t)k * sizeof *q->a2a);
  q->seq = g->seq++;
  st = comm_mpi_alltoallv_post(g, q->seq, 0, q->rbuf->p, rbytes, rdispl, q->r, &q->nr);
  if (st) {
    for (int i = 0; i < q->nr; i++) MPI_Cancel(&q->r[i]), MPI_Wait(&q->r[i], MPI_STATUS_IGNORE);
    req_free(s, q);
    return st;
  }
  *req = (comm_request *)q;
  return TSR_OK;
}

// A request already done: what the blocking entries below return.
static tsr_status done_request(tsr_status st, comm_request **req) {
  if (st) return st;
  staged_req *q = calloc(1, sizeof *q);
  if (!q) return err_set(TSR_ENOMEM, "mpi-staged: out of memory");
  q->stage = 3;
  *req = (comm_request *)q;
  return TSR_OK;
}

// Blocking (a host round trip, host_roundtrip), returned as a request already done.
static tsr_status st_ireduce_scatter(cb_t *cb, comm_group *g, const float *send, float *recv,
                                     int64_t n, comm_request **req) {
  *req = NULL;
  return done_request(st_reduce_scatter(cb, g, send, recv, n), req);
}

static tsr_status st_iallgather(cb_t *cb, comm_group *g, const void *send, void *recv,
                                int64_t bytes, comm_request **req) {
  *req = NULL;
  return done_request(st_allgather(cb, g, send, recv, bytes), req);
}

static tsr_status st_bcast(cb_t *cb, comm_group *g, void *buf, int64_t bytes, int root) {
  staged *s = ctx_of(cb);
  if (bytes < 0) return err_set(TSR_EINVAL, "broadcast of %lld bytes", (long long)bytes);
  if (local(g) || bytes == 0) return TSR_OK;
  pin_buf *a = NULL;
  tsr_status st = host_collective_begin(s);
  if (!st) st = pin_get(s, (size_t)bytes, &a);
  if (!st && g->rank == root)
    st = cuda_check(cudaMemcpy(a->p, buf, (size_t)bytes, cudaMemcpyDeviceToHost), "copy to host");
  for (int64_t off = 0; off < bytes && !st; off += COMM_CHUNK) {
    int len = (int)(bytes - off > COMM_CHUNK ? COMM_CHUNK : bytes - off);
    MPI_Request r;
    st = comm_mpi_check(MPI_Ibcast((char *)a->p + off, len, MPI_BYTE, root, g->comm, &r),
                        "group broadcast");
    if (!st) st = comm_mpi_wait(1, &r, "broadcast", g, g->first + root * g->stride);
  }
  if (!st && g->rank != root)
    st = cuda_check(cudaMemcpyAsync(buf, a->p, (size_t)bytes, cudaMemcpyHostToDevice, s->compute),
                    "copy to the device");
  pin_put(s, a, st ? NULL : s->compute);
  return st;
}

// A host barrier: the work queued on the compute stream is done on every member.
static tsr_status st_barrier(cb_t *cb, comm_group *g) {
  staged *s = ctx_of(cb);
  tsr_status st = host_collective_begin(s);
  if (st || local(g)) return st;
  MPI_Request r;
  st = comm_mpi_check(MPI_Ibarrier(g->comm, &r), "group barrier");
  return st ? st : comm_mpi_wait(1, &r, "barrier", g, -1);
}

tsr_status comm_staged_open(void *stream, const comm_backend **out) {
  *out = NULL;
  staged *s = calloc(1, sizeof *s);
  if (!s) return err_set(TSR_ENOMEM, "mpi-staged: out of memory");
  s->compute = (cudaStream_t)stream;
  tsr_status st = cuda_check(cudaStreamCreateWithFlags(&s->copy, cudaStreamNonBlocking),
                             "cudaStreamCreate (copy stream)");
  if (st) {
    free(s);
    return st;
  }
  s->cb = (comm_backend){
      .name = "mpi-staged",
      .mem = COMM_MEM_DEVICE,
      .stream = stream,
      .ctx = s,
      .allreduce_sum_f32 = comm_start_wait_allreduce,
      .allgather = st_allgather,
      .reduce_scatter_sum_f32 = st_reduce_scatter,
      .alltoallv = comm_start_wait_alltoallv,
      .iallgather = st_iallgather,
      .ialltoallv = st_ialltoallv,
      .ireduce_scatter_sum_f32 = st_ireduce_scatter,
      .bcast = st_bcast,
      .barrier = st_barrier,
      .ring_start = st_ring_start,
      .iallreduce_sum_f32 = st_iallreduce,
      .test = st_test,
      .wait = st_wait,
  };
  *out = &s->cb;
  return TSR_OK;
}

void comm_staged_close(const comm_backend *cb) {
  staged *s = ctx_of(cb);
  cudaStreamSynchronize(s->copy);
  pin_free_all(s);
  cudaStreamDestroy(s->copy);
  free(s);
}
