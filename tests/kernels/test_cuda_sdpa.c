// tests/kernels/test_cuda_sdpa.c — the host-side rules of the CUDA backend's cuDNN attention
// path (kernels/cuda/sdpa.h), on any machine: the environment switches (the atomic backward
// by default), which shapes go to cuDNN and the error that names a shape cuDNN cannot take,
// the plan-cache key and its rounding (sequences sized by the longest clip, not by the
// packed total: 64 clips of 1,024 tokens plan sequences of 1,024), and the ragged
// description of a packed batch against its definition (valid cu_seqlens give exactly the
// clips; any cu_seqlens and any clip longer than its bound stay inside the tensors and the
// plan's sequence dimension).
#include <string.h>

#include "check.h"
#include "kernels/cuda/sdpa.h"

static const kcu_sdpa_device H100 = {90, 91900};

static void test_switches(void) {
  kcu_attn_mode m = KCU_ATTN_OWN;
  CHECK_OK(kcu_attn_mode_parse(NULL, &m));
  CHECK(m == KCU_ATTN_AUTO, "unset: auto");
  m = KCU_ATTN_OWN;
  CHECK_OK(kcu_attn_mode_parse("", &m));
  CHECK(m == KCU_ATTN_AUTO, "empty: auto");
  CHECK_OK(kcu_attn_mode_parse("auto", &m));
  CHECK(m == KCU_ATTN_AUTO, "auto");
  CHECK_OK(kcu_attn_mode_parse("cudnn", &m));
  CHECK(m == KCU_ATTN_CUDNN, "cudnn");
  CHECK_OK(kcu_attn_mode_parse("own", &m));
  CHECK(m == KCU_ATTN_OWN, "own");
  CHECK(kcu_attn_mode_parse("CUDNN", &m) == TSR_EINVAL, "values are lower case");
  CHECK(strstr(err_msg(), "TESSERA_CUDA_ATTENTION='CUDNN'") != NULL, "the error names the variable: %s",
        err_msg());
  CHECK(kcu_attn_mode_parse("flash", &m) == TSR_EINVAL, "unknown value");

  int det = 1;
  CHECK_OK(kcu_sdpa_deterministic_parse(NULL, &det));
  CHECK(det == 0, "unset: the atomic backward (the fast one)");
  det = 1;
  CHECK_OK(kcu_sdpa_deterministic_parse("", &det));
  CHECK(det == 0, "empty: the atomic backward");
  CHECK_OK(kcu_sdpa_deterministic_parse("1", &det));
  CHECK(det == 1, "1");
  CHECK_OK(kcu_sdpa_deterministic_parse("0", &det));
  CHECK(det == 0, "0");
  CHECK(kcu_sdpa_deterministic_parse("yes", &det) == TSR_EINVAL, "only 0 or 1");
  CHECK(strstr(err_msg(), "TESSERA_CUDA_ATTENTION_DETERMINISTIC") != NULL, "names the variable: %s",
        err_msg());
}

// A call whose longest clips are the whole token counts (the bound L, always correct).
static int fits(kcu_sdpa_kind kind, int C, int Lq, int Lk, int H, int Dh, const kcu_sdpa_device *d,
                char *why, size_t n) {
  kcu_sdpa_shape s = {kind, C, Lq, Lk, Lq, Lk, H, Dh};
  return kcu_sdpa_fits(&s, d, why, n);
}

static void test_fits(void) {
  char why[200];
  // The head dims of the configs (tiny 16, dit-s/b 64, dit-1b 128) and Hopper's limit 256.
  int dhs[] = {8, 16, 64, 128, 256};
  for (int i = 0; i < 5; i++)
    for (int k = 0; k < KCU_SDPA_KINDS; k++)
      CHECK(fits((kcu_sdpa_kind)k, 6, 131, 70, 2, dhs[i], &H100, why, sizeof why), "Dh %d %s on sm_90: %s",
            dhs[i], kcu_sdpa_kind_name((kcu_sdpa_kind)k), why);
  CHECK(!fits(KCU_SDPA_FWD, 6, 131, 131, 2, 12, &H100, why, sizeof why), "Dh 12 is no multiple of 8");
  CHECK(strstr(why, "head dimension 12") != NULL, "reason names the head dim: %s", why);
  CHECK(!fits(KCU_SDPA_BWD, 6, 131, 131, 2, 264, &H100, why, sizeof why), "Dh 264 > 256");
  CHECK(!fits(KCU_SDPA_BWD, 6, 131, 131, 2, 0, &H100, why, sizeof why), "Dh 0");
  const kcu_sdpa_device b200 = {100, 91900}, a100 = {80, 91900}, rtx = {120, 91900}, old = {90, 91001};
  CHECK(fits(KCU_SDPA_BWD, 6, 131, 131, 2, 128, &b200, why, sizeof why), "sm_100 Dh 128: %s", why);
  CHECK(!fits(KCU_SDPA_BWD, 6, 131, 131, 2, 256, &b200, why, sizeof why), "sm_100 Dh 256");
  CHECK(!fits(KCU_SDPA_FWD, 6, 131, 131, 2, 64, &a100, why, sizeof why), "sm_80");
  CHECK(strstr(why, "sm_80") != NULL, "reason names the GPU: %s", why);
  CHECK(!fits(KCU_SDPA_FWD, 6, 131, 131, 2, 64, &rtx, why, sizeof why), "sm_120");
  CHECK(!fits(KCU_SDPA_FWD, 6, 131, 131, 2, 64, &old, why, sizeof why), "cuDNN 9.10.1");
  CHECK(strstr(why, "91001") != NULL, "reason names the version: %s", why);
  CHECK(!fits(KCU_SDPA_FWD, 0, 0, 0, 2, 64, &H100, why, sizeof why), "no clips");
  CHECK(!fits(KCU_SDPA_FWD, 1, 5, 5, 0, 64, &H100, why, sizeof why), "no heads");
  CHECK(!fits(KCU_SDPA_PARTIAL_FWD, 1, 5, (1 << 30) + 1, 2, 64, &H100, why, sizeof why), "Lk > 2^30");
  CHECK(fits(KCU_SDPA_PARTIAL_FWD, 3, 5, 0, 2, 64, &H100, why, sizeof why), "an empty K/V block fits");
  // The plan's padded tensors: b x H x longest clip x Dh under 2^31 elements, b <= 32,768.
  kcu_sdpa_shape s = {KCU_SDPA_BWD, 64, 1024, 1024, 65536, 65536, 12, 64};
  CHECK(kcu_sdpa_fits(&s, &H100, why, sizeof why), "64 clips of 1,024 (dit-b): %s", why);
  s.max_q = s.max_k = 65536;  // planned by the total: 64 x 12 x 65,536 x 64 = 3.2e9 elements
  CHECK(!kcu_sdpa_fits(&s, &H100, why, sizeof why), "64 sequences of 65,536 tokens");
  CHECK(strstr(why, "2^31") != NULL, "reason names the limit: %s", why);
  kcu_sdpa_shape one = {KCU_SDPA_FWD, 1, 65536, 65536, 65536, 65536, 12, 64};
  CHECK(kcu_sdpa_fits(&one, &H100, why, sizeof why), "one clip of 65,536: %s", why);
  kcu_sdpa_shape many = {KCU_SDPA_FWD, 32769, 64, 64, 32769 * 64, 32769 * 64, 2, 64};
  CHECK(!kcu_sdpa_fits(&many, &H100, why, sizeof why), "32,769 clips: a batch past 32,768");
  many.n_clips = 32768, many.Lq = many.Lk = 32768 * 64;
  CHECK(kcu_sdpa_fits(&many, &H100, why, sizeof why), "32,768 clips of 64: %s", why);
  kcu_sdpa_shape neg = {KCU_SDPA_FWD, 2, -1, 5, 10, 10, 2, 64};
  CHECK(!kcu_sdpa_fits(&neg, &H100, why, sizeof why), "negative bound");
}

static void test_choose(void) {
  kcu_sdpa_shape ok = {KCU_SDPA_BWD, 6, 65, 65, 131, 131, 2, 64};
  kcu_sdpa_shape bad = {KCU_SDPA_FWD, 6, 65, 65, 131, 131, 2, 12};
  int use = -1;
  CHECK_OK(kcu_sdpa_choose(KCU_ATTN_OWN, "attention_backward", &ok, &H100, &use));
  CHECK(use == 0, "own: never cuDNN");
  CHECK_OK(kcu_sdpa_choose(KCU_ATTN_AUTO, "attention_backward", &ok, &H100, &use));
  CHECK(use == 1, "auto: cuDNN where it fits");
  CHECK_OK(kcu_sdpa_choose(KCU_ATTN_AUTO, "attention_forward", &bad, &H100, &use));
  CHECK(use == 0, "auto: own kernels where it does not");
  CHECK_OK(kcu_sdpa_choose(KCU_ATTN_CUDNN, "attention_backward", &ok, &H100, &use));
  CHECK(use == 1, "cudnn: cuDNN");
  use = -1;
  CHECK(kcu_sdpa_choose(KCU_ATTN_CUDNN, "attention_forward", &bad, &H100, &use) == TSR_EINVAL,
        "cudnn and a shape cuDNN cannot take: an error");
  CHECK(use == 0, "no path on error");
  const char *m = err_msg();
  CHECK(strstr(m, "attention_forward: TESSERA_CUDA_ATTENTION=cudnn") != NULL, "entry and switch: %s", m);
  CHECK(strstr(m, "6 clips, 131 x 131 tokens (clips of at most 65 x 65), 2 heads of 12") != NULL,
        "the shape: %s", m);
  CHECK(strstr(m, "head dimension 12") != NULL, "the reason: %s", m);
}

static void test_key(void) {
  CHECK(kcu_sdpa_bucket(0, 64) == 64 && kcu_sdpa_bucket(64, 64) == 64 && kcu_sdpa_bucket(65, 64) == 128,
        "token buckets");
  CHECK(kcu_sdpa_bucket(131, 64) == 256 && kcu_sdpa_bucket(65536, 64) == 65536 &&
            kcu_sdpa_bucket(65537, 64) == 131072,
        "token buckets, large");
  CHECK(kcu_sdpa_bucket(1, 1) == 1 && kcu_sdpa_bucket(5, 1) == 8 && kcu_sdpa_bucket(0, 1) == 1, "clip buckets");
  // test_backend_ops's 131-token packing: longest clip 65
  kcu_sdpa_shape a = {KCU_SDPA_BWD, 6, 65, 65, 131, 131, 2, 64};
  kcu_sdpa_shape b = {KCU_SDPA_BWD, 5, 100, 100, 200, 200, 2, 64};
  kcu_sdpa_key ka = kcu_sdpa_key_of(&a, 1), kb = kcu_sdpa_key_of(&b, 1);
  CHECK(ka.b == 8 && ka.sq == 128 && ka.skv == 128 && ka.h == 2 && ka.d == 64 && ka.deterministic == 1,
        "key of 6 clips of at most 65, 131 tokens: b %d sq %d skv %d det %d", ka.b, ka.sq, ka.skv,
        ka.deterministic);
  CHECK(kcu_sdpa_key_eq(&ka, &kb), "one plan for microbatches of the same rounded clip count and "
        "longest clip");
  kcu_sdpa_shape c = a;
  c.max_q = c.max_k = 129;
  kcu_sdpa_key kc = kcu_sdpa_key_of(&c, 1);
  CHECK(!kcu_sdpa_key_eq(&ka, &kc) && kc.sq == 256, "a longest clip in another range: another plan");
  c.max_q = c.max_k = 1000;  // a bound past the tokens says no more than the tokens
  kc = kcu_sdpa_key_of(&c, 1);
  CHECK(kc.sq == 256 && kc.skv == 256, "bound 1000 of 131 tokens: sq %d skv %d", kc.sq, kc.skv);
  c.max_q = c.max_k = 0;  // only empty clips (no call reaches cuDNN so): the smallest plan
  kc = kcu_sdpa_key_of(&c, 1);
  CHECK(kc.sq == 64 && kc.skv == 64, "bound 0: sq %d skv %d", kc.sq, kc.skv);
  // dit-b, 64 clips of 1,024 tokens (65,536 in all), 12 heads of 64: sequences of 1,024, so
  // cuDNN's Q (b x H x sq x Dh) has 64 x 12 x 1,024 x 64 = 50,331,648 elements (< 2^31), not
  // the 3.2e9 that sequences of the packed total would declare.
  kcu_sdpa_shape d64 = {KCU_SDPA_BWD, 64, 1024, 1024, 65536, 65536, 12, 64};
  kcu_sdpa_key k64 = kcu_sdpa_key_of(&d64, 0);
  int64_t q_elems = (int64_t)k64.b * k64.h * k64.sq * k64.d;
  CHECK(k64.b == 64 && k64.sq == 1024 && k64.skv == 1024 && k64.deterministic == 0,
        "b-64x1024: b %d sq %d skv %d", k64.b, k64.sq, k64.skv);
  CHECK(q_elems == 64LL * 12 * 1024 * 64 && q_elems < ((int64_t)1 << 31), "b-64x1024: Q of %lld elements",
        (long long)q_elems);
  // ... and the deterministic backward's dense dS, b x H x sq x skv bf16: 1.6 GB, not 6.6 TB
  kcu_sdpa_key k64d = kcu_sdpa_key_of(&d64, 1);
  CHECK((int64_t)k64d.b * k64d.h * k64d.sq * k64d.skv * 2 == 1610612736LL, "b-64x1024: dS of %lld bytes",
        (long long)k64d.b * k64d.h * k64d.sq * k64d.skv * 2);
  kcu_sdpa_key kn = kcu_sdpa_key_of(&a, 0);
  CHECK(!kcu_sdpa_key_eq(&ka, &kn), "determinism is part of the backward's key");
  kcu_sdpa_shape f = a;
  f.kind = KCU_SDPA_FWD;
  kcu_sdpa_key kf1 = kcu_sdpa_key_of(&f, 1), kf0 = kcu_sdpa_key_of(&f, 0);
  CHECK(kcu_sdpa_key_eq(&kf1, &kf0) && kf1.deterministic == 0, "forwards have one plan either way");
  CHECK(!kcu_sdpa_key_eq(&kf1, &ka), "kind is part of the key");
  kcu_sdpa_shape h = a, d = a, p = a;
  h.H = 3, d.Dh = 128, p.kind = KCU_SDPA_PARTIAL_FWD, p.max_q = 129, p.Lk = 70, p.max_k = 52;
  kcu_sdpa_key kh = kcu_sdpa_key_of(&h, 1), kd = kcu_sdpa_key_of(&d, 1), kp = kcu_sdpa_key_of(&p, 1);
  CHECK(!kcu_sdpa_key_eq(&kh, &ka) && !kcu_sdpa_key_eq(&kd, &ka), "heads and head dim are part of the key");
  CHECK(kp.sq == 256 && kp.skv == 64, "partial: own rounding for queries and keys: sq %d skv %d", kp.sq,
        kp.skv);
  // the partial backward: its own plans (another graph than the partial forward's, another
  // kind than the whole backward's), with the backward's determinism
  kcu_sdpa_shape pb = p;
  pb.kind = KCU_SDPA_PARTIAL_BWD;
  kcu_sdpa_key kpb1 = kcu_sdpa_key_of(&pb, 1), kpb0 = kcu_sdpa_key_of(&pb, 0);
  CHECK(kpb1.deterministic == 1 && kpb0.deterministic == 0 && !kcu_sdpa_key_eq(&kpb1, &kpb0),
        "determinism is part of the partial backward's key");
  CHECK(!kcu_sdpa_key_eq(&kpb1, &kp) && kpb1.sq == 256 && kpb1.skv == 64,
        "partial backward: its own key, sq %d skv %d", kpb1.sq, kpb1.skv);
  CHECK(kcu_sdpa_backward_kind(KCU_SDPA_BWD) && kcu_sdpa_backward_kind(KCU_SDPA_PARTIAL_BWD) &&
            kcu_sdpa_backward_kind(KCU_SDPA_MASKED_BWD) &&
            !kcu_sdpa_backward_kind(KCU_SDPA_FWD) && !kcu_sdpa_backward_kind(KCU_SDPA_PARTIAL_FWD),
        "the backward graph's kinds");
  CHECK(!strcmp(kcu_sdpa_kind_name(KCU_SDPA_PARTIAL_BWD), "partial backward"), "kind name %s",
        kcu_sdpa_kind_name(KCU_SDPA_PARTIAL_BWD));
}

// The definition: sequence c < n_clips is rows [cu[c], cu[c+1]), later ones are empty at L
// (max_len: the longest clip, a valid bound).
static void check_packing(const int32_t *cu, int n, int L, int max_len) {
  int b = (int)kcu_sdpa_bucket(n, 1);
  for (int c = 0; c < b + 2; c++) {
    int32_t start = -1, len = -1;
    kcu_sdpa_ragged(cu, n, L, max_len, c, &start, &len);
    if (c < n) CHECK(start == cu[c] && len == cu[c + 1] - cu[c], "clip %d of %d: [%d, +%d)", c, n, start, len);
    else CHECK(start == L && len == 0, "padding sequence %d: [%d, +%d)", c, start, len);
  }
}

static void test_ragged(void) {
  const int32_t p1[] = {0, 0, 1, 1, 66, 66, 131}, p2[] = {0, 17, 17, 69, 70}, p3[] = {0, 65536};
  check_packing(p1, 6, 131, 65);
  check_packing(p2, 4, 70, 52);
  check_packing(p3, 1, 65536, 65536);
  // A clip longer than the bound (the entries' device check reports it): cut to the bound,
  // so cuDNN never sees a sequence longer than the plan's.
  int32_t start, len;
  kcu_sdpa_ragged(p1, 6, 131, 40, 3, &start, &len);
  CHECK(start == 1 && len == 40, "clip of 65, bound 40: [%d, +%d)", start, len);
  kcu_sdpa_ragged(p1, 6, 131, -3, 3, &start, &len);
  CHECK(start == 1 && len == 0, "negative bound: [%d, +%d)", start, len);
  // Bad cu_seqlens (the device check reports them; here only: nothing outside [0, L]).
  uint64_t r = 12345;
  for (int t = 0; t < 2000; t++) {
    int n = 1 + t % 7, L = t % 50;
    int32_t cu[8];
    for (int c = 0; c <= n; c++) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      cu[c] = (int32_t)((r >> 33) % (L + 11)) - 5;  // in [-5, L + 5]
    }
    int bound = t % 13;
    for (int c = 0; c < 8; c++) {
      int32_t start, len;
      kcu_sdpa_ragged(cu, n, L, bound, c, &start, &len);
      CHECK(start >= 0 && len >= 0 && start + len <= L && len <= bound,
            "bad cu case %d seq %d: [%d, +%d) of %d, bound %d", t, c, start, len, L, bound);
    }
  }
}

int main(void) {
  test_switches();
  test_fits();
  test_choose();
  test_key();
  test_ragged();
  return check_done();
}
