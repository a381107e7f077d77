// model/dist/ring_attention.h — bidirectional attention of packed clips split across a CP group.
//
// A group of k ranks runs a microbatch of clips; clip c of L_c tokens is split into k
// contiguous chunks (ring_chunk: the first L_c % k chunks get one token more) and rank p
// of the group holds chunk p of every clip, packed in clip order. Each rank's queries
// must attend to all keys of their clip, which are spread over the group:
//
// Forward: the K/V block of the local chunks travels around the ring (to rank p+1,
// from rank p-1) k-1 times. At each step the local queries attend to the block in hand
// (kernels attention_partial_forward) and the partial result is merged exactly by the
// log-sum-exp of each query row (attention_merge); the exchange of the next block is
// started before that computation, so communication overlaps it.
// Backward: the K/V blocks travel again, and behind each its gradient accumulator: at
// each step the local queries add their contribution to dq and compute their share of the
// block's dk/dv into a buffer of their own (attention_partial_backward, with the final out,
// lse and delta = rowsum(dout * out)) while the accumulator is on its way from the previous
// rank; the share is then added and the accumulator sent on, to travel while the next rank
// computes. After k sends every block's dk/dv is back with its owner.
//
// Compute goes through the kernels backend kb and every exchange through the
// communication backend cb (comm/comm.h), whose memory space must be kb's: host memory
// for the CPU backend with "mpi"; device memory for a GPU backend with "nccl" or
// "mpi-staged", where an exchange started before a block's attention overlaps it on the
// stream. With k = 1 both directions are the backend's own full attention.
#ifndef TESSERA_MODEL_RING_ATTENTION_H
#define TESSERA_MODEL_RING_ATTENTION_H

#include <stdint.h>
#include "comm/comm.h"
#include "core/err.h"
#include "kernels/kernels.h"
#include "model/dist/cp_workspace.h"

// Chunk o of k of a clip of L tokens: first token index and length.
void ring_chunk(int64_t L, int k, int o, int64_t *first, int64_t *len);

typedef struct ring_attention ring_attention;

// A ring over group g (comm_group_get(k)) computing on kb and exchanging with cb. Buffers
// grow on demand.
tsr_status ring_attention_create(ring_attention **ra, const kernels_backend *kb,
                                 const comm_backend *cb, comm_group *g);
void ring_attention_free(ring_attention **ra);

// The clips of the next microbatch: n_clips total lengths (host), identical on every
// rank of the group. The local chunk lengths follow from ring_chunk.
tsr_status ring_attention_set_clips(ring_attention *ra, int n_clips, const int64_t *clip_tokens);

// The microbatch's attention mask (kernels.h kernels_mask; model.attn_mask), after
// set_clips and before forward: pos (Lq, 3) int32 (backend memory) are this rank's tokens'
// grid positions (the RoPE positions), gathered from every rank of the group (collective,
// one allgather of k * 3 * the largest block), so that each (query chunk, key block) pair of
// the ring runs the backend's masked entries with both sides' positions. FULL (the state
// after set_clips): no mask, pos unused. Needs the backend's masked entries.
tsr_status ring_attention_set_mask(ring_attention *ra, kernels_mask mask, const int32_t *pos);

// Forward over this rank's chunks: q, k, v, out: (Lq, H, Dh) [act], lse: (Lq, H) [f32],
// with Lq the sum of this rank's chunk lengths. out, lse overwritten. Collective over the
// group; the K/V blocks travel in the act dtype (half the bytes with bf16).
tsr_status ring_attention_forward(ring_attention *ra, void *out, float *lse, const void *q,
                                  const void *k, const void *v, int H, int Dh, float scale);
// Backward: dq, dk, dv (Lq, H, Dh) [act] overwritten, from dout and the forward's out and
// lse.
tsr_status ring_attention_backward(ring_attention *ra, void *dq, void *dk, void *dv,
                                   const void *dout, const void *q, const void *k,
                                   const void *v, const void *out, const float *lse, int H,
                                   int Dh, float scale);

// The ring's work buffers come from workspace ws, region `region` (model/dist/cp_workspace.h),
// instead of its own; ws outlives the ring.
void ring_attention_use_workspace(ring_attention *ra, cp_workspace *ws, int region);

// Backend bytes of a ring of a group of k ranks with up to max_clips clips (its index
// arrays), and of its work buffers for blocks of up to maxblk tokens with activations of
// dtype act (0 for k = 1: a group of one attends locally): the memory model's communication
// workspace (model/train/memory.h), kept beside the allocations it counts; the trainer's
// memory check (tests/train/memory.sh) compares the model with the backend's measured peak.
size_t ring_attention_index_bytes(int k, int max_clips);
size_t ring_attention_work_bytes(kernels_dtype act, int k, int64_t maxblk, int H, int Dh);

#endif
