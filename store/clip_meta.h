// store/clip_meta.h — the metadata trailer of a clip block (shard.h, version 2): what the
// index records about a clip and its source, kept next to the clip's tokens so that a
// lost or damaged index can be rebuilt from the shards (store_rebuild, store/rebuild.h).
//
// Encoding: one JSON object (UTF-8, no NUL), fields as in docs/store-format.md:
//   v (1), path, size, mtime, label (string or null), ingested_at (Unix seconds the
//   source's ingest began; tells a re-ingest of a changed file from the old one),
//   clip_index, start_s, duration_s, src_fps, src_w, src_h, rotation, sar_num, sar_den,
//   codec, pix_fmt, decoded_frames, frames, dropped_frames, last (1: the source's last
//   clip, written once the source ended), and on the last clip the source's totals:
//   source_decoded_frames, partial, note (string or null); and when the clip has a caption
//   (shard version 3), caption_offset (the caption block's offset in the same shard).
// Reals are written with 17 significant digits, so they read back bit for bit.
#ifndef TESSERA_STORE_CLIP_META_H
#define TESSERA_STORE_CLIP_META_H

#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "store/clip.h"

typedef struct {
  char path[4096];         // source path (absolute)
  int64_t size, mtime;     // source size (bytes) and mtime (s) at ingest
  char label[256];         // class label; has_label 0: none
  int has_label;
  double ingested_at;      // Unix seconds the source's ingest began
  store_clip c;            // the clip's own fields (clip_index .. dropped_frames, and
                           // caption_offset); its grid, shard, offset, bytes, checksum and
                           // caption's size come from the blocks, not here
  char codec[32], pix_fmt[32];  // c.codec / c.pix_fmt point here after clip_meta_decode
  int last;                // 1: the source's last clip
  int64_t source_decoded_frames;  // last clip only: source frames decoded in all
  int partial;             // last clip only: only a decodable prefix was kept
  char note[2048];         // last clip only: the source's note ("" none)
} clip_meta;

// JSON of `m` in a malloc'ed buffer (*json, *n bytes, caller frees). TSR_EINVAL when it
// would exceed SHARD_META_MAX (a path of thousands of bytes: the caller may drop the note).
tsr_status clip_meta_encode(const clip_meta *m, char **json, size_t *n);
// Parses a trailer (n bytes, not NUL-terminated) into *m. TSR_EFORMAT naming the first
// missing or ill-typed field; strings longer than their buffers are refused, not cut.
tsr_status clip_meta_decode(const char *json, size_t n, clip_meta *m);

#endif
