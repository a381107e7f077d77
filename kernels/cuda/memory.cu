// kernels/cuda/memory.cu — the CUDA backend's memory: the run's one device allocation
// (the arena, kernels/arena.h keeps its books) and the entries on it (alloc, free, reserve,
// memory_stats, the reduction scratch kcu_scratch), the copies (to_device with pinned
// staging of pageable uploads, to_host, copy, memset_zero), sync and mem_info. kernels.h
// `alloc` states the sizing rule; kernels/cuda/cuda.h the synchronisation of each entry.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unordered_map>

#include "kernels/check.h"
#include "kernels/cuda/kcu.h"

// ---- memory: one arena per run ---------------------------------------------------------
enum : size_t {
  ARENA_ALIGN = 256,                 // cuBLASLt's preferred alignment; kernels.h promises 64
  LT_WS_BYTES = (size_t)32 << 20,    // cuBLASLt's recommended workspace on Hopper
  ARENA_MIN = (size_t)64 << 20,      // below this the default sizing gives up
};

// The ranks that share this device (kernels_arena_sharers): this node's MPI rank count,
// as the launcher gives it (OpenMPI's OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS,
// Slurm's SLURM_NTASKS_PER_NODE), over the visible devices; `from` names the variable
// (NULL: none is set, one rank), for the messages that name the sharing.
struct kcu_sharing {
  int local, devices, sharers;
  const char *from;
};

static kcu_sharing device_sharing(void) {
  const char *names[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"};
  kcu_sharing s = {1, 1, 1, NULL};
  for (int i = 0; i < 3; i++) {
    const char *v = getenv(names[i]);
    if (v && atoi(v) > 0) {
      s.local = atoi(v);
      s.from = names[i];
      break;
    }
  }
  // Clearing a failure here hides nothing: the backend's setup counted the devices, so a
  // failure now is a sticky error, which every later call of the runtime returns again.
  if (cudaGetDeviceCount(&s.devices) != cudaSuccess || s.devices < 1) {
    cudaGetLastError();
    s.devices = 1;
  }
  s.sharers = kernels_arena_sharers(s.local, s.devices);
  return s;
}

struct kcu_sizes {
  std::unordered_map<void *, size_t> of;
};

// A failed cudaMalloc of `bytes` for `what`: TSR_ENOMEM with `advice` when the device is
// out of memory; any other error (a sticky one left by an earlier kernel, a lost device) is
// TSR_EIO and says so, since no other size would help then. Clears the runtime's last error
// so that the next entry's launch check does not report it again.
static tsr_status malloc_fail(const char *op, const char *what, size_t bytes, cudaError_t e,
                              const char *advice) {
  cudaGetLastError();
  if (e == cudaErrorMemoryAllocation)
    return err_set(TSR_ENOMEM, "%s: cudaMalloc of %s, %zu bytes: %s; %s", op, what, bytes,
                   cudaGetErrorString(e), advice);
  return err_set(TSR_EIO, "%s: cudaMalloc of %s, %zu bytes: %s (%s): the device is not out of "
                 "memory but unusable (an earlier kernel's fault or a driver error); check "
                 "nvidia-smi and the kernel log (Xid errors) and rerun", op, what, bytes,
                 cudaGetErrorString(e), cudaGetErrorName(e));
}

// TESSERA_CUDA_ARENA=none: no arena, one cudaMalloc per allocation (compute-sanitizer's
// memcheck sees an overrun only at the edge of an allocation; never for a training run).
// The mode is set only once its cuBLASLt workspace exists: a failed attempt leaves the
// backend without an arena (the next allocation tries again) rather than in a mode whose
// GEMMs would be handed a NULL workspace.
static tsr_status per_alloc_mode(kb_t *kb, const char *op) {
  kcu_ctx *x = kcu(kb);
  void *ws = NULL;
  cudaError_t e = cudaMalloc(&ws, LT_WS_BYTES);
  if (e != cudaSuccess)
    return malloc_fail(op, "the cuBLASLt workspace (TESSERA_CUDA_ARENA=none)", LT_WS_BYTES, e,
                       "free device memory");
  x->lt_ws = ws;
  x->lt_ws_bytes = LT_WS_BYTES;
  x->pa_sizes = new kcu_sizes();
  x->per_alloc = 1;
  return TSR_OK;
}

// The default size of the arena (kernels_arena_default_size for this rank's share of the
// device), with how it was sized in `how` for the later messages; TSR_ENOMEM naming the
// sharing when that leaves too little.
static tsr_status arena_default_size(const char *op, size_t free_b, size_t total_b, size_t *out,
                                     char *how, size_t how_n) {
  kcu_sharing sh = device_sharing();
  char sharing[160] = "";
  if (sh.sharers > 1)
    snprintf(sharing, sizeof sharing, ", shared by %d ranks: %d ranks on %d GPU%s (%s=%d)",
             sh.sharers, sh.local, sh.devices, sh.devices > 1 ? "s" : "", sh.from, sh.local);
  size_t headroom = kernels_arena_headroom(total_b);
  *out = kernels_arena_default_size(free_b, total_b, sh.sharers);
  snprintf(how, how_n, "the default: %zu bytes free of %zu%s, less %zu bytes for this rank's "
           "CUDA libraries", free_b, total_b, sharing, headroom);
  if (*out < ARENA_MIN)
    return err_set(TSR_ENOMEM, "%s: too little device memory for the CUDA memory arena (%s); "
                   "free the GPU%s, or set TESSERA_CUDA_ARENA", op, how,
                   sh.sharers > 1 ? ", run fewer ranks per GPU" : "");
  return TSR_OK;
}

// Makes the arena of `bytes` (0: TESSERA_CUDA_ARENA, else arena_default_size) and carves the
// cuBLASLt workspace from it.
static tsr_status arena_create(kb_t *kb, const char *op, size_t bytes) {
  kcu_ctx *x = kcu(kb);
  size_t free_b = 0, total_b = 0;
  KCU_CUDA(op, cudaMemGetInfo(&free_b, &total_b));
  const char *env = getenv("TESSERA_CUDA_ARENA");
  char how[384] = "asked for";
  if (bytes == 0 && env && !strcmp(env, "none")) return per_alloc_mode(kb, op);
  if (bytes == 0 && env && *env) {
    if (!(bytes = kernels_arena_parse_size(env, free_b)))
      return err_set(TSR_EINVAL, "%s: TESSERA_CUDA_ARENA=%s is not a size (bytes with an "
                     "optional K/M/G/T suffix, e.g. 60G, or a percentage of free memory, e.g. "
                     "80%%)", op, env);
    snprintf(how, sizeof how, "set by TESSERA_CUDA_ARENA; %zu bytes free of %zu", free_b, total_b);
  } else if (bytes == 0) {
    tsr_status st = arena_default_size(op, free_b, total_b, &bytes, how, sizeof how);
    if (st) return st;
  }
  if (bytes < LT_WS_BYTES + ARENA_ALIGN)
    return err_set(TSR_EINVAL, "%s: a CUDA memory arena of %zu bytes (%s) cannot hold the "
                   "%zu-byte cuBLASLt workspace; give it more", op, bytes, how, (size_t)LT_WS_BYTES);
  void *base = NULL;
  cudaError_t e = cudaMalloc(&base, bytes);
  if (e != cudaSuccess) {
    char what[480];
    snprintf(what, sizeof what, "the CUDA memory arena (%s)", how);
    return malloc_fail(op, what, bytes, e, "set TESSERA_CUDA_ARENA lower");
  }
  kernels_arena *a = NULL;
  size_t ws = 0;
  tsr_status st = kernels_arena_create(&a, bytes, ARENA_ALIGN);
  if (!st) st = kernels_arena_alloc(a, LT_WS_BYTES, &ws);
  if (st) {
    kernels_arena_destroy(a);
    cudaFree(base);
    return err_wrap(st, "%s: CUDA memory arena: ", op);
  }
  x->arena_base = (char *)base;
  x->arena = a;
  x->lt_ws = x->arena_base + ws;
  x->lt_ws_bytes = LT_WS_BYTES;
  return TSR_OK;
}

tsr_status kcu_arena_ready(kb_t *kb, const char *op) {
  return kcu(kb)->arena || kcu(kb)->per_alloc ? TSR_OK : arena_create(kb, op, 0);
}

// A range of `bytes` of the arena, or TSR_ENOMEM saying how big the arena is and how to
// raise it.
static tsr_status arena_take(kb_t *kb, const char *op, size_t bytes, void **out) {
  tsr_status st = kcu_arena_ready(kb, op);
  if (st) return st;
  kcu_ctx *x = kcu(kb);
  if (x->per_alloc) {
    size_t r = bytes ? (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN : ARENA_ALIGN;
    cudaError_t e = cudaMalloc(out, r);
    if (e != cudaSuccess)
      return malloc_fail(op, "an allocation (TESSERA_CUDA_ARENA=none)", bytes, e,
                         "free device memory or leave TESSERA_CUDA_ARENA=none off");
    x->pa_sizes->of[*out] = r;
    x->pa_in_use += r;
    if (x->pa_in_use > x->pa_peak) x->pa_peak = x->pa_in_use;
    return TSR_OK;
  }
  size_t off;
  if ((st = kernels_arena_alloc(x->arena, bytes, &off))) {
    char why[512];
    snprintf(why, sizeof why, "%s", err_msg());
    return err_set(TSR_ENOMEM, "%s: out of CUDA memory: %s; the arena is sized once per run: "
                   "set TESSERA_CUDA_ARENA (e.g. TESSERA_CUDA_ARENA=90%%, or bytes such as 70G) "
                   "or lower train.mem_tokens", op, why);
  }
  *out = x->arena_base + off;
  return TSR_OK;
}

static void arena_give(kb_t *kb, void *p) {
  kcu_ctx *x = kcu(kb);
  if (p && x->per_alloc) {
    auto it = x->pa_sizes->of.find(p);
    if (it == x->pa_sizes->of.end()) return;  // not ours: ignored
    x->pa_in_use -= it->second;
    x->pa_sizes->of.erase(it);
    cudaFree(p);  // synchronises the device: fine in this debugging mode
    return;
  }
  if (!p || !x->arena) return;
  char *c = (char *)p;
  kernels_arena_stats s = kernels_arena_get_stats(x->arena);
  if (c < x->arena_base || c >= x->arena_base + s.capacity) return;  // not ours: ignored
  kernels_arena_free(x->arena, (size_t)(c - x->arena_base));
}

tsr_status kcu_scratch(kb_t *kb, const char *op, size_t bytes, void **out) {
  kcu_ctx *x = kcu(kb);
  if (bytes > x->scratch_bytes) {
    // While a graph is recorded the recorded work has the old range's address: growing
    // would free it under the graph. The eager runs before a recording size the scratch.
    if (x->capturing)
      return err_set(TSR_EINVAL, "%s: the scratch buffer (%zu bytes) would grow to %zu bytes "
                     "while a graph is recorded", op, x->scratch_bytes, bytes);
    size_t nb = bytes + bytes / 2 + 4096;
    // The old range may still be read by queued kernels: whatever reuses it is queued after
    // them on the same stream (alloc's zero fill too), so it is given back at once.
    arena_give(kb, x->scratch);
    x->scratch = NULL;
    x->scratch_bytes = 0;
    tsr_status st = arena_take(kb, op, nb, &x->scratch);
    if (st) return st;
    x->scratch_bytes = nb;
  }
  *out = x->scratch;
  return TSR_OK;
}

tsr_status kcu_own_upload(kb_t *kb, const char *op, const void *host, size_t bytes, void **out) {
  KCU_NOT_RECORDING(kb, op);
  tsr_status st = arena_take(kb, op, bytes, out);
  if (st) return st;
  cudaStream_t s = kcu(kb)->stream;
  cudaError_t e = cudaMemcpyAsync(*out, host, bytes, cudaMemcpyHostToDevice, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);  // host may be freed on return
  if (e != cudaSuccess) {
    arena_give(kb, *out);
    *out = NULL;
    return kcu_cuda_fail(op, "cudaMemcpyAsync", e);
  }
  return TSR_OK;
}

void kcu_own_free(kb_t *kb, void *p) { arena_give(kb, p); }

tsr_status kcu_alloc(kb_t *kb, void **ptr, size_t bytes) {
  tsr_status st = kernels_check_alloc(ptr, bytes);
  if (st) return st;
  KCU_NOT_RECORDING(kb, "alloc");
  void *p = NULL;
  st = arena_take(kb, "alloc", bytes, &p);
  if (st) return st;
  const size_t al = ARENA_ALIGN;
  size_t rounded = bytes ? (bytes + al - 1) / al * al : al;
  // Zero-filled, visible to every stream (NCCL's too) when alloc returns: alloc is not
  // called inside a step.
  cudaError_t e;
  if ((e = cudaMemsetAsync(p, 0, rounded, kcu(kb)->stream)) != cudaSuccess ||
      (e = cudaStreamSynchronize(kcu(kb)->stream)) != cudaSuccess) {
    arena_give(kb, p);
    return kcu_cuda_fail("alloc", "cudaMemsetAsync", e);
  }
  *ptr = p;
  return TSR_OK;
}

void kcu_free(kb_t *kb, void *ptr) { arena_give(kb, ptr); }

tsr_status kcu_reserve(kb_t *kb, size_t bytes) {
  KCU_NOT_RECORDING(kb, "reserve");
  kcu_ctx *x = kcu(kb);
  if (x->per_alloc) return TSR_OK;  // TESSERA_CUDA_ARENA=none: nothing to size
  const char *env = getenv("TESSERA_CUDA_ARENA");  // the user's size wins over the caller's
  if (!x->arena) return arena_create(kb, "reserve", env && *env ? 0 : bytes);
  size_t cap = kernels_arena_get_stats(x->arena).capacity;
  if (bytes == 0 || bytes == cap) return TSR_OK;
  return err_set(TSR_EINVAL, "reserve: the CUDA memory arena already exists with %zu bytes "
                 "(made by an earlier alloc or reserve); reserve before allocating", cap);
}

tsr_status kcu_memory_stats(kb_t *kb, size_t *in_use, size_t *peak, size_t *capacity) {
  kcu_ctx *x = kcu(kb);
  kernels_arena_stats s = {};
  if (x->arena) s = kernels_arena_get_stats(x->arena);
  if (x->per_alloc) s.in_use = x->pa_in_use, s.peak = x->pa_peak;
  if (in_use) *in_use = s.in_use;
  if (peak) *peak = s.peak;
  if (capacity) *capacity = s.capacity;
  return TSR_OK;
}

// Pinned (page-locked or registered) host memory: an async copy returns before the copy
// is done, so to_device then waits, keeping kernels.h's "src may be reused on return".
static int host_is_pinned(const void *p) {
  cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return a.type == cudaMemoryTypeHost;
}

// Uploads from pageable memory through pinned staging. cudaMemcpyAsync from pageable memory
// first waits for the stream to drain (the runtime stages the bytes itself), so every upload
// of a microbatch's inputs (objective_device_build) held the host until the GPU had finished
// the work queued before: no launch of the next microbatch could overlap it. Here the bytes
// are copied into one of two pinned halves of KCU_STAGE_HALF (so the caller may reuse src at
// once, as kernels.h promises) and the DMA is queued; a half is refilled only after the event
// recorded after its last DMA. *done = 0 (nothing queued) for uploads larger than a half, or
// when staging is off (TESSERA_CUDA_STAGING=0) or its pinned memory could not be had: the
// runtime's path then runs as before.
#define KCU_STAGE_HALF ((size_t)128 << 20)
static tsr_status stage_upload(kb_t *kb, void *dst, const void *src, size_t bytes, int *done) {
  kcu_ctx *x = kcu(kb);
  *done = 0;
  if (bytes > KCU_STAGE_HALF || x->stage_state < 0) return TSR_OK;
  if (x->stage_state == 0) {
    const char *env = getenv("TESSERA_CUDA_STAGING");
    x->stage_state = -1;
    if (env && !strcmp(env, "0")) return TSR_OK;
    if (cudaHostAlloc((void **)&x->stage, 2 * KCU_STAGE_HALF, cudaHostAllocDefault) != cudaSuccess ||
        cudaEventCreateWithFlags(&x->stage_ev[0], cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&x->stage_ev[1], cudaEventDisableTiming) != cudaSuccess) {
      cudaGetLastError();  // no pinned memory: the runtime's path, as without staging
      return TSR_OK;
    }
    x->stage_state = 1;
  }
  if (x->stage_off + bytes > KCU_STAGE_HALF) {  // the other half, once its copies are done
    x->stage_cur ^= 1;
    x->stage_off = 0;
    if (x->stage_pending[x->stage_cur])
      KCU_CUDA("to_device", cudaEventSynchronize(x->stage_ev[x->stage_cur]));
    x->stage_pending[x->stage_cur] = 0;
  }
  char *p = x->stage + (size_t)x->stage_cur * KCU_STAGE_HALF + x->stage_off;
  memcpy(p, src, bytes);
  KCU_CUDA("to_device", cudaMemcpyAsync(dst, p, bytes, cudaMemcpyHostToDevice, x->stream));
  KCU_CUDA("to_device", cudaEventRecord(x->stage_ev[x->stage_cur], x->stream));
  x->stage_pending[x->stage_cur] = 1;
  x->stage_off += (bytes + 255) / 256 * 256;
  *done = 1;
  return TSR_OK;
}

tsr_status kcu_to_device(kb_t *kb, void *dst, const void *src_host, size_t bytes) {
  tsr_status st = kernels_check_to_device(dst, src_host, bytes);
  if (st || bytes == 0) return st;
  KCU_NOT_RECORDING(kb, "to_device");
  int pinned = host_is_pinned(src_host), done = 0;
  if (!pinned) {
    st = stage_upload(kb, dst, src_host, bytes, &done);
    if (st || done) return st;
  }
  cudaStream_t s = kcu(kb)->stream;
  KCU_CUDA("to_device", cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, s));
  if (pinned) KCU_CUDA("to_device", cudaStreamSynchronize(s));
  return TSR_OK;
}

tsr_status kcu_to_host(kb_t *kb, void *dst_host, const void *src, size_t bytes) {
  tsr_status st = kernels_check_to_host(dst_host, src, bytes);
  if (st || bytes == 0) return st;
  KCU_NOT_RECORDING(kb, "to_host");
  cudaStream_t s = kcu(kb)->stream;
  KCU_CUDA("to_host", cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, s));
  KCU_CUDA("to_host", cudaStreamSynchronize(s));
  return TSR_OK;
}

tsr_status kcu_copy(kb_t *kb, void *dst, const void *src, size_t bytes) {
  tsr_status st = kernels_check_copy(dst, src, bytes);
  if (st || bytes == 0) return st;
  KCU_CUDA("copy", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, kcu(kb)->stream));
  return TSR_OK;
}

tsr_status kcu_copy_2d(kb_t *kb, void *dst, size_t dst_pitch, const void *src,
                             size_t src_pitch, size_t row_bytes, size_t rows) {
  tsr_status st = kernels_check_copy_2d(dst, dst_pitch, src, src_pitch, row_bytes, rows);
  if (st || row_bytes == 0 || rows == 0) return st;
  KCU_CUDA("copy_2d", cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows,
                                        cudaMemcpyDeviceToDevice, kcu(kb)->stream));
  return TSR_OK;
}

tsr_status kcu_memset_zero(kb_t *kb, void *ptr, size_t bytes) {
  tsr_status st = kernels_check_memset_zero(ptr, bytes);
  if (st || bytes == 0) return st;
  KCU_CUDA("memset_zero", cudaMemsetAsync(ptr, 0, bytes, kcu(kb)->stream));
  return TSR_OK;
}

tsr_status kcu_sync(kb_t *kb) {
  KCU_NOT_RECORDING(kb, "sync");
  return kcu_check_error(kb, "sync");
}

tsr_status kcu_mem_info(kb_t *kb, size_t *free_bytes, size_t *total_bytes) {
  TSR_TRY(kernels_check_mem_info(free_bytes, total_bytes));
  cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
  if (e != cudaSuccess)
    return err_set(TSR_EIO, "mem_info: cudaMemGetInfo: %s", cudaGetErrorString(e));
  return TSR_OK;
}
