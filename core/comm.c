#include "core/comm.h"

#include <mpi.h>
#include <stdlib.h>

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

void comm_finalize(void) {
  if (comm_joined) MPI_Finalize();
  comm_joined = 0;
}

void comm_abort(int code) {
  if (comm_joined) MPI_Abort(MPI_COMM_WORLD, code);
  exit(code);
}
