// tools/cmd_sample.c — `tessera sample`: a video from a checkpoint (docs/train.md).
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <stdlib.h>

#include "core/err.h"
#include "core/fs.h"
#include "core/log.h"
#ifdef TESSERA_HAVE_MEDIA
#include "ingest/encode.h"
#endif
#include "ingest/latent_file.h"
#include "ingest/patchify.h"
#include "model/io/checkpoint.h"
#include "model/sample/sample.h"
#include "tools/backend.h"
#include "tools/commands.h"
#include "tools/parse.h"
#include "tools/y4m.h"

static void sample_usage(FILE *f) {
  fprintf(f,
    "usage: tessera sample --ckpt FILE --frames F --size HxW --out FILE.mp4 [--label L]\n"
    "                      [--caption FILE] [--cfg S] [--steps N] [--seed S] [--ema | --raw]\n"
    "                      [--backend B] [--precision fp32|bf16]\n\n"
    "Generates a clip by Euler integration of the learned flow from noise and writes it as\n"
    "H.264 at the frame rate of the store the checkpoint was trained on. Details:\n"
    "docs/train.md. An --out ending in .y4m is written as YUV4MPEG2 (4:4:4, BT.601)\n"
    "instead; a tessera built without media (FFmpeg) always writes Y4M, to FILE.y4m.\n\n"
    "A model trained on VAE latents (tessera ingest --latents) samples latents: --frames\n"
    "and --size count latent frames and latent rows x columns; the latents go to FILE's\n"
    "name with .safetensors (a latent file for your VAE's decoder:\n"
    "tools/reference/encode_latents.py decode) and FILE.mp4 gets a PREVIEW: latent\n"
    "channels 0, 1, 2 as red, green, blue, each stretched over its range in the clip, each\n"
    "latent pixel a VAE-stride square, one frame a latent frame (not the decoded video).\n\n"
    "  --ckpt FILE      checkpoint (RUN/ckpt-STEP.safetensors)\n"
    "  --frames F       frames, a multiple of the model's tubelet frames (pt)\n"
    "  --size HxW       height x width in pixels, multiples of the patch (ph, pw)\n"
    "  --out FILE.mp4   output video (written to FILE.mp4.tmp, then renamed)\n"
    "  --label L        class id or name (class-conditional models)\n"
    "  --caption FILE   caption embedding (safetensors with text_emb (N, text_dim), from\n"
    "                   the text encoder the model was trained with; models with captions)\n"
    "  --cfg S          classifier-free guidance scale (default 1: none; needs --label or\n"
    "                   --caption: compared with no label and no caption)\n"
    "  --steps N        Euler steps (default 32)\n"
    "  --seed S         noise seed (default 0)\n"
    "  --ema, --raw     EMA weights (default) or the raw trained weights\n"
    "  --backend B      compute device: cpu, cuda or auto (default: cuda when built and a\n"
    "                   GPU is visible, else cpu)\n"
    "  --precision P    activations in fp32 or bf16 (default: the checkpoint's\n"
    "                   train.precision; the weights are fp32 either way)\n"
    "  -h, --help       this help\n");
}

// Every frame of the clip as rgb24 (height x width x 3), in order, to put(ctx, frame).
// The tokens are unpatchified one tubelet (pt frames) at a time.
static tsr_status for_each_frame(const sample_result *s,
                                 tsr_status (*put)(void *ctx, const uint8_t *rgb), void *ctx) {
  const dit_config *mc = &s->mc;
  const int height = s->H * mc->ph, width = s->W * mc->pw;
  size_t P = (size_t)mc->pt * mc->ph * mc->pw * mc->channels;
  size_t frame_bytes = (size_t)height * width * 3;
  uint8_t *frames = malloc(frame_bytes * (size_t)mc->pt);
  uint8_t **fp = malloc((size_t)mc->pt * sizeof *fp);
  tsr_status r = frames && fp ? TSR_OK : err_set(TSR_ENOMEM, "sample: no memory for frames");
  for (int f = 0; !r && f < mc->pt; f++) fp[f] = frames + (size_t)f * frame_bytes;
  for (int t = 0; !r && t < s->T; t++) {
    unpatchify_u8(s->tokens + (size_t)t * s->H * s->W * P, mc->pt, height, width, mc->channels,
                  mc->ph, mc->pw, fp);
    for (int f = 0; !r && f < mc->pt; f++) r = put(ctx, fp[f]);
  }
  free(frames);
  free(fp);
  return r;
}

typedef struct {
  const float *lat;
  int frames, h, w, C, up;
  float lo[3], hi[3];
} preview;

// Every latent frame as an rgb24 preview frame, to put(ctx, frame).
static tsr_status for_each_preview(const preview *pv,
                                   tsr_status (*put)(void *ctx, const uint8_t *rgb), void *ctx) {
  uint8_t *rgb = malloc((size_t)pv->h * pv->up * pv->w * pv->up * 3);
  tsr_status r = rgb ? TSR_OK : err_set(TSR_ENOMEM, "sample: no memory for the preview");
  for (int f = 0; !r && f < pv->frames; f++) {
    sample_preview_frame(pv->lat + (size_t)f * pv->h * pv->w * pv->C, pv->h, pv->w, pv->C, pv->up,
                         pv->lo, pv->hi, rgb);
    r = put(ctx, rgb);
  }
  free(rgb);
  return r;
}

#ifdef TESSERA_HAVE_MEDIA
static tsr_status put_mp4(void *ctx, const uint8_t *rgb) {
  return video_encoder_write_rgb(ctx, rgb);
}

// Writes the clip's tokens as an H.264 MP4 at the frame rate of its store (atomically:
// video_encoder writes PATH.tmp and renames it).
static tsr_status write_mp4(const char *path, const sample_result *s, const preview *pv) {
  encode_opts eo = {.width = s->W * s->mc.pw, .height = s->H * s->mc.ph,
                    .fps_num = s->store.fps_num, .fps_den = s->store.fps_den, .crf = 18};
  if (pv)  // one frame a latent frame, at the latent frame rate
    eo.width = pv->w * pv->up, eo.height = pv->h * pv->up, eo.fps_den *= s->store.vae_t;
  video_encoder *e = NULL;
  tsr_status r = video_encoder_open(&e, path, &eo);
  if (!r) r = pv ? for_each_preview(pv, put_mp4, e) : for_each_frame(s, put_mp4, e);
  if (!r) r = video_encoder_finish(e);
  video_encoder_free(&e);
  return r ? err_wrap(r, "sample: writing %s: ", path) : TSR_OK;
}
#else
static tsr_status write_mp4(const char *path, const sample_result *s, const preview *pv) {
  (void)s, (void)pv;
  return err_set(TSR_EINVAL, "sample: %s: built without media, MP4 cannot be written", path);
}
#endif

typedef struct {
  FILE *f;
  int width, height;
} y4m_sink;

static tsr_status put_y4m(void *ctx, const uint8_t *rgb) {
  y4m_sink *y = ctx;
  return y4m_write_frame_rgb(y->f, rgb, y->width, y->height);
}

// Writes the clip's tokens (or the preview of its latents) as YUV4MPEG2 (tools/y4m.h),
// atomically (PATH.tmp, renamed).
static tsr_status write_y4m(const char *path, const sample_result *s, const preview *pv) {
  fs_atomic a = {0};
  y4m_sink y = {.width = s->W * s->mc.pw, .height = s->H * s->mc.ph};
  int fps_den = s->store.fps_den;
  if (pv) y.width = pv->w * pv->up, y.height = pv->h * pv->up, fps_den *= s->store.vae_t;
  tsr_status r = fs_atomic_open(&a, path);
  if (!r) r = y4m_write_header(y.f = a.f, y.width, y.height, s->store.fps_num, fps_den);
  if (!r) r = pv ? for_each_preview(pv, put_y4m, &y) : for_each_frame(s, put_y4m, &y);
  if (!r) r = fs_atomic_commit(&a);
  fs_atomic_abort(&a);
  return r ? err_wrap(r, "sample: writing %s: ", path) : TSR_OK;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcasecmp(s + n - m, suffix);
}

// Only RGB models can be written as video, and latent models as latents and a preview:
// checked before any sampling.
static tsr_status check_rgb(const char *ckpt) {
  ckpt_meta cm = {0};
  tsr_status r = ckpt_read_meta(ckpt, &cm);
  if (!r && !store_is_latent(&cm.store) && cm.mc.channels != 3)
    r = err_set(TSR_EINVAL, "sample: the model of %s has %d channels; only RGB (3) can be "
                "written as video", ckpt, cm.mc.channels);
  ckpt_meta_free(&cm);
  return r;
}

// path with its .mp4 / .y4m extension replaced by .safetensors, into out (n bytes).
static tsr_status latents_path(const char *path, char *out, size_t n) {
  size_t len = strlen(path), cut = len;
  const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
  if (dot && (!slash || dot > slash)) cut = (size_t)(dot - path);
  if ((size_t)snprintf(out, n, "%.*s.safetensors", (int)cut, path) >= n)
    return err_set(TSR_EINVAL, "--out: path too long");
  return TSR_OK;
}


int cmd_sample(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    sample_usage(stdout);
    return 0;
  }
  enum { O_CKPT = 1, O_FRAMES, O_SIZE, O_OUT, O_LABEL, O_CFG, O_STEPS, O_SEED, O_EMA, O_RAW,
         O_BACKEND, O_PRECISION, O_CAPTION };
  static const struct option opts[] = {
      {"ckpt", required_argument, 0, O_CKPT},   {"frames", required_argument, 0, O_FRAMES},
      {"size", required_argument, 0, O_SIZE},   {"out", required_argument, 0, O_OUT},
      {"label", required_argument, 0, O_LABEL}, {"cfg", required_argument, 0, O_CFG},
      {"steps", required_argument, 0, O_STEPS}, {"seed", required_argument, 0, O_SEED},
      {"ema", no_argument, 0, O_EMA},           {"raw", no_argument, 0, O_RAW},
      {"backend", required_argument, 0, O_BACKEND},
      {"precision", required_argument, 0, O_PRECISION},
      {"caption", required_argument, 0, O_CAPTION}, {0, 0, 0, 0}};
  sample_options o = {.cfg = 1, .steps = 32, .ema = 1, .precision = -1};
  const char *out = NULL;  // the .mp4 path
  const char *backend = "auto";
  backend_choice bc;
  int c, bad = 0;
  double cfg = 1;
  int64_t seed = 0;
  tsr_status r = TSR_OK;
  optind = 1;
  opterr = 0;
  while (!bad && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case O_CKPT: o.ckpt = optarg; break;
    case O_FRAMES: r = parse_int("--frames", optarg, 1, 1 << 20, &o.frames); break;
    case O_SIZE: {
      int used = 0;
      if (sscanf(optarg, "%dx%d%n", &o.height, &o.width, &used) != 2 || optarg[used] ||
          o.height < 1 || o.width < 1 || o.height > 16384 || o.width > 16384)
        r = err_set(TSR_EINVAL, "--size: '%s' is not HxW (pixels, e.g. 64x80)", optarg);
      break;
    }
    case O_OUT: out = optarg; break;
    case O_LABEL: o.label = optarg; break;
    case O_CAPTION: o.caption = optarg; break;
    case O_CFG: r = parse_double("--cfg", optarg, 0, 100, &cfg); break;
    case O_STEPS: r = parse_int("--steps", optarg, 1, 100000, &o.steps); break;
    case O_SEED: r = parse_i64("--seed", optarg, 0, INT64_MAX, &seed); break;
    case O_EMA: o.ema = 1; break;
    case O_RAW: o.ema = 0; break;
    case O_BACKEND: backend = optarg; break;
    case O_PRECISION:
      if (!strcmp(optarg, "fp32")) o.precision = KERNELS_F32;
      else if (!strcmp(optarg, "bf16")) o.precision = KERNELS_BF16;
      else r = err_set(TSR_EINVAL, "--precision '%s': use fp32 or bf16", optarg);
      break;
    default:
      r = err_set(TSR_EINVAL, "unknown option or missing value: '%s' (see --help)",
                  argv[optind - 1]);
    }
    bad = r != TSR_OK;
  }
  if (!r && optind < argc) r = err_set(TSR_EINVAL, "unexpected argument '%s'", argv[optind]);
  const char *missing = !o.ckpt ? "--ckpt FILE" : !o.frames ? "--frames F"
                        : !o.height ? "--size HxW" : !out ? "--out FILE.mp4" : NULL;
  if (!r && missing) r = err_set(TSR_EINVAL, "missing %s (see --help)", missing);
  o.cfg = (float)cfg;
  o.seed = (uint64_t)seed;
#ifndef TESSERA_HAVE_MEDIA
  char y4m_path[4096];
  if (!r && !ends_with(out, ".y4m")) {
    size_t n = strlen(out) - (ends_with(out, ".mp4") ? 4 : 0);
    if (snprintf(y4m_path, sizeof y4m_path, "%.*s.y4m", (int)n, out) >= (int)sizeof y4m_path)
      r = err_set(TSR_EINVAL, "--out: path too long");
    log_warn("sample: this tessera was built without media (FFmpeg): writing YUV4MPEG2 "
             "(4:4:4) to %s instead of MP4", y4m_path);
    out = y4m_path;
  }
#endif
  if (!r) r = backend_choose(backend, &bc);
  o.backend = &bc;
  sample_result res = {0};
  if (!r) r = check_rgb(o.ckpt);
  if (!r) r = sample_run(&o, &res);
  preview pv = {0}, *pvp = NULL;
  float *lat = NULL;
  if (!r && store_is_latent(&res.store)) {  // the latents, then their preview
    const store_settings *st = &res.store;
    char lpath[4200], vae[32];
    snprintf(vae, sizeof vae, "%dx%dx%d", st->vae_t, st->vae_s, st->vae_s);
    const char *extra[] = {"sampled_from", o.ckpt, "caption_text", res.caption};
    pv = (preview){.frames = res.T * res.mc.pt, .h = res.H * res.mc.ph, .w = res.W * res.mc.pw,
                   .C = res.mc.channels, .up = st->vae_s < 2 ? 2 : (st->vae_s + 1) / 2 * 2};
    r = latents_path(out, lpath, sizeof lpath);
    if (!r) r = sample_latents(&res, &lat);
    if (!r)
      r = latent_file_write(lpath, lat, pv.frames, pv.h, pv.w, pv.C, st->fps_num, st->fps_den,
                            st->vae_t, st->vae_s, NULL, extra, res.caption[0] ? 2 : 1);
    if (!r) {
      pv.lat = lat;
      sample_preview_range(lat, (size_t)pv.frames * pv.h * pv.w, pv.C, pv.lo, pv.hi);
      pvp = &pv;
      log_info("sample: wrote the latents to %s (%d x %d x %d x %d: decode them with the VAE "
               "that encoded the store); %s is a PREVIEW of latent channels %s as red, green, "
               "blue, each stretched over its 0.5..99.5%% range, not the decoded video", lpath,
               pv.frames, pv.h, pv.w, pv.C, out, pv.C >= 3 ? "0, 1, 2" : "0 (grey)");
    }
  }
  if (!r) r = ends_with(out, ".y4m") ? write_y4m(out, &res, pvp) : write_mp4(out, &res, pvp);
  if (!r) log_info("sample: wrote %s", out);
  free(lat);
  sample_result_free(&res);
  if (r) log_error("tessera sample: %s", err_msg());
  return r ? 1 : 0;
}
