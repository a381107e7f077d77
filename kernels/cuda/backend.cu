// kernels/cuda/backend.cu — the CUDA backend's context, memory entries, the function
// table, and every entry but the GEMMs (gemm.cu) and attention (attention.cu): cast,
// elementwise helpers, norms, adaLN, RoPE, activations, conditioning, objective, loss,
// optimizer. Math: exactly the CPU backend's (kernels/cpu/*.c), in fp32 with double where
// the CPU uses double; [act] tensors are bf16, rounded once on store (RNE).
//
// Determinism: no float atomics anywhere. Every reduction sums fixed slices in a fixed
// order (kcu_colsum, sumsq, mse) or belongs to one warp with a fixed shuffle tree (norm
// rows, attention_delta), so results are bitwise reproducible on the same GPU model for
// the same inputs (and launch configuration, which depends only on the shapes).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unordered_map>

#include "kernels/cuda/kcu.h"

extern "C" {
#include "kernels/cuda/cuda.h"
}

// ---- errors ----------------------------------------------------------------------------
tsr_status kcu_cuda_fail(const char *op, const char *call, cudaError_t e) {
  return err_set(e == cudaErrorMemoryAllocation ? TSR_ENOMEM : TSR_EIO, "%s: %s: %s (%s)", op,
                 call, cudaGetErrorString(e), cudaGetErrorName(e));
}

tsr_status kcu_lt_fail(const char *op, const char *call, cublasStatus_t s) {
  return err_set(s == CUBLAS_STATUS_ALLOC_FAILED ? TSR_ENOMEM : TSR_EIO, "%s: %s: cuBLASLt %s (%d)",
                 op, call, cublasLtGetStatusString(s), (int)s);
}

static const char *const kcu_entry_names[KCU_E_COUNT] = {
    "?", "modulate_forward", "modulate_backward", "gate_residual_forward",
    "gate_residual_backward", "embedding_forward", "embedding_backward", "attention_forward",
    "attention_backward", "objective_inputs", "mse_forward", "mse_backward",
    "adamw_update_multi", "layernorm_modulate_forward", "layernorm_modulate_backward"};

// Reads and clears the device error word, after everything queued before (waits for the
// stream). Both the read and the reset are queued on the backend's stream, which every
// kernel that writes the word runs on: the legacy default stream (plain cudaMemcpy,
// cudaMemset) does not order against a non-blocking stream, and cudaMemset of device
// memory returns before it is done, so a reset there could land after the next entry's
// kernel had reported into the word and erase that report.
static tsr_status kcu_check_error(kb_t *kb, const char *op) {
  kcu_ctx *x = kcu(kb);
  kcu_dev_error e;
  KCU_CUDA(op, cudaMemcpyAsync(&e, x->err, sizeof e, cudaMemcpyDeviceToHost, x->stream));
  KCU_CUDA(op, cudaStreamSynchronize(x->stream));
  if (e.code == KCU_BAD_NONE) return TSR_OK;
  KCU_CUDA(op, cudaMemsetAsync(x->err, 0, sizeof e, x->stream));
  const char *entry = e.entry > 0 && e.entry < KCU_E_COUNT ? kcu_entry_names[e.entry] : "?";
  if (e.code == KCU_BAD_CU)
    return err_set(TSR_EINVAL, "%s: an earlier %s got bad cu_seqlens (entry %lld = %lld: must "
                   "start at 0, not decrease and end at the token count)", op, entry, e.where,
                   e.value);
  if (e.code == KCU_BAD_IDS)
    return err_set(TSR_EINVAL, "%s: an earlier %s got an index out of range (element %lld = %lld)",
                   op, entry, e.where, e.value);
  if (e.code == KCU_BAD_SEGS)
    return err_set(TSR_EINVAL, "%s: an earlier %s got a bad segment table (segment %lld, offset "
                   "%lld: out of order, overlapping, outside the buffers or a decay flag other "
                   "than 0/1)", op, entry, e.where, e.value);
  return err_set(TSR_EINVAL, "%s: an earlier %s reported error code %d", op, entry, e.code);
}

__global__ void k_check_cu(kcu_dev_error *err, int entry, const int32_t *cu, int n_clips, int L) {
  for (int c = threadIdx.x; c <= n_clips; c += blockDim.x) {
    int v = cu[c];
    int bad = (c == 0 && v != 0) || (c == n_clips && v != L) || (c > 0 && v < cu[c - 1]);
    if (bad) kcu_report(err, KCU_BAD_CU, entry, v, c);
  }
}

tsr_status kcu_check_cu(kb_t *kb, const char *op, int entry, const int32_t *cu, int n_clips, int L) {
  if (n_clips < 0) return err_set(TSR_EINVAL, "%s: n_clips = %d is negative", op, n_clips);
  if (!cu) return err_set(TSR_EINVAL, "%s: cu_seqlens is NULL", op);
  if (n_clips == 0 && L > 0)
    return err_set(TSR_EINVAL, "%s: %d tokens but no clips", op, L);
  k_check_cu<<<1, 256, 0, kcu(kb)->stream>>>(kcu(kb)->err, entry, cu, n_clips, L);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

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

static tsr_status cu_alloc(kb_t *kb, void **ptr, size_t bytes) {
  if (!ptr) return err_set(TSR_EINVAL, "alloc: ptr is NULL");
  KCU_NOT_RECORDING(kb, "alloc");
  void *p = NULL;
  tsr_status st = arena_take(kb, "alloc", bytes, &p);
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

static void cu_free(kb_t *kb, void *ptr) { arena_give(kb, ptr); }

static tsr_status cu_reserve(kb_t *kb, size_t bytes) {
  KCU_NOT_RECORDING(kb, "reserve");
  kcu_ctx *x = kcu(kb);
  if (x->per_alloc) return TSR_OK;  // TESSERA_CUDA_ARENA=none: nothing to size
  if (!x->arena) return arena_create(kb, "reserve", bytes);
  size_t cap = kernels_arena_get_stats(x->arena).capacity;
  if (bytes == 0 || bytes == cap) return TSR_OK;
  return err_set(TSR_EINVAL, "reserve: the CUDA memory arena already exists with %zu bytes "
                 "(made by an earlier alloc or reserve); reserve before allocating", cap);
}

static tsr_status cu_memory_stats(kb_t *kb, size_t *in_use, size_t *peak, size_t *capacity) {
  kcu_ctx *x = kcu(kb);
  kernels_arena_stats s = {};
  if (x->arena) s = kernels_arena_get_stats(x->arena);
  if (x->per_alloc) s.in_use = x->pa_in_use, s.peak = x->pa_peak;
  if (in_use) *in_use = s.in_use;
  if (peak) *peak = s.peak;
  if (capacity) *capacity = s.capacity;
  return TSR_OK;
}

static tsr_status cu_path_stats(kb_t *kb, kernels_path_stats *out) {
  if (!out) return err_set(TSR_EINVAL, "path_stats: out is NULL");
  *out = kcu(kb)->paths;
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

static tsr_status cu_to_device(kb_t *kb, void *dst, const void *src_host, size_t bytes) {
  if (bytes == 0) return TSR_OK;
  KCU_NOT_RECORDING(kb, "to_device");
  KCU_NEED("to_device", dst);
  KCU_NEED("to_device", src_host);
  int pinned = host_is_pinned(src_host), done = 0;
  if (!pinned) {
    tsr_status st = stage_upload(kb, dst, src_host, bytes, &done);
    if (st || done) return st;
  }
  cudaStream_t s = kcu(kb)->stream;
  KCU_CUDA("to_device", cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, s));
  if (pinned) KCU_CUDA("to_device", cudaStreamSynchronize(s));
  return TSR_OK;
}

static tsr_status cu_to_host(kb_t *kb, void *dst_host, const void *src, size_t bytes) {
  if (bytes == 0) return TSR_OK;
  KCU_NOT_RECORDING(kb, "to_host");
  KCU_NEED("to_host", dst_host);
  KCU_NEED("to_host", src);
  cudaStream_t s = kcu(kb)->stream;
  KCU_CUDA("to_host", cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, s));
  KCU_CUDA("to_host", cudaStreamSynchronize(s));
  return TSR_OK;
}

static tsr_status cu_copy(kb_t *kb, void *dst, const void *src, size_t bytes) {
  if (bytes == 0) return TSR_OK;
  KCU_NEED("copy", dst);
  KCU_NEED("copy", src);
  KCU_CUDA("copy", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, kcu(kb)->stream));
  return TSR_OK;
}

static tsr_status cu_memset_zero(kb_t *kb, void *ptr, size_t bytes) {
  if (bytes == 0) return TSR_OK;
  KCU_NEED("memset_zero", ptr);
  KCU_CUDA("memset_zero", cudaMemsetAsync(ptr, 0, bytes, kcu(kb)->stream));
  return TSR_OK;
}

static tsr_status cu_sync(kb_t *kb) {
  KCU_NOT_RECORDING(kb, "sync");
  return kcu_check_error(kb, "sync");
}

static tsr_status cu_mem_info(kb_t *kb, size_t *free_bytes, size_t *total_bytes) {
  cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
  if (e != cudaSuccess)
    return err_set(TSR_EIO, "mem_info: cudaMemGetInfo: %s", cudaGetErrorString(e));
  return TSR_OK;
}

// ---- elementwise ---------------------------------------------------------------------------
#define GRID_STRIDE(i, n) \
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)
#define LAUNCH(op, kernel, n, ...)                                                        \
  do {                                                                                    \
    kernel<<<kcu_blocks((n), 256), 256, 0, kcu(kb)->stream>>>(__VA_ARGS__);               \
    KCU_LAUNCHED(op);                                                                     \
  } while (0)

__global__ void k_f32_to_bf16(act_t *d, const float *s, size_t n) { GRID_STRIDE(i, n) kcu_st(d, i, s[i]); }
__global__ void k_bf16_to_f32(float *d, const act_t *s, size_t n) { GRID_STRIDE(i, n) d[i] = kcu_ld(s, i); }

static tsr_status cu_cast(kb_t *kb, void *dst, kernels_dtype dst_dtype, const void *src,
                          kernels_dtype src_dtype, size_t n) {
  if (!kernels_dtype_size(dst_dtype) || !kernels_dtype_size(src_dtype))
    return err_set(TSR_EINVAL, "cast: unknown dtype (dst %d, src %d)", (int)dst_dtype, (int)src_dtype);
  if (n == 0) return TSR_OK;
  KCU_NEED("cast", dst);
  KCU_NEED("cast", src);
  if (dst_dtype == src_dtype)
    KCU_CUDA("cast", cudaMemcpyAsync(dst, src, n * kernels_dtype_size(dst_dtype),
                                     cudaMemcpyDeviceToDevice, kcu(kb)->stream));
  else if (dst_dtype == KERNELS_BF16)
    LAUNCH("cast", k_f32_to_bf16, n, (act_t *)dst, (const float *)src, n);
  else
    LAUNCH("cast", k_bf16_to_f32, n, (float *)dst, (const act_t *)src, n);
  return TSR_OK;
}

__global__ void k_fill(float *x, float v, size_t n) { GRID_STRIDE(i, n) x[i] = v; }
__global__ void k_scale(float *x, float a, size_t n) { GRID_STRIDE(i, n) x[i] *= a; }
__global__ void k_add(float *o, const float *a, const float *b, size_t n) { GRID_STRIDE(i, n) o[i] = a[i] + b[i]; }
__global__ void k_axpy(float *y, float a, const float *x, size_t n) { GRID_STRIDE(i, n) y[i] += a * x[i]; }
__global__ void k_add_act(act_t *o, const act_t *a, const act_t *b, size_t n) {
  GRID_STRIDE(i, n) kcu_st(o, i, kcu_ld(a, i) + kcu_ld(b, i));
}
__global__ void k_axpy_act(act_t *y, float a, const act_t *x, size_t n) {
  GRID_STRIDE(i, n) kcu_st(y, i, kcu_ld(y, i) + a * kcu_ld(x, i));
}
__global__ void k_scale_act(act_t *y, float a, size_t n) { GRID_STRIDE(i, n) kcu_st(y, i, a * kcu_ld(y, i)); }
__global__ void k_u8_affine(act_t *o, const uint8_t *in, float a, float b, size_t n) {
  GRID_STRIDE(i, n) kcu_st(o, i, a * (float)in[i] + b);
}

static tsr_status cu_fill(kb_t *kb, float *x, float value, size_t n) {
  if (!n) return TSR_OK;
  KCU_NEED("fill", x);
  LAUNCH("fill", k_fill, n, x, value, n);
  return TSR_OK;
}
static tsr_status cu_scale(kb_t *kb, float *x, float alpha, size_t n) {
  if (!n) return TSR_OK;
  KCU_NEED("scale", x);
  LAUNCH("scale", k_scale, n, x, alpha, n);
  return TSR_OK;
}
static tsr_status cu_add(kb_t *kb, float *out, const float *a, const float *b, size_t n) {
  if (!n) return TSR_OK;
  KCU_NEED("add", out);
  KCU_NEED("add", a);
  KCU_NEED("add", b);
  LAUNCH("add", k_add, n, out, a, b, n);
  return TSR_OK;
}
static tsr_status cu_axpy(kb_t *kb, float *y, float alpha, const float *x, size_t n) {
  if (!n) return TSR_OK;
  KCU_NEED("axpy", y);
  KCU_NEED("axpy", x);
  LAUNCH("axpy", k_axpy, n, y, alpha, x, n);
  return TSR_OK;
}
static tsr_status cu_add_act(kb_t *kb, void *out, const void *a, const void *b, size_t n) {
  if (!n) return TSR_OK;
  KCU_NEED("add_act", out);
  KCU_NEED("add_act", a);
  KCU_NEED("add_act", b);
  LAUNCH("add_act", k_add_act, n, (act_t *)out, (const act_t *)a, (const act_t *)b, n);
  return TSR_OK;
}
static tsr_status cu_axpy_act(kb_t *kb, void *y, float alpha, const void *x, size_t n) {
  if (!n) return TSR_OK;
  KCU_NEED("axpy_act", y);
  KCU_NEED("axpy_act", x);
  LAUNCH("axpy_act", k_axpy_act, n, (act_t *)y, alpha, (const act_t *)x, n);
  return TSR_OK;
}
// [act] x *= alpha, for gemm with k == 0 (gemm.cu).
extern "C" tsr_status kcu_scale_act(kb_t *kb, void *y, float alpha, size_t n) {
  if (!n) return TSR_OK;
  if (alpha == 0.0f) KCU_CUDA("gemm", cudaMemsetAsync(y, 0, n * sizeof(act_t), kcu(kb)->stream));
  else LAUNCH("gemm", k_scale_act, n, (act_t *)y, alpha, n);
  return TSR_OK;
}
static tsr_status cu_u8_affine(kb_t *kb, void *out, const uint8_t *in, float a, float b, size_t n) {
  if (!n) return TSR_OK;
  KCU_NEED("u8_affine", out);
  KCU_NEED("u8_affine", in);
  LAUNCH("u8_affine", k_u8_affine, n, (act_t *)out, in, a, b, n);
  return TSR_OK;
}

// ---- deterministic column sums --------------------------------------------------------
enum { CS_COLS = 32, CS_LANES = 8 };

// grid (col chunks, slices, segments), block (32, 8). part: (n_seg * S, cols) double.
__global__ void k_colsum_part(double *part, const act_t *a, const act_t *b, const float *rs,
                              const float *mu, const int32_t *seg, int rows, int cols, int ld,
                              int S) {
  int s = blockIdx.z, y = blockIdx.y, j = blockIdx.x * CS_COLS + threadIdx.x;
  long long r0 = seg ? seg[s] : 0, r1 = seg ? seg[s + 1] : rows;
  r0 = r0 < 0 ? 0 : (r0 > rows ? rows : r0);
  r1 = r1 < r0 ? r0 : (r1 > rows ? rows : r1);
  long long len = r1 - r0, a0 = r0 + len * y / S, a1 = r0 + len * (y + 1) / S;
  double acc = 0.0;
  if (j < cols)
    for (long long r = a0 + threadIdx.y; r < a1; r += CS_LANES) {
      size_t o = (size_t)r * ld + j;
      double t = (double)kcu_ld(a, o);
      if (mu) {
        t *= (double)((kcu_ld(b, o) - mu[r]) * rs[r]);  // LayerNorm's output, as it stores it
      } else {
        if (b) t *= (double)kcu_ld(b, o);
        if (rs) t *= (double)rs[r];
      }
      acc += t;
    }
  __shared__ double sh[CS_LANES][CS_COLS];
  sh[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
    double t = 0.0;
    for (int l = 0; l < CS_LANES; l++) t += sh[l][threadIdx.x];
    part[((size_t)s * S + y) * cols + j] = t;
  }
}

__global__ void k_colsum_final(float *out_f32, act_t *out_act, int accumulate, int ostride,
                               const double *part, int n_seg, int cols, int S) {
  GRID_STRIDE(i, (size_t)n_seg * cols) {
    int s = (int)(i / cols), j = (int)(i % cols);
    size_t o = (size_t)s * ostride + j;
    double t = (out_f32 && accumulate) ? (double)out_f32[o] : 0.0;
    for (int y = 0; y < S; y++) t += part[((size_t)s * S + y) * cols + j];
    if (out_act) kcu_st(out_act, o, (float)t);
    else out_f32[o] = (float)t;
  }
}

tsr_status kcu_colsum(kb_t *kb, const char *op, float *out_f32, act_t *out_act, int accumulate,
                      int ostride, const act_t *a, const act_t *b, const float *rs,
                      const float *mu, const int32_t *seg, int n_seg, int rows, int cols, int ld) {
  if (cols <= 0 || n_seg <= 0) return TSR_OK;
  // Slices per segment: about 512 rows each on average, 1..256; a function of the shapes
  // only, so the summation order is fixed for given shapes.
  long long avg = (long long)rows / n_seg;
  int S = (int)(avg / 512);
  S = S < 1 ? 1 : (S > 256 ? 256 : S);
  void *ws;
  tsr_status st = kcu_scratch(kb, op, (size_t)n_seg * S * cols * sizeof(double), &ws);
  if (st) return st;
  if (n_seg > 65535) return err_set(TSR_EINVAL, "%s: %d segments (clips) exceed 65535", op, n_seg);
  dim3 grid((unsigned)((cols + CS_COLS - 1) / CS_COLS), (unsigned)S, (unsigned)n_seg);
  k_colsum_part<<<grid, dim3(CS_COLS, CS_LANES), 0, kcu(kb)->stream>>>((double *)ws, a, b, rs, mu,
                                                                     seg, rows, cols, ld, S);
  KCU_LAUNCHED(op);
  size_t n = (size_t)n_seg * cols;
  LAUNCH(op, k_colsum_final, n, out_f32, out_act, accumulate, ostride, (const double *)ws, n_seg,
         cols, S);
  return TSR_OK;
}

// ---- LayerNorm, RMSNorm (one warp per row) --------------------------------------------
// Grid-stride over rows, one warp per row (every lane of a warp has the same row, so the
// shuffles inside see the whole warp). Opens a loop: the kernel body ends with WARP_ROW_END.
#define WARP_ROW(row, R)                                                          \
  int lane = threadIdx.x & 31;                                                    \
  for (int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32); row < (R); \
       row += (int)((size_t)gridDim.x * blockDim.x / 32)) {
#define WARP_ROW_END }

// LayerNorm's statistics of one row x (D) for the warp that owns it: mean and 1/sqrt(var +
// eps), summed in double (two passes), the same in every lane.
__device__ __forceinline__ void ln_row_stats(const act_t *x, int D, int lane, float eps,
                                             float *mu_out, float *rstd_out) {
  double s = 0.0;
  for (int j = lane; j < D; j += 32) s += (double)kcu_ld(x, j);
  double mu = kcu_warp_sum(s) / D, ss = 0.0;
  for (int j = lane; j < D; j += 32) {
    double d = (double)kcu_ld(x, j) - mu;
    ss += d * d;
  }
  *mu_out = (float)mu;
  *rstd_out = (float)(1.0 / sqrt(kcu_warp_sum(ss) / D + (double)eps));
}

__global__ void k_layernorm_fwd(act_t *out, float *mean, float *rstd, const act_t *inp, int L, int D,
                                float eps) {
  WARP_ROW(i, L);
  const act_t *x = inp + (size_t)i * D;
  float muf, rf;
  ln_row_stats(x, D, lane, eps, &muf, &rf);
  for (int j = lane; j < D; j += 32) kcu_st(out, (size_t)i * D + j, (kcu_ld(x, j) - muf) * rf);
  if (lane == 0) {
    if (mean) mean[i] = muf;
    if (rstd) rstd[i] = rf;
  }
  WARP_ROW_END
}

__global__ void k_layernorm_bwd(act_t *dinp, const act_t *dout, const act_t *inp, const float *mean,
                                const float *rstd, int L, int D) {
  WARP_ROW(i, L);
  const act_t *x = inp + (size_t)i * D, *g = dout + (size_t)i * D;
  float mu = mean[i], r = rstd[i];
  double sg = 0.0, sgx = 0.0;
  for (int j = lane; j < D; j += 32) {
    float gj = kcu_ld(g, j);
    sg += gj;
    sgx += (double)gj * ((kcu_ld(x, j) - mu) * r);
  }
  float mg = (float)(kcu_warp_sum(sg) / D), mgx = (float)(kcu_warp_sum(sgx) / D);
  for (int j = lane; j < D; j += 32)
    kcu_st(dinp, (size_t)i * D + j, r * (kcu_ld(g, j) - mg - (kcu_ld(x, j) - mu) * r * mgx));
  WARP_ROW_END
}

static unsigned warp_blocks(int rows) { return kcu_blocks((size_t)rows * 32, 256); }

static tsr_status cu_layernorm_forward(kb_t *kb, void *out, float *mean, float *rstd, const void *inp,
                                       int L, int D, float eps) {
  const char *op = "layernorm_forward";
  KCU_DIM(op, L);
  KCU_DIM(op, D);
  if (L == 0) return TSR_OK;
  if (D == 0) return err_set(TSR_EINVAL, "%s: D = 0", op);
  KCU_NEED(op, out);
  KCU_NEED(op, inp);
  k_layernorm_fwd<<<warp_blocks(L), 256, 0, kcu(kb)->stream>>>((act_t *)out, mean, rstd,
                                                               (const act_t *)inp, L, D, eps);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

static tsr_status cu_layernorm_backward(kb_t *kb, void *dinp, const void *dout, const void *inp,
                                        const float *mean, const float *rstd, int L, int D) {
  const char *op = "layernorm_backward";
  KCU_DIM(op, L);
  KCU_DIM(op, D);
  if (L == 0 || D == 0 || !dinp) return TSR_OK;
  KCU_NEED(op, dout);
  KCU_NEED(op, inp);
  KCU_NEED(op, mean);
  KCU_NEED(op, rstd);
  k_layernorm_bwd<<<warp_blocks(L), 256, 0, kcu(kb)->stream>>>(
      (act_t *)dinp, (const act_t *)dout, (const act_t *)inp, mean, rstd, L, D);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

__global__ void k_rmsnorm_fwd(act_t *out, float *rstd, const act_t *inp, const float *w, int R, int C,
                              float eps) {
  WARP_ROW(i, R);
  const act_t *x = inp + (size_t)i * C;
  double ss = 0.0;
  for (int j = lane; j < C; j += 32) {
    double v = kcu_ld(x, j);
    ss += v * v;
  }
  float r = (float)(1.0 / sqrt(kcu_warp_sum(ss) / C + (double)eps));
  for (int j = lane; j < C; j += 32) kcu_st(out, (size_t)i * C + j, kcu_ld(x, j) * r * w[j]);
  if (lane == 0 && rstd) rstd[i] = r;
  WARP_ROW_END
}

__global__ void k_rmsnorm_bwd(act_t *dinp, const act_t *dout, const act_t *inp, const float *w,
                              const float *rstd, int R, int C) {
  WARP_ROW(i, R);
  const act_t *x = inp + (size_t)i * C, *g = dout + (size_t)i * C;
  float r = rstd[i];
  double s = 0.0;
  for (int j = lane; j < C; j += 32) s += (double)(w[j] * kcu_ld(g, j)) * (kcu_ld(x, j) * r);
  float m = (float)(kcu_warp_sum(s) / C);
  for (int j = lane; j < C; j += 32)
    kcu_st(dinp, (size_t)i * C + j, r * (w[j] * kcu_ld(g, j) - kcu_ld(x, j) * r * m));
  WARP_ROW_END
}

static tsr_status cu_rmsnorm_forward(kb_t *kb, void *out, float *rstd, const void *inp,
                                     const float *weight, int R, int C, float eps) {
  const char *op = "rmsnorm_forward";
  KCU_DIM(op, R);
  KCU_DIM(op, C);
  if (R == 0) return TSR_OK;
  if (C == 0) return err_set(TSR_EINVAL, "%s: C = 0", op);
  KCU_NEED(op, out);
  KCU_NEED(op, inp);
  KCU_NEED(op, weight);
  k_rmsnorm_fwd<<<warp_blocks(R), 256, 0, kcu(kb)->stream>>>((act_t *)out, rstd, (const act_t *)inp,
                                                             weight, R, C, eps);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

static tsr_status cu_rmsnorm_backward(kb_t *kb, void *dinp, float *dweight, const void *dout,
                                      const void *inp, const float *weight, const float *rstd, int R,
                                      int C) {
  const char *op = "rmsnorm_backward";
  KCU_DIM(op, R);
  KCU_DIM(op, C);
  if (R == 0 || C == 0) return TSR_OK;
  KCU_NEED(op, dout);
  KCU_NEED(op, inp);
  KCU_NEED(op, rstd);
  if (dinp) {
    KCU_NEED(op, weight);
    k_rmsnorm_bwd<<<warp_blocks(R), 256, 0, kcu(kb)->stream>>>(
        (act_t *)dinp, (const act_t *)dout, (const act_t *)inp, weight, rstd, R, C);
    KCU_LAUNCHED(op);
  }
  if (dweight)
    return kcu_colsum(kb, op, dweight, NULL, 1, 0, (const act_t *)dout, (const act_t *)inp, rstd, NULL,
                      NULL, 1, R, C, C);
  return TSR_OK;
}

// ---- adaLN: modulate, gate + residual ----------------------------------------------------
__global__ void k_modulate_fwd(act_t *out, const act_t *inp, const act_t *shift, const act_t *scale,
                               int mstride, const int32_t *cu, int n_clips, int L, int D) {
  GRID_STRIDE(e, (size_t)L * D) {
    int i = (int)(e / D), j = (int)(e % D);
    size_t c = (size_t)kcu_clip_of(cu, n_clips, i) * mstride + j;
    kcu_st(out, e, kcu_ld(inp, e) * (1.0f + kcu_ld(scale, c)) + kcu_ld(shift, c));
  }
}
__global__ void k_scale_rows(act_t *dinp, const act_t *dout, const act_t *vec, float one, int mstride,
                             const int32_t *cu, int n_clips, int L, int D) {
  // dinp = dout * (one + vec[c]): modulate (one = 1) and gate (one = 0) backward
  GRID_STRIDE(e, (size_t)L * D) {
    int i = (int)(e / D), j = (int)(e % D);
    size_t c = (size_t)kcu_clip_of(cu, n_clips, i) * mstride + j;
    float f = one == 0.0f ? kcu_ld(vec, c) : one + kcu_ld(vec, c);
    kcu_st(dinp, e, one == 0.0f ? f * kcu_ld(dout, e) : kcu_ld(dout, e) * f);
  }
}
__global__ void k_gate_fwd(act_t *out, const act_t *res, const act_t *inp, const act_t *gate,
                           int mstride, const int32_t *cu, int n_clips, int L, int D) {
  GRID_STRIDE(e, (size_t)L * D) {
    int i = (int)(e / D), j = (int)(e % D);
    size_t c = (size_t)kcu_clip_of(cu, n_clips, i) * mstride + j;
    kcu_st(out, e, kcu_ld(res, e) + kcu_ld(gate, c) * kcu_ld(inp, e));
  }
}

static tsr_status check_adaln(kb_t *kb, const char *op, int entry, const int32_t *cu, int n_clips,
                              int L, int D, int mstride) {
  if (L < 0 || D < 0) return err_set(TSR_EINVAL, "%s: L = %d, D = %d must be >= 0", op, L, D);
  if (mstride < D) return err_set(TSR_EINVAL, "%s: mstride = %d is smaller than D = %d", op, mstride, D);
  return kcu_check_cu(kb, op, entry, cu, n_clips, L);
}

static tsr_status cu_modulate_forward(kb_t *kb, void *out, const void *inp, const void *shift,
                                      const void *scale, int mstride, const int32_t *cu,
                                      int n_clips, int L, int D) {
  const char *op = "modulate_forward";
  tsr_status st = check_adaln(kb, op, KCU_E_MODULATE_F, cu, n_clips, L, D, mstride);
  if (st || L == 0 || D == 0) return st;
  KCU_NEED(op, out);
  KCU_NEED(op, inp);
  KCU_NEED(op, shift);
  KCU_NEED(op, scale);
  size_t n = (size_t)L * D;
  LAUNCH(op, k_modulate_fwd, n, (act_t *)out, (const act_t *)inp, (const act_t *)shift,
         (const act_t *)scale, mstride, cu, n_clips, L, D);
  return TSR_OK;
}

static tsr_status cu_modulate_backward(kb_t *kb, void *dinp, void *dshift, void *dscale,
                                       const void *dout, const void *inp, const void *scale,
                                       int mstride, const int32_t *cu, int n_clips, int L, int D) {
  const char *op = "modulate_backward";
  tsr_status st = check_adaln(kb, op, KCU_E_MODULATE_B, cu, n_clips, L, D, mstride);
  if (st || D == 0) return st;
  if (L > 0) KCU_NEED(op, dout);
  if (dinp && L > 0) {
    KCU_NEED(op, scale);
    size_t n = (size_t)L * D;
    LAUNCH(op, k_scale_rows, n, (act_t *)dinp, (const act_t *)dout, (const act_t *)scale, 1.0f,
           mstride, cu, n_clips, L, D);
  }
  if (dshift && (st = kcu_colsum(kb, op, NULL, (act_t *)dshift, 0, mstride, (const act_t *)dout,
                                 NULL, NULL, NULL, cu, n_clips, L, D, D)))
    return st;
  if (dscale) {
    if (L > 0) KCU_NEED(op, inp);
    if ((st = kcu_colsum(kb, op, NULL, (act_t *)dscale, 0, mstride, (const act_t *)dout,
                         (const act_t *)inp, NULL, NULL, cu, n_clips, L, D, D)))
      return st;
  }
  return TSR_OK;
}

static tsr_status cu_gate_residual_forward(kb_t *kb, void *out, const void *res, const void *inp,
                                           const void *gate, int mstride, const int32_t *cu,
                                           int n_clips, int L, int D) {
  const char *op = "gate_residual_forward";
  tsr_status st = check_adaln(kb, op, KCU_E_GATE_F, cu, n_clips, L, D, mstride);
  if (st || L == 0 || D == 0) return st;
  KCU_NEED(op, out);
  KCU_NEED(op, res);
  KCU_NEED(op, inp);
  KCU_NEED(op, gate);
  size_t n = (size_t)L * D;
  LAUNCH(op, k_gate_fwd, n, (act_t *)out, (const act_t *)res, (const act_t *)inp,
         (const act_t *)gate, mstride, cu, n_clips, L, D);
  return TSR_OK;
}

static tsr_status cu_gate_residual_backward(kb_t *kb, void *dinp, void *dgate, const void *dout,
                                            const void *inp, const void *gate, int mstride,
                                            const int32_t *cu, int n_clips, int L, int D) {
  const char *op = "gate_residual_backward";
  tsr_status st = check_adaln(kb, op, KCU_E_GATE_B, cu, n_clips, L, D, mstride);
  if (st || D == 0) return st;
  if (L > 0) KCU_NEED(op, dout);
  if (dinp && L > 0) {
    KCU_NEED(op, gate);
    size_t n = (size_t)L * D;
    LAUNCH(op, k_scale_rows, n, (act_t *)dinp, (const act_t *)dout, (const act_t *)gate, 0.0f,
           mstride, cu, n_clips, L, D);
  }
  if (dgate) {
    if (L > 0) KCU_NEED(op, inp);
    if ((st = kcu_colsum(kb, op, NULL, (act_t *)dgate, 0, mstride, (const act_t *)dout,
                         (const act_t *)inp, NULL, NULL, cu, n_clips, L, D, D)))
      return st;
  }
  return TSR_OK;
}

// ---- RoPE --------------------------------------------------------------------------------
enum { ROPE_MAX_PAIRS = 256 };  // Dh <= 512
struct rope_table {
  double freq[ROPE_MAX_PAIRS];  // computed on the host with libm's pow, as the CPU backend
  unsigned char axis[ROPE_MAX_PAIRS];
};

// One thread per (token, pair): angle in double, cos/sin in double rounded to float, applied
// to every head.
__global__ void k_rope(act_t *out, const act_t *inp, const int32_t *pos, int L, int H, int Dh,
                       double sign, const rope_table tab) {
  int P = Dh / 2;
  GRID_STRIDE(e, (size_t)L * P) {
    int i = (int)(e / P), p = (int)(e % P);
    double ang = (double)pos[(size_t)i * 3 + tab.axis[p]] * tab.freq[p];
    float c = (float)cos(ang), s = (float)(sign * sin(ang));
    for (int h = 0; h < H; h++) {
      size_t o = ((size_t)i * H + h) * Dh + 2 * (size_t)p;
      float a = kcu_ld(inp, o), b = kcu_ld(inp, o + 1);
      kcu_st(out, o, a * c - b * s);
      kcu_st(out, o + 1, a * s + b * c);
    }
  }
}

// The frequency and axis of every pair (kernels.h's split), checking Dh and theta.
static tsr_status rope_make_table(const char *op, int Dh, float theta, rope_table *tab) {
  if (Dh <= 0 || Dh % 2) return err_set(TSR_EINVAL, "%s: head dimension %d must be even and > 0", op, Dh);
  if (Dh / 2 > ROPE_MAX_PAIRS)
    return err_set(TSR_EINVAL, "%s: head dimension %d is above the CUDA backend's %d", op, Dh,
                   2 * ROPE_MAX_PAIRS);
  if (!(theta > 0.0f)) return err_set(TSR_EINVAL, "%s: theta = %g must be > 0", op, (double)theta);
  int dhw = 2 * (Dh / 6), dt = Dh - 2 * dhw, width[3] = {dt, dhw, dhw}, p = 0;
  for (int a = 0; a < 3; a++)
    for (int j = 0; j < width[a] / 2; j++, p++) {
      tab->freq[p] = pow((double)theta, -2.0 * j / width[a]);
      tab->axis[p] = (unsigned char)a;
    }
  return TSR_OK;
}

static tsr_status rope_apply(kb_t *kb, const char *op, void *out, const void *inp, const int32_t *pos,
                             int L, int H, int Dh, float theta, double sign) {
  KCU_DIM(op, L);
  KCU_DIM(op, H);
  rope_table tab;
  tsr_status st = rope_make_table(op, Dh, theta, &tab);
  if (st) return st;
  if (L == 0 || H == 0) return TSR_OK;
  KCU_NEED(op, out);
  KCU_NEED(op, inp);
  KCU_NEED(op, pos);
  size_t n = (size_t)L * (Dh / 2);
  LAUNCH(op, k_rope, n, (act_t *)out, (const act_t *)inp, pos, L, H, Dh, sign, tab);
  return TSR_OK;
}
static tsr_status cu_rope_forward(kb_t *kb, void *out, const void *inp, const int32_t *pos, int L,
                                  int H, int Dh, float theta) {
  return rope_apply(kb, "rope_forward", out, inp, pos, L, H, Dh, theta, 1.0);
}
static tsr_status cu_rope_backward(kb_t *kb, void *dinp, const void *dout, const int32_t *pos, int L,
                                   int H, int Dh, float theta) {
  return rope_apply(kb, "rope_backward", dinp, dout, pos, L, H, Dh, theta, -1.0);
}

// ---- fused: LayerNorm + modulate ---------------------------------------------------------
// One warp per row: statistics as k_layernorm_fwd, then the modulation of the normalised
// value in registers (LN's output is never stored).
__global__ void k_ln_mod_fwd(act_t *out, float *mean, float *rstd, const act_t *inp,
                             const act_t *shift, const act_t *scale, int mstride, const int32_t *cu,
                             int n_clips, int L, int D, float eps) {
  WARP_ROW(i, L);
  const act_t *x = inp + (size_t)i * D;
  float muf, rf;
  ln_row_stats(x, D, lane, eps, &muf, &rf);
  size_t c = (size_t)kcu_clip_of(cu, n_clips, i) * mstride;
  for (int j = lane; j < D; j += 32) {
    float xh = (kcu_ld(x, j) - muf) * rf;
    kcu_st(out, (size_t)i * D + j, xh * (1.0f + kcu_ld(scale, c + j)) + kcu_ld(shift, c + j));
  }
  if (lane == 0) {
    mean[i] = muf;
    rstd[i] = rf;
  }
  WARP_ROW_END
}

// One warp per row: g = dout (1 + scale[c]) (modulate's input gradient), then LayerNorm's
// backward of it, ADDED to dinp; xhat recomputed from inp, mean, rstd.
__global__ void k_ln_mod_bwd(act_t *dinp, const act_t *dout, const act_t *inp, const float *mean,
                             const float *rstd, const act_t *scale, int mstride, const int32_t *cu,
                             int n_clips, int L, int D) {
  WARP_ROW(i, L);
  const act_t *x = inp + (size_t)i * D, *g = dout + (size_t)i * D;
  float mu = mean[i], r = rstd[i];
  size_t c = (size_t)kcu_clip_of(cu, n_clips, i) * mstride;
  double sg = 0.0, sgx = 0.0;
  for (int j = lane; j < D; j += 32) {
    float gj = kcu_ld(g, j) * (1.0f + kcu_ld(scale, c + j));
    sg += gj;
    sgx += (double)gj * ((kcu_ld(x, j) - mu) * r);
  }
  float mg = (float)(kcu_warp_sum(sg) / D), mgx = (float)(kcu_warp_sum(sgx) / D);
  for (int j = lane; j < D; j += 32) {
    float gj = kcu_ld(g, j) * (1.0f + kcu_ld(scale, c + j));
    size_t o = (size_t)i * D + j;
    kcu_st(dinp, o, kcu_ld(dinp, o) + r * (gj - mg - (kcu_ld(x, j) - mu) * r * mgx));
  }
  WARP_ROW_END
}

static tsr_status cu_layernorm_modulate_forward(kb_t *kb, void *out, float *mean, float *rstd,
                                                const void *inp, const void *shift,
                                                const void *scale, int mstride, const int32_t *cu,
                                                int n_clips, int L, int D, float eps) {
  const char *op = "layernorm_modulate_forward";
  tsr_status st = check_adaln(kb, op, KCU_E_LN_MOD_F, cu, n_clips, L, D, mstride);
  if (st || L == 0) return st;
  if (D == 0) return err_set(TSR_EINVAL, "%s: D = 0", op);
  KCU_NEED(op, out);
  KCU_NEED(op, mean);
  KCU_NEED(op, rstd);
  KCU_NEED(op, inp);
  KCU_NEED(op, shift);
  KCU_NEED(op, scale);
  k_ln_mod_fwd<<<warp_blocks(L), 256, 0, kcu(kb)->stream>>>(
      (act_t *)out, mean, rstd, (const act_t *)inp, (const act_t *)shift, (const act_t *)scale,
      mstride, cu, n_clips, L, D, eps);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

static tsr_status cu_layernorm_modulate_backward(kb_t *kb, void *dinp, void *dshift, void *dscale,
                                                 const void *dout, const void *inp,
                                                 const float *mean, const float *rstd,
                                                 const void *scale, int mstride, const int32_t *cu,
                                                 int n_clips, int L, int D) {
  const char *op = "layernorm_modulate_backward";
  tsr_status st = check_adaln(kb, op, KCU_E_LN_MOD_B, cu, n_clips, L, D, mstride);
  if (st || D == 0) return st;
  if (L > 0) {
    KCU_NEED(op, dout);
    if (dinp || dscale) {
      KCU_NEED(op, inp);
      KCU_NEED(op, mean);
      KCU_NEED(op, rstd);
    }
  }
  if (dinp && L > 0) {
    KCU_NEED(op, scale);
    k_ln_mod_bwd<<<warp_blocks(L), 256, 0, kcu(kb)->stream>>>(
        (act_t *)dinp, (const act_t *)dout, (const act_t *)inp, mean, rstd, (const act_t *)scale,
        mstride, cu, n_clips, L, D);
    KCU_LAUNCHED(op);
  }
  if (dshift && (st = kcu_colsum(kb, op, NULL, (act_t *)dshift, 0, mstride, (const act_t *)dout,
                                 NULL, NULL, NULL, cu, n_clips, L, D, D)))
    return st;
  if (dscale && (st = kcu_colsum(kb, op, NULL, (act_t *)dscale, 0, mstride, (const act_t *)dout,
                                 (const act_t *)inp, rstd, mean, cu, n_clips, L, D, D)))
    return st;
  return TSR_OK;
}

// ---- fused: QK-norm + RoPE of q and k ---------------------------------------------------
// One warp per (token, head) row of q and of k: lane l owns the rotation pairs
// p = l, l + 32, ... (Dh/2 <= ROPE_MAX_PAIRS, so at most QK_PAIRS each), whose angle it
// computes once for both tensors.
enum { QK_PAIRS = ROPE_MAX_PAIRS / 32, QK_WARPS = 8, QK_MAX_BLOCKS = 1024 };

__device__ __forceinline__ void qk_angle(const int32_t *pos, int i, const rope_table &tab, int p,
                                         double sign, float *c, float *s) {
  double ang = (double)pos[(size_t)i * 3 + tab.axis[p]] * tab.freq[p];
  *c = (float)cos(ang);
  *s = (float)(sign * sin(ang));
}

__global__ void k_qk_norm_rope_fwd(act_t *q_out, act_t *k_out, float *q_rstd, float *k_rstd,
                                   const act_t *q_in, const act_t *k_in, const float *q_w,
                                   const float *k_w, const int32_t *pos, int L, int H, int Dh,
                                   float eps, const rope_table tab) {
  int P = Dh / 2;
  WARP_ROW(row, L * H);
  int i = row / H;
  size_t base = (size_t)row * Dh;
  float c[QK_PAIRS], s[QK_PAIRS];
#pragma unroll
  for (int t = 0; t < QK_PAIRS; t++)
    if (lane + 32 * t < P) qk_angle(pos, i, tab, lane + 32 * t, 1.0, &c[t], &s[t]);
  for (int which = 0; which < 2; which++) {
    const act_t *x = (which ? k_in : q_in) + base;
    const float *w = which ? k_w : q_w;
    double ss = 0.0;
#pragma unroll
    for (int t = 0; t < QK_PAIRS; t++) {
      int p = lane + 32 * t;
      if (p < P) {
        double a = kcu_ld(x, 2 * p), b = kcu_ld(x, 2 * p + 1);
        ss += a * a + b * b;
      }
    }
    float r = (float)(1.0 / sqrt(kcu_warp_sum(ss) / Dh + (double)eps));
    act_t *o = (which ? k_out : q_out) + base;
#pragma unroll
    for (int t = 0; t < QK_PAIRS; t++) {
      int p = lane + 32 * t;
      if (p < P) {
        float a = kcu_ld(x, 2 * p) * r * w[2 * p], b = kcu_ld(x, 2 * p + 1) * r * w[2 * p + 1];
        kcu_st(o, 2 * p, a * c[t] - b * s[t]);
        kcu_st(o, 2 * p + 1, a * s[t] + b * c[t]);
      }
    }
    if (lane == 0) (which ? k_rstd : q_rstd)[row] = r;
  }
  WARP_ROW_END
}

// Backward: per row, tmp = R^T dout (in registers, fp32), dx_in = RMSNorm's backward of tmp;
// each lane sums tmp x rstd for its columns over the rows of its warp, the warps of a block
// add theirs in warp order into part[block] (2 Dh doubles: q's, then k's), and
// k_qk_dweight adds the blocks in block order. The grid is a function of the shape only, so
// the sums are bitwise reproducible.
__global__ void k_qk_norm_rope_bwd(act_t *dq_in, act_t *dk_in, double *part, const act_t *dq,
                                   const act_t *dk, const act_t *q_in, const act_t *k_in,
                                   const float *q_w, const float *k_w, const float *q_rstd,
                                   const float *k_rstd, const int32_t *pos, int L, int H, int Dh,
                                   const rope_table tab) {
  extern __shared__ double qk_sh[];  // (2 Dh): the block's column sums
  int P = Dh / 2, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double acc[2][QK_PAIRS][2];
#pragma unroll
  for (int a = 0; a < 2; a++)
#pragma unroll
    for (int t = 0; t < QK_PAIRS; t++) acc[a][t][0] = acc[a][t][1] = 0.0;
  int R = L * H, nw = gridDim.x * QK_WARPS;
  for (int row = blockIdx.x * QK_WARPS + warp; row < R; row += nw) {
    int i = row / H;
    size_t base = (size_t)row * Dh;
    float c[QK_PAIRS], s[QK_PAIRS];
#pragma unroll
    for (int t = 0; t < QK_PAIRS; t++)
      if (lane + 32 * t < P) qk_angle(pos, i, tab, lane + 32 * t, -1.0, &c[t], &s[t]);
    for (int which = 0; which < 2; which++) {
      const act_t *g = (which ? dk : dq) + base, *x = (which ? k_in : q_in) + base;
      const float *w = which ? k_w : q_w;
      float r = (which ? k_rstd : q_rstd)[row];
      float ta[QK_PAIRS], tb[QK_PAIRS];
      double sm = 0.0;
#pragma unroll
      for (int t = 0; t < QK_PAIRS; t++) {
        int p = lane + 32 * t;
        ta[t] = tb[t] = 0.0f;
        if (p < P) {
          float a = kcu_ld(g, 2 * p), b = kcu_ld(g, 2 * p + 1);
          ta[t] = a * c[t] - b * s[t];
          tb[t] = a * s[t] + b * c[t];
          float xa = kcu_ld(x, 2 * p), xb = kcu_ld(x, 2 * p + 1);
          sm += (double)(w[2 * p] * ta[t]) * (xa * r) + (double)(w[2 * p + 1] * tb[t]) * (xb * r);
          acc[which][t][0] += (double)ta[t] * (double)xa * (double)r;
          acc[which][t][1] += (double)tb[t] * (double)xb * (double)r;
        }
      }
      float m = (float)(kcu_warp_sum(sm) / Dh);
      act_t *dx = (which ? dk_in : dq_in) + base;
#pragma unroll
      for (int t = 0; t < QK_PAIRS; t++) {
        int p = lane + 32 * t;
        if (p < P) {
          kcu_st(dx, 2 * p, r * (w[2 * p] * ta[t] - kcu_ld(x, 2 * p) * r * m));
          kcu_st(dx, 2 * p + 1, r * (w[2 * p + 1] * tb[t] - kcu_ld(x, 2 * p + 1) * r * m));
        }
      }
    }
  }
  if (!part) return;
  for (int w = 0; w < QK_WARPS; w++) {  // the block's sum, warp by warp in order
    if (warp == w)
#pragma unroll
      for (int a = 0; a < 2; a++)
#pragma unroll
        for (int t = 0; t < QK_PAIRS; t++) {
          int p = lane + 32 * t;
          if (p < P) {
            double *o = qk_sh + (size_t)a * Dh + 2 * p;
            o[0] = (w ? o[0] : 0.0) + acc[a][t][0];
            o[1] = (w ? o[1] : 0.0) + acc[a][t][1];
          }
        }
    __syncthreads();
  }
  for (int j = threadIdx.x; j < 2 * Dh; j += blockDim.x) part[(size_t)blockIdx.x * 2 * Dh + j] = qk_sh[j];
}

__global__ void k_qk_dweight(float *dq_w, float *dk_w, const double *part, int blocks, int Dh) {
  for (int j = threadIdx.x; j < 2 * Dh; j += blockDim.x) {
    float *o = j < Dh ? dq_w : dk_w;
    if (!o) continue;
    int col = j < Dh ? j : j - Dh;
    double t = (double)o[col];
    for (int b = 0; b < blocks; b++) t += part[(size_t)b * 2 * Dh + j];
    o[col] = (float)t;
  }
}

static unsigned qk_blocks(int rows) {
  long long b = ((long long)rows + QK_WARPS - 1) / QK_WARPS;
  const long long cap = QK_MAX_BLOCKS;
  return (unsigned)(b < 1 ? 1 : (b > cap ? cap : b));
}

static tsr_status cu_qk_norm_rope_forward(kb_t *kb, void *q_out, void *k_out, float *q_rstd,
                                          float *k_rstd, const void *q_in, const void *k_in,
                                          const float *q_weight, const float *k_weight,
                                          const int32_t *pos, int L, int H, int Dh, float eps,
                                          float theta) {
  const char *op = "qk_norm_rope_forward";
  KCU_DIM(op, L);
  KCU_DIM(op, H);
  rope_table tab;
  tsr_status st = rope_make_table(op, Dh, theta, &tab);
  if (st || L == 0 || H == 0) return st;
  KCU_NEED(op, q_out);
  KCU_NEED(op, k_out);
  KCU_NEED(op, q_rstd);
  KCU_NEED(op, k_rstd);
  KCU_NEED(op, q_in);
  KCU_NEED(op, k_in);
  KCU_NEED(op, q_weight);
  KCU_NEED(op, k_weight);
  KCU_NEED(op, pos);
  k_qk_norm_rope_fwd<<<warp_blocks(L * H), 256, 0, kcu(kb)->stream>>>(
      (act_t *)q_out, (act_t *)k_out, q_rstd, k_rstd, (const act_t *)q_in, (const act_t *)k_in,
      q_weight, k_weight, pos, L, H, Dh, eps, tab);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

static tsr_status cu_qk_norm_rope_backward(kb_t *kb, void *dq_in, void *dk_in, float *dq_weight,
                                           float *dk_weight, const void *dq, const void *dk,
                                           const void *q_in, const void *k_in,
                                           const float *q_weight, const float *k_weight,
                                           const float *q_rstd, const float *k_rstd,
                                           const int32_t *pos, int L, int H, int Dh, float theta) {
  const char *op = "qk_norm_rope_backward";
  KCU_DIM(op, L);
  KCU_DIM(op, H);
  rope_table tab;
  tsr_status st = rope_make_table(op, Dh, theta, &tab);
  if (st || L == 0 || H == 0) return st;
  KCU_NEED(op, dq_in);
  KCU_NEED(op, dk_in);
  KCU_NEED(op, dq);
  KCU_NEED(op, dk);
  KCU_NEED(op, q_in);
  KCU_NEED(op, k_in);
  KCU_NEED(op, q_weight);
  KCU_NEED(op, k_weight);
  KCU_NEED(op, q_rstd);
  KCU_NEED(op, k_rstd);
  KCU_NEED(op, pos);
  unsigned blocks = qk_blocks(L * H);
  double *part = NULL;
  if (dq_weight || dk_weight) {
    void *ws;
    if ((st = kcu_scratch(kb, op, (size_t)blocks * 2 * Dh * sizeof(double), &ws))) return st;
    part = (double *)ws;
  }
  cudaStream_t s = kcu(kb)->stream;
  k_qk_norm_rope_bwd<<<blocks, 32 * QK_WARPS, 2 * (size_t)Dh * sizeof(double), s>>>(
      (act_t *)dq_in, (act_t *)dk_in, part, (const act_t *)dq, (const act_t *)dk,
      (const act_t *)q_in, (const act_t *)k_in, q_weight, k_weight, q_rstd, k_rstd, pos, L, H, Dh,
      tab);
  KCU_LAUNCHED(op);
  if (part) {
    k_qk_dweight<<<1, 256, 0, s>>>(dq_weight, dk_weight, part, (int)blocks, Dh);
    KCU_LAUNCHED(op);
  }
  return TSR_OK;
}

// ---- GELU, SiLU (libm-accurate tanhf/expf, no fast math) ---------------------------------
#define GELU_K 0.7978845608028654f
#define GELU_C 0.044715f
__global__ void k_gelu_fwd(act_t *out, const act_t *inp, size_t n) {
  GRID_STRIDE(i, n) {
    float x = kcu_ld(inp, i);
    kcu_st(out, i, 0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_C * x * x * x))));
  }
}
__global__ void k_gelu_bwd(act_t *dinp, const act_t *dout, const act_t *inp, size_t n) {
  GRID_STRIDE(i, n) {
    float x = kcu_ld(inp, i);
    float th = tanhf(GELU_K * (x + GELU_C * x * x * x));
    float d = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_C * x * x);
    kcu_st(dinp, i, d * kcu_ld(dout, i));
  }
}
__global__ void k_silu_fwd(act_t *out, const act_t *inp, size_t n) {
  GRID_STRIDE(i, n) {
    float x = kcu_ld(inp, i);
    kcu_st(out, i, x / (1.0f + expf(-x)));
  }
}
__global__ void k_silu_bwd(act_t *dinp, const act_t *dout, const act_t *inp, size_t n) {
  GRID_STRIDE(i, n) {
    float x = kcu_ld(inp, i), s = 1.0f / (1.0f + expf(-x));
    kcu_st(dinp, i, kcu_ld(dout, i) * s * (1.0f + x * (1.0f - s)));
  }
}

static tsr_status cu_gelu_forward(kb_t *kb, void *out, const void *inp, size_t n) {
  if (!n) return TSR_OK;
  KCU_NEED("gelu_forward", out);
  KCU_NEED("gelu_forward", inp);
  LAUNCH("gelu_forward", k_gelu_fwd, n, (act_t *)out, (const act_t *)inp, n);
  return TSR_OK;
}
static tsr_status cu_gelu_backward(kb_t *kb, void *dinp, const void *dout, const void *inp, size_t n) {
  if (!n) return TSR_OK;
  KCU_NEED("gelu_backward", dinp);
  KCU_NEED("gelu_backward", dout);
  KCU_NEED("gelu_backward", inp);
  LAUNCH("gelu_backward", k_gelu_bwd, n, (act_t *)dinp, (const act_t *)dout, (const act_t *)inp, n);
  return TSR_OK;
}
extern "C" tsr_status kcu_gelu_act(kb_t *kb, const char *op, void *out, const void *pre, size_t n) {
  if (!n) return TSR_OK;
  LAUNCH(op, k_gelu_fwd, n, (act_t *)out, (const act_t *)pre, n);
  return TSR_OK;
}
extern "C" tsr_status kcu_dgelu_act(kb_t *kb, const char *op, void *dinp, const void *dout,
                                    const void *pre, size_t n) {
  if (!n) return TSR_OK;
  LAUNCH(op, k_gelu_bwd, n, (act_t *)dinp, (const act_t *)dout, (const act_t *)pre, n);
  return TSR_OK;
}
static tsr_status cu_silu_forward(kb_t *kb, void *out, const void *inp, size_t n) {
  if (!n) return TSR_OK;
  KCU_NEED("silu_forward", out);
  KCU_NEED("silu_forward", inp);
  LAUNCH("silu_forward", k_silu_fwd, n, (act_t *)out, (const act_t *)inp, n);
  return TSR_OK;
}
static tsr_status cu_silu_backward(kb_t *kb, void *dinp, const void *dout, const void *inp, size_t n) {
  if (!n) return TSR_OK;
  KCU_NEED("silu_backward", dinp);
  KCU_NEED("silu_backward", dout);
  KCU_NEED("silu_backward", inp);
  LAUNCH("silu_backward", k_silu_bwd, n, (act_t *)dinp, (const act_t *)dout, (const act_t *)inp, n);
  return TSR_OK;
}

// ---- conditioning ----------------------------------------------------------------------
__global__ void k_timestep(act_t *out, const float *t, int n, int dim, double log_mp) {
  int half = dim / 2, w = half + (dim & 1);
  GRID_STRIDE(e, (size_t)n * w) {
    int i = (int)(e / w), j = (int)(e % w);
    act_t *o = out + (size_t)i * dim;
    if (j == half) {
      kcu_st(o, dim - 1, 0.0f);
    } else {
      double arg = (double)t[i] * exp(-log_mp * j / half);
      kcu_st(o, j, (float)cos(arg));
      kcu_st(o, half + j, (float)sin(arg));
    }
  }
}

static tsr_status cu_timestep_embedding(kb_t *kb, void *out, const float *t, int n, int dim,
                                        float max_period) {
  const char *op = "timestep_embedding";
  KCU_DIM(op, n);
  KCU_DIM(op, dim);
  if (!(max_period > 0.0f)) return err_set(TSR_EINVAL, "%s: max_period = %g must be > 0", op, (double)max_period);
  if (n == 0 || dim == 0) return TSR_OK;
  KCU_NEED(op, out);
  KCU_NEED(op, t);
  size_t items = (size_t)n * (dim / 2 + (dim & 1));
  LAUNCH(op, k_timestep, items, (act_t *)out, t, n, dim, log((double)max_period));
  return TSR_OK;
}

__global__ void k_embed_fwd(act_t *out, const float *table, const int32_t *ids, int n, int V, int D,
                            kcu_dev_error *err) {
  GRID_STRIDE(e, (size_t)n * D) {
    int i = (int)(e / D), j = (int)(e % D), id = ids[i];
    if (id < 0 || id >= V) {
      if (j == 0) kcu_report(err, KCU_BAD_IDS, KCU_E_EMBED_F, id, i);
      kcu_st(out, e, 0.0f);
    } else {
      kcu_st(out, e, table[(size_t)id * D + j]);
    }
  }
}

// One owner per table element (row v, column j): scans the ids in order and adds dout rows
// in fp32 in the order of i, exactly the CPU loop; no atomics. O(n V D) work: fine for the
// label table (n = clips of a microbatch).
__global__ void k_embed_bwd(float *dtable, const act_t *dout, const int32_t *ids, int n, int V, int D,
                            kcu_dev_error *err) {
  GRID_STRIDE(e, (size_t)V * D) {
    int v = (int)(e / D), j = (int)(e % D);
    float acc = dtable[e];
    int touched = 0;
    for (int i = 0; i < n; i++) {
      int id = ids[i];
      if (e == 0 && (id < 0 || id >= V)) kcu_report(err, KCU_BAD_IDS, KCU_E_EMBED_B, id, i);
      if (id == v) {
        acc += kcu_ld(dout, (size_t)i * D + j);
        touched = 1;
      }
    }
    if (touched) dtable[e] = acc;
  }
}

static tsr_status cu_embedding_forward(kb_t *kb, void *out, const float *table, const int32_t *ids,
                                       int n, int V, int D) {
  const char *op = "embedding_forward";
  KCU_DIM(op, n);
  KCU_DIM(op, V);
  KCU_DIM(op, D);
  if (n == 0 || D == 0) return TSR_OK;
  KCU_NEED(op, out);
  KCU_NEED(op, table);
  KCU_NEED(op, ids);
  size_t items = (size_t)n * D;
  LAUNCH(op, k_embed_fwd, items, (act_t *)out, table, ids, n, V, D, kcu(kb)->err);
  return TSR_OK;
}

static tsr_status cu_embedding_backward(kb_t *kb, float *dtable, const void *dout, const int32_t *ids,
                                        int n, int V, int D) {
  const char *op = "embedding_backward";
  KCU_DIM(op, n);
  KCU_DIM(op, V);
  KCU_DIM(op, D);
  if (n == 0 || !dtable || V == 0 || D == 0) return TSR_OK;
  KCU_NEED(op, dout);
  KCU_NEED(op, ids);
  size_t items = (size_t)V * D;
  LAUNCH(op, k_embed_bwd, items, dtable, (const act_t *)dout, ids, n, V, D, kcu(kb)->err);
  return TSR_OK;
}

// ---- objective: Philox-4x32-10 as core/rng.c, on the device ----------------------------
// Bitwise the host generator for the 32-bit words. The normals go through the device's
// double log/cos/sqrt (sqrt correctly rounded; log and cos within 1-2 ulp of glibc's), so
// a double may differ from the host's by an ulp; after rounding to float that changes a
// value only when it sits on a rounding boundary (about 1 in 2^28). The float arithmetic
// after it is written with _rn intrinsics: no FMA contraction, as the host build.
struct kcu_rng_key {
  unsigned long long seed, step, clip;
  unsigned stream;
};

__device__ __forceinline__ unsigned long long kcu_mix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__device__ void kcu_philox(const kcu_rng_key &key, unsigned long long ctr, unsigned out[4]) {
  unsigned hs = (unsigned)(key.seed >> 32), ht = (unsigned)(key.step >> 32), hc = (unsigned)(key.clip >> 32);
  unsigned high = 0;
  if (hs | ht | hc) {
    unsigned long long h = kcu_mix64(((unsigned long long)hs << 32 | ht) ^ kcu_mix64(hc + 0x9E3779B97F4A7C15ull));
    high = (unsigned)(h & 0xFFFFFFu);
    if (high == 0) high = 1;
  }
  unsigned c0 = (unsigned)ctr, c1 = (unsigned)(ctr >> 32), c2 = (unsigned)key.clip, c3 = (unsigned)key.step;
  unsigned k0 = (unsigned)key.seed, k1 = (key.stream & 0xFFu) | high << 8;
#pragma unroll
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

__device__ __forceinline__ double kcu_unit52(unsigned hi, unsigned lo) {
  unsigned long long n = ((unsigned long long)hi << 20) ^ (lo >> 12);
  return __dmul_rn((double)n + 0.5, 0x1p-52);
}

__device__ double kcu_rng_normal(const kcu_rng_key &key, unsigned long long ctr) {
  unsigned w[4];
  kcu_philox(key, ctr, w);
  double u1 = kcu_unit52(w[0], w[1]), u2 = kcu_unit52(w[2], w[3]);
  return __dmul_rn(sqrt(__dmul_rn(-2.0, log(u1))), cos(__dmul_rn(__dmul_rn(2.0, M_PI), u2)));
}

enum { RNG_TIMESTEP = 1, RNG_NOISE = 2 };  // core/rng.h's RNG_STREAM_TIMESTEP, _NOISE

__global__ void k_objective_t(float *t, const kernels_clip_key *clips, const int32_t *cu, int n_clips,
                              unsigned long long seed, unsigned long long step, double mean,
                              double std, long long shift_tokens, kcu_dev_error *err) {
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < n_clips; c += gridDim.x * blockDim.x) {
    kernels_clip_key k = clips[c];
    long long rows = (long long)cu[c + 1] - cu[c];
    if (k.first_token < 0 || k.first_token + rows > k.total_tokens)
      kcu_report(err, KCU_BAD_IDS, KCU_E_OBJECTIVE, k.first_token, c);
    kcu_rng_key key = {seed, step, (unsigned long long)k.clip_id, RNG_TIMESTEP};
    double z = kcu_rng_normal(key, 0);
    double tt = 1.0 / __dadd_rn(1.0, exp(-__dadd_rn(mean, __dmul_rn(std, z))));
    if (shift_tokens > 0) {
      double s = fmax(1.0, sqrt((double)k.total_tokens / (double)shift_tokens));
      tt = __dmul_rn(s, tt) / __dadd_rn(1.0, __dmul_rn(s - 1.0, tt));
    }
    t[c] = (float)fmin(1.0 - 1e-5, fmax(1e-5, tt));
  }
}

// The clean value x0 of stored token value e (kernels.h objective_inputs): uint8 pixels
// mapped to [-1, 1], bf16 or f32 latents as they are.
__device__ __forceinline__ float kcu_token_x0(const void *tokens, int dtype, size_t e) {
  if (dtype == KERNELS_TOKENS_U8)
    return __fsub_rn(__fmul_rn((float)((const uint8_t *)tokens)[e], 2.0f / 255.0f), 1.0f);
  if (dtype == KERNELS_TOKENS_BF16)
    return __uint_as_float((unsigned)((const unsigned short *)tokens)[e] << 16);
  return ((const float *)tokens)[e];
}

__global__ void k_objective_x(act_t *x_t, act_t *target, const float *t, const void *tokens,
                              int tokens_dtype, const kernels_clip_key *clips, const int32_t *cu,
                              int n_clips, int L, int P, unsigned long long seed,
                              unsigned long long step) {
  GRID_STRIDE(e, (size_t)L * P) {
    int i = (int)(e / P), q = (int)(e % P);
    int c = kcu_clip_of(cu, n_clips, i);
    kcu_rng_key key = {seed, step, (unsigned long long)clips[c].clip_id, RNG_NOISE};
    unsigned long long j = (unsigned long long)(clips[c].first_token + (i - cu[c]));
    float tc = t[c];
    float x0 = kcu_token_x0(tokens, tokens_dtype, e);
    float ev = (float)kcu_rng_normal(key, j * (unsigned long long)P + (unsigned long long)q);
    kcu_st(x_t, e, __fadd_rn(__fmul_rn(__fsub_rn(1.0f, tc), x0), __fmul_rn(tc, ev)));
    kcu_st(target, e, __fsub_rn(ev, x0));
  }
}

static tsr_status cu_objective_inputs(kb_t *kb, float *t, void *x_t, void *target,
                                      const void *tokens, kernels_tokens tokens_dtype,
                                      const kernels_clip_key *clips,
                                      const int32_t *cu, int n_clips, int L, int P, uint64_t seed,
                                      uint64_t step, double t_logit_mean, double t_logit_std,
                                      int64_t t_shift_tokens) {
  const char *op = "objective_inputs";
  KCU_DIM(op, L);
  KCU_DIM(op, P);
  if (!kernels_tokens_size(tokens_dtype))
    return err_set(TSR_EINVAL, "%s: unknown token dtype %d", op, (int)tokens_dtype);
  tsr_status st = kcu_check_cu(kb, op, KCU_E_OBJECTIVE, cu, n_clips, L);
  if (st) return st;
  if (n_clips == 0) return TSR_OK;
  KCU_NEED(op, t);
  KCU_NEED(op, clips);
  k_objective_t<<<kcu_blocks((size_t)n_clips, 128), 128, 0, kcu(kb)->stream>>>(
      t, clips, cu, n_clips, seed, step, t_logit_mean, t_logit_std, (long long)t_shift_tokens,
      kcu(kb)->err);
  KCU_LAUNCHED(op);
  if (L == 0 || P == 0) return TSR_OK;
  KCU_NEED(op, x_t);
  KCU_NEED(op, target);
  KCU_NEED(op, tokens);
  size_t n = (size_t)L * P;
  LAUNCH(op, k_objective_x, n, (act_t *)x_t, (act_t *)target, t, tokens, (int)tokens_dtype, clips,
         cu, n_clips, L, P, (unsigned long long)seed, (unsigned long long)step);
  return TSR_OK;
}

__global__ void k_euler(float *x, const act_t *vc, const act_t *vu, float cfg, float dt, size_t n) {
  GRID_STRIDE(i, n) {
    float c = kcu_ld(vc, i);
    float v = vu ? __fadd_rn(kcu_ld(vu, i), __fmul_rn(cfg, __fsub_rn(c, kcu_ld(vu, i)))) : c;
    x[i] = __fadd_rn(x[i], __fmul_rn(dt, v));
  }
}

static tsr_status cu_euler_update(kb_t *kb, float *x, const void *v_cond, const void *v_uncond,
                                  float cfg, float dt, size_t n) {
  if (n == 0) return TSR_OK;
  KCU_NEED("euler_update", x);
  KCU_NEED("euler_update", v_cond);
  LAUNCH("euler_update", k_euler, n, x, (const act_t *)v_cond, (const act_t *)v_uncond, cfg, dt, n);
  return TSR_OK;
}

// ---- loss ------------------------------------------------------------------------------
enum { RED_THREADS = 256 };

// Fixed-tree block sum of one double per thread (RED_THREADS threads).
__device__ double kcu_block_sum(double v) {
  __shared__ double sh[RED_THREADS];
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int o = RED_THREADS / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads();
  return r;
}

// grid (S, n_clips): slice y of clip c's elements [cu[c] D, cu[c+1] D): sum of squared
// differences in double -> part[c * S + y].
__global__ void k_mse_part(double *part, const act_t *pred, const act_t *target, const int32_t *cu,
                           int L, int D, int S) {
  int c = blockIdx.y, y = blockIdx.x;
  long long r0 = cu[c], r1 = cu[c + 1];
  r0 = r0 < 0 ? 0 : (r0 > L ? L : r0);
  r1 = r1 < r0 ? r0 : (r1 > L ? L : r1);
  long long e0 = r0 * D, len = (r1 - r0) * D, a0 = e0 + len * y / S, a1 = e0 + len * (y + 1) / S;
  double s = 0.0;
  for (long long e = a0 + threadIdx.x; e < a1; e += RED_THREADS) {
    double d = (double)kcu_ld(pred, e) - (double)kcu_ld(target, e);
    s += d * d;
  }
  s = kcu_block_sum(s);
  if (threadIdx.x == 0) part[(size_t)c * S + y] = s;
}

// One block: sse[c] = sum of the clip's slices in order; loss = sum_c weight[c] sse[c] in
// order of c (double).
__global__ void k_mse_final(float *loss, float *sse, double *sse_d, const double *part,
                            const float *weight, int n_clips, int S) {
  for (int c = threadIdx.x; c < n_clips; c += blockDim.x) {
    double s = 0.0;
    for (int y = 0; y < S; y++) s += part[(size_t)c * S + y];
    sse_d[c] = s;
    if (sse) sse[c] = (float)s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int c = 0; c < n_clips; c++) total += (double)weight[c] * sse_d[c];
    loss[0] = (float)total;
  }
}

static tsr_status check_loss(kb_t *kb, const char *op, int entry, const void *pred, const void *target,
                             const float *weight, const int32_t *cu, int n_clips, int L, int D) {
  KCU_DIM(op, L);
  KCU_DIM(op, D);
  tsr_status st = kcu_check_cu(kb, op, entry, cu, n_clips, L);
  if (st) return st;
  if (n_clips > 0) KCU_NEED(op, weight);
  if (L > 0 && D > 0) {
    KCU_NEED(op, pred);
    KCU_NEED(op, target);
  }
  return TSR_OK;
}

static tsr_status cu_mse_forward(kb_t *kb, float *loss, float *sse, const void *pred,
                                 const void *target, const float *weight, const int32_t *cu,
                                 int n_clips, int L, int D) {
  const char *op = "mse_forward";
  tsr_status st = check_loss(kb, op, KCU_E_MSE_F, pred, target, weight, cu, n_clips, L, D);
  if (st) return st;
  KCU_NEED(op, loss);
  if (n_clips == 0) {
    KCU_CUDA(op, cudaMemsetAsync(loss, 0, sizeof(float), kcu(kb)->stream));
    return TSR_OK;
  }
  if (n_clips > 65535) return err_set(TSR_EINVAL, "%s: %d clips exceed 65535", op, n_clips);
  long long avg = (long long)L * D / n_clips;
  int S = (int)(avg / 8192);
  S = S < 1 ? 1 : (S > 64 ? 64 : S);
  void *ws;
  if ((st = kcu_scratch(kb, op, ((size_t)n_clips * S + n_clips) * sizeof(double), &ws))) return st;
  double *part = (double *)ws, *sse_d = part + (size_t)n_clips * S;
  k_mse_part<<<dim3((unsigned)S, (unsigned)n_clips), RED_THREADS, 0, kcu(kb)->stream>>>(
      part, (const act_t *)pred, (const act_t *)target, cu, L, D, S);
  KCU_LAUNCHED(op);
  k_mse_final<<<1, 256, 0, kcu(kb)->stream>>>(loss, sse, sse_d, part, weight, n_clips, S);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

__global__ void k_mse_bwd(act_t *dpred, const act_t *pred, const act_t *target, const float *weight,
                          const int32_t *cu, int n_clips, int L, int D) {
  GRID_STRIDE(e, (size_t)L * D) {
    float w2 = 2.0f * weight[kcu_clip_of(cu, n_clips, (int)(e / D))];
    kcu_st(dpred, e, w2 * (kcu_ld(pred, e) - kcu_ld(target, e)));
  }
}

static tsr_status cu_mse_backward(kb_t *kb, void *dpred, const void *pred, const void *target,
                                  const float *weight, const int32_t *cu, int n_clips, int L, int D) {
  const char *op = "mse_backward";
  tsr_status st = check_loss(kb, op, KCU_E_MSE_B, pred, target, weight, cu, n_clips, L, D);
  if (st || L == 0 || D == 0) return st;
  KCU_NEED(op, dpred);
  size_t n = (size_t)L * D;
  LAUNCH(op, k_mse_bwd, n, (act_t *)dpred, (const act_t *)pred, (const act_t *)target, weight, cu,
         n_clips, L, D);
  return TSR_OK;
}

// ---- optimizer -------------------------------------------------------------------------
enum { SUM_BLOCK = 8192 };

__global__ void k_sumsq_part(double *part, const float *x, size_t n) {
  size_t i0 = (size_t)blockIdx.x * SUM_BLOCK, i1 = i0 + SUM_BLOCK < n ? i0 + SUM_BLOCK : n;
  double s = 0.0;
  for (size_t i = i0 + threadIdx.x; i < i1; i += RED_THREADS) s += (double)x[i] * (double)x[i];
  s = kcu_block_sum(s);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}
__global__ void k_sum_parts(double *out, const double *part, size_t nb) {
  double s = 0.0;
  for (size_t i = threadIdx.x; i < nb; i += RED_THREADS) s += part[i];
  s = kcu_block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

// The one host synchronisation of a step: the trainer needs the value to clip.
static tsr_status cu_sumsq(kb_t *kb, double *result_host, const float *x, size_t n) {
  const char *op = "sumsq";
  KCU_NEED(op, result_host);
  KCU_NOT_RECORDING(kb, op);
  *result_host = 0.0;
  if (n == 0) return TSR_OK;
  KCU_NEED(op, x);
  size_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
  if (nb > 0x7fffffffu) return err_set(TSR_EINVAL, "%s: %zu elements are too many", op, n);
  void *ws;
  tsr_status st = kcu_scratch(kb, op, (nb + 1) * sizeof(double), &ws);
  if (st) return st;
  double *part = (double *)ws, *res = part + nb;
  cudaStream_t s = kcu(kb)->stream;
  k_sumsq_part<<<(unsigned)nb, RED_THREADS, 0, s>>>(part, x, n);
  KCU_LAUNCHED(op);
  k_sum_parts<<<1, RED_THREADS, 0, s>>>(res, part, nb);
  KCU_LAUNCHED(op);
  KCU_CUDA(op, cudaMemcpyAsync(result_host, res, sizeof(double), cudaMemcpyDeviceToHost, s));
  return kcu_check_error(kb, op);  // synchronises
}

__global__ void k_adamw(float *param, const float *grad, float *m, float *v, size_t n, float decay,
                        float w1, float beta2, float w2, float eps, float step_size, float bc2_sqrt,
                        float grad_scale) {
  GRID_STRIDE(i, n) {
    float g = grad[i] * grad_scale;
    float p = param[i] * decay;
    float mi = m[i] + w1 * (g - m[i]);
    float vi = v[i] * beta2 + w2 * g * g;
    float denom = sqrtf(vi) / bc2_sqrt + eps;
    param[i] = p + (-step_size) * (mi / denom);
    m[i] = mi;
    v[i] = vi;
  }
}

static tsr_status cu_adamw_update(kb_t *kb, float *param, const float *grad, float *m, float *v,
                                  size_t n, float lr, float beta1, float beta2, float eps,
                                  float weight_decay, int64_t step, float grad_scale) {
  const char *op = "adamw_update";
  kernels_adamw_scalars c = {};
  tsr_status st = kernels_adamw_prepare(lr, beta1, beta2, weight_decay, step, &c);
  if (st || n == 0) return st;
  KCU_NEED(op, param);
  KCU_NEED(op, grad);
  KCU_NEED(op, m);
  KCU_NEED(op, v);
  LAUNCH(op, k_adamw, n, param, grad, m, v, n, c.decay, c.w1, beta2, c.w2, eps, c.step_size,
         c.bc2_sqrt, grad_scale);
  return TSR_OK;
}

// AdamW over the segments of flat buffers: element i finds its segment by binary search
// (the table is small and cached), skips itself when in none, and updates with that
// segment's decay factor — the arithmetic of k_adamw, so bitwise one launch per segment.
__global__ void k_adamw_multi(float *param, const float *grad, float *m, float *v, size_t n,
                              const kernels_param_segment *segs, int n_segs, float decay_wd,
                              float decay_0, float w1, float beta2, float w2, float eps,
                              float step_size, float bc2_sqrt, float grad_scale) {
  GRID_STRIDE(i, n) {
    int lo = 0, hi = n_segs;  // the first segment that ends after i
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (segs[mid].offset + segs[mid].numel <= (long long)i) lo = mid + 1;
      else hi = mid;
    }
    if (lo == n_segs || (long long)i < segs[lo].offset) continue;
    float g = grad[i] * grad_scale;
    float p = param[i] * (segs[lo].decay ? decay_wd : decay_0);
    float mi = m[i] + w1 * (g - m[i]);
    float vi = v[i] * beta2 + w2 * g * g;
    float denom = sqrtf(vi) / bc2_sqrt + eps;
    param[i] = p + (-step_size) * (mi / denom);
    m[i] = mi;
    v[i] = vi;
  }
}

// The table's checks (kernels.h): in order, not overlapping, inside [0, n), decay 0/1.
__global__ void k_check_segs(kcu_dev_error *err, const kernels_param_segment *segs, int n_segs,
                             long long n) {
  for (int s = threadIdx.x; s < n_segs; s += blockDim.x) {
    kernels_param_segment g = segs[s];
    long long prev_end = s > 0 ? segs[s - 1].offset + segs[s - 1].numel : 0;
    if (g.offset < prev_end || g.numel < 0 || g.offset > n || g.numel > n - g.offset ||
        (g.decay != 0 && g.decay != 1))
      kcu_report(err, KCU_BAD_SEGS, KCU_E_ADAMW_MULTI, g.offset, s);
  }
}

static tsr_status cu_adamw_update_multi(kb_t *kb, float *param, const float *grad, float *m,
                                        float *v, size_t n, const kernels_param_segment *segs,
                                        int n_segs, float lr, float beta1, float beta2, float eps,
                                        float weight_decay, int64_t step, float grad_scale) {
  const char *op = "adamw_update_multi";
  kernels_adamw_scalars cd = {}, c0 = {};
  tsr_status st = kernels_adamw_prepare(lr, beta1, beta2, weight_decay, step, &cd);
  if (!st) st = kernels_adamw_prepare(lr, beta1, beta2, 0.0f, step, &c0);
  if (st) return st;
  if (n_segs < 0) return err_set(TSR_EINVAL, "%s: n_segs = %d is negative", op, n_segs);
  if (n_segs == 0 || n == 0) return TSR_OK;
  KCU_NEED(op, segs);
  KCU_NEED(op, param);
  KCU_NEED(op, grad);
  KCU_NEED(op, m);
  KCU_NEED(op, v);
  cudaStream_t s = kcu(kb)->stream;
  k_check_segs<<<1, 256, 0, s>>>(kcu(kb)->err, segs, n_segs, (long long)n);
  KCU_LAUNCHED(op);
  LAUNCH(op, k_adamw_multi, n, param, grad, m, v, n, segs, n_segs, cd.decay, c0.decay, cd.w1,
         beta2, cd.w2, eps, cd.step_size, cd.bc2_sqrt, grad_scale);
  return TSR_OK;
}

__global__ void k_ema(float *ema, const float *p, size_t n, float decay, float w) {
  GRID_STRIDE(i, n) ema[i] = ema[i] * decay + p[i] * w;
}

static tsr_status cu_ema_update(kb_t *kb, float *ema, const float *param, size_t n, float decay) {
  if (!(decay >= 0.0f && decay <= 1.0f))
    return err_set(TSR_EINVAL, "ema_update: decay = %g must be in [0, 1]", (double)decay);
  if (n == 0) return TSR_OK;
  KCU_NEED("ema_update", ema);
  KCU_NEED("ema_update", param);
  LAUNCH("ema_update", k_ema, n, ema, param, n, decay, (float)(1.0 - (double)decay));
  return TSR_OK;
}

// ---- the context and the table ----------------------------------------------------------
static kcu_ctx g_ctx;
static kernels_backend g_kb;
static char g_why[256];

// The backend's switches that make it unusable when wrong, checked before the device is
// touched: 0 with the reason in g_why.
static int check_switches(void) {
  const char *gr = getenv("TESSERA_CUDA_GRAPHS");
  if (gr && strcmp(gr, "0") && strcmp(gr, "1")) {
    snprintf(g_why, sizeof g_why, "TESSERA_CUDA_GRAPHS=%.32s: use 1 (record and replay the "
             "model's forward and backward) or 0 (eager, the default)", gr);
    return 0;
  }
  return 1;
}

// Opens the device: 1, or 0 with the reason in g_why (the failing call and CUDA's error).
// The runtime's last error is cleared on failure: the reason is kept in g_why, and the
// error must not surface again at some later, unrelated launch check (a sticky error is not
// hidden by this: every later call of the runtime returns it again).
static int init_backend(void) {
  if (!check_switches()) return 0;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    snprintf(g_why, sizeof g_why, "no usable CUDA device: cudaGetDeviceCount: %s (%s)",
             cudaGetErrorString(e), cudaGetErrorName(e));
    cudaGetLastError();
    return 0;
  }
  if (count <= 0) {
    snprintf(g_why, sizeof g_why, "no CUDA device visible (cudaGetDeviceCount found 0)");
    return 0;
  }
  kcu_ctx *x = &g_ctx;
  const char *step = "cudaGetDevice";
  int smem = 0;
  if ((e = cudaGetDevice(&x->device)) != cudaSuccess) goto fail;
  step = "cudaDeviceGetAttribute";
  if ((e = cudaDeviceGetAttribute(&x->sms, cudaDevAttrMultiProcessorCount, x->device)) != cudaSuccess ||
      (e = cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, x->device)) != cudaSuccess)
    goto fail;
  x->smem_optin = (size_t)smem;
  step = "cudaStreamCreateWithFlags";
  if ((e = cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking)) != cudaSuccess) goto fail;
  // The cuBLASLt workspace is carved from the arena when it is made (kcu_arena_ready).
  step = "cudaMalloc (error word)";
  if ((e = cudaMalloc((void **)&x->err, sizeof(kcu_dev_error))) != cudaSuccess) goto fail;
  // Zeroed on the backend's stream, so that every kernel queued there later sees the zero
  // (cudaMalloc does not clear; a cudaMemset on the legacy stream is not ordered before
  // work on this non-blocking one). The wait reports a failure here, not at the first sync.
  step = "zeroing the error word (cudaMemsetAsync on the backend's stream)";
  if ((e = cudaMemsetAsync(x->err, 0, sizeof(kcu_dev_error), x->stream)) != cudaSuccess ||
      (e = cudaStreamSynchronize(x->stream)) != cudaSuccess)
    goto fail;
  {
    const char *g = getenv("TESSERA_CUDA_LT_GELU");
    x->lt_gelu = !(g && !strcmp(g, "0"));
    const char *lg = getenv("TESSERA_CUDA_LT_LOG");
    x->lt_log = lg && !strcmp(lg, "1");
    cublasStatus_t s = cublasLtCreate(&x->lt);
    if (s != CUBLAS_STATUS_SUCCESS) {
      snprintf(g_why, sizeof g_why, "cublasLtCreate: %s (cuBLASLt status %d)",
               cublasLtGetStatusString(s), (int)s);
      return 0;
    }
  }
  return 1;
fail:
  snprintf(g_why, sizeof g_why, "CUDA backend setup: %s: %s (%s)", step, cudaGetErrorString(e),
           cudaGetErrorName(e));
  cudaGetLastError();
  return 0;
}

static int init_once(void) {
  static const int ok = [] {
    if (!init_backend()) return 0;
    kernels_backend *b = &g_kb;
    b->name = "cuda";
    b->ctx = &g_ctx;
    b->act_dtype = KERNELS_BF16;
    b->device_memory = 1;
    b->stream = g_ctx.stream;
    b->alloc = cu_alloc;
    b->free = cu_free;
    b->to_device = cu_to_device;
    b->to_host = cu_to_host;
    b->copy = cu_copy;
    b->memset_zero = cu_memset_zero;
    b->sync = cu_sync;
    b->reserve = cu_reserve;
    // Recorded graphs only when asked for (docs/gpu.md): without them the model never
    // records (kernels.h: NULL entries).
    const char *gr = getenv("TESSERA_CUDA_GRAPHS");
    if (gr && !strcmp(gr, "1")) {
      b->graph_begin = kcu_graph_begin;
      b->graph_end = kcu_graph_end;
      b->graph_launch = kcu_graph_launch;
      b->graph_free = kcu_graph_free;
    }
    b->memory_stats = cu_memory_stats;
    b->mem_info = cu_mem_info;
    b->path_stats = cu_path_stats;
    b->cast = cu_cast;
    b->fill = cu_fill;
    b->scale = cu_scale;
    b->add = cu_add;
    b->axpy = cu_axpy;
    b->add_act = cu_add_act;
    b->axpy_act = cu_axpy_act;
    b->u8_affine = cu_u8_affine;
    b->gemm = kcu_gemm;
    b->linear_forward = kcu_linear_forward;
    b->linear_backward = kcu_linear_backward;
    b->layernorm_forward = cu_layernorm_forward;
    b->layernorm_backward = cu_layernorm_backward;
    b->rmsnorm_forward = cu_rmsnorm_forward;
    b->rmsnorm_backward = cu_rmsnorm_backward;
    b->modulate_forward = cu_modulate_forward;
    b->modulate_backward = cu_modulate_backward;
    b->gate_residual_forward = cu_gate_residual_forward;
    b->gate_residual_backward = cu_gate_residual_backward;
    b->rope_forward = cu_rope_forward;
    b->rope_backward = cu_rope_backward;
    b->gelu_forward = cu_gelu_forward;
    b->gelu_backward = cu_gelu_backward;
    b->silu_forward = cu_silu_forward;
    b->silu_backward = cu_silu_backward;
    b->timestep_embedding = cu_timestep_embedding;
    b->embedding_forward = cu_embedding_forward;
    b->embedding_backward = cu_embedding_backward;
    b->attention_forward = kcu_attention_forward;
    b->attention_backward = kcu_attention_backward;
    b->attention_partial_forward = kcu_attention_partial_forward;
    b->attention_merge = kcu_attention_merge;
    b->attention_delta = kcu_attention_delta;
    b->attention_partial_backward = kcu_attention_partial_backward;
    b->objective_inputs = cu_objective_inputs;
    b->euler_update = cu_euler_update;
    b->mse_forward = cu_mse_forward;
    b->mse_backward = cu_mse_backward;
    b->sumsq = cu_sumsq;
    b->adamw_update = cu_adamw_update;
    b->ema_update = cu_ema_update;
    b->adamw_update_multi = cu_adamw_update_multi;
    b->layernorm_modulate_forward = cu_layernorm_modulate_forward;
    b->layernorm_modulate_backward = cu_layernorm_modulate_backward;
    b->qk_norm_rope_forward = cu_qk_norm_rope_forward;
    b->qk_norm_rope_backward = cu_qk_norm_rope_backward;
    b->linear_gelu_forward = kcu_linear_gelu_forward;
    b->linear_backward_dgelu = kcu_linear_backward_dgelu;
    return 1;
  }();

  return ok;
}

extern "C" int kernels_cuda_available(char *why, size_t n) {
  int ok = init_once();
  if (why && n) snprintf(why, n, "%s", ok ? "ok" : g_why);
  return ok;
}

extern "C" const kernels_backend *kernels_cuda(void) { return init_once() ? &g_kb : NULL; }
