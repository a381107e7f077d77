// comm/comm.h — the communication layer (world level).
//
// A process started by OpenMPI's mpirun or by Slurm's srun joins the MPI world; a
// process started on its own runs as a world of one without MPI (no launcher needed).
// The comm_* collectives below are over the whole world (no-ops for a world of one).
//
// The group set (docs/dist.md), for a world of any size N >= 1: for every power of two
// k <= N, the aligned blocks of ranks [i*k, (i+1)*k) that fit in N (a rank beyond the last
// whole block of k ranks is in no group of size k), and the world itself (one group of N,
// the world collectives' group, also when N is not a power of two). comm_groups_init creates
// their communicators once; the data-plane operations of a communication backend
// (comm_backend below) run inside one group.
//
// Failure (docs/dist.md "Failure"): in a run that bounds its waits (comm_bound_waits:
// training and calibration, through tools/), a blocking communication of a multi-rank world
// that has not completed after comm_timeout() seconds makes the rank find out which
// members do not answer, print what it waited for and on which ranks, abort the backends
// that can hang (NCCL: ncclCommAbort) and end the whole job (MPI_Abort). A rank that dies
// is reported by the launcher (mpirun names it), one that fails by comm_abort.
#ifndef TESSERA_COMM_COMM_H
#define TESSERA_COMM_COMM_H

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

// Collective over the world: creates the group set (any world size). Idempotent.
tsr_status comm_groups_init(void);
// This rank's group of size k (a power of two <= world, or the world's size), or NULL (not
// initialised, bad k, or this rank beyond the last whole block of k ranks).
comm_group *comm_group_get(int k);
int comm_group_size(const comm_group *g);
int comm_group_rank(const comm_group *g);   // rank inside the group, 0..size-1
int comm_group_first(const comm_group *g);  // world rank of the group's member 0

// Stride groups, for hybrid CP (Ulysses inside blocks of u ranks, ring across them,
// model/dist/ulysses_attention.h): for every aligned group of size k > u, the k/u members of
// this rank's k-group that have its rank modulo u, in block order (member i is world rank
// first + i*u; none for a rank in no group of size k). Collective over the world, after
// comm_groups_init; u a power of two; idempotent
// for the same u, another u is TSR_EINVAL; u = 1 or u >= world makes none. Communication
// backends opened afterwards (comm_open) serve them like the aligned groups.
tsr_status comm_stride_groups_init(int u);
// The stride group inside this rank's aligned group of size k, or NULL (none made for k).
comm_group *comm_stride_group(int k);
// u of comm_stride_groups_init, 0 before (or when it made none).
int comm_stride_u(void);
// The group's distance between members' world ranks: 1 for an aligned group, u for a
// stride group.
int comm_group_stride(const comm_group *g);

// ---- communication backends (the data plane) ------------------------------------------
//
// Collectives and the ring exchange over a group's ranks go through one table of function
// pointers, like the compute backends of kernels/kernels.h: ring attention and the
// gradient all-reduce call only these entries, whichever backend fills the table: MPI on
// host memory, MPI with device buffers staged through pinned host memory, NCCL on device
// memory (comm_open below). The world-level calls above (rank, size, integer all-reduces,
// broadcast) stay the control plane: host values, MPI, every backend.
//
// Contract for every entry
// - Call as `cb->op(cb, g, ...)`, g from comm_group_get: the backend's state is cb->ctx.
// - Memory space: every buffer lives in cb->mem (COMM_MEM_HOST for "mpi"; device memory
//   for "mpi-staged" and "nccl"), the one the compute backend it works with allocates.
// - Ordering: with cb->stream == NULL (host backends) an entry is host-synchronous: a
//   blocking entry returns with the result in place, and `wait` returns once the request's
//   buffers may be used and reused. A backend with a stream (a cudaStream_t of the compute
//   backend, given when the backend is made) instead orders each entry after the work
//   queued on that stream when it is called, and `wait` makes later work queued on that
//   stream see the result without blocking the host; the compute backend's sync then
//   makes it visible to the host. Code written against the contract (start, compute,
//   wait, use) is correct on both, and the device backend overlaps the transfer with the
//   compute queued between start and wait.
// - Collective rules: every member of the group makes the same calls in the same order.
// - With a group of one member every entry is a local no-op (ring: recv = send; "nccl"
//   sends to itself through NCCL).
// - barrier is a host barrier: it returns once every member has finished the work queued
//   on its stream (calibration times transfers between two barriers).
// - Bounded: a wait that a dead or hung member would never complete ends the job after
//   comm_timeout() seconds when the run bounds its waits, naming the member (top of file).
// - Errors: TSR_ECOMM with the transport's message; TSR_ENOMEM; TSR_EINVAL for sizes.
typedef enum { COMM_MEM_HOST = 0, COMM_MEM_DEVICE = 1 } comm_mem;

typedef struct comm_request comm_request;
typedef struct comm_backend comm_backend;

struct comm_backend {
  const char *name;  // "mpi", "mpi-staged", "nccl"
  comm_mem mem;      // where every buffer argument lives
  void *stream;      // the compute stream entries are ordered on, or NULL (host-synchronous)
  void *ctx;         // backend state, owned by the backend

  // In-place sum over the group's ranks. x: (n) fp32
  tsr_status (*allreduce_sum_f32)(const comm_backend *cb, comm_group *g, float *x, int64_t n);
  // recv = the `bytes` of every member's send, in group-rank order. recv: (size * bytes)
  tsr_status (*allgather)(const comm_backend *cb, comm_group *g, const void *send, void *recv,
                          int64_t bytes);
  // The same, non-blocking (ZeRO-3's per-block weights, gathered while the previous block
  // computes): neither buffer may be touched until `wait`. "mpi-staged" runs it blocking.
  tsr_status (*iallgather)(const comm_backend *cb, comm_group *g, const void *send, void *recv,
                           int64_t bytes, comm_request **req);
  // recv = the sum over the group's members of their send's slice of this member: send holds
  // one slice of n values per member in group-rank order (size * n), recv (n) gets slice
  // `group rank`, summed (ZeRO's gradient shards, issue 29). send and recv must not overlap.
  tsr_status (*reduce_scatter_sum_f32)(const comm_backend *cb, comm_group *g, const float *send,
                                       float *recv, int64_t n);
  // The same, non-blocking (ZeRO-2's gradient buckets while backward goes on): neither buffer
  // may be touched until `wait`. "mpi-staged" runs it blocking (the request comes back done).
  tsr_status (*ireduce_scatter_sum_f32)(const comm_backend *cb, comm_group *g, const float *send,
                                        float *recv, int64_t n, comm_request **req);
  // All-to-all with variable counts (Ulysses attention's sequence <-> head exchange,
  // issue 30): this member sends sbytes[j] bytes of send + sdispl[j] to member j and
  // receives into recv + rdispl[j] the rbytes[j] bytes member j sends it (rbytes[j] must be
  // member j's sbytes[this member]). Counts and displacements are host arrays of the
  // group's size, in bytes; zero counts are allowed; send and recv must not overlap. Not
  // split into MPI's int counts: any size.
  tsr_status (*alltoallv)(const comm_backend *cb, comm_group *g, const void *send,
                          const int64_t *sbytes, const int64_t *sdispl, void *recv,
                          const int64_t *rbytes, const int64_t *rdispl);
  // The same, non-blocking (Ulysses' pipelined head chunks): none of the buffers may be
  // touched until `wait`; the count and displacement arrays are read before it returns. Several
  // may be in flight in a group and be waited for in any order (each is matched by its start
  // order, like ring_start). "mpi-staged" copies the send buffer out on its copy stream and
  // runs the host exchange and the copies back in `test` or, at the latest, `wait`.
  tsr_status (*ialltoallv)(const comm_backend *cb, comm_group *g, const void *send,
                           const int64_t *sbytes, const int64_t *sdispl, void *recv,
                           const int64_t *rbytes, const int64_t *rdispl, comm_request **req);
  // `bytes` of buf from group rank `root` to every member.
  tsr_status (*bcast)(const comm_backend *cb, comm_group *g, void *buf, int64_t bytes, int root);
  tsr_status (*barrier)(const comm_backend *cb, comm_group *g);
  // Ring exchange, non-blocking: sends `bytes` of `send` to the next member
  // ((rank + 1) % size) and receives as many into `recv` from the previous one. Neither
  // buffer may be touched until `wait` (send and recv must not overlap). *req != NULL on
  // success, also for a group of one. Several exchanges may be in flight in one group
  // (K/V and dK/dV in ring attention's backward) and be waited for in any order: each
  // receive gets the send of the same exchange, the n-th started by every member.
  tsr_status (*ring_start)(const comm_backend *cb, comm_group *g, const void *send, void *recv,
                           int64_t bytes, comm_request **req);
  // Non-blocking in-place sum of x (n fp32) over the group, e.g. a gradient bucket while
  // backward goes on. x: (n)
  tsr_status (*iallreduce_sum_f32)(const comm_backend *cb, comm_group *g, float *x, int64_t n,
                                   comm_request **req);
  // Lets a request progress without blocking; *done = 1 once complete (NULL req: done).
  tsr_status (*test)(const comm_backend *cb, comm_request *req, int *done);
  // Completes a request (see Ordering) and frees it: *req = NULL. NULL *req is a no-op.
  tsr_status (*wait)(const comm_backend *cb, comm_request **req);
};

// Bytes this process has received from other members through the all-to-alls of every
// backend (MPI, staged MPI, NCCL) since it started (their own slices excluded), counted as
// each all-to-all is posted or queued on the stream: what a test compares with a plan's
// count of the bytes a rank must receive (model/dist/placed_attention.h).
int64_t comm_alltoall_received(void);

// MPI on host memory (OpenMPI; a world of one without a launcher): a static object.
const comm_backend *comm_mpi(void);

// The communication backends of this binary, by the name `--comm` takes, for a compute
// backend whose buffers live in `mem` and whose entries are queued on `stream` (a
// cudaStream_t, or NULL for a host backend):
//   "mpi"   host memory: comm_mpi(). Device memory: MPI with every buffer staged through
//           pinned host memory ("mpi-staged", built with CUDA): works with several ranks
//           on one GPU and on clusters without NCCL.
//   "nccl"  device memory only (built with NCCL): a NCCL communicator per aligned group,
//           made here from the world's (ncclCommInitRank with an id broadcast over MPI,
//           then ncclCommSplit); operations on one communication stream ordered against
//           `stream` with events. One rank per GPU: refused, naming the two ranks that
//           share a GPU, when ranks share one (NCCL cannot).
//   "auto"  host memory: "mpi"; device memory: "nccl" when built, the world has more than
//           one rank and no two ranks share a GPU, else "mpi" (staged; in a world of one
//           every entry is local).
// Collective over the world; comm_groups_init first. *out stays valid until comm_close.
// Errors: TSR_EINVAL naming the backend and what this binary has (unknown name, NCCL not
// built, host/device mismatch, shared GPU), TSR_ECOMM from the transport.
tsr_status comm_open(const char *name, comm_mem mem, void *stream, const comm_backend **out);
// Releases what comm_open made (NCCL communicators, streams, pinned buffers); collective
// for NCCL. *cb = NULL. comm_mpi() and NULL are no-ops.
void comm_close(const comm_backend **cb);
// The names comm_open accepts in this binary, e.g. "mpi, nccl, auto".
const char *comm_backends_built(void);

// ---- ranks on a node and their GPUs ---------------------------------------------------

// Local rank and node size from a launcher's environment, read through get(name, ctx)
// (getenv, or a test's table): OpenMPI (OMPI_COMM_WORLD_LOCAL_RANK, _LOCAL_SIZE), MPICH
// (MPI_LOCALRANKID, MPI_LOCALNRANKS), Slurm (SLURM_LOCALID; the size is this node's entry,
// SLURM_NODEID, of SLURM_STEP_TASKS_PER_NODE or SLURM_TASKS_PER_NODE, a list like
// "4(x2),3"). Returns 1 with both set, 0 when the environment does not give both.
int comm_local_from_env(const char *(*get)(const char *name, void *ctx), void *ctx, int *rank,
                        int *size);
// This rank's local rank and the ranks of the job on its node: from the launcher's
// environment, else from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) done in comm_init;
// 0 and 1 for a world of one.
int comm_local_rank(void);
int comm_local_size(void);
// The GPU of local rank `local_rank` among `devices` visible ones: local_rank % devices.
// A node with more ranks than GPUs shares them round-robin (fine for "mpi", refused by
// "nccl"); a launcher that gives each rank its own GPU (CUDA_VISIBLE_DEVICES per task)
// shows it one device: 0. -1 when devices < 1.
int comm_device_of(int local_rank, int devices);
// The first two ranks (a < b) whose keys are equal (key: the node and the GPU's PCI bus
// id of each rank, n of them): 1 if there are such ranks, else 0.
int comm_find_shared(const uint64_t *keys, int n, int *a, int *b);
// Selects this rank's GPU (comm_device_of of the local rank) as the CUDA device of the
// process, before the CUDA compute backend is created; *device = the index, or -1 when
// the binary has no CUDA or no GPU is visible (then nothing is done and TSR_OK).
tsr_status comm_bind_device(int *device);

// Seconds a blocking communication may take before the job is ended; 0: no bound.
double comm_timeout(void);
// Bounds every later wait to `seconds` (0: none), unless TESSERA_COMM_TIMEOUT (read at
// comm_init, seconds >= 0) gave the bound: it wins. Without either, waits are unbounded: a
// multi-rank ingest waits as long as its slowest rank works. tools/ bounds the runs that
// open a communication backend (train, calibrate: 600 s), whose waits last at most a wave.
void comm_bound_waits(double seconds);

// World-level in-place sum of n doubles (host values, e.g. the step's loss).
tsr_status comm_allreduce_sum_f64(double *vals, int n);

// CPU cores this rank may use: the node's online cores divided among the ranks the
// launcher put on this node (comm_local_size), >= 1.
int comm_local_cores(void);

// Ends the world (MPI_Finalize) if it was joined.
void comm_finalize(void);
// Stops every rank (MPI_Abort) or exits for a world of one.
void comm_abort(int code) __attribute__((noreturn));

#endif
