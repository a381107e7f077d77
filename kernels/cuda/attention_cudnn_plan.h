// kernels/cuda/attention_cudnn_plan.h — private to the CUDA backend's cuDNN attention path:
// execution plans of the fused-SDPA graphs (attention_cudnn_graph.h), their cache in the
// backend's context, and running one (attention_cudnn_plan.cu); the entries that use them
// are attention_cudnn.cu's.
#ifndef TESSERA_KERNELS_CUDA_ATTENTION_CUDNN_PLAN_H
#define TESSERA_KERNELS_CUDA_ATTENTION_CUDNN_PLAN_H

#include <cudnn.h>

#include "kernels/cuda/attention_cudnn_graph.h"
#include "kernels/cuda/kcu.h"

struct sdpa_plan {
  kcu_sdpa_key key;
  int state;  // 0 empty slot, 1 ready, -1 the build failed (err says why), 2 compiled offline
  sdpa_graph *g;
  cudnnBackendDescriptor_t plan;
  int64_t workspace;
  int64_t engine;
  char notes[96];  // the engine's numerical notes
  unsigned long long used;  // LRU clock
  unsigned long calls;      // calls served (or, failed: sent to the own kernels)
  char err[768];
};

enum { SDPA_CACHE = 32 };
struct sdpa_state {
  tsr_status setup;  // TSR_OK, or why cuDNN is unusable (message in err)
  char err[400];
  kcu_attn_mode mode;
  int deterministic;
  cudnnHandle_t handle;
  kcu_sdpa_device dev;
  int64_t max_workspace;
  sdpa_plan cache[SDPA_CACHE];
  unsigned long long clock;
  unsigned long own_calls[KCU_SDPA_KINDS];  // sent to the own kernels without a plan lookup
  // masked calls queued on the pair list (attention_cudnn.h), by mask ([0] block_causal, [1]
  // window) and the kind of their plan (PARTIAL_FWD: attention_masked_forward; MASKED_BWD,
  // PARTIAL_BWD: both backward entries, in one batch or two)
  unsigned long mask_calls[2][KCU_SDPA_KINDS];
};

// The state of kb (created on first use: environment switches, cuDNN handle on the
// backend's stream). TSR_EINVAL only for a bad switch value; a cuDNN setup failure is kept
// in ->setup (auto: own kernels; cudnn: each call reports it).
tsr_status sdpa_state_of(kb_t *kb, sdpa_state **out);

// The ready plan of key, building it on a miss (LRU eviction). *plan = NULL when the build
// failed: TSR_OK in auto mode (own kernels), the error in cudnn mode.
tsr_status sdpa_plan_of(sdpa_state *S, const char *op, const kcu_sdpa_key *key, sdpa_plan **plan);

// Runs plan p on the backend's stream with the tensors uids[i] -> ptrs[i] (n of them) and
// the workspace ws (p->workspace bytes).
tsr_status sdpa_execute(const char *op, sdpa_state *S, sdpa_plan *p, const int64_t *uids, void **ptrs,
                        int n, void *ws);

#endif
