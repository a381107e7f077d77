// model/kvcache.c — cached keys and values of finished chunks (model/kvcache.h).
#include "model/kvcache.h"

#include <stdlib.h>
#include <string.h>

#include "model/dit_internal.h"
#include "model/mask.h"

// Per layer and branch, a region of cap = (ctx_chunks + 1) chunk tokens: the n_ctx kept
// chunks in slots 0 .. n_ctx - 1, then the chunk being run at n_ctx chunk. A commit with
// free slots leaves the chunk where it is (it is slot n_ctx); with all ctx_chunks slots
// kept it copies the chunk over the oldest slot.
struct dit_kv_cache {
  const kernels_backend *kb;
  int depth, clips, chunk, ctx_chunks, D;
  size_t cap;       // tokens of one region
  void *k, *v;      // (depth, clips, cap, D) [act] keys after RMSNorm and RoPE, values
  int32_t *pos;     // (cap, 3) backend: the grid positions of a region's tokens
  int32_t *posh;    // (cap, 3) host: the same
  int32_t *cu;      // (4) backend: {0, n, 0, keys}: the queries' and the keys' one clip
  int n_ctx;        // context chunks kept
  int oldest;       // the slot a commit replaces when all are kept
  int n;            // tokens of the chunk being run (0: none since the last commit)
};

tsr_status dit_kv_create(dit_kv_cache **out, const dit_model *m, int clips, int chunk,
                         int ctx_chunks) {
  *out = NULL;
  const dit_config *c = &m->cfg;
  if (c->attn_mask != KERNELS_MASK_BLOCK_CAUSAL)
    return err_set(TSR_EINVAL, "dit_kv_create: the K/V cache needs model.attn_mask = "
                   "block_causal (this model's is %s)", config_mask_name(c->attn_mask));
  if (clips < 1 || clips > 2 || chunk < 1 || ctx_chunks < 0)
    return err_set(TSR_EINVAL, "dit_kv_create: %d clips, chunks of %d tokens, %d kept", clips,
                   chunk, ctx_chunks);
  TSR_TRY(dit_mask_check_backend(c, m->kb));
  dit_kv_cache *kv = calloc(1, sizeof *kv);
  if (!kv) return err_set(TSR_ENOMEM, "dit_kv_create: no memory");
  const kernels_backend *kb = m->kb;
  *kv = (dit_kv_cache){.kb = kb, .depth = c->depth, .clips = clips, .chunk = chunk,
                       .ctx_chunks = ctx_chunks, .D = m->D,
                       .cap = (size_t)(ctx_chunks + 1) * (size_t)chunk};
  size_t n = (size_t)kv->depth * clips * kv->cap * kv->D;
  tsr_status st = kb->alloc(kb, &kv->k, kernels_act_bytes(kb, n));
  if (!st) st = kb->alloc(kb, &kv->v, kernels_act_bytes(kb, n));
  if (!st) st = kb->alloc(kb, (void **)&kv->pos, kv->cap * 3 * sizeof(int32_t));
  if (!st) st = kb->alloc(kb, (void **)&kv->cu, 4 * sizeof(int32_t));
  if (!st && !(kv->posh = malloc(kv->cap * 3 * sizeof(int32_t))))
    st = err_set(TSR_ENOMEM, "dit_kv_create: no memory for %zu positions", kv->cap);
  if (st) dit_kv_free(&kv);
  *out = kv;
  return st;
}

void dit_kv_free(dit_kv_cache **kv) {
  dit_kv_cache *c = *kv;
  if (!c) return;
  void *dev[] = {c->k, c->v, c->pos, c->cu};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) c->kb->free(c->kb, dev[i]);
  free(c->posh);
  free(c);
  *kv = NULL;
}

size_t dit_kv_bytes(const dit_kv_cache *kv) {
  size_t n = (size_t)kv->depth * kv->clips * kv->cap * kv->D;
  return 2 * kernels_act_bytes(kv->kb, n) + kv->cap * 3 * sizeof(int32_t) + 4 * sizeof(int32_t);
}

int dit_kv_context_tokens(const dit_kv_cache *kv) { return kv->ctx_chunks * kv->chunk; }

tsr_status dit_kv_begin(dit_kv_cache *kv, const int32_t *pos, int n) {
  if (n < 1 || n > kv->chunk)
    return err_set(TSR_EINVAL, "dit_kv_begin: %d tokens, the cache's chunks have %d", n,
                   kv->chunk);
  const kernels_backend *kb = kv->kb;
  size_t own = (size_t)kv->n_ctx * kv->chunk;
  int32_t cu[4] = {0, n, 0, (int32_t)(own + (size_t)n)};
  memcpy(kv->posh + own * 3, pos, (size_t)n * 3 * sizeof *pos);
  TSR_TRY(kb->to_device(kb, kv->pos + own * 3, pos, (size_t)n * 3 * sizeof *pos));
  TSR_TRY(kb->to_device(kb, kv->cu, cu, sizeof cu));
  kv->n = n;
  return TSR_OK;
}

tsr_status dit_kv_commit(dit_kv_cache *kv) {
  if (kv->n != kv->chunk)
    return err_set(TSR_EINVAL, "dit_kv_commit: the last chunk has %d tokens; only whole chunks "
                   "of %d become context", kv->n, kv->chunk);
  kv->n = 0;
  if (kv->n_ctx < kv->ctx_chunks) {  // the chunk is slot n_ctx already
    kv->n_ctx++;
    return TSR_OK;
  }
  if (kv->ctx_chunks == 0) return TSR_OK;
  const kernels_backend *kb = kv->kb;
  size_t cs = (size_t)kv->chunk, own = (size_t)kv->n_ctx * cs, slot = (size_t)kv->oldest * cs;
  size_t D = (size_t)kv->D, bytes = kernels_act_bytes(kb, cs * D);
  for (size_t r = 0; r < (size_t)kv->depth * kv->clips; r++)
    for (int w = 0; w < 2; w++) {
      void *base = w ? kv->v : kv->k;
      TSR_TRY(kb->copy(kb, kernels_act_at(kb, base, (r * kv->cap + slot) * D),
                       kernels_act_at(kb, base, (r * kv->cap + own) * D), bytes));
    }
  memcpy(kv->posh + slot * 3, kv->posh + own * 3, cs * 3 * sizeof *kv->posh);
  TSR_TRY(kb->to_device(kb, kv->pos + slot * 3, kv->posh + slot * 3, cs * 3 * sizeof *kv->posh));
  kv->oldest = (kv->oldest + 1) % kv->ctx_chunks;
  return TSR_OK;
}

tsr_status dit_kv_check(const dit_model *m, const dit_batch *b) {
  const dit_kv_cache *kv = b->kv;
  if (kv->depth != m->cfg.depth || kv->D != m->D || kv->kb != m->kb)
    return err_set(TSR_EINVAL, "dit_forward: the K/V cache was made for another model");
  if (kv->n == 0)
    return err_set(TSR_EINVAL, "dit_forward: the K/V cache has no chunk (dit_kv_begin)");
  if (b->target || b->attn_cu || b->n_clips != kv->clips || b->L != kv->clips * kv->n)
    return err_set(TSR_EINVAL, "dit_forward: a batch with a K/V cache is %d clips of the %d "
                   "tokens of its chunk, without segments or target (got %d clips, %d tokens)",
                   kv->clips, kv->n, b->n_clips, b->L);
  return TSR_OK;
}

tsr_status dit_kv_attention(dit_model *m, int layer, const dit_batch *b, void *out, float *lse,
                            const void *q, const void *k, const void *v, float scale) {
  dit_kv_cache *kv = b->kv;
  const kernels_backend *kb = m->kb;
  size_t n = (size_t)kv->n, D = (size_t)m->D, own = (size_t)kv->n_ctx * kv->chunk;
  int keys = (int)(own + n);
  for (int c = 0; c < kv->clips; c++) {
    size_t at = (size_t)c * n, region = ((size_t)layer * kv->clips + c) * kv->cap * D;
    void *kc = kernels_act_at(kb, kv->k, region), *vc = kernels_act_at(kb, kv->v, region);
    TSR_TRY(kb->copy(kb, kernels_act_at(kb, kc, own * D), kernels_act_at(kb, k, at * D),
                     kernels_act_bytes(kb, n * D)));
    TSR_TRY(kb->copy(kb, kernels_act_at(kb, vc, own * D), kernels_act_at(kb, v, at * D),
                     kernels_act_bytes(kb, n * D)));
    TSR_TRY(kb->attention_masked_forward(kb, kernels_act_at(kb, out, at * D),
                                         lse + at * (size_t)m->H, kernels_act_at(kb, q, at * D),
                                         kc, vc, kv->cu, kv->cu + 2, b->pos + at * 3, kv->pos,
                                         config_mask(&m->cfg), 1, (int)n, keys, (int)n, keys,
                                         m->H, m->Dh, scale));
  }
  return TSR_OK;
}
