// tests/comm/test_comm.c — the group set and the collectives of the communication backends,
// checked exactly (nccl-tests style): every rank fills buffers with values that are a known
// function of its world rank, so every result has a closed form. Integer-valued floats
// below 2^24 make float sums exact. Also the host logic of where ranks sit on a node and
// which GPU they take (comm_local_from_env, comm_device_of, comm_find_shared), and
// comm_open's errors. Every all-to-all of every backend adds the bytes the other members
// sent this one to comm_alltoall_received (the placed attention's metric).
//
//   test_comm            host memory, "mpi" (tests/comm/comm.sh: 1, 2, 4 ranks; 3 refused)
//   test_comm_gpu NAME   the same checks on device memory through comm_open(NAME): "mpi"
//                        (staged through pinned host memory) or "nccl" (label gpu,
//                        tests/comm/comm_gpu.sh; compiled with TEST_COMM_DEVICE)
// Every buffer a backend sees lives in its memory space; the checks read results back
// after the stream the backend orders on has finished (mem_get).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "check.h"
#include "comm/comm.h"

#ifdef TEST_COMM_DEVICE
#include <cuda_runtime_api.h>
static cudaStream_t stream;  // plays the compute backend's stream
static void *mem_alloc(size_t n) {
  void *p = NULL;
  return cudaMalloc(&p, n ? n : 1) == cudaSuccess ? p : NULL;
}
static void mem_free(void *p) { cudaFree(p); }
static void mem_put(void *dev, const void *host, size_t n) {
  cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, stream);
  cudaStreamSynchronize(stream);
}
static void mem_get(void *host, const void *dev, size_t n) {
  cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, stream);
  CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "stream: %s",
        cudaGetErrorString(cudaGetLastError()));
}
#else
static void *mem_alloc(size_t n) { return malloc(n ? n : 1); }
static void mem_free(void *p) { free(p); }
static void mem_put(void *dev, const void *host, size_t n) { memcpy(dev, host, n); }
static void mem_get(void *host, const void *dev, size_t n) { memcpy(host, dev, n); }
#endif

// All-to-all with uneven counts (zeros among them) and gaps between the slices: member src
// sends member dst a2a_count(src, dst) bytes, byte i = a2a_byte(src, dst, i). The result
// must have every slice in place, the gaps untouched, and equal MPI's own MPI_Alltoallv on
// the same host buffers.
static int64_t a2a_count(int src, int dst, int round) {
  return ((src * 7 + dst * 13 + round * 5) % 6) * 301 + (src == dst) * 3;
}
static unsigned char a2a_byte(int src, int dst, int64_t i) {
  return (unsigned char)(src * 31 + dst * 17 + i * 7 + 1);
}
enum { A2A_GAP = 5, A2A_MAX = 64 };

// MPI communicators over the same ranks as each group of the set (reference collectives),
// made once by every rank together: a rank outside a group shape's whole blocks takes part
// in the split without a color, so the group checks themselves need no world collective.
// [0][i]: the aligned groups of 2^i ranks (the world's at i = 31 when it is not a power of
// two); [1][i]: the stride groups of u = 2 inside blocks of 2^i.
static MPI_Comm ref_comms[2][32];

static void make_ref_comms(void) {
  const int n = comm_size(), me = comm_rank();
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < 32; i++) ref_comms[s][i] = MPI_COMM_NULL;
  if (n < 2) return;
  for (int i = 0; (1 << i) <= n; i++) {
    int k = 1 << i, member = me < n / k * k;
    MPI_Comm_split(MPI_COMM_WORLD, member ? me / k : MPI_UNDEFINED, me, &ref_comms[0][i]);
    if (k >= 4)
      MPI_Comm_split(MPI_COMM_WORLD, member ? me - me % k + me % 2 : MPI_UNDEFINED, me,
                     &ref_comms[1][i]);
  }
  if (n & (n - 1)) MPI_Comm_dup(MPI_COMM_WORLD, &ref_comms[0][31]);
}

static void free_ref_comms(void) {
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < 32; i++)
      if (ref_comms[s][i] != MPI_COMM_NULL) MPI_Comm_free(&ref_comms[s][i]);
}

static MPI_Comm ref_comm(const comm_group *g) {
  int block = comm_group_size(g) * comm_group_stride(g), i = 0;
  if (block & (block - 1)) return ref_comms[0][31];
  while ((1 << i) < block) i++;
  return ref_comms[comm_group_stride(g) > 1][i];
}

static void check_alltoallv(const comm_backend *cb, comm_group *g) {
  const int k = comm_group_size(g), stride = comm_group_stride(g);
  const int gr = comm_group_rank(g) * stride, first = comm_group_first(g);  // world offsets
  for (int round = 0; round < 3; round++) {
    int64_t sb[A2A_MAX], sd[A2A_MAX], rb[A2A_MAX], rd[A2A_MAX], stot = 0, rtot = 0;
    for (int j = 0; j < k; j++) {
      sb[j] = a2a_count(first + gr, first + j * stride, round), sd[j] = stot, stot += sb[j] + A2A_GAP;
      rb[j] = a2a_count(first + j * stride, first + gr, round), rd[j] = rtot, rtot += rb[j] + A2A_GAP;
    }
    unsigned char *hs = malloc((size_t)stot), *hr = malloc((size_t)rtot), *ref = malloc((size_t)rtot);
    memset(hs, 0xAB, (size_t)stot);
    for (int j = 0; j < k; j++)
      for (int64_t i = 0; i < sb[j]; i++) hs[sd[j] + i] = a2a_byte(first + gr, first + j * stride, i);
    memset(hr, 0xEE, (size_t)rtot);
    void *ds = mem_alloc((size_t)stot), *dr = mem_alloc((size_t)rtot);
    mem_put(ds, hs, (size_t)stot);
    mem_put(dr, hr, (size_t)rtot);
    int64_t before = comm_alltoall_received(), others = 0;
    CHECK_OK(cb->alltoallv(cb, g, ds, sb, sd, dr, rb, rd));
    for (int j = 0; j < k; j++) others += j == comm_group_rank(g) ? 0 : rb[j];
    CHECK(comm_alltoall_received() - before == others, "%s k=%d round %d: %lld bytes counted "
          "received, the others sent %lld", cb->name, k, round,
          (long long)(comm_alltoall_received() - before), (long long)others);
    mem_get(hr, dr, (size_t)rtot);
    int64_t bad = 0;
    for (int j = 0; j < k; j++) {
      for (int64_t i = 0; i < rb[j]; i++) bad += hr[rd[j] + i] != a2a_byte(first + j * stride, first + gr, i);
      for (int64_t i = 0; i < A2A_GAP; i++) bad += hr[rd[j] + rb[j] + i] != 0xEE;
    }
    CHECK(bad == 0, "%s k=%d round %d: %lld all-to-all bytes wrong", cb->name, k, round,
          (long long)bad);
    if (comm_size() > 1) {  // MPI's own, on host copies of the same buffers
      MPI_Comm c = ref_comm(g);
      int isb[A2A_MAX], isd[A2A_MAX], irb[A2A_MAX], ird[A2A_MAX];
      for (int j = 0; j < k; j++)
        isb[j] = (int)sb[j], isd[j] = (int)sd[j], irb[j] = (int)rb[j], ird[j] = (int)rd[j];
      memset(ref, 0xEE, (size_t)rtot);
      MPI_Alltoallv(hs, isb, isd, MPI_BYTE, ref, irb, ird, MPI_BYTE, c);
      CHECK(memcmp(ref, hr, (size_t)rtot) == 0, "%s k=%d round %d: differs from MPI_Alltoallv",
            cb->name, k, round);
    }
    mem_free(ds), mem_free(dr), free(hs), free(hr), free(ref);
  }
}

// The non-blocking all-to-all: two exchanges in flight at once (started in order, tested,
// waited for in the other order) on random uneven counts (a quarter of them zero; the same
// draws on every rank), each slice against the closed form and against MPI_Alltoallv on
// host copies of the same buffers. Receive slices are placed in reverse member order with
// gaps, which must stay untouched.
static void check_ialltoallv(const comm_backend *cb, comm_group *g) {
  const int k = comm_group_size(g), stride = comm_group_stride(g), gi = comm_group_rank(g);
  const int gr = gi * stride, first = comm_group_first(g);
  uint64_t x = 0x2545F4914F6CDD1Dull;  // xorshift64, the same sequence on every rank
#define NEXT(s) ((s) ^= (s) << 13, (s) ^= (s) >> 7, (s) ^= (s) << 17, (s))
  for (int trial = 0; trial < 3; trial++) {
    int64_t cnt[2][A2A_MAX][A2A_MAX];  // [exchange][src][dst] bytes, group indices
    for (int e = 0; e < 2; e++)
      for (int a = 0; a < k; a++)
        for (int b = 0; b < k; b++) {
          uint64_t r = NEXT(x);
          cnt[e][a][b] = r % 4 == 0 ? 0 : (int64_t)(r >> 8) % 3001;
        }
    int64_t sb[2][A2A_MAX], sd[2][A2A_MAX], rb[2][A2A_MAX], rd[2][A2A_MAX], stot[2], rtot[2];
    unsigned char *hs[2], *hr[2], *ref[2];
    void *ds[2], *dr[2];
    comm_request *rq[2] = {NULL, NULL};
    int64_t before = comm_alltoall_received(), others = 0;
    for (int e = 0; e < 2; e++) {
      stot[e] = rtot[e] = 0;
      for (int j = 0; j < k; j++) sb[e][j] = cnt[e][gi][j], sd[e][j] = stot[e], stot[e] += sb[e][j];
      for (int j = k - 1; j >= 0; j--)
        rb[e][j] = cnt[e][j][gi], rd[e][j] = rtot[e], rtot[e] += rb[e][j] + A2A_GAP;
      hs[e] = malloc((size_t)stot[e] + 1), hr[e] = malloc((size_t)rtot[e] + 1);
      ref[e] = malloc((size_t)rtot[e] + 1);
      for (int j = 0; j < k; j++)
        for (int64_t i = 0; i < sb[e][j]; i++)
          hs[e][sd[e][j] + i] = a2a_byte(first + gr, first + j * stride, i + 11 * e + trial);
      memset(hr[e], 0xEE, (size_t)rtot[e]);
      ds[e] = mem_alloc((size_t)stot[e]), dr[e] = mem_alloc((size_t)rtot[e]);
      mem_put(ds[e], hs[e], (size_t)stot[e]);
      mem_put(dr[e], hr[e], (size_t)rtot[e]);
      CHECK_OK(cb->ialltoallv(cb, g, ds[e], sb[e], sd[e], dr[e], rb[e], rd[e], &rq[e]));
      CHECK(rq[e] != NULL, "%s k=%d: ialltoallv gives a request", cb->name, k);
      for (int j = 0; j < k; j++) others += j == gi ? 0 : rb[e][j];
    }
    CHECK(comm_alltoall_received() - before == others, "%s k=%d trial %d: %lld bytes counted "
          "received by two all-to-alls, the others sent %lld", cb->name, k, trial,
          (long long)(comm_alltoall_received() - before), (long long)others);
    int done = 0;
    CHECK_OK(cb->test(cb, rq[0], &done));
    for (int e = 1; e >= 0; e--) CHECK_OK(cb->wait(cb, &rq[e]));
    for (int e = 0; e < 2; e++) {
      mem_get(hr[e], dr[e], (size_t)rtot[e]);
      int64_t bad = 0;
      for (int j = 0; j < k; j++) {
        for (int64_t i = 0; i < rb[e][j]; i++)
          bad += hr[e][rd[e][j] + i] != a2a_byte(first + j * stride, first + gr, i + 11 * e + trial);
        for (int64_t i = 0; i < A2A_GAP; i++) bad += hr[e][rd[e][j] + rb[e][j] + i] != 0xEE;
      }
      CHECK(bad == 0 && !rq[e], "%s k=%d trial %d exchange %d: %lld non-blocking all-to-all bytes "
            "wrong", cb->name, k, trial, e, (long long)bad);
      if (comm_size() > 1) {  // MPI's own on the host copies
        MPI_Comm c = ref_comm(g);
        int isb[A2A_MAX], isd[A2A_MAX], irb[A2A_MAX], ird[A2A_MAX];
        for (int j = 0; j < k; j++)
          isb[j] = (int)sb[e][j], isd[j] = (int)sd[e][j], irb[j] = (int)rb[e][j], ird[j] = (int)rd[e][j];
        memset(ref[e], 0xEE, (size_t)rtot[e]);
        MPI_Alltoallv(hs[e], isb, isd, MPI_BYTE, ref[e], irb, ird, MPI_BYTE, c);
          CHECK(memcmp(ref[e], hr[e], (size_t)rtot[e]) == 0,
              "%s k=%d trial %d exchange %d: non-blocking all-to-all differs from MPI_Alltoallv",
              cb->name, k, trial, e);
      }
      mem_free(ds[e]), mem_free(dr[e]), free(hs[e]), free(hr[e]), free(ref[e]);
    }
  }
#undef NEXT
}

// Every collective of cb over group g, exactly; member j of g is world rank first + j * stride
// (an aligned group, or a stride group of hybrid CP).
static void check_collectives(const comm_backend *cb, comm_group *g) {
  const int k = comm_group_size(g), me = comm_rank(), gr = comm_group_rank(g);
  const int first = comm_group_first(g), stride = comm_group_stride(g);
  int64_t members_sum = 0;  // sum of (world rank + 1) over the group's members
  for (int j = 0; j < k; j++) members_sum += first + j * stride + 1;

  // all-reduce, float and double: x[i] = (rank + 1) * (i + 1)
  enum { N = 1003 };
  float xf[N], *dx = mem_alloc(sizeof xf);
  double xd[N];
  for (int i = 0; i < N; i++) xf[i] = (float)((me + 1) * (i + 1)), xd[i] = (me + 1) * (i + 1.0);
  mem_put(dx, xf, sizeof xf);
  CHECK_OK(cb->allreduce_sum_f32(cb, g, dx, N));
  mem_get(xf, dx, sizeof xf);
  if (k == comm_size() && stride == 1) CHECK_OK(comm_allreduce_sum_f64(xd, N));  // world, host
  else for (int i = 0; i < N; i++) xd[i] = (double)xf[i];
  int bad = 0;
  for (int i = 0; i < N; i++)
    bad += xf[i] != (float)(members_sum * (i + 1)) || xd[i] != (double)(members_sum * (i + 1));
  CHECK(bad == 0, "%s k=%d: %d all-reduce values differ from (i+1)*%lld", cb->name, k, bad,
        (long long)members_sum);

  // non-blocking all-reduce of two buckets started in order, tested, then waited
  for (int i = 0; i < N; i++) xf[i] = (float)((me + 1) * (i + 1));
  mem_put(dx, xf, sizeof xf);
  comm_request *r1 = NULL, *r2 = NULL;
  CHECK_OK(cb->iallreduce_sum_f32(cb, g, dx, N / 2, &r1));
  CHECK_OK(cb->iallreduce_sum_f32(cb, g, dx + N / 2, N - N / 2, &r2));
  int done = 0;
  CHECK_OK(cb->test(cb, r2, &done));
  CHECK_OK(cb->wait(cb, &r1));
  CHECK_OK(cb->wait(cb, &r2));
  mem_get(xf, dx, sizeof xf);
  bad = 0;
  for (int i = 0; i < N; i++) bad += xf[i] != (float)(members_sum * (i + 1));
  CHECK(bad == 0 && !r1 && !r2, "%s k=%d: %d non-blocking all-reduce values wrong", cb->name, k, bad);
  mem_free(dx);

  // all-gather: member j contributes 7 * its world rank
  int64_t mine = 7LL * me, all[64];
  void *dmine = mem_alloc(sizeof mine), *dall = mem_alloc(sizeof all);
  mem_put(dmine, &mine, sizeof mine);
  CHECK_OK(cb->allgather(cb, g, dmine, dall, sizeof mine));
  mem_get(all, dall, (size_t)k * sizeof mine);
  bad = 0;
  for (int j = 0; j < k; j++) bad += all[j] != 7LL * (first + j * stride);
  CHECK(bad == 0, "%s k=%d: all-gather", cb->name, k);

  // reduce-scatter: member j's send slice s holds (world rank + 1) * (s * n + i + 1), so
  // this member's recv[i] = members_sum * (gr * n + i + 1); sizes 0, 1 and an odd one
  const int64_t sizes[3] = {0, 1, 517};
  for (int z = 0; z < 3; z++) {
    int64_t n = sizes[z];
    float *hs = malloc(((size_t)k * n + 1) * sizeof *hs), *hr = malloc(((size_t)n + 1) * sizeof *hr);
    float *ds = mem_alloc((size_t)k * n * sizeof *hs), *dr = mem_alloc((size_t)n * sizeof *hr);
    for (int64_t i = 0; i < (int64_t)k * n; i++) hs[i] = (float)((me + 1) * (i + 1));
    mem_put(ds, hs, (size_t)k * n * sizeof *hs);
    CHECK_OK(cb->reduce_scatter_sum_f32(cb, g, ds, dr, n));
    mem_get(hr, dr, (size_t)n * sizeof *hr);
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += hr[i] != (float)(members_sum * (gr * n + i + 1));
    CHECK(bad == 0, "%s k=%d n=%lld: %d reduce-scatter values differ", cb->name, k, (long long)n, bad);
    mem_free(ds), mem_free(dr), free(hs), free(hr);
  }

  check_alltoallv(cb, g);
  check_ialltoallv(cb, g);
  // the non-blocking reduce-scatter (ZeRO-2's buckets): the same closed form, two in flight
  {
    enum { NR = 333 };
    float *hs = malloc((size_t)k * NR * sizeof *hs), hr[2][NR];
    float *ds = mem_alloc((size_t)k * NR * sizeof *hs), *dr[2] = {mem_alloc(sizeof hr[0]),
                                                                  mem_alloc(sizeof hr[1])};
    for (int64_t i = 0; i < (int64_t)k * NR; i++) hs[i] = (float)((me + 1) * (i + 1));
    mem_put(ds, hs, (size_t)k * NR * sizeof *hs);
    comm_request *rq[2] = {NULL, NULL};
    for (int q = 0; q < 2; q++) CHECK_OK(cb->ireduce_scatter_sum_f32(cb, g, ds, dr[q], NR, &rq[q]));
    for (int q = 1; q >= 0; q--) CHECK_OK(cb->wait(cb, &rq[q]));
    bad = 0;
    for (int q = 0; q < 2; q++) {
      mem_get(hr[q], dr[q], sizeof hr[q]);
      for (int64_t i = 0; i < NR; i++) bad += hr[q][i] != (float)(members_sum * (gr * NR + i + 1));
    }
    CHECK(bad == 0, "%s k=%d: %d non-blocking reduce-scatter values differ", cb->name, k, bad);
    mem_free(ds), mem_free(dr[0]), mem_free(dr[1]), free(hs);
  }
  // the non-blocking all-gather (ZeRO-3's prefetched blocks): two in flight, waited for in
  // reverse order; member j contributes (world rank + 1) * (i + 1) + q
  {
    enum { NG = 129 };
    float hm[2][NG], *ha = malloc((size_t)k * NG * sizeof *ha);
    float *dm[2] = {mem_alloc(sizeof hm[0]), mem_alloc(sizeof hm[1])};
    float *da[2] = {mem_alloc((size_t)k * NG * sizeof *ha), mem_alloc((size_t)k * NG * sizeof *ha)};
    comm_request *rq[2] = {NULL, NULL};
    for (int q = 0; q < 2; q++) {
      for (int i = 0; i < NG; i++) hm[q][i] = (float)((me + 1) * (i + 1) + q);
      mem_put(dm[q], hm[q], sizeof hm[q]);
      CHECK_OK(cb->iallgather(cb, g, dm[q], da[q], sizeof hm[q], &rq[q]));
    }
    for (int q = 1; q >= 0; q--) CHECK_OK(cb->wait(cb, &rq[q]));
    bad = 0;
    for (int q = 0; q < 2; q++) {
      mem_get(ha, da[q], (size_t)k * NG * sizeof *ha);
      for (int j = 0; j < k; j++)
        for (int i = 0; i < NG; i++)
          bad += ha[j * NG + i] != (float)((first + j * stride + 1) * (i + 1) + q);
    }
    CHECK(bad == 0 && !rq[0] && !rq[1], "%s k=%d: %d non-blocking all-gather values differ",
          cb->name, k, bad);
    for (int q = 0; q < 2; q++) mem_free(dm[q]), mem_free(da[q]);
    free(ha);
  }

  // broadcast from the last member
  int64_t b = 1000 + me;
  mem_put(dmine, &b, sizeof b);
  CHECK_OK(cb->bcast(cb, g, dmine, sizeof b, k - 1));
  mem_get(&b, dmine, sizeof b);
  CHECK(b == 1000 + first + (k - 1) * stride, "%s k=%d: broadcast got %lld", cb->name, k,
        (long long)b);
  mem_free(dmine);
  mem_free(dall);

  // ring: pass a block around k-1 times, as ring attention passes K/V; every member's
  // block must visit every other member exactly once, in ring order. A group of one
  // exchanges once with itself (recv = send). Two exchanges are in flight together at
  // each step, as K/V and dK/dV are in the backward: each must bring its own block.
  enum { R = 4099 };
  int32_t *h = malloc(R * sizeof *h);
  int32_t *cur = mem_alloc(R * sizeof *h), *next = mem_alloc(R * sizeof *h);
  int32_t *cur2 = mem_alloc(R * sizeof *h), *next2 = mem_alloc(R * sizeof *h);
  for (int i = 0; i < R; i++) h[i] = me * 100000 + i;
  mem_put(cur, h, R * sizeof *h);
  for (int i = 0; i < R; i++) h[i] = -(me * 100000 + i);
  mem_put(cur2, h, R * sizeof *h);
  for (int step = 1; step < (k > 1 ? k : 2); step++) {
    comm_request *req = NULL, *req2 = NULL;
    CHECK_OK(cb->ring_start(cb, g, cur, next, R * (int64_t)sizeof *h, &req));
    CHECK_OK(cb->ring_start(cb, g, cur2, next2, R * (int64_t)sizeof *h, &req2));
    CHECK(req != NULL && req2 != NULL, "%s k=%d: ring_start gives a request", cb->name, k);
    CHECK_OK(cb->wait(cb, &req2));  // in the other order than started
    CHECK_OK(cb->wait(cb, &req));
    int owner = k > 1 ? first + (gr - step + k) % k * stride : me;  // whose block arrives now
    mem_get(h, next, R * sizeof *h);
    bad = 0;
    for (int i = 0; i < R; i++) bad += h[i] != owner * 100000 + i;
    mem_get(h, next2, R * sizeof *h);
    for (int i = 0; i < R; i++) bad += h[i] != -(owner * 100000 + i);
    CHECK(bad == 0, "%s k=%d: ring step %d should bring rank %d's blocks", cb->name, k, step, owner);
    int32_t *t = cur;
    cur = next, next = t;
    t = cur2, cur2 = next2, next2 = t;
  }
  mem_free(cur), mem_free(next), mem_free(cur2), mem_free(next2);
  free(h);
  CHECK_OK(cb->barrier(cb, g));
}

// A rank beyond the last whole block of k ranks (a world that is not a power of two) is in
// no group of size k; the others' groups are checked among their members only.
static void check_group(const comm_backend *cb, int k) {
  comm_group *g = comm_group_get(k);
  const int me = comm_rank(), world = comm_size();
  if (me >= world / k * k) {
    CHECK(g == NULL, "rank %d beyond the last whole block of %d is in no such group", me, k);
    return;
  }
  CHECK(g != NULL, "group of size %d exists", k);
  if (!g) return;
  const int gr = comm_group_rank(g), first = comm_group_first(g);
  CHECK(comm_group_size(g) == k && first == me - me % k && gr == me % k &&
            comm_group_stride(g) == 1,
        "k=%d: size %d first %d rank %d", k, comm_group_size(g), first, gr);
  check_collectives(cb, g);
}

// The stride groups of hybrid CP with u = 2: inside the aligned group of k, the k/2 ranks of
// this rank's parity, in block order.
static void check_stride_group(const comm_backend *cb, int k) {
  comm_group *g = comm_stride_group(k);
  const int me = comm_rank();
  if (me >= comm_size() / k * k) {
    CHECK(g == NULL, "rank %d beyond the last whole block of %d has no stride group there", me, k);
    return;
  }
  CHECK(g != NULL, "stride group in the group of %d exists", k);
  if (!g) return;
  CHECK(comm_group_size(g) == k / 2 && comm_group_stride(g) == 2 &&
            comm_group_first(g) == me - me % k + me % 2 && comm_group_rank(g) == (me % k) / 2,
        "stride group k=%d: size %d first %d rank %d", k, comm_group_size(g), comm_group_first(g),
        comm_group_rank(g));
  check_collectives(cb, g);
}

// ---- host logic of ranks on a node -------------------------------------------------------

typedef struct { const char *kv[8][2]; } env_table;
static const char *env_get(const char *name, void *ctx) {
  env_table *t = ctx;
  for (int i = 0; i < 8 && t->kv[i][0]; i++)
    if (!strcmp(t->kv[i][0], name)) return t->kv[i][1];
  return NULL;
}

// The world group's all-gather and reduce-scatter (blocking and not) against MPI's own
// collectives (MPI_Allgather, MPI_Reduce_scatter_block over MPI_COMM_WORLD) on random values
// and random sizes (the same draws on every rank). The all-gather bitwise; the sums of values
// in [-0.5, 0.5) within world x 2^-23 absolute: MPI itself sums in another order in its
// blocking and non-blocking algorithms (measured: some 40% of the values differ in the last
// bit at 4 ranks), and so may NCCL.
static void check_against_mpi(const comm_backend *cb) {
  const int world = comm_size(), me = comm_rank();
  comm_group *g = comm_group_get(world);
  if (world < 2 || !g) return;  // MPI is not initialised without a launcher
  const float tol = (float)world * 0x1p-23f;
  uint64_t x = 88172645463325252ull;  // xorshift64: sizes, the same on every rank
  uint64_t v = 0x9E3779B97F4A7C15ull * (uint64_t)(me + 1);  // values, this rank's own
#define NEXT(s) ((s) ^= (s) << 13, (s) ^= (s) >> 7, (s) ^= (s) << 17, (s))
  for (int trial = 0; trial < 6; trial++) {
    int64_t n = (int64_t)(NEXT(x) % 5000) + (trial == 0 ? 0 : 1);  // 0 once, up to 5000
    size_t all = (size_t)world * (size_t)n;
    float *hs = malloc((all + 1) * sizeof *hs), *want = malloc((all + 1) * sizeof *hs);
    float *got = malloc((all + 1) * sizeof *hs);
    float *ds = mem_alloc(all * sizeof *hs), *dr = mem_alloc(all * sizeof *hs);
    for (size_t i = 0; i < all; i++) hs[i] = (float)((double)(NEXT(v) >> 11) / 9007199254740992.0 - 0.5);
    mem_put(ds, hs, all * sizeof *hs);
    // reduce-scatter, blocking then not
    for (int nb = 0; nb < 2; nb++) {
      MPI_Reduce_scatter_block(hs, want, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (nb) {
        comm_request *rq = NULL;
        CHECK_OK(cb->ireduce_scatter_sum_f32(cb, g, ds, dr, n, &rq));
        CHECK_OK(cb->wait(cb, &rq));
      } else {
        CHECK_OK(cb->reduce_scatter_sum_f32(cb, g, ds, dr, n));
      }
      mem_get(got, dr, (size_t)n * sizeof *got);
      int bad = 0;
      for (int64_t i = 0; i < n; i++)
        bad += !(fabsf(got[i] - want[i]) <= tol);
      CHECK(bad == 0, "%s: %sreduce-scatter of %lld values a rank: %d differ from MPI's", cb->name,
            nb ? "non-blocking " : "", (long long)n, bad);
    }
    // all-gather of this rank's first n values
    MPI_Allgather(hs, (int)n, MPI_FLOAT, want, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    for (int nb = 0; nb < 2; nb++) {
      if (nb) {
        comm_request *rq = NULL;
        CHECK_OK(cb->iallgather(cb, g, ds, dr, n * (int64_t)sizeof(float), &rq));
        CHECK_OK(cb->wait(cb, &rq));
      } else {
        CHECK_OK(cb->allgather(cb, g, ds, dr, n * (int64_t)sizeof(float)));
      }
      mem_get(got, dr, all * sizeof *got);
      CHECK(all == 0 || !memcmp(got, want, all * sizeof *got),
            "%s: %sall-gather of %lld values a rank differs from MPI's", cb->name,
            nb ? "non-blocking " : "", (long long)n);
    }
    mem_free(ds), mem_free(dr), free(hs), free(want), free(got);
  }
#undef NEXT
}

static void check_local_logic(void) {
  struct {
    env_table env;
    int ok, rank, size;
  } cases[] = {
      {{{{"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}}}, 1, 3, 8},
      {{{{"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}}}, 1, 1, 2},
      // Slurm: node 2 of "4(x2),3" has 3 tasks
      {{{{"SLURM_LOCALID", "2"}, {"SLURM_NODEID", "2"}, {"SLURM_TASKS_PER_NODE", "4(x2),3"}}}, 1, 2, 3},
      {{{{"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "1"}, {"SLURM_TASKS_PER_NODE", "4(x2),3"}}}, 1, 0, 4},
      // the step's list wins over the job's
      {{{{"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "0"}, {"SLURM_TASKS_PER_NODE", "8"},
         {"SLURM_STEP_TASKS_PER_NODE", "2"}}}, 1, 1, 2},
      // not enough, or nonsense: fall back (0)
      {{{{"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "3"}, {"SLURM_TASKS_PER_NODE", "4(x2),3"}}}, 0, 0, 0},
      {{{{"SLURM_LOCALID", "1"}}}, 0, 0, 0},
      {{{{"OMPI_COMM_WORLD_LOCAL_RANK", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}}, 0, 0, 0},
      {{{{"OMPI_COMM_WORLD_LOCAL_RANK", "x"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}}, 0, 0, 0},
      {{{{"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"}, {"SLURM_TASKS_PER_NODE", "2(x"}}}, 0, 0, 0},
      {{{{NULL, NULL}}}, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int r = -1, n = -1;
    int ok = comm_local_from_env(env_get, &cases[i].env, &r, &n);
    CHECK(ok == cases[i].ok && (!ok || (r == cases[i].rank && n == cases[i].size)),
          "env case %zu: got %d (%d of %d), want %d (%d of %d)", i, ok, r, n, cases[i].ok,
          cases[i].rank, cases[i].size);
  }
  // GPUs: round-robin over the visible ones; one visible (a GPU per task) is device 0
  CHECK(comm_device_of(0, 8) == 0 && comm_device_of(7, 8) == 7 && comm_device_of(5, 4) == 1 &&
            comm_device_of(3, 1) == 0 && comm_device_of(2, 0) == -1,
        "comm_device_of");
  uint64_t keys[] = {11, 12, 13, 12, 11};
  int a = -1, b = -1;
  CHECK(comm_find_shared(keys, 5, &a, &b) && a == 0 && b == 4, "shared: %d %d", a, b);
  CHECK(!comm_find_shared(keys, 3, &a, &b), "no shared GPU among distinct keys");
}

// Where comm_init put this rank: the launcher's word, which must agree with the ranks that
// share this node's memory.
static void check_local_place(void) {
  int r = comm_local_rank(), n = comm_local_size();
  if (comm_size() == 1) {
    CHECK(r == 0 && n == 1, "world of one: local %d of %d", r, n);
    return;
  }
  MPI_Comm node;
  int sr = -1, sn = -1;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, comm_rank(), MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &sr);
  MPI_Comm_size(node, &sn);
  MPI_Comm_free(&node);
  const char *env = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  CHECK(r == sr && n == sn && (!env || atoi(env) == r),
        "rank %d: local %d of %d, the node's shared-memory split says %d of %d, the launcher %s",
        comm_rank(), r, n, sr, sn, env ? env : "-");
  CHECK(comm_local_cores() >= 1, "cores per rank");
}

// Waits are unbounded unless a run bounds them; TESSERA_COMM_TIMEOUT, when given, wins.
static void check_timeout_policy(void) {
  const char *env = getenv("TESSERA_COMM_TIMEOUT");
  double t0 = comm_timeout();
  comm_bound_waits(5);
  double t1 = comm_timeout();
  comm_bound_waits(0);
  if (!env)
    CHECK(t0 == 0 && t1 == 5 && comm_timeout() == 0, "timeouts %g %g %g", t0, t1, comm_timeout());
  else
    CHECK(t0 == atof(env) && t1 == t0 && comm_timeout() == t0, "env timeout %s: %g %g", env, t0, t1);
}

static void check_open_errors(void) {
  const comm_backend *cb = NULL;
  tsr_status st = comm_open("bogus", COMM_MEM_HOST, NULL, &cb);
  CHECK(st == TSR_EINVAL && strstr(err_msg(), "bogus") && strstr(err_msg(), "mpi") && !cb,
        "unknown name refused, naming what is built: %s", err_msg());
  st = comm_open("nccl", COMM_MEM_HOST, NULL, &cb);
  CHECK(st == TSR_EINVAL && strstr(err_msg(), "device memory") && !cb,
        "nccl on host memory refused: %s", err_msg());
  CHECK_OK(comm_open("auto", COMM_MEM_HOST, NULL, &cb));
  CHECK(cb == comm_mpi(), "auto on host memory is mpi");
  comm_close(&cb);
  CHECK(cb == NULL, "closed");
}

int main(int argc, char **argv) {
  if (comm_init(&argc, &argv)) {
    fprintf(stderr, "%s\n", err_msg());
    return 1;
  }
  int world = comm_size();
  CHECK_OK(comm_groups_init());
  make_ref_comms();
  CHECK((world == 3 || comm_group_get(3) == NULL) && comm_group_get(2 * world) == NULL,
        "no odd group but the world, no oversized group");
  check_local_place();
  check_local_logic();
  check_open_errors();
  check_timeout_policy();
  CHECK_OK(comm_stride_groups_init(2));  // before comm_open: NCCL makes their communicators
  CHECK(comm_stride_groups_init(4) == (world > 2 ? TSR_EINVAL : TSR_OK), "another u refused");
  CHECK(comm_stride_group(2) == NULL && (world < 4 || comm_stride_u() == 2), "no stride group of 2");
  const comm_backend *cb = NULL;
#ifdef TEST_COMM_DEVICE
  const char *name = argc > 1 ? argv[1] : "mpi";
  int dev = -1;
  CHECK_OK(comm_bind_device(&dev));
  if (dev < 0) {
    printf("SKIP: no GPU visible\n");
    comm_finalize();
    return 77;
  }
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "stream");
  tsr_status st = comm_open(name, COMM_MEM_DEVICE, stream, &cb);
  CHECK(st == TSR_OK, "comm_open(%s) on device memory: %s", name, err_msg());
  if (!st && comm_rank() == 0)
    printf("%s on device memory, %d rank(s), GPU %d of local rank %d\n", cb->name, world, dev,
           comm_local_rank());
#else
  CHECK_OK(comm_open("mpi", COMM_MEM_HOST, NULL, &cb));
#endif
  if (cb)
    for (int k = 1; k <= world; k *= 2) check_group(cb, k);
  if (cb && (world & (world - 1))) check_group(cb, world);  // the world's own group
  for (int k = 4; cb && k <= world; k *= 2) check_stride_group(cb, k);
  if (cb) check_against_mpi(cb);
  comm_close(&cb);
  int64_t failed = check_failed;  // any rank's failure fails every rank
  CHECK_OK(comm_allreduce_sum_i64(&failed, 1));
  int rc = check_done() || failed ? 1 : 0;
  free_ref_comms();
  comm_finalize();
  return rc;
}
