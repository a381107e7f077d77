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
#include "store/settings.h"

// What a source is and how it becomes clips (ingest_internal.h).
typedef struct ingest_reader ingest_reader;
#ifdef TESSERA_HAVE_MEDIA
// Videos (any container/codec FFmpeg decodes): the store's settings are pixels (u8).
extern const ingest_reader ingest_reader_video;
#endif
// Latent files of a video VAE (latent_file.h): the store's settings are latents (bf16/f32).
extern const ingest_reader ingest_reader_latents;

typedef struct {
  const ingest_reader *reader;  // videos or latent files
  store_settings settings;
  int workers;             // parallel sources per rank
  int label_from_dir;      // label = name of the source's parent directory
  int captions;            // videos: take VIDEO.caption.safetensors as the caption
                           // (latent files carry theirs)
  int retry_failed;        // re-ingest sources recorded as failed
  int64_t max_pixels;      // absurd-size guard for decode
  int progress;            // show a progress line
} ingest_opts;

typedef struct {
  int64_t sources_total, sources_skipped, sources_done, sources_failed, sources_partial;
  int64_t sources_failed_kept;  // skipped because they failed before (no --retry-failed)
  int64_t clips, tokens, decoded_frames, output_frames;
  double seconds;          // wall time
} ingest_result;

// The settings a latent store of these sources gets from its files: fps, VAE strides and
// channels of the first source (in path order) that is a valid latent file; short side 0.
// Patch, dtype and max seconds are the caller's. TSR_EINVAL (with the first file's error)
// when none is valid.
tsr_status ingest_latent_settings(char **srcs, int n, store_settings *s);

// Ingests `srcs` (n paths, as given on the command line) into the store `out`.
// Collective over the MPI world: every rank calls it with the same arguments.
// Returns TSR_OK when the run completed (some sources may have failed: see result);
// an error for fatal problems (bad store, settings mismatch, unwritable output).
tsr_status ingest_run(const char *out, char **srcs, int n, const ingest_opts *o,
                      ingest_result *res);

#endif
