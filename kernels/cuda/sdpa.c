// kernels/cuda/sdpa.c — the host-side rules of the cuDNN attention path (sdpa.h).
#include "kernels/cuda/sdpa.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

tsr_status kcu_attn_mode_parse(const char *value, kcu_attn_mode *mode) {
  if (!value || !*value || !strcmp(value, "auto")) *mode = KCU_ATTN_AUTO;
  else if (!strcmp(value, "cudnn")) *mode = KCU_ATTN_CUDNN;
  else if (!strcmp(value, "own")) *mode = KCU_ATTN_OWN;
  else
    return err_set(TSR_EINVAL, "TESSERA_CUDA_ATTENTION='%s': use auto (cuDNN where it fits), "
                   "cudnn (cuDNN or an error) or own (the backend's own kernels)", value);
  return TSR_OK;
}

tsr_status kcu_sdpa_deterministic_parse(const char *value, int *deterministic) {
  if (!value || !*value || !strcmp(value, "0")) *deterministic = 0;
  else if (!strcmp(value, "1")) *deterministic = 1;
  else
    return err_set(TSR_EINVAL, "TESSERA_CUDA_ATTENTION_DETERMINISTIC='%s': use 0 (cuDNN's "
                   "atomic dQ backward, fast; the default) or 1 (bitwise reproducible backward, "
                   "whose workspace limits it to small microbatches)", value);
  return TSR_OK;
}

const char *kcu_sdpa_kind_name(kcu_sdpa_kind kind) {
  switch (kind) {
    case KCU_SDPA_FWD: return "forward";
    case KCU_SDPA_BWD: return "backward";
    case KCU_SDPA_PARTIAL_FWD: return "partial forward";
    case KCU_SDPA_PARTIAL_BWD: return "partial backward";
    case KCU_SDPA_MASKED_BWD: return "masked backward";
    default: return "?";
  }
}

// Writes the reason into why[0, n) and returns 0.
__attribute__((format(printf, 3, 4))) static int no(char *why, size_t n, const char *fmt, ...) {
  if (why && n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
  }
  return 0;
}

int kcu_sdpa_fits(const kcu_sdpa_shape *s, const kcu_sdpa_device *dev, char *why, size_t n) {
  if (dev->cudnn < KCU_SDPA_MIN_CUDNN)
    return no(why, n, "cuDNN %ld is older than %d (9.10.2)", dev->cudnn, (int)KCU_SDPA_MIN_CUDNN);
  int max_dh;
  if (dev->sm == 90) max_dh = 256;
  else if (dev->sm == 100 || dev->sm == 103) max_dh = 128;
  else
    return no(why, n, "sm_%d: cuDNN's packed attention with a packed lse and a deterministic "
              "backward is used on sm_90 and sm_100/103 only", dev->sm);
  if ((int)s->kind < 0 || s->kind >= KCU_SDPA_KINDS) return no(why, n, "unknown call kind %d", (int)s->kind);
  if (s->Dh < 8 || s->Dh % 8 != 0 || s->Dh > max_dh)
    return no(why, n, "head dimension %d: cuDNN takes multiples of 8 up to %d on this GPU",
              s->Dh, max_dh);
  if (s->n_clips < 1) return no(why, n, "%d clips", s->n_clips);
  if (s->H < 1) return no(why, n, "%d heads", s->H);
  const int max_l = 1 << 30;
  if (s->Lq < 0 || s->Lq > max_l || s->Lk < 0 || s->Lk > max_l)
    return no(why, n, "%d x %d tokens: at most 2^30 each", s->Lq, s->Lk);
  if (s->max_q < 0 || s->max_k < 0)
    return no(why, n, "longest clips %d x %d: negative", s->max_q, s->max_k);
  // b = n_clips rounded up to a power of two <= KCU_SDPA_MAX_B (itself one)
  if (s->n_clips > KCU_SDPA_MAX_B)
    return no(why, n, "%d clips: cuDNN takes batches of at most %d sequences", s->n_clips,
              (int)KCU_SDPA_MAX_B);
  kcu_sdpa_key k = kcu_sdpa_key_of(s, 0);
  const int64_t s_max = k.sq > k.skv ? k.sq : k.skv;
  if ((int64_t)k.b * k.h * s_max * k.d >= KCU_SDPA_MAX_ELEMS)
    return no(why, n, "%d sequences padded to %d x %d tokens, %d heads of %d: a tensor of 2^31 "
              "elements or more", k.b, k.sq, k.skv, k.h, k.d);
  if (why && n) snprintf(why, n, "ok");
  return 1;
}

tsr_status kcu_sdpa_choose(kcu_attn_mode mode, const char *op, const kcu_sdpa_shape *s,
                           const kcu_sdpa_device *dev, int *use_cudnn) {
  *use_cudnn = 0;
  if (mode == KCU_ATTN_OWN) return TSR_OK;
  char why[200];
  if (kcu_sdpa_fits(s, dev, why, sizeof why)) {
    *use_cudnn = 1;
    return TSR_OK;
  }
  if (mode == KCU_ATTN_AUTO) return TSR_OK;
  return err_set(TSR_EINVAL, "%s: TESSERA_CUDA_ATTENTION=cudnn but cuDNN's fused attention cannot "
                 "take %d clips, %d x %d tokens (clips of at most %d x %d), %d heads of %d: %s "
                 "(use auto or own)", op, s->n_clips, s->Lq, s->Lk, s->max_q, s->max_k, s->H,
                 s->Dh, why);
}

int64_t kcu_sdpa_bucket(int64_t n, int64_t lo) {
  int64_t b = lo < 1 ? 1 : lo;
  while (b < n) b *= 2;
  return b;
}

kcu_sdpa_key kcu_sdpa_key_of(const kcu_sdpa_shape *s, int deterministic) {
  kcu_sdpa_key k;
  memset(&k, 0, sizeof k);  // padding too: keys are compared field by field, but stay clean
  k.kind = s->kind;
  // The longest clip, at most the tensor's token count: a bound larger than either says no
  // more than the count does.
  const int lq = s->max_q < s->Lq ? s->max_q : s->Lq, lk = s->max_k < s->Lk ? s->max_k : s->Lk;
  k.b = (int)kcu_sdpa_bucket(s->n_clips, 1);
  k.sq = (int)kcu_sdpa_bucket(lq, 64);
  k.skv = (int)kcu_sdpa_bucket(lk, 64);
  k.h = s->H;
  k.d = s->Dh;
  k.deterministic = kcu_sdpa_backward_kind(s->kind) ? deterministic : 0;  // forwards: no atomics
  return k;
}

int kcu_sdpa_key_eq(const kcu_sdpa_key *a, const kcu_sdpa_key *b) {
  return a->kind == b->kind && a->b == b->b && a->sq == b->sq && a->skv == b->skv &&
         a->h == b->h && a->d == b->d && a->deterministic == b->deterministic;
}
