// comm/comm_mpi.c — the "mpi" communication backend: group collectives and the ring
// exchange on host memory with MPI (comm/comm.h). Host-synchronous (no stream). In a world
// of one (no launcher) the groups have no communicator and every entry is local. Every
// wait is bounded (comm_mpi_wait); a blocking collective is the non-blocking one waited.
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"

typedef const comm_backend cb_t;

static int local(const comm_group *g) { return g->comm == MPI_COMM_NULL || g->size == 1; }

struct comm_request {
  const char *what;   // for the bounded wait's message: "ring exchange", "all-reduce", ...
  const comm_group *g;
  int peer;           // world rank waited on (the ring's previous member), or -1
  int n;              // MPI requests in flight
  MPI_Request r[];    // a receive and a send per chunk, or one all-reduce per chunk
};

static tsr_status mpi_wait(cb_t *cb, comm_request **req) {
  comm_request *q = *req;
  if (!q) return TSR_OK;
  tsr_status st = comm_mpi_wait(q->n, q->r, q->what, q->g, q->peer);
  free(q);
  *req = NULL;
  return st;
}

// The requests of q were posted with result st: *req = q, or on an error the ones posted
// waited for (MPI must complete them before their buffers go), q freed and st returned.
static tsr_status request_posted(cb_t *cb, comm_request *q, tsr_status st, comm_request **req) {
  if (st) {
    mpi_wait(cb, &q);
    return st;
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
  q->what = "all-reduce", q->g = g, q->peer = -1;
  tsr_status st = TSR_OK;
  for (int64_t c = 0; c < chunks && !st; c++) {
    int64_t off = c * (int64_t)COMM_CHUNK;
    int len = (int)(n - off > COMM_CHUNK ? COMM_CHUNK : n - off);
    st = comm_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, x + off, len, MPI_FLOAT, MPI_SUM, g->comm,
                                       &q->r[q->n]),
                        "group all-reduce (non-blocking)");
    if (!st) q->n++;
  }
  return request_posted(cb, q, st, req);
}

// A request for one MPI collective over g (what: its name in messages), or NULL: no memory.
static comm_request *request_new(comm_group *g, const char *what) {
  comm_request *q = calloc(1, sizeof *q + sizeof(MPI_Request));
  if (q) q->what = what, q->g = g, q->peer = -1;
  return q;
}

// q's collective was started with result rc: *req = q, or q freed and the error (msg).
static tsr_status request_started(comm_request *q, int rc, const char *msg, comm_request **req) {
  tsr_status st = comm_mpi_check(rc, msg);
  if (st) {
    free(q);
    return st;
  }
  q->n = 1;
  *req = q;
  return TSR_OK;
}

static tsr_status mpi_iallgather(cb_t *cb, comm_group *g, const void *send, void *recv,
                                 int64_t bytes, comm_request **req) {
  *req = NULL;
  TSR_TRY(comm_count_check("all-gather", bytes, "bytes"));
  comm_request *q = request_new(g, "all-gather");
  if (!q) return err_set(TSR_ENOMEM, "out of memory for an all-gather");
  if (local(g)) {  // a group of one: the copy, and a request already done
    memmove(recv, send, (size_t)bytes);
    *req = q;
    return TSR_OK;
  }
  return request_started(q, MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE,
                                           g->comm, &q->r[0]),
                         "group all-gather", req);
}

static tsr_status mpi_ireduce_scatter(cb_t *cb, comm_group *g, const float *send, float *recv,
                                      int64_t n, comm_request **req) {
  *req = NULL;
  TSR_TRY(comm_count_check("reduce-scatter", n, "values"));
  comm_request *q = request_new(g, "reduce-scatter");
  if (!q) return err_set(TSR_ENOMEM, "out of memory for a reduce-scatter");
  if (local(g)) {
    memmove(recv, send, (size_t)n * sizeof *recv);
    *req = q;
    return TSR_OK;
  }
  return request_started(q, MPI_Ireduce_scatter_block(send, recv, (int)n, MPI_FLOAT, MPI_SUM,
                                                      g->comm, &q->r[0]),
                         "group reduce-scatter", req);
}

// Pieces of every peer's message, both directions: at most 2 * size * pieces requests.
static int64_t pieces(int64_t bytes) { return (bytes + COMM_CHUNK - 1) / COMM_CHUNK; }

tsr_status comm_count_check(const char *what, int64_t n, const char *unit) {
  if (n < 0 || n > COMM_CHUNK)
    return err_set(TSR_EINVAL, "group %s of %lld %s per rank: at most %d", what, (long long)n,
                   unit, COMM_CHUNK);
  return TSR_OK;
}

tsr_status comm_alltoallv_check(const comm_group *g, const int64_t *sbytes, const int64_t *sdispl,
                                const int64_t *rbytes, const int64_t *rdispl) {
  for (int j = 0; j < g->size; j++)
    if (sbytes[j] < 0 || rbytes[j] < 0 || sdispl[j] < 0 || rdispl[j] < 0)
      return err_set(TSR_EINVAL, "all-to-all: negative count or displacement for member %d", j);
  if (sbytes[g->rank] != rbytes[g->rank])
    return err_set(TSR_EINVAL, "all-to-all: member %d sends itself %lld bytes but expects %lld",
                   g->rank, (long long)sbytes[g->rank], (long long)rbytes[g->rank]);
  return TSR_OK;
}

static _Atomic int64_t alltoall_received;

int64_t comm_alltoall_received(void) { return alltoall_received; }

void comm_alltoall_count(const comm_group *g, const int64_t *rbytes) {
  for (int j = 0; j < g->size; j++)
    if (j != g->rank) alltoall_received += rbytes[j];
}

int comm_mpi_alltoallv_pieces(const comm_group *g, const int64_t *bytes) {
  int64_t n = 0;
  for (int j = 0; j < g->size; j++)
    if (j != g->rank) n += pieces(bytes[j]);
  return (int)n;
}

tsr_status comm_mpi_alltoallv_post(comm_group *g, unsigned seq, int send, void *buf,
                                   const int64_t *bytes, const int64_t *displ, MPI_Request *req,
                                   int *n) {
  tsr_status st = TSR_OK;
  if (!send) comm_alltoall_count(g, bytes);
  for (int d = 1; d < g->size && !st; d++) {
    int j = send ? (g->rank + g->size - d) % g->size : (g->rank + d) % g->size;
    for (int64_t c = 0; c < pieces(bytes[j]) && !st; c++) {
      int64_t off = c * (int64_t)COMM_CHUNK;
      int len = (int)(bytes[j] - off > COMM_CHUNK ? COMM_CHUNK : bytes[j] - off);
      char *p = (char *)buf + displ[j] + off;
      st = send ? comm_mpi_check(MPI_Isend(p, len, MPI_BYTE, j, comm_ring_tag(seq, c), g->comm,
                                           &req[*n]), "all-to-all send")
                : comm_mpi_check(MPI_Irecv(p, len, MPI_BYTE, j, comm_ring_tag(seq, c), g->comm,
                                           &req[*n]), "all-to-all receive");
      if (!st) (*n)++;
    }
  }
  return st;
}

// Posts the exchange (receives first) after copying the own slice; *req has room for every
// piece of both directions. Local groups copy only.
static tsr_status mpi_ialltoallv(cb_t *cb, comm_group *g, const void *send, const int64_t *sbytes,
                                 const int64_t *sdispl, void *recv, const int64_t *rbytes,
                                 const int64_t *rdispl, comm_request **req) {
  *req = NULL;
  tsr_status st = comm_alltoallv_check(g, sbytes, sdispl, rbytes, rdispl);
  if (st) return st;
  int64_t n = local(g) ? 0
                       : (int64_t)comm_mpi_alltoallv_pieces(g, sbytes) +
                             comm_mpi_alltoallv_pieces(g, rbytes);
  comm_request *q = calloc(1, sizeof *q + (size_t)(n ? n : 1) * sizeof(MPI_Request));
  if (!q) return err_set(TSR_ENOMEM, "out of memory for an all-to-all");
  q->what = "all-to-all", q->g = g, q->peer = -1;
  memcpy((char *)recv + rdispl[g->rank], (const char *)send + sdispl[g->rank],
         (size_t)sbytes[g->rank]);
  if (!local(g)) {
    unsigned seq = g->seq++;
    st = comm_mpi_alltoallv_post(g, seq, 0, recv, rbytes, rdispl, q->r, &q->n);
    if (!st) st = comm_mpi_alltoallv_post(g, seq, 1, (void *)send, sbytes, sdispl, q->r, &q->n);
  }
  return request_posted(cb, q, st, req);
}

static tsr_status mpi_bcast(cb_t *cb, comm_group *g, void *buf, int64_t bytes, int root) {
  if (local(g)) return TSR_OK;
  char *p = buf;
  tsr_status st = TSR_OK;
  while (bytes > 0 && !st) {
    int chunk = bytes > COMM_CHUNK ? COMM_CHUNK : (int)bytes;
    MPI_Request r;
    st = comm_mpi_check(MPI_Ibcast(p, chunk, MPI_BYTE, root, g->comm, &r), "group broadcast");
    if (!st) st = comm_mpi_wait(1, &r, "broadcast", g, g->first + root * g->stride);
    p += chunk;
    bytes -= chunk;
  }
  return st;
}

static tsr_status mpi_barrier(cb_t *cb, comm_group *g) {
  if (local(g)) return TSR_OK;
  MPI_Request r;
  tsr_status st = comm_mpi_check(MPI_Ibarrier(g->comm, &r), "group barrier");
  return st ? st : comm_mpi_wait(1, &r, "barrier", g, -1);
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
  unsigned seq = g->seq++;
  q->what = "ring exchange", q->g = g, q->peer = g->first + prev * g->stride;
  tsr_status st = TSR_OK;
  for (int64_t c = 0; c < chunks && !st; c++) {
    int64_t off = c * (int64_t)COMM_CHUNK;
    int len = (int)(bytes - off > COMM_CHUNK ? COMM_CHUNK : bytes - off);
    int tag = comm_ring_tag(seq, c);
    st = comm_mpi_check(MPI_Irecv(r + off, len, MPI_BYTE, prev, tag, g->comm, &q->r[q->n]),
                        "ring receive");
    if (!st) q->n++;
    if (!st) st = comm_mpi_check(MPI_Isend(s + off, len, MPI_BYTE, next, tag, g->comm,
                                           &q->r[q->n]),
                                 "ring send");
    if (!st) q->n++;
  }
  return request_posted(cb, q, st, req);
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
    COMM_START_WAIT_ENTRIES,
    .iallgather = mpi_iallgather,
    .ialltoallv = mpi_ialltoallv,
    .ireduce_scatter_sum_f32 = mpi_ireduce_scatter,
    .bcast = mpi_bcast,
    .barrier = mpi_barrier,
    .ring_start = mpi_ring_start,
    .iallreduce_sum_f32 = mpi_iallreduce_sum_f32,
    .test = mpi_test,
    .wait = mpi_wait,
};

const comm_backend *comm_mpi(void) { return &mpi_backend; }
