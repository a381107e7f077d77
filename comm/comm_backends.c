// comm/comm_backends.c — the one list of the communication backends built into this
// binary, chosen by name (comm_open, comm/comm.h), and the binding of ranks to GPUs. The
// device backends join under their build flags, like kernels/backends.c: the staged MPI
// backend with CUDA (TESSERA_HAVE_CUDA), NCCL with NCCL (TESSERA_HAVE_NCCL).
#include <string.h>

#include "comm/comm.h"
#include "comm/comm_internal.h"

#ifdef TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <unistd.h>

#include "core/hash.h"
#endif

const char *comm_backends_built(void) {
#ifdef TESSERA_HAVE_NCCL
  return "mpi, nccl, auto";
#else
  return "mpi, auto";
#endif
}

#ifdef TESSERA_HAVE_CUDA
tsr_status comm_cuda_check(int e, const char *backend, const char *what) {
  if (e == cudaSuccess) return TSR_OK;
  cudaGetLastError();  // clears it: the next call must not report it again
  return err_set(e == cudaErrorMemoryAllocation ? TSR_ENOMEM : TSR_ECOMM, "%s: %s: %s", backend,
                 what, cudaGetErrorString((cudaError_t)e));
}

tsr_status comm_device_key(uint64_t *key) {
  int d = -1;
  char host[256] = "", bus[64] = "";
  cudaError_t e = cudaGetDevice(&d);
  if (e == cudaSuccess) e = cudaDeviceGetPCIBusId(bus, (int)sizeof bus, d);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return err_set(TSR_ECOMM, "rank %d: the PCI bus id of its GPU: %s", comm_rank(),
                   cudaGetErrorString(e));
  }
  gethostname(host, sizeof host - 1);
  uint64_t h = hash_fnv1a(HASH_FNV1A_INIT, host, strlen(host) + 1);
  *key = hash_fnv1a(h, bus, strlen(bus));
  return TSR_OK;
}
#endif

#ifdef TESSERA_HAVE_NCCL
// 1 when no two ranks of the world share a GPU (NCCL's condition); *a, *b the first two
// that do otherwise. Collective.
static tsr_status gpus_exclusive(int *exclusive, int *a, int *b) {
  uint64_t key = 0;
  tsr_status st = comm_device_key(&key);
  if (st) return st;
  int n = comm_size();
  uint64_t keys[n];
  memset(keys, 0, sizeof keys);
  keys[comm_rank()] = key;
  // every rank fills its slot: a sum is an all-gather of distinct slots
  st = comm_allreduce_sum_i64((int64_t *)keys, n);
  if (st) return st;
  *exclusive = !comm_find_shared(keys, n, a, b);
  return TSR_OK;
}
#endif

tsr_status comm_open(const char *name, comm_mem mem, void *stream, const comm_backend **out) {
  *out = NULL;
  if (!comm_group_get(1))
    return err_set(TSR_EINVAL, "--comm %s: the group set is not made yet (comm_groups_init)", name);
  int want_nccl = !strcmp(name, "nccl"), is_auto = !strcmp(name, "auto");
  if (!want_nccl && !is_auto && strcmp(name, "mpi"))
    return err_set(TSR_EINVAL, "--comm %s: not a communication backend of this tessera (built: %s)",
                   name, comm_backends_built());
  if (mem == COMM_MEM_HOST) {
    if (want_nccl)
      return err_set(TSR_EINVAL, "--comm nccl: NCCL moves device memory, but the compute backend "
                     "works on host memory (the CPU): use --comm mpi (or auto) with --backend "
                     "cpu, or --backend cuda with --comm nccl");
    *out = comm_mpi();
    return TSR_OK;
  }
#ifndef TESSERA_HAVE_CUDA
  (void)stream;
  return err_set(TSR_EINVAL, "--comm %s: the compute backend works on device memory but this "
                 "tessera has no device communication (built without CUDA)", name);
#else
#ifdef TESSERA_HAVE_NCCL
  // a world of one has nothing to send: auto skips NCCL's set-up (every entry of the
  // staged backend is then a local copy or nothing)
  if (want_nccl || (is_auto && comm_size() > 1)) {
    int excl = 1, a = -1, b = -1;
    tsr_status st = gpus_exclusive(&excl, &a, &b);
    if (st) return err_wrap(st, "--comm %s: ", name);
    if (excl) return comm_nccl_open(stream, out);
    if (want_nccl)
      return err_set(TSR_EINVAL, "--comm nccl: ranks %d and %d share a GPU, which NCCL refuses: "
                     "launch at most one rank per GPU, or use --comm mpi (device buffers staged "
                     "through host memory)", a, b);
  }
#else
  if (want_nccl)
    return err_set(TSR_EINVAL, "--comm nccl: this tessera was built without NCCL (built: %s); "
                   "install NCCL (or point -DTESSERA_NVIDIA_PIP at a pip nvidia/ tree with "
                   "nccl/) and rebuild, or use --comm mpi", comm_backends_built());
#endif
  return comm_staged_open(stream, out);
#endif
}

void comm_close(const comm_backend **pcb) {
  const comm_backend *cb = *pcb;
  *pcb = NULL;
  if (!cb || cb == comm_mpi()) return;
#ifdef TESSERA_HAVE_NCCL
  if (!strcmp(cb->name, "nccl")) {
    comm_nccl_close(cb);
    return;
  }
#endif
#ifdef TESSERA_HAVE_CUDA
  if (!strcmp(cb->name, "mpi-staged")) comm_staged_close(cb);
#endif
}

tsr_status comm_bind_device(int *device) {
  *device = -1;
#ifdef TESSERA_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
    cudaGetLastError();  // no GPU: a CPU run; the compute backend reports it if it wanted one
    return TSR_OK;
  }
  int d = comm_device_of(comm_local_rank(), n);
  cudaError_t e = cudaSetDevice(d);
  if (e != cudaSuccess)
    return err_set(TSR_ECOMM, "rank %d (local rank %d of %d): cudaSetDevice(%d) of %d visible "
                   "GPUs: %s", comm_rank(), comm_local_rank(), comm_local_size(), d, n,
                   cudaGetErrorString(e));
  *device = d;
#endif
  return TSR_OK;
}
