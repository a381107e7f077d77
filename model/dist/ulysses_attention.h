// model/dist/ulysses_attention.h — bidirectional attention of packed clips split across a CP
// group by an all-to-all over heads (DeepSpeed-Ulysses), the alternative to ring attention.
//
// The sequence layout is ring attention's (model/dist/ring_attention.h): rank p of a group
// of k holds chunk p (ring_chunk) of every clip, packed in clip order: (Lq, H, Dh). An
// all-to-all turns q, k and v into the head layout: rank p then holds EVERY token of every
// clip (clips whole, in clip order: (Lt, h_p, Dh) with Lt the microbatch's tokens) for its
// h_p heads, heads ring_chunk(H, k, p) (the first H % k ranks one head more; with k > H
// some ranks hold none and only pass data on). Attention then runs locally with the
// backend's full varlen entry (its masked entries under a mask, with every token's position:
// ulysses_attention_set_mask), and an all-to-all turns the output and log-sum-exp back.
// The result is the single-rank attention's, head by head: on the CPU bitwise.
//
// Backward: q, k, v, out, dout and lse go to the head layout again (the block keeps the
// sequence layout; nothing head-split is held between forward and backward), the backend's
// attention_backward runs on whole clips, and dq, dk, dv come back. Traffic per call, in
// (Lq, H, Dh) tensors: forward 3 out + 1 back, backward 5 out + 3 back (plus lse), every
// byte crossing the group once, against ring attention's k - 1 passes of K/V (and dK/dV).
//
// Pipelining (ulysses_attention_set_chunks, train.ulysses_chunks): each rank's heads are cut
// into C chunks (ring_chunk of its heads; C at most its head count, member 0's), and the
// transfers run per chunk, non-blocking (comm_backend.ialltoallv): chunk c + 1's q, k, v (the
// backward's six tensors) travel while chunk c attends, and chunk c's output travels back
// while chunk c + 1 attends; only the first chunk's transfer in and the last one's back are
// exposed (sched/cost.h prices it so). Attention is independent per head, so the result is
// the blocking path's (C = 1: one all-to-all a tensor, each waited for) bitwise on the CPU.
// The price is staging: a chunk's tensors in flight in both directions at once
// (ulysses_attention_work_bytes).
//
// Hybrid CP (USP): a group of k = u x r ranks, rank p = i*u + j, runs Ulysses over the u
// ranks of its block i (an aligned group) and ring attention over the r ranks with the same
// j (a stride group, comm_stride_group). Its sequence layout differs: a clip is cut into r
// super-chunks (ring_chunk(L, r, i)) and each into u chunks (ring_chunk(len_i, u, j)):
// hybrid_chunk. The Ulysses all-to-all over the block gathers super-chunk i whole for the
// block's heads ring_chunk(H, u, j), which is exactly ring attention's layout over the
// stride group (chunk i of every clip, for those heads); the ring then runs in place of the
// local attention (an `inner` ring) and the all-to-all takes the result back.
//
// Compute goes through the kernels backend kb (copy_2d packs a rank's head slice) and the
// all-to-alls through the communication backend cb (ialltoallv, waited for at once when
// blocking), in kb's memory space. With k = 1 both directions are the backend's own full
// attention.
#ifndef TESSERA_MODEL_ULYSSES_ATTENTION_H
#define TESSERA_MODEL_ULYSSES_ATTENTION_H

#include <stdint.h>
#include "comm/comm.h"
#include "core/err.h"
#include "kernels/kernels.h"

#include "model/dist/ring_attention.h"

// Chunk p of a clip of L tokens in a hybrid group of k ranks with Ulysses over u (u divides
// k): first token and length (ring_chunk(L, k, p) when u = k or u = 1).
void hybrid_chunk(int64_t L, int k, int u, int p, int64_t *first, int64_t *len);

typedef struct ulysses_attention ulysses_attention;

// Head chunks the transfers are pipelined over unless set otherwise (train.ulysses_chunks'
// default).
enum { ULYSSES_DEFAULT_CHUNKS = 2 };

// Over group g (comm_group_get(k)), computing on kb and exchanging with cb; `inner` NULL,
// or the ring of a hybrid group (over comm_stride_group, not owned) that attends in the
// head layout instead of the backend. Buffers grow on demand.
tsr_status ulysses_attention_create(ulysses_attention **ua, const kernels_backend *kb,
                                    const comm_backend *cb, comm_group *g,
                                    ring_attention *inner);
void ulysses_attention_free(ulysses_attention **ua);

// The clips of the next microbatch: n_clips total lengths (host), identical on every rank
// of the group (a hybrid group's block: the lengths of its super-chunks, and the inner
// ring's own clips set to the whole lengths by the caller).
tsr_status ulysses_attention_set_clips(ulysses_attention *ua, int n_clips,
                                       const int64_t *clip_tokens);

// The microbatch's attention mask (kernels.h kernels_mask; model.attn_mask), after
// set_clips and before forward: pos (Lq, 3) int32 (backend memory) are this rank's tokens'
// grid positions (the RoPE positions). Collective over the group: one allgather of k * 3 *
// the most tokens a member holds, put in the head layout, so that each rank's local
// attention over whole clips runs the backend's masked entries with every token's position
// (a hybrid group's inner ring is given its super-chunks' positions: ring_attention_set_mask,
// collective over the stride group). FULL (the state after set_clips): no mask, pos unused.
// Needs the backend's masked entries (the inner ring's too).
tsr_status ulysses_attention_set_mask(ulysses_attention *ua, kernels_mask mask,
                                      const int32_t *pos);

// Forward over this rank's chunks: q, k, v, out: (Lq, H, Dh) [act], lse: (Lq, H) [f32].
// out, lse overwritten. Collective over the group.
tsr_status ulysses_attention_forward(ulysses_attention *ua, void *out, float *lse, const void *q,
                                     const void *k, const void *v, int H, int Dh, float scale);
// Backward: dq, dk, dv (Lq, H, Dh) [act] overwritten, from dout and the forward's out, lse.
tsr_status ulysses_attention_backward(ulysses_attention *ua, void *dq, void *dk, void *dv,
                                      const void *dout, const void *q, const void *k,
                                      const void *v, const void *out, const float *lse, int H,
                                      int Dh, float scale);

// Pipeline the all-to-alls over `chunks` head chunks (1: blocking; more than a rank's heads:
// as many as it has). Every member of the group must set the same.
void ulysses_attention_set_chunks(ulysses_attention *ua, int chunks);

// The work buffers come from workspace ws, region `region` (model/dist/cp_workspace.h),
// instead of its own; ws outlives the object.
void ulysses_attention_use_workspace(ulysses_attention *ua, cp_workspace *ws, int region);

// Backend bytes of a group's index arrays for up to max_clips clips, and of its work
// buffers for microbatches of up to max_local tokens on a rank and max_total in all, with
// activations of dtype act, pipelined over `chunks` (0 for k = 1): the memory model's
// communication workspace (model/train/memory.h), kept beside the allocations it counts.
size_t ulysses_attention_index_bytes(int max_clips);
size_t ulysses_attention_work_bytes(kernels_dtype act, int k, int chunks, int64_t max_local,
                                    int64_t max_total, int H, int Dh);

#endif
