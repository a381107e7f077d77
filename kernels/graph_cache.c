// kernels/graph_cache.c — the recorded-graph cache's policy (kernels/graph_cache.h). A few
// dozen keys at most: linear scans, least recently used by a use counter.
#include "kernels/graph_cache.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  uint8_t *key;     // copy of the key bytes (NULL: a free slot)
  size_t n;
  int64_t seen;     // lookups of the key so far
  int64_t last;     // the cache's tick at its last lookup (least recently used: smallest)
  void *graph;      // kept graph, or NULL
  int failed;       // recording failed: eager for good
  int capturing;    // the last lookup answered KGRAPH_CAPTURE (kgraph_put expected)
} entry;

struct kgraph_cache {
  int capacity, warmup, nkeys;
  entry *e;         // (nkeys) slots
  int64_t tick;
  kgraph_free_fn free_graph;
  void *ctx;
  kgraph_stats st;
};

void kgraph_key_init(kgraph_key *k) { k->n = 0, k->overflow = 0; }

void kgraph_key_add(kgraph_key *k, const void *field, size_t bytes) {
  if (k->overflow || bytes > KGRAPH_KEY_MAX - k->n) {
    k->overflow = 1;
    return;
  }
  memcpy(k->bytes + k->n, field, bytes);
  k->n += bytes;
}

void kgraph_key_int(kgraph_key *k, int64_t v) { kgraph_key_add(k, &v, sizeof v); }
void kgraph_key_ptr(kgraph_key *k, const void *p) { kgraph_key_add(k, &p, sizeof p); }

tsr_status kgraph_cache_create(kgraph_cache **out, int capacity, int warmup,
                               kgraph_free_fn free_graph, void *ctx) {
  *out = NULL;
  if (capacity < 1 || warmup < 1 || !free_graph)
    return err_set(TSR_EINVAL, "graph cache: capacity %d and warmup %d must be >= 1, with a "
                   "free function", capacity, warmup);
  kgraph_cache *c = calloc(1, sizeof *c);
  if (c) c->e = calloc((size_t)capacity * 4, sizeof *c->e);
  if (!c || !c->e) {
    free(c);
    return err_set(TSR_ENOMEM, "graph cache: no memory");
  }
  c->capacity = capacity, c->warmup = warmup, c->nkeys = capacity * 4;
  c->free_graph = free_graph, c->ctx = ctx;
  *out = c;
  return TSR_OK;
}

static void drop_graph(kgraph_cache *c, entry *e) {
  if (!e->graph) return;
  c->free_graph(c->ctx, e->graph);
  e->graph = NULL;
  c->st.graphs--;
}

static void drop_entry(kgraph_cache *c, entry *e) {
  drop_graph(c, e);
  free(e->key);
  memset(e, 0, sizeof *e);
  c->st.keys--;
}

void kgraph_cache_clear(kgraph_cache *c) {
  if (!c) return;
  for (int i = 0; i < c->nkeys; i++)
    if (c->e[i].key) drop_entry(c, &c->e[i]);
}

void kgraph_cache_destroy(kgraph_cache *c) {
  if (!c) return;
  kgraph_cache_clear(c);
  free(c->e);
  free(c);
}

static entry *find(kgraph_cache *c, const kgraph_key *k) {
  for (int i = 0; i < c->nkeys; i++)
    if (c->e[i].key && c->e[i].n == k->n && !memcmp(c->e[i].key, k->bytes, k->n)) return &c->e[i];
  return NULL;
}

// The least recently used slot among those with (graph != NULL) == with_graph; any slot when
// with_graph < 0. NULL when there is none.
static entry *lru(kgraph_cache *c, int with_graph, const entry *except) {
  entry *best = NULL;
  for (int i = 0; i < c->nkeys; i++) {
    entry *e = &c->e[i];
    if (!e->key || e == except || (with_graph >= 0 && (e->graph != NULL) != with_graph)) continue;
    if (!best || e->last < best->last) best = e;
  }
  return best;
}

int kgraph_lookup(kgraph_cache *c, const kgraph_key *k, void **graph) {
  *graph = NULL;
  if (k->overflow) {
    c->st.eager++;
    return KGRAPH_EAGER;
  }
  entry *e = find(c, k);
  if (!e) {  // a new key: a free slot, or the least recently used one's
    for (int i = 0; i < c->nkeys && !e; i++)
      if (!c->e[i].key) e = &c->e[i];
    if (!e) drop_entry(c, e = lru(c, -1, NULL));
    uint8_t *copy = malloc(k->n ? k->n : 1);
    if (!copy) {  // no memory to remember it: run eagerly
      c->st.eager++;
      return KGRAPH_EAGER;
    }
    memcpy(copy, k->bytes, k->n);
    *e = (entry){.key = copy, .n = k->n};
    c->st.keys++;
  }
  e->last = ++c->tick;
  e->capturing = 0;
  int64_t seen = e->seen++;
  if (e->graph) {
    *graph = e->graph;
    c->st.replays++;
    return KGRAPH_REPLAY;
  }
  if (e->failed || seen < c->warmup) {
    c->st.eager++;
    return KGRAPH_EAGER;
  }
  e->capturing = 1;
  c->st.captures++;
  return KGRAPH_CAPTURE;
}

tsr_status kgraph_put(kgraph_cache *c, const kgraph_key *k, void *graph) {
  entry *e = k->overflow ? NULL : find(c, k);
  if (!e || !e->capturing || e->graph) {
    c->free_graph(c->ctx, graph);
    return err_set(TSR_EINVAL, "graph cache: a graph put for a key that was not being recorded");
  }
  e->capturing = 0;
  if (c->st.graphs >= c->capacity) {  // room: the least recently used other graph goes
    entry *old = lru(c, 1, e);
    drop_graph(c, old);
    old->seen = c->warmup;  // recorded again at its next use
    c->st.evictions++;
  }
  e->graph = graph;
  c->st.graphs++;
  return TSR_OK;
}

void kgraph_failed(kgraph_cache *c, const kgraph_key *k) {
  entry *e = k->overflow ? NULL : find(c, k);
  if (!e) return;
  drop_graph(c, e);  // e.g. recorded but its first launch failed: never replayed
  e->failed = 1;
  e->capturing = 0;
  c->st.failures++;
}

kgraph_stats kgraph_cache_stats(const kgraph_cache *c) { return c->st; }
