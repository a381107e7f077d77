// model/sample/sample.c — Euler sampler of the rectified flow (model/sample/sample.h).
#include "model/sample/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/rng.h"
#include "model/io/checkpoint.h"


typedef struct {
  void *x, *pred;                 // backend: (2N, P) [act] model input, its prediction
  float *state, *t;               // backend: (N, P) [f32] the sampler's x, (2) noise levels
  int32_t *cu, *pos, *labels;     // backend: (3), (2N, 3), (2)
  float *xh;                      // host: (N, P) the initial noise, then the final x
  int32_t *posh;                  // host: (2N, 3)
} sample_bufs;

static void bufs_free(const kernels_backend *kb, sample_bufs *b) {
  void *dev[] = {b->x, b->pred, b->state, b->t, b->cu, b->pos, b->labels};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) kb->free(kb, dev[i]);
  free(b->xh);
  free(b->posh);
}

static tsr_status bufs_alloc(const kernels_backend *kb, sample_bufs *b, size_t N, size_t P) {
  memset(b, 0, sizeof *b);
  tsr_status r = kb->alloc(kb, &b->x, kernels_act_bytes(kb, 2 * N * P));
  if (!r) r = kb->alloc(kb, &b->pred, kernels_act_bytes(kb, 2 * N * P));
  if (!r) r = kb->alloc(kb, (void **)&b->state, N * P * sizeof(float));
  if (!r) r = kb->alloc(kb, (void **)&b->t, 2 * sizeof(float));
  if (!r) r = kb->alloc(kb, (void **)&b->cu, 3 * sizeof(int32_t));
  if (!r) r = kb->alloc(kb, (void **)&b->pos, 2 * N * 3 * sizeof(int32_t));
  if (!r) r = kb->alloc(kb, (void **)&b->labels, 2 * sizeof(int32_t));
  if (!r && (!(b->xh = malloc(N * P * sizeof(float))) ||
             !(b->posh = malloc(2 * N * 3 * sizeof(int32_t)))))
    r = err_set(TSR_ENOMEM, "out of memory for a sample of %zu tokens", N);
  return r;
}

// The state x stays on the backend in fp32 for the whole integration (kernels.h
// euler_update: in bf16 a step's increment would be lost below half an ulp); each step
// casts it to the act dtype as the model's input, the model runs, and euler_update applies
// guidance and the step there. The host only draws the initial noise, sends the two
// noise levels of each step and reads the final clip.
tsr_status sample_generate(dit_model *m, const sample_params *sp, uint8_t *out) {
  const dit_config *mc = dit_get_config(m);
  const kernels_backend *kb = dit_backend(m);
  size_t N = (size_t)sp->T * sp->H * sp->W, P = (size_t)mc->pt * mc->ph * mc->pw * mc->channels;
  int guided = sp->cfg != 1.0f && sp->label >= 0;
  if (sp->steps < 1) return err_set(TSR_EINVAL, "--steps %d: must be >= 1", sp->steps);
  if (sp->label >= mc->num_classes && sp->label >= 0)
    return err_set(TSR_EINVAL, "label %d out of range (the model has %d classes)", sp->label,
                   mc->num_classes);
  int C = guided ? 2 : 1;
  sample_bufs b;
  tsr_status r = bufs_alloc(kb, &b, N, P);
  rng_key key = {.seed = sp->seed, .step = 0, .clip = 0, .stream = RNG_STREAM_SAMPLE};
  if (!r) {
    rng_normal_fill(&key, 0, b.xh, (int64_t)(N * P));
    for (int c = 0; c < C; c++)
      for (size_t j = 0; j < N; j++) {
        int32_t *p = b.posh + (c * N + j) * 3;
        p[0] = (int32_t)(j / ((size_t)sp->H * sp->W));
        p[1] = (int32_t)((j / sp->W) % sp->H);
        p[2] = (int32_t)(j % sp->W);
      }
    int32_t cu[3] = {0, (int32_t)N, (int32_t)(2 * N)};
    int32_t labels[2] = {sp->label >= 0 ? sp->label : mc->num_classes, mc->num_classes};
    if (!(r = kb->to_device(kb, b.cu, cu, sizeof cu)) &&
        !(r = kb->to_device(kb, b.labels, labels, sizeof labels)) &&
        !(r = kb->to_device(kb, b.state, b.xh, N * P * sizeof(float))))
      r = kb->to_device(kb, b.pos, b.posh, (size_t)C * N * 3 * sizeof(int32_t));
  }
  dit_batch batch = {.n_clips = C, .L = (int)(C * N), .cu_seqlens = b.cu, .pos = b.pos,
                     .t = b.t, .labels = mc->num_classes > 0 ? b.labels : NULL, .x = b.x};
  for (int i = 0; !r && i < sp->steps; i++) {
    // the noise levels of training (kernels_time_shift) at the grid points
    double t0 = kernels_time_shift(1.0 - (double)i / sp->steps, (int64_t)N, sp->t_shift_tokens);
    double t1 = kernels_time_shift(1.0 - (double)(i + 1) / sp->steps, (int64_t)N,
                                   sp->t_shift_tokens);
    float tt[2] = {(float)t0, (float)t0};
    for (int c = 0; !r && c < C; c++)  // clip 0 with the label, clip 1 without
      r = kb->cast(kb, kernels_act_at(kb, b.x, c * N * P), kb->act_dtype, b.state, KERNELS_F32,
                   N * P);
    if (!r) r = kb->to_device(kb, b.t, tt, sizeof tt);
    if (!r) r = dit_forward(m, &batch, b.pred, NULL);
    if (!r)
      r = kb->euler_update(kb, b.state, b.pred, guided ? kernels_act_at(kb, b.pred, N * P) : NULL,
                           sp->cfg, (float)(t1 - t0), N * P);
  }
  if (!r) r = kb->to_host(kb, b.xh, b.state, N * P * sizeof(float));
  for (size_t k = 0; !r && k < N * P; k++) {
    float v = roundf((b.xh[k] + 1.0f) * 127.5f);
    out[k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
  }
  bufs_free(kb, &b);
  return r;
}

tsr_status sample_row(dit_model *m, const sample_params *sp, int n, int gap,
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
  uint8_t *row = malloc((size_t)sp->T * sp->H * Wr * P), *one = malloc(N * P);
  tsr_status r = row && one ? TSR_OK : err_set(TSR_ENOMEM, "out of memory for %d samples", n);
  if (!r) memset(row, 255, (size_t)sp->T * sp->H * Wr * P);  // the gaps
  for (int i = 0; !r && i < n; i++) {
    if ((r = sample_generate(m, &sp[i], one))) break;
    // token (t, y, x) of clip i goes to (t, y, i (W + gap) + x) of the row
    for (size_t ty = 0; ty < (size_t)sp->T * sp->H; ty++)
      memcpy(row + (ty * Wr + (size_t)i * (sp->W + gap)) * P, one + ty * sp->W * P,
             (size_t)sp->W * P);
  }
  free(one);
  if (r) {
    free(row);
    return r;
  }
  *out = (sample_result){.tokens = row, .T = sp->T, .H = sp->H, .W = Wr, .mc = *mc};
  return TSR_OK;
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

tsr_status sample_run(const sample_options *o, sample_result *out) {
  memset(out, 0, sizeof *out);
  ckpt_meta cm = {0};
  tsr_status r = ckpt_read_meta(o->ckpt, &cm);
  if (r) return r;
  const dit_config *mc = &cm.mc;
  int label = -1;
  if (o->frames < 1 || o->frames % mc->pt || o->height < 1 || o->height % mc->ph ||
      o->width < 1 || o->width % mc->pw)
    r = err_set(TSR_EINVAL, "--frames %d --size %dx%d: must be positive multiples of the "
                "model's tubelet %dx%dx%d (frames x height x width)", o->frames, o->height,
                o->width, mc->pt, mc->ph, mc->pw);
  if (!r) r = parse_label(&cm, o->label, &label);
  if (!r && o->cfg != 1.0f && label < 0)
    r = err_set(TSR_EINVAL, "--cfg %g needs --label (classifier-free guidance compares "
                "a class with \"no label\")", o->cfg);
  int T = o->frames / mc->pt, H = o->height / mc->ph, W = o->width / mc->pw;
  int64_t N = (int64_t)T * H * W;
  if (!r && N > (1 << 24))
    r = err_set(TSR_EINVAL, "--frames %d --size %dx%d: %lld tokens is too many for one clip",
                o->frames, o->height, o->width, (long long)N);
  dit_model *m = NULL;
  const kernels_backend *kb = NULL;
  kernels_dtype precision = o->precision >= 0 ? (kernels_dtype)o->precision : cm.tc.precision;
  if (!r) r = backend_for_precision(o->backend, precision, &kb);
  if (!r) r = dit_create(&m, mc, kb, (int)(2 * N), 2);
  if (!r) r = ckpt_load_model(o->ckpt, m, o->ema);
  if (!r) {
    sample_params sp = {.T = T, .H = H, .W = W, .label = label, .cfg = o->cfg,
                        .steps = o->steps, .seed = o->seed,
                        .t_shift_tokens = cm.tc.t_shift_tokens};
    double t0 = time_now();
    log_info("sample: %s (%s weights, step %lld), %d frames %dx%d = %lld tokens, %d steps%s; "
             "backend %s, precision %s", o->ckpt, o->ema ? "EMA" : "raw", (long long)cm.step,
             o->frames, o->height, o->width, (long long)N, o->steps, label >= 0 ? ", guided" : "",
             kb->name, config_precision_name(precision));
    r = sample_row(m, &sp, 1, 0, out);
    if (!r) log_info("sample: %lld tokens in %.1f s", (long long)N, time_now() - t0);
  }
  if (!r) out->store = cm.store;
  dit_free(&m);
  ckpt_meta_free(&cm);
  return r;
}

void sample_result_free(sample_result *r) {
  free(r->tokens);
  memset(r, 0, sizeof *r);
}
