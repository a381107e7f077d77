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
//   (shard version 3), caption_offset (the caption block's offset in the same shard) and,
//   when the clip's own offset is known (c.offset), caption_back: the bytes from the
//   caption block to the clip's block, which stay right where a stretch of blocks is
//   copied elsewhere (a shard tail into quarantine), as offsets do not; a caption's text
//   without a caption block (a manifest span's caption with no embedding), caption.
//   A clip from a manifest also has manifest_row, manifest_span, span_start, span_end (null:
//   open) and span_cut; a clip with scores, scores (the object, in its canonical text:
//   store/json_cols.h); the last clip of a source with scene detection on, scene_cuts (the
//   array, canonical text), and of a source from a manifest, manifest_key. Readers of
//   trailers without them (written before) get none; older readers ignore them.
// Reals are written with 17 significant digits, so they read back bit for bit.
#ifndef TESSERA_STORE_CLIP_META_H
#define TESSERA_STORE_CLIP_META_H

#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "store/clip.h"
#include "store/json_cols.h"

typedef struct {
  char path[4096];         // source path (absolute)
  int64_t size, mtime;     // source size (bytes) and mtime (s) at ingest
  char label[256];         // class label; has_label 0: none
  int has_label;
  double ingested_at;      // Unix seconds the source's ingest began
  store_clip c;            // the clip's own fields (clip_index .. dropped_frames,
                           // caption_offset, the manifest fields and scores); its grid,
                           // shard, offset, bytes, checksum and caption's size come from the
                           // blocks, not here
  char codec[32], pix_fmt[32];  // c.codec / c.pix_fmt point here after clip_meta_decode
  int last;                // 1: the source's last clip
  int64_t source_decoded_frames;  // last clip only: source frames decoded in all
  int partial;             // last clip only: only a decodable prefix was kept
  char note[2048];         // last clip only: the source's note ("" none)
  // last clip only: the source's scene cuts (has_scene_cuts 0: detection off) and manifest
  // key ("" none), as store_source has them
  int has_scene_cuts;
  double *scene_cuts;      // encode: the caller's; decode: allocated (clip_meta_release)
  int n_scene_cuts;
  char manifest_key[STORE_MAX_MANIFEST_KEY + 1];
  char *caption;           // decode: a caption's text without a caption block (c.caption
                           // points here; clip_meta_release frees it), else NULL
  int64_t caption_back;    // decode: c.offset - the caption's offset when the block was
                           // written (0: not recorded); encode takes it from c
  int decoded;             // 1: scene_cuts and c.scores were allocated by clip_meta_decode
} clip_meta;

// JSON of `m` in a malloc'ed buffer (*json, *n bytes, caller frees). TSR_EINVAL when a field
// breaks its rules (scores, scene cuts, manifest key: json_cols.h), or when the JSON would
// exceed SHARD_META_MAX (a path of thousands of bytes: the caller may drop the note).
tsr_status clip_meta_encode(const clip_meta *m, char **json, size_t *n);
// Parses a trailer (n bytes, not NUL-terminated) into *m. TSR_EFORMAT naming the first
// missing or ill-typed field; strings longer than their buffers are refused, not cut. The
// scene cuts and scores it allocates are freed by clip_meta_release (also after a failure).
tsr_status clip_meta_decode(const char *json, size_t n, clip_meta *m);
// Frees what clip_meta_decode allocated in *m (nothing for a record the caller filled).
void clip_meta_release(clip_meta *m);

#endif
