// tools/sidecar.h — `tessera ingest DIR --captions-from EXT`: a caption as a text file beside
// each video (clip.mp4 and clip.txt, the convention of musubi-tuner, kohya and diffusers'
// examples), embedded in one pass by tools/embed_captions.py (docs/captions.md) into a
// folder of caption files, which the ingest then stores as --captions stores a video's
// caption file (ingest_opts.caption_path).
//
// Each video with a non-empty NAME.EXT (the video's name without its extension, plus .EXT)
// becomes one span of the script's JSONL input, {"row": K, "span": 0, "caption": TEXT} with K
// the video's path's FNV-1a hash cut to 53 bits (the same video keeps its file from run to
// run, whatever else the folder holds); its caption file is DIR/K-0.caption.safetensors.
// A rerun embeds only the captions that changed (the script's resume), so only those
// videos are ingested again (ingest's caption check by the file's mtime).
#ifndef TESSERA_TOOLS_SIDECAR_H
#define TESSERA_TOOLS_SIDECAR_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef struct {
  char **video;    // (n) the videos with a caption, sorted (sources_expand's paths)
  char **file;     // (n) each one's caption file in dir
  int64_t n;
} sidecar_map;

// The sources srcs (as ingest expands them, videos only) -> their text files with extension
// ext ("txt"), embedded by tools/embed_captions.py with the venv's python into dir (made if
// missing; `encoder` its --encoder, e.g. "minilm" or "hf:PATH"; quiet: its --quiet), and
// *map (empty on error). Only rank 0 runs the script; every rank returns the same map once
// it is done. A text over 1 MiB, not UTF-8, or unreadable fails naming the file; the
// script's failure fails the call (the script has said why).
tsr_status sidecar_embed(char **srcs, int nsrcs, const char *ext, const char *encoder,
                         const char *dir, int quiet, sidecar_map *map);
// ingest_opts.caption_path over a sidecar_map (ctx): the video's caption file, or "".
void sidecar_caption_path(void *ctx, const char *video, char *out, size_t cap);
void sidecar_free(sidecar_map *map);

#endif
