// comm/comm_internal.h — what the communication backends of comm/ share with comm.c (not
// a public header: only comm/comm*.c include it).
#ifndef TESSERA_COMM_COMM_INTERNAL_H
#define TESSERA_COMM_COMM_INTERNAL_H

#include <mpi.h>
#include <stddef.h>
#include "comm/comm.h"

// MPI counts are int: transfers are cut into pieces of at most this many elements.
enum { COMM_CHUNK = 1 << 30 };

struct comm_group {
  MPI_Comm comm;   // MPI_COMM_NULL for a world of one (no MPI)
  int size, rank, first;
  int level;       // index of the group in the set: log2(size), or for the world group of a
                   // world that is not a power of two, one above the largest power of two's;
                   // of a stride group, log2 of its aligned block's size (size * stride)
  int stride;      // 1: an aligned block; u: a stride group (comm_stride_groups_init)
  unsigned seq;    // ring exchanges started in this group (every member counts alike)
};

// TSR_OK, or TSR_ECOMM with MPI's message for `what`.
tsr_status comm_mpi_check(int rc, const char *what);
// 1 once MPI was joined (a launcher started us).
int comm_joined_mpi(void);

// The MPI tag of chunk c of a ring exchange that is the group's seq-th: distinct for the
// exchanges in flight together (K/V and dK/dV in the backward), so a receive matches its
// send whatever order the two sides post them in (the staged backend posts sends late).
static inline int comm_ring_tag(unsigned seq, int64_t c) {
  return (int)(((seq & 0x3ffu) << 5) | (unsigned)(c & 0x1f));
}

// Checks the per-member count n of an all-gather or reduce-scatter (what), in `unit`
// ("bytes", "values"): one MPI call, 0..COMM_CHUNK. TSR_EINVAL saying so.
tsr_status comm_count_check(const char *what, int64_t n, const char *unit);

// Checks an all-to-all's counts and displacements (group size each): none negative, and
// this member's slice to itself as long as the one it expects. TSR_EINVAL saying which.
tsr_status comm_alltoallv_check(const comm_group *g, const int64_t *sbytes, const int64_t *sdispl,
                                const int64_t *rbytes, const int64_t *rdispl);

// Adds the bytes an all-to-all brings this member from the others (rbytes: group size; its
// own slice left out) to comm_alltoall_received: every backend's all-to-all calls it once
// it is posted or queued.
void comm_alltoall_count(const comm_group *g, const int64_t *rbytes);

// The all-to-all of comm_backend.alltoallv on host buffers, in point-to-point pieces of at
// most COMM_CHUNK bytes tagged by the group's exchange number (comm_ring_tag; take one with
// g->seq++ per all-to-all): the MPI requests of one direction (bytes, group size), then
// posting it: the receives (send = 0: into buf + displ[j], bytes[j] from member j) or the
// sends, each peer in turn starting after this member (no hot spot); the own slice is not
// posted (the caller copies it). Appends to req (room for comm_mpi_alltoallv_pieces), *n
// advanced past what was posted, also on an error (those must still be waited for).
int comm_mpi_alltoallv_pieces(const comm_group *g, const int64_t *bytes);
tsr_status comm_mpi_alltoallv_post(comm_group *g, unsigned seq, int send, void *buf,
                                   const int64_t *bytes, const int64_t *displ, MPI_Request *req,
                                   int *n);

// ---- blocking entries (comm.c) ----------------------------------------------------------
// The blocking collectives of comm_backend as the backend's own non-blocking start and then
// its wait, for a table whose blocking entry is nothing more (cb's iallreduce_sum_f32,
// iallgather, ireduce_scatter_sum_f32, ialltoallv and wait must be set).
tsr_status comm_start_wait_allreduce(const comm_backend *cb, comm_group *g, float *x, int64_t n);
tsr_status comm_start_wait_allgather(const comm_backend *cb, comm_group *g, const void *send,
                                     void *recv, int64_t bytes);
tsr_status comm_start_wait_reduce_scatter(const comm_backend *cb, comm_group *g, const float *send,
                                          float *recv, int64_t n);
tsr_status comm_start_wait_alltoallv(const comm_backend *cb, comm_group *g, const void *send,
                                     const int64_t *sbytes, const int64_t *sdispl, void *recv,
                                     const int64_t *rbytes, const int64_t *rdispl);
// The comm_backend rows of a backend whose four blocking collectives are all start + wait.
#define COMM_START_WAIT_ENTRIES                                                             \
  .allreduce_sum_f32 = comm_start_wait_allreduce, .allgather = comm_start_wait_allgather, \
  .reduce_scatter_sum_f32 = comm_start_wait_reduce_scatter,                               \
  .alltoallv = comm_start_wait_alltoallv

// ---- bounded waits (comm.c) ---------------------------------------------------------------
// Every MPI wait of the backends and the control plane goes through comm_mpi_wait: it
// polls the requests (MPI_Testall, as MPI_Waitall would), answers other ranks' pings,
// and after comm_timeout() seconds (when bounded) asks every other member of the group whether it is
// alive (a ping on a private duplicate of the world communicator; a member in a
// communication, even one waiting itself, answers within its poll loop). Then it ends the
// job (comm_fail) naming the members that did not answer: dead, stopped, or busy for
// longer than the timeout. `what` is a string literal ("ring exchange"), g the group (NULL:
// the world), peer the world rank mostly waited on (-1: every member), for the message.
tsr_status comm_mpi_wait(int n, MPI_Request *r, const char *what, const comm_group *g, int peer);

// ---- the watchdog (comm.c) --------------------------------------------------------------
// The thread runs in a world of more than one rank, for what comm_mpi_wait cannot bound:
// blocking calls marked by the main thread (communicator creation) and the backends' own
// pending work (sources: NCCL operations on a stream, which block no host thread). When a
// wait or a source is overdue, the watchdog prints one line naming this rank, the
// operation, the group and the peers, calls every source's abort (e.g. ncclCommAbort) and
// ends the job with MPI_Abort.

// The main thread enters a blocking wait: `what` (a string literal), in group g (NULL:
// the world), waiting on world rank `peer` (-1: every other member). Not nested: an inner
// begin/end pair is ignored while an outer one is open.
void comm_watch_begin(const char *what, const comm_group *g, int peer);
void comm_watch_end(void);

typedef struct {
  // Called from the watchdog thread about four times a second: 1 when some of the
  // source's work has waited longer than `timeout` seconds (0: no bound) or failed, with a
  // description in msg.
  int (*overdue)(void *ctx, double now, double timeout, char *msg, size_t n);
  // Called from the watchdog thread before it ends the job: unblock what can hang.
  void (*abort)(void *ctx);
  void *ctx;
} comm_watch_source;
// Adds or removes (by ctx) a source; at most 4.
tsr_status comm_watch_add(const comm_watch_source *s);
void comm_watch_remove(void *ctx);
// Ends the job from the watchdog or a backend: prints "rank R: msg", aborts the sources.
void comm_fail(const char *msg) __attribute__((noreturn));

// ---- device backends (built with CUDA; comm_backends.c) -------------------------------
tsr_status comm_staged_open(void *stream, const comm_backend **out);
void comm_staged_close(const comm_backend *cb);
tsr_status comm_nccl_open(void *stream, const comm_backend **out);
void comm_nccl_close(const comm_backend *cb);
// TSR_OK for cudaSuccess; else CUDA's error e (a cudaError_t) of `what` is cleared and set
// as backend's ("nccl", "mpi-staged"): TSR_ENOMEM for an allocation, TSR_ECOMM otherwise.
tsr_status comm_cuda_check(int e, const char *backend, const char *what);
// Node and PCI bus id of this rank's current CUDA device, hashed (comm_find_shared).
tsr_status comm_device_key(uint64_t *key);

#endif
