// comm/comm.c — the world (control plane), the group set, where ranks sit on their nodes,
// and the watchdog that bounds every blocking communication (comm/comm.h).
#include "comm/comm.h"
#include "comm/comm_internal.h"

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/num.h"

static int comm_joined = 0, comm_r = 0, comm_n = 1;
static int local_r = 0, local_n = 1;
static double timeout_s = 0;      // 0: waits are not bounded
static int timeout_from_env = 0;  // TESSERA_COMM_TIMEOUT was given: it wins
static MPI_Comm diag = MPI_COMM_NULL;  // private duplicate of the world: liveness pings

static void watchdog_start(void);
static void watchdog_stop(void);

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

int comm_joined_mpi(void) { return comm_joined; }

// ---- ranks on a node -------------------------------------------------------------------

static int parse_count(const char *s, int *out) {
  int64_t v;
  if (!s || num_parse_i64(s, 0, 1 << 24, &v) != NUM_OK) return 0;
  *out = (int)v;
  return 1;
}

// Entry `node` of Slurm's tasks-per-node list ("4(x2),3,2(x1)": 4, 4, 3, 2), or 0.
static int slurm_tasks_on(const char *list, int node) {
  for (const char *p = list; p && *p;) {
    char *end;
    long n = strtol(p, &end, 10), rep = 1;
    if (end == p || n < 0) return 0;
    if (end[0] == '(' && end[1] == 'x') {
      rep = strtol(end + 2, &end, 10);
      if (*end != ')' || rep < 1) return 0;
      end++;
    }
    if (node < rep) return (int)n;
    node -= (int)rep;
    if (*end != ',') return 0;
    p = end + 1;
  }
  return 0;
}

int comm_local_from_env(const char *(*get)(const char *name, void *ctx), void *ctx, int *rank,
                        int *size) {
  static const char *pairs[][2] = {{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                                   {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"}};
  int r, n;
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
    if (parse_count(get(pairs[i][0], ctx), &r) && parse_count(get(pairs[i][1], ctx), &n) &&
        n >= 1 && r < n) {
      *rank = r, *size = n;
      return 1;
    }
  int node;
  if (parse_count(get("SLURM_LOCALID", ctx), &r) && parse_count(get("SLURM_NODEID", ctx), &node)) {
    const char *list = get("SLURM_STEP_TASKS_PER_NODE", ctx);
    if (!list) list = get("SLURM_TASKS_PER_NODE", ctx);
    n = slurm_tasks_on(list, node);
    if (n >= 1 && r < n) {
      *rank = r, *size = n;
      return 1;
    }
  }
  return 0;
}

static const char *get_env(const char *name, void *ctx) { return getenv(name); }

int comm_local_rank(void) { return local_r; }
int comm_local_size(void) { return local_n; }

int comm_device_of(int local_rank, int devices) {
  if (devices < 1 || local_rank < 0) return -1;
  return local_rank % devices;
}

int comm_find_shared(const uint64_t *keys, int n, int *a, int *b) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (keys[i] == keys[j]) {
        *a = i, *b = j;
        return 1;
      }
  return 0;
}

double comm_timeout(void) { return timeout_s; }

void comm_bound_waits(double seconds) {
  if (!timeout_from_env && seconds >= 0) timeout_s = seconds;
}

tsr_status comm_init(int *argc, char ***argv) {
  const char *t = getenv("TESSERA_COMM_TIMEOUT");
  if (t && num_parse_double(t, 0, 1e9, &timeout_s) != NUM_OK)
    return err_set(TSR_EINVAL, "TESSERA_COMM_TIMEOUT='%s': give the seconds a rank may wait in "
                   "one communication (0: no bound; default 600 for train and calibrate)", t);
  timeout_from_env = t != NULL;
  if (!launched_by_mpi()) return TSR_OK;
  int provided = 0;
  tsr_status st = comm_mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided),
                            "MPI_Init_thread");
  if (st) return st;
  comm_joined = 1;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &comm_r);
  MPI_Comm_size(MPI_COMM_WORLD, &comm_n);
  // Where this rank sits on its node: the launcher's word, else the ranks sharing memory.
  // Every rank of one launch sees the same kind of environment, so all or none split.
  if (!comm_local_from_env(get_env, NULL, &local_r, &local_n)) {
    MPI_Comm node;
    st = comm_mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, comm_r,
                                            MPI_INFO_NULL, &node),
                        "finding the ranks of this node (MPI_Comm_split_type)");
    if (st) return st;
    MPI_Comm_rank(node, &local_r);
    MPI_Comm_size(node, &local_n);
    MPI_Comm_free(&node);
  }
  if (comm_n > 1) {
    st = comm_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &diag), "MPI_Comm_dup");
    if (st) return st;
    watchdog_start();
  }
  return TSR_OK;
}

int comm_rank(void) { return comm_r; }
int comm_size(void) { return comm_n; }

tsr_status comm_barrier(void) {
  if (!comm_joined) return TSR_OK;
  MPI_Request r;
  tsr_status st = comm_mpi_check(MPI_Ibarrier(MPI_COMM_WORLD, &r), "barrier");
  return st ? st : comm_mpi_wait(1, &r, "barrier", NULL, -1);
}

static tsr_status allreduce_world(void *vals, int n, MPI_Datatype type, MPI_Op op) {
  if (!comm_joined) return TSR_OK;
  MPI_Request r;
  tsr_status st = comm_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, vals, n, type, op, MPI_COMM_WORLD, &r),
                                 "all-reduce");
  return st ? st : comm_mpi_wait(1, &r, "all-reduce", NULL, -1);
}

tsr_status comm_allreduce_sum_f64(double *vals, int n) {
  return allreduce_world(vals, n, MPI_DOUBLE, MPI_SUM);
}
tsr_status comm_allreduce_sum_i64(int64_t *vals, int n) {
  return allreduce_world(vals, n, MPI_INT64_T, MPI_SUM);
}
tsr_status comm_allreduce_max_i64(int64_t *vals, int n) {
  return allreduce_world(vals, n, MPI_INT64_T, MPI_MAX);
}

tsr_status comm_bcast(void *buf, int64_t bytes, int root) {
  if (!comm_joined) return TSR_OK;
  char *p = buf;
  tsr_status st = TSR_OK;
  while (bytes > 0 && !st) {  // MPI counts are int: send in chunks below 2 GiB
    int chunk = bytes > COMM_CHUNK ? COMM_CHUNK : (int)bytes;
    MPI_Request r;
    st = comm_mpi_check(MPI_Ibcast(p, chunk, MPI_BYTE, root, MPI_COMM_WORLD, &r), "broadcast");
    if (!st) st = comm_mpi_wait(1, &r, "broadcast", NULL, root);
    p += chunk;
    bytes -= chunk;
  }
  return st;
}

// ---- bounded waits -----------------------------------------------------------------------

enum { DIAG_PING = 1, DIAG_PONG = 2 };
static int diag_token;  // the payload of pings and pongs (MPI needs a buffer)

// Answers every ping that has arrived.
static void diag_answer(void) {
  for (;;) {
    int flag = 0;
    MPI_Status s;
    if (MPI_Iprobe(MPI_ANY_SOURCE, DIAG_PING, diag, &flag, &s) != MPI_SUCCESS || !flag) return;
    int in;
    MPI_Request r;
    MPI_Recv(&in, 1, MPI_INT, s.MPI_SOURCE, DIAG_PING, diag, MPI_STATUS_IGNORE);
    if (MPI_Isend(&diag_token, 1, MPI_INT, s.MPI_SOURCE, DIAG_PONG, diag, &r) == MPI_SUCCESS)
      MPI_Request_free(&r);
  }
}

// Pings the other members of [first, first + size), collects answers for a few seconds
// (answering pings meanwhile) and ends the job naming those that stayed silent.
static void diag_fail(const char *what, int first, int size, int peer, double waited) {
  enum { MAX_NAMED = 8 };
  char *alive = calloc((size_t)size, 1);
  int silent = 0;
  if (alive) {
    for (int i = 0; i < size; i++) {
      MPI_Request r;
      if (first + i != comm_r && MPI_Isend(&diag_token, 1, MPI_INT, first + i, DIAG_PING, diag,
                                           &r) == MPI_SUCCESS)
        MPI_Request_free(&r);
    }
    alive[comm_r - first] = 1;
    int answered = 1;
    double until = time_now() + (timeout_s < 5 ? timeout_s : 5);
    while (answered < size && time_now() < until) {
      diag_answer();
      int flag = 0;
      MPI_Status s;
      if (MPI_Iprobe(MPI_ANY_SOURCE, DIAG_PONG, diag, &flag, &s) != MPI_SUCCESS) break;
      if (!flag) continue;
      int in;
      MPI_Recv(&in, 1, MPI_INT, s.MPI_SOURCE, DIAG_PONG, diag, MPI_STATUS_IGNORE);
      int i = s.MPI_SOURCE - first;
      if (i >= 0 && i < size && !alive[i]) alive[i] = 1, answered++;
    }
    silent = size - answered;
  }
  char names[160] = "", msg[512];
  int named = 0;
  for (int i = 0; alive && i < size && named < MAX_NAMED; i++)
    if (!alive[i]) {
      size_t len = strlen(names);
      snprintf(names + len, sizeof names - len, "%s%d", named ? ", " : "", first + i);
      named++;
    }
  if (!alive)
    snprintf(msg, sizeof msg, "%s in group [%d, %d) has waited %.0f s (for rank %d)", what, first,
             first + size, waited, peer);
  else if (silent)
    snprintf(msg, sizeof msg, "%s in group [%d, %d) has waited %.0f s: rank%s %s%s do%s not "
             "answer (died, hang%s, or busy for longer than the timeout)", what, first,
             first + size, waited, silent > 1 ? "s" : "", names, silent > named ? ", ..." : "",
             silent > 1 ? "" : "es", silent > 1 ? "" : "s");
  else
    snprintf(msg, sizeof msg, "%s in group [%d, %d) has waited %.0f s although every member "
             "answers: the ranks are in different communications (a bug in tessera: please "
             "report it with this log)", what, first, first + size, waited);
  free(alive);
  comm_fail(msg);
}

tsr_status comm_mpi_wait(int n, MPI_Request *r, const char *what, const comm_group *g, int peer) {
  if (n <= 0) return TSR_OK;
  const double start = time_now();
  for (unsigned i = 1;; i++) {
    int done = 0, rc = MPI_Testall(n, r, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return comm_mpi_check(rc, what);
    if (done) return TSR_OK;
    if (i % 256 || diag == MPI_COMM_NULL) continue;
    diag_answer();
    double waited = time_now() - start;
    if (timeout_s > 0 && waited > timeout_s)
      // a stride group's members are pinged through their whole aligned block
      diag_fail(what, g ? g->first - g->first % (g->size * g->stride) : 0,
                g ? g->size * g->stride : comm_n, peer, waited);
  }
}

// ---- blocking entries as start + wait ------------------------------------------------------

// Waits for *r, the request of a start that returned st: st if it failed (the request is
// then NULL, every backend's contract, and the wait a no-op), else the wait's result.
static tsr_status waited(const comm_backend *cb, tsr_status st, comm_request **r) {
  tsr_status w = cb->wait(cb, r);
  return st ? st : w;
}

tsr_status comm_start_wait_allreduce(const comm_backend *cb, comm_group *g, float *x, int64_t n) {
  comm_request *r = NULL;
  return waited(cb, cb->iallreduce_sum_f32(cb, g, x, n, &r), &r);
}

tsr_status comm_start_wait_allgather(const comm_backend *cb, comm_group *g, const void *send,
                                     void *recv, int64_t bytes) {
  comm_request *r = NULL;
  return waited(cb, cb->iallgather(cb, g, send, recv, bytes, &r), &r);
}

tsr_status comm_start_wait_reduce_scatter(const comm_backend *cb, comm_group *g, const float *send,
                                          float *recv, int64_t n) {
  comm_request *r = NULL;
  return waited(cb, cb->ireduce_scatter_sum_f32(cb, g, send, recv, n, &r), &r);
}

tsr_status comm_start_wait_alltoallv(const comm_backend *cb, comm_group *g, const void *send,
                                     const int64_t *sbytes, const int64_t *sdispl, void *recv,
                                     const int64_t *rbytes, const int64_t *rdispl) {
  comm_request *r = NULL;
  return waited(cb, cb->ialltoallv(cb, g, send, sbytes, sdispl, recv, rbytes, rdispl, &r), &r);
}

// ---- groups ----------------------------------------------------------------------------

enum { COMM_MAX_LEVELS = 31 };

// Index levels of comm_groups holds the power-of-two groups (size 2^level); a world whose
// size is not a power of two adds the world itself at index comm_levels (its level), the
// group of the world collectives (the gradient all-reduce, ZeRO).
static comm_group comm_groups[COMM_MAX_LEVELS + 1];
static int comm_member[COMM_MAX_LEVELS + 1];  // this rank lies in a whole block of the size
static int comm_levels = 0;  // groups of size 1, 2, 4, ... 2^(levels-1)
static int comm_ngroups = 0; // comm_levels, + 1 with the world group

// One group of the set: this rank's aligned block of k ranks, or (k = world, not a power of
// two) the world. A rank beyond the last whole block of k ranks is in no group of size k:
// it takes part in the split (a collective) with MPI_UNDEFINED and gets none.
static tsr_status group_make(int idx, int k) {
  comm_group *g = &comm_groups[idx];
  int member = comm_r < comm_n / k * k;
  comm_member[idx] = member;
  g->size = k;
  g->rank = comm_r % k;
  g->first = comm_r - g->rank;
  g->level = idx;
  g->stride = 1;
  g->seq = 0;
  g->comm = MPI_COMM_NULL;
  if (!comm_joined) return TSR_OK;
  tsr_status st = comm_mpi_check(
      MPI_Comm_split(MPI_COMM_WORLD, member ? comm_r / k : MPI_UNDEFINED, comm_r, &g->comm),
      "creating the group communicators (MPI_Comm_split)");
  if (!st && g->comm != MPI_COMM_NULL) MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
  return st;
}

tsr_status comm_groups_init(void) {
  if (comm_levels) return TSR_OK;
  int levels = 0;
  for (int k = 1; k <= comm_n; k *= 2, levels++) {
    tsr_status st = group_make(levels, k);
    if (st) return st;
  }
  int n = levels;
  if (comm_n & (comm_n - 1)) {
    tsr_status st = group_make(n++, comm_n);
    if (st) return st;
  }
  comm_levels = levels;
  comm_ngroups = n;
  return TSR_OK;
}

static comm_group stride_groups[COMM_MAX_LEVELS];  // by level of the aligned block
static int stride_u = 0;

tsr_status comm_stride_groups_init(int u) {
  if (!comm_levels) return err_set(TSR_EINVAL, "comm_stride_groups_init before comm_groups_init");
  if (u < 1 || (u & (u - 1)))
    return err_set(TSR_EINVAL, "ranks per node %d: hybrid CP needs a power of two", u);
  if (stride_u) return stride_u == u ? TSR_OK
                : err_set(TSR_EINVAL, "hybrid CP groups exist for %d ranks per node, not %d",
                          stride_u, u);
  if (u == 1 || u >= comm_n) return TSR_OK;
  for (int lv = 0; lv < comm_levels; lv++) {
    int k = 1 << lv;
    comm_group *g = &stride_groups[lv];
    if (k <= u) continue;
    int block = comm_r - comm_r % k, member = comm_member[lv];
    g->size = k / u;
    g->rank = (comm_r % k) / u;
    g->first = block + comm_r % u;
    g->level = lv;
    g->stride = u;
    g->seq = 0;
    g->comm = MPI_COMM_NULL;
    if (!comm_joined) continue;
    tsr_status st = comm_mpi_check(
        MPI_Comm_split(MPI_COMM_WORLD, member ? block + comm_r % u : MPI_UNDEFINED, comm_r,
                       &g->comm),
        "creating the hybrid CP communicators (MPI_Comm_split)");
    if (st) return st;
    if (g->comm != MPI_COMM_NULL) MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
  }
  stride_u = u;
  return TSR_OK;
}

comm_group *comm_stride_group(int k) {
  for (int lv = 0; stride_u && lv < comm_levels; lv++)
    if (1 << lv == k && k > stride_u) return comm_member[lv] ? &stride_groups[lv] : NULL;
  return NULL;
}

int comm_stride_u(void) { return stride_u; }
int comm_group_stride(const comm_group *g) { return g->stride; }

comm_group *comm_group_get(int k) {
  for (int i = 0; i < comm_ngroups; i++)
    if (comm_groups[i].size == k) return comm_member[i] ? &comm_groups[i] : NULL;
  return NULL;
}

int comm_group_size(const comm_group *g) { return g->size; }
int comm_group_rank(const comm_group *g) { return g->rank; }
int comm_group_first(const comm_group *g) { return g->first; }

int comm_local_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN) / (local_n > 0 ? local_n : 1);
  return n < 1 ? 1 : (int)n;
}

void comm_finalize(void) {
  watchdog_stop();
  if (diag != MPI_COMM_NULL) MPI_Comm_free(&diag);
  for (int i = 0; i < comm_ngroups; i++) {
    if (comm_groups[i].comm != MPI_COMM_NULL) MPI_Comm_free(&comm_groups[i].comm);
    if (i < comm_levels && stride_u && stride_groups[i].comm != MPI_COMM_NULL)
      MPI_Comm_free(&stride_groups[i].comm);
  }
  comm_levels = comm_ngroups = 0;
  stride_u = 0;
  if (comm_joined) MPI_Finalize();
  comm_joined = 0;
}

void comm_abort(int code) {
  if (comm_joined) MPI_Abort(MPI_COMM_WORLD, code);
  exit(code);
}

// ---- the watchdog ------------------------------------------------------------------------

enum { WATCH_MAX_SOURCES = 4 };

static struct {
  pthread_t thread;
  int running;
  pthread_mutex_t mu;          // guards the sources and `stop`
  pthread_cond_t wake;
  int stop;
  comm_watch_source src[WATCH_MAX_SOURCES];
  int nsrc;
  // the main thread's wait: since (ns of CLOCK_MONOTONIC, 0 = none) is written last
  _Atomic int64_t since_ns;
  _Atomic(const char *) what;
  _Atomic int first, size, peer;
  int depth;                   // main thread only
} wd = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void comm_watch_begin(const char *what, const comm_group *g, int peer) {
  if (wd.depth++) return;
  atomic_store(&wd.what, what);
  atomic_store(&wd.first, g ? g->first - g->first % (g->size * g->stride) : 0);
  atomic_store(&wd.size, g ? g->size * g->stride : comm_n);
  atomic_store(&wd.peer, peer);
  atomic_store(&wd.since_ns, now_ns());
}

void comm_watch_end(void) {
  if (wd.depth > 0 && --wd.depth == 0) atomic_store(&wd.since_ns, 0);
}

tsr_status comm_watch_add(const comm_watch_source *s) {
  pthread_mutex_lock(&wd.mu);
  int ok = wd.nsrc < WATCH_MAX_SOURCES;
  if (ok) wd.src[wd.nsrc++] = *s;
  pthread_mutex_unlock(&wd.mu);
  return ok ? TSR_OK : err_set(TSR_EINVAL, "comm: more than %d watchdog sources", WATCH_MAX_SOURCES);
}

void comm_watch_remove(void *ctx) {
  pthread_mutex_lock(&wd.mu);
  for (int i = 0; i < wd.nsrc; i++)
    if (wd.src[i].ctx == ctx) wd.src[i--] = wd.src[--wd.nsrc];
  pthread_mutex_unlock(&wd.mu);
}

static atomic_int aborts_done;

static void *run_aborts(void *arg) {
  // no lock: the job ends here anyway, and the main thread may be stuck holding anything
  for (int i = 0; i < wd.nsrc; i++)
    if (wd.src[i].abort) wd.src[i].abort(wd.src[i].ctx);
  atomic_store(&aborts_done, 1);
  return arg;
}

void comm_fail(const char *msg) {
  log_error("rank %d: %s; ending the job (communication timeout %g s: TESSERA_COMM_TIMEOUT)",
            comm_r, msg, timeout_s);
  // The sources' aborts (ncclCommAbort) free what waits on the GPU; they get 10 s, so that
  // one that hangs itself cannot keep the job from ending.
  pthread_t t;
  if (wd.nsrc > 0 && pthread_create(&t, NULL, run_aborts, NULL) == 0) {
    pthread_detach(t);
    for (int i = 0; i < 100 && !atomic_load(&aborts_done); i++) usleep(100000);
  }
  if (comm_joined) MPI_Abort(MPI_COMM_WORLD, 1);
  _exit(1);
}

// "rank 1", or "ranks [0, 4) other than 2" when every member is waited on.
static void describe_peers(char *s, size_t n, int first, int size, int peer) {
  if (peer >= 0) snprintf(s, n, "rank %d", peer);
  else if (size == 2) snprintf(s, n, "rank %d", first + (comm_r - first == 0 ? 1 : 0));
  else snprintf(s, n, "ranks [%d, %d) other than %d", first, first + size, comm_r);
}

// The thread's own message, for a blocking call the main thread marked.
static void *watchdog_main(void *arg) {
  pthread_mutex_lock(&wd.mu);
  while (!wd.stop) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 250 * 1000000;
    if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&wd.wake, &wd.mu, &until);
    if (wd.stop) break;
    char msg[512];
    int64_t since = atomic_load(&wd.since_ns), now = now_ns();
    if (since && timeout_s > 0 && (double)(now - since) * 1e-9 > timeout_s) {
      int first = atomic_load(&wd.first), size = atomic_load(&wd.size), peer = atomic_load(&wd.peer);
      char peers[96];
      describe_peers(peers, sizeof peers, first, size, peer);
      snprintf(msg, sizeof msg,
               "%s in group [%d, %d) has waited %.0f s for %s: that rank died, hangs or is "
               "stuck far behind", atomic_load(&wd.what), first, first + size,
               (double)(now - since) * 1e-9, peers);
      pthread_mutex_unlock(&wd.mu);
      comm_fail(msg);
    }
    for (int i = 0; i < wd.nsrc; i++)
      if (wd.src[i].overdue(wd.src[i].ctx, (double)now * 1e-9, timeout_s, msg, sizeof msg)) {
        pthread_mutex_unlock(&wd.mu);
        comm_fail(msg);
      }
  }
  pthread_mutex_unlock(&wd.mu);
  return arg;
}

static void watchdog_start(void) {
  wd.stop = 0;
  if (pthread_create(&wd.thread, NULL, watchdog_main, NULL) == 0) wd.running = 1;
  else log_warn("comm: no watchdog thread: a hung rank will not end the job by itself");
}

static void watchdog_stop(void) {
  if (!wd.running) return;
  pthread_mutex_lock(&wd.mu);
  wd.stop = 1;
  pthread_cond_signal(&wd.wake);
  pthread_mutex_unlock(&wd.mu);
  pthread_join(wd.thread, NULL);
  wd.running = 0;
}
