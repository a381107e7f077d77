// tools/cmd_sample.c — `tessera sample`: a video from a checkpoint (docs/train.md).
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <stdlib.h>

#include "core/err.h"
#include "core/fs.h"
#include "core/log.h"
#include "store/latent_file.h"
#include "model/io/checkpoint.h"
#include "model/sample/sample.h"
#include "tools/backend.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/opt.h"
#include "tools/parse.h"
#include "tools/prompt_embed.h"
#include "tools/sample_defaults.h"
#include "tools/video.h"

enum { O_CKPT = 1, O_FRAMES, O_SIZE, O_OUT, O_LABEL, O_CFG, O_STEPS, O_SEED, O_EMA, O_RAW,
       O_BACKEND, O_PRECISION, O_CAPTION, O_NEGATIVE, O_SCHEDULE, O_SHIFT, O_NOISE,
       O_LATENTS_OUT, O_SOLVER, O_CKPT2, O_BOUNDARY, O_CFG2,
       O_PROMPT, O_PROMPTS, O_ENCODER, O_CHUNKED, O_NO_KV_CACHE };

// The options, in the order of --help (tools/opt.h).
static const opt_def sample_opts[] = {
    OPT("ckpt", "FILE", O_CKPT, NULL, "checkpoint (RUN/ckpt-STEP.safetensors)"),
    OPT("frames", "F", O_FRAMES, NULL,
        "frames, a multiple of the model's tubelet frames (pt); default:\n"
        "2 s at the checkpoint's store's frame rate"),
    OPT("size", "HxW", O_SIZE, NULL,
        "height x width in pixels, multiples of the patch (ph, pw);\n"
        "default: the store's short side high, 16:9 (a pixel store's)"),
    OPT("out", "FILE.mp4", O_OUT, NULL, "output video (written to FILE.mp4.tmp, then renamed)"),
    OPT("label", "L", O_LABEL, NULL, "class id or name (class-conditional models)"),
    OPT("caption", "FILE", O_CAPTION, NULL,
        "caption embedding (safetensors with text_emb (N, text_dim), from\n"
        "the text encoder the model was trained with; models with captions)"),
    OPT("prompt", "TEXT", O_PROMPT, NULL,
        "a text prompt (repeatable: one video each), embedded with the\n"
        "encoder the checkpoint's store recorded by tools/embed_captions.py\n"
        "in the venv (tools/setup_venv.sh), then sampled as --caption;\n"
        "several: OUT gets -K before its extension (K = 1, 2, ...)"),
    OPT("prompts", "FILE", O_PROMPTS, NULL,
        "prompts one a line (blank lines skipped), as --prompt each"),
    OPT("encoder", "E", O_ENCODER, NULL,
        "the prompts' encoder, minilm or hf:PATH (default: the\n"
        "checkpoint's; needed when it records none)"),
    OPT("negative", "FILE", O_NEGATIVE, NULL,
        "caption embedding of guidance's unconditional half (as --caption;\n"
        "Wan's pipeline: the empty prompt's, padded; default: no caption)"),
    OPT("cfg", "S", O_CFG, NULL,
        "classifier-free guidance scale (default 1: none; needs --label,\n"
        "--caption or --negative: compared with no label and no caption,\n"
        "or with the --negative caption)"),
    OPT("steps", "N", O_STEPS, NULL, "Euler steps (default 32)"),
    OPT("seed", "S", O_SEED, NULL, "noise seed (default 0)"),
    OPT("schedule", "K", O_SCHEDULE, NULL,
        "noise levels of the steps: tessera (default: the training shift of\n"
        "the checkpoint on an even grid) or wan (diffusers'\n"
        "FlowMatchEulerDiscreteScheduler with --shift, as WanPipeline)"),
    OPT("shift", "S", O_SHIFT, NULL, "the wan schedule's shift (default 5)"),
    OPT("solver", "K", O_SOLVER, NULL,
        "euler (default) or unipc: diffusers' UniPCMultistepScheduler as\n"
        "Wan's pipeline configures it (flow sigmas with --shift, order 2,\n"
        "bh2 predictor-corrector; needs --schedule wan)"),
    OPT("chunked", NULL, O_CHUNKED, NULL,
        "a block_causal model chunk by chunk: each chunk of model.mask_chunk\n"
        "latent frames denoised after the ones before it, those as clean\n"
        "context (autoregressive generation)"),
    OPT("no-kv-cache", NULL, O_NO_KV_CACHE, NULL,
        "with --chunked: recompute the context chunks' keys and values in\n"
        "every step instead of caching them (the cache's reference; K\n"
        "chunks cost K(K+1)/2 chunk forwards a step instead of K)"),
    OPT("ckpt2", "FILE", O_CKPT2, NULL,
        "a second expert of the same shape (Wan 2.2 A14B's transformer_2,\n"
        "the low-noise one): it runs the steps whose timestep is below\n"
        "--boundary x 1000, --ckpt the others"),
    OPT("boundary", "R", O_BOUNDARY, NULL,
        "the experts' boundary_ratio (default 0.875: Wan 2.2 T2V-A14B's)"),
    OPT("cfg2", "S", O_CFG2, NULL,
        "guidance scale of the second expert's steps (guidance_scale_2;\n"
        "default: --cfg)"),
    OPT("noise", "FILE", O_NOISE, NULL,
        "starting noise from a latent file (latents (T, H, W, C) f32/bf16:\n"
        "--frames x --size in latent pixels x model.channels) instead of\n"
        "--seed's"),
    OPT("latents-out", "FILE", O_LATENTS_OUT, NULL,
        "also write the final values as a latent file (latents\n"
        "(T, H, W, C) f32, the layout of --noise)"),
    OPT_AS("--ema, --raw", "ema", NULL, O_EMA, NULL,
        "EMA weights (default) or the raw trained weights"),
    OPT("raw", NULL, O_RAW, NULL, NULL),  // listed with --ema
    OPT("backend", "B", O_BACKEND, NULL,
        "compute device: cpu, cuda or auto (default: cuda when built and a\n"
        "GPU is visible, else cpu)"),
    OPT("precision", "P", O_PRECISION, NULL,
        "activations in fp32 or bf16 (default: the checkpoint's\n"
        "train.precision; the weights are fp32 either way)"),
    OPT_HELP_ROW,
    OPT_END};

void cmd_sample_usage(FILE *f) {
  fprintf(f,
    "usage: tessera sample --ckpt FILE [--frames F] [--size HxW] --out FILE.mp4 [--label L]\n"
    "                      [--caption FILE | --prompt TEXT... | --prompts FILE]\n"
    "                      [--encoder minilm|hf:PATH] [--negative FILE] [--cfg S] [--steps N] [--seed S]\n"
    "                      [--schedule tessera|wan] [--shift S] [--solver euler|unipc] [--chunked]\n"
    "                      [--ckpt2 FILE [--boundary R] [--cfg2 S]] [--noise FILE]\n"
    "                      [--latents-out FILE] [--ema | --raw] [--backend B]\n"
    "                      [--precision fp32|bf16]\n\n"
    "Generates a clip by Euler integration of the learned flow from noise and writes it as\n"
    "H.264 at the frame rate of the store the checkpoint was trained on. Details:\n"
    "docs/train.md. An --out ending in .y4m is written as YUV4MPEG2 (4:4:4, BT.601)\n"
    "instead; a tessera built without media (FFmpeg) always writes Y4M, to FILE.y4m.\n\n"
    "A model trained on VAE latents (tessera ingest --latents) samples latents: --frames\n"
    "and --size count latent frames and latent rows x columns; the latents go to FILE's\n"
    "name with .safetensors (a latent file for your VAE's decoder:\n"
    "tools/reference/encode_latents.py decode) and FILE.mp4 gets a PREVIEW: latent\n"
    "channels 0, 1, 2 as red, green, blue, each stretched over its range in the clip, each\n"
    "latent pixel a VAE-stride square, one frame a latent frame (not the decoded video).\n\n");
  opt_help(f, sample_opts, 17);
}

// Only RGB models can be written as video, and latent models as latents and a preview:
// checked before any sampling.
static tsr_status check_rgb(const char *ckpt) {
  ckpt_meta cm = {0};
  tsr_status st = ckpt_read_meta(ckpt, &cm);
  if (!st && !store_is_latent(&cm.store) && cm.mc.channels != 3)
    st = err_set(TSR_EINVAL, "the model of %s has %d channels; only RGB (3) can be "
                 "written as video", ckpt, cm.mc.channels);
  ckpt_meta_free(&cm);
  return st;
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


// --latents-out: the sampled values (latents, or pixels in [-1, 1]) as a latent file, the
// layout --noise reads, with the store's frame rate and VAE strides (1 for pixels).
static tsr_status write_latents_out(const char *path, const char *ckpt, const sample_result *res) {
  const store_settings *ss = &res->store;
  float *lat = NULL;
  const char *extra[] = {"sampled_from", ckpt};
  tsr_status st = sample_latents(res, &lat);
  if (!st)
    st = latent_file_write(path, lat, res->T * res->mc.pt, res->H * res->mc.ph,
                           res->W * res->mc.pw, res->mc.channels, ss->fps_num, ss->fps_den,
                           ss->vae_t > 0 ? ss->vae_t : 1, ss->vae_s > 0 ? ss->vae_s : 1, NULL,
                           extra, 1);
  if (!st) log_info("sample: wrote the final values to %s", path);
  free(lat);
  return st;
}

// --prompt (each optarg, n of them), --prompts and --encoder.
typedef struct {
  char **prompt;  // (n) argv's strings (the array malloc'ed)
  int n;
  const char *file, *encoder;
} prompt_args;

// Parses argv into *o, *out, *backend and *pa; TSR_EINVAL naming the problem otherwise.
static tsr_status parse_args(int argc, char **argv, sample_options *o, const char **out,
                             const char **backend, const char **latents_out, prompt_args *pa) {
  static const int size_hi[2] = {16384, 16384};
  int c, hw[2];
  double cfg = 1, cfg2 = NAN;
  int64_t seed = 0;
  int boundary_given = 0;
  tsr_status st = TSR_OK;
  opt_parser op;
  opt_begin(&op, sample_opts, argc, argv);
  while (!st && (c = opt_next(&op)) != -1) {
    switch (c) {
    case O_CKPT: o->ckpt = optarg; break;
    case O_FRAMES: st = parse_int("--frames", optarg, 1, 1 << 20, &o->frames); break;
    case O_SIZE:
      if (parse_dims(optarg, "x", 2, size_hi, hw))
        st = err_set(TSR_EINVAL, "--size '%s': not HxW in pixels (e.g. 64x80, each 1..16384)",
                     optarg);
      else o->height = hw[0], o->width = hw[1];
      break;
    case O_OUT: *out = optarg; break;
    case O_LABEL: o->label = optarg; break;
    case O_CAPTION: o->caption = optarg; break;
    case O_NEGATIVE: o->negative = optarg; break;
    case O_NOISE: o->noise = optarg; break;
    case O_LATENTS_OUT: *latents_out = optarg; break;
    case O_SHIFT: st = parse_double("--shift", optarg, 1e-3, 1e3, &o->shift); break;
    case O_SCHEDULE:
      if (!strcmp(optarg, "tessera")) o->schedule = SAMPLE_SCHEDULE_TESSERA;
      else if (!strcmp(optarg, "wan")) o->schedule = SAMPLE_SCHEDULE_WAN;
      else st = err_set(TSR_EINVAL, "--schedule '%s': use tessera or wan", optarg);
      break;
    case O_CFG: st = parse_double("--cfg", optarg, 0, 100, &cfg); break;
    case O_SOLVER:
      if (!strcmp(optarg, "euler")) o->solver = SAMPLE_SOLVER_EULER;
      else if (!strcmp(optarg, "unipc")) o->solver = SAMPLE_SOLVER_UNIPC;
      else st = err_set(TSR_EINVAL, "--solver '%s': use euler or unipc", optarg);
      break;
    case O_CKPT2: o->ckpt2 = optarg; break;
    case O_CHUNKED: o->chunked = 1; break;
    case O_NO_KV_CACHE: o->no_kv_cache = 1; break;
    case O_PROMPT: {
      char **g = realloc(pa->prompt, (size_t)(pa->n + 1) * sizeof *g);
      if (!g) st = err_set(TSR_ENOMEM, "out of memory");
      else pa->prompt = g, pa->prompt[pa->n++] = optarg;
      break;
    }
    case O_PROMPTS: pa->file = optarg; break;
    case O_ENCODER: pa->encoder = optarg; break;
    case O_BOUNDARY:
      st = parse_double("--boundary", optarg, 1e-6, 1, &o->boundary);
      boundary_given = 1;
      break;
    case O_CFG2: st = parse_double("--cfg2", optarg, 0, 100, &cfg2); break;
    case O_STEPS: st = parse_int("--steps", optarg, 1, 100000, &o->steps); break;
    case O_SEED: st = parse_i64("--seed", optarg, 0, INT64_MAX, &seed); break;
    case O_EMA: o->ema = 1; break;
    case O_RAW: o->ema = 0; break;
    case O_BACKEND: *backend = optarg; break;
    case O_PRECISION: {
      kernels_dtype kd;
      if (!(st = parse_dtype("--precision", optarg, &kd))) o->precision = (int)kd;
      break;
    }
    default: st = TSR_EINVAL;  // opt_next said why
    }
  }
  if (!st) st = cli_positionals(argc, argv, 0, 0, "");
  // --frames and --size default to the checkpoint's store's (tools/sample_defaults.h)
  const char *missing = !o->ckpt ? "--ckpt FILE" : !*out ? "--out FILE.mp4" : NULL;
  if (!st && missing) st = err_set(TSR_EINVAL, "missing %s", missing);
  if (!st && !o->ckpt2 && (boundary_given || !isnan(cfg2)))
    st = err_set(TSR_EINVAL, "%s: only with --ckpt2 (the second expert)",
                 boundary_given ? "--boundary" : "--cfg2");
  if (!st && pa->n && pa->file) st = err_set(TSR_EINVAL, "--prompt and --prompts: give one");
  if (!st && o->caption && (pa->n || pa->file))
    st = err_set(TSR_EINVAL, "--caption with --prompt/--prompts: give the text or its embedding");
  if (!st && pa->encoder && !pa->n && !pa->file)
    st = err_set(TSR_EINVAL, "--encoder: only with --prompt or --prompts");
  o->cfg = (float)cfg;
  o->cfg2 = (float)cfg2;
  o->seed = (uint64_t)seed;
  return st;
}


// One video from o (its caption o->caption, if any) to out and latents_out (may be NULL).
static tsr_status sample_one(sample_options *o, const char *out, const char *latents_out) {
  sample_result res = {0};
  // --out must be a new name or a regular file (core/fs.h), checked before any sampling
  tsr_status st = fs_check_output(out);
  if (!st && latents_out) st = fs_check_output(latents_out);
  if (!st) st = check_rgb(o->ckpt);
  if (!st) st = sample_fill_defaults(o);
  if (!st) st = sample_run(o, &res);
  float *lat = NULL;
  if (!st && store_is_latent(&res.store)) {  // the latents; video_write makes their preview
    const store_settings *ss = &res.store;
    char lpath[4200];
    const char *extra[] = {"sampled_from", o->ckpt, "caption_text", res.caption};
    int frames = res.T * res.mc.pt, h = res.H * res.mc.ph, w = res.W * res.mc.pw;
    st = latents_path(out, lpath, sizeof lpath);
    if (!st) st = sample_latents(&res, &lat);
    if (!st)
      st = latent_file_write(lpath, lat, frames, h, w, res.mc.channels, ss->fps_num, ss->fps_den,
                             ss->vae_t, ss->vae_s, NULL, extra, res.caption[0] ? 2 : 1);
    if (!st)
      log_info("sample: wrote the latents to %s (%d x %d x %d x %d: decode them with the VAE "
               "that encoded the store); %s is a PREVIEW of latent channels %s as red, green, "
               "blue, each stretched over its 0.5..99.5%% range, not the decoded video", lpath,
               frames, h, w, res.mc.channels, out, res.mc.channels >= 3 ? "0, 1, 2" : "0 (grey)");
  }
  if (!st && latents_out) st = write_latents_out(latents_out, o->ckpt, &res);
  if (!st) st = video_write(out, &res);
  if (!st) log_info("sample: wrote %s", out);
  free(lat);
  sample_result_free(&res);
  return st;
}

// path with "-K" before its extension (out.mp4 -> out-3.mp4) into buf (n bytes).
static tsr_status indexed_path(const char *path, int k, char *buf, size_t n) {
  const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
  size_t cut = dot && (!slash || dot > slash + 1) ? (size_t)(dot - path) : strlen(path);
  if ((size_t)snprintf(buf, n, "%.*s-%d%s", (int)cut, path, k, path + cut) >= n)
    return err_set(TSR_EINVAL, "--out '%s': path too long", path);
  return TSR_OK;
}

// --prompt/--prompts: the texts embedded in one run of the encoder script, then one video
// each as --caption would make it (several: OUT and --latents-out indexed from 1).
static tsr_status sample_prompts(sample_options *o, const prompt_args *pa, const char *out,
                                 const char *latents_out) {
  char **texts = pa->prompt, **owned = NULL;
  int n = pa->n;
  ckpt_meta cm = {0};
  prompt_set ps = {0};
  tsr_status st = pa->file ? prompts_read_file(pa->file, "--prompts", &owned, &n) : TSR_OK;
  if (owned) texts = owned;
  if (!st) st = ckpt_read_meta(o->ckpt, &cm);
  if (!st && cm.mc.text_dim == 0)
    st = err_set(TSR_EINVAL, "--prompt: the model of %s has no captions (model.text_dim 0)",
                 o->ckpt);
  char vo[4200], lo[4200];
  // every output checked before the encoder runs (seconds) and the first video is sampled
  for (int k = 0; !st && n > 1 && k < n; k++) {
    st = indexed_path(out, k + 1, vo, sizeof vo);
    if (!st) st = fs_check_output(vo);
    if (!st && latents_out) st = indexed_path(latents_out, k + 1, lo, sizeof lo);
    if (!st && latents_out) st = fs_check_output(lo);
  }
  char src[4200];
  snprintf(src, sizeof src, "checkpoint %s", o->ckpt);
  if (!st)
    st = prompt_embed(texts, n, cm.caption_encoder, pa->encoder, src, "pass --encoder minilm or "
                      "--encoder hf:PATH, the encoder its captions were embedded with", &ps);
  for (int k = 0; !st && k < n; k++) {
    sample_options ok = *o;
    ok.caption = ps.file[k];
    if (n > 1) st = indexed_path(out, k + 1, vo, sizeof vo);
    if (!st && n > 1 && latents_out) st = indexed_path(latents_out, k + 1, lo, sizeof lo);
    if (!st) log_info("sample: prompt %d of %d: %s", k + 1, n, texts[k]);
    if (!st) st = sample_one(&ok, n > 1 ? vo : out, n > 1 && latents_out ? lo : latents_out);
  }
  prompt_set_free(&ps);
  ckpt_meta_free(&cm);
  prompts_free(owned, owned ? n : 0);
  return st;
}

int cmd_sample(int argc, char **argv) {
  sample_options o = {.cfg = 1, .steps = 32, .ema = 1, .precision = -1, .shift = 5.0,
                      .boundary = 0.875, .cfg2 = NAN};
  const char *out = NULL, *latents_out = NULL;
  const char *backend = "auto";
  backend_choice bc;
  prompt_args pa = {0};
  if (parse_args(argc, argv, &o, &out, &backend, &latents_out, &pa)) {
    free(pa.prompt);
    return cli_usage_error("sample");
  }
  char y4m_path[4096];
  if (!fs_has_suffix_nocase(out, ".y4m") && strcmp(video_default_ext(), "y4m") == 0) {
    size_t n = strlen(out) - (fs_has_suffix_nocase(out, ".mp4") ? 4 : 0);
    if (snprintf(y4m_path, sizeof y4m_path, "%.*s.y4m", (int)n, out) >= (int)sizeof y4m_path) {
      err_set(TSR_EINVAL, "--out '%s': path too long", out);
      free(pa.prompt);
      return cli_usage_error("sample");
    }
    log_warn("sample: this tessera was built without media (FFmpeg): writing YUV4MPEG2 "
             "(4:4:4) to %s instead of MP4", y4m_path);
    out = y4m_path;
  }
  if (backend_choose(backend, &bc)) {
    free(pa.prompt);
    return cli_usage_error("sample");
  }
  o.backend = &bc;
  tsr_status st = pa.n || pa.file ? sample_prompts(&o, &pa, out, latents_out)
                                  : sample_one(&o, out, latents_out);
  free(pa.prompt);
  return st ? cli_error("sample") : 0;
}
