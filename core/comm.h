// core/comm.h — the communication layer (world level).
//
// A process started by OpenMPI's mpirun or by Slurm's srun joins the MPI world; a
// process started on its own runs as a world of one without MPI (no launcher needed).
// The comm_* collectives below are over the whole world (no-ops for a world of one).
//
// The group set (DESIGN.md "Dynamic-CP execution"): for every power of two k <= world,
// the aligned blocks of ranks [i*k, (i+1)*k); every rank is in exactly one group of each
// size. comm_groups_init creates their communicators once; comm_group_* operations run
// inside one group. Buffers are host memory (MPI backend); the NCCL backend (device
// memory) will implement the same calls.
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
// ---- groups ----------------------------------------------------------------------------

typedef struct comm_group comm_group;

// Collective over the world: creates the group set. The world size must be a power of
// two (TSR_EINVAL saying so otherwise). Idempotent.
tsr_status comm_groups_init(void);
// This rank's group of size k (a power of two <= world), or NULL (not initialised, bad k).
comm_group *comm_group_get(int k);
int comm_group_size(const comm_group *g);
int comm_group_rank(const comm_group *g);   // rank inside the group, 0..size-1
int comm_group_first(const comm_group *g);  // world rank of the group's member 0

// In-place sums over the group's ranks. x: (n)
tsr_status comm_group_allreduce_sum_f32(comm_group *g, float *x, int64_t n);
tsr_status comm_group_allreduce_sum_f64(comm_group *g, double *x, int64_t n);
// recv = the `bytes` of every member's send, in group-rank order. recv: (size * bytes)
tsr_status comm_group_allgather(comm_group *g, const void *send, void *recv, int64_t bytes);
tsr_status comm_group_bcast(comm_group *g, void *buf, int64_t bytes, int root);
tsr_status comm_group_barrier(comm_group *g);

// Ring exchange, non-blocking: sends `bytes` of `send` to the next member of the group
// ((rank + 1) % size) and receives as many into `recv` from the previous one. Both
// buffers must stay untouched until comm_wait. With one member, recv = send.
typedef struct comm_request comm_request;
tsr_status comm_ring_start(comm_group *g, const void *send, void *recv, int64_t bytes,
                           comm_request **req);
// Non-blocking in-place sum of x (n floats) over the group, e.g. a gradient bucket while
// backward goes on. Every member must start the group's collectives in the same order.
tsr_status comm_group_iallreduce_sum_f32(comm_group *g, float *x, int64_t n, comm_request **req);
// Lets a request progress without blocking; *done = 1 once it is complete.
tsr_status comm_test(comm_request *req, int *done);
// Completes a request and frees it (*req = NULL).
tsr_status comm_wait(comm_request **req);

// CPU cores this rank may use: the node's online cores divided among the ranks the
// launcher put on this node (OMPI_COMM_WORLD_LOCAL_SIZE, SLURM_NTASKS_PER_NODE), >= 1.
int comm_local_cores(void);

// Ends the world (MPI_Finalize) if it was joined.
void comm_finalize(void);
// Stops every rank (MPI_Abort) or exits for a world of one.
void comm_abort(int code) __attribute__((noreturn));

#endif
