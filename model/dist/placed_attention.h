// model/dist/placed_attention.h — masked attention of packed clips over a CP group whose
// ranks hold the tokens a blockwise placement gives them (sched/placement.h).
//
// Rank p holds, of every clip in clip order, the tokens of its placement segments in token
// order (their queries, keys and values). Under the mask a query of mask block b needs the
// keys of blocks [lo, hi] only (placement_keys), so p needs of each other rank o exactly
// the tokens o holds in the union of its own segments' key ranges: the placement's recv[p]
// tokens in all. Forward: one all-to-all sends every rank only those K/V rows (packed per
// peer, in clip and token order), posted before p attends its queries to its own keys so
// that the rows travel meanwhile (cb's ialltoallv); then p attends to each peer's rows with
// the backend's masked entries, merging the partial results by their log-sum-exp.
// Backward: the same all-to-all again, travelling while p computes the share of dq, dK, dV
// of its own keys before the row where their work reaches half; then its shares of the
// received rows' dK/dV and their part of dq, posted back to their holders by a second
// all-to-all that travels while p computes the share of its other own keys; then each
// holder adds what returned (own share first, then the peers' in rank order). Each key's
// dK, dV sum over the queries in one call, as unsplit; dq gets the own keys' halves apart
// (first half, the peers' in rank order, second half): a rounding more than one call of
// all own keys, within the tests' 1e-5. The order of no sum depends on the overlap: with
// each exchange waited for as soon as posted, the same bits. No K/V row travels to a rank
// that does not need it, so the K/V bytes a rank receives are recv[p] * 2 * H * Dh * act
// bytes in the forward, the same again in the backward plus the gradient shares of its own
// rows the others computed (placed_attention_recv_tokens).
//
// Compute goes through kb, every exchange through cb's all-to-alls (comm/comm.h), in kb's
// memory space. With k = 1 both directions are the backend's masked entries on the clips.
// Its work buffers (the packed rows both ways, one partial output) are its own allocations,
// not a cp_workspace region; the distributed step (train.placement = blockwise) keeps one
// executor per group size, and the trainer's memory model counts each at
// placed_attention_work_bytes.
#ifndef TESSERA_MODEL_PLACED_ATTENTION_H
#define TESSERA_MODEL_PLACED_ATTENTION_H

#include <stdint.h>
#include "comm/comm.h"
#include "core/err.h"
#include "kernels/kernels.h"
#include "sched/placement.h"

typedef struct placed_attention placed_attention;

tsr_status placed_attention_create(placed_attention **pa, const kernels_backend *kb,
                                   const comm_backend *cb, comm_group *g);
void placed_attention_free(placed_attention **pa);

// The next microbatch, identical on every rank of the group but pos: n_clips placements
// pl[c] (host; each over k = the group's size ranks, of clip c's tokens, under cm), the
// kernels' form km of the same mask (kind, chunk, window, wt and tile_t must agree with
// cm's: TSR_EINVAL naming both otherwise), and pos (Lq, 3) int32 (backend memory): this
// rank's tokens' grid positions in its layout (header). Collective: one all-to-all of the
// positions each peer needs. Nothing of pl is kept.
tsr_status placed_attention_set_clips(placed_attention *pa, int n_clips, const placement *const *pl,
                                      const cost_mask *cm, kernels_mask km, const int32_t *pos);
// Lq: the tokens this rank holds (its queries).
int64_t placed_attention_tokens(const placed_attention *pa);
// K/V tokens this rank receives in a forward (*kv: the placements' recv of this rank,
// summed over the clips) and gradient rows of its own tokens it receives in a backward
// (*grad: the rows it sends the others in a forward).
void placed_attention_recv_tokens(const placed_attention *pa, int64_t *kv, int64_t *grad);

// on = 1 (the default): each exchange travels while the own keys are attended; 0: it is
// waited for as soon as it is posted (the same results; bench/dist/placed.c's baseline).
void placed_attention_set_overlap(placed_attention *pa, int on);

// An upper bound of the bytes one executor's buffers (buffers(), the positions, the
// set_clips staging) grow to for groups of k ranks holding at most lq tokens a rank, H heads
// of Dh in act: a rank sends every peer at most all its rows and receives from each at most
// all of the peer's, (k - 1) lq rows each way.
size_t placed_attention_work_bytes(kernels_dtype act, int k, int64_t lq, int H, int Dh);

// Forward: q, k, v, out: (Lq, H, Dh) [act], lse: (Lq, H) [f32]; out, lse overwritten.
tsr_status placed_attention_forward(placed_attention *pa, void *out, float *lse, const void *q,
                                    const void *k, const void *v, int H, int Dh, float scale);
// Backward: dq, dk, dv (Lq, H, Dh) [act] overwritten, from dout and the forward's out, lse.
tsr_status placed_attention_backward(placed_attention *pa, void *dq, void *dk, void *dv,
                                     const void *dout, const void *q, const void *k,
                                     const void *v, const void *out, const float *lse, int H,
                                     int Dh, float scale);

#endif
