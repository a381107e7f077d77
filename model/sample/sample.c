// model/sample/sample.c — Euler sampler of the rectified flow (model/sample/sample.h).
#include "model/sample/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/rng.h"
#include "store/latent_file.h"
#include "store/patchify.h"
#include "model/io/checkpoint.h"
#include "model/kvcache.h"
#include "model/sample/unipc.h"


// Segments: the conditioning clips of one model call (dit_batch); two a clip (the clean
// context at t = 0, the chunk being denoised) when sampling chunk by chunk, else one.
enum { MAX_SEG = 4 };
typedef struct {
  void *x, *pred;                 // backend: (2N, P) [act] model input, its prediction
  float *state, *t;               // backend: (N, P) [f32] the sampler's x, (MAX_SEG) noise levels
  int32_t *cu, *pos, *labels;     // backend: (MAX_SEG + 1), (2N, 3), (MAX_SEG)
  int32_t *attn_cu;               // backend: (3) the clips of attention (chunk by chunk)
  float *xh;                      // host: (N, P) the initial noise, then the final x
  int32_t *posh;                  // host: (2N, 3)
  void *text_f32, *text;          // backend: (n, text_dim) the captions, fp32 and [act]
  int32_t *cu_text;               // backend: (MAX_SEG + 1) each segment's caption rows
  float *x0;                      // backend: (N, P) [f32] UniPC's x0 prediction, or NULL
} sample_bufs;

static void bufs_free(const kernels_backend *kb, sample_bufs *b) {
  void *dev[] = {b->x, b->pred, b->state, b->t, b->cu, b->pos, b->labels, b->attn_cu,
                 b->text_f32, b->text, b->cu_text, b->x0};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) kb->free(kb, dev[i]);
  free(b->xh);
  free(b->posh);
}

static tsr_status bufs_alloc(const kernels_backend *kb, sample_bufs *b, size_t N, size_t P) {
  memset(b, 0, sizeof *b);
  tsr_status st = kb->alloc(kb, &b->x, kernels_act_bytes(kb, 2 * N * P));
  if (!st) st = kb->alloc(kb, &b->pred, kernels_act_bytes(kb, 2 * N * P));
  if (!st) st = kb->alloc(kb, (void **)&b->state, N * P * sizeof(float));
  if (!st) st = kb->alloc(kb, (void **)&b->t, MAX_SEG * sizeof(float));
  if (!st) st = kb->alloc(kb, (void **)&b->cu, (MAX_SEG + 1) * sizeof(int32_t));
  if (!st) st = kb->alloc(kb, (void **)&b->attn_cu, 3 * sizeof(int32_t));
  if (!st) st = kb->alloc(kb, (void **)&b->pos, 2 * N * 3 * sizeof(int32_t));
  if (!st) st = kb->alloc(kb, (void **)&b->labels, MAX_SEG * sizeof(int32_t));
  if (!st && (!(b->xh = malloc(N * P * sizeof(float))) ||
              !(b->posh = malloc(2 * N * 3 * sizeof(int32_t)))))
    st = err_set(TSR_ENOMEM, "sample: no memory for %zu tokens", N);
  return st;
}

// The state x stays on the backend in fp32 for the whole integration (kernels.h
// euler_update: in bf16 a step's increment would be lost below half an ulp); each step
// casts it to the act dtype as the model's input, the model runs, and euler_update applies
// guidance and the step there. The host only draws the initial noise, sends the two
// noise levels of each step and reads the final clip.
void sample_to_pixels(const float *x, size_t n, uint8_t *out) {
  for (size_t k = 0; k < n; k++) {
    float v = roundf((x[k] + 1.0f) * 127.5f);
    out[k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
  }
}

// The captions on the backend: text (rows, text_dim) [act] and cu_text for C clips of S
// segments each: the first (conditional) clip's segments get the caption's n rows each, the
// second's (unconditional) the negative caption's m rows (none without one: the null token
// alone, or for Wan no rows). With model.text_pad each segment's rows are padded with zero
// rows to text_len, as training gives them (objective.c caption_rows). The buffers are
// allocated at the first call, for S_max segments a clip. *Lt: the rows of all.
static tsr_status upload_text(const kernels_backend *kb, sample_bufs *b, const sample_params *sp,
                              const dit_config *mc, int C, int S, int S_max, int *Lt) {
  size_t d = (size_t)mc->text_dim, pad = mc->text_pad ? (size_t)mc->text_len : 0;
  size_t n = (size_t)sp->text_tokens, m = C == 2 ? (size_t)sp->text_neg_tokens : 0;
  size_t rc = n > pad ? n : pad, ru = C == 2 ? (m > pad ? m : pad) : 0;
  size_t rows = (size_t)S * (rc + ru), cap = (size_t)S_max * (rc + ru);
  int32_t cu[MAX_SEG + 1] = {0};
  for (int g = 0; g < C * S; g++) cu[g + 1] = cu[g] + (int32_t)(g < S ? rc : ru);
  float *h = rows ? calloc(rows * d, sizeof *h) : NULL;
  tsr_status st = rows && !h ? err_set(TSR_ENOMEM, "sample: no memory for %zu caption rows", rows)
                             : TSR_OK;
  for (int g = 0; !st && g < C * S; g++) {
    const float *src = g < S ? sp->text : sp->text_neg;
    size_t k = g < S ? n : m;
    if (k) memcpy(h + (size_t)cu[g] * d, src, k * d * sizeof *h);
  }
  if (!st && !b->cu_text) st = kb->alloc(kb, (void **)&b->cu_text, sizeof cu);
  if (!st) st = kb->to_device(kb, b->cu_text, cu, sizeof(int32_t) * ((size_t)(C * S) + 1));
  if (!st && rows && !b->text) {
    st = kb->alloc(kb, &b->text_f32, cap * d * sizeof(float));
    if (!st) st = kb->alloc(kb, &b->text, kernels_act_bytes(kb, cap * d));
  }
  if (!st && rows) st = kb->to_device(kb, b->text_f32, h, rows * d * sizeof(float));
  if (!st && rows) st = kb->cast(kb, b->text, kb->act_dtype, b->text_f32, KERNELS_F32, rows * d);
  free(h);
  *Lt = (int)rows;
  return st;
}

// UniPC's noise level of step i before its fp32 rounding (sample_sigmas): np.linspace(1,
// 1/1000, steps + 1)[i] shifted, the first lowered by 1e-6 when within 1e-6 of 1 (so that
// log(alpha) stays finite).
static double unipc_level(const sample_params *sp, int i) {
  double step = (1.0 / 1000.0 - 1.0) / sp->steps;
  double u = i * step + 1.0;
  u = sp->shift * u / (1.0 + (sp->shift - 1.0) * u);
  if (i == 0 && fabs(u - 1.0) < 1e-6) u -= 1e-6;
  return u;
}

void sample_sigmas(const sample_params *sp, int64_t N, double *t) {
  int n = sp->steps;
  if (sp->solver == SAMPLE_SOLVER_UNIPC) {
    for (int i = 0; i < n; i++) t[i] = (float)unipc_level(sp, i);
    t[n] = 0.0;
    return;
  }
  if (sp->schedule != SAMPLE_SCHEDULE_WAN) {
    for (int i = 0; i <= n; i++)
      t[i] = kernels_time_shift(1.0 - (double)i / n, N, sp->t_shift_tokens);
    return;
  }
  // the scheduler's constructor shifts its 1000-point training grid in fp32; set_timesteps
  // spaces the timesteps evenly between its ends (1000 and 1000 f(1/1000)) in double, divides
  // by 1000, shifts again and stores fp32 sigmas, which its step() subtracts
  float S = (float)sp->shift, s = 1.0f / 1000.0f;
  double hi = 1000.0, lo = (double)(S * s / (1.0f + (S - 1.0f) * s)) * 1000.0;
  double step = n > 1 ? (lo - hi) / (n - 1) : 0.0;
  for (int i = 0; i < n; i++) {
    double u = (n > 1 && i == n - 1 ? lo : i * step + hi) / 1000.0;
    t[i] = (float)(sp->shift * u / (1.0 + (sp->shift - 1.0) * u));
  }
  t[n] = 0.0;
}

void sample_timesteps(const sample_params *sp, int64_t N, float *ts) {
  double *sig = malloc(((size_t)sp->steps + 1) * sizeof *sig);
  if (sp->solver != SAMPLE_SOLVER_UNIPC && sig) sample_sigmas(sp, N, sig);
  for (int i = 0; i < sp->steps; i++)
    ts[i] = sp->solver == SAMPLE_SOLVER_UNIPC ? (float)floor(unipc_level(sp, i) * 1000.0)
            : sig ? (float)sig[i] * 1000.0f : 0.0f;
  free(sig);
}

// The checks of sample_generate's parameters (sample.h).
static tsr_status check_params(const dit_model *m, const sample_params *sp) {
  const dit_config *mc = dit_get_config(m);
  if (sp->steps < 1) return err_set(TSR_EINVAL, "sample: --steps must be >= 1");
  if (sp->label >= mc->num_classes && sp->label >= 0)
    return err_set(TSR_EINVAL, "sample: label %d out of range (model has %d classes)", sp->label,
                   mc->num_classes);
  if (sp->text_tokens < 0 || sp->text_tokens > mc->text_len || (sp->text_tokens && !sp->text))
    return err_set(TSR_EINVAL, "sample: a caption of %d tokens; the model takes 0 to "
                   "model.text_len = %d", sp->text_tokens, mc->text_len);
  if (sp->text_neg_tokens < 0 || sp->text_neg_tokens > mc->text_len ||
      (sp->text_neg_tokens && !sp->text_neg))
    return err_set(TSR_EINVAL, "sample: a negative caption of %d tokens; the model takes 0 to "
                   "model.text_len = %d", sp->text_neg_tokens, mc->text_len);
  if ((sp->schedule == SAMPLE_SCHEDULE_WAN || sp->solver == SAMPLE_SOLVER_UNIPC) &&
      !(sp->shift > 0))
    return err_set(TSR_EINVAL, "sample: the Wan schedule needs a shift > 0 (got %g)", sp->shift);
  if (sp->solver == SAMPLE_SOLVER_UNIPC && sp->schedule != SAMPLE_SCHEDULE_WAN)
    return err_set(TSR_EINVAL, "sample: --solver unipc takes UniPC's own flow sigmas with "
                   "--shift, as Wan's pipeline: give --schedule wan");
  if (sp->chunked && mc->attn_mask != KERNELS_MASK_BLOCK_CAUSAL)
    return err_set(TSR_EINVAL, "sample: --chunked generates the chunks of a block_causal model "
                   "one after another; this model's model.attn_mask is %s (sample it whole)",
                   config_mask_name(mc->attn_mask));
  if (sp->expert2) {
    const dit_config *m2 = dit_get_config(sp->expert2);
    if (memcmp(m2, mc, sizeof *mc))
      return err_set(TSR_EMISMATCH, "sample: the second expert's model config differs from the "
                     "first's (Wan 2.2's two experts have one shape)");
    if (!(sp->boundary > 0 && sp->boundary <= 1))
      return err_set(TSR_EINVAL, "sample: the experts' boundary %g is not in (0, 1]",
                     sp->boundary);
  }
  return TSR_OK;
}

// UniPC's x0 prediction of a step on the backend: x0 = x - sigma v, v the guided prediction
// (euler_update's guidance, with dt = -sigma, applied to a copy of x), read to the host m0.
// x: (n) [f32] the sampler's state of the tokens being denoised, pc, pu: (n) [act] their
// conditional and unconditional predictions (pu NULL: not guided), m0: (n) host.
static tsr_status unipc_x0(const kernels_backend *kb, const sample_bufs *b, const float *x,
                           const void *pc, const void *pu, float cfg, double sigma, size_t n,
                           float *m0) {
  tsr_status st = kb->copy(kb, b->x0, x, n * sizeof(float));
  if (!st) st = kb->euler_update(kb, b->x0, pc, pu, cfg, (float)-sigma, n);
  if (!st) st = kb->to_host(kb, m0, b->x0, n * sizeof(float));
  return st;
}

// One window of the integration: the model's input is tokens [w0, Nk) of the clip, the
// chunk being denoised is [c0, Nk) and [w0, c0) the clean chunks before it in the input
// (chunk by chunk without the K/V cache: w0 = 0; with it w0 = c0, the context being the
// cache's), or the whole clip (w0 = c0 = 0, Nk = N). Uploads its positions (b->posh: the
// window's, clip after clip), segments and captions and points batch at them. C: clips
// (2 when guided), S: segments a clip.
static tsr_status window_setup(const kernels_backend *kb, sample_bufs *b, const sample_params *sp,
                               const dit_config *mc, int C, size_t w0, size_t Nk, size_t c0,
                               dit_batch *batch) {
  size_t Nw = Nk - w0;
  int S = c0 > w0 ? 2 : 1, G = C * S, Lt = 0;
  for (int c = 0; c < C; c++)
    for (size_t j = w0; j < Nk; j++) {
      int32_t *p = b->posh + (c * Nw + j - w0) * 3;
      p[0] = (int32_t)(j / ((size_t)sp->H * sp->W));
      p[1] = (int32_t)((j / sp->W) % sp->H);
      p[2] = (int32_t)(j % sp->W);
    }
  int32_t cu[MAX_SEG + 1], acu[3] = {0, (int32_t)Nw, (int32_t)(2 * Nw)}, labels[MAX_SEG];
  cu[0] = 0;
  for (int g = 0; g < G; g++) {
    int c = g / S, last = g % S == S - 1;
    cu[g + 1] = (int32_t)(c * Nw + (last ? Nw : c0 - w0));
    labels[g] = c == 0 && sp->label >= 0 ? sp->label : mc->num_classes;
  }
  tsr_status st = kb->to_device(kb, b->cu, cu, sizeof(int32_t) * ((size_t)G + 1));
  if (!st) st = kb->to_device(kb, b->labels, labels, sizeof(int32_t) * (size_t)G);
  if (!st && S > 1) st = kb->to_device(kb, b->attn_cu, acu, sizeof(int32_t) * ((size_t)C + 1));
  if (!st) st = kb->to_device(kb, b->pos, b->posh, (size_t)C * Nw * 3 * sizeof(int32_t));
  if (!st && mc->text_dim > 0) st = upload_text(kb, b, sp, mc, C, S, sp->chunked ? 2 : 1, &Lt);
  *batch = (dit_batch){.n_clips = G, .L = (int)(C * Nw), .max_len = (int)Nw, .cu_seqlens = b->cu,
                       .attn_cu = S > 1 ? b->attn_cu : NULL, .attn_clips = S > 1 ? C : 0,
                       .pos = b->pos, .t = b->t,
                       .labels = mc->num_classes > 0 ? b->labels : NULL, .x = b->x, .Lt = Lt,
                       .cu_text = mc->text_dim > 0 ? b->cu_text : NULL, .text = b->text};
  return st;
}

// The model's input of a window (window_setup): every clip gets the state's tokens
// [w0, w0 + Nw) in the act dtype.
static tsr_status window_input(const kernels_backend *kb, sample_bufs *b, int C, size_t w0,
                               size_t Nw, size_t P) {
  tsr_status st = TSR_OK;
  for (int c = 0; !st && c < C; c++)  // clip 0 with the label, clip 1 without
    st = kb->cast(kb, kernels_act_at(kb, b->x, c * Nw * P), kb->act_dtype, b->state + w0 * P,
                  KERNELS_F32, Nw * P);
  return st;
}

// The K/V caches of a chunked sample (model/kvcache.h): kv[0] m's, kv[1] the second
// expert's (each model's context keys are its own); C branches, chunks of cs tokens of the
// N, as many kept as the mask's window lets a later chunk see.
static tsr_status kv_create(dit_model *m, const sample_params *sp, int C, size_t cs, size_t N,
                            dit_kv_cache **kv) {
  const dit_config *mc = dit_get_config(m);
  int ctx = (int)((N + cs - 1) / cs) - 1;
  if (mc->mask_window > 0 && mc->mask_window < ctx) ctx = mc->mask_window;
  TSR_TRY(dit_kv_create(&kv[0], m, C, (int)cs, ctx));
  if (sp->expert2) TSR_TRY(dit_kv_create(&kv[1], sp->expert2, C, (int)cs, ctx));
  size_t bytes = dit_kv_bytes(kv[0]) * (sp->expert2 ? 2 : 1);
  log_info("sample: K/V cache of %d context chunks (%d tokens) x %d branch%s x %d layers%s: "
           "%.2f MiB", ctx, dit_kv_context_tokens(kv[0]), C, C > 1 ? "es" : "", mc->depth,
           sp->expert2 ? " x 2 experts" : "", (double)bytes / (1 << 20));
  return TSR_OK;
}

// The finished chunk of the window (batch: its tokens alone, w0 = c0) run clean (t = 0)
// through each model with a cache, whose keys and values become context there.
static tsr_status kv_commit(dit_model *m, const sample_params *sp, sample_bufs *b,
                            dit_batch *batch, dit_kv_cache **kv, int C, size_t c0, size_t P) {
  const kernels_backend *kb = dit_backend(m);
  float tt[MAX_SEG] = {0};
  TSR_TRY(window_input(kb, b, C, c0, (size_t)batch->L / (size_t)C, P));
  TSR_TRY(kb->to_device(kb, b->t, tt, sizeof(float) * (size_t)batch->n_clips));
  for (int e = 0; e < 2 && kv[e]; e++) {
    batch->kv = kv[e];
    TSR_TRY(dit_forward(e ? sp->expert2 : m, batch, NULL, NULL));
    TSR_TRY(dit_kv_commit(kv[e]));
  }
  return TSR_OK;
}

tsr_status sample_generate(dit_model *m, const sample_params *sp, float *out) {
  const dit_config *mc = dit_get_config(m);
  const kernels_backend *kb = dit_backend(m);
  size_t N = (size_t)sp->T * sp->H * sp->W, P = (size_t)mc->pt * mc->ph * mc->pw * mc->channels;
  int has_text = mc->text_dim > 0 && sp->text_tokens > 0;
  int has_neg = mc->text_dim > 0 && sp->text_neg_tokens > 0;
  int guided = sp->cfg != 1.0f && (sp->label >= 0 || has_text || has_neg);
  tsr_status st = check_params(m, sp);
  if (st) return st;
  int C = guided ? 2 : 1, unipc = sp->solver == SAMPLE_SOLVER_UNIPC;
  int cached = sp->chunked && !sp->chunk_recompute;
  double *sig = malloc(((size_t)sp->steps + 1) * sizeof *sig);
  float *ts = malloc((size_t)sp->steps * sizeof *ts);
  if (!sig || !ts) {
    free(sig), free(ts);
    return err_set(TSR_ENOMEM, "sample: no memory for %d steps", sp->steps);
  }
  // every chunk runs the whole clip's schedule (its shift for N tokens), as training
  // shifts every chunk's level for its clip's length
  sample_sigmas(sp, (int64_t)N, sig);
  sample_timesteps(sp, (int64_t)N, ts);
  // the chunks: the whole clip, or chunk k of mask_chunk latent frames after the k before
  size_t cs = sp->chunked ? (size_t)mc->mask_chunk * sp->H * sp->W : N;
  if (cs > N) cs = N;
  sample_bufs b;
  unipc_state us = {0};
  dit_kv_cache *kv[2] = {NULL, NULL};
  float *m0 = NULL;
  st = bufs_alloc(kb, &b, N, P);
  if (!st && unipc) st = kb->alloc(kb, (void **)&b.x0, cs * P * sizeof(float));
  if (!st && unipc && !(m0 = malloc(cs * P * sizeof *m0)))
    st = err_set(TSR_ENOMEM, "sample: no memory for %zu tokens", cs);
  if (!st && cached) st = kv_create(m, sp, C, cs, N, kv);
  rng_key key = {.seed = sp->seed, .step = 0, .clip = 0, .stream = RNG_STREAM_SAMPLE};
  if (!st) {
    if (sp->noise) memcpy(b.xh, sp->noise, N * P * sizeof(float));
    else rng_normal_fill(&key, 0, b.xh, (int64_t)(N * P));
    st = kb->to_device(kb, b.state, b.xh, N * P * sizeof(float));
  }
  // WanPipeline compares its timestep with boundary_ratio * num_train_timesteps (in fp32)
  float boundary = (float)(sp->boundary * 1000.0);
  for (size_t c0 = 0; !st && c0 < N; c0 += cs) {
    // the model's input [w0, Nk): the chunk [c0, Nk) after the context it takes as tokens
    size_t Nk = c0 + cs < N ? c0 + cs : N, n = (Nk - c0) * P, w0 = cached ? c0 : 0;
    size_t Nw = Nk - w0;
    dit_batch batch;
    st = window_setup(kb, &b, sp, mc, C, w0, Nk, c0, &batch);
    for (int e = 0; !st && e < 2 && kv[e]; e++) st = dit_kv_begin(kv[e], b.posh, (int)Nw);
    // the chunk's rows of the conditional and (guided) the unconditional prediction
    const void *pc = kernels_act_at(kb, b.pred, (c0 - w0) * P);
    const void *pu = guided ? kernels_act_at(kb, b.pred, (Nw + c0 - w0) * P) : NULL;
    unipc_free(&us);  // each chunk is a solve of its own
    if (!st && unipc) st = unipc_init(&us, n, sp->steps, sig);
    for (int i = 0; !st && i < sp->steps; i++) {
      // the schedule's noise levels (clip 0 with the label and the caption, clip 1 without
      // either or with the negative caption; the context's segments at 0); the model runs
      // at t_i (Euler) or at UniPC's integer timestep / 1000
      int second = sp->expert2 && ts[i] < boundary;
      dit_model *cur = second ? sp->expert2 : m;
      float cfg = second ? sp->cfg2 : sp->cfg;
      double t0 = sig[i], t1 = sig[i + 1];
      float tm = unipc ? (float)(ts[i] / 1000.0) : (float)t0, tt[MAX_SEG];
      for (int g = 0; g < batch.n_clips; g++) tt[g] = c0 > w0 && g % 2 == 0 ? 0.0f : tm;
      st = window_input(kb, &b, C, w0, Nw, P);
      if (!st) st = kb->to_device(kb, b.t, tt, sizeof(float) * (size_t)batch.n_clips);
      batch.kv = kv[second];
      if (!st) st = dit_forward(cur, &batch, b.pred, NULL);
      if (!st && !unipc)
        st = kb->euler_update(kb, b.state + c0 * P, pc, pu, cfg, (float)(t1 - t0), n);
      // UniPC: the x0 prediction to the host, the multistep update there
      if (!st && unipc) st = unipc_x0(kb, &b, b.state + c0 * P, pc, pu, cfg, t0, n, m0);
      if (!st && unipc) {
        unipc_step(&us, i, b.xh + c0 * P, m0);
        st = kb->to_device(kb, b.state + c0 * P, b.xh + c0 * P, n * sizeof(float));
      }
    }
    // the finished chunk's keys and values, for the chunks after it (none after the last)
    if (!st && cached && Nk < N) st = kv_commit(m, sp, &b, &batch, kv, C, c0, P);
  }
  if (!st) st = kb->to_host(kb, out, b.state, N * P * sizeof(float));
  bufs_free(kb, &b);
  unipc_free(&us);
  dit_kv_free(&kv[0]);
  dit_kv_free(&kv[1]);
  free(m0);
  free(sig);
  free(ts);
  return st;
}

// Class id of --label: a number, or a name among the checkpoint's labels.
static tsr_status parse_label(const ckpt_meta *cm, const char *s, int *label) {
  *label = -1;
  if (!s) return TSR_OK;
  if (cm->mc.num_classes == 0)
    return err_set(TSR_EINVAL, "--label %s: the checkpoint's model is unconditional "
                   "(model.num_classes = 0)", s);
  for (int k = 0; k < cm->n_labels; k++)
    if (!strcmp(cm->labels[k], s)) return *label = k, TSR_OK;
  char *end;
  long v = strtol(s, &end, 10);
  if (*s && !*end && v >= 0 && v < cm->mc.num_classes) return *label = (int)v, TSR_OK;
  char names[512] = "";
  for (int k = 0; k < cm->n_labels && strlen(names) < 400; k++)
    strcat(strcat(names, k ? ", " : ""), cm->labels[k]);
  return err_set(TSR_EINVAL, "--label %s: not a class of the checkpoint (ids 0..%d; names: %s)", s,
                 cm->mc.num_classes - 1, names[0] ? names : "none");
}

// The starting noise of --noise: a latent file whose latents (T pt, H ph, W pw, C) are the
// clip's grid in latent pixels, as tokens (T*H*W, P) fp32 into *out (malloc'ed).
static tsr_status read_noise(const char *path, const dit_config *mc, int T, int H, int W,
                             float **out) {
  *out = NULL;
  latent_file *lf = NULL;
  tsr_status st = latent_file_open(&lf, path);
  if (st) return st;
  int f = T * mc->pt, h = H * mc->ph, w = W * mc->pw, C = mc->channels;
  if (lf->T != f || lf->H != h || lf->W != w || lf->C != C)
    st = err_set(TSR_EMISMATCH, "--noise %s: latents (%d, %d, %d, %d); the clip needs (%d, %d, "
                 "%d, %d) (frames, rows, columns, model.channels)", path, lf->T, lf->H, lf->W,
                 lf->C, f, h, w, C);
  size_t frame = (size_t)h * w * C, n = frame * (size_t)f;
  float *lat = st ? NULL : malloc(n * sizeof *lat), *tok = st ? NULL : malloc(n * sizeof *tok);
  if (!st && (!lat || !tok)) st = err_set(TSR_ENOMEM, "--noise %s: no memory", path);
  for (size_t i = 0; !st && i < n; i++) lat[i] = latent_value(lf->latents, lf->dtype, i);
  // each group of pt frames becomes a row of tokens, a latent pixel's C floats moved whole
  const uint8_t **fp = st ? NULL : malloc((size_t)mc->pt * sizeof *fp);
  if (!st && !fp) st = err_set(TSR_ENOMEM, "--noise %s: no memory", path);
  size_t P = (size_t)mc->pt * mc->ph * mc->pw * C;
  for (int t = 0; !st && t < T; t++) {
    for (int k = 0; k < mc->pt; k++)
      fp[k] = (const uint8_t *)(lat + ((size_t)t * mc->pt + k) * frame);
    patchify_u8(fp, mc->pt, h, w, C * (int)sizeof(float), mc->ph, mc->pw,
                (uint8_t *)(tok + (size_t)t * H * W * P));
  }
  free(fp);
  free(lat);
  latent_file_close(&lf);
  if (st) free(tok);
  else *out = tok;
  return st;
}

// The second expert (--ckpt2): a checkpoint of the same model config as the first's (cm),
// loaded into *m2 created like the first model.
static tsr_status load_expert2(const sample_options *o, const ckpt_meta *cm,
                               const kernels_backend *kb, int64_t N, dit_model **m2) {
  ckpt_meta c2 = {0};
  tsr_status st = ckpt_read_meta(o->ckpt2, &c2);
  if (st) return st;
  char *a = config_to_ini(&cm->mc, &cm->tc), *b = config_to_ini(&c2.mc, &cm->tc);
  if (!a || !b) st = err_set(TSR_ENOMEM, "sample: no memory");
  else if (strcmp(a, b))
    st = err_set(TSR_EMISMATCH, "--ckpt2 %s: its model config differs from --ckpt %s's (the two "
                 "experts of Wan 2.2 A14B share one shape; [model] keys must be equal)",
                 o->ckpt2, o->ckpt);
  free(a), free(b);
  ckpt_meta_free(&c2);
  if (!st) st = dit_create(m2, &cm->mc, kb, (int)(2 * N), o->chunked ? MAX_SEG : 2);
  if (!st) st = ckpt_load_model(o->ckpt2, *m2, o->ema);
  return st;
}

tsr_status sample_run(const sample_options *o, sample_result *out) {
  memset(out, 0, sizeof *out);
  ckpt_meta cm = {0};
  tsr_status st = ckpt_read_meta(o->ckpt, &cm);
  if (st) return st;
  const dit_config *mc = &cm.mc;
  int label = -1;
  if (o->frames < 1 || o->frames % mc->pt || o->height < 1 || o->height % mc->ph ||
      o->width < 1 || o->width % mc->pw)
    st = err_set(TSR_EINVAL, "sample: --frames %d --size %dx%d must be positive multiples of the "
                 "model's tubelet %dx%dx%d (frames x height x width)", o->frames, o->height,
                 o->width, mc->pt, mc->ph, mc->pw);
  if (!st) st = parse_label(&cm, o->label, &label);
  if (!st && o->no_kv_cache && !o->chunked)
    st = err_set(TSR_EINVAL, "sample: --no-kv-cache is an option of --chunked (a whole clip "
                 "has no context chunks to cache): give both, or neither");
  float *text = NULL;
  int text_tokens = 0;
  if (!st && o->caption && mc->text_dim == 0)
    st = err_set(TSR_EINVAL, "--caption %s: the checkpoint's model has no captions "
                 "(model.text_dim = 0)", o->caption);
  if (!st && o->caption) {
    st = caption_file_read(o->caption, mc->text_dim, &text, &text_tokens, out->caption,
                           sizeof out->caption);
    if (!st && text_tokens > mc->text_len)
      st = err_set(TSR_EINVAL, "--caption %s: %d tokens, the model takes at most model.text_len = "
                   "%d", o->caption, text_tokens, mc->text_len);
  }
  float *neg = NULL, *noise = NULL;
  int neg_tokens = 0;
  char neg_caption[STORE_MAX_CAPTION_BYTES + 1];
  if (!st && o->negative && mc->text_dim == 0)
    st = err_set(TSR_EINVAL, "--negative %s: the checkpoint's model has no captions "
                 "(model.text_dim = 0)", o->negative);
  if (!st && o->negative) {
    st = caption_file_read(o->negative, mc->text_dim, &neg, &neg_tokens, neg_caption,
                           sizeof neg_caption);
    if (!st && neg_tokens > mc->text_len)
      st = err_set(TSR_EINVAL, "--negative %s: %d tokens, the model takes at most "
                   "model.text_len = %d", o->negative, neg_tokens, mc->text_len);
  }
  if (!st && o->cfg != 1.0f && label < 0 && !text_tokens && !neg_tokens)
    st = err_set(TSR_EINVAL, "sample: --cfg %g needs --label or --caption, or --negative "
                 "(classifier-free guidance compares a class or a caption with none, or with "
                 "the negative caption)", o->cfg);
  int T = o->frames / mc->pt, H = o->height / mc->ph, W = o->width / mc->pw;
  int64_t N = (int64_t)T * H * W;
  if (!st && N > (1 << 24))
    st = err_set(TSR_EINVAL, "sample: %lld tokens is too many for one clip", (long long)N);
  if (!st && o->noise) st = read_noise(o->noise, mc, T, H, W, &noise);
  dit_model *m = NULL, *m2 = NULL;
  float *vals = NULL;
  uint8_t *tok = NULL;
  int latent = store_is_latent(&cm.store);
  const kernels_backend *kb = NULL;
  kernels_dtype precision = o->precision >= 0 ? (kernels_dtype)o->precision : cm.tc.precision;
  if (!st) st = backend_for_precision(o->backend, precision, &kb);
  // the model's tokens: a clip's, twice (guidance); with the K/V cache a chunk's
  int64_t Nm = N, cs = (int64_t)mc->mask_chunk * H * W;
  if (o->chunked && !o->no_kv_cache && cs < N) Nm = cs;
  if (!st) st = dit_create(&m, mc, kb, (int)(2 * Nm), o->chunked ? MAX_SEG : 2);
  if (!st) st = ckpt_load_model(o->ckpt, m, o->ema);
  if (!st && o->ckpt2) st = load_expert2(o, &cm, kb, Nm, &m2);
  size_t NP = (size_t)N * mc->pt * mc->ph * mc->pw * mc->channels;
  if (!st && (!(vals = malloc(NP * sizeof(float))) || (!latent && !(tok = malloc(NP)))))
    st = err_set(TSR_ENOMEM, "sample: no memory");
  if (!st) {
    sample_params sp = {.T = T, .H = H, .W = W, .label = label, .text = text,
                        .text_tokens = text_tokens, .cfg = o->cfg, .steps = o->steps,
                        .seed = o->seed, .t_shift_tokens = cm.tc.t_shift_tokens,
                        .text_neg = neg, .text_neg_tokens = neg_tokens, .noise = noise,
                        .schedule = o->schedule, .shift = o->shift, .solver = o->solver,
                        .expert2 = m2, .boundary = o->boundary,
                        .cfg2 = isnan(o->cfg2) ? o->cfg : o->cfg2, .chunked = o->chunked,
                        .chunk_recompute = o->no_kv_cache};
    double t0 = time_now();
    log_info("sample: %s (%s weights, step %lld), %d %sframes %dx%d = %lld tokens, %d "
             "steps%s%s%s%s%s%s%s; backend %s, precision %s", o->ckpt, o->ema ? "EMA" : "raw",
             (long long)cm.step, o->frames, latent ? "latent " : "", o->height, o->width,
             (long long)N, o->steps, text_tokens ? ", caption" : "",
             neg_tokens ? ", negative caption" : "", o->cfg != 1.0f ? ", guided" : "",
             o->schedule == SAMPLE_SCHEDULE_WAN ? ", Wan schedule" : "",
             o->solver == SAMPLE_SOLVER_UNIPC ? ", UniPC" : "",
             m2 ? ", second expert below the boundary" : "",
             o->chunked ? (o->no_kv_cache ? ", chunk by chunk (no K/V cache)"
                                          : ", chunk by chunk") : "", kb->name,
             config_precision_name(precision));
    st = sample_generate(m, &sp, vals);
    if (!st && tok) sample_to_pixels(vals, NP, tok);
    if (!st) log_info("sample: %lld tokens in %.1f s", (long long)N, time_now() - t0);
  }
  if (!st) {
    out->tokens = tok, out->values = vals, out->T = T, out->H = H, out->W = W;
    out->mc = *mc, out->store = cm.store;
    tok = NULL, vals = NULL;
  }
  free(tok);
  free(vals);
  free(text);
  free(neg);
  free(noise);
  dit_free(&m);
  dit_free(&m2);
  ckpt_meta_free(&cm);
  return st;
}

tsr_status sample_row(dit_model *m, const sample_params *sp, int n, int gap, int pixels,
                      sample_result *out) {
  memset(out, 0, sizeof *out);
  const dit_config *mc = dit_get_config(m);
  size_t P = (size_t)mc->pt * mc->ph * mc->pw * mc->channels;
  size_t N = (size_t)sp->T * sp->H * sp->W;
  if (n < 1 || gap < 0 || sp->T < 1 || sp->H < 1 || sp->W < 1)
    return err_set(TSR_EINVAL, "sample_row: %d clips of %dx%dx%d tokens, gap %d", n, sp->T,
                   sp->H, sp->W, gap);
  for (int i = 1; i < n; i++)
    if (sp[i].T != sp->T || sp[i].H != sp->H || sp[i].W != sp->W)
      return err_set(TSR_EINVAL, "sample_row: clip %d's grid differs from clip 0's", i);
  int Wr = n * sp->W + (n - 1) * gap;
  size_t row_n = (size_t)sp->T * sp->H * Wr * P;
  float *row = malloc(row_n * sizeof *row), *one = malloc(N * P * sizeof *one);
  uint8_t *tok = pixels ? malloc(row_n) : NULL;
  tsr_status st = row && one && (tok || !pixels)
                      ? TSR_OK
                      : err_set(TSR_ENOMEM, "out of memory for %d samples", n);
  for (size_t k = 0; !st && k < row_n; k++) row[k] = pixels ? 1.0f : 0.0f;  // the gaps
  for (int i = 0; !st && i < n; i++) {
    if ((st = sample_generate(m, &sp[i], one))) break;
    // token (t, y, x) of clip i goes to (t, y, i (W + gap) + x) of the row
    for (size_t ty = 0; ty < (size_t)sp->T * sp->H; ty++)
      memcpy(row + (ty * Wr + (size_t)i * (sp->W + gap)) * P, one + ty * sp->W * P,
             (size_t)sp->W * P * sizeof *row);
  }
  free(one);
  if (!st && tok) sample_to_pixels(row, row_n, tok);
  if (st) {
    free(row);
    free(tok);
    return st;
  }
  out->tokens = tok, out->values = row, out->T = sp->T, out->H = sp->H, out->W = Wr;
  out->mc = *mc;
  return TSR_OK;
}

void sample_result_free(sample_result *r) {
  free(r->tokens);
  free(r->values);
  memset(r, 0, sizeof *r);
}

tsr_status sample_latents(const sample_result *r, float **out) {
  const dit_config *mc = &r->mc;
  int h = r->H * mc->ph, w = r->W * mc->pw, C = mc->channels;
  size_t frame = (size_t)h * w * C, P = (size_t)mc->pt * mc->ph * mc->pw * C;
  float *lat = malloc(frame * (size_t)r->T * mc->pt * sizeof(float));
  uint8_t **fp = malloc((size_t)mc->pt * sizeof *fp);
  if (!lat || !fp) {
    free(lat), free(fp);
    return err_set(TSR_ENOMEM, "sample: no memory for the latents");
  }
  for (int t = 0; t < r->T; t++) {  // the tokens' values are C floats a latent pixel
    for (int f = 0; f < mc->pt; f++) fp[f] = (uint8_t *)(lat + ((size_t)t * mc->pt + f) * frame);
    unpatchify_u8((const uint8_t *)(r->values + (size_t)t * r->H * r->W * P), mc->pt, h, w,
                  C * (int)sizeof(float), mc->ph, mc->pw, fp);
  }
  free(fp);
  *out = lat;
  return TSR_OK;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

void sample_preview_range(const float *lat, size_t pixels, int C, float lo[3], float hi[3]) {
  float *v = malloc((pixels ? pixels : 1) * sizeof(float));
  for (int k = 0; k < 3; k++) {
    int ch = k < C ? k : 0;
    lo[k] = -1, hi[k] = 1;
    if (!v || !pixels) continue;
    for (size_t i = 0; i < pixels; i++) v[i] = lat[i * (size_t)C + (size_t)ch];
    qsort(v, pixels, sizeof *v, cmp_float);
    lo[k] = v[(size_t)(0.005 * (double)(pixels - 1))];
    hi[k] = v[(size_t)(0.995 * (double)(pixels - 1))];
    if (!(hi[k] > lo[k])) hi[k] = lo[k] + 1;
  }
  free(v);
}

void sample_preview_frame(const float *frame, int h, int w, int C, int up, const float lo[3],
                          const float hi[3], uint8_t *rgb) {
  for (int y = 0; y < h * up; y++)
    for (int x = 0; x < w * up; x++) {
      const float *p = frame + ((size_t)(y / up) * w + (size_t)(x / up)) * C;
      uint8_t *o = rgb + ((size_t)y * w * up + x) * 3;
      for (int k = 0; k < 3; k++) {
        float t = (p[k < C ? k : 0] - lo[k]) / (hi[k] - lo[k]) * 255.0f;
        o[k] = (uint8_t)(t < 0 ? 0 : t > 255 ? 255 : lrintf(t));
      }
    }
}
