// Cost model: the reference formula against numbers worked out by hand, the cost file
// loader (every key required, errors name file and key), CP size limits.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"
#include "sched/cost.h"
#include "sched/plan.h"
#include "sched/sched.h"

// Tolerance: values below are exact decimal arithmetic done by hand; 1e-12 covers the
// binary rounding of a handful of double operations on numbers of order 1.
#define TOL 1e-12

static char tmpdir[] = "/tmp/tsr_cost_XXXXXX";

static const char *write_file(const char *name, const char *text) {
  return scratch_write(tmpdir, name, text);
}

// A group of a plan built by plan_of: in wave `wave`, ranks [first, first + size), one clip.
typedef struct {
  int wave, first, size;
  int32_t clip;
} one_clip_group;

// *p = the plan on 4 ranks of the n groups g (waves in order), each step checked.
static void plan_of(plan *p, const one_clip_group *g, int n) {
  plan_init(p, 4);
  for (int i = 0; i < n; i++) {
    if (i == 0 || g[i].wave != g[i - 1].wave) {
      if (i) CHECK_OK(plan_wave_end(p));
      CHECK_OK(plan_wave_begin(p));
    }
    CHECK_OK(plan_add_group(p, g[i].first, g[i].size, &g[i].clip, 1));
  }
  CHECK_OK(plan_wave_end(p));
}

static const char *full =
    "# test model\n"
    "a = 0.001\nb = 1e-6\nkv = 100\nbw_intra = 1e6\nbw_inter = 1e5\n"
    "lat = 0.01\n; semicolon comment\novh = 0.1\nallreduce = 0.5\n";

// ZeRO's communication (sched/cost.h "ZeRO"), worked out by hand: P = 1000 floats (4000
// bytes), blocks of Pb = 200 (800 bytes), nb = 5 buckets, D = 3 blocks; the ring's keys
// bw_intra 1e6, bw_inter 1e5, lat 0.01 price the collectives unless ag_bw, rs_bw, coll_lat
// are set.
static void test_zero(void) {
  cost_model cm;
  CHECK_OK(cost_model_load(write_file("zero.conf", full), &cm));
  CHECK(cm.ag_bw == 0 && cm.rs_bw == 0 && cm.coll_lat == 0, "ZeRO keys absent: 0");
  cm.zero = (cost_zero){.stage = 1, .params = 1000, .block = 200, .buckets = 5, .blocks = 3};
  CHECK_OK(cost_model_check(&cm));
  // stage 1, N = 4 inside a node (G = 8: bw_intra): t_ag = 3/4 * 4000 / 1e6 + 5 * 0.01
  CHECK_NEAR(cost_zero_step(&cm, 4, 8), 0.003 + 0.05, TOL);
  CHECK_NEAR(cost_zero_wave(&cm, 4, 8, 0.3), 0, 0);  // stage 1: no per-wave collective
  CHECK(!cost_zero_lockstep(&cm, 4), "stage 1 is not lockstep");
  // N = 16 across nodes (G = 8: bw_inter): 15/16 * 4000 / 1e5 + 0.05
  CHECK_NEAR(cost_zero_step(&cm, 16, 8), 0.0375 + 0.05, TOL);
  CHECK_NEAR(cost_zero_step(&cm, 1, 8), 0, 0);  // one rank: local copies
  // stage 2: the last (a block's) reduce-scatter 3/4 * 800 / 1e6 + 0.01 = 0.0106 waits; the
  // other four, 3/4 * 3200 / 1e6 + 4 * 0.01 = 0.0424, hide behind 2/3 of the wave
  cm.zero.stage = 2;
  CHECK(cost_zero_lockstep(&cm, 4) && !cost_zero_lockstep(&cm, 1), "stage 2 is lockstep");
  CHECK_NEAR(cost_zero_wave(&cm, 4, 8, 0.3), 0.0106, TOL);               // 0.0424 < 0.2
  CHECK_NEAR(cost_zero_wave(&cm, 4, 8, 0.003), 0.0106 + 0.0424 - 0.002, TOL);  // > 0.002
  CHECK_NEAR(cost_zero_wave(&cm, 1, 8, 0.3), 0, 0);
  CHECK_NEAR(cost_zero_min_wave(&cm, 4, 8), 0.0106, TOL);
  CHECK_NEAR(cost_zero_step(&cm, 4, 8), 0.053, TOL);  // the all-gather as stage 1's
  // stage 3 gathers every block in each pass of a wave, t_g = 0.0106 each: the forward's
  // first exposed (the backward's first is still held), the others behind a block's
  // compute, W/(3D) forward and 2W/(3D) backward; no all-gather after the optimizer.
  // W = 0.3: 0.0333 and 0.0667 both hide t_g -> t_g
  cm.zero.stage = 3;
  CHECK_NEAR(cost_zero_wave(&cm, 4, 8, 0.3), 0.0106 + 0.0106, TOL);
  // W = 0.09: forward blocks take 0.01 < t_g: (D-1) * 0.0006 exposed; backward 0.02 hides it
  CHECK_NEAR(cost_zero_wave(&cm, 4, 8, 0.09), 0.0106 + 0.0106 + 2 * 0.0006, TOL);
  CHECK_NEAR(cost_zero_min_wave(&cm, 4, 8), 2 * 0.0106, TOL);
  CHECK_NEAR(cost_zero_step(&cm, 4, 8), 0, 0);
  // calibrated keys replace the ring's: ag_bw 2e6, rs_bw 4e6, coll_lat 0.001
  cost_model ck = cm;
  ck.ag_bw = 2e6, ck.rs_bw = 4e6, ck.coll_lat = 0.001, ck.zero.stage = 2;
  CHECK_NEAR(cost_zero_step(&ck, 4, 8), 0.0015 + 0.005, TOL);
  CHECK_NEAR(cost_zero_wave(&ck, 4, 8, 0), 0.00015 + 0.001 + 0.0006 + 0.004, TOL);
  // the keys in a file, and their ranges (0: unset)
  CHECK_OK(cost_model_load(write_file("zk.conf", "a = 0.001\nb = 1e-6\nkv = 100\n"
                                      "bw_intra = 1e6\nbw_inter = 1e5\nlat = 0.01\novh = 0.1\n"
                                      "allreduce = 0.5\nag_bw = 2e6\nrs_bw = 4e6\ncoll_lat = 0.001\n"),
                           &ck));
  CHECK(ck.ag_bw == 2e6 && ck.rs_bw == 4e6 && ck.coll_lat == 0.001, "ZeRO keys read");
  ck.rs_bw = 10;
  CHECK(cost_model_check(&ck) == TSR_EFORMAT && strstr(err_msg(), "rs_bw"), "%s", err_msg());
  ck.rs_bw = 0;
  ck.zero = (cost_zero){.stage = 4, .params = 1, .buckets = 1, .blocks = 1};
  CHECK(cost_model_check(&ck) == TSR_EINVAL && strstr(err_msg(), "ZeRO"), "%s", err_msg());
  ck.zero = (cost_zero){.stage = 2, .params = 10, .block = 20, .buckets = 1, .blocks = 1};
  CHECK(cost_model_check(&ck) == TSR_EINVAL, "a block larger than the model");

  // The plan's time (plan_simulate) on 4 ranks, G = 2 (the world crosses nodes: bw_inter):
  // wave 0: [0,2) a clip of 1000 tokens (1.1 s, above), [2,4) one of 100 (0.1675 s);
  // wave 1: [2,4) another of 100. Stage 0 and 1: waves are per rank, makespan 1.1.
  sched_cluster cl = {4, 2, 100000};
  int64_t tokens[3] = {1000, 100, 100};
  plan p;
  plan_of(&p, (const one_clip_group[]){{0, 0, 2, 0}, {0, 2, 2, 1}, {1, 2, 2, 2}}, 3);
  plan_sim sim;
  cm.zero.stage = 0;
  CHECK_OK(plan_simulate(&p, tokens, &cm, &cl, &sim, NULL, NULL));
  CHECK_NEAR(sim.makespan_s, 1.1, TOL);
  CHECK_NEAR(sim.step_s, 1.6, TOL);
  CHECK_NEAR(sim.zero_s, 0, 0);
  // stage 1: + t_ag = 3/4 * 4000 / 1e5 + 5 * 0.01 = 0.08, after the makespan
  cm.zero.stage = 1;
  CHECK_OK(plan_simulate(&p, tokens, &cm, &cl, &sim, NULL, NULL));
  CHECK_NEAR(sim.makespan_s, 1.1, TOL);
  CHECK_NEAR(sim.step_s, 1.6 + 0.08, TOL);
  CHECK_NEAR(sim.zero_s, 0.08, TOL);
  // stage 2: the waves in lockstep, each followed by its last reduce-scatter 3/4 * 800 / 1e5
  // + 0.01 = 0.016 (the others, 0.064, hide behind 2/3 of 1.1 and of 0.1675): wave 1 starts
  // at 1.116, the makespan is 1.116 + 0.1675 + 0.016
  cm.zero.stage = 2;
  double *start = malloc(sizeof *start * (size_t)p.ngroups);  // a group of wave 1 idle
  CHECK_OK(plan_simulate(&p, tokens, &cm, &cl, &sim, NULL, start));
  for (int gi = p.wave_off[1]; gi < p.wave_off[2]; gi++) CHECK_NEAR(start[gi], 1.116, TOL);
  CHECK(p.wave_off[2] > p.wave_off[1], "wave 1 has no group");
  free(start);
  CHECK_NEAR(sim.makespan_s, 1.2995, TOL);
  CHECK_NEAR(sim.zero_s, 0.08 + 2 * 0.016, TOL);
  CHECK_NEAR(sim.step_s, 1.2995 + 0.5 + 0.08, TOL);
  // plan_rewave: the same groups in waves for lockstep. Wave 0: [0,2) 1000 tokens (1.1 s),
  // [2,4) 100 (0.1675 s); wave 1: [0,2) 100, [2,4) 1000: in lockstep each wave takes 1.1 s.
  // Longest first into the first free wave puts both long groups in wave 0, both short ones
  // in wave 1: 1.1 + 0.016 + 0.1675 + 0.016.
  int64_t tk4[4] = {1000, 100, 100, 1000};
  plan q, r;
  plan_of(&q, (const one_clip_group[]){{0, 0, 2, 0}, {0, 2, 2, 1}, {1, 0, 2, 2}, {1, 2, 2, 3}},
          4);
  plan_init(&r, 4);
  CHECK_OK(plan_simulate(&q, tk4, &cm, &cl, &sim, NULL, NULL));
  CHECK_NEAR(sim.makespan_s, 2 * (1.1 + 0.016), TOL);
  CHECK_OK(plan_rewave(&q, tk4, 4, &cm, &cl, &r));
  CHECK_OK(plan_validate(&r, tk4, 4, &cl));
  CHECK(r.nwaves == 2 && r.ngroups == 4, "%d waves, %d groups", r.nwaves, r.ngroups);
  CHECK_OK(plan_simulate(&r, tk4, &cm, &cl, &sim, NULL, NULL));
  CHECK_NEAR(sim.makespan_s, 1.1 + 0.016 + 0.1675 + 0.016, TOL);
  for (int w = 0; w < r.nwaves; w++)  // each wave: one long or both short
    for (int gi = r.wave_off[w]; gi < r.wave_off[w + 1]; gi++)
      CHECK(tk4[r.clip_index[r.groups[gi].clip_off]] == (w == 0 ? 1000 : 100), "wave %d", w);
  plan_free(&q);
  plan_free(&r);
  // the lower bound of any plan adds the all-gather and one wave's least collectives
  sched_config sc = {.cluster = cl, .cost = cm};
  double lb2, lb0;
  sched_lower_bound(&sc, tokens, 3, &lb2, NULL);
  sc.cost.zero.stage = 0;
  sched_lower_bound(&sc, tokens, 3, &lb0, NULL);
  CHECK_NEAR(lb2 - lb0, 0.08 + 0.016, TOL);
  plan_free(&p);
}

// Token pairs a block-causal mask allows in a clip of L tokens in raster order, frames of
// `frame` tokens, chunks of `chunk` frames, `window` chunks back (0: all), counted one pair
// at a time.
static double brute_causal(int64_t L, int frame, int chunk, int window) {
  double n = 0;
  for (int64_t i = 0; i < L; i++)
    for (int64_t j = 0; j < L; j++) {
      int64_t ci = i / frame / chunk, cj = j / frame / chunk;
      n += cj <= ci && (window == 0 || ci - cj <= window);
    }
  return n;
}

// A clip's attention area under the masks (sched/cost.h cost_clip_area), by hand.
static void test_mask_area(const cost_model *base) {
  cost_model cm = *base;
  CHECK_NEAR(cost_clip_area(&cm, 30), 900, 0);  // full: L^2
  // block-causal, frames of 2 x 3 = 6 tokens, chunks of 2 frames (12 tokens); 30 tokens are
  // chunks of 12, 12, 6: 12*12 + 12*24 + 6*30 = 612; one chunk back: chunk 2 sees chunks
  // 1 and 2 (18 tokens): 144 + 288 + 6*18 = 540
  cm.mask = (cost_mask){.kind = COST_MASK_BLOCK_CAUSAL, .chunk = 2, .window = 0, .rows = 2, .cols = 3};
  CHECK_OK(cost_model_check(&cm));
  CHECK_NEAR(cost_clip_area(&cm, 30), 612, 0);
  CHECK_NEAR(cost_clip_area(&cm, 33), brute_causal(33, 6, 2, 0), 0);  // a partial frame: 729
  CHECK_NEAR(cost_clip_area(&cm, 33), 729, 0);
  // the clip alone on one rank: a L + b area + ovh
  CHECK_NEAR(cost_clip_time(&cm, 2, 1, 30), 0.001 * 30 + 1e-6 * 612 + 0.1, TOL);
  cm.mask.window = 1;
  CHECK_NEAR(cost_clip_area(&cm, 30), 540, 0);
  CHECK_NEAR(cost_clip_area(&cm, 1000), brute_causal(1000, 6, 2, 1), 0);
  // window: frames of 4 rows x 3 columns, tiles 1 x 2 x 1, radii 1, 0, 1; 3 frames (36
  // tokens). Time: 3 tiles of 1, pairs within 1: 7; rows: 2 tiles of 2, each with itself
  // only: 2*2 + 2*2 = 8; columns: 3 tiles of 1 within 1: 7. Area 7 * 8 * 7 = 392.
  cm.mask = (cost_mask){.kind = COST_MASK_WINDOW, .wt = 1, .wh = 0, .ww = 1, .tile_t = 1,
                        .tile_h = 2, .tile_w = 1, .rows = 4, .cols = 3};
  CHECK_OK(cost_model_check(&cm));
  CHECK_NEAR(cost_clip_area(&cm, 36), 392, 0);
  // a masked model without the frame's grid is refused, naming what it needs
  cm.mask.rows = 0;
  CHECK(cost_model_check(&cm) == TSR_EINVAL && strstr(err_msg(), "token grid of a frame"),
        "no grid: %s", err_msg());
}

int main(void) {
  CHECK(mkdtemp(tmpdir) != NULL, "mkdtemp");
  cost_model cm;
  CHECK_OK(cost_model_load(write_file("ok.conf", full), &cm));
  CHECK_NEAR(cm.a, 0.001, 0);
  CHECK_NEAR(cm.bw_inter, 1e5, 0);
  CHECK_NEAR(cm.allreduce, 0.5, 0);
  test_mask_area(&cm);

  // k = 1, L = 100: a*L = 0.1, b*L^2 = 0.01, no ring, ovh 0.1 -> 0.21
  CHECK_NEAR(cost_clip_time(&cm, 2, 1, 100), 0.21, TOL);
  // k = 2 (intra, G = 2), L = 1000: compute (1 + 1)/2 = 1; exposed 100*500/1e6 + 0.01 -
  // 1e-6*1e6/4 = 0.06 - 0.25 < 0 -> hidden; + ovh -> 1.1
  CHECK_NEAR(cost_clip_time(&cm, 2, 2, 1000), 1.1, TOL);
  // k = 4 (inter, 4 > G), L = 400: compute (0.4 + 0.16)/4 = 0.14; exposed per step
  // 100*100/1e5 + 0.01 - 1e-6*160000/16 = 0.1 + 0.01 - 0.01 = 0.1; 3 steps -> 0.3;
  // + ovh -> 0.54
  CHECK_NEAR(cost_clip_time(&cm, 2, 4, 400), 0.54, TOL);
  // same clip with G = 4 is intra: exposed 100*100/1e6 + 0.01 - 0.01 = 0.01 -> 0.03
  CHECK_NEAR(cost_clip_time(&cm, 4, 4, 400), 0.14 + 0.03 + 0.1, TOL);
  // packed k = 2: clips 300 and 100: s1 = 400, s2 = 100000; compute (0.4 + 0.1)/2 = 0.25;
  // exposed 100*400/2/1e6 + 0.01 - 1e-6*1e5/4 = 0.02 + 0.01 - 0.025 = 0.005 -> 0.355
  CHECK_NEAR(cost_group_time(&cm, 2, 2, 2, 400, 100000), 0.355, TOL);
  CHECK_NEAR(cost_group_time(&cm, 2, 2, 0, 0, 0), 0.0, 0);  // empty group: no time
  // packing never costs more than separate groups (shares ovh and ring latency)
  CHECK(cost_group_time(&cm, 2, 2, 2, 400, 100000) <
            cost_clip_time(&cm, 2, 2, 300) + cost_clip_time(&cm, 2, 2, 100),
        "packing is subadditive");

  // Ulysses (sched/cost.h): whole clips for ceil(H/k) of H heads, the all-to-all exposed.
  cost_model cu = cm;
  // k = 4 (inter), L = 400, heads even: work 0.4/4 + 0.16/4 = 0.14; all-to-all
  // 2*(100*100*(3/4)/1e5 + 0.01) = 0.17; + ovh -> 0.41 (the ring's: 0.54)
  CHECK_NEAR(cost_group_time_mode(&cu, 2, 4, 1, 400, 160000, COST_CP_ULYSSES), 0.41, TOL);
  CHECK_NEAR(cost_group_time_mode(&cu, 2, 4, 1, 400, 160000, COST_CP_RING), 0.54, TOL);
  CHECK(cost_group_mode(&cu, 2, 4, 1, 400, 160000) == COST_CP_RING &&
            cost_clip_time(&cu, 2, 4, 400) == cost_group_time_mode(&cu, 2, 4, 1, 400, 160000, COST_CP_RING),
        "cp_modes 0 is ring only");
  cu.cp_modes = COST_MODES_RING | COST_MODES_ULYSSES;
  CHECK(cost_group_mode(&cu, 2, 4, 1, 400, 160000) == COST_CP_ULYSSES, "the faster is taken");
  CHECK_NEAR(cost_clip_time(&cu, 2, 4, 400), 0.41, TOL);
  // 6 heads over 4 ranks: 2 a rank, attention share 1/3: 0.1 + 0.16/3 + 0.17 + 0.1
  cu.heads = 6;
  CHECK_NEAR(cost_clip_time(&cu, 2, 4, 400), 0.1 + 0.16 / 3 + 0.17 + 0.1, TOL);
  // k = 2 (intra), L = 1000: Ulysses 1 + 2*(100*500*0.5/1e6 + 0.01) + 0.1 = 1.17 > ring 1.1
  CHECK_NEAR(cost_group_time_mode(&cu, 2, 2, 1, 1000, 1e6, COST_CP_ULYSSES), 1.17, TOL);
  CHECK(cost_group_mode(&cu, 2, 2, 1, 1000, 1e6) == COST_CP_RING, "ring hides its exchange");
  // hybrid, k = 4 over G = 2: Ulysses over u = 2, ring over r = 2 nodes, heads even
  // (sh = 1/2): work 0.4/4 + 0.16*0.5/2 = 0.14; all-to-all 2*(100*100*(1/2)/1e6 + 0.01) =
  // 0.03; one ring step across nodes 100*400*0.5/2/1e5 + 0.01 - 1e-6*160000*0.5/4 = 0.09;
  // + ovh -> 0.36, faster than ring (0.54) and Ulysses (0.41)
  cu.heads = 0;
  cu.cp_modes = COST_MODES_AUTO;
  CHECK_NEAR(cost_group_time_mode(&cu, 2, 4, 1, 400, 160000, COST_CP_HYBRID), 0.36, TOL);
  CHECK(cost_group_mode(&cu, 2, 4, 1, 400, 160000) == COST_CP_HYBRID, "hybrid across nodes");
  // inside a node (G = 4) hybrid is Ulysses
  CHECK(cost_group_time_mode(&cu, 4, 4, 1, 400, 160000, COST_CP_HYBRID) ==
            cost_group_time_mode(&cu, 4, 4, 1, 400, 160000, COST_CP_ULYSSES) &&
            cost_group_mode(&cu, 4, 4, 1, 400, 160000) != COST_CP_HYBRID,
        "hybrid needs a group spanning nodes");
  // a calibrated all-to-all (a2a_*) replaces the ring's keys in Ulysses' term: with
  // a2a_bw_inter 2e5, a2a_lat 0.02 the all-to-all is 2*(100*100*(3/4)/2e5 + 0.02) = 0.115
  cost_model ca = cu;
  ca.a2a_bw_inter = 2e5, ca.a2a_lat = 0.02;
  CHECK_NEAR(cost_group_time_mode(&ca, 2, 4, 1, 400, 160000, COST_CP_ULYSSES), 0.14 + 0.115 + 0.1,
             TOL);
  CHECK_OK(cost_model_check(&ca));
  ca.a2a_bw_intra = 10;  // neither 0 (unset) nor within [1e3, 1e16]
  CHECK(cost_model_check(&ca) == TSR_EFORMAT && strstr(err_msg(), "a2a_bw_intra"), "%s", err_msg());
  // Pipelined over C head chunks (a2a_chunks): one chunk's transfers x = 2*(bytes/bw/C +
  // lat), exposed x + (C-1)*max(0, x - W/C), W the rank's attention work.
  cost_model cp = cm;
  cp.a2a_chunks = 2, cp.heads = 8;
  // k = 2 (intra), L = 1000, 4 heads a rank: W = 1e-6*1e6*4/8 = 0.5, x = 2*(100*500*0.5/1e6/2
  // + 0.01) = 0.045 hidden after the first: 0.5 + 0.5 + 0.045 + 0.1 = 1.145 (blocking 1.17)
  CHECK_NEAR(cost_group_time_mode(&cp, 2, 2, 1, 1000, 1e6, COST_CP_ULYSSES), 1.145, TOL);
  CHECK_NEAR(cost_group_exposed(&cp, 2, 2, 1000, 1e6, COST_CP_ULYSSES), 0.045, TOL);
  // k = 4 (inter), L = 400, 2 heads a rank: W = 0.16*2/8 = 0.04, x = 2*(100*100*0.75/1e5/2 +
  // 0.01) = 0.095, the second step hides 0.02 of it: 0.095 + 0.075 = 0.17
  CHECK_NEAR(cost_group_exposed(&cp, 2, 4, 400, 160000, COST_CP_ULYSSES), 0.17, TOL);
  // 4 chunks over 16 heads (4 a rank): x = 2*(0.075/4 + 0.01) = 0.0575, W/C = 0.04/4 = 0.01:
  // 0.0575 + 3*0.0475 = 0.2 (each chunk pays the latency)
  cp.a2a_chunks = 4, cp.heads = 16;
  CHECK_NEAR(cost_group_exposed(&cp, 2, 4, 400, 160000, COST_CP_ULYSSES), 0.2, TOL);
  // more chunks than a rank's heads: as many as it has (2 heads at k = 4: C = 2, as above)
  cp.heads = 8;
  CHECK_NEAR(cost_group_exposed(&cp, 2, 4, 400, 160000, COST_CP_ULYSSES), 0.17, TOL);
  // one head a rank: blocking (the whole all-to-all exposed, 0.07 at k = 2, L = 1000)
  cp.heads = 2;
  CHECK_NEAR(cost_group_exposed(&cp, 2, 2, 1000, 1e6, COST_CP_ULYSSES), 0.07, TOL);
  // hybrid's Ulysses over u = 2 inside the node, heads even (C = 4): x = 2*(100*100*0.5/1e6/4
  // + 0.01) = 0.0225, W = 0.16*0.5/2 = 0.04 hides 0.01 a step: 0.0225 + 3*0.0125 = 0.06, + the
  // ring step 0.09 (as above)
  cp.heads = 0, cp.a2a_chunks = 4;
  CHECK_NEAR(cost_group_exposed(&cp, 2, 4, 400, 160000, COST_CP_HYBRID), 0.06 + 0.09, TOL);
  // the planner's bound: a clip joining can take at most (C-1)*max(0, W_item/C - x_item) off
  // the pipelined steps (latency excluded: it adds bytes, not transfers). k = 2, 4 heads a
  // rank, C = 2, an item of L = 1000: W/C = 0.25, bytes 0.0125*2 = 0.025 -> 0.225
  cp.heads = 8, cp.a2a_chunks = 2, cp.cp_modes = COST_MODES_ULYSSES;
  double can, per;
  cost_group_shrink(&cp, 2, 2, 1000, 1e6, 1000, 1e6, &can, &per);
  CHECK_NEAR(per, 0.225, TOL);

  cu.heads = 6;
  cu.cp_modes = COST_MODES_ULYSSES;  // forced, and at k = 1 both are local attention
  CHECK_NEAR(cost_clip_time(&cu, 2, 2, 1000), 1.17, TOL);
  CHECK(cost_group_mode(&cu, 2, 1, 1, 100, 1e4) == COST_CP_RING &&
            fabs(cost_clip_time(&cu, 2, 1, 100) - 0.21) <= TOL, "k = 1 is local");

  // Captions (text_a, text_c; Lt mean caption tokens): the cross-attention of the queries
  // splits over the group, the caption's embedding and keys/values are on every rank.
  CHECK_NEAR(cm.text_a, 0, 0);  // optional keys absent from the file: 0
  cost_model ct = cm;
  ct.text_a = 1e-5, ct.text_c = 1e-3, ct.text_tokens = 20;
  // k = 1, L = 100: 0.21 + 1e-5*20*100 (0.02) + 1 clip * 1e-3*20 (0.02) = 0.25
  CHECK_NEAR(cost_clip_time(&ct, 2, 1, 100), 0.25, TOL);
  // packed k = 2 as above: 0.355 + 1e-5*20*400/2 (0.04) + 2 clips * 0.02 on each rank = 0.435
  CHECK_NEAR(cost_group_time(&ct, 2, 2, 2, 400, 100000), 0.435, TOL);
  CHECK_OK(cost_model_check(&ct));
  ct.text_tokens = -1;
  CHECK(cost_model_check(&ct) == TSR_EINVAL && strstr(err_msg(), "caption tokens"), "%s", err_msg());
  CHECK_OK(cost_model_load(write_file("text.conf", "a = 0.001\nb = 1e-6\nkv = 100\n"
                                      "bw_intra = 1e6\nbw_inter = 1e5\nlat = 0.01\novh = 0.1\n"
                                      "allreduce = 0.5\ntext_a = 2e-6\ntext_c = 3e-4\n"),
                           &ct));
  CHECK(ct.text_a == 2e-6 && ct.text_c == 3e-4 && ct.text_tokens == 0, "text keys read");
  CHECK(ct.a2a_lat == 0 && ct.a2a_bw_intra == 0 && ct.a2a_bw_inter == 0, "a2a keys absent: 0");
  CHECK_OK(cost_model_load(write_file("a2a.conf", "a = 0.001\nb = 1e-6\nkv = 100\n"
                                      "bw_intra = 1e6\nbw_inter = 1e5\nlat = 0.01\novh = 0.1\n"
                                      "allreduce = 0.5\na2a_lat = 0.002\na2a_bw_intra = 3e6\n"),
                           &ct));
  CHECK(ct.a2a_lat == 0.002 && ct.a2a_bw_intra == 3e6 && ct.a2a_bw_inter == 0, "a2a keys read");

  // CP sizes: chunk = ceil(L/k) must fit M
  sched_cluster cl = {8, 2, 1000};
  CHECK(cost_chunk_tokens(1001, 2) == 501, "ceil");
  CHECK(cost_min_cp(&cl, 1000) == 1, "fits one rank");
  CHECK(cost_min_cp(&cl, 1001) == 2, "needs two");
  CHECK(cost_min_cp(&cl, 8000) == 8, "needs all");
  CHECK(cost_min_cp(&cl, 8001) == 0, "fits nowhere");
  CHECK_OK(sched_cluster_check(&cl));
  cl.ranks = 12;  // any world size; its largest group is 8
  CHECK_OK(sched_cluster_check(&cl));
  CHECK(cost_min_cp(&cl, 8000) == 8 && cost_min_cp(&cl, 8001) == 0, "12 ranks: groups up to 8");
  cl.ranks = 0;
  CHECK(sched_cluster_check(&cl) == TSR_EINVAL && strstr(err_msg(), "ranks = 0"), "%s",
        err_msg());

  // The preset shipped in configs/cost loads.
  char preset[1024];
  snprintf(preset, sizeof preset, "%s/configs/cost/h100-dit1b.conf", TESSERA_SOURCE_DIR);
  CHECK_OK(cost_model_load(preset, &cm));
  CHECK_NEAR(cm.b, 1.8e-9, 0);
  CHECK_NEAR(cm.bw_inter, 4.5e10, 0);

  // Errors name the file and key.
  const char *p = write_file("missing.conf", "a = 1e-5\nb = 1e-9\nkv = 1\nbw_intra = 1e9\n"
                                             "bw_inter = 1e9\nlat = 0\novh = 0\n");
  CHECK(cost_model_load(p, &cm) == TSR_EFORMAT, "missing key");
  CHECK(strstr(err_msg(), "missing key 'allreduce'") && strstr(err_msg(), p), "%s", err_msg());
  p = write_file("unknown.conf", "a = 1\nalpha = 2\n");
  CHECK(cost_model_load(p, &cm) == TSR_EFORMAT && strstr(err_msg(), "unknown key 'alpha'"),
        "%s", err_msg());
  p = write_file("nan.conf", "a = fast\n");
  CHECK(cost_model_load(p, &cm) == TSR_EFORMAT && strstr(err_msg(), "'a'") &&
            strstr(err_msg(), "not a number"),
        "%s", err_msg());
  p = write_file("neg.conf", "b = -1\n");
  CHECK(cost_model_load(p, &cm) == TSR_EFORMAT && strstr(err_msg(), "'b'"), "%s", err_msg());
  p = write_file("bw0.conf", "bw_inter = 0\n");
  CHECK(cost_model_load(p, &cm) == TSR_EFORMAT && strstr(err_msg(), "bw_inter"), "%s",
        err_msg());
  p = write_file("twice.conf", "a = 1e-5\n\na = 2e-5\n");
  CHECK(cost_model_load(p, &cm) == TSR_EFORMAT &&
            strstr(err_msg(), "twice.conf:3: key 'a' given twice (lines 1 and 3)"),
        "%s", err_msg());
  p = write_file("garbage.conf", "a = 1e-5\nthis line has no equals sign\n");
  CHECK(cost_model_load(p, &cm) == TSR_EFORMAT &&
            strstr(err_msg(), "garbage.conf:2: not a 'key = value' line: 'this line has no "
                              "equals sign'"),
        "%s", err_msg());

  // Issue 9, part 6: absurd coefficients (they crashed the planner: every candidate time
  // overflowed) and zero work are refused where the file is read, naming line and range.
  const char *absurd[][2] = {{"a = 1e308", "a.conf:1: key 'a' = 1e+308 is out of range [1e-15, 1]"},
                             {"b = 1e300", "b.conf:1: key 'b' = 1e+300 is out of range"},
                             {"a = 0", "a.conf:1: key 'a' = 0 is out of range [1e-15, 1]"},
                             {"b = 0", "b.conf:1: key 'b' = 0 is out of range"},
                             {"a = inf", "a.conf:1: key 'a' = 'inf' is out of range"},
                             {"a = 1e999", "a.conf:1: key 'a' = '1e999' is out of range"},
                             {"a = nan", "a.conf:1: key 'a': 'nan' is not a number"},
                             {"bw_inter = 1e300", "bw_inter.conf:1: key 'bw_inter' = 1e+300"},
                             {"kv = 0", "kv.conf:1: key 'kv' = 0 is out of range"},
                             {"lat = 1e9", "lat.conf:1: key 'lat' = 1e+09 is out of range"}};
  for (int i = 0; i < (int)(sizeof absurd / sizeof absurd[0]); i++) {
    char name[32];
    snprintf(name, sizeof name, "%.*s.conf", (int)strcspn(absurd[i][0], " "), absurd[i][0]);
    p = write_file(name, absurd[i][0]);
    CHECK(cost_model_load(p, &cm) == TSR_EFORMAT && strstr(err_msg(), absurd[i][1]),
          "%s: %s", absurd[i][0], err_msg());
  }
  p = write_file("section.conf", "[cost]\na = 1e-5\n");
  CHECK(cost_model_load(p, &cm) == TSR_EFORMAT && strstr(err_msg(), "section.conf:2:"), "%s",
        err_msg());
  cost_model big = cm;
  big.a = 1e308;
  CHECK(cost_model_check(&big) == TSR_EFORMAT && strstr(err_msg(), "'a'"), "%s", err_msg());
  // Cluster sizes: 64-bit memory within 2^38 tokens, ranks and nodes within 2^24.
  sched_cluster huge = {4, 8, INT64_MAX};
  CHECK(sched_cluster_check(&huge) == TSR_EINVAL && strstr(err_msg(), "mem tokens"), "%s",
        err_msg());
  huge = (sched_cluster){1 << 25, 8, 1000};
  CHECK(sched_cluster_check(&huge) == TSR_EINVAL && strstr(err_msg(), "ranks"), "%s", err_msg());
  CHECK(cost_model_load("/nonexistent/x.conf", &cm) == TSR_EIO &&
            strstr(err_msg(), "/nonexistent/x.conf"),
        "%s", err_msg());

  test_zero();

  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  CHECK(system(cmd) == 0, "cleanup");
  return check_done();
}
