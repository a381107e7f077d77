// ingest/store.h — the token store: shards of clip blocks plus a SQLite index.
//
// A store is a directory:
//   STORE/index.sqlite        the index (settings, sources, clips); docs/store-format.md
//   STORE/shards/*.tshard     append-only shard files of clip blocks (ingest/shard.h)
//   STORE/parts/rank-R.sqlite per-rank indexes of a running multi-rank ingest; merged
//                             into index.sqlite by rank 0 at the end (or by the next run)
//
// Durability rule: a clip's shard bytes are fdatasync'ed before the index transaction
// that records the clip commits. A crash at any moment therefore leaves shard tails
// that no index row points at; store_recover() cuts them off (truncate) and deletes
// shards that no row points at, so a rerun resumes with no duplicate and no lost clip.
//
// Units: times in seconds, sizes in bytes, lengths in frames or tokens as named.
// Ownership: handles returned by *_open are freed with the matching *_close/*_free.
// Threads: a store_index handle is used by one thread at a time (callers lock).
#ifndef TESSERA_INGEST_STORE_H
#define TESSERA_INGEST_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "core/err.h"

#define STORE_INDEX_NAME "index.sqlite"
#define STORE_SHARD_DIR "shards"
#define STORE_PARTS_DIR "parts"

typedef enum { STORE_DTYPE_U8 = 0, STORE_DTYPE_BF16 = 1 } store_dtype;

// Settings fixed for the life of a store. Ingesting with other settings is refused.
typedef struct {
  int fps_num, fps_den;  // target frame rate, e.g. 8/1 or 30000/1001
  int short_side;        // pixels of the short side after resize (before crop)
  int pt, ph, pw;        // tubelet size: frames x pixels x pixels
  int channels;          // values per pixel (3 = RGB)
  store_dtype dtype;     // element type of token values
  double max_seconds;    // longer videos are cut into clips of at most this (0: no cut)
} store_settings;

// Bytes of one token: pt*ph*pw*channels*element size.
int64_t store_token_bytes(const store_settings *s);
// Describes the differences between two settings ("fps 8/1 vs 12/1, patch ...");
// returns 0 if equal, else 1 with the text in buf.
int store_settings_diff(const store_settings *a, const store_settings *b, char *buf, size_t n);

// ---- index (SQLite) -------------------------------------------------------------------

typedef struct store_index store_index;

// Opens (creating if `create`) an index database file with the tessera schema.
// On create, `settings` are recorded; on open of an existing file, they are compared
// and a mismatch fails with TSR_EMISMATCH naming each differing key, writing nothing.
// `settings` may be NULL to open an existing index with whatever it holds.
tsr_status index_open(store_index **ix, const char *path, int create,
                      const store_settings *settings);
void index_close(store_index **ix);
tsr_status index_settings(store_index *ix, store_settings *out);
// The database file's path as given to index_open.
const char *index_path(const store_index *ix);

typedef enum { SOURCE_NEW = 0, SOURCE_DONE, SOURCE_FAILED } source_status;

// Looks up a source by path: its status and whether size/mtime match the record.
// *status = SOURCE_NEW if there is no record.
tsr_status index_source_lookup(store_index *ix, const char *path, int64_t size, int64_t mtime,
                               source_status *status, int *same_file);

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
} store_clip;

// A source's outcome, committed in one transaction together with its clips.
typedef struct {
  const char *path;      // absolute path
  int64_t size, mtime;   // file size (bytes) and mtime (seconds) at ingest
  source_status status;  // SOURCE_DONE or SOURCE_FAILED
  const char *error;     // failure reason, or a note for a done source (e.g. truncated)
  int partial;           // 1: only a decodable prefix was kept (truncated/corrupt tail)
  int64_t decoded_frames;// source frames decoded
  const char *label;     // class label or NULL
} store_source;

// Records a source and its clips atomically. An earlier record of the same path is
// replaced (its clips removed). Call only after the clips' shard bytes are durable.
tsr_status index_commit_source(store_index *ix, const store_source *src,
                               const store_clip *clips, int nclips);

// Committed end (offset of the byte after the last clip block) of a shard, from the rows
// that point at it; 0 if none.
tsr_status index_shard_end(store_index *ix, const char *shard, int64_t *end);

// A clip as read back from the index (strings owned by the iterator / result).
typedef struct {
  int64_t id;
  char source[4096];
  store_clip c;
  char codec_buf[32], pix_fmt_buf[32], shard_buf[256], label_buf[256];
} store_clip_row;

// Calls fn for every clip in id order; fn returns non-zero to stop.
tsr_status index_foreach_clip(store_index *ix, int (*fn)(const store_clip_row *, void *),
                              void *ctx);
// Reads one clip by id (TSR_EINVAL naming the id if absent).
tsr_status index_get_clip(store_index *ix, int64_t id, store_clip_row *out);

// Failed sources, for reports: fn(path, error, ctx).
tsr_status index_foreach_failed(store_index *ix,
                                int (*fn)(const char *, const char *, void *), void *ctx);

// Totals for summaries.
typedef struct {
  int64_t sources_done, sources_failed, sources_partial, clips, tokens, frames, dropped_frames;
  double seconds;
} store_totals;
tsr_status index_totals(store_index *ix, store_totals *t);

// Merges every source and clip of index `from` into `ix` in one transaction; shard
// names are rewritten by `shard_prefix` ("" to keep them), which goes in front of the
// file name: "shards/x.tshard" -> "shards/<prefix>x.tshard". Sources already done in
// `ix` (same path) are skipped and counted in *skipped, except when `from` holds a newer
// done record of a changed file (other size or mtime), which replaces it. Other records
// of the same path in `ix` (failed) are replaced with `from`'s. Source ids are
// renumbered in `ix`; clip ids are new. `from` must have the same settings
// (TSR_EMISMATCH otherwise, nothing written). Merging twice is therefore harmless.
tsr_status index_merge_from(store_index *ix, const char *from_path, const char *shard_prefix,
                            int64_t *merged_clips, int64_t *skipped);

// Clip ids and token counts of every clip in id order (malloc'ed arrays, caller frees).
tsr_status index_clip_lengths(store_index *ix, int64_t **ids, int64_t **tokens, int64_t *n);

// ---- store (directory) ----------------------------------------------------------------

// Creates STORE (and shards/, parts/) if needed and opens its index (see index_open for
// settings checks). Does not recover; see store_recover. With `create`, an existing
// directory that holds other files but no index is refused (not a store); an existing
// index is checked before any directory is made, so a refused open writes nothing.
tsr_status store_open(store_index **ix, const char *dir, int create,
                      const store_settings *settings);

// Brings a store to a consistent state after a crash: merges leftover parts/*.sqlite
// into the index, truncates every shard to its committed end and removes shards no
// clip points at (and stray *.tmp files). Single process only (rank 0 before others
// write). Idempotent and itself crash-safe: a part is deleted only after its merge
// commits, and merging a part twice skips its sources (index_merge_from). Hard-linked
// shards (st_nlink > 1, e.g. shared with another store by `tessera index merge`) are
// never truncated, only unlinked when unreferenced. `report` (may be NULL) receives
// what was done.
typedef struct {
  int64_t parts_merged, clips_merged, sources_skipped;
  int64_t shards_truncated, bytes_cut, shards_removed, tmp_removed;
} store_recovery;
tsr_status store_recover(const char *dir, store_index *ix);
tsr_status store_recover_report(const char *dir, store_index *ix, store_recovery *report);

// Clip lengths for the scheduler: arrays of n clip ids and token counts (malloc'ed,
// caller frees), in id order.
tsr_status store_clip_lengths(const char *dir, int64_t **ids, int64_t **tokens, int64_t *n);

#endif
