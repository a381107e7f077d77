// bench/plan/placement.c — contiguous chunks against blockwise placement of masked clips in
// the planner's model (a measurement for docs/plan.md, driven by bench/plan/placement.sh;
// not a test).
//
// For each mask kind (block-causal by chunks of 3 latent frames, the same within 4 chunks
// back, a window mask of 4 x 6 x 8 token tiles) the same batches of a mix with minutes-long
// clips are planned three times (sched_plan_batch), with the ring groups' attention priced
// by the area split evenly (the planner's even model), by the most loaded rank under
// contiguous chunks (what the ranks run without a placement), and under blockwise placement
// (sched/placement.h, cost_mask.place). Per mask it prints one JSON line: the step time of
// Dynamic-CP's plan and of static CP under each pricing and their ratios, the per-rank
// attention work imbalance (max/mean over the ranks of every multi-rank group, summed over
// groups: sum of maxima / sum of means) of each plan, the planner's CPU time per batch in
// each case (sched_result.plan_cpu_ms, which other processes on a shared core do not
// stretch; the placement cache is emptied before each pricing, so it pays for its
// placements), and over the blockwise plans' groups zigzag, greedy and balanced side by side
// (imbalance, K/V tokens received per step, summed over ranks), and their exchange summed over
// the groups (per step): the placed executor's all-to-alls as the planner prices them
// (cost_placed_exchange: what the own keys' attention does not hide) beside the ring's form
// of the same groups (the exposed ring steps, cost_group_exposed).
// With --kinds, instead: for each mask and group size k of 2, 4, 8, 16, every kind of
// sched/placement.h made (uncached) for each of B clips of the mix over k ranks: sum over
// clips of the most loaded rank's work over the sum of the means, K/V tokens received
// (summed over ranks and clips), the most tokens a rank holds over ceil(L / k), and the CPU
// time of making them; one JSON line per mask and k, with metis over greedy.
//   bench_plan_placement --mix SPEC --ranks N --clips B --batches S --cost FILE [--kinds 1]
//                        [--tokens-per-second T --max-seconds S --rows R --cols C]
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/plan/plan_input.h"
#include "sched/lengths.h"
#include "sched/placement.h"
#include "sched/sched.h"

typedef struct {
  double step_s, dyn_s, static_s, plan_ms, imb_max, imb_mean;
} run_sum;

// Over the multi-rank ring groups of p: sum of the most loaded rank's work and of the mean
// under placement kind `kind` (-1: placement_for's choice), and the K/V tokens
// received, summed over ranks. With x (2 doubles): adds each group's exchange under cm (G
// ranks a node), the placed executor's (the most cost_placed_exchange of a rank: what its
// own keys' attention does not hide) to x[0] and the ring's exposed steps with the same
// most loaded rank's work to x[1].
static tsr_status imbalance(const plan *p, const int64_t *tokens, const cost_mask *m, int kind,
                            double *sum_max, double *sum_mean, double *recv,
                            const cost_model *cm, int G, double *x) {
  for (int gi = 0; gi < p->ngroups; gi++) {
    const plan_group *g = &p->groups[gi];
    if (g->size < 2 || !g->nclips || g->mode != COST_CP_RING) continue;
    double *w = calloc((size_t)g->size, sizeof *w), *got = calloc((size_t)g->size, sizeof *got);
    double *own = calloc((size_t)g->size, sizeof *own);
    if (!w || !got || !own) {
      free(w), free(got), free(own);
      return err_set(TSR_ENOMEM, "out of memory");
    }
    double s1 = 0;
    for (int j = 0; j < g->nclips; j++) {
      const placement *pl;
      int64_t L = tokens[p->clip_index[g->clip_off + j]];
      tsr_status st = kind < 0 ? placement_for(m, L, g->size, &pl)
                                           : placement_cached(m, L, g->size, (place_kind)kind, &pl);
      if (st) {
        free(w), free(got), free(own);
        return st;
      }
      s1 += (double)L;
      for (int r = 0; r < g->size; r++)
        w[r] += pl->work[r], got[r] += (double)pl->recv[r], *recv += (double)pl->recv[r],
        own[r] += pl->own[r];
    }
    double most = 0, sum = 0, xmost = 0;
    for (int r = 0; r < g->size; r++) {
      most = fmax(most, w[r]), sum += w[r];
      if (x) xmost = fmax(xmost, cost_placed_exchange(cm, G, g->size, got[r], own[r]));
    }
    *sum_max += most, *sum_mean += sum / g->size;
    if (x) {
      x[0] += xmost;
      x[1] += cost_group_exposed(cm, G, g->size, s1, most * g->size, COST_CP_RING);
    }
    free(w), free(got), free(own);
  }
  return TSR_OK;
}

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

// The --kinds table (header) of mask m over clips L (B) into stdout.
static tsr_status kinds_table(const char *name, const cost_mask *m, const int64_t *L, int B) {
  for (int k = 2; k <= 16; k *= 2) {
    double imb[PLACE_NKINDS], recv[PLACE_NKINDS], hold[PLACE_NKINDS], ms[PLACE_NKINDS];
    for (int kind = 0; kind < PLACE_NKINDS; kind++) {
      double smax = 0, smean = 0, t0 = cpu_ms();
      recv[kind] = 0, hold[kind] = 0;
      for (int c = 0; c < B; c++) {
        placement p;
        tsr_status st = placement_make(m, L[c], k, (place_kind)kind, &p);
        if (st) return st;
        double most = 0, sum = 0;
        for (int r = 0; r < k; r++) {
          most = fmax(most, p.work[r]), sum += p.work[r], recv[kind] += (double)p.recv[r];
          hold[kind] = fmax(hold[kind], (double)p.held[r] / (double)((L[c] + k - 1) / k));
        }
        smax += most, smean += sum / k;
        placement_free(&p);
      }
      ms[kind] = cpu_ms() - t0;
      imb[kind] = smean > 0 ? smax / smean : 1;
    }
    printf("{\"mask\":\"%s\",\"k\":%d,\"clips\":%d,\"kinds\":{", name, k, B);
    for (int kind = 0; kind < PLACE_NKINDS; kind++)
      printf("%s\"%s\":{\"imbalance\":%.4f,\"kv_recv_tokens\":%.6g,\"hold_over_even\":%.4f,"
             "\"make_ms\":%.4g}", kind ? "," : "", place_kind_name((place_kind)kind), imb[kind],
             recv[kind], hold[kind], ms[kind]);
    printf("}");
    if (PLACE_NKINDS > PLACE_METIS)
      printf(",\"metis_over_greedy\":{\"imbalance\":%.4f,\"kv_recv_tokens\":%.4f,\"make_ms\":%.4g}",
             imb[PLACE_NKINDS - 1] / imb[PLACE_GREEDY],
             recv[PLACE_NKINDS - 1] / fmax(recv[PLACE_GREEDY], 1),
             ms[PLACE_NKINDS - 1] / fmax(ms[PLACE_GREEDY], 1e-3));
    printf("}\n");
    fflush(stdout);
  }
  return TSR_OK;
}

int main(int argc, char **argv) {
  const char *mix = NULL, *cost = NULL;
  int N = 64, B = 64, S = 4, kinds = 0;
  double tps = 6240, maxs = 300;
  int64_t rows = 30, cols = 52, mem = 200000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "--mix")) mix = v;
    else if (!strcmp(k, "--cost")) cost = v;
    else if (!strcmp(k, "--ranks")) N = atoi(v);
    else if (!strcmp(k, "--clips")) B = atoi(v);
    else if (!strcmp(k, "--batches")) S = atoi(v);
    else if (!strcmp(k, "--tokens-per-second")) tps = atof(v);
    else if (!strcmp(k, "--max-seconds")) maxs = atof(v);
    else if (!strcmp(k, "--rows")) rows = atoll(v);
    else if (!strcmp(k, "--cols")) cols = atoll(v);
    else if (!strcmp(k, "--mem-tokens")) mem = atoll(v);
    else if (!strcmp(k, "--kinds")) kinds = atoi(v);
    else {
      fprintf(stderr, "placement: unknown option %s\n", k);
      return 1;
    }
  }
  if (!mix || !cost || N < 1 || B < 1 || S < 1) {
    fprintf(stderr, "usage: bench_plan_placement --mix SPEC --cost FILE [--ranks N --clips B "
            "--batches S]\n");
    return 1;
  }
  lengths_opts lo = {.tokens_per_second = tps, .max_seconds = maxs};
  lengths_set ls = {0};
  sched_config cfg = {.cluster = {.ranks = N, .gpus_per_node = 8, .mem_tokens = mem}};
  if (plan_input_load("placement", mix, &lo, cost, &ls, &cfg)) return 1;
  tsr_status st = TSR_OK;
  const struct {
    const char *name;
    cost_mask m;
  } masks[3] = {
      {"block_causal", {.kind = COST_MASK_BLOCK_CAUSAL, .chunk = 3, .rows = rows, .cols = cols}},
      {"block_causal_w4",
       {.kind = COST_MASK_BLOCK_CAUSAL, .chunk = 3, .window = 4, .rows = rows, .cols = cols}},
      {"window", {.kind = COST_MASK_WINDOW, .wt = 3, .wh = 1, .ww = 1, .tile_t = 4, .tile_h = 6,
                  .tile_w = 8, .rows = rows, .cols = cols}},
  };
  int64_t *ids = malloc((size_t)B * sizeof *ids), *L = malloc((size_t)B * sizeof *L);
  if (kinds) {
    if (!(st = lengths_sample(&ls, 1, 0, B, ids, L)))
      for (int mi = 0; mi < 3 && !st; mi++) st = kinds_table(masks[mi].name, &masks[mi].m, L, B);
    S = 0;  // no plans
  }
  for (int mi = 0; mi < 3 && !st && S; mi++) {
    run_sum r[3] = {{0}};
    double zz[3] = {0}, gr[3] = {0}, ba[3] = {0};  // sum max, sum mean, recv of each kind
    double xch[2] = {0};  // the blockwise plans' group exchanges: placed, the ring's form
    for (int place = 0; place < 3 && !st; place++) {
      placement_cache_clear();  // every pricing pays for its placements
      cfg.cost.mask = masks[mi].m;
      cfg.cost.mask.place = place;
      for (int s = 0; s < S && !st; s++) {
        sched_result res;
        if ((st = lengths_sample(&ls, 1, s, B, ids, L))) break;
        if ((st = sched_plan_batch(&cfg, L, B, &res))) break;
        r[place].step_s += res.predicted_s / S, r[place].dyn_s += res.dynamic_s / S;
        r[place].static_s += res.static_balanced_s / S, r[place].plan_ms += res.plan_cpu_ms / S;
        double rc = 0;
        cost_mask pm = cfg.cost.mask;
        pm.place = place ? place : COST_PLACE_CONTIGUOUS;  // even: what the ranks would run
        int placed = place == COST_PLACE_BLOCKWISE;
        st = imbalance(&res.plan, L, &pm, placed ? -1 : PLACE_CONTIGUOUS, &r[place].imb_max,
                       &r[place].imb_mean, &rc, &cfg.cost, cfg.cluster.gpus_per_node,
                       placed ? xch : NULL);
        if (!st && placed) {
          st = imbalance(&res.plan, L, &pm, PLACE_ZIGZAG, &zz[0], &zz[1], &zz[2], NULL, 0, NULL);
          if (!st) st = imbalance(&res.plan, L, &pm, PLACE_GREEDY, &gr[0], &gr[1], &gr[2], NULL, 0, NULL);
          if (!st) st = imbalance(&res.plan, L, &pm, PLACE_BALANCED, &ba[0], &ba[1], &ba[2], NULL, 0, NULL);
        }
        sched_result_free(&res);
      }
    }
    if (st) break;
    const run_sum *e = &r[0], *c = &r[1], *b = &r[2];
    printf("{\"mask\":\"%s\",\"ranks\":%d,\"clips\":%d,\"batches\":%d,"
           "\"even\":{\"step_s\":%.6g,\"static_s\":%.6g,\"plan_ms\":%.4g},"
           "\"contiguous\":{\"step_s\":%.6g,\"dynamic_s\":%.6g,\"static_s\":%.6g,\"imbalance\":%.4f,\"plan_ms\":%.4g},"
           "\"blockwise\":{\"step_s\":%.6g,\"dynamic_s\":%.6g,\"static_s\":%.6g,\"imbalance\":%.4f,\"plan_ms\":%.4g,"
           "\"exchange_s\":%.6g,\"ring_form_exchange_s\":%.6g},"
           "\"x_blockwise_over_contiguous\":%.4f,\"x_blockwise_static_over_contiguous_static\":%.4f,"
           "\"x_dynamic_over_static_contiguous\":%.4f,\"x_dynamic_over_static_blockwise\":%.4f,"
           "\"zigzag\":{\"imbalance\":%.4f,\"kv_recv_tokens\":%.6g},"
           "\"greedy\":{\"imbalance\":%.4f,\"kv_recv_tokens\":%.6g},"
           "\"balanced\":{\"imbalance\":%.4f,\"kv_recv_tokens\":%.6g}}\n",
           masks[mi].name, N, B, S, e->step_s, e->static_s, e->plan_ms, c->step_s, c->dyn_s,
           c->static_s, c->imb_mean > 0 ? c->imb_max / c->imb_mean : 1, c->plan_ms, b->step_s,
           b->dyn_s, b->static_s, b->imb_mean > 0 ? b->imb_max / b->imb_mean : 1, b->plan_ms,
           xch[0] / S, xch[1] / S,
           c->step_s / b->step_s, c->static_s / b->static_s, c->static_s / c->step_s,
           b->static_s / b->step_s, zz[1] > 0 ? zz[0] / zz[1] : 1, zz[2] / S,
           gr[1] > 0 ? gr[0] / gr[1] : 1, gr[2] / S, ba[1] > 0 ? ba[0] / ba[1] : 1, ba[2] / S);
    fflush(stdout);
  }
  if (st) fprintf(stderr, "placement: %s\n", err_msg());
  placement_cache_clear();
  free(ids), free(L);
  lengths_free(&ls);
  return st ? 1 : 0;
}
