// model/kvcache.h — the self-attention keys and values of finished chunks, for sampling a
// block_causal model chunk by chunk (model/sample/sample.h sample_params.chunked).
//
// Under the block-causal mask a chunk's queries never see a later chunk, so the keys and
// values of a finished chunk, run clean (its segment at t = 0), are the same at every layer
// whichever chunk is denoised after it. The cache keeps them per layer: a forward of a
// batch with dit_batch.kv set is one chunk a clip (clip c is branch c: guidance's
// conditional and unconditional clips have their own labels and captions, hence their own
// context keys), each clip's queries attend to its branch's cached context and to the
// chunk itself, and the chunk's own keys and values land in the cache as they are
// computed; dit_kv_commit then makes them context. With model.mask_window = w > 0 only the
// last w chunks are kept (the others are outside every later query's window): a ring of w
// slots, which the mask tells apart by the keys' positions, so their order does not matter.
//
// Memory (dit_kv_bytes): depth x clips x (ctx_chunks + 1) x chunk tokens x 2 (K and V) x
// model.hidden x the act dtype's size, plus the tokens' positions.
#ifndef TESSERA_MODEL_KVCACHE_H
#define TESSERA_MODEL_KVCACHE_H

#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "model/dit.h"

typedef struct dit_kv_cache dit_kv_cache;

// A cache on m's backend for `clips` branches (1, or 2 when guided), chunks of `chunk`
// tokens and at most ctx_chunks >= 0 context chunks. m's config must be block_causal.
tsr_status dit_kv_create(dit_kv_cache **kv, const dit_model *m, int clips, int chunk,
                         int ctx_chunks);
void dit_kv_free(dit_kv_cache **kv);
// Backend bytes the cache holds.
size_t dit_kv_bytes(const dit_kv_cache *kv);
// Context tokens a query of the next chunk sees at most (the chunks kept).
int dit_kv_context_tokens(const dit_kv_cache *kv);
// The chunk of the forwards that follow: n (1 .. chunk) tokens a clip at grid positions pos
// (n, 3) host, the same for every clip; every such forward's batch has clips x n tokens,
// clip c's at [c n, (c + 1) n), and pos equal to these positions in every clip.
tsr_status dit_kv_begin(dit_kv_cache *kv, const int32_t *pos, int n);
// The chunk of the last forward (a whole chunk of `chunk` tokens, run clean) becomes
// context; when ctx_chunks are kept, it replaces the oldest.
tsr_status dit_kv_commit(dit_kv_cache *kv);

#endif
