// core/comm_mpi.c — the "mpi" communication backend: group collectives and the ring
// exchange on host memory with MPI (core/comm.h). Host-synchronous (no stream). In a world
// of one (no launcher) the groups have no communicator and every entry is local.
#include <stdlib.h>
#include <string.h>

#include "core/comm_internal.h"

typedef const comm_backend cb_t;

static int local(const comm_group *g) { return g->comm == MPI_COMM_NULL || g->size == 1; }

static tsr_status mpi_allreduce_sum_f32(cb_t *cb, comm_group *g, float *x, int64_t n) {
  if (local(g)) return TSR_OK;
  while (n > 0) {
    int chunk = n > COMM_CHUNK ? COMM_CHUNK : (int)n;
    tsr_status st = comm_mpi_check(MPI_Allreduce(MPI_IN_PLACE, x, chunk, MPI_FLOAT, MPI_SUM, g->comm),
                                   "group all-reduce");
    if (st) return st;
    x += chunk;
    n -= chunk;
  }
  return TSR_OK;
}

static tsr_status mpi_allgather(cb_t *cb, comm_group *g, const void *send, void *recv,
                                int64_t bytes) {
  if (local(g)) {
    memmove(recv, send, (size_t)bytes);
    return TSR_OK;
  }
  if (bytes > COMM_CHUNK)
    return err_set(TSR_EINVAL, "group all-gather of %lld bytes per rank: at most %d",
                   (long long)bytes, COMM_CHUNK);
  return comm_mpi_check(MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE,
                                      g->comm),
                        "group all-gather");
}

static tsr_status mpi_bcast(cb_t *cb, comm_group *g, void *buf, int64_t bytes, int root) {
  if (local(g)) return TSR_OK;
  char *p = buf;
  while (bytes > 0) {
    int chunk = bytes > COMM_CHUNK ? COMM_CHUNK : (int)bytes;
    tsr_status st = comm_mpi_check(MPI_Bcast(p, chunk, MPI_BYTE, root, g->comm), "group broadcast");
    if (st) return st;
    p += chunk;
    bytes -= chunk;
  }
  return TSR_OK;
}

static tsr_status mpi_barrier(cb_t *cb, comm_group *g) {
  if (local(g)) return TSR_OK;
  return comm_mpi_check(MPI_Barrier(g->comm), "group barrier");
}

struct comm_request {
  int n;              // MPI requests in flight
  MPI_Request r[];    // a send and a receive per chunk, or one all-reduce per chunk
};

static tsr_status mpi_wait(cb_t *cb, comm_request **req) {
  comm_request *q = *req;
  if (!q) return TSR_OK;
  tsr_status st = TSR_OK;
  if (q->n) st = comm_mpi_check(MPI_Waitall(q->n, q->r, MPI_STATUSES_IGNORE), "request wait");
  free(q);
  *req = NULL;
  return st;
}

static tsr_status mpi_ring_start(cb_t *cb, comm_group *g, const void *send, void *recv,
                                 int64_t bytes, comm_request **req) {
  *req = NULL;
  if (bytes < 0) return err_set(TSR_EINVAL, "ring exchange of %lld bytes", (long long)bytes);
  int64_t chunks = local(g) ? 0 : (bytes + COMM_CHUNK - 1) / COMM_CHUNK;
  comm_request *q = calloc(1, sizeof *q + (size_t)(2 * chunks) * sizeof(MPI_Request));
  if (!q) return err_set(TSR_ENOMEM, "out of memory for a ring exchange");
  if (local(g)) {
    memmove(recv, send, (size_t)bytes);
    *req = q;
    return TSR_OK;
  }
  int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
  const char *s = send;
  char *r = recv;
  for (int64_t c = 0; c < chunks; c++) {
    int64_t off = c * (int64_t)COMM_CHUNK;
    int len = (int)(bytes - off > COMM_CHUNK ? COMM_CHUNK : bytes - off);
    int tag = (int)(c & 0x7fff);
    tsr_status st = comm_mpi_check(MPI_Irecv(r + off, len, MPI_BYTE, prev, tag, g->comm,
                                             &q->r[q->n]),
                                   "ring receive");
    if (!st) q->n++;
    if (!st) st = comm_mpi_check(MPI_Isend(s + off, len, MPI_BYTE, next, tag, g->comm,
                                           &q->r[q->n]),
                                 "ring send");
    if (st) {
      mpi_wait(cb, &q);
      return st;
    }
    q->n++;
  }
  *req = q;
  return TSR_OK;
}

static tsr_status mpi_iallreduce_sum_f32(cb_t *cb, comm_group *g, float *x, int64_t n,
                                         comm_request **req) {
  *req = NULL;
  if (n < 0) return err_set(TSR_EINVAL, "all-reduce of %lld values", (long long)n);
  int64_t chunks = local(g) ? 0 : (n + COMM_CHUNK - 1) / COMM_CHUNK;
  comm_request *q = calloc(1, sizeof *q + (size_t)(chunks + 1) * sizeof(MPI_Request));
  if (!q) return err_set(TSR_ENOMEM, "out of memory for an all-reduce");
  for (int64_t c = 0; c < chunks; c++) {
    int64_t off = c * (int64_t)COMM_CHUNK;
    int len = (int)(n - off > COMM_CHUNK ? COMM_CHUNK : n - off);
    tsr_status st = comm_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, x + off, len, MPI_FLOAT, MPI_SUM,
                                                  g->comm, &q->r[q->n]),
                                   "group all-reduce (non-blocking)");
    if (st) {
      mpi_wait(cb, &q);
      return st;
    }
    q->n++;
  }
  *req = q;
  return TSR_OK;
}

static tsr_status mpi_test(cb_t *cb, comm_request *req, int *done) {
  *done = 1;
  if (!req || !req->n) return TSR_OK;
  int flag = 0;
  tsr_status st = comm_mpi_check(MPI_Testall(req->n, req->r, &flag, MPI_STATUSES_IGNORE),
                                 "request test");
  *done = flag;
  if (flag) req->n = 0;  // completed requests are freed by MPI; wait has nothing left
  return st;
}

static const comm_backend mpi_backend = {
    .name = "mpi",
    .mem = COMM_MEM_HOST,
    .stream = NULL,
    .ctx = NULL,
    .allreduce_sum_f32 = mpi_allreduce_sum_f32,
    .allgather = mpi_allgather,
    .bcast = mpi_bcast,
    .barrier = mpi_barrier,
    .ring_start = mpi_ring_start,
    .iallreduce_sum_f32 = mpi_iallreduce_sum_f32,
    .test = mpi_test,
    .wait = mpi_wait,
};

const comm_backend *comm_mpi(void) { return &mpi_backend; }
