// Placements of a masked clip (sched/placement.h) against a token-by-token recount: every
// kind covers the clip once, its ranks' work sums to cost_clip_area, and each rank's
// key/value receipt is the tokens its queries' mask blocks allow that it does not hold,
// counted token by token. Closed forms: contiguous chunks of a causal clip of k blocks put
// block r on rank r (work (r + 1) n^2, imbalance 2k / (k + 1)); zigzag over 2k blocks gives
// every rank (2k + 1) n^2. Greedy balances a long causal clip within 5%, balanced within a token's work
// (and a long window-masked clip within 2%, receiving less than zigzag), and the cache
// returns what placement_make does; placement_for holds at most 5% over ceil(L / k) a
// rank. Metis (with libmetis; `test_sched_placement metis` runs its checks alone and is
// skipped without it): the same every time, at most 5% over ceil(L / k) tokens a rank, and
// on blocks that need only themselves (a window mask of time radius 0, 4k equal blocks) the
// closed form: nothing to receive, every rank 4 blocks' work. plan_group_time prices a masked ring group by its most
// loaded rank: the reference formula with S2 = k * that rank's work, contiguous above
// blockwise above the even split; placed blockwise, with the placed executor's exchange
// (cost_placed_time), against its closed form on zigzag-placed causal clips, the K/V
// exchange and the gradients' return hidden behind the own keys' attention and not. Each rank's own-key work against
// a recount of its pairs with keys it holds. A pinned kind
// (cost_mask.pin) is placement_for's placement unless it breaks the 5% cap (then contiguous).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sched/placement.h"
#include "sched/plan.h"

static const cost_mask masks[4] = {
    {.kind = COST_MASK_BLOCK_CAUSAL, .chunk = 2, .rows = 3, .cols = 4},
    {.kind = COST_MASK_BLOCK_CAUSAL, .chunk = 1, .window = 2, .rows = 2, .cols = 5},
    {.kind = COST_MASK_WINDOW, .wt = 1, .wh = 1, .ww = 0, .tile_t = 2, .tile_h = 2, .tile_w = 3,
     .rows = 4, .cols = 6},
    {.kind = COST_MASK_FULL},
};

// p's coverage, work sum and receipts against a recount; `what` names the case.
static void check_one(const cost_mask *m, int64_t L, int k, place_kind kind) {
  placement p;
  CHECK_OK(placement_make(m, L, k, kind, &p));
  int64_t n = placement_block_tokens(m, L), at = 0;
  int *owner = malloc((size_t)(L + 1) * sizeof *owner);
  int ok = 1;
  for (int i = 0; i < p.nseg; i++) {
    const place_seg *s = &p.seg[i];
    ok &= s->first == at && s->len >= 1 && s->rank >= 0 && s->rank < k &&
          s->first / n == s->block && (s->first + s->len - 1) / n == s->block;
    for (int64_t t = s->first; t < s->first + s->len && t < L; t++) owner[t] = s->rank;
    at = s->first + s->len;
  }
  CHECK(ok && at == L, "mask %d L=%lld k=%d %s: segments do not cover [0, L) in order", m->kind,
        (long long)L, k, place_kind_name(kind));
  cost_model cm = {.mask = *m};
  double sum = 0;
  for (int r = 0; r < k; r++) sum += p.work[r];
  double area = cost_clip_area(&cm, L);
  CHECK(fabs(sum - area) <= 1e-9 * fmax(area, 1), "mask %d L=%lld k=%d %s: work %.17g, area %.17g",
        m->kind, (long long)L, k, place_kind_name(kind), sum, area);
  char *need = malloc((size_t)L + 1);
  for (int r = 0; r < k && ok; r++) {
    memset(need, 0, (size_t)L + 1);
    int64_t held = 0, recv = 0;
    double pairs = 0, mine = 0;  // query-key pairs of r's queries, those with r's own keys
    for (int64_t t = 0; t < L; t++) {
      if (owner[t] != r) continue;
      held++;
      int lo, hi;
      placement_keys(m, (int)(t / n), p.nblocks, &lo, &hi);
      for (int64_t j = lo * n; j < (hi + 1) * n && j < L; j++) need[j] = 1, pairs++, mine += owner[j] == r;
    }
    for (int64_t j = 0; j < L; j++) recv += need[j] && owner[j] != r;
    CHECK(held == p.held[r] && recv == p.recv[r], "mask %d L=%lld k=%d %s rank %d: held %lld "
          "(recount %lld), recv %lld (recount %lld)", m->kind, (long long)L, k,
          place_kind_name(kind), r, (long long)p.held[r], (long long)held, (long long)p.recv[r],
          (long long)recv);
    // a pair's work is the same for every pair of the clip (1, or a window's spatial factor)
    CHECK(fabs(p.own[r] * pairs - p.work[r] * mine) <= 1e-9 * fmax(p.work[r] * pairs, 1),
          "mask %d L=%lld k=%d %s rank %d: own-key work %.17g of %.17g, recount %g of %g pairs",
          m->kind, (long long)L, k, place_kind_name(kind), r, p.own[r], p.work[r], mine, pairs);
  }
  free(need), free(owner);
  placement_free(&p);
}

// The metis kind's own checks (header).
static void check_metis(void) {
  cost_mask alone = masks[2];
  alone.wt = 0;  // a block's queries need its own keys only
  for (int k = 2; k <= 16; k *= 2) {
    placement p, q;
    int64_t n = placement_block_tokens(&alone, 0), L = 4 * k * n, recv = 0;
    CHECK_OK(placement_make(&alone, L, k, PLACE_METIS, &p));
    cost_model one = {.mask = alone};
    double per = 4 * cost_clip_area(&one, n);
    for (int r = 0; r < k; r++) {
      recv += p.recv[r];
      CHECK(fabs(p.work[r] - per) <= 1e-9 * per && p.held[r] == 4 * n, "metis k=%d rank %d: "
            "work %g (want %g), holds %lld (want %lld)", k, r, p.work[r], per,
            (long long)p.held[r], (long long)(4 * n));
    }
    CHECK(recv == 0, "metis k=%d: independent blocks receive %lld tokens, want 0", k,
          (long long)recv);
    placement_free(&p);
    for (int mi = 0; mi < 3; mi++)
      for (int li = 0; li < 3; li++) {
        static const int64_t ls[] = {50, 1003, 24 * 400};
        CHECK_OK(placement_make(&masks[mi], ls[li], k, PLACE_METIS, &p));
        CHECK_OK(placement_make(&masks[mi], ls[li], k, PLACE_METIS, &q));
        int same = p.nseg == q.nseg && !memcmp(p.seg, q.seg, (size_t)p.nseg * sizeof *p.seg);
        CHECK(same, "metis mask %d L=%lld k=%d: two makes differ", mi, (long long)ls[li], k);
        for (int r = 0; r < k; r++)
          CHECK(p.held[r] <= PLACE_HOLD_SLACK * ((ls[li] + k - 1) / k), "metis mask %d L=%lld "
                "k=%d: rank %d holds %lld tokens", mi, (long long)ls[li], k, r,
                (long long)p.held[r]);
        placement_free(&p), placement_free(&q);
      }
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "metis")) {
    if (!TESSERA_HAVE_METIS) {
      printf("skipped: built without libmetis (install libmetis-dev, tools/setup.sh)\n");
      return 77;
    }
    check_metis();
    return check_done();
  }
  static const int64_t lens[] = {0, 1, 7, 24, 50, 121, 500, 1003};
  for (int mi = 0; mi < 4; mi++)
    for (int li = 0; li < 8; li++)
      for (int k = 1; k <= 16; k *= 2)
        for (int kind = 0; kind < PLACE_NKINDS; kind++)
          check_one(&masks[mi], lens[li], k, (place_kind)kind);

  // closed forms: causal blocks of n = 24 tokens (2 frames of 3 x 4)
  const cost_mask *c = &masks[0];
  for (int k = 2; k <= 8; k *= 2) {
    placement p;
    CHECK_OK(placement_make(c, 24 * k, k, PLACE_CONTIGUOUS, &p));
    for (int r = 0; r < k; r++)
      CHECK(p.work[r] == 576.0 * (r + 1), "contiguous k=%d rank %d: work %g, want %g", k, r,
            p.work[r], 576.0 * (r + 1));
    CHECK(fabs(placement_imbalance(&p) - 2.0 * k / (k + 1)) < 1e-12, "contiguous k=%d: imbalance %g",
          k, placement_imbalance(&p));
    placement_free(&p);
    CHECK_OK(placement_make(c, 48 * k, k, PLACE_ZIGZAG, &p));
    for (int r = 0; r < k; r++)
      CHECK(p.work[r] == 576.0 * (2 * k + 1), "zigzag k=%d rank %d: work %g, want %g", k, r,
            p.work[r], 576.0 * (2 * k + 1));
    placement_free(&p);
  }
  // a long causal clip (100 blocks of 24 tokens) over 8 and 64 ranks: greedy within 5% of the mean,
  // contiguous far from it; the cache gives the same numbers
  for (int k = 8; k <= 64; k *= 8) {
    placement g, ct;
    const placement *cached;
    CHECK_OK(placement_make(c, 2400, k, PLACE_GREEDY, &g));
    CHECK_OK(placement_make(c, 2400, k, PLACE_CONTIGUOUS, &ct));
    CHECK(placement_imbalance(&g) <= 1.05 && placement_imbalance(&ct) > 1.5,
          "k=%d: greedy imbalance %g, contiguous %g", k, placement_imbalance(&g),
          placement_imbalance(&ct));
    CHECK_OK(placement_cached(c, 2400, k, PLACE_GREEDY, &cached));
    const placement *again;
    CHECK_OK(placement_cached(c, 2400, k, PLACE_GREEDY, &again));
    CHECK(again == cached && cached->nseg == g.nseg &&
          !memcmp(cached->work, g.work, (size_t)k * sizeof *g.work) &&
          !memcmp(cached->recv, g.recv, (size_t)k * sizeof *g.recv),
          "k=%d: the cached placement differs from placement_make's", k);
    placement_free(&g), placement_free(&ct);
    placement bl, zz;
    CHECK_OK(placement_make(c, 2400, k, PLACE_BALANCED, &bl));
    // within one token's work (the last block's, 2400 keys) of the mean
    cost_model one = {.mask = *c};
    double tok = 2400.0 * k / cost_clip_area(&one, 2400);
    CHECK(placement_imbalance(&bl) <= 1 + tok, "k=%d: balanced imbalance %g, bound %g", k,
          placement_imbalance(&bl), 1 + tok);
    placement_free(&bl);
    CHECK_OK(placement_make(&masks[2], 24 * 400, k, PLACE_BALANCED, &bl));
    CHECK_OK(placement_make(&masks[2], 24 * 400, k, PLACE_ZIGZAG, &zz));
    int64_t rb = 0, rz = 0;
    for (int r = 0; r < k; r++) rb += bl.recv[r], rz += zz.recv[r];
    CHECK(placement_imbalance(&bl) <= 1.02 && rb < rz, "k=%d window: balanced imbalance %g, "
          "receives %lld (zigzag %lld)", k, placement_imbalance(&bl), (long long)rb, (long long)rz);
    placement_free(&bl), placement_free(&zz);
  }
  // pricing: one group of 4 ranks, two causal clips, ring mode
  {
    cost_model cm = cost_model_cpu;
    cm.mask = *c;
    sched_cluster cl = {.ranks = 4, .gpus_per_node = 4, .mem_tokens = 1 << 20};
    int64_t tok[2] = {2400, 1000};
    int32_t clips[2] = {0, 1};
    plan pl;
    plan_init(&pl, 4);
    CHECK_OK(plan_wave_begin(&pl));
    CHECK_OK(plan_add_group(&pl, 0, 4, clips, 2));
    CHECK_OK(plan_wave_end(&pl));
    double t[3];
    for (int place = 0; place < 3; place++) {
      cm.mask.place = place;
      t[place] = plan_group_time(&pl, 0, tok, &cm, &cl);
      double work[4], own[4], x = 0, s2 = cost_clip_area(&cm, tok[0]) + cost_clip_area(&cm, tok[1]);
      int64_t got[4];
      if (place) {
        CHECK_OK(placement_group(&cm.mask, tok, 2, 4, work, got, NULL, own));
        s2 = 4 * fmax(fmax(work[0], work[1]), fmax(work[2], work[3]));
      }
      for (int r = 0; place && r < 4; r++)
        x = fmax(x, cost_placed_exchange(&cm, 4, 4, (double)got[r], own[r]));
      double want = place == COST_PLACE_BLOCKWISE
                        ? cost_placed_time(&cm, 4, 2, 3400, s2, x)
                        : cost_group_time_mode(&cm, 4, 4, 2, 3400, s2, COST_CP_RING);
      CHECK(fabs(t[place] - want) <= 1e-12 * want, "place %d: group time %.17g, want %.17g",
            place, t[place], want);
    }
    CHECK(t[1] > t[2] && t[2] >= t[0], "contiguous %g, blockwise %g, even %g", t[1], t[2], t[0]);
    plan_free(&pl);
  }
  // the placed exchange, closed form: two causal clips of 2k blocks of n tokens over k ranks
  // are placed zigzag (balanced exactly); rank r holds blocks r and 2k-1-r, needs blocks 0 to
  // 2k-1-r and so receives (2k-2-r) n tokens a clip: the most, rank 0's, R = 2 (2k-2) n over
  // both; every rank's work 2 (2k+1) n^2, of it O = 2 (n^2 + 2 n^2) against its own keys
  // (block r's queries see block r of its own, block 2k-1-r's both). Inside a node (the
  // ring's keys: the cost file has no all-to-all ones) and across nodes (calibrated
  // all-to-all keys); the K/V exchange and the gradients' return past the own keys'
  // attention, and (b 1000 times the CPU file's) both hidden behind it.
  for (int k = 2; k <= 8; k *= 2)
    for (int across = 0; across < 2; across++)
      for (int hide = 0; hide < 2; hide++) {
        cost_model cm = cost_model_cpu;
        cm.mask = (cost_mask){.kind = COST_MASK_BLOCK_CAUSAL, .chunk = 2, .rows = 3, .cols = 4,
                              .place = COST_PLACE_BLOCKWISE};
        if (across) cm.a2a_lat = 3e-6, cm.a2a_bw_inter = 4e8, cm.a2a_bw_intra = 5e9;
        if (hide) cm.b *= 1000;
        const int64_t n = 24, L = 2 * k * n;
        int64_t tok[2] = {L, L};
        int32_t clips[2] = {0, 1};
        sched_cluster cl = {.ranks = k, .gpus_per_node = across ? 1 : k, .mem_tokens = 1 << 20};
        plan pl;
        plan_init(&pl, k);
        CHECK_OK(plan_wave_begin(&pl));
        CHECK_OK(plan_add_group(&pl, 0, k, clips, 2));
        CHECK_OK(plan_wave_end(&pl));
        double kk = k, nn = (double)n;
        double bw = across ? 4e8 : cm.bw_intra, lat = across ? 3e-6 : cm.lat;
        double t_kv = cm.kv * 2 * (2 * kk - 2) * nn / bw, own = cm.b * 6 * nn * nn;
        // the K/V travel past the forward's own keys and the backward's first half (2/3 of
        // the own-key work), the return past the backward's second half (1/3)
        double past = 2 * t_kv / 3 + lat - 2 * own / 3, back = t_kv / 3 + lat - own / 3;
        CHECK(hide ? past < 0 && back < 0 : past > 0 && back > 0, "k=%d %s: the exchanges are "
              "%s the own keys' attention (%g s, %g s past it): the case tests nothing", k,
              across ? "across" : "in", hide ? "not hidden behind" : "hidden behind", past, back);
        double want = (cm.a * 2 * L + cm.b * kk * 2 * (2 * kk + 1) * nn * nn) / kk +
                      (past > 0 ? past : 0) + (back > 0 ? back : 0) + cm.ovh;
        double t = plan_group_time(&pl, 0, tok, &cm, &cl);
        CHECK(fabs(t - want) <= 1e-12 * want, "k=%d %s %s: placed group time %.17g, closed form "
              "%.17g", k, across ? "across nodes" : "in a node", hide ? "hidden" : "exposed", t,
              want);
        plan_free(&pl);
        placement_cache_clear();
      }
  // placement_for holds at most 5% over ceil(L / k) a rank (balanced and greedy alone hold
  // up to 40% more on these clips)
  for (int k = 2; k <= 16; k *= 2)
    for (int mi = 0; mi < 3; mi++) {
      cost_mask bm = masks[mi];
      bm.place = COST_PLACE_BLOCKWISE;
      const placement *b;
      CHECK_OK(placement_for(&bm, 1003, k, &b));
      for (int r = 0; r < k; r++)
        CHECK(b->held[r] <= 1.05 * ((1003 + k - 1) / k), "mask %d k=%d: rank %d holds %lld of "
              "1003 tokens", mi, k, r, (long long)b->held[r]);
    }
  // a pinned kind (cost_mask.pin, train.placement = zigzag, ...): that kind's placement, or
  // contiguous chunks where it would hold more than 5% over ceil(L / k) on a rank (balanced
  // under a causal mask gives the first ranks most tokens)
  for (int k = 2; k <= 8; k *= 2)
    for (int kind = PLACE_CONTIGUOUS; kind < PLACE_NKINDS; kind++) {
      cost_mask pm = *c;
      pm.place = COST_PLACE_BLOCKWISE, pm.pin = kind + 1;
      const placement *got, *want, *chunks;
      CHECK_OK(placement_for(&pm, 1003, k, &got));
      CHECK_OK(placement_cached(&pm, 1003, k, (place_kind)kind, &want));
      CHECK_OK(placement_cached(&pm, 1003, k, PLACE_CONTIGUOUS, &chunks));
      int64_t most = 0;
      for (int r = 0; r < k; r++) most = want->held[r] > most ? want->held[r] : most;
      int over = (double)most > 1.05 * ((1003 + k - 1) / k);
      CHECK(got == (over ? chunks : want), "k=%d pinned %s: placement_for gave another (%s the "
            "cap: %lld tokens on a rank)", k, place_kind_name((place_kind)kind),
            over ? "over" : "within", (long long)most);
      if (kind == PLACE_BALANCED && k == 8) CHECK(over, "balanced holds within the cap here");
    }
  placement_cache_clear();
  placement p;
  CHECK(placement_make(c, 10, 0, PLACE_GREEDY, &p) == TSR_EINVAL, "a group of 0 ranks is refused");
  return check_done();
}
