// model/dit_internal.h — private to model/: the dit_model struct, per-block activation
// layout and the layer helpers shared by params.c, cond.c, block.c, final.c and dit.c.
// Every pointer here is backend memory (kernels.h) unless named *_host.
#ifndef TESSERA_MODEL_DIT_INTERNAL_H
#define TESSERA_MODEL_DIT_INTERNAL_H

#include "model/dit.h"

#define DIT_TENSORS_FIXED 11      // x_embed, t_embed (4), y_embed, final (4): at most
#define DIT_TENSORS_PER_BLOCK 16
#define DIT_NAME_MAX 64

typedef enum { INIT_ZERO, INIT_ONE, INIT_XAVIER, INIT_NORMAL002 } dit_init_kind;

// A linear layer: tensor index of its weight (in, out); the bias is the next tensor.
typedef struct {
  int w;
} dit_linear;

typedef struct {
  dit_linear adaln, q, k, v, proj, fc1, fc2;
  int q_norm, k_norm;
} dit_block_params;

// Activations of one block kept for backward. L tokens, C clips, F = mlp_ratio * D.
typedef struct {
  float *mod;                  // (C, 6D) shift1, scale1, gate1, shift2, scale2, gate2
  float *ln1, *a;              // (L, D) LN(h), modulated
  float *mean1, *rstd1;        // (L)
  float *qlin, *klin, *v;      // (L, D) projections (q, k before RMSNorm)
  float *qrstd, *krstd;        // (L * H) RMSNorm statistics
  float *q, *k;                // (L, D) after RMSNorm and RoPE: attention inputs
  float *att, *lse;            // (L, D) attention output, (L, H) its log-sum-exp
  float *proj;                 // (L, D) output projection
  float *hmid;                 // (L, D) residual after attention
  float *ln2, *m;              // (L, D)
  float *mean2, *rstd2;        // (L)
  float *f1, *g;               // (L, F) fc1 output, GELU output
  float *f2;                   // (L, D) fc2 output
} dit_block_acts;

struct dit_model {
  dit_config cfg;
  const kernels_backend *kb;
  int max_tokens, max_clips;
  int D, H, Dh, F, P;

  int n_tensors;
  dit_tensor *table;           // (n_tensors)
  dit_init_kind *init;         // (n_tensors)
  char (*names)[DIT_NAME_MAX]; // (n_tensors)
  dit_linear x_embed, t_fc1, t_fc2, final_adaln, final_linear;
  int y_embed;                 // -1 if num_classes == 0
  dit_block_params *bp;        // (depth)

  size_t n_params;
  float *params, *grads;       // (n_params)
  dit_attention attn;

  // activations (one allocation)
  void *act_mem;
  size_t act_bytes;
  float *h;                    // (depth + 1, max_tokens, D) residual stream at block boundaries
  dit_block_acts *blk;         // (depth), or (1) scratch when cfg.recompute
  float *tsc, *temb, *c1, *s1, *c, *cs;  // (C), (C, freq), (C, D) x4: conditioning
  float *fmod;                 // (C, 2D) final shift, scale
  float *lnf, *meanf, *rstdf, *of;       // final LN (L, D), (L), (L), modulated (L, D)
  float *pred;                 // (L, P)
  float *loss, *sse;           // (1), (C)
  // backward scratch
  float *dh, *dt1, *dt2, *dt3, *dq, *dk, *dv;  // (L, D)
  float *dF1, *dF2;            // (L, F)
  float *dpred;                // (L, P)
  float *dmod, *dcs, *dc, *dc1;// (C, 6D), (C, D) x3
  int32_t *null_labels;        // (max_clips) all = num_classes
  float *dx;                   // (L, P) user buffer for dL/dx, or NULL

  int fwd_L, fwd_C, have_fwd;  // the last forward's batch sizes

  int n_buckets;               // depth + 2 (dit_get_bucket)
  dit_bucket *buckets;         // (n_buckets)
  void (*bucket_hook)(void *ctx, int bucket);
  void *bucket_ctx;
};

// Parameter and gradient of tensor i.
static inline float *dit_p(const dit_model *m, int i) { return m->params + m->table[i].offset; }
static inline float *dit_g(const dit_model *m, int i) { return m->grads + m->table[i].offset; }

// ---- layer helpers (layers.c) ----------------------------------------------------------
// out = inp W + b for M rows. out: (M, N), inp: (M, K) (K, N from the weight's shape)
tsr_status dit_linear_fwd(dit_model *m, dit_linear l, float *out, const float *inp, int M);
// Parameter grads accumulate; dinp (M, K) is overwritten, or ADDED TO when accumulate,
// or skipped when NULL. dout: (M, N), inp: (M, K)
tsr_status dit_linear_bwd(dit_model *m, dit_linear l, float *dinp, int accumulate,
                          const float *dout, const float *inp, int M);
// out = LN(inp) (1 + scale[c]) + shift[c]; keeps ln, mean, rstd for backward.
// out, ln, inp: (L, D), mean, rstd: (L), shift/scale: (C, mstride)
tsr_status dit_ln_mod_fwd(dit_model *m, const dit_batch *b, float *out, float *ln, float *mean,
                          float *rstd, const float *inp, const float *shift, const float *scale,
                          int mstride);
// Backward of dit_ln_mod_fwd: dinp ADDED TO (the residual stream's gradient);
// dshift/dscale (C, mstride) overwritten; tmp1, tmp2: (L, D) scratch.
tsr_status dit_ln_mod_bwd(dit_model *m, const dit_batch *b, float *dinp, float *dshift,
                          float *dscale, const float *dout, const float *inp, const float *ln,
                          const float *mean, const float *rstd, const float *scale, int mstride,
                          float *tmp1, float *tmp2);

// ---- conditioning (cond.c): cs = SiLU(t_embed(t) + y_embed(label)) ---------------------
tsr_status dit_cond_fwd(dit_model *m, const dit_batch *b);
// From m->dcs (C, D): accumulates t_embed / y_embed grads.
tsr_status dit_cond_bwd(dit_model *m, const dit_batch *b);
const int32_t *dit_labels(const dit_model *m, const dit_batch *b);  // (C) or NULL

// ---- one block (block.c) ---------------------------------------------------------------
// hout = block i (hin); activations in a. hin, hout: (L, D)
tsr_status dit_block_fwd(dit_model *m, int i, dit_block_acts *a, const float *hin, float *hout,
                         const dit_batch *b);
// m->dh (L, D): in dL/dhout, out dL/dhin; m->dcs += the block's conditioning gradient.
tsr_status dit_block_bwd(dit_model *m, int i, const dit_block_acts *a, const float *hin,
                         const dit_batch *b);

// ---- final layer (final.c) -------------------------------------------------------------
// m->pred = (LN(h) (1 + scale) + shift) final.linear
tsr_status dit_final_fwd(dit_model *m, const float *h, const dit_batch *b);
// From m->dpred: m->dh = dL/dh (overwritten), m->dcs = final's conditioning grad (overwritten).
tsr_status dit_final_bwd(dit_model *m, const float *h, const dit_batch *b);

// Splits the flat buffer into the gradient buckets of dit_get_bucket (after build_table).
tsr_status dit_buckets_init(dit_model *m);

#define DIT_TRY(call)                   \
  do {                                  \
    tsr_status dit_st_ = (call);        \
    if (dit_st_ != TSR_OK) return dit_st_; \
  } while (0)

#endif
