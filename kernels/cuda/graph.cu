// kernels/cuda/graph.cu — recorded graphs of the CUDA backend (kernels.h graph_*): the
// stream's work between graph_begin and graph_end captured into a CUDA graph, replayed by
// one cudaGraphLaunch. What to record and when is kernels/graph_cache.h's (host C).
//
// Why capture is safe here:
// - memory: every buffer is a range of the one arena (no cudaMalloc in a step); the only
//   buffer that can move is the scratch (kcu_scratch grows by a new range): it refuses to
//   grow while recording, and a graph remembers the scratch it was recorded with, so a
//   later growth makes graph_launch answer "stale" instead of replaying with a freed range;
// - cuBLASLt: the workspace is ours (in the arena), passed to every cublasLtMatmul; plans
//   (heuristics: host only) are built by the eager runs before a recording;
// - cuDNN: the fused attention's plans are built by the eager runs (building one during a
//   capture would fail the recording: the cache then keeps that shape eager), its workspace
//   comes from kcu_scratch, its ragged offsets are computed on the device from cu_seqlens
//   (so a graph serves every packing of the same token and clip counts);
// - nothing in the forward and backward of the model waits for the device: the entries
//   that would (sync, to_host, to_device, sumsq, alloc, reserve) refuse while recording.
// Capture mode: thread-local (only this thread's unsafe calls break the recording; MPI/NCCL
// progress threads are left alone).
// Not done: updating a graph in place (cudaGraphExecUpdate) when only pointers change;
// a recording that fails is reported once by the caller and that shape stays eager.
#include <stdlib.h>

#include "kernels/cuda/kcu.h"

struct kcu_graph {
  cudaGraphExec_t exec;
  void *scratch;  // kcu_ctx.scratch when recorded: the graph's kernels use this range
};

extern "C" tsr_status kcu_graph_begin(kb_t *kb) {
  kcu_ctx *x = kcu(kb);
  if (x->capturing) return err_set(TSR_EINVAL, "graph_begin: a graph is being recorded already");
  if (x->per_alloc)
    return err_set(TSR_EINVAL, "graph_begin: TESSERA_CUDA_ARENA=none allocates per call: no "
                   "recorded graphs in that mode");
  // Errors queued before belong to eager work: report them now, not as a capture failure.
  KCU_CUDA("graph_begin", cudaGetLastError());
  KCU_CUDA("graph_begin", cudaStreamBeginCapture(x->stream, cudaStreamCaptureModeThreadLocal));
  x->capturing = 1;
  x->cap_scratch = x->scratch;
  return TSR_OK;
}

extern "C" tsr_status kcu_graph_end(kb_t *kb, void **out) {
  kcu_ctx *x = kcu(kb);
  *out = NULL;
  if (!x->capturing) return err_set(TSR_EINVAL, "graph_end: no graph_begin before it");
  cudaGraph_t g = NULL;
  cudaError_t e = cudaStreamEndCapture(x->stream, &g);
  x->capturing = 0;
  if (e != cudaSuccess) {
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();  // the capture's error is reported here, not to the next entry
    return kcu_cuda_fail("graph_end", "cudaStreamEndCapture", e);
  }
  if (x->scratch != x->cap_scratch) {  // kcu_scratch refuses this; kept as a guard
    cudaGraphDestroy(g);
    return err_set(TSR_EINVAL, "graph_end: the scratch buffer moved while recording");
  }
  cudaGraphExec_t exec = NULL;
  e = cudaGraphInstantiateWithFlags(&exec, g, 0);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return kcu_cuda_fail("graph_end", "cudaGraphInstantiateWithFlags", e);
  }
  kcu_graph *kg = (kcu_graph *)malloc(sizeof *kg);
  if (!kg) {
    cudaGraphExecDestroy(exec);
    return err_set(TSR_ENOMEM, "graph_end: no memory");
  }
  kg->exec = exec;
  kg->scratch = x->cap_scratch;
  *out = kg;
  return TSR_OK;
}

extern "C" tsr_status kcu_graph_launch(kb_t *kb, void *graph, int *stale) {
  kcu_ctx *x = kcu(kb);
  KCU_NEED("graph_launch", graph);
  KCU_NEED("graph_launch", stale);
  kcu_graph *kg = (kcu_graph *)graph;
  *stale = kg->scratch != x->scratch;
  if (*stale) return TSR_OK;
  KCU_NOT_RECORDING(kb, "graph_launch");
  KCU_CUDA("graph_launch", cudaGraphLaunch(kg->exec, x->stream));
  return TSR_OK;
}

extern "C" void kcu_graph_free(kb_t *kb, void *graph) {
  if (!graph) return;
  kcu_graph *kg = (kcu_graph *)graph;
  // A graph launched but not finished may still be executing: cudaGraphExecDestroy is safe
  // then (the CUDA runtime defers the release until the launch completes).
  cudaGraphExecDestroy(kg->exec);
  free(kg);
}
