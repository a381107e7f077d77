// ingest/store.h — the token store: shards of clip blocks plus a SQLite index.
//
// A store is a directory:
//   STORE/index.sqlite        the index (settings, sources, clips); docs/store-format.md
//   STORE/shards/*.tshard     append-only shard files of clip blocks (ingest/shard.h)
//   STORE/lock                the writer and reader locks (store_lock_*) and the writer
//   STORE/readers/NAME        one file per process reading the store: who it is
//   STORE/parts/rank-R.sqlite per-rank indexes of a running multi-rank ingest; merged
//                             into index.sqlite by rank 0 at the end (or by the next run)
//   STORE/quarantine/W/       what recovery could not use, moved there (never deleted)
//
// Durability rule: a clip's shard bytes are fdatasync'ed before the index transaction
// that records the clip commits. A crash at any moment therefore leaves shard tails
// that no index row points at; store_recover() cuts them off (truncate) and deletes
// shards that no row points at, so a rerun resumes with no duplicate and no lost clip,
// once it has read them and found nothing the index does not hold elsewhere.
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
#define STORE_LOCK_NAME "lock"
#define STORE_READERS_DIR "readers"
#define STORE_QUARANTINE_DIR "quarantine"

// Element type of token values. u8: RGB pixels (`tessera ingest`); bf16 and f32: latents
// of an external video VAE (`tessera ingest --latents`, ingest/latent_file.h), real values the
// model learns as they are. The numbers are those of the shard header and of
// kernels_tokens (kernels/kernels.h), which the trainer maps them to.
typedef enum { STORE_DTYPE_U8 = 0, STORE_DTYPE_BF16 = 1, STORE_DTYPE_F32 = 2 } store_dtype;

// Settings fixed for the life of a store. Ingesting with other settings is refused.
typedef struct {
  int fps_num, fps_den;  // target frame rate, e.g. 8/1 or 30000/1001; of a latent store the
                         // frame rate of the video frames the VAE encoded
  int short_side;        // pixels of the short side after resize (before crop); 0 in a
                         // latent store (latents keep the encoder's size)
  int pt, ph, pw;        // tubelet size: frames x pixels x pixels (latent store: latent
                         // frames x latent rows x latent columns)
  int channels;          // values per pixel (3 = RGB; latents: the VAE's channels)
  store_dtype dtype;     // element type of token values (u8: pixels; bf16, f32: latents)
  double max_seconds;    // longer videos are cut into clips of at most this (0: no cut)
  int vae_t, vae_s;      // latent store: the VAE's compression, video frames per latent frame
                         // and pixels per latent row/column (e.g. 4 and 8); 0 for pixels
} store_settings;

// 1 for a store of VAE latents (dtype bf16 or f32), 0 for pixels (u8).
static inline int store_is_latent(const store_settings *s) { return s->dtype != STORE_DTYPE_U8; }
// "u8", "bf16", "f32" ("?" for an unknown value).
const char *store_dtype_name(store_dtype d);
// Bytes of one value of dtype d (0 for an unknown value).
int store_dtype_size(store_dtype d);

// Limits of the settings, checked where options enter (`tessera ingest`, tools/cmd_ingest.c
// prints them in --help) and again when an index is created (store_settings_check), so no
// caller can start runaway work: the output size of a clip grows with fps x short side^2,
// and `--fps 1000000` on a 3 s clip once wrote 16 GB.
//   fps <= 240: above every camera rate a video model trains on (high-speed footage is
//     resampled down anyway); fps >= 1/3600 (one frame an hour).
//   short side 8..4096: 8 is the smallest side with a useful patch; 4096 is 4K, the
//     largest frames decode.c accepts by default (8192^2 pixels) scaled to a short side.
//   patch dims 1..64: a tubelet of 64 frames or 64x64 pixels is already larger than any
//     published video DiT's (2x16x16 at most in practice); larger ones only multiply memory.
//   max seconds 0..86400: one day; longer cuts are no cut at all.
#define STORE_MAX_FPS 240
#define STORE_MIN_SHORT_SIDE 8
#define STORE_MAX_SHORT_SIDE 4096
#define STORE_MAX_PATCH 64
#define STORE_MAX_CHANNELS 1024
#define STORE_MAX_SECONDS 86400.0
// Largest VAE compression factor (temporal or spatial) of a latent store: 64 is far above
// every published video VAE (4x8x8 for Wan, HunyuanVideo, Cosmos; 8x32x32 for LTX-Video).
#define STORE_MAX_VAE_STRIDE 64
// Largest payload of one clip block (bytes): 1 TiB. A row or block claiming more is corrupt.
#define STORE_MAX_CLIP_BYTES (1LL << 40)
// Largest token grid dimension of a clip (T, H or W): 2^24.
#define STORE_MAX_GRID (1 << 24)
// Captions: text of at most 8 KiB (a long prompt is ~3 KB), an embedding of at most 2^16
// tokens (text encoders take 77 to 512) of at most 2^16 values (umT5-XXL: 4096).
#define STORE_MAX_CAPTION_BYTES 8192
#define STORE_MAX_CAPTION_TOKENS 65536
#define STORE_MAX_CAPTION_DIM 65536

// TSR_EINVAL naming every value outside the limits above (fps a positive fraction, dtype
// known; pixels: short side in range and vae strides 0; latents: short side 0 and vae
// strides in 1..STORE_MAX_VAE_STRIDE); TSR_OK if all are inside.
tsr_status store_settings_check(const store_settings *s);

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
// When the record of source `path` was committed (*recorded_at, seconds since the epoch; 0
// if there is no record) and whether its clips have a caption: what `tessera ingest
// --captions` compares a caption file beside the video with (one added or changed since is
// taken, re-ingesting the source).
tsr_status index_source_caption(store_index *ix, const char *path, double *recorded_at,
                                int *has_caption);

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
// that point at it, for blocks without a metadata trailer (version 1); 0 if none. The end
// of a version-2 shard needs its last block's header: store_shard_committed_end.
tsr_status index_shard_end(store_index *ix, const char *shard, int64_t *end);
// Offset of the last block of `shard` that a row points at; 0 if none.
tsr_status index_shard_last_block(store_index *ix, const char *shard, int64_t *offset);

// A clip as read back from the index (strings owned by the iterator / result).
typedef struct {
  int64_t id;
  char source[4096];
  store_clip c;
  char codec_buf[32], pix_fmt_buf[32], shard_buf[256], label_buf[256];
  char caption_buf[STORE_MAX_CAPTION_BYTES + 1];
} store_clip_row;

// Calls fn for every clip in id order; fn returns non-zero to stop.
tsr_status index_foreach_clip(store_index *ix, int (*fn)(const store_clip_row *, void *),
                              void *ctx);
// index_foreach_clip for `tessera index verify`: every clip row, those whose source row is
// missing included; a row that cannot be read (a damaged value, checksum or caption record)
// or has no source row goes to bad(id, why, ctx) and the walk goes on, so every damaged row
// is listed, not only the first.
tsr_status index_foreach_clip_checked(store_index *ix,
                                      int (*fn)(const store_clip_row *, void *),
                                      void (*bad)(int64_t id, const char *why, void *),
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

// Checks a clip row as read back from an index against the store's settings, in
// overflow-checked 64-bit arithmetic: T, H, W in 1..STORE_MAX_GRID, tokens = T*H*W,
// bytes = tokens * token bytes <= STORE_MAX_CLIP_BYTES, frames = T*pt, dropped frames
// and decoded frames not negative, offset a block offset (a multiple of 4096 past the
// shard header, below 2^62); a caption: its block offset a block offset before the clip's,
// tokens and width within the limits above. TSR_EFORMAT saying which value is wrong;
// callers add the clip id and the store.
tsr_status store_clip_check(const store_settings *s, const store_clip *c);

// Joins STORE and a clip's shard path `rel` (as an index row records it) into `out` (n
// bytes), after checking that `rel` names a shard inside the store: "shards/NAME" with
// NAME of at most 200 bytes of [A-Za-z0-9._-], not starting with '.', ending ".tshard"
// (so no '/' root, no ".." and no other directory). Every reader of index rows opens
// shards through it (train's data loader, verify, export, merge, recovery), so a crafted
// row cannot make tessera open a file outside the store. TSR_EFORMAT naming `rel`.
tsr_status store_shard_path(const char *dir, const char *rel, char *out, size_t n);

// Clip ids and token counts of every clip in id order (malloc'ed arrays, caller frees).
tsr_status index_clip_lengths(store_index *ix, int64_t **ids, int64_t **tokens, int64_t *n);

// ---- store (directory) ----------------------------------------------------------------

// Creates STORE (and shards/, parts/) if needed and opens its index (see index_open for
// settings checks). Does not recover; see store_recover. With `create`, an existing
// directory that holds other files but no index is refused (not a store); an existing
// index is checked before any directory is made, so a refused open writes nothing.
tsr_status store_open(store_index **ix, const char *dir, int create,
                      const store_settings *settings);

// 1 if `dir` exists and holds entries other than a store's own (index, shards/, parts/,
// lock, readers/, quarantine/): such a directory is not a store and nothing is written
// into it.
int store_dir_has_foreign_entries(const char *dir);

// Committed end of shard `rel` (file `path`) of the store: the end of the last block a
// row points at, as that block's header gives it (payload + metadata trailer + padding);
// 0 if no row points at the shard. A last block whose header is unreadable falls back to
// the rows' sizes (index_shard_end); rows giving an impossible end (negative, unaligned,
// past 2^62) are TSR_EFORMAT naming the shard, so recovery cuts nothing on their word.
tsr_status store_shard_committed_end(store_index *ix, const char *path, const char *rel,
                                     int64_t *end);

// ---- locks (docs/store-format.md "Locks") ------------------------------------------------
// STORE/lock carries two locks (core/lockfile.h: OFD locks, dropped by the kernel when
// their process ends, kill -9 included, so a crashed process never blocks the next):
//   byte 0, the writer lock: a store has one writer at a time. Every command that modifies
//     a store (ingest, `index recover`, `index merge` for its output) takes it before it
//     reads or changes anything and holds it to the end (a multi-rank ingest on rank 0
//     for the whole job); its holder's description is the file's text.
//   byte 1, the reader lock: every process that maps shards (train, `index export`,
//     `index verify`, merge's inputs) holds it shared while it reads, and names itself in
//     STORE/readers/. A writer that would truncate or delete shard bytes (recovery) holds
//     it exclusively for that work, so it never cuts bytes a reader may have mapped (the
//     reader would die of SIGBUS): with readers active, ingest and merge only append and
//     leave the cutting to a later recovery; `index recover` refuses, naming the readers.
//     A reader that starts during such work waits for it (seconds).
typedef struct store_lock store_lock;

// Takes the writer lock of store `dir` (STORE/lock, created if missing; with `create`,
// `dir` is created too if missing). A directory that is not a store (other files, no
// index) is refused without writing into it. Then writes this process's description into
// the lock file (pid, host, command line, since when). A store locked by another process:
// TSR_EINVAL whose message names that holder; nothing is changed.
tsr_status store_lock_acquire(store_lock **lock, const char *dir, int create);
// Releases a writer, reader or exclusion lock (NULL-safe; sets *lock to NULL); a reader's
// file in STORE/readers/ is removed.
void store_lock_release(store_lock **lock);
// 1 if another process holds the writer lock of `dir` (its description in who, n bytes);
// 0 if none (or no lock file). Takes no lock, so it never gets in a writer's way.
int store_lock_holder(const char *dir, char *who, size_t n);

// Takes the reader lock of store `dir` for a process that maps its shards: shared,
// waiting (with a log line) while a writer cuts shard bytes; then records this process in
// STORE/readers/. Take it before reading the rows, hold it until the last mapping is gone.
// A directory without an index is no store: *lock = NULL, TSR_OK, nothing written (the
// caller's open of the store says what is wrong). A store this process may not write (no
// lock file can be made) is read without the lock: *lock = NULL, TSR_OK, and a warning
// says that writers will not see this reader.
tsr_status store_lock_read(store_lock **lock, const char *dir);
// The processes holding the reader lock of `dir`: their count (0: none), their
// descriptions "; "-joined into who (n bytes). Entries of STORE/readers/ whose process has
// ended are removed on the way.
int store_lock_readers(const char *dir, char *who, size_t n);
// For a writer about to truncate or delete shard bytes: takes the reader lock of `dir`
// exclusively, without waiting. *guard is the held lock (release it when the cutting is
// done; readers that start meanwhile wait), or NULL when readers are active, their
// descriptions then in who (n bytes).
tsr_status store_lock_exclude_readers(store_lock **guard, const char *dir, char *who, size_t n);

// Brings a store to a consistent state after a crash: merges leftover parts/*.sqlite
// into the index, then (holding the readers out, store_lock_exclude_readers) truncates
// every shard to its committed end and removes shards no clip points at (and stray *.tmp
// files). Bytes are read before they are cut (store_quarantine.c): a tail or a shard with
// no rows is cut only when it holds no complete block the index does not have elsewhere
// (an interrupted source's blocks, a superseded ingest of a source the index records,
// bytes of an unfinished block); anything else (a complete source the index lacks, blocks
// of a format-1 shard, a shard of other settings or with an unreadable header) is moved into
// STORE/quarantine/W/ instead, W named in the report and the log. The caller holds the
// writer lock (rank 0 before others write). Idempotent and itself crash-safe: a part is
// deleted only after its merge commits, and merging a part twice skips its sources
// (index_merge_from). Hard-linked shards (st_nlink > 1, e.g. shared with another store by
// `tessera index merge`) are never truncated, only unlinked when unreferenced. `report`
// (may be NULL) receives what was done.
typedef struct {
  int64_t parts_merged, clips_merged, sources_skipped;
  int64_t shards_truncated, bytes_cut, shards_removed, tmp_removed;
  int64_t shards_quarantined, tails_quarantined, bytes_quarantined;  // moved, not deleted
  char quarantine[4200];    // the folder they went to ("" when nothing was moved)
  int deferred;             // readers were active: no shard byte was cut or removed
  char readers[1024];       // their descriptions when deferred
} store_recovery;
typedef struct {
  // 1: keep every complete block, cutting only bytes of unfinished blocks (`index
  // recover` after a rebuild: a damaged store, where no block is known to be garbage).
  int keep_blocks;
  // 1: the caller already holds store_lock_exclude_readers for the whole run (`index
  // recover`, which refuses rather than defers); 0: recovery takes it for its shard pass
  // and defers the cutting when readers are active.
  int readers_excluded;
} store_recover_opts;
tsr_status store_recover(const char *dir, store_index *ix);
tsr_status store_recover_report(const char *dir, store_index *ix, store_recovery *report);
tsr_status store_recover_with(const char *dir, store_index *ix, const store_recover_opts *o,
                              store_recovery *report);

// ---- rebuild (index lost or damaged) ----------------------------------------------------
// Recovery trusts the index to say which shard bytes are garbage; a store whose index is
// missing, empty, not a tessera index, or records no clip while its shards hold clip
// blocks (and it has committed something since its creation: an index that never did
// belongs to a first ingest interrupted before its first commit, whose blocks are
// garbage) must not be "recovered" (that would delete every shard). Ingest and merge refuse
// such a store; `tessera index recover` rebuilds its index with store_rebuild.

// Sets why (n bytes) to a reason when the store has shard data but no usable index; ""
// when the index is usable or there is nothing to lose. Errors only for unreadable
// directories.
tsr_status store_index_state(const char *dir, char *why, size_t n);

typedef struct {
  int64_t shards, shards_v1, shards_unreadable;  // shards scanned / of format 1 / skipped
  int64_t sources, clips;          // done sources and clips recorded
  int64_t clips_unknown_source;    // of those, clips of format-1 blocks (stand-in sources)
  int64_t blocks_left;             // blocks of interrupted or superseded ingests, left out
  int64_t tail_bytes;              // shard bytes past the last complete block
  int64_t damaged_bytes;           // bytes of damaged blocks with intact blocks after them
  int old_index_kept;              // the unusable index was moved to old_index
  char old_index[4200];
} store_rebuild_report;

// Rebuilds STORE/index.sqlite from the blocks of STORE/shards/*.tshard: settings from the
// version-2 shard headers (which must agree), then per source path the newest complete
// ingest (clips 0..n-1 of one shard, the last marked last) as a done source with its
// clips, exactly as ingest recorded them. Blocks of format-1 shards, which carry no
// metadata, are recorded under a stand-in source "unknown-source:SHARD" per shard. A
// damaged block does not end the walk of its shard: the blocks after it are read on
// (ingest/shard_walk.h), so one flipped bit loses one source, not the rest of the shard.
// Not recoverable, and said through `say` (NULL: the log): failed sources (no block),
// interrupted sources. Every payload checksum is verified. The new index is built in
// index.sqlite.rebuild, fsync'ed, and renamed over the old one, which is kept as
// index.sqlite.unusable-TIME; a crash at any point leaves the old state or the new.
// The caller holds the writer lock; run store_recover afterwards to tidy the shards.
tsr_status store_rebuild(const char *dir, void (*say)(const char *line, void *ctx), void *ctx,
                         store_rebuild_report *rep);

// Clip lengths for the scheduler: arrays of n clip ids and token counts (malloc'ed,
// caller frees), in id order.
tsr_status store_clip_lengths(const char *dir, int64_t **ids, int64_t **tokens, int64_t *n);

#endif
