// model/params.c — the parameter table (names, shapes, offsets into one flat buffer),
// model creation with its activation buffers, initialisation and accessors.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/rng.h"
#include "model/dit_internal.h"
#include "model/mask.h"

#define ALIGN_FLOATS 16  // every tensor starts on 64 bytes (padding floats stay 0)

static int add_tensor(dit_model *m, const char *name, int64_t d0, int64_t d1, dit_init_kind init) {
  int i = m->n_tensors++;
  snprintf(m->names[i], DIT_NAME_MAX, "%s", name);
  dit_tensor *t = &m->table[i];
  t->name = m->names[i];
  t->ndim = d1 ? 2 : 1;
  t->shape[0] = d0, t->shape[1] = d1;
  t->numel = (size_t)d0 * (size_t)(d1 ? d1 : 1);
  t->offset = m->n_params;
  m->n_params += (t->numel + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
  m->init[i] = init;
  return i;
}

// A linear layer "prefix.weight" (in, out) and "prefix.bias" (out).
static dit_linear add_linear(dit_model *m, const char *prefix, int in, int out, dit_init_kind wi) {
  char name[DIT_NAME_MAX];
  snprintf(name, sizeof name, "%s.weight", prefix);
  dit_linear l = {add_tensor(m, name, in, out, wi)};
  snprintf(name, sizeof name, "%s.bias", prefix);
  add_tensor(m, name, out, 0, INIT_ZERO);
  return l;
}

// The cross-attention of block i (text only); proj zero (PixArt): at init it adds nothing.
// `BLK` names are "blocks.{i}.cross.*"; norms are per head, or over D (qk_norm_full).
static void add_cross(dit_model *m, int i, int nw) {
  dit_cross_params *x = &m->bp[i].x;
  char n[DIT_NAME_MAX];
#define BLK(s) (snprintf(n, sizeof n, "blocks.%d.cross.%s", i, (s)), n)
  x->norm_w = x->norm_b = -1;
  if (m->sw.cross_affine) {  // Wan's affine LayerNorm before the queries
    x->norm_w = add_tensor(m, BLK("norm.weight"), m->D, 0, INIT_ONE);
    x->norm_b = add_tensor(m, BLK("norm.bias"), m->D, 0, INIT_ZERO);
  }
  x->q = add_linear(m, BLK("q"), m->D, m->D, INIT_XAVIER);
  x->k = add_linear(m, BLK("k"), m->D, m->D, INIT_XAVIER);
  x->v = add_linear(m, BLK("v"), m->D, m->D, INIT_XAVIER);
  x->q_norm = add_tensor(m, BLK("q_norm.weight"), nw, 0, INIT_ONE);
  x->k_norm = add_tensor(m, BLK("k_norm.weight"), nw, 0, INIT_ONE);
  x->proj = add_linear(m, BLK("proj"), m->D, m->D, INIT_ZERO);
#undef BLK
}

// Block i's tensors. The modulation is a linear of cs (adaLN-Zero: zero) or, with
// mod_table, one learned row added to the shared time_proj(cs) (zero as well).
static void add_block(dit_model *m, int i, int nw) {
  dit_block_params *bp = &m->bp[i];
  int D = m->D;
  char n[DIT_NAME_MAX];
#define BLK(s) (snprintf(n, sizeof n, "blocks.%d.%s", i, (s)), n)
  bp->first = m->n_tensors;
  bp->mod_row = -1;
  if (m->sw.mod_table) bp->mod_row = add_tensor(m, BLK("modulation"), 6 * D, 0, INIT_ZERO);
  else bp->adaln = add_linear(m, BLK("adaln"), D, 6 * D, INIT_ZERO);
  bp->q = add_linear(m, BLK("q"), D, D, INIT_XAVIER);
  bp->k = add_linear(m, BLK("k"), D, D, INIT_XAVIER);
  bp->v = add_linear(m, BLK("v"), D, D, INIT_XAVIER);
  bp->q_norm = add_tensor(m, BLK("q_norm.weight"), nw, 0, INIT_ONE);
  bp->k_norm = add_tensor(m, BLK("k_norm.weight"), nw, 0, INIT_ONE);
  bp->proj = add_linear(m, BLK("proj"), D, D, INIT_XAVIER);
  bp->fc1 = add_linear(m, BLK("fc1"), D, m->F, INIT_XAVIER);
  bp->fc2 = add_linear(m, BLK("fc2"), m->F, D, INIT_XAVIER);
#undef BLK
  if (m->cfg.text_dim > 0) add_cross(m, i, nw);
}

// Ends a gradient bucket (dit_buckets_init): with shard_ranks > 1 (ZeRO) the buffer is padded
// to a multiple of 16 * shard_ranks floats, so every bucket splits into equal slices of
// whole 64-byte lines, one per rank (model/train/zero.h). The padding floats stay 0.
static void end_bucket(dit_model *m) {
  size_t a = (size_t)ALIGN_FLOATS * (size_t)(m->cfg.shard_ranks > 1 ? m->cfg.shard_ranks : 1);
  m->n_params = (m->n_params + a - 1) / a * a;
}

static void build_table(dit_model *m) {
  const dit_config *c = &m->cfg;
  int D = m->D, nw = m->sw.qk_norm_full ? D : m->Dh;  // QK-norm weights: all heads, or one
  m->x_embed = add_linear(m, "x_embed", m->P, D, INIT_XAVIER);
  m->t_fc1 = add_linear(m, "t_embed.fc1", c->freq_dim, D, INIT_XAVIER);
  m->t_fc2 = add_linear(m, "t_embed.fc2", D, D, INIT_XAVIER);
  if (m->sw.mod_table) m->time_proj = add_linear(m, "time_proj", D, 6 * D, INIT_ZERO);
  m->y_embed = c->num_classes > 0
                   ? add_tensor(m, "y_embed.weight", c->num_classes + 1, D, INIT_NORMAL002)
                   : -1;
  m->text_null = -1;
  if (c->text_dim > 0) {  // caption embedding -> context (and the learned null token)
    m->t_text1 = add_linear(m, "text_embed.fc1", c->text_dim, D, INIT_XAVIER);
    m->t_text2 = add_linear(m, "text_embed.fc2", D, D, INIT_XAVIER);
    if (m->sw.null_token) m->text_null = add_tensor(m, "text_null.weight", D, 0, INIT_NORMAL002);
  }
  for (int i = 0; i < c->depth; i++) end_bucket(m), add_block(m, i, nw);
  end_bucket(m);
  m->final_first = m->n_tensors;
  m->final_row = -1;
  if (m->sw.head_temb) m->final_row = add_tensor(m, "final.modulation", 2 * D, 0, INIT_ZERO);
  else m->final_adaln = add_linear(m, "final.adaln", D, 2 * D, INIT_ZERO);
  m->final_linear = add_linear(m, "final.linear", D, m->P, INIT_ZERO);
  end_bucket(m);
}

int dit_reads_fp32(const dit_model *m, int i) {
  return m->table[i].ndim == 1 || i == m->y_embed;  // the 2-D ones but y_embed are linears'
}

// dit_create_frozen_base: the fp32 masters of the tensors read in fp32 only, packed
// (m->p_off, m->n_fp32).
static tsr_status compact_offsets(dit_model *m) {
  if (!(m->p_off = malloc((size_t)m->n_tensors * sizeof *m->p_off)))
    return err_set(TSR_ENOMEM, "dit_create: no memory");
  m->n_fp32 = 0;
  for (int i = 0; i < m->n_tensors; i++) {
    m->p_off[i] = dit_reads_fp32(m, i) ? m->n_fp32 : SIZE_MAX;
    if (dit_reads_fp32(m, i))
      m->n_fp32 += (m->table[i].numel + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
  }
  return TSR_OK;
}

// Carves activation buffers out of one allocation: a first pass with base == NULL only
// measures. [act] buffers take asz bytes an element (the backend's act dtype), [f32] 4.
typedef struct {
  char *base;
  size_t used, asz;
} arena;

static void *take(arena *a, size_t bytes) {
  void *p = a->base ? a->base + a->used : NULL;
  a->used += (bytes + 63) / 64 * 64;
  return p;
}
#define TAKE_F(a, n) ((float *)take((a), sizeof(float) * (size_t)(n)))
#define TAKE_A(a, n) take((a), (a)->asz * (size_t)(n))

static void layout_cross(arena *a, dit_cross_acts *x, size_t L, size_t C, size_t D, size_t H,
                         size_t Lt) {
  x->ln = TAKE_A(a, L * D), x->mean = TAKE_F(a, L), x->rstd = TAKE_F(a, L);
  x->qlin = TAKE_A(a, L * D), x->q = TAKE_A(a, L * D), x->qrstd = TAKE_F(a, L * H);
  x->klin = TAKE_A(a, Lt * D), x->k = TAKE_A(a, Lt * D), x->v = TAKE_A(a, Lt * D);
  x->krstd = TAKE_F(a, Lt * H);
  x->nklin = TAKE_A(a, C * D), x->nk = TAKE_A(a, C * D), x->nv = TAKE_A(a, C * D);
  x->nkrstd = TAKE_F(a, C * H);
  x->att = TAKE_A(a, L * D), x->lse = TAKE_F(a, L * H), x->h = TAKE_A(a, L * D);
}

// The buffers of one block. With `shared` (model.recompute = 2, blocks after the first) the
// token-local outputs that the backward recomputes (dit_block_recompute_cheap) are block 0's:
// only the GEMM and attention outputs and the modulation get their own.
static void layout_block(arena *a, dit_block_acts *k, const dit_block_acts *shared, size_t L,
                         size_t C, size_t D, size_t F, size_t H) {
  k->mod = TAKE_A(a, C * 6 * D);
  // qlin, klin, v adjacent: the q, k, v projections are one batched GEMM (dit_linears_fwd)
  k->qlin = TAKE_A(a, L * D), k->klin = TAKE_A(a, L * D), k->v = TAKE_A(a, L * D);
  k->att = TAKE_A(a, L * D), k->lse = TAKE_F(a, L * H);
  k->proj = TAKE_A(a, L * D);
  k->f1 = TAKE_A(a, L * F);
  k->f2 = TAKE_A(a, L * D);
  if (shared) {
    k->a = shared->a, k->mean1 = shared->mean1, k->rstd1 = shared->rstd1;
    k->qrstd = shared->qrstd, k->krstd = shared->krstd, k->q = shared->q, k->k = shared->k;
    k->hmid = shared->hmid, k->m = shared->m, k->mean2 = shared->mean2, k->rstd2 = shared->rstd2;
    k->g = shared->g;
    return;
  }
  k->a = TAKE_A(a, L * D);
  k->mean1 = TAKE_F(a, L), k->rstd1 = TAKE_F(a, L);
  k->qrstd = TAKE_F(a, L * H), k->krstd = TAKE_F(a, L * H);
  k->q = TAKE_A(a, L * D), k->k = TAKE_A(a, L * D);
  k->hmid = TAKE_A(a, L * D);
  k->m = TAKE_A(a, L * D);
  k->mean2 = TAKE_F(a, L), k->rstd2 = TAKE_F(a, L);
  k->g = TAKE_A(a, L * F);
}

static void layout(dit_model *m, arena *a) {
  size_t L = (size_t)m->max_tokens, C = (size_t)m->max_clips, D = (size_t)m->D,
         F = (size_t)m->F, P = (size_t)m->P, H = (size_t)m->H;
  int nblk = m->cfg.recompute == DIT_RECOMPUTE_BLOCK ? 1 : m->cfg.depth;
  int cheap = m->cfg.recompute == DIT_RECOMPUTE_CHEAP;
  m->h = TAKE_A(a, (size_t)(m->cfg.depth + 1) * L * D);
  for (int i = 0; i < nblk; i++)
    layout_block(a, &m->blk[i], cheap && i > 0 ? &m->blk[0] : NULL, L, C, D, F, H);
  if (m->cfg.text_dim > 0) {  // captions: per block, and the context every block shares
    size_t Lt = (size_t)m->max_text;
    for (int i = 0; i < nblk; i++) layout_cross(a, &m->blk[i].x, L, C, D, H, Lt);
    m->tx1 = TAKE_A(a, Lt * D), m->txg = TAKE_A(a, Lt * D), m->ctx = TAKE_A(a, Lt * D);
    m->dctx = TAKE_A(a, Lt * D), m->dtx = TAKE_A(a, Lt * D), m->xdelta = TAKE_F(a, L * H);
    m->dxk = TAKE_A(a, Lt * D), m->dxv = TAKE_A(a, Lt * D);
    if (m->sw.null_token) {  // the null token's key and value rows, one a clip
      m->nullctx = TAKE_A(a, C * D), m->dnull = TAKE_A(a, C * D);
      m->xatt_n = TAKE_A(a, L * D), m->xlse_n = TAKE_F(a, L * H);
      m->dnk = TAKE_A(a, C * D), m->dnv = TAKE_A(a, C * D);
      m->cu_null = take(a, sizeof(int32_t) * (C + 1));
    }
    m->cu_text0 = take(a, sizeof(int32_t) * (C + 1));
  }
  if (m->cfg.text_dim > 0 || m->sw.mod_table) m->zero_ids = take(a, sizeof(int32_t) * C);
  if (m->sw.mod_table) m->tp = TAKE_A(a, C * 6 * D), m->dtp = TAKE_A(a, C * 6 * D);
  if (m->sw.head_temb) m->dchead = TAKE_A(a, C * D);
  if (m->sw.cross_affine && m->cfg.text_dim > 0) {
    m->xaff = TAKE_A(a, C * 2 * D), m->dxaff = TAKE_A(a, C * 2 * D), m->xw1 = TAKE_F(a, D);
  }
  m->tsc = TAKE_F(a, C), m->temb = TAKE_A(a, C * (size_t)m->cfg.freq_dim);
  m->c1 = TAKE_A(a, C * D), m->s1 = TAKE_A(a, C * D), m->c = TAKE_A(a, C * D);
  m->cs = TAKE_A(a, C * D), m->fmod = TAKE_A(a, C * 2 * D);
  m->meanf = TAKE_F(a, L), m->rstdf = TAKE_F(a, L);
  m->of = TAKE_A(a, L * D), m->pred = TAKE_A(a, L * P);
  m->loss = TAKE_F(a, 1), m->sse = TAKE_F(a, C);
  m->dh = TAKE_A(a, L * D);
  // dL/dqlin, dL/dklin and dL/dv of a block (block.c) one stride apart, as qlin, klin, v
  // are (layout_block): their dW is one batched GEMM (layers.c dit_linears_bwd)
  m->dt1 = TAKE_A(a, L * D), m->dt2 = TAKE_A(a, L * D), m->dv = TAKE_A(a, L * D);
  m->dt3 = TAKE_A(a, L * D), m->dq = TAKE_A(a, L * D), m->dk = TAKE_A(a, L * D);
  m->dF = TAKE_A(a, L * F);
  m->dpred = TAKE_A(a, L * P);
  m->dmod = TAKE_A(a, C * 6 * D), m->dcs = TAKE_A(a, C * D), m->dc = TAKE_A(a, C * D);
  m->dc1 = TAKE_A(a, C * D);
  m->null_labels = take(a, sizeof(int32_t) * C);
  // the working copy of the weights: with fp32 activations the masters themselves
  if (m->kb->act_dtype != KERNELS_F32 && !m->bucket_params) m->wact = TAKE_A(a, m->n_params);
}

// The default attention's ctx is the model: its config's mask (model/mask.h).
static tsr_status default_attn_fwd(void *ctx, const kernels_backend *kb, const dit_batch *b,
                                   void *out, float *lse, const void *q, const void *k,
                                   const void *v, int H, int Dh, float scale) {
  const dit_model *m = ctx;
  if (m->cfg.attn_mask != KERNELS_MASK_FULL)
    return dit_mask_forward(&m->cfg, kb, b, out, lse, q, k, v, H, Dh, scale);
  return kb->attention_forward(kb, out, lse, q, k, v, dit_attn_cu(b), dit_attn_clips(b),
                               dit_attn_max_len(b), b->L, H, Dh, scale);
}

static tsr_status default_attn_bwd(void *ctx, const kernels_backend *kb, const dit_batch *b,
                                   void *dq, void *dk, void *dv, const void *dout,
                                   const void *q, const void *k, const void *v,
                                   const void *out, const float *lse, int H, int Dh, float scale) {
  const dit_model *m = ctx;
  if (m->cfg.attn_mask != KERNELS_MASK_FULL)
    return dit_mask_backward(&m->cfg, kb, b, dq, dk, dv, dout, q, k, v, out, lse, H, Dh, scale);
  return kb->attention_backward(kb, dq, dk, dv, dout, q, k, v, out, lse, dit_attn_cu(b),
                                dit_attn_clips(b), dit_attn_max_len(b), b->L, H, Dh, scale);
}

// The shape fields and tensor table of a model of config c (no buffers): what dit_create
// and dit_memory_bytes both start from. Frees nothing on failure (the caller does).
static tsr_status model_tables(dit_model *m, const dit_config *c, int max_tokens, int max_clips) {
  m->cfg = *c, m->max_tokens = max_tokens, m->max_clips = max_clips;
  m->D = c->hidden, m->H = c->heads, m->Dh = c->hidden / c->heads;
  m->F = c->ffn_dim > 0 ? c->ffn_dim : c->mlp_ratio * c->hidden;
  int wan = c->family == DIT_FAMILY_WAN;
  m->sw = (dit_switches){.mod_table = wan, .head_temb = wan, .qk_norm_full = wan,
                         .cross_affine = wan, .null_token = !wan};
  m->P = c->pt * c->ph * c->pw * c->channels;
  if (c->text_dim > 0 && (int64_t)max_clips * c->text_len > INT32_MAX / 4)
    return err_set(TSR_EINVAL, "dit_create: %d clips of up to %d caption tokens is too many",
                   max_clips, c->text_len);
  m->max_text = c->text_dim > 0 ? max_clips * c->text_len : 0;
  int cap = DIT_TENSORS_FIXED + DIT_TENSORS_PER_BLOCK * c->depth;
  m->table = calloc((size_t)cap, sizeof *m->table);
  m->init = calloc((size_t)cap, sizeof *m->init);
  m->names = calloc((size_t)cap, sizeof *m->names);
  m->bp = calloc((size_t)c->depth, sizeof *m->bp);
  m->blk = calloc((size_t)(c->recompute == DIT_RECOMPUTE_BLOCK ? 1 : c->depth), sizeof *m->blk);
  if (!m->table || !m->init || !m->names || !m->bp || !m->blk)
    return err_set(TSR_ENOMEM, "dit_create: no memory for the tensor table");
  build_table(m);
  return TSR_OK;
}

tsr_status dit_model_shell(dit_model *m, const dit_config *c, int max_tokens, int max_clips) {
  memset(m, 0, sizeof *m);
  train_config tdef;
  dit_config unused;
  config_defaults(&unused, &tdef);
  tsr_status st = config_validate(c, &tdef);
  if (!st) st = model_tables(m, c, max_tokens, max_clips);
  if (st) dit_model_shell_free(m);
  return st;
}

void dit_model_shell_free(dit_model *m) {
  free(m->table), free(m->init), free(m->names), free(m->bp), free(m->blk);
  memset(m, 0, sizeof *m);
}

tsr_status dit_memory_bytes(const dit_config *c, kernels_dtype act, int64_t max_tokens,
                            int64_t max_clips, dit_memory *out) {
  memset(out, 0, sizeof *out);
  if (!c || max_tokens < 1 || max_clips < 1 || max_tokens > INT32_MAX || max_clips > INT32_MAX)
    return err_set(TSR_EINVAL, "dit_memory_bytes: max_tokens = %lld and max_clips = %lld must be "
                   "in [1, 2^31)", (long long)max_tokens, (long long)max_clips);
  size_t asz = kernels_dtype_size(act);
  if (!asz) return err_set(TSR_EINVAL, "dit_memory_bytes: unknown activation dtype %d", (int)act);
  dit_model m;
  tsr_status st = dit_model_shell(&m, c, (int)max_tokens, (int)max_clips);
  kernels_backend dtype_only = {.act_dtype = act};  // layout reads the act dtype only
  m.kb = &dtype_only;
  if (!st) {
    arena a = {.asz = asz};  // measuring pass: base NULL
    layout(&m, &a);
    out->n_params = m.n_params;
    out->params = out->grads = m.n_params * sizeof(float);
    out->act_weights = act != KERNELS_F32 ? (m.n_params * asz + 63) / 64 * 64 : 0;
    out->frozen_params = out->params;  // dit_create_frozen_base's masters
    if (act != KERNELS_F32) st = compact_offsets(&m);
    if (!st && m.p_off) out->frozen_params = m.n_fp32 * sizeof(float);
    free(m.p_off);
    m.p_off = NULL;
    out->activations = a.used - out->act_weights;
    if (!st && !(st = dit_buckets_init(&m)))
      for (int b = 0; b < m.n_buckets; b++)
        if (m.buckets[b].numel > out->largest_bucket) out->largest_bucket = m.buckets[b].numel;
    free(m.buckets);
    m.buckets = NULL;
  }
  dit_model_shell_free(&m);
  return st;
}

tsr_status dit_table_make(const dit_config *c, dit_table *out) {
  memset(out, 0, sizeof *out);
  train_config tdef;
  dit_config unused;
  config_defaults(&unused, &tdef);
  TSR_TRY(config_validate(c, &tdef));
  dit_model m = {0};
  tsr_status st = model_tables(&m, c, 1, 1);
  if (!st) *out = (dit_table){m.n_tensors, m.table, m.n_params, m.names};
  else free(m.table), free(m.names);
  free(m.init), free(m.bp), free(m.blk);
  return st;
}

void dit_table_free(dit_table *t) {
  free(t->t), free(t->names);
  memset(t, 0, sizeof *t);
}

// grads: 0 the whole buffer, 1 none (frozen), 2 per bucket (dit_create_bucket_grads), 3 per
// bucket and the weights too (dit_create_sharded), 4 none and an act-dtype base
// (dit_create_frozen_base).
static tsr_status create(dit_model **out, const dit_config *c, const kernels_backend *kb,
                         int max_tokens, int max_clips, int grads) {
  const int frozen = grads != 0;
  *out = NULL;
  if (!c || !kb) return err_set(TSR_EINVAL, "dit_create: config or backend is NULL");
  if (max_tokens < 1 || max_clips < 1)
    return err_set(TSR_EINVAL, "dit_create: max_tokens = %d and max_clips = %d must be >= 1",
                   max_tokens, max_clips);
  train_config tdef;
  dit_config unused;
  config_defaults(&unused, &tdef);
  TSR_TRY(config_validate(c, &tdef));
  dit_model *m = calloc(1, sizeof *m);
  if (!m) return err_set(TSR_ENOMEM, "dit_create: no memory");
  m->kb = kb;
  m->attn = (dit_attention){default_attn_fwd, default_attn_bwd, m, NULL};
  m->attn_default = 1;
  tsr_status st = dit_mask_check_backend(c, kb);
  if (!st) st = model_tables(m, c, max_tokens, max_clips);
  if (st) goto fail;
  if (kb->graph_begin && (st = dit_graphs_init(m))) goto fail;
  if ((st = dit_buckets_init(m))) goto fail;
  if (grads == 2 || grads == 3) {  // per-bucket gradients
    m->bucket_grads = calloc((size_t)m->n_buckets, sizeof *m->bucket_grads);
    m->tensor_bucket = calloc((size_t)m->n_tensors, sizeof *m->tensor_bucket);
    if (grads == 3) {
      m->bucket_params = calloc((size_t)m->n_buckets, sizeof *m->bucket_params);
      m->bucket_wact = calloc((size_t)m->n_buckets, sizeof *m->bucket_wact);
    }
    if (!m->bucket_grads || !m->tensor_bucket ||
        (grads == 3 && (!m->bucket_params || !m->bucket_wact))) {
      st = err_set(TSR_ENOMEM, "dit_create: no memory");
      goto fail;
    }
    for (int i = 0; i < m->n_tensors; i++)
      for (int b = 0; b < m->n_buckets; b++)
        if (m->table[i].offset >= m->buckets[b].offset &&
            m->table[i].offset < m->buckets[b].offset + m->buckets[b].numel)
          m->tensor_bucket[i] = b;
  }
  const char *keep = getenv("TESSERA_FROZEN_FP32");
  if (grads == 4 && kb->act_dtype != KERNELS_F32 && !(keep && !strcmp(keep, "1")) &&
      (st = compact_offsets(m)))
    goto fail;
  size_t nf = m->p_off ? m->n_fp32 : m->n_params;  // floats of the fp32 masters
  if ((grads != 3 && (st = kb->alloc(kb, (void **)&m->params, (nf ? nf : 1) * sizeof(float)))) ||
      (!frozen && (st = kb->alloc(kb, (void **)&m->grads, m->n_params * sizeof(float)))))
    goto fail;
  if (!kernels_dtype_size(kb->act_dtype)) {
    st = err_set(TSR_EINVAL, "dit_create: backend %s has an unknown activation dtype %d",
                 kb->name, (int)kb->act_dtype);
    goto fail;
  }
  m->wact = m->params;
  arena a = {.asz = kernels_dtype_size(kb->act_dtype)};
  layout(m, &a);
  m->act_bytes = a.used;
  if ((st = kb->alloc(kb, &m->act_mem, a.used))) {
    err_wrap(st, "dit_create: activations for %d tokens (%.1f MiB; lower mem_tokens or set "
                 "model.recompute=1 or 2): ", max_tokens, (double)a.used / (1 << 20));
    goto fail;
  }
  a = (arena){m->act_mem, 0, a.asz};
  layout(m, &a);
  int32_t *nl = malloc(sizeof(int32_t) * (size_t)max_clips);
  if (!nl) {
    st = err_set(TSR_ENOMEM, "dit_create: no memory");
    goto fail;
  }
  for (int i = 0; i < max_clips; i++) nl[i] = c->num_classes;
  st = kb->to_device(kb, m->null_labels, nl, sizeof(int32_t) * (size_t)max_clips);
  free(nl);
  if (st) goto fail;
  if (m->cu_null) {  // the index arrays of the null token (memory is zero-filled)
    int32_t *cn = malloc(sizeof(int32_t) * ((size_t)max_clips + 1));
    if (!cn) {
      st = err_set(TSR_ENOMEM, "dit_create: no memory");
      goto fail;
    }
    for (int i = 0; i <= max_clips; i++) cn[i] = i;
    st = kb->to_device(kb, m->cu_null, cn, sizeof(int32_t) * ((size_t)max_clips + 1));
    free(cn);
    if (st) goto fail;
  }
  *out = m;
  return TSR_OK;
fail:
  dit_free(&m);
  return st;
}

tsr_status dit_create(dit_model **out, const dit_config *c, const kernels_backend *kb,
                      int max_tokens, int max_clips) {
  return create(out, c, kb, max_tokens, max_clips, 0);
}

tsr_status dit_create_frozen(dit_model **out, const dit_config *c, const kernels_backend *kb,
                             int max_tokens, int max_clips) {
  return create(out, c, kb, max_tokens, max_clips, 1);
}

tsr_status dit_create_bucket_grads(dit_model **out, const dit_config *c, const kernels_backend *kb,
                                   int max_tokens, int max_clips) {
  return create(out, c, kb, max_tokens, max_clips, 2);
}

tsr_status dit_create_sharded(dit_model **out, const dit_config *c, const kernels_backend *kb,
                              int max_tokens, int max_clips) {
  return create(out, c, kb, max_tokens, max_clips, 3);
}

tsr_status dit_create_frozen_base(dit_model **out, const dit_config *c, const kernels_backend *kb,
                                  int max_tokens, int max_clips) {
  return create(out, c, kb, max_tokens, max_clips, 4);
}

tsr_status dit_put_tensor(dit_model *m, int i, const float *host) {
  const kernels_backend *kb = m->kb;
  const dit_tensor *t = &m->table[i];
  const size_t bytes = t->numel * sizeof(float);
  if (!m->params)
    return err_set(TSR_EINVAL, "dit_put_tensor: the model holds no weights of its own (sharded)");
  float *p = dit_p(m, i);
  if (p) {  // the masters, then the working copy from them
    TSR_TRY(kb->to_device(kb, p, host, bytes));
    return m->wact == m->params ? TSR_OK
                                : kb->cast(kb, dit_w(m, i), kb->act_dtype, p, KERNELS_F32, t->numel);
  }
  float *s = NULL;  // no masters: the working copy through a scratch on the backend
  TSR_TRY(kb->alloc(kb, (void **)&s, bytes ? bytes : sizeof(float)));
  tsr_status st = kb->to_device(kb, s, host, bytes);
  if (!st) st = kb->cast(kb, dit_w(m, i), kb->act_dtype, s, KERNELS_F32, t->numel);
  if (!st) st = kb->sync(kb);  // the cast has read the scratch before it is freed
  kb->free(kb, s);
  return st;
}

tsr_status dit_copy_weights(dit_model *dst, const dit_model *src) {
  if (!dst->params || !src->params || !dst->p_off != !src->p_off ||
      dst->n_params != src->n_params || dst->n_fp32 != src->n_fp32 || dst->kb != src->kb)
    return err_set(TSR_EINVAL, "dit_copy_weights: the models differ in config, kind or backend");
  const kernels_backend *kb = dst->kb;
  size_t nf = src->p_off ? src->n_fp32 : src->n_params;
  TSR_TRY(kb->copy(kb, dst->params, src->params, nf * sizeof(float)));
  if (src->wact != src->params)
    TSR_TRY(kb->copy(kb, dst->wact, src->wact, kernels_act_bytes(kb, src->n_params)));
  if (src->wsums) dit_set_weight_sums(dst, src->wsums, src->wsum_all);
  return TSR_OK;
}

void dit_set_weight_sums(dit_model *m, const uint64_t *tensor_sums, uint64_t all) {
  if (!m->wsums && !(m->wsums = malloc((size_t)m->n_tensors * sizeof *m->wsums))) return;
  memcpy(m->wsums, tensor_sums, (size_t)m->n_tensors * sizeof *m->wsums);
  m->wsum_all = all;
}

const uint64_t *dit_weight_sums(const dit_model *m, uint64_t *all) {
  if (all) *all = m->wsum_all;
  return m->wsums;
}

void dit_free(dit_model **pm) {
  dit_model *m = *pm;
  if (!m) return;
  kgraph_cache_destroy(m->graphs);  // frees its graphs through the backend
  dit_lora_free(m);
  if (m->kb) {
    m->kb->free(m->kb, m->params);
    m->kb->free(m->kb, m->grads);
    m->kb->free(m->kb, m->act_mem);
  }
  free(m->table), free(m->init), free(m->names), free(m->bp), free(m->blk), free(m->buckets);
  free(m->bucket_grads), free(m->tensor_bucket), free(m->bucket_params), free(m->bucket_wact);
  free(m->p_off), free(m->wsums);
  free(m);
  *pm = NULL;
}

const dit_config *dit_get_config(const dit_model *m) { return &m->cfg; }
int dit_num_tensors(const dit_model *m) { return m->n_tensors; }
const dit_tensor *dit_tensor_info(const dit_model *m, int i) {
  return i >= 0 && i < m->n_tensors ? &m->table[i] : NULL;
}
int dit_find_tensor(const dit_model *m, const char *name) {
  for (int i = 0; i < m->n_tensors; i++)
    if (!strcmp(m->table[i].name, name)) return i;
  return -1;
}
size_t dit_num_params(const dit_model *m) { return m->n_params; }
const kernels_backend *dit_backend(const dit_model *m) { return m->kb; }
float *dit_params(dit_model *m) { return m->p_off ? NULL : m->params; }
float *dit_grads(dit_model *m) { return m->grads; }
size_t dit_activation_bytes(const dit_model *m) { return m->act_bytes; }
void dit_set_attention(dit_model *m, const dit_attention *a) {
  if (a) m->attn = *a;
  else m->attn = (dit_attention){default_attn_fwd, default_attn_bwd, m, NULL};
  m->attn_default = !a;
}
void dit_set_input_grad(dit_model *m, void *dx) { m->dx = dx; }

size_t dit_count_params(const dit_model *m) {
  size_t n = 0;
  for (int i = 0; i < m->n_tensors; i++) n += m->table[i].numel;
  return n;
}

// FNV-1a of a tensor name: its RNG clip field, so a tensor's init does not depend on
// which other tensors exist.
static uint64_t name_hash(const char *s) { return hash_fnv1a(HASH_FNV1A_INIT, s, strlen(s)); }

void dit_init_range(const dit_model *m, uint64_t seed, size_t lo, size_t n, float *host) {
  memset(host, 0, n * sizeof *host);  // the padding between tensors
  for (int i = 0; i < m->n_tensors; i++) {
    const dit_tensor *t = &m->table[i];
    size_t a = t->offset > lo ? t->offset : lo, e = t->offset + t->numel;
    if (e > lo + n) e = lo + n;
    if (a >= e) continue;
    float *p = host + (a - lo);
    rng_key key = {.seed = seed, .step = 0, .clip = name_hash(t->name), .stream = RNG_STREAM_INIT};
    double bound = t->ndim == 2 ? sqrt(6.0 / (double)(t->shape[0] + t->shape[1])) : 0;
    for (size_t j = a - t->offset; j < e - t->offset; j++, p++) {
      switch (m->init[i]) {
        case INIT_ZERO: *p = 0; break;
        case INIT_ONE: *p = 1; break;
        case INIT_XAVIER: *p = (float)((2 * rng_uniform(&key, j) - 1) * bound); break;
        case INIT_NORMAL002: *p = (float)(0.02 * rng_normal(&key, j)); break;
      }
    }
  }
}

tsr_status dit_init(dit_model *m, uint64_t seed) {
  if (!m->params || m->p_off)
    return err_set(TSR_EINVAL, "dit_init: the model holds no whole fp32 weights (dit_create_sharded: "
                   "initialise its shards with dit_init_range; dit_create_frozen_base: load them)");
  float *host = malloc((m->n_params ? m->n_params : 1) * sizeof(float));
  if (!host) return err_set(TSR_ENOMEM, "dit_init: no memory for %zu parameters", m->n_params);
  dit_init_range(m, seed, 0, m->n_params, host);
  tsr_status st = m->kb->to_device(m->kb, m->params, host, m->n_params * sizeof(float));
  free(host);
  return st ? st : dit_refresh_weights(m);
}

tsr_status dit_refresh_weights(dit_model *m) {
  if (m->wact == m->params || m->p_off) return TSR_OK;  // p_off: dit_put_tensor wrote it
  return m->kb->cast(m->kb, m->wact, m->kb->act_dtype, m->params, KERNELS_F32, m->n_params);
}

void *dit_weights_work(dit_model *m) {
  return m->wact == m->params || m->p_off ? NULL : m->wact;
}

tsr_status dit_zero_grad(dit_model *m) {
  if (!m->grads) return TSR_OK;  // frozen
  return m->kb->memset_zero(m->kb, m->grads, m->n_params * sizeof(float));
}
