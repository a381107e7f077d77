// ingest/ingest_internal.h — private to ingest/: what the ingest driver (ingest.c) shares
// with its source readers, the code that turns one source into clip blocks: videos
// (ingest_video.c, FFmpeg) and VAE latent files (ingest_latents.c).
//
// The driver owns the workers, their shards, the index commits, ranks and progress; a
// reader gets one source at a time on a worker thread and appends that source's clips to
// the worker's shard (ingest_open_shard, then shard_writer_begin_clip / append /
// ingest_end_clip), optionally after one caption block (shard_writer_caption). It returns
// the source's outcome in src (done or failed with a reason) and its clips; its return
// value is non-OK only for errors that must stop the worker (shard I/O), never for bad
// input, which fails the source alone.
#ifndef TESSERA_INGEST_INGEST_INTERNAL_H
#define TESSERA_INGEST_INGEST_INTERNAL_H

#include <stdint.h>

#include "core/err.h"
#include "store/clip_meta.h"
#include "ingest/ingest.h"
#include "ingest/manifest_units.h"
#include "store/shard.h"
#include "ingest/sources.h"
#include "store/clip.h"
#include "store/index.h"

typedef struct ingest_run_state ingest_run_state;

// One worker thread of a rank: the shard it appends to.
typedef struct {
  ingest_run_state *r;
  const ingest_opts *o;  // the run's options (settings, label_from_dir, ...)
  int id;
  shard_writer *w;
  char shard[256];       // relative path of the open shard
  int seq;
  int threads;           // threads a reader may use for this source (decoder threads)
  const manifest_unit *unit;  // a manifest ingest: the unit whose video is the source (its
                             // spans become the clips); NULL: the whole file is
  double frac;           // progress through the current source, 0..1 (for the display)
  int64_t cur_size;      // bytes of the current source
  // What the reader found beyond the sources' outcomes, summed into the run's result: spans
  // of a manifest unit filtered once the video was opened or not cut (a span past the end),
  // with reasons; shot boundaries found.
  int64_t spans_filtered, spans_failed, scene_cuts;
  manifest_tally filtered_by, failed_by;
  tsr_status fatal;      // an error that stops this worker (e.g. disk full)
  char fatal_msg[1024];
} ingest_worker;

// The clips of one source, in order.
typedef struct {
  store_clip *v;
  int n, cap;
} ingest_clips;

// Text that the index rows of one source point at, alive until they are committed.
typedef struct {
  char error[2048];          // failure reason, or a done source's note
  char label[256];
  char codec[32], pix_fmt[32];
  char *caption;             // caption text (malloc'ed) or NULL
  // the record of the encoder that made the source's caption embedding, as its caption or
  // latent file's metadata caption_encoder gives it (store/latent_file.h); "" none
  char caption_encoder[STORE_MAX_CAPTION_ENCODER_BYTES];
  double *cuts;              // (ncuts) shot boundaries found, seconds (malloc'ed) or NULL
  int ncuts, capcuts;
} ingest_text;

// A kind of source.
struct ingest_reader {
  const char *what;                   // "videos", "latent files": for messages
  int (*accept_name)(const char *name);  // files taken from a directory walk
  tsr_status (*source)(ingest_worker *wk, const source_file *sf, store_source *src,
                       ingest_clips *clips, ingest_text *txt);
};

// Starts a new shard for the worker when it has none or the open one is past the roll
// size; call before a source's first block (all blocks of a source go to one shard).
tsr_status ingest_open_shard(ingest_worker *wk);

// Finishes the open clip `c` (grid, offset, start, decoded frames and the source fields
// src_fps, src_w, src_h, rotation, sar set by the reader): fills in what the source's clips
// share (clip index, duration, frames, tokens, bytes, shard, label, codec and pix_fmt from
// txt, caption from c->caption_*), ends its block with the metadata trailer `meta`
// (`last`: the source has ended; `dropped`: output frames after the last full tubelet) and
// appends it to clips. duration_s = frames * frame_s (seconds per stored frame).
tsr_status ingest_end_clip(ingest_worker *wk, store_clip *c, double frame_s, clip_meta *meta,
                           const ingest_text *txt, ingest_clips *clips, int last, int dropped);

// The end of a reader's source, whatever happened (its one cleanup path): an open clip
// (`open_clip`) is abandoned, and a source that did not end SOURCE_DONE leaves nothing
// behind: its blocks from `first_block` on (its caption block included; -1: none written)
// are cut off and its clips dropped, as are the clips of any source when `io` (an error
// of the worker's shard) is set. Returns io, or the error of the cut.
tsr_status ingest_end_source(ingest_worker *wk, const store_source *src, int open_clip,
                             int64_t first_block, ingest_clips *clips, tsr_status io);

// The label of a source: its parent folder's name when enabled, else "".
void ingest_label_of(const char *path, int enabled, char *out, size_t n);
// The caption file of the video at `video` (o->caption_path, else VIDEO.caption.safetensors)
// into out (n bytes); "" when it has none.
void ingest_caption_path(const ingest_opts *o, const char *video, char *out, size_t n);
// Unix time in seconds (clip_meta.ingested_at).
double ingest_wall_now(void);

#endif
