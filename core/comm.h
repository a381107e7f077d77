// core/comm.h — the communication layer (world level).
//
// A process started by OpenMPI's mpirun or by Slurm's srun joins the MPI world; a
// process started on its own runs as a world of one without MPI (no launcher needed).
// All collectives here are over the whole world and are no-ops for a world of one.
// Per-group communicators and the NCCL backend come with the trainer (DESIGN.md,
// "Backends"); callers use this interface only.
#ifndef TESSERA_CORE_COMM_H
#define TESSERA_CORE_COMM_H

#include <stdint.h>
#include "core/err.h"

// Joins the world if a launcher started us (environment of mpirun/srun), else world of 1.
tsr_status comm_init(int *argc, char ***argv);
int comm_rank(void);
int comm_size(void);
tsr_status comm_barrier(void);
// In-place sum over all ranks of n int64 values.
tsr_status comm_allreduce_sum_i64(int64_t *vals, int n);
// In-place max over all ranks of n int64 values.
tsr_status comm_allreduce_max_i64(int64_t *vals, int n);
// Broadcast of `bytes` bytes from `root`.
tsr_status comm_bcast(void *buf, int64_t bytes, int root);
// Ends the world (MPI_Finalize) if it was joined.
void comm_finalize(void);
// Stops every rank (MPI_Abort) or exits for a world of one.
void comm_abort(int code) __attribute__((noreturn));

#endif
