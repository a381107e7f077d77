// kernels/cuda/attention_cudnn_graph.h — private to the CUDA backend's cuDNN attention path:
// the cuDNN operation graphs of the fused SDPA (attention_cudnn_graph.cu), built with the
// backend API (cudnnBackend* descriptors), and the small builder the plan code
// (attention_cudnn_plan.cu) also uses for its heuristics and engine descriptors.
//
// Every descriptor of a graph (and of its plan search) lives in one sdpa_graph and is
// destroyed with it. The builder functions latch the first failure (st, what) and do
// nothing after it, so a graph definition reads as a straight line checked once at the end.
#ifndef TESSERA_KERNELS_CUDA_ATTENTION_CUDNN_GRAPH_H
#define TESSERA_KERNELS_CUDA_ATTENTION_CUDNN_GRAPH_H

#include <cudnn.h>
#include <stdint.h>

extern "C" {
#include "kernels/cuda/sdpa.h"
}

enum { SG_MAX_DESC = 224, SG_MAX_OPS = 48 };
struct sdpa_graph {
  cudnnBackendDescriptor_t desc[SG_MAX_DESC];
  int n_desc;
  cudnnBackendDescriptor_t ops[SG_MAX_OPS];
  int n_ops;
  int64_t next_uid;  // of virtual tensors
  cudnnStatus_t st;  // first failure
  char what[200];    // its call and object
};

// Unique ids of the tensors a call binds (the variant pack); virtual tensors from 1000.
enum {
  U_Q = 1, U_K, U_V, U_O, U_STATS, U_DO, U_DQ, U_DK, U_DV, U_SCALE, U_NEG_INF, U_ONE,
  U_SEQ_Q, U_SEQ_KV, U_OFF_Q, U_OFF_K, U_OFF_V, U_OFF_O, U_OFF_S, U_DELTA, U_DQ_ACC,
  U_OFF_DKV,  // KCU_SDPA_MASKED_BWD: dK's and dV's own ragged offsets
  U_VIRTUAL = 1000
};

// The graph of key (kcu_sdpa_backward_kind: the backward graph, else the forward one) and
// its finalized operation graph *graph, for handle (NULL: planning without a GPU). NULL
// only when out of host memory; otherwise g->st != CUDNN_STATUS_SUCCESS says what failed
// (g->what). Free with sg_destroy.
sdpa_graph *sdpa_graph_build(const kcu_sdpa_key *key, cudnnHandle_t handle,
                             cudnnBackendDescriptor_t *graph);
void sg_destroy(sdpa_graph *g);

// The builder: records the first failure of call on object name (a no-op after one).
void sg_fail(sdpa_graph *g, cudnnStatus_t s, const char *call, const char *name);
// A new descriptor owned by g (NULL after a failure).
cudnnBackendDescriptor_t sg_new(sdpa_graph *g, cudnnBackendDescriptorType_t type, const char *name);
#define SG_SET(g, d, attr, type, n, v, name) sg_set((g), (d), (attr), (type), (n), (v), #attr, (name))
void sg_set(sdpa_graph *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr,
            cudnnBackendAttributeType_t type, int64_t n, const void *v, const char *attr_name,
            const char *name);
void sg_finalize(sdpa_graph *g, cudnnBackendDescriptor_t d, const char *name);

#endif
