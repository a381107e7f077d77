// kernels/graph_cache.h — which recorded graphs (kernels.h graph_begin/graph_end: CUDA
// graphs) a caller keeps, and when it records one: the host-side policy, plain C, tested
// without a GPU (tests/kernels/test_graph_cache.c). It holds graphs as opaque pointers and
// frees them through the callback given at creation; it never calls a backend itself.
//
// A key is a byte string the caller builds (kgraph_key_*) from everything the recorded
// work depends on besides the contents of device memory: sizes passed by value (tokens,
// clips), the pointers of every buffer the work reads or writes, and flags. Keys compare
// byte for byte (no hash collisions). What the caller leaves out of the key must not
// change the recorded launches; e.g. the CUDA backend derives the attention's ragged
// offsets from cu_seqlens on the device (docs/gpu.md), so cu_seqlens' contents need not be
// in the key, only its pointer and the clip count.
//
// Policy per key (kgraph_lookup):
//   - seen fewer than `warmup` times before: KGRAPH_EAGER (run it normally). The eager runs
//     build every plan the work needs (cuBLASLt, cuDNN) and grow the backend's scratch, so
//     that the capture allocates nothing and builds nothing;
//   - seen `warmup` times, no graph yet: KGRAPH_CAPTURE (record it now, then kgraph_put
//     the graph, or kgraph_failed when recording failed);
//   - a graph kept: KGRAPH_REPLAY with it;
//   - recording failed before (kgraph_failed): KGRAPH_EAGER for good.
// At most `capacity` graphs are kept; putting one more frees the least recently used
// graph (its key goes back to "seen", so it is recorded again when it returns). At most
// 4 x capacity keys are remembered (the least recently used forgotten first), so a run
// whose microbatches never repeat a shape keeps bounded memory and never records.
// Not thread-safe (one per model, called from the thread that drives the backend).
#ifndef TESSERA_KERNELS_GRAPH_CACHE_H
#define TESSERA_KERNELS_GRAPH_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { KGRAPH_EAGER = 0, KGRAPH_CAPTURE = 1, KGRAPH_REPLAY = 2 };
enum { KGRAPH_KEY_MAX = 512 };  // bytes of a key

// A key under construction: append fields in a fixed order.
typedef struct {
  uint8_t bytes[KGRAPH_KEY_MAX];
  size_t n;
  int overflow;  // 1: more than KGRAPH_KEY_MAX bytes were appended (kgraph_lookup refuses)
} kgraph_key;

void kgraph_key_init(kgraph_key *k);
void kgraph_key_add(kgraph_key *k, const void *field, size_t bytes);
void kgraph_key_int(kgraph_key *k, int64_t v);
void kgraph_key_ptr(kgraph_key *k, const void *p);

typedef struct kgraph_cache kgraph_cache;
typedef void (*kgraph_free_fn)(void *ctx, void *graph);

// capacity >= 1 graphs, warmup >= 1 eager runs of a key before it is recorded; free_graph
// (with ctx) frees a graph the cache drops.
tsr_status kgraph_cache_create(kgraph_cache **out, int capacity, int warmup,
                               kgraph_free_fn free_graph, void *ctx);
// Frees every kept graph and the cache; NULL is ignored.
void kgraph_cache_destroy(kgraph_cache *c);

// The action for key k (above); *graph = the graph to replay for KGRAPH_REPLAY, else NULL.
// Counts the call as one use of the key. An overflowed key is always KGRAPH_EAGER.
int kgraph_lookup(kgraph_cache *c, const kgraph_key *k, void **graph);
// Keeps `graph`, recorded for k after KGRAPH_CAPTURE (may free the least recently used
// other graph). TSR_EINVAL when k was not the key of a KGRAPH_CAPTURE answer (the graph is
// then freed).
tsr_status kgraph_put(kgraph_cache *c, const kgraph_key *k, void *graph);
// Recording k (or the first launch of its graph) failed: k runs eagerly from now on, and
// a graph kept for it is freed.
void kgraph_failed(kgraph_cache *c, const kgraph_key *k);
// Drops every graph (freed) and every key's history: after something the recorded graphs
// depend on moved (e.g. the backend's scratch buffer grew to a new address).
void kgraph_cache_clear(kgraph_cache *c);

typedef struct {
  int64_t eager, captures, replays, failures, evictions;  // lookups answered / events
  int graphs, keys;                                       // held now
} kgraph_stats;
kgraph_stats kgraph_cache_stats(const kgraph_cache *c);

#ifdef __cplusplus
}
#endif

#endif
