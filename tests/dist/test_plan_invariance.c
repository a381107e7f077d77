// Plan invariance, the central correctness property of the trainer (docs/dist.md): for one
// global batch and the same weights, the loss and every gradient are the same, up to
// floating-point reassociation, for any plan and world size.
//
//   test_plan_invariance run single OUT     1 rank, every clip in one CP-1 group
//   mpirun -np 2 ... run static2 OUT        2 ranks, static CP 2 (two waves)
//   mpirun -np 4 ... run mixed4 OUT         4 ranks, waves mixing CP sizes 1, 2 and 4; ranks
//                                           2 and 3 idle in the last wave (their gradient
//                                           buckets are reduced after it)
//   mpirun -np 4 ... run idle4 OUT          4 ranks, ranks 2 and 3 without any clip
//   mpirun -np 8 ... run mixed8 OUT         8 ranks, a group of 8, then groups of 4, 2 and
//                                           1 beside idle ranks
//   test_plan_invariance compare A B        loss and each gradient tensor within 1e-5
//   ... run KIND OUT zero2                  ZeRO stage 2: a model without a whole gradient
//                                           buffer, every wave's buckets reduce-scattered
//                                           into shards (idle ranks with zero buckets), the
//                                           shards gathered back to compare
//   ... run KIND OUT zero3                  ZeRO stage 3: as zero2, and the model without
//                                           whole weights either: every bucket gathered from
//                                           the ranks' master shards before each use, the
//                                           next one prefetched (idle ranks gather too)
//   ... run KIND OUT bf16, compare A B TOL  the same with bf16 activations (cpu-bf16)
//   ... run KIND OUT text, compare A B TOL text  a model with captions (cross-attention):
//                                           clips with captions of 1 to 5 tokens or none,
//                                           dropped at random; every rank of a CP group
//                                           holds the whole caption of each of its clips
//   ... run KIND OUT ... ulysses               every group of more than one rank attends by
//                                           Ulysses' all-to-all (2 heads: at 4 ranks two
//                                           ranks hold none); "modes": ring and Ulysses
//                                           groups alternate within the plan; "hybrid":
//                                           Ulysses over pairs of ranks, ring across them
//                                           (the 4-rank group; a pair alone is Ulysses)
//   ... run KIND OUT causal|window          the model under a block-causal or window mask
//                                           (model.attn_mask; compared with the same mask's
//                                           single run) in any CP mode
//   ... run KIND OUT wan, compare A B TOL wan   the same for model.family = wan (no labels,
//                                           no null token: a clip without a caption attends
//                                           to none; ffn_dim 40)
//
// The batch: 8 clips of different grids (1 to 60 tokens: clips shorter than the group
// and lengths not divisible by it), labels with dropout, a tiny model whose adaLN and
// output weights are perturbed away from their zero init so every gradient is non-zero.
// Tolerance 1e-5 relative (norm of the difference / norm of the reference, per tensor):
// ring attention merges partial softmaxes and the all-reduce sums ranks in another order.
// With bf16 activations each plan rounds different intermediate values to bf16 (a CP chunk
// holds other rows of a microbatch, ring attention rounds each merge and each accumulated
// dq/dk/dv block, kernels.h), so the plans agree only to bf16's own accuracy. What must
// hold is that no plan is worse than bf16 allows: plan_invariance.sh compares every bf16
// run (1, 2, 4 ranks) with the fp32 one-rank result, 5e-2 per gradient tensor and 5e-3 on
// the loss (tol / 10: a sum over every token, where the roundings average out). Measured:
// worst tensors 2.6% (1 rank), 2.9% (2), 2.4% (4), all RMSNorm weights, whose gradient is
// a sum of many terms that cancel; losses within 5e-4. (bf16 keeps 8 significant bits:
// u = 2^-8 = 0.4% per rounding, and a gradient passes through some 20 of them.)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "comm/comm.h"
#include "core/rng.h"
#include "model/dist/dist_step.h"
#include "model/mt.h"

enum { NCLIPS = 8 };
static const int grids[NCLIPS][3] = {{3, 2, 3}, {1, 1, 1}, {2, 2, 2}, {5, 3, 4},
                                     {1, 1, 3}, {4, 2, 2}, {2, 3, 3}, {7, 1, 2}};

static int with_text;  // the model has captions (argument "text")
static int with_wan;   // the Wan family, with captions (argument "wan")
static int zero;       // ZeRO stage 2 (argument "zero2"): the gradient reduce-scattered in
                       // every wave from bucket buffers into shards, gathered back to compare;
                       // 3 ("zero3"): the weights gathered per bucket from shards too
static int cp_modes;   // 0: every group in ring mode; "ulysses": every group of more than
                       // one rank in Ulysses mode; "modes": groups alternate ring, Ulysses;
                       // "hybrid": every group hybrid over blocks of 2 ranks
static int mask;       // model.attn_mask: 0 full; "causal": block_causal by 1 frame, one chunk
                       // back; "window": tiles of 1 token, radii 1 frame, 0 rows, 1 column

static void setup_config(dit_config *mc, train_config *tc) {
  config_defaults(mc, tc);
  if (with_text) mc->text_dim = 6, mc->text_len = 5, tc->caption_dropout = 0.3f;
  mc->hidden = 32;
  mc->depth = 2;
  mc->heads = 2;
  mc->pt = 1;
  mc->ph = 4;
  mc->pw = 4;
  mc->channels = 3;
  mc->num_classes = 3;
  tc->class_dropout = 0.3f;
  if (with_wan) mc->family = DIT_FAMILY_WAN, mc->ffn_dim = 40, mc->num_classes = 0;
  if (mask == 1) mc->attn_mask = KERNELS_MASK_BLOCK_CAUSAL, mc->mask_chunk = 1, mc->mask_window = 1;
  if (mask == 2) mc->attn_mask = KERNELS_MASK_WINDOW, mc->mask_wt = 1, mc->mask_wh = 0, mc->mask_ww = 1;
  tc->t_shift_tokens = 8;
  tc->seed = 11;
}

static tsr_status build_plan(plan *p, const char *kind, int world) {
  typedef struct { int wave, first, size, n, clips[4]; } grp;
  static const grp single[] = {{0, 0, 1, 4, {0, 1, 2, 3}}, {1, 0, 1, 4, {4, 5, 6, 7}}};
  static const grp static2[] = {{0, 0, 2, 4, {0, 1, 2, 3}}, {1, 0, 2, 4, {4, 5, 6, 7}}};
  static const grp idle4[] = {{0, 0, 2, 4, {0, 1, 2, 3}}, {1, 0, 2, 4, {4, 5, 6, 7}}};
  static const grp mixed4[] = {{0, 0, 1, 1, {0}}, {0, 1, 1, 1, {1}}, {0, 2, 2, 2, {2, 3}},
                               {1, 0, 4, 2, {4, 5}}, {2, 0, 2, 2, {6, 7}}};
  static const grp mixed8[] = {{0, 0, 8, 2, {3, 5}}, {1, 0, 4, 2, {0, 6}}, {1, 4, 2, 2, {1, 7}},
                               {1, 6, 1, 1, {2}}, {2, 0, 2, 1, {4}}};
  const grp *g;
  int ng, need;
  if (!strcmp(kind, "single")) g = single, ng = 2, need = 1;
  else if (!strcmp(kind, "static2")) g = static2, ng = 2, need = 2;
  else if (!strcmp(kind, "mixed4")) g = mixed4, ng = 5, need = 4;
  else if (!strcmp(kind, "idle4")) g = idle4, ng = 2, need = 4;
  else if (!strcmp(kind, "mixed8")) g = mixed8, ng = 5, need = 8;
  else return err_set(TSR_EINVAL, "unknown plan kind %s", kind);
  if (world != need) return err_set(TSR_EINVAL, "plan %s needs %d ranks, the world has %d", kind, need, world);
  plan_init(p, world);
  tsr_status st = TSR_OK;
  for (int w = 0, i = 0; w < 3 && !st && i < ng; w++) {
    if ((st = plan_wave_begin(p))) break;
    for (; i < ng && g[i].wave == w && !st; i++)
      st = plan_add_group(p, g[i].first, g[i].size, g[i].clips, g[i].n);
    if (!st) st = plan_wave_end(p);
  }
  for (int gi = 0; gi < p->ngroups && !st; gi++)  // 2 heads: at 4 ranks two hold none
    p->groups[gi].mode = cp_modes == 3                               ? COST_CP_HYBRID
                         : cp_modes == 1 || (cp_modes == 2 && gi % 2) ? COST_CP_ULYSSES
                                                                      : COST_CP_RING;
  return st;
}

static int run(const char *kind, const char *outpath, const kernels_backend *kb) {
  dit_config mc;
  train_config tc;
  setup_config(&mc, &tc);
  const int P = mc.pt * mc.ph * mc.pw * mc.channels;
  dist_clip clips[NCLIPS];
  uint8_t *tok[NCLIPS];
  float *text[NCLIPS];
  int total = 0;
  for (int i = 0; i < NCLIPS; i++) {
    int n = grids[i][0] * grids[i][1] * grids[i][2];
    tok[i] = malloc((size_t)n * P);
    for (int j = 0; j < n * P; j++) tok[i][j] = (uint8_t)((i * 31 + j * 7 + (j / P) * 13) % 256);
    clips[i] = (dist_clip){.id = 100 + i, .T = grids[i][0], .H = grids[i][1], .W = grids[i][2],
                           .label = i % 4 == 3 ? -1 : i % 3, .tokens = tok[i]};
    int nt = i % 3 == 2 ? 0 : 1 + i % 5;  // captions of 1 to 5 tokens, or none
    text[i] = malloc(sizeof(float) * (size_t)(nt ? nt : 1) * 6);
    rng_key k = {5, 0, (uint64_t)i, RNG_STREAM_SAMPLE};
    for (int j = 0; j < nt * 6; j++) text[i][j] = (float)rng_normal(&k, (uint64_t)j);
    if (with_text && nt)
      clips[i].text = text[i], clips[i].text_tokens = nt, clips[i].text_dtype = KERNELS_TOKENS_F32;
    total += n;
  }
  plan p;
  CHECK_OK(comm_groups_init());
  CHECK_OK(comm_stride_groups_init(2));  // hybrid groups: Ulysses over pairs of ranks
  tsr_status st = build_plan(&p, kind, comm_size());
  CHECK(st == TSR_OK, "plan: %s", err_msg());
  if (st) return check_done();
  dit_model *m = NULL;
  dist_step *ds = NULL;
  float *shard = NULL;
  const int W = comm_size();
  float *wshard = NULL;  // ZeRO 3: this rank's slices of the weights (model/train/zero.h)
  if (zero) mc.shard_ranks = W;  // buckets padded for W equal slices, no whole gradient buffer
  if (zero == 2) CHECK_OK(dit_create_bucket_grads(&m, &mc, kb, total, NCLIPS));
  else CHECK_OK(dit_create(&m, &mc, kb, total, NCLIPS));
  CHECK_OK(dit_init(m, 7));
  CHECK_OK(mt_perturb(m, 8, 0.1f));
  if (zero == 3) {  // the weights made whole, sliced, and the whole model dropped
    size_t n = dit_num_params(m), S = n / (size_t)W;
    float *hw = malloc(n * sizeof *hw), *hs = malloc(S * sizeof *hs);
    CHECK_OK(kb->to_host(kb, hw, dit_params(m), n * sizeof *hw));
    for (int b = 0; b < dit_num_buckets(m); b++) {
      dit_bucket k = dit_get_bucket(m, b);
      memcpy(hs + k.offset / (size_t)W, hw + k.offset + (size_t)comm_rank() * (k.numel / (size_t)W),
             k.numel / (size_t)W * sizeof *hs);
    }
    dit_free(&m);
    CHECK_OK(dit_create_sharded(&m, &mc, kb, total, NCLIPS));
    CHECK_OK(kb->alloc(kb, (void **)&wshard, S * sizeof(float)));
    CHECK_OK(kb->to_device(kb, wshard, hs, S * sizeof *hs));
    free(hw), free(hs);
  }
  // A communication backend on another memory space than the compute backend's is refused.
  comm_backend device_comm = *comm_mpi();
  device_comm.mem = COMM_MEM_DEVICE;
  st = dist_step_create(&ds, m, &device_comm, &mc, &tc, total, NCLIPS);
  CHECK(st == TSR_EINVAL && strstr(err_msg(), "device memory") && !ds,
        "device-memory communication with the cpu backend refused: %s", err_msg());
  CHECK_OK(dist_step_create(&ds, m, comm_mpi(), &mc, &tc, total, NCLIPS));
  if (zero) {
    CHECK_OK(kb->alloc(kb, (void **)&shard, dit_num_params(m) / (size_t)W * sizeof(float)));
    CHECK_OK(dist_step_set_shard(ds, shard, W));
  }
  if (zero == 3) CHECK_OK(dist_step_set_weights(ds, wshard));
  CHECK_OK(dit_zero_grad(m));
  double loss = 0;
  CHECK_OK(dist_step_run(ds, &p, clips, NCLIPS, 3, &loss, NULL));
  CHECK_OK(dist_step_reduce(ds, &loss));
  float *whole = NULL;  // ZeRO 2, 3: every rank's gradient shard put back, in the canonical layout
  size_t n_whole = 0;
  if (zero && check_failed == 0) {
    size_t n = dit_num_params(m);
    float *padded = calloc(n, sizeof *padded), *hs = malloc(n / (size_t)W * sizeof *hs);
    CHECK_OK(kb->to_host(kb, hs, shard, n / (size_t)W * sizeof *hs));
    for (int b = 0; b < dit_num_buckets(m); b++) {
      dit_bucket k = dit_get_bucket(m, b);
      CHECK_OK(comm_mpi()->allgather(comm_mpi(), comm_group_get(W), hs + k.offset / (size_t)W,
                                     padded + k.offset, (int64_t)(k.numel / (size_t)W * sizeof(float))));
    }
    dit_table canon;
    dit_config cmc = mc;
    cmc.shard_ranks = 0;
    CHECK_OK(dit_table_make(&cmc, &canon));
    whole = calloc(canon.n_params, sizeof *whole);
    n_whole = canon.n_params;
    for (int i = 0; i < canon.n; i++)
      memcpy(whole + canon.t[i].offset, padded + dit_tensor_info(m, i)->offset,
             canon.t[i].numel * sizeof(float));
    dit_table_free(&canon);
    free(padded), free(hs);
  }
  if (comm_rank() == 0 && check_failed == 0) {
    size_t n = whole ? n_whole : dit_num_params(m);
    float *g = malloc(n * sizeof *g);
    if (whole) memcpy(g, whole, n * sizeof *g);
    else CHECK_OK(kb->to_host(kb, g, dit_grads(m), n * sizeof *g));
    FILE *f = fopen(outpath, "wb");
    CHECK(f && fwrite(&loss, sizeof loss, 1, f) == 1 && fwrite(g, sizeof *g, n, f) == n,
          "write %s", outpath);
    if (f) fclose(f);
    printf("%s (%s%s): %d ranks, loss %.9g\n", kind, kb->name,
           with_wan ? ", wan" : with_text ? ", captions" : "",
           comm_size(), loss);
    free(g);
  }
  dist_step_free(&ds);
  if (shard) kb->free(kb, shard);
  if (wshard) kb->free(kb, wshard);
  free(whole);
  dit_free(&m);
  plan_free(&p);
  for (int i = 0; i < NCLIPS; i++) free(tok[i]), free(text[i]);
  return check_done();
}

static int compare(const char *a, const char *b, double tol) {
  dit_config mc;
  train_config tc;
  setup_config(&mc, &tc);
  dit_model *m = NULL;
  CHECK_OK(dit_create(&m, &mc, kernels_cpu(), 64, NCLIPS));
  if (!m) return check_done();
  size_t n = dit_num_params(m);
  float *ga = malloc(n * 4), *gb = malloc(n * 4);
  double la = 0, lb = 0;
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  CHECK(fa && fb && fread(&la, 8, 1, fa) == 1 && fread(&lb, 8, 1, fb) == 1 &&
            fread(ga, 4, n, fa) == n && fread(gb, 4, n, fb) == n,
        "read %s and %s", a, b);
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  // the loss is a sum over every token: its roundings average out (tol / 10, at least 1e-5)
  CHECK(fabs(la - lb) <= fmax(tol / 10, 1e-5) * fabs(la) && la > 0, "loss %.9g vs %.9g", la, lb);
  double worst = 0;
  for (int i = 0; i < dit_num_tensors(m); i++) {
    const dit_tensor *t = dit_tensor_info(m, i);
    double d = 0, r = 0;
    for (size_t j = 0; j < t->numel; j++) {
      double x = ga[t->offset + j], y = gb[t->offset + j];
      d += (x - y) * (x - y);
      r += x * x;
    }
    double rel = sqrt(d) / fmax(sqrt(r), 1e-30);
    worst = fmax(worst, rel);
    CHECK(r > 0, "%s: zero gradient (the test would not see a difference)", t->name);
    CHECK(rel <= tol, "%s: relative error %.3g > %.3g", t->name, rel, tol);
  }
  printf("compare %s %s: loss %.9g vs %.9g, worst tensor relative error %.3g over %d tensors\n", a,
         b, la, lb, worst, dit_num_tensors(m));
  free(ga);
  free(gb);
  dit_free(&m);
  return check_done();
}

int main(int argc, char **argv) {
  if (comm_init(&argc, &argv)) return 1;
  int rc = 2, bf16 = 0;
  double tol = 1e-5;
  for (int i = 4; i < argc; i++) {  // options after the two operands
    if (!strcmp(argv[i], "text")) with_text = 1;
    else if (!strcmp(argv[i], "wan")) with_text = with_wan = 1;
    else if (!strcmp(argv[i], "bf16")) bf16 = 1;
    else if (!strcmp(argv[i], "ulysses")) cp_modes = 1;
    else if (!strcmp(argv[i], "modes")) cp_modes = 2;
    else if (!strcmp(argv[i], "hybrid")) cp_modes = 3;
    else if (!strcmp(argv[i], "causal")) mask = 1;
    else if (!strcmp(argv[i], "window")) mask = 2;
    else if (!strcmp(argv[i], "zero2")) zero = 2;
    else if (!strcmp(argv[i], "zero3")) zero = 3;
    else if (strcmp(argv[i], "fp32")) tol = atof(argv[i]);
  }
  if (argc >= 4 && argc <= 9 && !strcmp(argv[1], "run"))
    rc = run(argv[2], argv[3], bf16 ? kernels_cpu_bf16() : kernels_cpu());
  else if (argc >= 4 && argc <= 6 && !strcmp(argv[1], "compare"))
    rc = compare(argv[2], argv[3], tol);
  else
    fprintf(stderr, "usage: %s run single|static2|mixed4|idle4|mixed8 OUT [fp32|bf16] [text|wan] "
            "[ulysses|modes|hybrid] [causal|window] [zero2|zero3] | compare A B [TOL] [text|wan]\n",
            argv[0]);
  comm_finalize();
  return rc;
}
