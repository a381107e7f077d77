// tests/comm/test_comm_fail.c — a job that communicates until it is stopped, for
// tests/comm/comm_fail.sh: every rank repeats a ring exchange and an all-reduce in the
// world group, as training does, for at most SECONDS; rank 0 prints "ready" after the first
// round, and the result of every round is checked against its closed form (so a round that
// "completes" with a dead peer fails).
//   mpirun -np N test_comm_fail SECONDS
// (The GPU variant kills a rank of `tessera train --backend cuda`: tests/dist/gpu_dist.sh.)
// The driver then kills or stops one rank and checks that the whole job ends within a
// bounded time with a message naming it (comm/comm.h "Failure").
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "comm/comm.h"
#include "core/log.h"


enum { N = 1 << 16 };

int main(int argc, char **argv) {
  if (comm_init(&argc, &argv) || comm_groups_init()) {
    fprintf(stderr, "%s\n", err_msg());
    return 1;
  }
  log_set_rank(comm_rank(), comm_size());
  double seconds = argc > 1 ? atof(argv[1]) : 60;
  const comm_backend *cb = NULL;
  float *x = malloc(N * sizeof *x), *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
  tsr_status st = comm_open("mpi", COMM_MEM_HOST, NULL, &cb);
  if (st || !x || !a || !b) {
    log_error("%s", st ? err_msg() : "out of memory");
    comm_abort(1);
  }
  comm_group *g = comm_group_get(comm_size());
  const int me = comm_rank(), n = comm_size(), prev = (me + n - 1) % n;
  double t0 = time_now();
  for (int round = 0; time_now() - t0 < seconds; round++) {
    for (int i = 0; i < N; i++) x[i] = (float)(me + 1), a[i] = (float)(me * 1000 + round % 1000);
    comm_request *req = NULL;
    st = cb->ring_start(cb, g, a, b, N * (int64_t)sizeof *a, &req);
    if (!st) st = cb->allreduce_sum_f32(cb, g, x, N);
    tsr_status w = cb->wait(cb, &req);
    if (!st) st = w;
    if (st) {
      log_error("round %d: %s", round, err_msg());
      comm_abort(1);
    }
    int bad = 0;
    for (int i = 0; i < N; i++)
      bad += x[i] != (float)(n * (n + 1) / 2) || b[i] != (float)(prev * 1000 + round % 1000);
    CHECK(bad == 0, "round %d: %d values wrong", round, bad);
    if (bad) comm_abort(1);
    if (round == 0 && me == 0) {
      printf("ready\n");
      fflush(stdout);
    }
  }
  comm_close(&cb);
  free(x), free(a), free(b);
  int rc = check_done();
  comm_finalize();
  return rc;
}
