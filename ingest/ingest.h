// ingest/ingest.h — the ingest driver behind `tessera ingest`.
//
// Expands sources (files, directories recursively, @list files), skips sources already
// done (same path, size, mtime), splits the rest across MPI ranks and across worker
// threads, turns each into tokens with the run's reader — videos decoded to RGB tubelets
// (ingest/decode.h, store/patchify.h; built with media only) or VAE latent files patchified
// as they are (store/latent_file.h) — appends them to the worker's shard and commits the source and its
// clips to the index once the bytes are durable (docs/store-format.md). Shows progress and returns
// per-source outcomes for the summary.
#ifndef TESSERA_INGEST_INGEST_H
#define TESSERA_INGEST_INGEST_H

#include <stdint.h>

#include "core/err.h"
#include "ingest/manifest.h"
#include "ingest/manifest_filter.h"
#include "ingest/manifest_tally.h"
#include "store/settings.h"

// What a source is and how it becomes clips (ingest_internal.h).
typedef struct ingest_reader ingest_reader;
#ifdef TESSERA_HAVE_MEDIA
// Videos (any container/codec FFmpeg decodes): the store's settings are pixels (u8).
extern const ingest_reader ingest_reader_video;
#endif
// Latent files of a video VAE (latent_file.h): the store's settings are latents (bf16/f32).
extern const ingest_reader ingest_reader_latents;

// Sources from a clip manifest (docs/manifest.md) instead of files: each unit of
// consecutive rows of one video (ingest/manifest_units.h) is one source of the store, its
// spans its clips (a span longer than max_seconds, or cut by a scene cut, gives several).
// Videos only.
typedef struct {
  const char *path;         // the manifest
  manifest_opts opts;       // preset, syntax, root, path column and suffix
  manifest_filter filter;   // recorded in the store (index_set_filters): one store, one filter
  // Folder of per-span caption files R-K.caption.safetensors (tools/embed_captions.py), or
  // NULL. A span with a caption file gets its embedding as a caption block; a span with
  // caption text but no file keeps the text alone (no embedding: the trainer sees none).
  const char *embeddings;
} ingest_manifest;

// Shot boundaries found in the decoded frames (ingest/scene_cut.h) end a clip there.
typedef struct {
  int enabled;
  double threshold;         // 0: SCENE_CUT_THRESHOLD
  double min_shot_s;        // shortest shot in seconds (0: SCENE_CUT_MIN_SHOT frames)
} ingest_scene_opts;

typedef struct {
  const ingest_reader *reader;  // videos or latent files
  store_settings settings;
  int workers;             // parallel sources per rank
  int label_from_dir;      // label = name of the source's parent directory
  int captions;            // videos: take VIDEO.caption.safetensors as the caption
                           // (latent files carry theirs)
  // With captions: the caption file of the video at `video` into out (cap bytes; "" when
  // it has none), e.g. the embeddings of `--captions-from` text files; NULL: the file
  // VIDEO.caption.safetensors beside it. ctx: caption_ctx.
  void (*caption_path)(void *ctx, const char *video, char *out, size_t cap);
  void *caption_ctx;
  // The record of the encoder that made the caption embeddings (store/caption_encoder.h),
  // recorded in the store; NULL or "": unknown (nothing recorded).
  const char *caption_encoder;
  int retry_failed;        // re-ingest sources recorded as failed
  int64_t max_pixels;      // absurd-size guard for decode
  int progress;            // show a progress line
  const ingest_manifest *manifest;  // sources from a manifest (NULL: the paths given)
  ingest_scene_opts scenes;         // videos: cut clips at shot boundaries
} ingest_opts;

typedef struct {
  int64_t sources_total, sources_skipped, sources_done, sources_failed, sources_partial;
  int64_t sources_failed_kept;  // skipped because they failed before (no --retry-failed)
  int64_t clips, tokens, decoded_frames, output_frames;
  int64_t scene_cuts;      // shot boundaries found (ingest_opts.scenes)
  double seconds;          // wall time
  // A manifest ingest: rows read, spans that became clips, spans filtered (by the manifest
  // or, for resolution and open-ended lengths, once the video was opened), spans that could
  // not be cut (past the video's end), error records; and the reasons with examples
  // (rank 0's: every rank reads the whole manifest).
  int64_t rows, spans_kept, spans_filtered, spans_failed, errors;
  manifest_tally filtered_by, errors_by;
} ingest_result;

// Frees what ingest_run left in res (the tallies' examples).
void ingest_result_free(ingest_result *res);

// The settings a latent store of these sources gets from its files: fps, VAE strides and
// channels of the first source (in path order) that is a valid latent file; short side 0.
// Patch, dtype and max seconds are the caller's. TSR_EINVAL (with the first file's error)
// when none is valid.
tsr_status ingest_latent_settings(char **srcs, int n, store_settings *s);

// The settings of a latent ingest (ingest_reader_latents) into the store `out` of `srcs`
// (n paths), *s holding the caller's patch, dtype and max seconds and `given` saying which
// of them were given. An existing latent store keeps its settings but for those given
// (which ingest_run then refuses if they differ from the store's); a new store gets the
// files' (ingest_latent_settings) with *s's dtype and max seconds and, unless given, the
// patch 1x2x2 (one latent frame by 2x2 latent pixels, as Wan and HunyuanVideo patch theirs).
typedef struct {
  int patch, dtype, max_seconds;  // 1: the caller gave it
} ingest_latent_given;
tsr_status ingest_latent_store_settings(const char *out, char **srcs, int n,
                                        const ingest_latent_given *given, store_settings *s);

// Every source named on the command line (a file, a directory, or @LIST's list file:
// srcs, n) exists; else TSR_EIO naming the first missing one. Called before anything is
// created, so that a typo leaves no empty store behind.
tsr_status ingest_check_sources(char **srcs, int n);

// Ingests `srcs` (n paths, as given on the command line; o->manifest: none, the manifest's
// units instead) into the store `out`.
// Collective over the MPI world: every rank calls it with the same arguments.
// Returns TSR_OK when the run completed (some sources may have failed: see result);
// an error for fatal problems (bad store, settings mismatch, unwritable output).
tsr_status ingest_run(const char *out, char **srcs, int n, const ingest_opts *o,
                      ingest_result *res);

#endif
