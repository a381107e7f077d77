// tests/kernels/backend_ops.h — the harness of test_backend_ops.c (one translation unit
// includes it, like kt.h): the tolerance of each output, the statistics table, the backend
// under test and the reference, the tensors both see, the comparison of an output, and the
// packings of clips the entries run on. test_backend_ops.c's header comment says what is
// compared and why each tolerance is what it is.
#ifndef TESSERA_TESTS_KERNELS_BACKEND_OPS_H
#define TESSERA_TESTS_KERNELS_BACKEND_OPS_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kt.h"

// ---- tolerances --------------------------------------------------------------------
// 1 while the masked entries run under a mask the CUDA backend takes to cuDNN: FULL (they
// are then the unmasked entries, kernels.h), BLOCK_CAUSAL and a WINDOW whose radii wh, ww
// reach every tile of the clips' frames of fh x fw tokens (cuDNN's pair list,
// kernels/cuda/attention_cudnn.h); a narrower window stays on the own kernels.
static int MASK_ON_CUDNN_NOW;
static inline int window_covers_frame(const kernels_mask *m, int fh, int fw) {
  return m->kind == KERNELS_MASK_WINDOW && (fh - 1) / m->tile_h <= m->wh && (fw - 1) / m->tile_w <= m->ww;
}
static inline void mask_now(const kernels_mask *m, int fh, int fw) {
  MASK_ON_CUDNN_NOW = m && (m->kind != KERNELS_MASK_WINDOW || window_covers_frame(m, fh, fw));
}

// 1 when entry runs on cuDNN's fused attention (the CUDA backend's auto or cudnn mode).
static inline int cudnn_attention(const kernels_backend *kb, const char *entry) {
  const char *mode = getenv("TESSERA_CUDA_ATTENTION");
  if (strcmp(kb->name, "cuda") || (mode && !strcmp(mode, "own"))) return 0;
  if (!strcmp(entry, "attention_forward") || !strcmp(entry, "attention_backward") ||
      !strcmp(entry, "attention_partial_forward") || !strcmp(entry, "attention_partial_backward"))
    return 1;
  return MASK_ON_CUDNN_NOW && (!strcmp(entry, "attention_masked_forward") ||
                           !strcmp(entry, "attention_masked_backward") ||
                           !strcmp(entry, "attention_masked_partial_backward"));
}

static inline double tol_of(const kernels_backend *kb, kernels_dtype out_dtype,
                            const char *entry) {
  const double f32 = 0x1p-14;
  if (out_dtype == KERNELS_BF16 && cudnn_attention(kb, entry)) return 3 * 0x1p-8;
  // The GELU-fused linear entries are defined as their composition (kernels.h), which
  // rounds pre (forward) or dout w^T (backward) to bf16 before GELU or GELU' is applied; a
  // backend that runs the composition (the CUDA backend where cuBLASLt has no epilogue for
  // the shape) rounds twice: u |GELU'(x) x| + u |out| with GELU' <= 1.13, so 2.13 u of
  // the max-norm (measured on the emulated device: 1.48 u).
  if (out_dtype == KERNELS_BF16 &&
      (!strcmp(entry, "linear_gelu_forward") || !strcmp(entry, "linear_backward_dgelu")))
    return 2.25 * 0x1p-8 + f32;
  // cuBLASLt's bias epilogue takes a bf16 bias for a bf16 output (kernels/cuda/gemm.cu), so
  // the CUDA backend rounds the bias too: u |bias| + u |out|, 2 u of the max-norm
  // (gemm_batched's cases with a bias; without one, one u of that is spare).
  if (out_dtype == KERNELS_BF16 && !strncmp(kb->name, "cuda", 4) &&
      (!strcmp(entry, "linear_forward") || !strcmp(entry, "gemm_batched")))
    return 2 * 0x1p-8 + f32;
  return out_dtype == KERNELS_BF16 ? 0x1p-8 + f32 : f32;
}

// ---- statistics per entry and output ------------------------------------------------
typedef struct {
  char entry[64];  // "entry.output" 
  double err, tol;
  long mismatches;  // exact check (cpu-bf16 only)
  int fails;
} stat;
static stat stats[160];
static int n_stats;

static inline stat *stat_of(const char *entry) {
  for (int i = 0; i < n_stats; i++)
    if (!strcmp(stats[i].entry, entry)) return &stats[i];
  if (n_stats == (int)(sizeof stats / sizeof stats[0])) return &stats[n_stats - 1];
  stat *s = &stats[n_stats++];
  memset(s, 0, sizeof *s);
  snprintf(s->entry, sizeof s->entry, "%s", entry);
  return s;
}

// ---- the backend under test and its tensors -----------------------------------------
static const kernels_backend *KB;   // under test
static const kernels_backend *REF;  // CPU fp32 (host memory: its tensors are the .h arrays)
static int EXACT;                   // KB is cpu-bf16: outputs must be the rounded reference

// A tensor of one case: h = the host fp32 values (inputs as both backends see them, or the
// reference's output), d = the tested backend's copy (act dtype if act).
typedef struct {
  float *h;
  void *d;
  size_t n;
  int act;
} tens;

static inline size_t act_size(void) { return kernels_dtype_size(KB->act_dtype); }

static inline float q_act(float x) {
  return KB->act_dtype == KERNELS_BF16 ? kernels_bf16_round(x) : x;
}

static inline void upload(tens *t) {
  size_t bytes = t->n * (t->act ? act_size() : sizeof(float));
  CHECK_OK(KB->alloc(KB, &t->d, bytes));
  void *tmp = malloc(bytes ? bytes : 1);
  REF->cast(REF, tmp, t->act ? KB->act_dtype : KERNELS_F32, t->h, KERNELS_F32, t->n);
  CHECK_OK(KB->to_device(KB, t->d, tmp, bytes));
  free(tmp);
}

// Random [act] tensor in [lo, hi), rounded to the act dtype; uploaded.
static inline tens t_act(size_t n, double lo, double hi) {
  tens t = {kt_rand(n, lo, hi), NULL, n, 1};
  for (size_t i = 0; i < n; i++) t.h[i] = q_act(t.h[i]);
  upload(&t);
  return t;
}

// Random [f32] tensor; uploaded.
static inline tens t_f32(size_t n, double lo, double hi) {
  tens t = {kt_rand(n, lo, hi), NULL, n, 0};
  upload(&t);
  return t;
}

static inline void *t_raw(const void *h, size_t bytes) {
  void *d;
  CHECK_OK(KB->alloc(KB, &d, bytes));
  CHECK_OK(KB->to_device(KB, d, h, bytes));
  return d;
}

static inline void t_free(tens *t) {
  free(t->h);
  KB->free(KB, t->d);
  t->h = NULL, t->d = NULL;
}

// ---- which entries are compared (test_backend_ops -e), which were, and --perf ---------
// Lists are ",name,name," strings of entry names (kernels/entries.h). SELECT: the entries
// -e named ("" = all); GROUP: the entries test_backend_ops.c's table gives the case group
// now running (an output of another entry is a stale table: a failure); SEEN: the entries
// whose outputs were compared on this backend. PERF_HOOK (--perf) reports an entry's calls
// since its last report, when its outputs are compared.
static char SELECT[4096], SEEN[4096];
static const char *GROUP;
static void (*PERF_HOOK)(const char *entry);

static inline int in_list(const char *list, const char *name) {
  char key[80];
  snprintf(key, sizeof key, ",%s,", name);
  return strstr(list, key) != NULL;
}
static inline void add_to_list(char *list, size_t cap, const char *name) {
  if (in_list(list, name)) return;
  size_t used = strlen(list);
  snprintf(list + used, cap - used, "%s%s,", used ? "" : ",", name);
}

// Compares the tested backend's output t->d with the reference's t->h (for a selected
// entry); then sets both to the reference rounded to the act dtype, so that an output used
// as a later entry's input (or accumulator) is again the same input on both sides: every
// entry is measured alone.
static inline void check_out(const char *entry, const char *arg, tens *t) {
  size_t n = t->n;
  if (GROUP && !in_list(GROUP, entry))
    CHECK(0, "%s.%s compared in a case group whose entry list (test_backend_ops.c) lacks %s",
          entry, arg, entry);
  if (!SELECT[0] || in_list(SELECT, entry)) {
    add_to_list(SEEN, sizeof SEEN, entry);
    if (PERF_HOOK) PERF_HOOK(entry);
    float *got = malloc((n ? n : 1) * sizeof(float));
    size_t bytes = n * (t->act ? act_size() : sizeof(float));
    void *tmp = malloc(bytes ? bytes : 1);
    CHECK_OK(KB->to_host(KB, tmp, t->d, bytes));
    REF->cast(REF, got, KERNELS_F32, tmp, t->act ? KB->act_dtype : KERNELS_F32, n);
    free(tmp);
    double e = 0, m = 1e-30;
    long mism = 0;
    for (size_t i = 0; i < n; i++) {
      double d = got[i] == t->h[i] ? 0.0 : fabs((double)got[i] - t->h[i]);  // -inf lse: equal
      if (isnan(d) && !isnan(t->h[i])) d = INFINITY;
      if (d > e) e = d;
      if (fabs(t->h[i]) > m) m = fabs(t->h[i]);
      float want = t->act ? q_act(t->h[i]) : t->h[i];
      if (EXACT && memcmp(&got[i], &want, sizeof want) != 0) mism++;
    }
    free(got);
    e /= m;
    double tol = tol_of(KB, t->act ? KB->act_dtype : KERNELS_F32, entry);
    char key[64];
    snprintf(key, sizeof key, "%s.%s", entry, arg);
    stat *s = stat_of(key);
    if (e > s->err) s->err = e;
    if (tol > s->tol) s->tol = tol;
    s->mismatches += mism;
    int ok = e <= tol && mism == 0;
    if (!ok) s->fails++;
    CHECK(ok, "%s %s.%s: error %.3g (tol %.3g), %ld elements not the rounded reference",
          KB->name, entry, arg, e, tol, mism);
  }
  if (t->act)
    for (size_t i = 0; i < n; i++) t->h[i] = q_act(t->h[i]);
  KB->free(KB, t->d);
  upload(t);
}

// ---- shapes ---------------------------------------------------------------------------
typedef struct {
  int n_clips, L;
  int32_t cu[16];
} packing;
// Ragged: empty clips at the start, middle and end, 1-token clips, clips crossing the
// 64-token tile, L = 131 and 70 (multiples of no tile).
static const packing packings[] = {
    {6, 131, {0, 0, 1, 1, 66, 66, 131}},
    {4, 70, {0, 17, 17, 69, 70}},
};
enum { N_PACK = sizeof packings / sizeof packings[0] };

static inline int32_t *d_cu(const packing *p) {
  return t_raw(p->cu, sizeof(int32_t) * (p->n_clips + 1));
}

// Tokens of the longest clip of cu (C + 1 offsets, host): the attention entries' max_len.
static inline int longest_of(const int32_t *cu, int C) {
  int m = 0;
  for (int c = 0; c < C; c++)
    if (cu[c + 1] - cu[c] > m) m = cu[c + 1] - cu[c];
  return m;
}

#endif
