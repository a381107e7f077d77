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
    "                      [--cfg S] [--steps N] [--seed S] [--ema | --raw]\n"
    "                      [--backend B] [--precision fp32|bf16]\n\n"
    "Generates a clip by Euler integration of the learned flow from noise and writes it as\n"
    "H.264 at the frame rate of the store the checkpoint was trained on. Details:\n"
    "docs/train.md. An --out ending in .y4m is written as YUV4MPEG2 (4:4:4, BT.601)\n"
    "instead; a tessera built without media (FFmpeg) always writes Y4M, to FILE.y4m.\n\n"
    "  --ckpt FILE      checkpoint (RUN/ckpt-STEP.safetensors)\n"
    "  --frames F       frames, a multiple of the model's tubelet frames (pt)\n"
    "  --size HxW       height x width in pixels, multiples of the patch (ph, pw)\n"
    "  --out FILE.mp4   output video (written to FILE.mp4.tmp, then renamed)\n"
    "  --label L        class id or name (class-conditional models)\n"
    "  --cfg S          classifier-free guidance scale (default 1: none; needs --label)\n"
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

#ifdef TESSERA_HAVE_MEDIA
static tsr_status put_mp4(void *ctx, const uint8_t *rgb) {
  return video_encoder_write_rgb(ctx, rgb);
}

// Writes the clip's tokens as an H.264 MP4 at the frame rate of its store (atomically:
// video_encoder writes PATH.tmp and renames it).
static tsr_status write_mp4(const char *path, const sample_result *s) {
  encode_opts eo = {.width = s->W * s->mc.pw, .height = s->H * s->mc.ph,
                    .fps_num = s->store.fps_num, .fps_den = s->store.fps_den, .crf = 18};
  video_encoder *e = NULL;
  tsr_status r = video_encoder_open(&e, path, &eo);
  if (!r) r = for_each_frame(s, put_mp4, e);
  if (!r) r = video_encoder_finish(e);
  video_encoder_free(&e);
  return r ? err_wrap(r, "sample: writing %s: ", path) : TSR_OK;
}
#else
static tsr_status write_mp4(const char *path, const sample_result *s) {
  (void)s;
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

// Writes the clip's tokens as YUV4MPEG2 (tools/y4m.h), atomically (PATH.tmp, renamed).
static tsr_status write_y4m(const char *path, const sample_result *s) {
  fs_atomic a = {0};
  y4m_sink y = {.width = s->W * s->mc.pw, .height = s->H * s->mc.ph};
  tsr_status r = fs_atomic_open(&a, path);
  if (!r) r = y4m_write_header(y.f = a.f, y.width, y.height, s->store.fps_num, s->store.fps_den);
  if (!r) r = for_each_frame(s, put_y4m, &y);
  if (!r) r = fs_atomic_commit(&a);
  fs_atomic_abort(&a);
  return r ? err_wrap(r, "sample: writing %s: ", path) : TSR_OK;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcasecmp(s + n - m, suffix);
}

// Only RGB models can be written as video: checked before any sampling.
static tsr_status check_rgb(const char *ckpt) {
  ckpt_meta cm = {0};
  tsr_status r = ckpt_read_meta(ckpt, &cm);
  if (!r && cm.mc.channels != 3)
    r = err_set(TSR_EINVAL, "sample: the model of %s has %d channels; only RGB (3) can be "
                "written as video", ckpt, cm.mc.channels);
  ckpt_meta_free(&cm);
  return r;
}

int cmd_sample(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    sample_usage(stdout);
    return 0;
  }
  enum { O_CKPT = 1, O_FRAMES, O_SIZE, O_OUT, O_LABEL, O_CFG, O_STEPS, O_SEED, O_EMA, O_RAW,
         O_BACKEND, O_PRECISION };
  static const struct option opts[] = {
      {"ckpt", required_argument, 0, O_CKPT},   {"frames", required_argument, 0, O_FRAMES},
      {"size", required_argument, 0, O_SIZE},   {"out", required_argument, 0, O_OUT},
      {"label", required_argument, 0, O_LABEL}, {"cfg", required_argument, 0, O_CFG},
      {"steps", required_argument, 0, O_STEPS}, {"seed", required_argument, 0, O_SEED},
      {"ema", no_argument, 0, O_EMA},           {"raw", no_argument, 0, O_RAW},
      {"backend", required_argument, 0, O_BACKEND},
      {"precision", required_argument, 0, O_PRECISION}, {0, 0, 0, 0}};
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
  if (!r) r = ends_with(out, ".y4m") ? write_y4m(out, &res) : write_mp4(out, &res);
  if (!r) log_info("sample: wrote %s", out);
  sample_result_free(&res);
  if (r) log_error("tessera sample: %s", err_msg());
  return r ? 1 : 0;
}
