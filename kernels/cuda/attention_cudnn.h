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

// ---- masked entries (kernels.h attention_masked_*): the pair list ---------------------------
// A query chunk's visible keys under block_causal (chunks of `chunk` frames, window W) are
// the keys of chunks [max(0, i - W), i] (W = 0: [0, i]) of its clip; under window, where the
// spatial radii reach every tile of the frame (wh, ww at least the call's rows' spread in
// tiles, max - min of y / tile_h and of x / tile_w), a temporal tile i's (of tile_t frames)
// are the keys of tiles [i - wt, i + wt]. Either is one contiguous range of token rows when
// each clip's rows are in order of t (the model's raster order, a CP chunk's slice of it):
// so the call is one cuDNN batch whose sequences are the (clip, query chunk) groups (a
// window's chunk: one temporal tile), each with its own query rows and its key range
// (ragged offsets; key ranges of neighbouring chunks overlap, which cuDNN only reads), every
// masked-out pair skipped whole. The backward (attention_cudnn.cu kcu_sdpa_masked_backward):
// where a key row lies in at most 4 query chunks' ranges (block_causal W of 1 to 3, window
// wt 0 or 1) one such batch, dk and dv shares at their own offsets summed per key row; else
// two batches: dq from the query-chunk groups, dk and dv from the (clip, key chunk) groups
// against their visible query range ([chunk j, j + W], W = 0: to the clip's end; window
// [j - wt, j + wt]), each batch's other gradients scratch.
// The groups are found on the device from cu and the positions (no host sync, so a
// recorded graph serves every packing); a clip may have at most KCU_SDPA_MASK_GROUPS
// (sdpa.h) chunks in a call. Where the device finds a call the list does not fit (rows out
// of order of t, more chunks, a group longer than the plan, a window whose wh or ww is
// below that spread: a key can then be out of a query's box in y or x), every group is
// emptied and *gate (a device int in the call's scratch) reads 1: the caller then launches
// its own kernels with the gate, and they compute the call; otherwise the gate reads 0 and
// those kernels return at once. Shapes: out, q, dq, dout (Lq, H, Dh), k, v, dk, dv (Lk, H,
// Dh) [act]; lse (Lq, H) [f32]; cu_q, cu_k (C + 1); pos_q (Lq, 3), pos_k (Lk, 3) int32;
// device memory. *done = 0 (gate NULL): the own kernels take the call without a gate (the
// full mask, TESSERA_CUDA_ATTENTION=own, no cuDNN or no plan in auto mode).
// Arguments as the masked entries (kernels/entries.h), checked by the caller.
tsr_status kcu_sdpa_masked_forward(kb_t *kb, const char *op, int *done, const int32_t **gate, void *out,
                                   float *lse, const void *q, const void *k, const void *v,
                                   const int32_t *cu_q, const int32_t *cu_k, const int32_t *pos_q,
                                   const int32_t *pos_k, kernels_mask mask, int n_clips, int max_q,
                                   int max_k, int Lq, int Lk, int H, int Dh, float scale);
// partial = 0: attention_masked_backward (dq, dk, dv overwritten; cu_q == cu_k); 1:
// attention_masked_partial_backward (accumulated; out, lse final). *delta_ws: (Lq, H) [f32]
// scratch of the call for the gated own kernels' delta (the non-partial entry computes it
// there: the own backward's scratch would overwrite the gate).
tsr_status kcu_sdpa_masked_backward(kb_t *kb, const char *op, int partial, int *done,
                                    const int32_t **gate, float **delta_ws, void *dq, void *dk,
                                    void *dv, const void *dout, const void *q, const void *k,
                                    const void *v, const void *out, const float *lse,
                                    const int32_t *cu_q, const int32_t *cu_k, const int32_t *pos_q,
                                    const int32_t *pos_k, kernels_mask mask, int n_clips, int max_q,
                                    int max_k, int Lq, int Lk, int H, int Dh, float scale);

#endif
