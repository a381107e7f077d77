#include "core/comm.h"
#include "core/comm_internal.h"

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

tsr_status comm_mpi_check(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return TSR_OK;
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, s, &len);
  return err_set(TSR_ECOMM, "MPI %s failed: %s", what, s);
}

tsr_status comm_init(int *argc, char ***argv) {
  if (!launched_by_mpi()) return TSR_OK;
  int provided = 0;
  tsr_status st = comm_mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided),
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
  return comm_mpi_check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
}

static tsr_status allreduce_i64(int64_t *vals, int n, MPI_Op op) {
  if (!comm_joined) return TSR_OK;
  return comm_mpi_check(MPI_Allreduce(MPI_IN_PLACE, vals, n, MPI_INT64_T, op, MPI_COMM_WORLD),
                   "all-reduce");
}

tsr_status comm_allreduce_sum_f64(double *vals, int n) {
  if (!comm_joined) return TSR_OK;
  return comm_mpi_check(MPI_Allreduce(MPI_IN_PLACE, vals, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
                        "all-reduce");
}

tsr_status comm_allreduce_sum_i64(int64_t *vals, int n) { return allreduce_i64(vals, n, MPI_SUM); }
tsr_status comm_allreduce_max_i64(int64_t *vals, int n) { return allreduce_i64(vals, n, MPI_MAX); }

tsr_status comm_bcast(void *buf, int64_t bytes, int root) {
  if (!comm_joined) return TSR_OK;
  char *p = buf;
  while (bytes > 0) {  // MPI counts are int: send in chunks below 2 GiB
    int chunk = bytes > (1 << 30) ? (1 << 30) : (int)bytes;
    tsr_status st = comm_mpi_check(MPI_Bcast(p, chunk, MPI_BYTE, root, MPI_COMM_WORLD), "broadcast");
    if (st) return st;
    p += chunk;
    bytes -= chunk;
  }
  return TSR_OK;
}

// ---- groups ----------------------------------------------------------------------------

enum { COMM_MAX_LEVELS = 31 };

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
    tsr_status st = comm_mpi_check(MPI_Comm_split(MPI_COMM_WORLD, comm_r / k, comm_r, &g->comm),
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
