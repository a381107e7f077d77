// model/dit.c — forward and backward of the whole DiT over a packed microbatch:
// conditioning, patch embedding, the blocks (kept, recomputed whole or their cheap layers
// recomputed: model.recompute), final layer, loss.
#include "model/dit_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"

static tsr_status check_batch(const dit_model *m, const dit_batch *b, const char *op) {
  if (!b || !b->cu_seqlens || !b->pos || !b->t || !b->x)
    return err_set(TSR_EINVAL, "%s: batch lacks cu_seqlens, pos, t or x", op);
  if (b->L < 0 || b->L > m->max_tokens)
    return err_set(TSR_EINVAL, "%s: %d tokens, the model was created for at most %d", op, b->L,
                   m->max_tokens);
  if (b->n_clips < 1 || b->n_clips > m->max_clips)
    return err_set(TSR_EINVAL, "%s: %d clips, the model was created for 1 to %d", op, b->n_clips,
                   m->max_clips);
  // the longest clip has at least the mean length: catches an unset max_len cheaply (the
  // backends check it against every clip)
  int64_t mean_up = ((int64_t)b->L + b->n_clips - 1) / b->n_clips;
  if (b->max_len < mean_up)
    return err_set(TSR_EINVAL, "%s: max_len = %d, but %d tokens in %d clips make a clip of at "
                   "least %lld: set it to the longest clip's length", op, b->max_len, b->L,
                   b->n_clips, (long long)mean_up);
  if (b->attn_cu && (b->attn_clips < 1 || b->attn_clips > b->n_clips))
    return err_set(TSR_EINVAL, "%s: %d clips of attention over %d segments (1 to %d)", op,
                   b->attn_clips, b->n_clips, b->n_clips);
  if (b->kv) TSR_TRY(dit_kv_check(m, b));
  if (b->target && !b->loss_weight)
    return err_set(TSR_EINVAL, "%s: batch has a target but no loss_weight", op);
  if (m->cfg.text_dim > 0 && b->cu_text &&
      (b->Lt < 0 || b->Lt > m->max_text || (b->Lt > 0 && !b->text)))
    return err_set(TSR_EINVAL, "%s: %d caption tokens (the model was created for at most %d)%s",
                   op, b->Lt, m->max_text, b->Lt > 0 && !b->text ? " but no text" : "");
  return TSR_OK;
}

// Activations of block i (the one scratch set when recomputing whole blocks).
static dit_block_acts *acts_of(dit_model *m, int i) {
  return &m->blk[m->cfg.recompute == DIT_RECOMPUTE_BLOCK ? 0 : i];
}
static void *h_at(dit_model *m, int i) { return dit_act(m, m->h, (size_t)i * m->max_tokens * m->D); }

tsr_status dit_forward(dit_model *m, const dit_batch *b, void *pred, double *loss) {
  if (loss) *loss = 0;
  TSR_TRY(dit_forward_dev(m, b, pred, NULL));
  if (b->target && loss) {
    float l;
    TSR_TRY(m->kb->to_host(m->kb, &l, m->loss, sizeof l));
    *loss = l;
  }
  return TSR_OK;
}

// ---- recorded graphs (kernels.h graph_*; kernels/graph_cache.h) ------------------------
// The forward and the backward of a microbatch are each one phase: the backend's entries
// only, no host work, so that a backend that records (CUDA with TESSERA_CUDA_GRAPHS=1) can
// replay a phase with one launch. Host-side state (have_fwd, sizes) is set by the callers,
// outside the phases.
enum { PHASE_FORWARD = 0, PHASE_BACKWARD = 1 };
typedef struct {
  const dit_batch *b;
} phase_args;

static tsr_status forward_phase(dit_model *m, const phase_args *a);
static tsr_status backward_phase(dit_model *m, const phase_args *a);

static void free_graph(void *ctx, void *graph) {
  const kernels_backend *kb = ctx;
  kb->graph_free(kb, graph);
}

tsr_status dit_graphs_init(dit_model *m) {
  // 8 graphs (a few microbatch shapes, forward and backward each); a shape is recorded at
  // its second use, after one eager run built its cuBLASLt/cuDNN plans and sized the scratch.
  return kgraph_cache_create(&m->graphs, 8, 1, free_graph, (void *)m->kb);
}

void dit_set_graphs(dit_model *m, int on) { m->graphs_off = !on; }

kgraph_stats dit_graph_stats(const dit_model *m) {
  kgraph_stats z = {0};
  return m->graphs ? kgraph_cache_stats(m->graphs) : z;
}

// Everything a phase's launches depend on besides device memory contents: sizes (the
// attention's bound of the clips' length among them: it picks the cuDNN plan and is checked
// on the device), the pointers of the batch and of dL/dx, the attention hook. Not
// cu_seqlens' contents: the backends derive every per-clip offset on the device
// (docs/gpu.md, "Speed").
static void phase_key(const dit_model *m, int phase, const phase_args *a, kgraph_key *k) {
  const dit_batch *b = a->b;
  kgraph_key_init(k);
  kgraph_key_int(k, phase);
  kgraph_key_int(k, b->L);
  kgraph_key_int(k, b->n_clips);
  kgraph_key_int(k, dit_attn_max_len(b));
  kgraph_key_int(k, b->cu_text ? b->Lt : -1);
  kgraph_key_int(k, b->attn_cu ? b->attn_clips : -1);
  const void *ptrs[] = {b->cu_seqlens, b->attn_cu, b->pos, b->t, b->labels, b->x, b->target,
                        b->loss_weight, b->cu_text, b->text, m->dx,
                        m->attn.ctx};  // a hook passes its own buffers to the backend
  kgraph_key_add(k, &m->attn.forward, sizeof m->attn.forward);
  kgraph_key_add(k, &m->attn.backward, sizeof m->attn.backward);
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) kgraph_key_ptr(k, ptrs[i]);
}

// Runs phase `phase` eagerly, or records it and replays it (kernels/graph_cache.h says
// which). A recording that fails is said in one line and the phase runs eagerly, now and
// for that key from then on.
static tsr_status run_phase(dit_model *m, int phase, const phase_args *a) {
  tsr_status (*body)(dit_model *, const phase_args *) =
      phase == PHASE_FORWARD ? forward_phase : backward_phase;
  const kernels_backend *kb = m->kb;
  int attn_ok = m->attn_default || (m->attn.recordable && m->attn.recordable(m->attn.ctx));
  // a K/V cache's key count is host state that changes from chunk to chunk: eager
  if (!m->graphs || m->graphs_off || !attn_ok || m->weight_hook || a->b->kv ||
      (phase == PHASE_BACKWARD && m->bucket_hook))
    return body(m, a);
  kgraph_key k;
  phase_key(m, phase, a, &k);
  void *g = NULL;
  int action = kgraph_lookup(m->graphs, &k, &g);
  if (action == KGRAPH_EAGER) return body(m, a);
  int stale = 0;
  if (action == KGRAPH_REPLAY) {
    TSR_TRY(kb->graph_launch(kb, g, &stale));
    if (!stale) return TSR_OK;
    kgraph_cache_clear(m->graphs);  // the backend's scratch moved: every graph is stale
    return body(m, a);
  }
  tsr_status st = kb->graph_begin(kb);
  if (!st) {
    tsr_status sb = body(m, a);
    char why[256];
    snprintf(why, sizeof why, "%s", sb ? err_msg() : "");
    tsr_status se = kb->graph_end(kb, &g);  // ends the recording even after an error
    if (sb) st = err_set(sb, "%s", why);
    else st = se;
    if (!st) st = kgraph_put(m->graphs, &k, g);
    if (!st) st = kb->graph_launch(kb, g, &stale);
    if (!st && !stale) return TSR_OK;
  }
  log_warn("dit: the %s of %d tokens in %d clips runs eagerly: recording it as a graph failed: "
           "%s", phase == PHASE_FORWARD ? "forward" : "backward", a->b->L, a->b->n_clips,
           st ? err_msg() : "the recorded graph went stale at once");
  kgraph_failed(m->graphs, &k);
  return body(m, a);
}

tsr_status dit_forward_dev(dit_model *m, const dit_batch *b, void *pred, float *loss_dev) {
  TSR_TRY(check_batch(m, b, "dit_forward"));
  m->have_fwd = 0;
  phase_args a = {b};
  TSR_TRY(run_phase(m, PHASE_FORWARD, &a));
  // the outputs' copies stay outside the phase, so that its graph does not depend on where
  // they go (the trainer gives each wave its own loss slot)
  const kernels_backend *kb = m->kb;
  if (pred) TSR_TRY(kb->copy(kb, pred, m->pred, kernels_act_bytes(kb, (size_t)b->L * m->P)));
  if (b->target && loss_dev) TSR_TRY(kb->copy(kb, loss_dev, m->loss, sizeof(float)));
  m->text_Lt = m->cfg.text_dim > 0 && b->cu_text ? b->Lt : 0;  // as dit_text_fwd sets it
  m->fwd_L = b->L, m->fwd_C = b->n_clips, m->have_fwd = 1;
  m->fwd_tokens += b->L;
  return TSR_OK;
}

int64_t dit_forward_tokens(const dit_model *m) { return m->fwd_tokens; }

static tsr_status forward_phase(dit_model *m, const phase_args *pa) {
  const kernels_backend *kb = m->kb;
  const dit_batch *b = pa->b;
  // buckets (dit_get_bucket): the embeddings depth + 1, block i depth - i, the final layer 0
  TSR_TRY(dit_need_weights(m, m->cfg.depth + 1));
  TSR_TRY(dit_cond_fwd(m, b));
  TSR_TRY(dit_text_fwd(m, b));
  TSR_TRY(dit_linear_fwd(m, m->x_embed, h_at(m, 0), b->x, b->L));
  for (int i = 0; i < m->cfg.depth; i++) {
    TSR_TRY(dit_need_weights(m, m->cfg.depth - i));
    TSR_TRY(dit_block_fwd(m, i, acts_of(m, i), h_at(m, i), h_at(m, i + 1), b));
  }
  TSR_TRY(dit_need_weights(m, 0));
  TSR_TRY(dit_final_fwd(m, h_at(m, m->cfg.depth), b));
  if (b->target)
    TSR_TRY(kb->mse_forward(kb, m->loss, m->sse, m->pred, b->target, b->loss_weight,
                            b->cu_seqlens, b->n_clips, b->L, m->P));
  return TSR_OK;
}

static void bucket_ready(dit_model *m, int i) {
  if (m->bucket_hook && (m->grads || m->bucket_grads)) m->bucket_hook(m->bucket_ctx, i);
}

tsr_status dit_backward(dit_model *m, const dit_batch *b) {
  TSR_TRY(check_batch(m, b, "dit_backward"));
  if (!m->have_fwd || m->fwd_L != b->L || m->fwd_C != b->n_clips)
    return err_set(TSR_EINVAL, "dit_backward: no dit_forward of this batch before it");
  if (!b->target) return err_set(TSR_EINVAL, "dit_backward: the batch has no target");
  phase_args a = {b};
  TSR_TRY(run_phase(m, PHASE_BACKWARD, &a));
  m->have_fwd = 0;  // the scratch activations of the last block are now stale
  return TSR_OK;
}

static tsr_status backward_phase(dit_model *m, const phase_args *pa) {
  const kernels_backend *kb = m->kb;
  const dit_batch *b = pa->b;
  TSR_TRY(kb->mse_backward(kb, m->dpred, m->pred, b->target, b->loss_weight, b->cu_seqlens,
                           b->n_clips, b->L, m->P));
  TSR_TRY(dit_need_weights(m, 0));
  TSR_TRY(dit_final_bwd(m, h_at(m, m->cfg.depth), b));
  bucket_ready(m, 0);
  if (m->sw.mod_table)  // the blocks' modulation gradients, summed
    TSR_TRY(kb->memset_zero(kb, m->dtp, kernels_act_bytes(kb, (size_t)b->n_clips * 6 * m->D)));
  if (m->cfg.text_dim > 0) {  // the caption context's gradients, summed over the blocks
    TSR_TRY(kb->memset_zero(kb, m->dctx, kernels_act_bytes(kb, (size_t)m->text_Lt * m->D)));
    if (m->sw.null_token)
      TSR_TRY(kb->memset_zero(kb, m->dnull, kernels_act_bytes(kb, (size_t)b->n_clips * m->D)));
  }
  for (int i = m->cfg.depth - 1; i >= 0; i--) {
    TSR_TRY(dit_need_weights(m, m->cfg.depth - i));
    if (m->cfg.recompute == DIT_RECOMPUTE_BLOCK)  // rewrites h[i + 1] with the same bits
      TSR_TRY(dit_block_fwd(m, i, acts_of(m, i), h_at(m, i), h_at(m, i + 1), b));
    else if (m->cfg.recompute == DIT_RECOMPUTE_CHEAP)  // the token-local layers, same bits
      TSR_TRY(dit_block_recompute_cheap(m, i, acts_of(m, i), h_at(m, i), b));
    TSR_TRY(dit_block_bwd(m, i, acts_of(m, i), h_at(m, i), b));
    bucket_ready(m, m->cfg.depth - i);
  }
  TSR_TRY(dit_need_weights(m, m->cfg.depth + 1));
  TSR_TRY(dit_linear_bwd(m, m->x_embed, m->dx, 0, m->dh, b->x, b->L));
  TSR_TRY(dit_cond_bwd(m, b));
  TSR_TRY(dit_text_bwd(m, b));
  bucket_ready(m, m->cfg.depth + 1);
  return TSR_OK;
}

// ---- gradient buckets ----------------------------------------------------------------

tsr_status dit_buckets_init(dit_model *m) {
  const int depth = m->cfg.depth;
  m->n_buckets = depth + 2;
  m->buckets = calloc((size_t)m->n_buckets, sizeof *m->buckets);
  if (!m->buckets) return err_set(TSR_ENOMEM, "dit: out of memory for gradient buckets");
  // Memory follows the table (params.c): embeddings and conditioning, blocks 0 .. depth-1,
  // final layer. Each bucket runs from its first tensor to the next bucket's first one,
  // padding included, so together they tile the buffer.
  size_t starts[depth + 3];
  starts[0] = 0;
  for (int i = 0; i < depth; i++) starts[1 + i] = m->table[m->bp[i].first].offset;
  starts[depth + 1] = m->table[m->final_first].offset;
  starts[depth + 2] = m->n_params;
  for (int k = 0; k <= depth + 1; k++)
    if (starts[k + 1] <= starts[k])
      return err_set(TSR_EINVAL, "dit: the tensor table is not in block order; gradient "
                     "buckets need it");
  m->buckets[depth + 1] = (dit_bucket){starts[0], starts[1] - starts[0]};  // embeddings
  for (int i = 0; i < depth; i++)  // block i completes at backward position depth - i
    m->buckets[depth - i] = (dit_bucket){starts[1 + i], starts[2 + i] - starts[1 + i]};
  m->buckets[0] = (dit_bucket){starts[depth + 1], starts[depth + 2] - starts[depth + 1]};
  return TSR_OK;
}

int dit_num_buckets(const dit_model *m) { return m->grads || m->bucket_grads ? m->n_buckets : 0; }

void dit_set_bucket_grads(dit_model *m, int bucket, float *g) {
  if (m->bucket_grads && bucket >= 0 && bucket < m->n_buckets) m->bucket_grads[bucket] = g;
}
dit_bucket dit_get_bucket(const dit_model *m, int i) { return m->buckets[i]; }

void dit_set_bucket_weights(dit_model *m, int bucket, float *p, void *w) {
  if (m->bucket_params && bucket >= 0 && bucket < m->n_buckets)
    m->bucket_params[bucket] = p, m->bucket_wact[bucket] = w;
}

void dit_set_weight_hook(dit_model *m, tsr_status (*fn)(void *ctx, int bucket), void *ctx) {
  m->weight_hook = fn;
  m->weight_ctx = ctx;
}

void dit_set_bucket_hook(dit_model *m, void (*fn)(void *ctx, int bucket), void *ctx) {
  m->bucket_hook = fn;
  m->bucket_ctx = ctx;
}
