// kernels/cuda/backend.cu — the CUDA backend's context and its table (kernels_cuda()):
// the device, stream and cuBLASLt handle it opens once, the switches that make it unusable
// when wrong, the error helpers every entry returns through (CUDA and cuBLASLt failures,
// the device error word that sync reports), and the table, filled by each op family's
// file (kcu.h "The families' entries"): memory.cu, elementwise.cu, layernorm.cu,
// rmsnorm.cu, objective.cu, reduce.cu, adamw.cu; gemm.cu, attention.cu and graph.cu
// provide their entries by name. Math of every entry: exactly the CPU backend's
// (kernels/cpu/*.c), in fp32 with double where the CPU uses double; [act] tensors are
// bf16, rounded once on store (RNE).
//
// Determinism: no float atomics anywhere. Every reduction sums fixed slices in a fixed
// order (kcu_colsum, sumsq, mse) or belongs to one warp with a fixed shuffle tree (norm
// rows, attention_delta), so results are bitwise reproducible on the same GPU model for
// the same inputs (and launch configuration, which depends only on the shapes).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    "adamw_update_multi", "layernorm_modulate_forward", "layernorm_modulate_backward",
    "qk_norm_rope_forward", "qk_norm_rope_backward"};

// Reads and clears the device error word, after everything queued before (waits for the
// stream). Both the read and the reset are queued on the backend's stream, which every
// kernel that writes the word runs on: the legacy default stream (plain cudaMemcpy,
// cudaMemset) does not order against a non-blocking stream, and cudaMemset of device
// memory returns before it is done, so a reset there could land after the next entry's
// kernel had reported into the word and erase that report.
tsr_status kcu_check_error(kb_t *kb, const char *op) {
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

// ---- calls per implementation (kernels.h path_stats) -------------------------------------
static tsr_status cu_path_stats(kb_t *kb, kernels_path_stats *out) {
  if (!out) return err_set(TSR_EINVAL, "path_stats: out is NULL");
  *out = kcu(kb)->paths;
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
    // Each op family's file sets its own entries (kcu.h "The families' entries").
    kcu_memory_entries(b);
    kcu_elementwise_entries(b);
    kcu_layernorm_entries(b);
    kcu_rmsnorm_entries(b);
    kcu_objective_entries(b);
    kcu_reduce_entries(b);
    kcu_adamw_entries(b);
    // Recorded graphs only when asked for (docs/gpu.md): without them the model never
    // records (kernels.h: NULL entries).
    const char *gr = getenv("TESSERA_CUDA_GRAPHS");
    if (gr && !strcmp(gr, "1")) {
      b->graph_begin = kcu_graph_begin;
      b->graph_end = kcu_graph_end;
      b->graph_launch = kcu_graph_launch;
      b->graph_free = kcu_graph_free;
    }
    b->path_stats = cu_path_stats;
    b->gemm = kcu_gemm;
    b->gemm_strided = kcu_gemm_strided;
    b->gemm_batched = kcu_gemm_batched;
    b->linear_forward = kcu_linear_forward;
    b->linear_backward = kcu_linear_backward;
    b->linear_gelu_forward = kcu_linear_gelu_forward;
    b->linear_backward_dgelu = kcu_linear_backward_dgelu;
    b->attention_forward = kcu_attention_forward;
    b->attention_backward = kcu_attention_backward;
    b->attention_partial_forward = kcu_attention_partial_forward;
    b->attention_merge = kcu_attention_merge;
    b->attention_delta = kcu_attention_delta;
    b->attention_partial_backward = kcu_attention_partial_backward;
    b->attention_masked_forward = kcu_attention_masked_forward;
    b->attention_masked_backward = kcu_attention_masked_backward;
    b->attention_masked_partial_backward = kcu_attention_masked_partial_backward;

    // What no family sets is unsupported here: a clear error, never a NULL call.
    kernels_fill_unsupported(b);
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
