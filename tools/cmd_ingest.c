// tools/cmd_ingest.c — `tessera ingest SRC... --out STORE [options]`.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "comm/comm.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/term.h"
#include "ingest/ingest.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/manifest_cli.h"
#include "tools/opt.h"
#include "tools/parse.h"
#include "store/caption_encoder.h"
#include "tools/sidecar.h"
#include "store/store.h"

enum { O_OUT = 1, O_FPS, O_SHORT, O_PATCH, O_MAXS, O_WORKERS, O_LABEL, O_RETRY, O_MAXPIX, O_QUIET,
       O_LATENTS, O_DTYPE, O_CAPTIONS, O_MANIFEST, O_EMBEDDINGS, O_SCENES, O_SCENE_T,
       O_MIN_SHOT, O_CAPTIONS_FROM, O_CAPTION_ENCODER, O_CAPTION_DIR };

// The options, in the order of --help (tools/opt.h).
static const opt_def ingest_opts_table[] = {
    OPT("out", "STORE", O_OUT, NULL, "store directory (created if missing)           [required]"),
    OPT("fps", "N[/D]", O_FPS, NULL, "target frame rate, 1/3600..240                  [8]"),
    OPT("short-side", "PX", O_SHORT, NULL,
        "short side after resize, before crop, 8..4096   [128]"),
    OPT("patch", "PTxPHxPW", O_PATCH, NULL,
        "tubelet: frames x height x width, each 1..64    [2x16x16;\n"
        "                                    latents: 1x2x2]"),
    OPT("max-seconds", "S", O_MAXS, NULL,
        "cut longer videos into clips of at most S s,\n"
        "0..86400                                       [0: no cut]"),
    OPT("workers", "N", O_WORKERS, NULL, "sources decoded in parallel per rank, 1..1024  [cores]"),
    OPT("label-from-dir", NULL, O_LABEL, NULL, "record the parent folder's name as class label"),
    OPT("captions", NULL, O_CAPTIONS, NULL,
        "a caption file VIDEO.caption.safetensors beside a video\n"
        "(text_emb (N, D) bf16/f32, metadata 'caption') is stored\n"
        "as its clips' caption"),
    OPT("captions-from", "EXT", O_CAPTIONS_FROM, NULL,
        "a caption as text NAME.EXT beside each video NAME.mp4\n"
        "(e.g. txt), embedded in one pass by tools/embed_captions.py\n"
        "(the venv's python; docs/captions.md) and stored as\n"
        "--captions stores a caption file"),
    OPT("caption-encoder", "E", O_CAPTION_ENCODER, NULL,
        "its encoder: minilm or hf:PATH                 [minilm]"),
    OPT("caption-dir", "DIR", O_CAPTION_DIR, NULL,
        "where the embedded captions are kept for reruns\n"
        "                                   [STORE.captions]"),
    OPT("retry-failed", NULL, O_RETRY, NULL, "retry sources recorded as failed"),
    OPT("max-pixels", "N", O_MAXPIX, NULL,
        "refuse videos larger than N pixels per frame   [67108864]"),
    OPT("quiet", NULL, O_QUIET, NULL, "no progress line"),
    OPT_HEADING(
        "\n"
        "latents (--latents): SRC are latent files of a video VAE (safetensors with a\n"
        "(T, H, W, C) tensor 'latents'; docs/store-format.md, tools/reference/\n"
        "encode_latents.py), directories searched for *.safetensors; no media needed.\n"
        "Their frame rate, VAE stride and channels come from the files (all must agree);\n"
        "the patch tiles latent frames x rows x columns; a file's optional caption\n"
        "embedding (text_emb) is stored with its clips.\n"),
    OPT("latents", NULL, O_LATENTS, NULL, "the sources are latent files"),
    OPT("dtype", "T", O_DTYPE, NULL, "latent store values: bf16 or fp32                [bf16]"),
    OPT_HEADING(
        "\n"
        "manifest (--manifest FILE, no SRC): the sources are the spans of a clip manifest\n"
        "(CSV, TSV or JSONL; docs/manifest.md): each span decoded as `ffmpeg -ss START -to\n"
        "END` cuts it, one clip per span (more past --max-seconds or at a scene cut), with\n"
        "its row, span, caption and scores in the index. Rows of one video must be\n"
        "consecutive. The filters are recorded in the store. A rerun resumes by row.\n"),
    OPT("manifest", "FILE", O_MANIFEST, NULL, "the clip manifest"),
    MANIFEST_CLI_OPTS,
    OPT("caption-embeddings", "DIR", O_EMBEDDINGS, NULL,
        "per-span caption files R-K.caption.safetensors\n"
        "(tools/embed_captions.py) stored as the clips' captions"),
    OPT_HEADING(
        "\n"
        "scene cuts (videos): a clip ends at a shot boundary found in the decoded frames\n"
        "(docs/ingest.md), the cut times recorded per source.\n"),
    OPT("scene-cuts", NULL, O_SCENES, NULL, "find shot boundaries"),
    OPT("scene-threshold", "T", O_SCENE_T, NULL,
        "score that makes a cut, 0..255                     [27]"),
    OPT("min-shot-seconds", "S", O_MIN_SHOT, NULL,
        "shortest shot                             [15 frames]"),
    OPT_END};

void cmd_ingest_usage(FILE *f) {
  fprintf(f,
          "usage: tessera ingest SRC... --out STORE [options]\n"
          "       tessera ingest --latents SRC... --out STORE [--patch P] [--dtype bf16|fp32]\n\n"
          "Decodes every video, resamples it to --fps, resizes it (short side --short-side,\n"
          "square pixels, display rotation applied), centre-crops to multiples of the patch,\n"
          "cuts it into tubelet tokens and writes them to STORE (shards + SQLite index).\n"
          "SRC is a file, a directory (searched recursively for video files) or @LIST (a\n"
          "text file with one path per line). A rerun skips sources already done (same path,\n"
          "size and mtime) and finishes an interrupted run. Run under `mpirun -np N` to\n"
          "split the sources across ranks; the result is one store.\n\n"
          "options:\n");
  opt_help(f, ingest_opts_table, 21);
  fprintf(f, "\n"
          "The settings (fps, short side, patch, max seconds; for latents also dtype and the\n"
          "VAE stride) are fixed when the store is created; ingesting into it with other\n"
          "settings is refused.\n"
          "exit status: 0 all sources done, 2 some sources failed (listed) or manifest rows\n"
          "had errors, 1 fatal error\n");
#ifndef TESSERA_HAVE_MEDIA
  fprintf(f, "\nThis tessera was built without media (FFmpeg): only --latents is available.\n");
#endif
}

typedef struct {
  int nfailed;
} failed_ctx;

static int print_failed(const char *path, const char *error, void *arg) {
  failed_ctx *c = arg;
  char shown[TERM_ESCAPE_SIZE(4096)];  // the reason names the source: escaped (core/term.h)
  if (c->nfailed++ < 50)
    fprintf(stderr, "  failed: %s\n", term_escape(shown, sizeof shown, error && *error ? error : path));
  return 0;
}

// What a manifest ingest read, kept, filtered and could not use, with the reasons.
static void print_manifest_counts(const ingest_result *r) {
  fprintf(stderr, "manifest: %lld rows; %lld spans passed the filter's checks on the rows, "
          "%lld filtered (on the rows or once the video was open), %lld gave no clip; %lld bad "
          "rows or fields\n", (long long)r->rows, (long long)r->spans_kept,
          (long long)r->spans_filtered, (long long)r->spans_failed, (long long)r->errors);
  manifest_tally_print(stderr, &r->filtered_by, "filtered by reason");
  manifest_tally_print(stderr, &r->errors_by, "errors by reason");
}

// Rank 0's summary of the run (and the failed sources); the exit status.
static int summarize(const char *out, int existed, const ingest_result *r) {
  ingest_result res = *r;
  if (comm_rank() != 0) return res.sources_failed + res.sources_failed_kept || res.errors ? 2 : 0;
  double fps = res.seconds > 0 ? res.decoded_frames / res.seconds : 0;
  fprintf(stderr,
          "ingest: %lld sources: %lld done (%lld partial), %lld failed, %lld skipped as already "
          "in the store; %lld clips, %lld tokens, %lld frames stored; %.1f s, %.0f source "
          "frames/s\n",
          (long long)res.sources_total, (long long)res.sources_done, (long long)res.sources_partial,
          (long long)res.sources_failed, (long long)res.sources_skipped, (long long)res.clips,
          (long long)res.tokens, (long long)res.output_frames, res.seconds, fps);
  if (res.rows || res.errors) print_manifest_counts(&res);
  if (res.scene_cuts) fprintf(stderr, "ingest: %lld scene cuts\n", (long long)res.scene_cuts);
  if (res.sources_failed + res.sources_failed_kept) {
    store_index *ix = NULL;
    failed_ctx fc = {0};
    if (!store_open(&ix, out, 0, NULL)) {
      fprintf(stderr, "failed sources in %s (rerun with --retry-failed to try them again):\n", out);
      index_foreach_failed(ix, print_failed, &fc);
      if (fc.nfailed > 50) fprintf(stderr, "  ... and %d more\n", fc.nfailed - 50);
      index_close(&ix);
    }
    if (!existed && res.clips == 0)
      log_warn("ingest: store %s was created by this run and holds no clip, only the record "
               "of the failed sources above: fix them and rerun with --retry-failed, or "
               "remove %s", out, out);
    return 2;
  }
  return res.errors ? 2 : 0;
}

// --captions-from EXT (and its --caption-encoder, --caption-dir): videos only, and not with
// --captions; sets o's caption source (its map filled by sidecar_embed).
static tsr_status sidecar_options(const char *ext, const char *encoder, const char *dir,
                                  ingest_opts *o, int not_videos) {
  if (!ext && (encoder || dir))
    return err_set(TSR_EINVAL, "--caption-encoder and --caption-dir are for --captions-from EXT");
  if (!ext) return TSR_OK;
  if (!*ext || strchr(ext, '/') || ext[0] == '.')
    return err_set(TSR_EINVAL, "--captions-from '%s': give the extension alone, e.g. txt", ext);
  if (o->captions || not_videos)
    return err_set(TSR_EINVAL, "--captions-from is for videos and takes the place of --captions "
                   "(not with --captions, --latents or --manifest)");
  o->captions = 1;
  o->caption_path = sidecar_caption_path;
  return TSR_OK;
}

int cmd_ingest(int argc, char **argv) {
  ingest_opts o = {
      .settings = {.fps_num = 8, .fps_den = 1, .short_side = 128, .pt = 2, .ph = 16, .pw = 16,
                   .channels = 3, .dtype = STORE_DTYPE_U8, .max_seconds = 0},
      .workers = 0, .max_pixels = 8192LL * 8192, .progress = 1};
  const char *out = NULL;
  int latents = 0, pixel_opt = 0;  // --latents; an option that only pixels take was given
  int patch_given = 0, dtype_given = 0, maxs_given = 0;
  store_dtype latent_dtype = STORE_DTYPE_BF16;
  kernels_dtype kd;
  ingest_manifest mf = {0};
  int manifest_opt = 0;  // a manifest option was given
  const char *captions_from = NULL, *caption_encoder = NULL, *caption_dir = NULL;
  int c;
  tsr_status st = TSR_OK;
  opt_parser op;
  opt_begin(&op, ingest_opts_table, argc, argv);
  while (!st && (c = opt_next(&op)) != -1) {
    switch (c) {
    case O_OUT: out = optarg; break;
    case O_FPS:
      pixel_opt = 1;
      st = parse_rational("--fps", optarg, &o.settings.fps_num, &o.settings.fps_den);
      break;
    case O_SHORT:
      pixel_opt = 1;
      st = parse_int("--short-side", optarg, STORE_MIN_SHORT_SIDE, STORE_MAX_SHORT_SIDE,
                     &o.settings.short_side);
      break;
    case O_LATENTS: latents = 1; break;
    case O_CAPTIONS: o.captions = 1; break;
    case O_CAPTIONS_FROM: captions_from = optarg; break;
    case O_CAPTION_ENCODER: caption_encoder = optarg; break;
    case O_CAPTION_DIR: caption_dir = optarg; break;
    case O_DTYPE:
      dtype_given = 1;
      if (!(st = parse_dtype("--dtype", optarg, &kd)))
        latent_dtype = kd == KERNELS_BF16 ? STORE_DTYPE_BF16 : STORE_DTYPE_F32;
      break;
    case O_PATCH: patch_given = 1; st = parse_patch("--patch", optarg, &o.settings.pt, &o.settings.ph, &o.settings.pw); break;
    case O_MAXS:
      maxs_given = 1;
      st = parse_double("--max-seconds", optarg, 0, STORE_MAX_SECONDS, &o.settings.max_seconds);
      break;
    case O_WORKERS: st = parse_int("--workers", optarg, 1, 1024, &o.workers); break;
    case O_LABEL: o.label_from_dir = 1; break;
    case O_RETRY: o.retry_failed = 1; break;
    case O_MAXPIX: st = parse_i64("--max-pixels", optarg, 1, INT64_MAX, &o.max_pixels); break;
    case O_QUIET: o.progress = 0; break;
    case O_MANIFEST: mf.path = optarg; break;
    case O_EMBEDDINGS: manifest_opt = 1; mf.embeddings = optarg; break;
    case O_SCENES: pixel_opt = 1; o.scenes.enabled = 1; break;
    case O_SCENE_T:
      pixel_opt = o.scenes.enabled = 1;
      st = parse_double("--scene-threshold", optarg, 0, 255, &o.scenes.threshold);
      break;
    case O_MIN_SHOT:
      pixel_opt = o.scenes.enabled = 1;
      st = parse_double("--min-shot-seconds", optarg, 0, 3600, &o.scenes.min_shot_s);
      break;
    default: {
      int taken = 0;
      st = manifest_cli_option(c, optarg, &mf.opts, &mf.filter, &taken);
      manifest_opt |= taken;
      if (!taken) st = TSR_EINVAL;  // opt_next said why
    }
    }
  }
  if (!st && mf.path) {
    o.manifest = &mf;
    st = manifest_filter_check(&mf.filter);
  }
  if (!st && manifest_opt && !mf.path)
    st = err_set(TSR_EINVAL, "the manifest options (--where, --root, --caption-embeddings, ...) "
                 "need --manifest FILE");
  if (!st && mf.path && (latents || o.captions))
    st = err_set(TSR_EINVAL, "--manifest is for videos, with captions from the manifest (and "
                 "--caption-embeddings): not with %s", latents ? "--latents" : "--captions");
  if (!st && !out) st = err_set(TSR_EINVAL, "missing --out STORE");
  if (!st) st = sidecar_options(captions_from, caption_encoder, caption_dir, &o, latents || mf.path);
  if (!st) st = mf.path ? cli_positionals(argc, argv, 0, 0, "SRC (none with --manifest)")
                        : cli_positionals(argc, argv, 1, argc, "SRC (files, directories or @LIST)");
  if (!st && latents && (pixel_opt || o.captions))
    st = err_set(TSR_EINVAL, "%s", o.captions ? "--captions is for videos; latent files carry "
                 "their caption (text_emb)" : "--fps and --short-side are for videos; latent "
                 "files carry their frame rate (metadata fps) and are not resized");
  if (!st && !latents && dtype_given)
    st = err_set(TSR_EINVAL, "--dtype is for latent stores (--latents); pixels are uint8");
  if (st) return cli_usage_error("ingest");
  if (ingest_check_sources(argv + optind, argc - optind) ||
      (mf.path && fs_check_regular(mf.path)))
    return cli_error("ingest");
  struct stat sb;
  int existed = stat(out, &sb) == 0;
  if (latents) {  // the store's frame rate, VAE stride and channels are the files'
    o.reader = &ingest_reader_latents;
    o.settings.dtype = latent_dtype;
    ingest_latent_given given = {.patch = patch_given, .dtype = dtype_given,
                                 .max_seconds = maxs_given};
    if (ingest_latent_store_settings(out, argv + optind, argc - optind, &given, &o.settings))
      return cli_error("ingest");
  } else {
#ifdef TESSERA_HAVE_MEDIA
    o.reader = &ingest_reader_video;
#else
    err_set(TSR_EINVAL, "this tessera was built without media (FFmpeg; cmake -DTESSERA_MEDIA=OFF "
            "or no libav* dev files): it ingests latent files only (--latents); run video "
            "ingest on a build with media");
    return cli_error("ingest");
#endif
  }
  // Ranges of fps (a fraction) and the patch, and the patch against the short side: the
  // limits of store/settings.h, the same check the index applies when a store is created.
  if (store_settings_check(&o.settings)) {
    err_wrap(TSR_EINVAL, "bad settings: ");
    return cli_usage_error("ingest");
  }
  sidecar_map sm = {0};
  char cdir[4200];
  snprintf(cdir, sizeof cdir, "%s", caption_dir ? caption_dir : "");
  if (captions_from && !caption_dir) snprintf(cdir, sizeof cdir, "%s.captions", out);
  if (captions_from &&
      sidecar_embed(argv + optind, argc - optind, captions_from,
                    caption_encoder ? caption_encoder : "minilm", cdir, !o.progress, &sm))
    return cli_error("ingest");
  // the encoder of the embeddings' folder, recorded with the store (store/caption_encoder.h)
  char enc[CAPTION_ENCODER_MAX_BYTES] = "";
  const char *edir = captions_from ? cdir : mf.path ? mf.embeddings : NULL;
  if (edir && caption_encoder_from_dir(edir, enc, sizeof enc)) {
    sidecar_free(&sm);
    return cli_error("ingest");
  }
  o.caption_encoder = enc;
  o.caption_ctx = &sm;
  ingest_result res;
  st = ingest_run(out, argv + optind, argc - optind, &o, &res);
  sidecar_free(&sm);
  if (st) {
    ingest_result_free(&res);
    err_wrap(st, "into %s: ", out);
    return cli_error("ingest");
  }
  int rc = summarize(out, existed, &res);
  ingest_result_free(&res);
  return rc;
}
