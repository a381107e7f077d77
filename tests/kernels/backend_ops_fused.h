// tests/kernels/backend_ops_fused.h — the cases of test_backend_ops.c, second half: the
// objective, loss and optimizer entries, the adaLN tiles, the fused entries against the
// reference, and on the CPU the bitwise definitions (each fused entry = its composition,
// gemm_strided with dense strides = gemm). Definitions, included by test_backend_ops.c
// alone after backend_ops.h, like kt.h.
#ifndef TESSERA_TESTS_KERNELS_BACKEND_OPS_FUSED_H
#define TESSERA_TESTS_KERNELS_BACKEND_OPS_FUSED_H

#include "backend_ops_cases.h"  // modulate_case

static const char test_objective_loss_optim_entries[] = ",objective_inputs,mse_forward,"
    "mse_backward,euler_update,sumsq,adamw_update,ema_update,";
static void test_objective_loss_optim(void) {
  for (int p = 0; p < 2 * N_PACK; p++) {  // P = 9, then 16 (whole 16-byte vectors of bf16)
    const packing *pk = &packings[p % N_PACK];
    int C = pk->n_clips, L = pk->L, P = p < N_PACK ? 9 : 16;
    size_t n = (size_t)L * P;
    int32_t *cu = d_cu(pk);
    kernels_clip_key keys[8];
    for (int c = 0; c < C; c++)
      keys[c] = (kernels_clip_key){100 + c, 3 * (pk->cu[c + 1] - pk->cu[c]) + 2, c % 2, c % 3};
    void *dkeys = t_raw(keys, sizeof(kernels_clip_key) * C);
    tens t = t_f32(C, 0, 1), x = t_act(n, 0, 1), target = t_act(n, 0, 1);
    // tokens of each store dtype: uint8 pixels, bf16 and f32 latents
    for (int tdt = KERNELS_TOKENS_U8; tdt <= KERNELS_TOKENS_F32; tdt++) {
      size_t tsz = kernels_tokens_size((kernels_tokens)tdt);
      char *u = malloc(n * tsz);
      for (size_t i = 0; i < n; i++) {
        float f = (float)((int)(i * 131 % 256) - 128) / 37.0f;
        if (tdt == KERNELS_TOKENS_U8) ((uint8_t *)u)[i] = (uint8_t)(i * 131 % 256);
        else if (tdt == KERNELS_TOKENS_BF16) ((kernels_bf16 *)u)[i] = kernels_f32_to_bf16(f);
        else ((float *)u)[i] = f;
      }
      void *du = t_raw(u, n * tsz);
      // the length shift and a range of t (train.t_min, t_max)
      kernels_t_dist td = {.logit_mean = 0.0, .logit_std = 1.0, .shift_tokens = 64,
                           .t_min = 0.125, .t_max = 0.875};
      REF->objective_inputs(REF, t.h, x.h, target.h, u, (kernels_tokens)tdt, keys, pk->cu, C, L,
                            P, 42, 7, td);
      CHECK_OK(KB->objective_inputs(KB, t.d, x.d, target.d, du, (kernels_tokens)tdt, dkeys, cu, C,
                                    L, P, 42, 7, td));
      check_out("objective_inputs", "t", &t);
      check_out("objective_inputs", "x_t", &x);
      check_out("objective_inputs", "target", &target);
      KB->free(KB, du);
      free(u);
    }

    tens pred = t_act(n, -3, 3), w = t_f32(C, 0, 0.01), loss = t_f32(1, 0, 1), sse = t_f32(C, 0, 1);
    REF->mse_forward(REF, loss.h, sse.h, pred.h, target.h, w.h, pk->cu, C, L, P);
    CHECK_OK(KB->mse_forward(KB, loss.d, sse.d, pred.d, target.d, w.d, cu, C, L, P));
    check_out("mse_forward", "loss", &loss);
    check_out("mse_forward", "sse", &sse);
    REF->mse_backward(REF, x.h, pred.h, target.h, w.h, pk->cu, C, L, P);
    CHECK_OK(KB->mse_backward(KB, x.d, pred.d, target.d, w.d, cu, C, L, P));
    check_out("mse_backward", "dpred", &x);

    // Euler: state fp32, predictions [act]; guided and not.
    tens xs = t_f32(n, -2, 2), vc = t_act(n, -2, 2), vu = t_act(n, -2, 2);
    REF->euler_update(REF, xs.h, vc.h, vu.h, 3.5f, -0.05f, n);
    CHECK_OK(KB->euler_update(KB, xs.d, vc.d, vu.d, 3.5f, -0.05f, n));
    REF->euler_update(REF, xs.h, vc.h, NULL, 1.0f, -0.125f, n);
    CHECK_OK(KB->euler_update(KB, xs.d, vc.d, NULL, 1.0f, -0.125f, n));
    check_out("euler_update", "x", &xs);

    tens all[] = {t, x, target, pred, w, loss, sse, xs, vc, vu};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
    KB->free(KB, cu), KB->free(KB, dkeys);
  }
  size_t n = 40001;
  tens p = t_f32(n, -1, 1), g = t_f32(n, -1, 1), m = t_f32(n, -0.1, 0.1), v = t_f32(n, 0, 0.01);
  tens ema = t_f32(n, -1, 1), ss = t_f32(2, 0, 1);  // sumsq's double, as two floats' bytes
  double rs, ks;
  REF->sumsq(REF, &rs, g.h, n);
  CHECK_OK(KB->sumsq(KB, &ks, g.d, n));
  ss.h[0] = (float)rs, ss.h[1] = (float)(rs - (float)rs);
  float kk[2] = {(float)ks, (float)(ks - (float)ks)};
  CHECK_OK(KB->to_device(KB, ss.d, kk, sizeof kk));
  check_out("sumsq", "result", &ss);
  REF->adamw_update(REF, p.h, g.h, m.h, v.h, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.7f);
  CHECK_OK(KB->adamw_update(KB, p.d, g.d, m.d, v.d, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.7f));
  check_out("adamw_update", "param", &p);
  check_out("adamw_update", "m", &m);
  check_out("adamw_update", "v", &v);
  REF->ema_update(REF, ema.h, p.h, n, 0.999f);
  CHECK_OK(KB->ema_update(KB, ema.d, p.d, n, 0.999f));
  check_out("ema_update", "ema", &ema);
  tens all[] = {p, g, m, v, ema, ss};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
}

// ---- the fused entries against the reference's (on every backend) ---------------------
// layernorm_modulate forward and backward on packing pk, rows of D, vectors at stride ms.
static void ln_mod_case(const packing *pk, int D, int ms) {
  int C = pk->n_clips, L = pk->L;
  size_t n = (size_t)L * D, nv = (size_t)C * ms, as = act_size();
  int32_t *cu = d_cu(pk);
  tens ada = t_act(nv, -1, 1), dada = t_act(nv, -1, 1), inp = t_act(n, -2, 3);
  tens out = t_act(n, 0, 1), mean = t_f32(L, 0, 1), rstd = t_f32(L, 0, 1);
#define AH(t, k) ((t).h + (size_t)(k) * D)
#define AD(t, k) ((void *)((char *)(t).d + (size_t)(k) * D * as))
  REF->layernorm_modulate_forward(REF, out.h, mean.h, rstd.h, inp.h, AH(ada, 0), AH(ada, 1),
                                  ms, pk->cu, C, L, D, 1e-6f);
  CHECK_OK(KB->layernorm_modulate_forward(KB, out.d, mean.d, rstd.d, inp.d, AD(ada, 0),
                                          AD(ada, 1), ms, cu, C, L, D, 1e-6f));
  check_out("layernorm_modulate_forward", "out", &out);
  check_out("layernorm_modulate_forward", "mean", &mean);
  check_out("layernorm_modulate_forward", "rstd", &rstd);
  tens dout = t_act(n, -1, 1), dinp = t_act(n, -1, 1);  // dinp accumulated
  REF->layernorm_modulate_backward(REF, dinp.h, AH(dada, 0), AH(dada, 1), dout.h, inp.h,
                                   mean.h, rstd.h, AH(ada, 1), ms, pk->cu, C, L, D);
  CHECK_OK(KB->layernorm_modulate_backward(KB, dinp.d, AD(dada, 0), AD(dada, 1), dout.d, inp.d,
                                           mean.d, rstd.d, AD(ada, 1), ms, cu, C, L, D));
  check_out("layernorm_modulate_backward", "dinp", &dinp);
  check_out("layernorm_modulate_backward", "dshift+dscale+stride", &dada);
  {  // run to run: the per-clip sums again on the same inputs, bitwise (fixed orders on a GPU)
    size_t vb = nv * as;
    char *h[2] = {malloc(vb ? vb : 1), malloc(vb ? vb : 1)};
    for (int k = 0; k < 2; k++) {
      CHECK_OK(KB->layernorm_modulate_backward(KB, NULL, AD(dada, 0), AD(dada, 1), dout.d, inp.d,
                                               mean.d, rstd.d, AD(ada, 1), ms, cu, C, L, D));
      CHECK_OK(KB->to_host(KB, h[k], dada.d, vb));
    }
    CHECK(memcmp(h[0], h[1], vb) == 0, "%s layernorm_modulate_backward: dshift/dscale differ run "
          "to run (L %d, D %d)", KB->name, L, D);
    free(h[0]), free(h[1]);
  }
#undef AH
#undef AD
  tens all[] = {ada, dada, inp, out, mean, rstd, dout, dinp};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
  KB->free(KB, cu);
}

// The adaLN entries on many clips of odd lengths (empty ones, 1-token ones, clips longer
// than a device block's rows and spanning several), rows of whole 16-byte vectors or not
// (D = 40 and 264: vectors, 264 = 33 of them, more than a warp's lanes; D = 36: scalars),
// and a stride that breaks the vectors' alignment (6D + 4); rows wide enough that the CUDA
// backward's column sums take more than 48 KiB of shared memory (D = 1032, 8 warps) or
// fewer warps a block (D = 2056: 5).
static const char test_adaln_tiles_entries[] = ",modulate_forward,modulate_backward,"
    "gate_residual_forward,gate_residual_backward,layernorm_modulate_forward,"
    "layernorm_modulate_backward,";
static void test_adaln_tiles(void) {
  static const packing many = {13, 399, {0, 0, 1, 34, 41, 105, 105, 200, 231, 263, 265, 394,
                                         399, 399}};
  int cases[][2] = {{40, 240}, {264, 6 * 264}, {36, 216}, {40, 244}, {1032, 3 * 1032},
                    {2056, 3 * 2056}};
  for (int i = 0; i < 6; i++) {
    if (i < 4) modulate_case(&many, cases[i][0], cases[i][1]);  // the wide ones: one is enough
    ln_mod_case(&many, cases[i][0], cases[i][1]);
  }
}

static const char test_fused_entries[] = ",layernorm_modulate_forward,layernorm_modulate_backward,"
    "qk_norm_rope_forward,qk_norm_rope_backward,linear_gelu_forward,linear_backward_dgelu,"
    "adamw_update_multi,";
// adamw_update_multi's working copy w->d against KB's own updated weights p->d rounded by
// KB->cast: bit for bit inside the segments (AdamW then cast, fused), and outside them the
// values w->h it held before the call.
static void check_work(const tens *w, const tens *p, const kernels_param_segment *segs,
                       int n_segs) {
  size_t n = w->n, as = act_size();
  void *cast_d = NULL;
  CHECK_OK(KB->alloc(KB, &cast_d, n * as));
  CHECK_OK(KB->cast(KB, cast_d, KB->act_dtype, p->d, KERNELS_F32, n));
  unsigned char *got = malloc(n * as), *want = malloc(n * as), *before = malloc(n * as);
  CHECK_OK(KB->to_host(KB, got, w->d, n * as));
  CHECK_OK(KB->to_host(KB, want, cast_d, n * as));
  REF->cast(REF, before, KB->act_dtype, w->h, KERNELS_F32, n);
  long bad_in = 0, bad_gap = 0;
  int s = 0;
  for (size_t i = 0; i < n; i++) {
    while (s < n_segs && (size_t)(segs[s].offset + segs[s].numel) <= i) s++;
    int in = s < n_segs && (size_t)segs[s].offset <= i;
    if (memcmp(got + i * as, (in ? want : before) + i * as, as)) in ? bad_in++ : bad_gap++;
  }
  CHECK(bad_in == 0 && bad_gap == 0, "%s adamw_update_multi.work: %ld updated elements differ "
        "from cast of the weights, %ld elements outside the segments changed", KB->name, bad_in,
        bad_gap);
  free(got), free(want), free(before);
  KB->free(KB, cast_d);
}

static void test_fused(void) {
  for (int p = 0; p < N_PACK; p++)
    for (int Di = 0; Di < 2; Di++) ln_mod_case(&packings[p], Di ? 33 : 64, 6 * (Di ? 33 : 64));
  // Dh 16 to 512: 1 to 8 rotation pairs a lane on the CUDA backend; the last case has
  // positions up to 4095 (the end of the CUDA backend's table of cos and sin).
  int Dhs[] = {16, 64, 128, 256, 512};
  for (int s = 0; s < 5; s++) {
    int L = 70, H = s == 2 || s == 4 ? 1 : 3, Dh = Dhs[s];
    size_t n = (size_t)L * H * Dh, nr = (size_t)L * H;
    int32_t *pos = malloc(sizeof(int32_t) * 3 * L);
    for (int i = 0; i < L; i++) pos[3 * i] = i / 12, pos[3 * i + 1] = (i / 4) % 3, pos[3 * i + 2] = i % 4;
    if (s == 4)
      for (int i = 0; i < L; i++) pos[3 * i] = 4095 - i, pos[3 * i + 2] = 4095 - 2 * i;
    void *dpos = t_raw(pos, sizeof(int32_t) * 3 * L);
    tens q = t_act(n, -2, 2), k = t_act(n, -2, 2), wq = t_f32(Dh, 0.5, 1.5), wk = t_f32(Dh, 0.5, 1.5);
    tens qo = t_act(n, 0, 1), ko = t_act(n, 0, 1), qr = t_f32(nr, 0, 1), kr = t_f32(nr, 0, 1);
    REF->qk_norm_rope_forward(REF, qo.h, ko.h, qr.h, kr.h, q.h, k.h, wq.h, wk.h, pos, L, H, Dh,
                              1e-6f, 10000.0f);
    CHECK_OK(KB->qk_norm_rope_forward(KB, qo.d, ko.d, qr.d, kr.d, q.d, k.d, wq.d, wk.d, dpos, L, H,
                                      Dh, 1e-6f, 10000.0f));
    check_out("qk_norm_rope_forward", "q_out", &qo);
    check_out("qk_norm_rope_forward", "k_out", &ko);
    check_out("qk_norm_rope_forward", "q_rstd", &qr);
    check_out("qk_norm_rope_forward", "k_rstd", &kr);
    tens dq = t_act(n, -1, 1), dk = t_act(n, -1, 1), dqi = t_act(n, 0, 1), dki = t_act(n, 0, 1);
    tens dwq = t_f32(Dh, -1, 1), dwk = t_f32(Dh, -1, 1);  // accumulated
    REF->qk_norm_rope_backward(REF, dqi.h, dki.h, dwq.h, dwk.h, dq.h, dk.h, q.h, k.h, wq.h, wk.h,
                               qr.h, kr.h, pos, L, H, Dh, 10000.0f);
    CHECK_OK(KB->qk_norm_rope_backward(KB, dqi.d, dki.d, dwq.d, dwk.d, dq.d, dk.d, q.d, k.d, wq.d,
                                       wk.d, qr.d, kr.d, dpos, L, H, Dh, 10000.0f));
    check_out("qk_norm_rope_backward", "dq_in", &dqi);
    check_out("qk_norm_rope_backward", "dk_in", &dki);
    check_out("qk_norm_rope_backward", "dq_weight", &dwq);
    check_out("qk_norm_rope_backward", "dk_weight", &dwk);
    tens all[] = {q, k, wq, wk, qo, ko, qr, kr, dq, dk, dqi, dki, dwq, dwk};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
    KB->free(KB, dpos), free(pos);
  }
  if (!strcmp(KB->name, "cuda")) {  // a position past its table of cos and sin is reported
    int32_t pos[6] = {0, 1, 2, 4096, 0, 0};
    void *dpos = t_raw(pos, sizeof pos);
    tens q = t_act(32, -1, 1), w = t_f32(16, 0.5, 1.5), o = t_act(32, 0, 1), r = t_f32(2, 0, 1);
    tsr_status st = KB->qk_norm_rope_forward(KB, o.d, o.d, r.d, r.d, q.d, q.d, w.d, w.d, dpos, 2,
                                             1, 16, 1e-6f, 10000.0f);
    if (!st) st = KB->sync(KB);
    CHECK(st == TSR_EINVAL && strstr(err_msg(), "qk_norm_rope_forward"),
          "cuda qk_norm_rope_forward: position 4096 not reported (%s: %s)", err_name(st),
          err_msg());
    tens all[] = {q, w, o, r};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
    KB->free(KB, dpos);
  }
  // M, K, N: a shape cuBLASLt's GELU epilogues take (N, K multiples of 8), odd ones that
  // need the fallback, and one row; with and without bias.
  int lin[][3] = {{131, 64, 256}, {70, 33, 17}, {1, 8, 24}};
  for (int s = 0; s < 3; s++)
    for (int with_bias = 0; with_bias < 2; with_bias++) {
      int M = lin[s][0], K = lin[s][1], N = lin[s][2];
      tens inp = t_act((size_t)M * K, -1, 1), w = t_act((size_t)K * N, -0.4, 0.4);
      tens bias = t_f32(N, -1, 1), out = t_act((size_t)M * N, 0, 1), pre = t_act((size_t)M * N, 0, 1);
      REF->linear_gelu_forward(REF, out.h, pre.h, inp.h, w.h, with_bias ? bias.h : NULL, M, K, N);
      CHECK_OK(KB->linear_gelu_forward(KB, out.d, pre.d, inp.d, w.d, with_bias ? bias.d : NULL, M,
                                       K, N));
      check_out("linear_gelu_forward", "pre", &pre);
      check_out("linear_gelu_forward", "out", &out);
      // the next layer (M, N) -> (M, K): dpre = gelu'(pre) (dout w2^T)
      tens w2 = t_act((size_t)N * K, -0.4, 0.4), dout = t_act((size_t)M * K, -1, 1);
      tens dpre = t_act((size_t)M * N, 0, 1), dw = t_f32((size_t)N * K, -1, 1), db = t_f32(K, -1, 1);
      REF->linear_backward_dgelu(REF, dpre.h, dw.h, with_bias ? db.h : NULL, dout.h, out.h, w2.h,
                                 pre.h, M, N, K);
      CHECK_OK(KB->linear_backward_dgelu(KB, dpre.d, dw.d, with_bias ? db.d : NULL, dout.d, out.d,
                                         w2.d, pre.d, M, N, K));
      check_out("linear_backward_dgelu", "dpre", &dpre);
      check_out("linear_backward_dgelu", "dw", &dw);
      check_out("linear_backward_dgelu", "dbias", &db);
      tens all[] = {inp, w, bias, out, pre, w2, dout, dpre, dw, db};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
    }
  {  // AdamW over a segment table: gaps, an empty segment, decaying and not; with the
     // working copy written in the same call
    kernels_param_segment segs[] = {{0, 5, 1, 0}, {5, 0, 0, 0}, {8, 40001, 0, 0},
                                    {40009, 9000, 1, 0}, {49100, 3, 1, 0}};
    size_t n = 49110;
    void *dsegs = t_raw(segs, sizeof segs);
    tens p = t_f32(n, -1, 1), g = t_f32(n, -1, 1), m = t_f32(n, -0.1, 0.1), v = t_f32(n, 0, 0.01);
    tens w = t_act(n, -1, 1);  // its values before: the gaps must keep them
    REF->adamw_update_multi(REF, p.h, g.h, m.h, v.h, NULL, n, segs, 5, 1e-3f, 0.9f, 0.95f, 1e-8f,
                            0.1f, 3, 0.7f);
    CHECK_OK(KB->adamw_update_multi(KB, p.d, g.d, m.d, v.d, w.d, n, dsegs, 5, 1e-3f, 0.9f, 0.95f,
                                    1e-8f, 0.1f, 3, 0.7f));
    CHECK_OK(KB->sync(KB));  // a device backend reports a bad table here
    check_work(&w, &p, segs, 5);
    check_out("adamw_update_multi", "param", &p);
    check_out("adamw_update_multi", "m", &m);
    check_out("adamw_update_multi", "v", &v);
    tens all[] = {p, g, m, v, w};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) t_free(&all[i]);
    KB->free(KB, dsegs);
  }
}

// ---- the fused entries ---------------------------------------------------------------
// (a) On the CPU fp32 backend each fused entry is BITWISE its composition (kernels.h,
// "Fused entries"): run both on the same inputs and compare every output bit for bit.
static long bit_mismatches(const float *a, const float *b, size_t n, double *maxdiff) {
  long mism = 0;
  *maxdiff = 0;
  for (size_t i = 0; i < n; i++)
    if (memcmp(&a[i], &b[i], sizeof a[i]) != 0) {
      mism++;
      double d = fabs((double)a[i] - b[i]);
      if (d > *maxdiff || isnan(d)) *maxdiff = isnan(d) ? INFINITY : d;
    }
  return mism;
}
#define SAME_BITS(what, a, b, n)                                                            \
  do {                                                                                      \
    double md_;                                                                             \
    long mm_ = bit_mismatches((a), (b), (n), &md_);                                         \
    CHECK(mm_ == 0, "cpu fused != composition: %s: %ld of %zu elements differ (max %.3g)", \
          (what), mm_, (size_t)(n), md_);                                                   \
  } while (0)

static float *copy_of(const float *x, size_t n) {
  float *y = malloc((n ? n : 1) * sizeof *y);
  memcpy(y, x, n * sizeof *y);
  return y;
}

// The reference's gemm_strided against its gemm on dense copies of the slices: within the
// fp32 tolerance (OpenBLAS may block a strided operand otherwise), bitwise with dense
// strides (kernels.h: it then is gemm), the gaps of c untouched.
static const char strided_vs_dense_entries[] = ",gemm_strided,";
static void strided_vs_dense(void) {
  const kernels_backend *R = REF;
  for (int s = 0; s < N_STRIDED; s++)
    for (int tr = 0; tr < 4; tr++)
      for (int beta_i = 0; beta_i < 2; beta_i++) {
        strided_case q = strided_of(strided_shapes[s], tr);
        float beta = beta_i ? 1.0f : 0.0f;
        size_t nc = (size_t)q.m * q.ldc, mn = (size_t)q.m * q.n;
        float *a = kt_rand((size_t)q.ra * q.lda, -1, 1), *b = kt_rand((size_t)q.rb * q.ldb, -1, 1);
        float *c = kt_rand(nc, -1, 1), *c0 = copy_of(c, nc);
        float *ad = dense_of(a, q.ra, q.ca, q.lda), *bd = dense_of(b, q.rb, q.cb, q.ldb);
        float *cd = dense_of(c, q.m, q.n, q.ldc), *cd2 = copy_of(cd, mn);
        CHECK_OK(R->gemm_strided(R, q.ta, q.tb, q.m, q.n, q.k, 0.5f, a, q.lda, b, q.ldb, beta, c,
                                 q.ldc, KERNELS_F32));
        CHECK_OK(R->gemm(R, q.ta, q.tb, q.m, q.n, q.k, 0.5f, ad, bd, beta, cd));
        float *got = dense_of(c, q.m, q.n, q.ldc);
        double e = kt_relerr_ff(got, cd, mn, 1e-30);
        CHECK(e <= 0x1p-14, "cpu gemm_strided vs gemm of the dense slices (m %d n %d k %d tr %d):"
              " error %.3g", q.m, q.n, q.k, tr, e);
        for (int i = 0; i < q.m; i++)
          for (int j = q.n; j < q.ldc; j++)
            CHECK(c[(size_t)i * q.ldc + j] == c0[(size_t)i * q.ldc + j],
                  "cpu gemm_strided wrote the gap of c at row %d column %d", i, j);
        int lda = q.ta ? q.m : q.k, ldb = q.tb ? q.k : q.n;  // dense strides: gemm itself
        CHECK_OK(R->gemm_strided(R, q.ta, q.tb, q.m, q.n, q.k, 0.5f, ad, lda > 0 ? lda : 1, bd,
                                 ldb > 0 ? ldb : 1, beta, cd2, q.n > 0 ? q.n : 1, KERNELS_F32));
        double md;
        long mm = bit_mismatches(cd2, cd, mn, &md);
        CHECK(mm == 0, "cpu gemm_strided with dense strides != gemm: %ld of %zu elements differ "
              "(max %.3g)", mm, mn, md);
        float *all[] = {a, b, c, c0, ad, bd, cd, cd2, got};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
      }
}

// The reference's gemm_batched against its problems one by one: linear_forward (alpha 1,
// beta 0, no transposes, a bias) and gemm_strided on dense strides (no bias), bitwise
// (kernels.h: that is its definition on the CPU), the gaps of c untouched.
static const char batched_vs_loop_entries[] = ",gemm_batched,";
static void batched_vs_loop(void) {
  const kernels_backend *R = REF;
  const int shapes[][3] = {{70, 64, 64}, {37, 53, 19}, {33, 17, 70}};
  for (int s = 0; s < 3; s++)
    for (int tr = 0; tr < 4; tr++)
      for (int v = 0; v < 3; v++) {  // v 0: the linear (bias), 1: beta 0, 2: beta 1
        const int batch = 3, m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        const int ta = v == 0 ? 0 : tr & 1, tb = v == 0 ? 0 : tr >> 1;
        const float beta = v == 2 ? 1.0f : 0.0f, alpha = v == 0 ? 1.0f : 0.5f;
        const int64_t sb = (int64_t)k * n + 16, sc = (int64_t)m * n + 8, sbias = n + 16;
        size_t nb = 2 * (size_t)sb + (size_t)k * n, nc = 2 * (size_t)sc + (size_t)m * n;
        float *a = kt_rand((size_t)m * k, -1, 1), *b = kt_rand(nb, -1, 1);
        float *bias = kt_rand(2 * (size_t)sbias + n, -1, 1);
        float *c = kt_rand(nc, -1, 1), *c1 = copy_of(c, nc);
        CHECK_OK(R->gemm_batched(R, ta, tb, m, n, k, alpha, a, 0, b, sb, beta, c, sc, KERNELS_F32,
                                 v == 0 ? bias : NULL, sbias, batch));
        for (int i = 0; i < batch; i++) {
          float *ci = c1 + (size_t)i * sc;
          const float *bi = b + (size_t)i * sb;
          if (v == 0)
            CHECK_OK(R->linear_forward(R, ci, a, bi, bias + (size_t)i * sbias, m, k, n));
          else
            CHECK_OK(R->gemm_strided(R, ta, tb, m, n, k, alpha, a, ta ? m : k, bi, tb ? k : n,
                                     beta, ci, n, KERNELS_F32));
        }
        double md;
        long mm = bit_mismatches(c, c1, nc, &md);
        CHECK(mm == 0, "cpu gemm_batched != its problems one by one (m %d n %d k %d tr %d v %d): "
              "%ld of %zu elements differ (max %.3g)", m, n, k, tr, v, mm, nc, md);
        free(a), free(b), free(bias), free(c), free(c1);
      }
}

static const char fused_vs_composition_entries[] = ",layernorm_modulate_forward,"
    "layernorm_modulate_backward,qk_norm_rope_forward,qk_norm_rope_backward,linear_gelu_forward,"
    "linear_backward_dgelu,adamw_update_multi,";
static void fused_vs_composition(void) {
  const kernels_backend *R = REF;
  for (int p = 0; p < N_PACK; p++)
    for (int Di = 0; Di < 2; Di++) {  // LayerNorm + modulate
      const packing *pk = &packings[p];
      int C = pk->n_clips, L = pk->L, D = Di ? 33 : 64, ms = 6 * D;
      size_t n = (size_t)L * D, nv = (size_t)C * ms;
      float *inp = kt_rand(n, -2, 3), *ada = kt_rand(nv, -1, 1), *dout = kt_rand(n, -1, 1);
      float *ln = kt_zeros(n), *o1 = kt_zeros(n), *o2 = kt_zeros(n);
      float *mu1 = kt_zeros(L), *rs1 = kt_zeros(L), *mu2 = kt_zeros(L), *rs2 = kt_zeros(L);
      float *sh = ada, *sc = ada + D;
      CHECK_OK(R->layernorm_forward(R, ln, mu1, rs1, inp, L, D, 1e-6f));
      CHECK_OK(R->modulate_forward(R, o1, ln, sh, sc, ms, pk->cu, C, L, D));
      CHECK_OK(R->layernorm_modulate_forward(R, o2, mu2, rs2, inp, sh, sc, ms, pk->cu, C, L, D, 1e-6f));
      SAME_BITS("layernorm_modulate_forward.out", o1, o2, n);
      SAME_BITS("layernorm_modulate_forward.mean", mu1, mu2, L);
      SAME_BITS("layernorm_modulate_forward.rstd", rs1, rs2, L);
      float *d1 = kt_rand(n, -1, 1), *d2 = copy_of(d1, n), *t1 = kt_zeros(n), *t2 = kt_zeros(n);
      float *g1 = kt_rand(nv, -1, 1), *g2 = copy_of(g1, nv);  // the stride's other values stay
      CHECK_OK(R->modulate_backward(R, t1, g1, g1 + D, dout, ln, sc, ms, pk->cu, C, L, D));
      CHECK_OK(R->layernorm_backward(R, t2, t1, inp, mu1, rs1, L, D));
      CHECK_OK(R->axpy_act(R, d1, 1.0f, t2, n));
      CHECK_OK(R->layernorm_modulate_backward(R, d2, g2, g2 + D, dout, inp, mu1, rs1, sc, ms,
                                              pk->cu, C, L, D));
      SAME_BITS("layernorm_modulate_backward.dinp", d1, d2, n);
      SAME_BITS("layernorm_modulate_backward.dshift+dscale+stride", g1, g2, nv);
      float *all[] = {inp, ada, dout, ln, o1, o2, mu1, rs1, mu2, rs2, d1, d2, t1, t2, g1, g2};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    }
  int Dhs[] = {16, 64, 128};
  for (int s = 0; s < 3; s++) {  // QK-norm + RoPE
    int L = 70, H = s == 2 ? 1 : 3, Dh = Dhs[s], R_ = L * H;
    size_t n = (size_t)L * H * Dh;
    int32_t *pos = malloc(sizeof(int32_t) * 3 * L);
    for (int i = 0; i < L; i++) pos[3 * i] = i / 12, pos[3 * i + 1] = (i / 4) % 3, pos[3 * i + 2] = i % 4;
    float *x[2], *w[2], *o1[2], *o2[2], *r1[2], *r2[2], *dx[2], *di1[2], *di2[2], *dw1[2], *dw2[2];
    for (int t = 0; t < 2; t++) {
      x[t] = kt_rand(n, -2, 2), w[t] = kt_rand(Dh, 0.5, 1.5), dx[t] = kt_rand(n, -1, 1);
      o1[t] = kt_zeros(n), o2[t] = kt_zeros(n), r1[t] = kt_zeros(R_), r2[t] = kt_zeros(R_);
      di1[t] = kt_zeros(n), di2[t] = kt_zeros(n), dw1[t] = kt_rand(Dh, -1, 1);
      dw2[t] = copy_of(dw1[t], Dh);
      CHECK_OK(R->rmsnorm_forward(R, o1[t], r1[t], x[t], w[t], R_, Dh, 1e-6f));
      CHECK_OK(R->rope_forward(R, o1[t], o1[t], pos, L, H, Dh, 10000.0f));
      float *tmp = kt_zeros(n);
      CHECK_OK(R->rope_backward(R, tmp, dx[t], pos, L, H, Dh, 10000.0f));
      CHECK_OK(R->rmsnorm_backward(R, di1[t], dw1[t], tmp, x[t], w[t], r1[t], R_, Dh));
      free(tmp);
    }
    CHECK_OK(R->qk_norm_rope_forward(R, o2[0], o2[1], r2[0], r2[1], x[0], x[1], w[0], w[1], pos,
                                     L, H, Dh, 1e-6f, 10000.0f));
    CHECK_OK(R->qk_norm_rope_backward(R, di2[0], di2[1], dw2[0], dw2[1], dx[0], dx[1], x[0], x[1],
                                      w[0], w[1], r1[0], r1[1], pos, L, H, Dh, 10000.0f));
    for (int t = 0; t < 2; t++) {
      char what[64];
      snprintf(what, sizeof what, "qk_norm_rope Dh %d %c: out", Dh, "qk"[t]);
      SAME_BITS(what, o1[t], o2[t], n);
      snprintf(what, sizeof what, "qk_norm_rope Dh %d %c: rstd", Dh, "qk"[t]);
      SAME_BITS(what, r1[t], r2[t], R_);
      snprintf(what, sizeof what, "qk_norm_rope Dh %d %c: dinp", Dh, "qk"[t]);
      SAME_BITS(what, di1[t], di2[t], n);
      snprintf(what, sizeof what, "qk_norm_rope Dh %d %c: dweight", Dh, "qk"[t]);
      SAME_BITS(what, dw1[t], dw2[t], Dh);
      float *all[] = {x[t], w[t], o1[t], o2[t], r1[t], r2[t], dx[t], di1[t], di2[t], dw1[t], dw2[t]};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    }
    free(pos);
  }
  int lin[][3] = {{1, 3, 5}, {131, 64, 256}, {70, 33, 17}};
  for (int s = 0; s < 3; s++) {  // linear + GELU, and the backward through GELU
    int M = lin[s][0], K = lin[s][1], N = lin[s][2];
    float *inp = kt_rand((size_t)M * K, -1, 1), *w = kt_rand((size_t)K * N, -0.5, 0.5);
    float *bias = kt_rand(N, -1, 1), *pre1 = kt_zeros((size_t)M * N), *pre2 = kt_zeros((size_t)M * N);
    float *o1 = kt_zeros((size_t)M * N), *o2 = kt_zeros((size_t)M * N);
    CHECK_OK(R->linear_forward(R, pre1, inp, w, bias, M, K, N));
    CHECK_OK(R->gelu_forward(R, o1, pre1, (size_t)M * N));
    CHECK_OK(R->linear_gelu_forward(R, o2, pre2, inp, w, bias, M, K, N));
    SAME_BITS("linear_gelu_forward.pre", pre1, pre2, (size_t)M * N);
    SAME_BITS("linear_gelu_forward.out", o1, o2, (size_t)M * N);
    // the layer after GELU: inp2 = GELU(pre) (M, N) -> (M, K2)
    int K2 = 7 + s;
    float *w2 = kt_rand((size_t)N * K2, -0.5, 0.5), *dout = kt_rand((size_t)M * K2, -1, 1);
    float *dw1 = kt_rand((size_t)N * K2, -1, 1), *dw2 = copy_of(dw1, (size_t)N * K2);
    float *db1 = kt_rand(K2, -1, 1), *db2 = copy_of(db1, K2);
    float *tmp = kt_zeros((size_t)M * N), *dp1 = kt_zeros((size_t)M * N), *dp2 = kt_zeros((size_t)M * N);
    CHECK_OK(R->linear_backward(R, tmp, dw1, db1, dout, o1, w2, M, N, K2));
    CHECK_OK(R->gelu_backward(R, dp1, tmp, pre1, (size_t)M * N));
    CHECK_OK(R->linear_backward_dgelu(R, dp2, dw2, db2, dout, o1, w2, pre1, M, N, K2));
    SAME_BITS("linear_backward_dgelu.dpre", dp1, dp2, (size_t)M * N);
    SAME_BITS("linear_backward_dgelu.dw", dw1, dw2, (size_t)N * K2);
    SAME_BITS("linear_backward_dgelu.dbias", db1, db2, K2);
    float *all[] = {inp, w, bias, pre1, pre2, o1, o2, w2, dout, dw1, dw2, db1, db2, tmp, dp1, dp2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
  }
  {  // AdamW over segments (with gaps, decaying and not) == one adamw_update per segment
    kernels_param_segment segs[] = {{0, 5, 1, 0}, {5, 0, 0, 0}, {8, 40001, 0, 0},
                                    {40009, 9000, 1, 0}, {49100, 3, 1, 0}};
    int ns = 5;
    size_t n = 49110;
    float *p1 = kt_rand(n, -1, 1), *g = kt_rand(n, -1, 1), *m1 = kt_rand(n, -0.1, 0.1);
    float *v1 = kt_rand(n, 0, 0.01);
    float *p2 = copy_of(p1, n), *m2 = copy_of(m1, n), *v2 = copy_of(v1, n);
    for (int st = 1; st <= 3; st++) {
      for (int i = 0; i < ns; i++) {
        size_t o = (size_t)segs[i].offset;
        CHECK_OK(R->adamw_update(R, p1 + o, g + o, m1 + o, v1 + o, (size_t)segs[i].numel, 1e-3f,
                                 0.9f, 0.95f, 1e-8f, segs[i].decay ? 0.1f : 0.0f, st, 0.7f));
      }
      CHECK_OK(R->adamw_update_multi(R, p2, g, m2, v2, NULL, n, segs, ns, 1e-3f, 0.9f, 0.95f,
                                     1e-8f, 0.1f, st, 0.7f));
    }
    SAME_BITS("adamw_update_multi.param", p1, p2, n);
    SAME_BITS("adamw_update_multi.m", m1, m2, n);
    SAME_BITS("adamw_update_multi.v", v1, v2, n);
    kernels_param_segment bad[] = {{0, 10, 1, 0}, {5, 10, 0, 0}};  // overlapping: refused
    CHECK(R->adamw_update_multi(R, p2, g, m2, v2, NULL, n, bad, 2, 1e-3f, 0.9f, 0.95f, 1e-8f,
                                0.1f, 4, 1.0f) == TSR_EINVAL, "overlapping segments accepted");
    CHECK(R->adamw_update_multi(R, p2, g, m2, v2, p2, n, segs, ns, 1e-3f, 0.9f, 0.95f, 1e-8f,
                                0.1f, 4, 1.0f) == TSR_EINVAL, "work = param accepted");
    float *all[] = {p1, g, m1, v1, p2, m2, v2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
  }
}

#endif
