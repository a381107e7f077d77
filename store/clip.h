// store/clip.h — one clip's record as the index and the shards' metadata hold it, and the
// checks every reader of such a record makes before trusting it.
#ifndef TESSERA_STORE_CLIP_H
#define TESSERA_STORE_CLIP_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "store/settings.h"

// One clip's row. Strings are copied by index_commit_source.
typedef struct {
  int clip_index;        // 0.. within its source (cut by max_seconds)
  double start_s;        // start of the clip in the source's timeline (first frame pts)
  double duration_s;     // frames / fps
  double src_fps;        // source average frame rate
  int src_w, src_h;      // source coded size
  int rotation;          // degrees clockwise applied: 0, 90, 180, 270
  int sar_num, sar_den;  // source sample aspect ratio (1:1 if unknown)
  const char *codec;     // decoder name, e.g. "h264"
  const char *pix_fmt;   // source pixel format, e.g. "yuv420p10le"
  int64_t decoded_frames;// source frames decoded for this clip
  int64_t frames;        // output frames stored (T * pt)
  int64_t dropped_frames;// output frames after the last full tubelet, not stored
  int T, H, W;           // token grid
  int64_t tokens;        // T*H*W
  const char *shard;     // shard path relative to the store, e.g. "shards/x.tshard"
  int64_t offset;        // byte offset of the clip block in the shard
  int64_t bytes;         // payload bytes (tokens * token bytes)
  uint64_t checksum;     // XXH3-64 of the payload
  const char *label;     // class label or NULL
  // caption (optional): a caption block (shard.h) in the same shard before the clip's block,
  // shared by the clips of its source
  int64_t caption_offset;   // block offset of the caption block; 0: the clip has no caption
  int caption_tokens;       // its embedding's tokens (rows), 1..STORE_MAX_CAPTION_TOKENS
  int caption_dim;          // and width, 1..STORE_MAX_CAPTION_DIM
  uint64_t caption_checksum;  // XXH3-64 of the embedding bytes
  const char *caption;      // caption text (UTF-8, may be empty) or NULL
  // From a manifest (`tessera ingest --manifest`): where the clip was asked for. With
  // manifest_row 0 the clip is not from one and the four fields after it are not recorded
  // (NULL in the index; read back as 0, NaN, NaN, 0). A span longer than max_seconds gives
  // several clips of the same row and span.
  int64_t manifest_row;     // 1-based data row of the manifest (its header is no row)
  int manifest_span;        // 0-based span within that row (a row may list several)
  double span_start;        // the span asked for, seconds in the source; NaN: open (from
  double span_end;          // the start; to the end of the video)
  int span_cut;             // 1: the span ran past the end of the video, which ended the clip
  // The row's numeric scores as a JSON object ({"aesthetic":4.7,"motion":0.41}) or NULL;
  // recorded in the canonical text of store/json_cols.h (limits there).
  const char *scores;
} store_clip;

// Checks a clip row as read back from an index against the store's settings, in
// overflow-checked 64-bit arithmetic: T, H, W in 1..STORE_MAX_GRID, tokens = T*H*W,
// bytes = tokens * token bytes <= STORE_MAX_CLIP_BYTES, frames = T*pt, dropped frames
// and decoded frames not negative, offset a block offset (a multiple of 4096 past the
// shard header, below 2^62); a caption: its block offset a block offset before the clip's,
// tokens and width within the limits above; manifest_row >= 0 and, when > 0, manifest_span
// >= 0, span_start NaN or finite >= 0, span_end NaN or finite and above span_start, span_cut
// 0 or 1; scores valid (store_scores_check, json_cols.h). TSR_EFORMAT saying which value is
// wrong; callers add the clip id and the store.
tsr_status store_clip_check(const store_settings *s, const store_clip *c);

// Joins STORE and a clip's shard path `rel` (as an index row records it) into `out` (n
// bytes), after checking that `rel` names a shard inside the store: "shards/NAME" with
// NAME of at most 200 bytes of [A-Za-z0-9._-], not starting with '.', ending ".tshard"
// (so no '/' root, no ".." and no other directory). Every reader of index rows opens
// shards through it (train's data loader, verify, export, merge, recovery), so a crafted
// row cannot make tessera open a file outside the store. TSR_EFORMAT naming `rel`.
tsr_status store_shard_path(const char *dir, const char *rel, char *out, size_t n);

#endif
