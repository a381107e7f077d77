// store/index.h — the store's SQLite index: settings, sources and clips.
//
// Ownership: index_open's handle is freed with index_close. Threads: a store_index handle is
// used by one thread at a time (callers lock). Schema: docs/store-format.md.
#ifndef TESSERA_STORE_INDEX_H
#define TESSERA_STORE_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "store/clip.h"
#include "store/json_cols.h"
#include "store/settings.h"

typedef struct store_index store_index;

// Opens (creating if `create`) an index database file with the tessera schema.
// On create, `settings` are recorded; on open of an existing file, they are compared
// and a mismatch fails with TSR_EMISMATCH naming each differing key, writing nothing.
// `settings` may be NULL to open an existing index with whatever it holds.
tsr_status index_open(store_index **ix, const char *path, int create,
                      const store_settings *settings);
// Opens an existing index as it is, for reading: its schema is not upgraded (an index of
// an earlier version reads NULL for the columns it lacks) and the handle writes nothing, but
// SQLite's rollback of an interrupted transaction's journal. index_merge_from reads its input
// so (the inputs of a merge are not changed). `settings` as for index_open.
tsr_status index_open_as_is(store_index **ix, const char *path, const store_settings *settings);
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

// A source's outcome, committed in one transaction together with its clips.
typedef struct {
  const char *path;      // absolute path
  int64_t size, mtime;   // file size (bytes) and mtime (seconds) at ingest
  source_status status;  // SOURCE_DONE or SOURCE_FAILED
  const char *error;     // failure reason, or a note for a done source (e.g. truncated)
  int partial;           // 1: only a decodable prefix was kept (truncated/corrupt tail)
  int64_t decoded_frames;// source frames decoded
  const char *label;     // class label or NULL
  // Scene detection: has_scene_cuts 0: it was off (NULL in the index); 1: it ran and found
  // scene_cuts[0..n_scene_cuts) (n_scene_cuts 0: none), seconds in the source, ascending
  // (rules and limits: store_scene_cuts_format, json_cols.h).
  int has_scene_cuts;
  const double *scene_cuts;
  int n_scene_cuts;
  // The ingest's hash of the source's manifest rows, spans and filters, so that a rerun
  // tells whether a done source's rows changed (store_manifest_key_check); NULL: the source
  // is not from a manifest.
  const char *manifest_key;
} store_source;

// Records a source and its clips atomically. An earlier record of the same path is
// replaced (its clips removed). Call only after the clips' shard bytes are durable. Every
// clip is checked (store_clip_check) and the source's scene cuts and manifest key too
// (json_cols.h): TSR_EINVAL naming the source, nothing written. Scores and scene cuts are
// recorded in their canonical text.
tsr_status index_commit_source(store_index *ix, const store_source *src,
                               const store_clip *clips, int nclips);

// Committed end (offset of the byte after the last clip block) of a shard, from the rows
// that point at it, for blocks without a metadata trailer (version 1); 0 if none. The end
// of a version-2 shard needs its last block's header: store_shard_committed_end.
tsr_status index_shard_end(store_index *ix, const char *shard, int64_t *end);
// Offset of the last block of `shard` that a row points at; 0 if none.
tsr_status index_shard_last_block(store_index *ix, const char *shard, int64_t *offset);

// The manifest key recorded for source `path` into key (n bytes); "" when the source has
// none, has no record, or the index predates manifests (schema version < 3). TSR_EINVAL
// when it does not fit; TSR_EFORMAT when the recorded key breaks store_manifest_key_check.
tsr_status index_source_manifest_key(store_index *ix, const char *path, char *key, size_t n);
// The scene cuts recorded for source `path`: *cuts (malloc'ed, caller frees; NULL when
// *n <= 0) and *n of them; *n = -1 when none are recorded (detection off, no record, or an
// index before schema version 3). TSR_EFORMAT when the recorded text breaks the rules.
tsr_status index_source_scene_cuts(store_index *ix, const char *path, double **cuts, int *n);

// The filters of the store's manifest ingests (settings key "filters", not part of
// store_settings: checkpoints record those): the canonical filter text the ingest gives,
// at most STORE_MAX_FILTERS_BYTES.
#define STORE_MAX_FILTERS_BYTES 4096
// The recorded filter text into out (n bytes); "" when none is recorded. *recorded (may be
// NULL) tells "" recorded ("no filters") from nothing recorded. TSR_EINVAL when it does not
// fit.
tsr_status index_filters(store_index *ix, char *out, size_t n, int *recorded);
// Records `text` as the store's filters when none are recorded ("" records "no filters");
// with the same text recorded, nothing changes; with another, TSR_EMISMATCH naming both
// texts and nothing is written: one store holds clips of one filter set.
tsr_status index_set_filters(store_index *ix, const char *text);

// A clip as read back from the index (strings owned by the iterator / result).
typedef struct {
  int64_t id;
  char source[4096];
  store_clip c;
  char codec_buf[32], pix_fmt_buf[32], shard_buf[256], label_buf[256];
  char caption_buf[STORE_MAX_CAPTION_BYTES + 1];
  char scores_buf[STORE_MAX_SCORES_BYTES + 1];
} store_clip_row;

// Calls fn for every clip in id order; fn returns non-zero to stop.
tsr_status index_foreach_clip(store_index *ix, int (*fn)(const store_clip_row *, void *),
                              void *ctx);
// index_foreach_clip for `tessera index verify`: every clip row, those whose source row is
// missing included; a row that cannot be read (a damaged value, checksum, caption or
// manifest record) or has no source row goes to bad(id, why, ctx) and the walk goes on, so
// every damaged row is listed, not only the first.
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
// renumbered in `ix`; clip ids are new. `from` must have the same settings, and filters
// that agree with `ix`'s when both record some (`ix` takes `from`'s when it records none):
// TSR_EMISMATCH otherwise, nothing written. Merging twice is therefore harmless.
tsr_status index_merge_from(store_index *ix, const char *from_path, const char *shard_prefix,
                            int64_t *merged_clips, int64_t *skipped);

// Clip ids follow the clips' sources, not the order ingest workers and ranks finished in
// (ids key the training noise, the validation split and a run's store fingerprint, so two
// ingests of the same files must number them alike). The first commit of clips after a
// settling (index_commit_source, index_merge_from) records the largest clip id before it,
// in its own transaction; settling renumbers the clips above that mark to mark+1.. in the
// order (manifest row, source path, clip index) and clears it, in one transaction
// (*renumbered: the clips whose id changed; may be NULL). Without a mark nothing changes.
// Ingest settles when a job has committed everything, `index merge` and `index recover`'s
// rebuild when done; a crash before leaves the mark, so the next job's settling orders the
// crashed job's clips with its own.
tsr_status index_order_settle(store_index *ix, int64_t *renumbered);

// Clip ids and token counts of every clip in id order (malloc'ed arrays, caller frees).
tsr_status index_clip_lengths(store_index *ix, int64_t **ids, int64_t **tokens, int64_t *n);

#endif
