// model/dit_internal.h — private to model/: the dit_model struct, per-block activation
// layout and the layer helpers shared by params.c, cond.c, block.c, final.c and dit.c.
// Every pointer here is backend memory (kernels.h) unless named *_host.
#ifndef TESSERA_MODEL_DIT_INTERNAL_H
#define TESSERA_MODEL_DIT_INTERNAL_H

#include "kernels/graph_cache.h"
#include "model/dit.h"

#define DIT_TENSORS_FIXED 18      // x_embed, t_embed (4), time_proj (2), y_embed, text_embed
                                  // (4), text_null, final (4): at most
#define DIT_TENSORS_PER_BLOCK 28  // 16, and 10 of cross-attention with text (Wan: 15 and 12)
#define DIT_NAME_MAX 64

typedef enum { INIT_ZERO, INIT_ONE, INIT_XAVIER, INIT_NORMAL002 } dit_init_kind;

// A linear layer: tensor index of its weight (in, out); the bias is the next tensor.
typedef struct {
  int w;
} dit_linear;

// Where the Wan family differs from the tessera DiT (docs/model.md "The Wan family"): each
// difference is one switch of the shared code, set from model.family (all 0: tessera).
typedef struct {
  int mod_table;     // block modulation = time_proj(cs) + the block's learned row (6D) instead
                     // of a linear of cs per block (adaln)
  int head_temb;     // the head's (shift, scale) = c + final.modulation: c itself, no SiLU and
                     // no linear (tessera: final.adaln of cs)
  int qk_norm_full;  // q and k RMSNorm over all heads at once (weights (D)); tessera: per
                     // head (weights (Dh))
  int cross_affine;  // the cross-attention's LayerNorm has a weight and a bias (D)
  int null_token;    // every clip also attends to the learned null token (tessera); without
                     // it a clip attends to its caption alone
} dit_switches;

// Cross-attention to the caption (cross.c; only when model.text_dim > 0).
typedef struct {
  dit_linear q, k, v, proj;
  int q_norm, k_norm;
  int norm_w, norm_b;          // LayerNorm weight, bias (D), or -1 (switch cross_affine)
} dit_cross_params;

typedef struct {
  int first;                   // the block's first tensor (its gradient bucket starts there)
  dit_linear adaln;            // (D, 6D) per-block modulation (tessera)
  int mod_row;                 // (6D) learned modulation row (switch mod_table), or -1
  dit_linear q, k, v, proj, fc1, fc2;
  int q_norm, k_norm;
  dit_cross_params x;
} dit_block_params;

// Activations of one block's cross-attention kept for backward (cross.c). Lt caption
// tokens of the batch, C clips (each also attends to one row of the learned null token).
typedef struct {
  void *ln;                    // (L, D) [act] LN(hmid)
  float *mean, *rstd;          // (L) [f32]
  void *qlin, *q;              // (L, D) [act] query projection, after RMSNorm
  float *qrstd;                // (L * H) [f32]
  void *klin, *k, *v;          // (Lt, D) [act] caption keys (before/after RMSNorm), values
  float *krstd;                // (Lt * H) [f32]
  void *nklin, *nk, *nv;       // (C, D) [act] the null token's key and value, one row a clip
  float *nkrstd;               // (C * H) [f32]
  void *att;                   // (L, D) [act] attention output (caption and null merged)
  float *lse;                  // (L, H) [f32] its log-sum-exp
  void *h;                     // (L, D) [act] hmid + proj(att): the MLP's input
} dit_cross_acts;

// Activations of one block kept for backward. L tokens, C clips, F = mlp_ratio * D.
// [act]: void *, in kb->act_dtype; [f32]: statistics.
typedef struct {
  void *mod;                   // (C, 6D) [act] shift1, scale1, gate1, shift2, scale2, gate2
  void *a;                     // (L, D) [act] LN(h) modulated (LN(h) itself is recomputed)
  float *mean1, *rstd1;        // (L) [f32]
  void *qlin, *klin, *v;       // (L, D) [act] projections (q, k before RMSNorm)
  float *qrstd, *krstd;        // (L * H) [f32] RMSNorm statistics
  void *q, *k;                 // (L, D) [act] after RMSNorm and RoPE: attention inputs
  void *att;                   // (L, D) [act] attention output
  float *lse;                  // (L, H) [f32] its log-sum-exp
  void *proj;                  // (L, D) [act] output projection
  void *hmid;                  // (L, D) [act] residual after attention
  void *m;                     // (L, D) [act] LN(hmid) modulated
  float *mean2, *rstd2;        // (L) [f32]
  void *f1, *g;                // (L, F) [act] fc1 output, GELU output
  void *f2;                    // (L, D) [act] fc2 output
  dit_cross_acts x;            // cross-attention (buffers NULL without text)
} dit_block_acts;

struct dit_model {
  dit_config cfg;
  const kernels_backend *kb;
  int max_tokens, max_clips;
  int D, H, Dh, F, P;

  dit_switches sw;             // the family's differences (params.c, from cfg.family)
  int n_tensors;
  dit_tensor *table;           // (n_tensors)
  dit_init_kind *init;         // (n_tensors)
  char (*names)[DIT_NAME_MAX]; // (n_tensors)
  dit_linear x_embed, t_fc1, t_fc2, final_adaln, final_linear;
  dit_linear time_proj;        // (D, 6D) shared modulation projection (switch mod_table)
  int final_row;               // (2D) the head's learned (shift, scale) (switch head_temb), or -1
  int final_first;             // the final layer's first tensor (its gradient bucket)
  int y_embed;                 // -1 if num_classes == 0
  dit_linear t_text1, t_text2; // text_embed.fc1, fc2 (when text_dim > 0)
  int text_null;               // text_null.weight (D), or -1 without text
  int max_text;                // caption tokens a batch may have: max_clips * text_len
  dit_block_params *bp;        // (depth)

  size_t n_params;
  float *params, *grads;       // (n_params) [f32] master weights, gradients
  void *wact;                  // (n_params) [act] working copy of params; == params with fp32
  dit_attention attn;

  // activations (one allocation); [act] unless marked [f32]
  void *act_mem;
  size_t act_bytes;
  void *h;                     // (depth + 1, max_tokens, D) residual stream at block boundaries
  dit_block_acts *blk;         // (depth), or (1) scratch with recompute = 1; with = 2 the
                               // token-local buffers of every block are blk[0]'s
  float *tsc;                  // (C) [f32] 1000 t
  void *temb, *c1, *s1, *c, *cs;  // (C, freq), (C, D) x4: conditioning
  void *fmod;                  // (C, 2D) final shift, scale (rows of 2D; head_temb: the shift
                               // rows (C, D), then the scale rows (C, D))
  void *tp, *dtp;              // (C, 6D) time_proj(cs) and its gradient summed over the blocks
                               // (switch mod_table; NULL otherwise)
  void *dchead;                // (C, D) dL/dc from the head (switch head_temb)
  void *xaff, *dxaff;          // (C, 2D) the cross LayerNorm's affine as modulation rows (bias,
                               // weight - 1) of one block, and their gradient (cross_affine)
  float *xw1;                  // (D) [f32] scratch: weight - 1
  void *of;                    // (L, D) final LN, modulated
  float *meanf, *rstdf;        // (L), (L) [f32]
  void *pred;                  // (L, P)
  float *loss, *sse;           // (1), (C) [f32]
  // backward scratch
  void *dh, *dt1, *dt2, *dt3, *dq, *dk, *dv;  // (L, D)
  void *dF;                    // (L, F) dL/d(fc1 output)
  void *dpred;                 // (L, P)
  void *dmod, *dcs, *dc, *dc1; // (C, 6D), (C, D) x3
  int32_t *null_labels;        // (max_clips) all = num_classes
  void *dx;                    // (L, P) user buffer for dL/dx, or NULL
  // captions (text_dim > 0; NULL otherwise): the caption context shared by every block
  void *tx1, *txg, *ctx;       // (max_text, D) [act] text_embed.fc1 out, GELU, fc2 out
  void *nullctx;               // (C, D) [act] the null token, one row a clip
  void *dctx, *dnull;          // (max_text, D), (C, D) [act] their gradients (all blocks)
  void *dtx;                   // (max_text, D) [act] backward scratch
  void *xatt_n;                // (L, D) [act] cross-attention output over the null token
  float *xlse_n, *xdelta;      // (L, H) [f32] its lse; the backward's delta
  void *dxk, *dxv;             // (max_text, D) [act] caption key/value gradients
  void *dnk, *dnv;             // (C, D) [act] null key/value gradients
  int32_t *zero_ids;           // (max_clips) all 0: one parameter row for every clip (the null
                               // token, Wan's modulation rows)
  int32_t *cu_null;            // (max_clips + 1) 0, 1, .., C: one null key per clip
  int32_t *cu_text0;           // (max_clips + 1) all 0: "no caption" for a batch without
  int text_Lt;                 // caption tokens of the last forward

  int fwd_L, fwd_C, have_fwd;  // the last forward's batch sizes
  int64_t fwd_tokens;          // tokens of every forward so far (dit_forward_tokens)

  // recorded graphs of the forward and the backward (dit.c; kernels.h graph_*): NULL where
  // the backend records none; attn_default: m->attn is the backend's own attention (the
  // only one recorded: the ring's hooks communicate)
  kgraph_cache *graphs;
  int graphs_off, attn_default;

  int n_buckets;               // depth + 2 (dit_get_bucket)
  dit_bucket *buckets;         // (n_buckets)
  void (*bucket_hook)(void *ctx, int bucket);
  void *bucket_ctx;
  // dit_create_bucket_grads: where each bucket's gradients go (n_buckets), and each tensor's
  // bucket (n_tensors); NULL otherwise
  float **bucket_grads;
  int *tensor_bucket;
  // dit_create_sharded: where each bucket's master weights [f32] and working copy [act] are
  // (n_buckets; the same pointers with fp32 activations), and the hook that puts them there
  // before a forward or backward reads them; NULL otherwise (params and wact are whole)
  float **bucket_params;
  void **bucket_wact;
  // dit_create_frozen_base with act-dtype activations: params holds only the tensors the
  // kernels read in fp32 (dit_reads_fp32), tensor i at p_off[i] (SIZE_MAX: none, read as
  // wact only), n_fp32 floats; wsums the XXH3 of every tensor and of the whole weights set
  // as the last load read them (ckpt_base_sums cannot make them from fp32 it does not hold).
  // NULL otherwise.
  size_t *p_off;
  size_t n_fp32;
  uint64_t *wsums, wsum_all;
  tsr_status (*weight_hook)(void *ctx, int bucket);
  void *weight_ctx;

  struct dit_lora *lora;       // the adapters (lora.c), or NULL
};

// Master parameter, gradient ([f32]) and working-copy weight ([act]) of tensor i.
// With sharded weights (dit_create_sharded) the tensor's place in its bucket's buffers.
static inline float *dit_p(const dit_model *m, int i) {
  if (m->p_off) return m->p_off[i] == SIZE_MAX ? NULL : m->params + m->p_off[i];
  if (m->bucket_params) {
    int b = m->tensor_bucket[i];
    return m->bucket_params[b] + (m->table[i].offset - m->buckets[b].offset);
  }
  return m->params + m->table[i].offset;
}
// NULL when the base is frozen (dit_create_frozen): every kernel then skips that gradient.
// With bucket gradients (dit_create_bucket_grads) the tensor's place in its bucket's buffer.
static inline float *dit_g(const dit_model *m, int i) {
  if (m->bucket_grads) {
    int b = m->tensor_bucket[i];
    return m->bucket_grads[b] + (m->table[i].offset - m->buckets[b].offset);
  }
  return m->grads ? m->grads + m->table[i].offset : NULL;
}
static inline void *dit_w(const dit_model *m, int i) {
  if (m->bucket_wact) {
    int b = m->tensor_bucket[i];
    return kernels_act_at(m->kb, m->bucket_wact[b], m->table[i].offset - m->buckets[b].offset);
  }
  return kernels_act_at(m->kb, m->wact, m->table[i].offset);
}
// Before the first read of bucket b's weights in a forward or backward: the weight hook of a
// model with sharded weights (dit_set_weight_hook) brings them; a no-op otherwise.
static inline tsr_status dit_need_weights(dit_model *m, int b) {
  return m->weight_hook ? m->weight_hook(m->weight_ctx, b) : TSR_OK;
}
// Element i of the [act] buffer p (kernels_act_at with the model's backend).
// The bound of the batch's clip lengths the model passes to the attention entries: the
// longest clip rounded up (kernels_attention_max_len), so that one cuDNN plan and one
// recorded graph (dit.c keys graphs by it) serve every packing in the same range.
static inline int dit_attn_max_len(const dit_batch *b) {
  return kernels_attention_max_len(b->max_len, b->L);
}
// Self-attention's clips (dit_batch.attn_cu): the conditioning clips unless segments split them.
static inline const int32_t *dit_attn_cu(const dit_batch *b) {
  return b->attn_cu ? b->attn_cu : b->cu_seqlens;
}
static inline int dit_attn_clips(const dit_batch *b) {
  return b->attn_cu ? b->attn_clips : b->n_clips;
}
static inline void *dit_act(const dit_model *m, const void *p, size_t i) {
  return kernels_act_at(m->kb, p, i);
}

// ---- layer helpers (layers.c) ----------------------------------------------------------
// out = inp W + b for M rows. out: (M, N) [act], inp: (M, K) [act] (K, N from the weight's
// shape; W the working copy, b the fp32 bias)
tsr_status dit_linear_fwd(dit_model *m, dit_linear l, void *out, const void *inp, int M);
// Parameter grads accumulate; dinp (M, K) is overwritten, or ADDED TO when accumulate,
// or skipped when NULL. dinp, dout: (M, N), inp: (M, K), all [act]
tsr_status dit_linear_bwd(dit_model *m, dit_linear l, void *dinp, int accumulate,
                          const void *dout, const void *inp, int M);
// n (<= DIT_LINEARS_MAX) linears of one shape on one input (q, k, v of a block): outs[i] =
// inp W_i + b_i. One gemm_batched when the weights, biases and outputs each lie at one
// stride (the parameter table puts a block's q, k, v weights one weight-and-bias apart;
// their outputs are adjacent buffers) and none has an adapter, else dit_linear_fwd each:
// the same results (bitwise on the CPU). outs[i]: (M, N) [act], inp: (M, K) [act]
enum { DIT_LINEARS_MAX = 4 };
tsr_status dit_linears_fwd(dit_model *m, const dit_linear *ls, int n, void *const *outs,
                           const void *inp, int M);
// Its backward: parameter grads accumulate, dinp = sum_i douts[i] W_i^T overwritten (or
// skipped when NULL). Where dit_linears_fwd batches and the douts lie at one stride, the dW
// are one gemm_batched (then each bias's column sum); dinp stays n GEMMs, the first
// overwriting, the others adding (beta 1): douts as separate planes are no single matrix,
// so no single GEMM forms the sum. dinp: (M, K), douts[i]: (M, N), inp: (M, K), all [act]
tsr_status dit_linears_bwd(dit_model *m, const dit_linear *ls, int n, void *dinp,
                           const void *const *douts, const void *inp, int M);
// out = GELU(pre), pre = inp W + b (kept for the backward). out, pre: (M, N) [act],
// inp: (M, K) [act]
tsr_status dit_linear_gelu_fwd(dit_model *m, dit_linear l, void *out, void *pre, const void *inp,
                               int M);
// Backward of a linear layer whose input was GELU(pre): dpre = GELU'(pre) (dout W^T)
// (overwritten), parameter grads accumulate. dpre, pre, inp = GELU(pre): (M, K) [act],
// dout: (M, N) [act]
tsr_status dit_linear_dgelu_bwd(dit_model *m, dit_linear l, void *dpre, const void *dout,
                                const void *inp, const void *pre, int M);
// out = LN(inp) (1 + scale[c]) + shift[c]; keeps mean, rstd for backward.
// out, inp: (L, D) [act], mean, rstd: (L) [f32], shift/scale: (C, mstride) [act]
tsr_status dit_ln_mod_fwd(dit_model *m, const dit_batch *b, void *out, float *mean, float *rstd,
                          const void *inp, const void *shift, const void *scale, int mstride);
// Backward of dit_ln_mod_fwd: dinp ADDED TO (the residual stream's gradient);
// dshift/dscale (C, mstride) overwritten. All [act] but mean, rstd.
tsr_status dit_ln_mod_bwd(dit_model *m, const dit_batch *b, void *dinp, void *dshift,
                          void *dscale, const void *dout, const void *inp, const float *mean,
                          const float *rstd, const void *scale, int mstride);

// ---- adapters (lora.c, model/lora.h); each a no-op for a linear without one -----------
// out (M, N) += (alpha / r) (inp A^T) B^T; inp A^T (M, r) kept for the backward.
// out: (M, N) [act], inp: (M, K) [act]
tsr_status dit_lora_fwd(dit_model *m, dit_linear l, void *out, const void *inp, int M);
int dit_lora_has(const dit_model *m, dit_linear l);
// 1 when l has an adapter that runs merged for M rows (lora.c: fp32 activations, M >= in):
// the base entries then run on dit_lora_weight's W + (alpha / r) A^T B^T, which already
// adds the adapter's output and input gradient, and dit_lora_fwd/bwd add only u, dA, dB.
int dit_lora_merged(const dit_model *m, dit_linear l, int M);
// *w = the weight the base entries of l use for M rows: the merged one (in, out) [act] in a
// scratch of the adapters, valid until the next call, or l's working copy dit_w(m, l.w).
tsr_status dit_lora_weight(dit_model *m, dit_linear l, int M, const void **w);
// The adapter's gradients accumulate; dinp (M, K) += its input gradient unless NULL.
// dout: (M, N), inp: (M, K), as its forward had them, all [act]
tsr_status dit_lora_bwd(dit_model *m, dit_linear l, void *dinp, const void *dout,
                        const void *inp, int M);
// The same for a linear whose input was GELU(pre): dpre (M, K) += GELU'(pre) (the adapter's
// input gradient). dpre, pre, inp: (M, K) [act], dout: (M, N) [act]
tsr_status dit_lora_bwd_dgelu(dit_model *m, dit_linear l, void *dpre, const void *dout,
                              const void *inp, const void *pre, int M);
void dit_lora_free(dit_model *m);

// ---- conditioning (cond.c): cs = SiLU(t_embed(t) + y_embed(label)) ---------------------
tsr_status dit_cond_fwd(dit_model *m, const dit_batch *b);
// From m->dcs (C, D) (mod_table: from m->dtp through time_proj; head_temb: plus m->dchead):
// accumulates t_embed / y_embed (and time_proj) grads.
tsr_status dit_cond_bwd(dit_model *m, const dit_batch *b);
const int32_t *dit_labels(const dit_model *m, const dit_batch *b);  // (C) or NULL

// ---- captions (cond.c, cross.c) ------------------------------------------------------------
// The caption context: m->ctx (Lt, D) = text_embed.fc2(GELU(text_embed.fc1(b->text))) and
// m->nullctx (C, D) = text_null in every row. No-op without text.
tsr_status dit_text_fwd(dit_model *m, const dit_batch *b);
// From m->dctx, m->dnull (accumulated by every block's cross-attention): text_embed and
// text_null gradients.
tsr_status dit_text_bwd(dit_model *m, const dit_batch *b);
// The batch's caption offsets (C + 1): b->cu_text, or all zero (no captions) when NULL.
const int32_t *dit_cu_text(const dit_model *m, const dit_batch *b);
// Cross-attention of block i: a->h = hin + proj(attention(q(LN(hin)), caption and null
// keys/values)). hin: (L, D) [act]
tsr_status dit_cross_fwd(dit_model *m, int i, dit_cross_acts *a, const void *hin,
                         const dit_batch *b);
// m->dh (L, D): in dL/da->h, out dL/dhin; m->dctx, m->dnull += the block's contributions.
tsr_status dit_cross_bwd(dit_model *m, int i, const dit_cross_acts *a, const void *hin,
                         const dit_batch *b);

// ---- one block (block.c) ---------------------------------------------------------------
// hout = block i (hin); activations in a. hin, hout: (L, D) [act]
tsr_status dit_block_fwd(dit_model *m, int i, dit_block_acts *a, const void *hin, void *hout,
                         const dit_batch *b);
// model.recompute = 2: rewrites a's token-local outputs (a, q, k, hmid, m, g and their
// statistics; the set every block shares) from block i's kept GEMM and attention outputs and
// hin, by the entries dit_block_fwd ran: the same bits. hin: (L, D) [act]
tsr_status dit_block_recompute_cheap(dit_model *m, int i, const dit_block_acts *a,
                                     const void *hin, const dit_batch *b);
// m->dh (L, D): in dL/dhout, out dL/dhin; m->dcs += the block's conditioning gradient
// (mod_table: m->dtp += its modulation gradient).
tsr_status dit_block_bwd(dit_model *m, int i, const dit_block_acts *a, const void *hin,
                         const dit_batch *b);

// ---- cached keys and values of finished chunks (kvcache.c, model/kvcache.h) -------------
// TSR_OK when b (b->kv set) is one begun chunk a branch of the cache, without target.
tsr_status dit_kv_check(const dit_model *m, const dit_batch *b);
// Block `layer`'s self-attention with b->kv: the chunk's k, v into the cache, then each
// clip's queries against its branch's kept context and the chunk under the mask. As the
// attention hook: out, q, k, v (L, H, Dh) [act], lse (L, H) [f32].
tsr_status dit_kv_attention(dit_model *m, int layer, const dit_batch *b, void *out, float *lse,
                            const void *q, const void *k, const void *v, float scale);

// ---- final layer (final.c) -------------------------------------------------------------
// m->pred = (LN(h) (1 + scale) + shift) final.linear. h: (L, D) [act]
tsr_status dit_final_fwd(dit_model *m, const void *h, const dit_batch *b);
// From m->dpred: m->dh = dL/dh (overwritten), m->dcs = final's conditioning grad (overwritten;
// head_temb: m->dchead = dL/dc, and m->dtp zeroed for the blocks to sum into).
tsr_status dit_final_bwd(dit_model *m, const void *h, const dit_batch *b);

// The cache of recorded graphs (dit.c), for a backend that records (kb->graph_begin).
tsr_status dit_graphs_init(dit_model *m);

// Splits the flat buffer into the gradient buckets of dit_get_bucket (after build_table).
tsr_status dit_buckets_init(dit_model *m);
// (params.c) The tables of a model for config c (names, shapes, offsets, block layouts) and
// nothing on a backend (m->kb NULL): the measuring passes, dit_memory_bytes and
// dit_lora_memory. Free with dit_model_shell_free.
tsr_status dit_model_shell(dit_model *m, const dit_config *c, int max_tokens, int max_clips);
void dit_model_shell_free(dit_model *m);

#endif
