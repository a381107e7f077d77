// The group set and the collectives of every communication backend (today "mpi"),
// checked exactly (nccl-tests style): every rank fills
// buffers with values that are a known function of its world rank, so every result has
// a closed form. Run with and without mpirun (tests/core/comm.sh: 1, 2 and 4 ranks; 3
// ranks must be refused). Integer-valued floats below 2^24 make float sums exact.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/comm.h"

static void check_group(const comm_backend *cb, int k) {
  comm_group *g = comm_group_get(k);
  CHECK(g != NULL, "group of size %d exists", k);
  if (!g) return;
  const int me = comm_rank(), gr = comm_group_rank(g), first = comm_group_first(g);
  CHECK(comm_group_size(g) == k && first == me - me % k && gr == me % k,
        "k=%d: size %d first %d rank %d", k, comm_group_size(g), first, gr);
  int64_t members_sum = 0;  // sum of (world rank + 1) over the group's members
  for (int j = 0; j < k; j++) members_sum += first + j + 1;

  // all-reduce, float and double: x[i] = (rank + 1) * (i + 1)
  enum { N = 1003 };
  float xf[N];
  double xd[N];
  for (int i = 0; i < N; i++) xf[i] = (float)((me + 1) * (i + 1)), xd[i] = (me + 1) * (i + 1.0);
  CHECK_OK(cb->allreduce_sum_f32(cb, g, xf, N));
  if (k == comm_size()) CHECK_OK(comm_allreduce_sum_f64(xd, N));  // world level, host
  else for (int i = 0; i < N; i++) xd[i] = (double)xf[i];
  int bad = 0;
  for (int i = 0; i < N; i++)
    bad += xf[i] != (float)(members_sum * (i + 1)) || xd[i] != (double)(members_sum * (i + 1));
  CHECK(bad == 0, "k=%d: %d all-reduce values differ from (i+1)*%lld", k, bad,
        (long long)members_sum);

  // non-blocking all-reduce of two buckets started in order, tested, then waited
  for (int i = 0; i < N; i++) xf[i] = (float)((me + 1) * (i + 1));
  comm_request *r1 = NULL, *r2 = NULL;
  CHECK_OK(cb->iallreduce_sum_f32(cb, g, xf, N / 2, &r1));
  CHECK_OK(cb->iallreduce_sum_f32(cb, g, xf + N / 2, N - N / 2, &r2));
  int done = 0;
  CHECK_OK(cb->test(cb, r2, &done));
  CHECK_OK(cb->wait(cb, &r1));
  CHECK_OK(cb->wait(cb, &r2));
  bad = 0;
  for (int i = 0; i < N; i++) bad += xf[i] != (float)(members_sum * (i + 1));
  CHECK(bad == 0 && !r1 && !r2, "k=%d: %d non-blocking all-reduce values wrong", k, bad);

  // all-gather: member j contributes 7 * its world rank
  int64_t mine = 7LL * me, all[64];
  CHECK_OK(cb->allgather(cb, g, &mine, all, sizeof mine));
  bad = 0;
  for (int j = 0; j < k; j++) bad += all[j] != 7LL * (first + j);
  CHECK(bad == 0, "k=%d: all-gather", k);

  // broadcast from the last member
  int64_t b = 1000 + me;
  CHECK_OK(cb->bcast(cb, g, &b, sizeof b, k - 1));
  CHECK(b == 1000 + first + k - 1, "k=%d: broadcast got %lld", k, (long long)b);

  // ring: pass a block around k-1 times, as ring attention passes K/V; every member's
  // block must visit every other member exactly once, in ring order.
  enum { R = 4099 };
  int32_t *cur = malloc(R * sizeof *cur), *next = malloc(R * sizeof *next);
  for (int i = 0; i < R; i++) cur[i] = me * 100000 + i;
  for (int step = 1; step < k; step++) {
    comm_request *req = NULL;
    CHECK_OK(cb->ring_start(cb, g, cur, next, R * (int64_t)sizeof *cur, &req));
    CHECK(req != NULL, "k=%d: ring_start gives a request", k);
    CHECK_OK(cb->wait(cb, &req));
    int owner = first + (gr - step + k) % k;  // whose block arrives at this step
    bad = 0;
    for (int i = 0; i < R; i++) bad += next[i] != owner * 100000 + i;
    CHECK(bad == 0, "k=%d: ring step %d should bring rank %d's block", k, step, owner);
    int32_t *t = cur;
    cur = next;
    next = t;
  }
  free(cur);
  free(next);
  CHECK_OK(cb->barrier(cb, g));
}

int main(int argc, char **argv) {
  if (comm_init(&argc, &argv)) {
    fprintf(stderr, "%s\n", err_msg());
    return 1;
  }
  int world = comm_size();
  tsr_status st = comm_groups_init();
  if (world & (world - 1)) {  // not a power of two: refused with a clear message
    CHECK(st == TSR_EINVAL && strstr(err_msg(), "power of two"), "world %d refused: %s", world,
          err_msg());
    int rc = check_done();
    comm_finalize();
    return rc;
  }
  CHECK_OK(st);
  CHECK(comm_group_get(3) == NULL && comm_group_get(2 * world) == NULL, "no odd or oversized group");
  const comm_backend *backends[] = {comm_mpi()};
  for (size_t b = 0; b < sizeof backends / sizeof backends[0]; b++) {
    for (int k = 1; k <= world; k *= 2) check_group(backends[b], k);
  }
  int64_t failed = check_failed;
  CHECK_OK(comm_allreduce_sum_i64(&failed, 1));
  int rc = check_done();
  comm_finalize();
  return rc;
}
