#include "core/comm.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int comm_joined = 0, comm_r = 0, comm_n = 1;

static int launched_by_mpi(void) {
  // OpenMPI's mpirun, PMIx-based launchers and Slurm's srun set these.
  const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (getenv(vars[i])) return 1;
  return 0;
}

static tsr_status mpi_check(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return TSR_OK;
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, s, &len);
  return err_set(TSR_ECOMM, "MPI %s failed: %s", what, s);
}

tsr_status comm_init(int *argc, char ***argv) {
  if (!launched_by_mpi()) return TSR_OK;
  int provided = 0;
  tsr_status st = mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided),
                            "MPI_Init_thread");
  if (st) return st;
  comm_joined = 1;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &comm_r);
  MPI_Comm_size(MPI_COMM_WORLD, &comm_n);
  return TSR_OK;
}

int comm_rank(void) { return comm_r; }
int comm_size(void) { return comm_n; }

tsr_status comm_barrier(void) {
  if (!comm_joined) return TSR_OK;
  return mpi_check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
}

static tsr_status allreduce_i64(int64_t *vals, int n, MPI_Op op) {
  if (!comm_joined) return TSR_OK;
  return mpi_check(MPI_Allreduce(MPI_IN_PLACE, vals, n, MPI_INT64_T, op, MPI_COMM_WORLD),
                   "all-reduce");
}

tsr_status comm_allreduce_sum_i64(int64_t *vals, int n) { return allreduce_i64(vals, n, MPI_SUM); }
tsr_status comm_allreduce_max_i64(int64_t *vals, int n) { return allreduce_i64(vals, n, MPI_MAX); }

tsr_status comm_bcast(void *buf, int64_t bytes, int root) {
  if (!comm_joined) return TSR_OK;
  char *p = buf;
  while (bytes > 0) {  // MPI counts are int: send in chunks below 2 GiB
    int chunk = bytes > (1 << 30) ? (1 << 30) : (int)bytes;
    tsr_status st = mpi_check(MPI_Bcast(p, chunk, MPI_BYTE, root, MPI_COMM_WORLD), "broadcast");
    if (st) return st;
    p += chunk;
    bytes -= chunk;
  }
  return TSR_OK;
}

// ---- groups ----------------------------------------------------------------------------

enum { COMM_MAX_LEVELS = 31, COMM_CHUNK = 1 << 30 };

struct comm_group {
  MPI_Comm comm;  // MPI_COMM_NULL for a world of one (no MPI)
  int size, rank, first;
};

static comm_group comm_groups[COMM_MAX_LEVELS];
static int comm_levels = 0;  // groups of size 1, 2, 4, ... 2^(levels-1)

tsr_status comm_groups_init(void) {
  if (comm_levels) return TSR_OK;
  if (comm_n & (comm_n - 1))
    return err_set(TSR_EINVAL,
                   "the world has %d ranks, not a power of two: Dynamic-CP groups are aligned "
                   "power-of-two blocks; launch with 1, 2, 4, 8, ... ranks",
                   comm_n);
  int levels = 0;
  for (int k = 1; k <= comm_n; k *= 2, levels++) {
    comm_group *g = &comm_groups[levels];
    g->size = k;
    g->rank = comm_r % k;
    g->first = comm_r - g->rank;
    g->comm = MPI_COMM_NULL;
    if (!comm_joined) continue;
    tsr_status st = mpi_check(MPI_Comm_split(MPI_COMM_WORLD, comm_r / k, comm_r, &g->comm),
                              "creating the group communicators (MPI_Comm_split)");
    if (st) return st;
    MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
  }
  comm_levels = levels;
  return TSR_OK;
}

comm_group *comm_group_get(int k) {
  for (int i = 0; i < comm_levels; i++)
    if (comm_groups[i].size == k) return &comm_groups[i];
  return NULL;
}

int comm_group_size(const comm_group *g) { return g->size; }
int comm_group_rank(const comm_group *g) { return g->rank; }
int comm_group_first(const comm_group *g) { return g->first; }

static tsr_status group_allreduce(comm_group *g, void *x, int64_t n, MPI_Datatype type,
                                  size_t elem) {
  if (g->comm == MPI_COMM_NULL || g->size == 1) return TSR_OK;
  char *p = x;
  while (n > 0) {
    int chunk = n > COMM_CHUNK ? COMM_CHUNK : (int)n;
    tsr_status st = mpi_check(MPI_Allreduce(MPI_IN_PLACE, p, chunk, type, MPI_SUM, g->comm),
                              "group all-reduce");
    if (st) return st;
    p += (size_t)chunk * elem;
    n -= chunk;
  }
  return TSR_OK;
}

tsr_status comm_group_allreduce_sum_f32(comm_group *g, float *x, int64_t n) {
  return group_allreduce(g, x, n, MPI_FLOAT, sizeof *x);
}

tsr_status comm_group_allreduce_sum_f64(comm_group *g, double *x, int64_t n) {
  return group_allreduce(g, x, n, MPI_DOUBLE, sizeof *x);
}

tsr_status comm_group_allgather(comm_group *g, const void *send, void *recv, int64_t bytes) {
  if (g->comm == MPI_COMM_NULL || g->size == 1) {
    memmove(recv, send, (size_t)bytes);
    return TSR_OK;
  }
  if (bytes > COMM_CHUNK)
    return err_set(TSR_EINVAL, "group all-gather of %lld bytes per rank: at most %d",
                   (long long)bytes, COMM_CHUNK);
  return mpi_check(MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, g->comm),
                   "group all-gather");
}

tsr_status comm_group_bcast(comm_group *g, void *buf, int64_t bytes, int root) {
  if (g->comm == MPI_COMM_NULL || g->size == 1) return TSR_OK;
  char *p = buf;
  while (bytes > 0) {
    int chunk = bytes > COMM_CHUNK ? COMM_CHUNK : (int)bytes;
    tsr_status st = mpi_check(MPI_Bcast(p, chunk, MPI_BYTE, root, g->comm), "group broadcast");
    if (st) return st;
    p += chunk;
    bytes -= chunk;
  }
  return TSR_OK;
}

tsr_status comm_group_barrier(comm_group *g) {
  if (g->comm == MPI_COMM_NULL || g->size == 1) return TSR_OK;
  return mpi_check(MPI_Barrier(g->comm), "group barrier");
}

struct comm_request {
  int n;              // MPI requests in flight
  MPI_Request r[];    // a send and a receive per chunk
};

tsr_status comm_ring_start(comm_group *g, const void *send, void *recv, int64_t bytes,
                           comm_request **req) {
  *req = NULL;
  int64_t chunks = bytes > 0 ? (bytes + COMM_CHUNK - 1) / COMM_CHUNK : 0;
  comm_request *q = calloc(1, sizeof *q + (size_t)(2 * chunks) * sizeof(MPI_Request));
  if (!q) return err_set(TSR_ENOMEM, "out of memory for a ring exchange");
  if (g->comm == MPI_COMM_NULL || g->size == 1) {
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
    tsr_status st = mpi_check(MPI_Irecv(r + off, len, MPI_BYTE, prev, tag, g->comm, &q->r[q->n]),
                              "ring receive");
    if (!st) q->n++;
    if (!st) st = mpi_check(MPI_Isend(s + off, len, MPI_BYTE, next, tag, g->comm, &q->r[q->n]),
                            "ring send");
    if (st) {
      comm_wait(&q);
      return st;
    }
    q->n++;
  }
  *req = q;
  return TSR_OK;
}

tsr_status comm_group_iallreduce_sum_f32(comm_group *g, float *x, int64_t n, comm_request **req) {
  *req = NULL;
  int64_t chunks = g->comm == MPI_COMM_NULL || g->size == 1 ? 0 : (n + COMM_CHUNK - 1) / COMM_CHUNK;
  comm_request *q = calloc(1, sizeof *q + (size_t)(chunks + 1) * sizeof(MPI_Request));
  if (!q) return err_set(TSR_ENOMEM, "out of memory for an all-reduce");
  for (int64_t c = 0; c < chunks; c++) {
    int64_t off = c * (int64_t)COMM_CHUNK;
    int len = (int)(n - off > COMM_CHUNK ? COMM_CHUNK : n - off);
    tsr_status st = mpi_check(MPI_Iallreduce(MPI_IN_PLACE, x + off, len, MPI_FLOAT, MPI_SUM,
                                             g->comm, &q->r[q->n]),
                              "group all-reduce (non-blocking)");
    if (st) {
      comm_wait(&q);
      return st;
    }
    q->n++;
  }
  *req = q;
  return TSR_OK;
}

tsr_status comm_test(comm_request *req, int *done) {
  *done = 1;
  if (!req || !req->n) return TSR_OK;
  int flag = 0;
  tsr_status st = mpi_check(MPI_Testall(req->n, req->r, &flag, MPI_STATUSES_IGNORE), "request test");
  *done = flag;
  if (flag) req->n = 0;  // completed requests are freed by MPI; comm_wait has nothing left
  return st;
}

tsr_status comm_wait(comm_request **req) {
  comm_request *q = *req;
  if (!q) return TSR_OK;
  tsr_status st = TSR_OK;
  if (q->n) st = mpi_check(MPI_Waitall(q->n, q->r, MPI_STATUSES_IGNORE), "ring exchange wait");
  free(q);
  *req = NULL;
  return st;
}

int comm_local_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!ls) ls = getenv("SLURM_NTASKS_PER_NODE");
  int per = ls ? atoi(ls) : 1;
  if (per < 1) per = 1;
  n /= per;
  return n < 1 ? 1 : (int)n;
}

void comm_finalize(void) {
  for (int i = 0; i < comm_levels; i++)
    if (comm_groups[i].comm != MPI_COMM_NULL) MPI_Comm_free(&comm_groups[i].comm);
  comm_levels = 0;
  if (comm_joined) MPI_Finalize();
  comm_joined = 0;
}

void comm_abort(int code) {
  if (comm_joined) MPI_Abort(MPI_COMM_WORLD, code);
  exit(code);
}
