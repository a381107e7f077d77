// A job that communicates until it is stopped, for tests/core/comm_fail.sh (and, built
// with TEST_COMM_DEVICE as test_comm_fail_gpu, for the GPU variant): every rank repeats a
// ring exchange and an all-reduce in the world group, as training does, for at most
// SECONDS; rank 0 prints "ready" after the first round, and the result of every round is
// checked against its closed form (so a round that "completes" with a dead peer fails).
//   mpirun -np N test_comm_fail SECONDS [mpi|nccl]
// The driver then kills or stops one rank and checks that the whole job ends within a
// bounded time with a message naming it (core/comm.h "Failure").
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/comm.h"
#include "core/log.h"

#ifdef TEST_COMM_DEVICE
#include <cuda_runtime_api.h>
#endif

enum { N = 1 << 16 };

int main(int argc, char **argv) {
  if (comm_init(&argc, &argv) || comm_groups_init()) {
    fprintf(stderr, "%s\n", err_msg());
    return 1;
  }
  log_set_rank(comm_rank(), comm_size());
  double seconds = argc > 1 ? atof(argv[1]) : 60;
  const comm_backend *cb = NULL;
  float *x = malloc(N * sizeof *x), *a = NULL, *b = NULL, *dx = NULL;
  a = malloc(N * sizeof *a), b = malloc(N * sizeof *b);
  tsr_status st;
#ifdef TEST_COMM_DEVICE
  int dev;
  cudaStream_t stream;
  if ((st = comm_bind_device(&dev)) || dev < 0) {
    printf("SKIP: no GPU visible\n");
    return 77;
  }
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  st = comm_open(argc > 2 ? argv[2] : "mpi", COMM_MEM_DEVICE, stream, &cb);
  float *da, *db;
  cudaMalloc((void **)&dx, N * sizeof *x);
  cudaMalloc((void **)&da, N * sizeof *x);
  cudaMalloc((void **)&db, N * sizeof *x);
#else
  st = comm_open("mpi", COMM_MEM_HOST, NULL, &cb);
  float *da = a, *db = b;
  dx = x;
#endif
  if (st) {
    log_error("%s", err_msg());
    comm_abort(1);
  }
  comm_group *g = comm_group_get(comm_size());
  const int me = comm_rank(), n = comm_size(), prev = (me + n - 1) % n;
  double t0 = time_now();
  for (int round = 0; time_now() - t0 < seconds; round++) {
    for (int i = 0; i < N; i++) x[i] = (float)(me + 1), a[i] = (float)(me * 1000 + round % 1000);
#ifdef TEST_COMM_DEVICE
    cudaMemcpyAsync(dx, x, N * sizeof *x, cudaMemcpyHostToDevice, stream);
    cudaMemcpyAsync(da, a, N * sizeof *x, cudaMemcpyHostToDevice, stream);
#endif
    comm_request *req = NULL;
    st = cb->ring_start(cb, g, da, db, N * (int64_t)sizeof *a, &req);
    if (!st) st = cb->allreduce_sum_f32(cb, g, dx, N);
    tsr_status w = cb->wait(cb, &req);
    if (!st) st = w;
#ifdef TEST_COMM_DEVICE
    cudaMemcpyAsync(x, dx, N * sizeof *x, cudaMemcpyDeviceToHost, stream);
    cudaMemcpyAsync(b, db, N * sizeof *x, cudaMemcpyDeviceToHost, stream);
    if (!st && cudaStreamSynchronize(stream) != cudaSuccess)
      st = err_set(TSR_ECOMM, "stream: %s", cudaGetErrorString(cudaGetLastError()));
#endif
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
  int rc = check_done();
  comm_finalize();
  return rc;
}
