// kernels/cuda/attention_cudnn.h — private to the CUDA backend: the cuDNN fused-SDPA path of
// the attention entries (attention_cudnn.cu), called by attention.cu after its argument
// checks. Each function either runs the call through cuDNN (*done = 1), leaves it to the own
// kernels (*done = 0: TESSERA_CUDA_ATTENTION=own, or auto and cuDNN cannot take it), or
// fails (TSR_EINVAL naming the shape when TESSERA_CUDA_ATTENTION=cudnn and cuDNN cannot take
// it; TSR_EIO/TSR_ENOMEM naming the cuDNN or CUDA call). Shapes as in kernels.h; every
// pointer is device memory; the arguments were checked by the caller (non-NULL, sizes >= 0,
// Lq, H > 0, the cu_seqlens check queued).
#ifndef TESSERA_KERNELS_CUDA_ATTENTION_CUDNN_H
#define TESSERA_KERNELS_CUDA_ATTENTION_CUDNN_H

#include "kernels/cuda/kcu.h"

// attention_forward (cu_q == cu_k, Lq == Lk) and attention_partial_forward: out (Lq, H, Dh)
// [act] and lse (Lq, H) [f32] overwritten; a query whose clip has no key gets out = 0,
// lse = -INFINITY. q: (Lq, H, Dh), k, v: (Lk, H, Dh) [act], cu_q, cu_k: (C + 1) int32;
// max_q, max_k >= 0 bound the clips' lengths (kernels.h max_len) and size the plan.
tsr_status kcu_sdpa_forward(kb_t *kb, const char *op, int partial, int *done, void *out,
                            float *lse, const void *q, const void *k, const void *v,
                            const int32_t *cu_q, const int32_t *cu_k, int n_clips, int max_q,
                            int max_k, int Lq, int Lk, int H, int Dh, float scale);

// attention_backward: dq, dk, dv (L, H, Dh) [act] overwritten (any may be NULL: computed
// into scratch and dropped); dout, q, k, v, out (L, H, Dh) [act]; lse (L, H) [f32];
// max_len >= 0 bounds the clips' lengths.
tsr_status kcu_sdpa_backward(kb_t *kb, const char *op, int *done, void *dq, void *dk, void *dv,
                             const void *dout, const void *q, const void *k, const void *v,
                             const void *out, const float *lse, const int32_t *cu, int n_clips,
                             int max_len, int L, int H, int Dh, float scale);

// attention_partial_backward: the share of Lq queries' gradients from one block of Lk keys,
// ACCUMULATED into dq (Lq, H, Dh) and dk, dv (Lk, H, Dh) [act] (dq may be NULL; dk, dv both
// or neither), from dout, q, out (Lq, H, Dh), k, v (Lk, H, Dh) [act] and lse (Lq, H) [f32]:
// out and lse the queries' FINAL output and log-sum-exp (every block merged). cu_q, cu_k:
// (C + 1) int32; max_q, max_k >= 0 bound the clips' lengths.
tsr_status kcu_sdpa_partial_backward(kb_t *kb, const char *op, int *done, void *dq, void *dk,
                                     void *dv, const void *dout, const void *q, const void *k,
                                     const void *v, const void *out, const float *lse,
                                     const int32_t *cu_q, const int32_t *cu_k, int n_clips,
                                     int max_q, int max_k, int Lq, int Lk, int H, int Dh,
                                     float scale);

#endif
