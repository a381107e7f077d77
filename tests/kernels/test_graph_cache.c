// tests/kernels/test_graph_cache.c — the recorded-graph cache's policy (kernels/graph_cache.h)
// without a GPU; graphs are heap tokens whose frees the test counts:
// - warmup: a key is eager `warmup` times, then recorded once, then replayed;
// - keys are compared byte for byte: a key differing in one pointer or one size is another
//   shape; a key that overflowed KGRAPH_KEY_MAX is always eager;
// - capacity: one graph more than the capacity frees the least recently used one (and only
//   it), whose key is recorded again at its next use;
// - a failed recording makes its key eager for good; a put without a capture is refused
//   (and the graph freed); clear and destroy free every graph: no leak, no double free.
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/graph_cache.h"

typedef struct {
  int freed;
  int live;
} counter;

static void free_token(void *ctx, void *graph) {
  counter *c = ctx;
  c->freed++;
  c->live--;
  free(graph);
}

static void *token(counter *c, int id) {
  int *p = malloc(sizeof *p);
  *p = id;
  c->live++;
  return p;
}

static void key_of(kgraph_key *k, int phase, int L, int C, const void *buf) {
  kgraph_key_init(k);
  kgraph_key_int(k, phase);
  kgraph_key_int(k, L);
  kgraph_key_int(k, C);
  kgraph_key_ptr(k, buf);
}

static void test_warmup_and_keys(void) {
  counter cnt = {0};
  kgraph_cache *c;
  CHECK_OK(kgraph_cache_create(&c, 4, 2, free_token, &cnt));
  static char buf_a[1], buf_b[1];
  kgraph_key k, k2, k3;
  key_of(&k, 0, 4096, 16, buf_a);
  void *g = (void *)1;
  CHECK(kgraph_lookup(c, &k, &g) == KGRAPH_EAGER && g == NULL, "use 1: eager");
  CHECK(kgraph_lookup(c, &k, &g) == KGRAPH_EAGER, "use 2: eager (warmup 2)");
  CHECK(kgraph_lookup(c, &k, &g) == KGRAPH_CAPTURE, "use 3: capture");
  void *t = token(&cnt, 7);
  CHECK_OK(kgraph_put(c, &k, t));
  for (int i = 0; i < 3; i++) {
    CHECK(kgraph_lookup(c, &k, &g) == KGRAPH_REPLAY && g == t, "use %d: replay of the graph", 4 + i);
  }
  // one field different: another key, starting over
  key_of(&k2, 0, 4096, 16, buf_b);
  CHECK(kgraph_lookup(c, &k2, &g) == KGRAPH_EAGER, "another pointer: a new key");
  key_of(&k3, 0, 4096, 17, buf_a);
  CHECK(kgraph_lookup(c, &k3, &g) == KGRAPH_EAGER, "another clip count: a new key");
  key_of(&k3, 1, 4096, 16, buf_a);
  CHECK(kgraph_lookup(c, &k3, &g) == KGRAPH_EAGER, "another phase: a new key");
  // overflow
  kgraph_key big;
  kgraph_key_init(&big);
  for (int i = 0; i < KGRAPH_KEY_MAX / 8 + 1; i++) kgraph_key_int(&big, i);
  CHECK(big.overflow, "key of %d bytes did not overflow", KGRAPH_KEY_MAX + 8);
  for (int i = 0; i < 4; i++) CHECK(kgraph_lookup(c, &big, &g) == KGRAPH_EAGER, "overflowed key");
  kgraph_stats s = kgraph_cache_stats(c);
  CHECK(s.captures == 1 && s.replays == 3 && s.graphs == 1 && s.keys == 4,
        "stats: captures %lld replays %lld graphs %d keys %d", (long long)s.captures,
        (long long)s.replays, s.graphs, s.keys);
  kgraph_cache_destroy(c);
  CHECK(cnt.freed == 1 && cnt.live == 0, "destroy freed %d graphs, %d live", cnt.freed, cnt.live);
}

static void test_capacity(void) {
  counter cnt = {0};
  kgraph_cache *c;
  CHECK_OK(kgraph_cache_create(&c, 2, 1, free_token, &cnt));
  static char buf[3];
  kgraph_key k[3];
  void *g, *t[3];
  for (int i = 0; i < 3; i++) key_of(&k[i], 0, 1024 * (i + 1), 1, &buf[i]);
  for (int i = 0; i < 2; i++) {  // keys 0 and 1 recorded
    CHECK(kgraph_lookup(c, &k[i], &g) == KGRAPH_EAGER, "key %d eager", i);
    CHECK(kgraph_lookup(c, &k[i], &g) == KGRAPH_CAPTURE, "key %d capture", i);
    CHECK_OK(kgraph_put(c, &k[i], t[i] = token(&cnt, i)));
  }
  CHECK(kgraph_lookup(c, &k[0], &g) == KGRAPH_REPLAY && g == t[0], "key 0 replays");  // 1 is now LRU
  CHECK(kgraph_lookup(c, &k[2], &g) == KGRAPH_EAGER, "key 2 eager");
  CHECK(kgraph_lookup(c, &k[2], &g) == KGRAPH_CAPTURE, "key 2 capture");
  CHECK_OK(kgraph_put(c, &k[2], t[2] = token(&cnt, 2)));
  CHECK(cnt.freed == 1, "a third graph with capacity 2 freed %d", cnt.freed);
  CHECK(kgraph_lookup(c, &k[0], &g) == KGRAPH_REPLAY && g == t[0], "key 0 (recently used) kept");
  CHECK(kgraph_lookup(c, &k[2], &g) == KGRAPH_REPLAY && g == t[2], "key 2 kept");
  CHECK(kgraph_lookup(c, &k[1], &g) == KGRAPH_CAPTURE, "evicted key 1 is recorded again");
  CHECK_OK(kgraph_put(c, &k[1], token(&cnt, 1)));  // evicts key 0 (LRU now)
  kgraph_stats s = kgraph_cache_stats(c);
  CHECK(s.evictions == 2 && s.graphs == 2 && cnt.live == 2, "evictions %lld graphs %d live %d",
        (long long)s.evictions, s.graphs, cnt.live);
  // many new keys: at most 4 x capacity remembered, graphs among them freed when forgotten
  static char many[20];
  for (int i = 0; i < 20; i++) {
    kgraph_key kk;
    key_of(&kk, 0, 1, 1, &many[i]);
    CHECK(kgraph_lookup(c, &kk, &g) == KGRAPH_EAGER, "new key %d eager", i);
  }
  s = kgraph_cache_stats(c);
  CHECK(s.keys == 8 && s.graphs == 0 && cnt.live == 0, "after 20 new keys: %d keys, %d graphs, %d live",
        s.keys, s.graphs, cnt.live);
  kgraph_cache_destroy(c);
  CHECK(cnt.live == 0, "%d graphs live after destroy", cnt.live);
}

static void test_failures(void) {
  counter cnt = {0};
  kgraph_cache *c;
  CHECK_OK(kgraph_cache_create(&c, 2, 1, free_token, &cnt));
  static char buf[2];
  kgraph_key k, k2;
  void *g;
  key_of(&k, 1, 512, 2, &buf[0]);
  CHECK(kgraph_lookup(c, &k, &g) == KGRAPH_EAGER, "eager");
  CHECK(kgraph_lookup(c, &k, &g) == KGRAPH_CAPTURE, "capture");
  kgraph_failed(c, &k);
  for (int i = 0; i < 3; i++) CHECK(kgraph_lookup(c, &k, &g) == KGRAPH_EAGER, "failed key stays eager");
  // a put without a capture answer is refused and its graph freed
  key_of(&k2, 1, 512, 2, &buf[1]);
  CHECK(kgraph_put(c, &k2, token(&cnt, 9)) == TSR_EINVAL && cnt.live == 0, "put without capture");
  CHECK(kgraph_lookup(c, &k2, &g) == KGRAPH_EAGER, "eager");
  CHECK(kgraph_put(c, &k2, token(&cnt, 9)) == TSR_EINVAL && cnt.live == 0, "put after an eager answer");
  CHECK(kgraph_lookup(c, &k2, &g) == KGRAPH_CAPTURE, "capture");
  CHECK_OK(kgraph_put(c, &k2, token(&cnt, 9)));
  // its first launch failed: the graph goes, the key stays eager
  kgraph_failed(c, &k2);
  CHECK(cnt.live == 0 && kgraph_lookup(c, &k2, &g) == KGRAPH_EAGER && g == NULL,
        "a failed key keeps no graph (%d live)", cnt.live);
  kgraph_key k3;
  key_of(&k3, 2, 512, 2, &buf[1]);
  CHECK(kgraph_lookup(c, &k3, &g) == KGRAPH_EAGER && kgraph_lookup(c, &k3, &g) == KGRAPH_CAPTURE,
        "k3 capture");
  CHECK_OK(kgraph_put(c, &k3, token(&cnt, 10)));
  kgraph_cache_clear(c);
  CHECK(cnt.live == 0, "clear freed every graph (%d live)", cnt.live);
  CHECK(kgraph_lookup(c, &k2, &g) == KGRAPH_EAGER, "after clear a key starts over");
  kgraph_cache *bad = (kgraph_cache *)&cnt;
  CHECK(kgraph_cache_create(&bad, 0, 1, free_token, &cnt) == TSR_EINVAL && bad == NULL,
        "capacity 0 refused");
  kgraph_cache_destroy(NULL);
  kgraph_cache_destroy(c);
}

int main(void) {
  test_warmup_and_keys();
  test_capacity();
  test_failures();
  return check_done();
}
