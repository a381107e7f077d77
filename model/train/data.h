// model/train/data.h — the trainer's view of a token store: the clip table, class labels,
// clip tokens read straight from the memory-mapped shards, and the epoch sampler.
//
// data_store: opened once per process. It reads the index (settings, every clip's grid,
// shard, offset, bytes, checksum, label) into memory and closes it, then maps every shard
// (one shard_reader per shard file, header validated against the store's settings) and
// keeps it open until data_close, so a bad shard fails before training; every clip's block
// (header + payload) is checked to lie inside its shard (sizes only, no hashing), so a
// truncated shard or a row pointing past its end fails at open, naming the clip. A clip's
// tokens are a pointer into a read-only mapping, valid until data_close.
// Every rank of a multi-rank job opens the store itself and reads only the clips (or
// CP chunks) it was assigned. A data_store holds the store's reader lock (store/lock.h
// "Locks") from before it reads the index until data_close has unmapped every shard, so
// no writer cuts shard bytes it may read (it would die of SIGBUS).
//
// Clips are named two ways: their store id (index `clips.id`, stable, used as the RNG
// key of the objective) and their position 0..n-1 in the table (id order), used by the
// sampler.
//
// Labels: the distinct non-empty label strings of the store, sorted bytewise, are class
// ids 0..n_labels-1; a clip without a label has class -1 (the trainer maps it to the
// model's "no label" id).
//
// Mixes (model/train/mix.h): data_open of a DATASET.ini opens each of its stores and shows
// them as one: the clip table is the stores' tables one after the other (store s's clip of
// id `id` has id (s << MIX_ID_SHIFT) | id), the labels are the union of theirs, the
// settings those of store 0 (every store must have its patch, channels and value type; its
// own frame rate and size are its own), data_dir the INI's path. Tokens and captions are
// read from the store that holds the clip.
//
// Sampler: epochs are permutations of 0..n-1 drawn by Fisher-Yates from the counter-based
// generator keyed by (seed, epoch, stream RNG_STREAM_SAMPLER), so the order is a pure
// function of (seed, epoch) and a run can resume from a saved position (epoch, pos)
// without replaying earlier batches. A global batch is the next min(B, n - pos) clips of
// the current epoch: batches never straddle an epoch, so every clip appears exactly once
// per epoch and never twice in a batch (the last batch of an epoch may be shorter).
// A mix's epoch is its draws (data_sampler_init_mix): of a store drawn more than once a clip
// (repeat >= 2, a large weight) a clip may come twice in one batch, with the same noise
// (the objective keys by step and clip id), i.e. weighted twice.
#ifndef TESSERA_MODEL_DATA_H
#define TESSERA_MODEL_DATA_H

#include <stdint.h>
#include "core/err.h"
#include "store/settings.h"

typedef struct {
  int64_t id;          // store clip id
  int T, H, W;         // token grid
  int64_t tokens;      // T*H*W
  int32_t shard;       // index into the store's shard list
  int64_t offset;      // block offset in the shard
  int64_t bytes;       // payload bytes
  uint64_t checksum;   // payload XXH3-64 recorded by the index
  int32_t label;       // class id 0..n_labels-1, or -1 (no label)
  int64_t caption_offset;   // its caption block in the same shard, 0: no caption
  int caption_tokens, caption_dim;
  uint64_t caption_checksum;
} data_clip;

typedef struct data_store data_store;

// Opens the store at `dir` (made by `tessera ingest`) read-only. Fails (TSR_EIO/EINVAL/
// EFORMAT naming the store) if it is missing, not a store, has no clips, a clip row is
// inconsistent (T, H or W < 1, tokens != T*H*W or bytes != tokens * token bytes in checked
// int64, offset not a block offset), or a clip's block runs past the end of its shard
// (the message names the clip, shard, offset and the shard's size).
tsr_status data_open(data_store **d, const char *dir);
// data_open with options. skip_bad (`train --skip-bad-clips`): a shard that cannot be
// opened, or a clip whose block lies past the end of its shard (a truncated shard), does
// not fail the open: such clips are unusable (data_clip_tokens fails for them, naming the
// clip and why, so the trainer skips them as it skips a failed checksum), with one warning
// (rank 0) counting them.
typedef struct {
  int skip_bad;
} data_open_opts;
// `dir` may name a DATASET.ini (a regular file): its stores are opened with the same
// options; one that fails is named with its INI, and a store whose patch, channels or value
// type differs from store 0's is refused naming both.
tsr_status data_open_with(data_store **d, const char *dir, const data_open_opts *o);
void data_close(data_store **d);
// Clips data_open_with(skip_bad) found unreadable.
int64_t data_num_unusable(const data_store *d);
// A fingerprint of the clip table (FNV-1a over every clip's id, grid, bytes, checksum,
// label name and caption): two stores with the same fingerprint train the same batches
// with the same keys. A checkpoint records it, so --resume can tell another store (or a
// changed one) from the one the run started with, whatever the clip count.
uint64_t data_fingerprint(const data_store *d);
// One clip's line for a run's record of its store (model/train/resume.c): "id T H W bytes
// checksum caption_checksum label", the label escaped (\\, \t, \n, \xNN), empty for none.
void data_clip_line(const data_store *d, int64_t i, char *out, size_t n);

// A mix's stores: 0 for a plain store, else n (1..MIX_MAX_STORES); store p's clips are
// table positions data_part_start(p) .. data_part_start(p + 1) - 1 (p in 0..n; p = n gives
// the clip count). data_part: store p opened alone (its own ids and labels); data_mix: the
// INI read (NULL for a plain store).
int data_num_parts(const data_store *d);
const data_store *data_part(const data_store *d, int p);
int64_t data_part_start(const data_store *d, int p);
const struct mix_spec *data_mix(const data_store *d);

const char *data_dir(const data_store *d);
const store_settings *data_settings(const data_store *d);
// The store's caption encoder record (store/caption_encoder.h); "" when it has none.
const char *data_caption_encoder(const data_store *d);
int64_t data_num_clips(const data_store *d);
// Clip at table position i (0 <= i < n).
const data_clip *data_clip_at(const data_store *d, int64_t i);
// Table position of store id `id`, or -1.
int64_t data_find(const data_store *d, int64_t id);
int data_num_labels(const data_store *d);
const char *data_label_name(const data_store *d, int k);  // k in 0..n_labels-1
int64_t data_max_tokens(const data_store *d);              // longest clip

// Tokens of the clip at position i: (tokens, token bytes) values in the store's dtype,
// a pointer into the shard mapping (valid until data_close). The clip's block header is
// validated against the index (header checksum, grid, bytes, payload checksum recorded).
// With `verify` the whole payload is hashed (XXH3-64) and compared with the block header's
// checksum the first time; a good verdict is remembered, so each clip is hashed at most
// once per data_open however often it is read (a bad clip is hashed again on every call,
// so every error carries the full message). Errors (TSR_EFORMAT/EIO) name the clip id, the
// shard and the offset. Not thread-safe (the verdict cache): call from one thread.
tsr_status data_clip_tokens(data_store *d, int64_t i, int verify, const uint8_t **tokens);

// The caption embedding of the clip at position i, a pointer into the shard mapping (valid
// until data_close): (caption_tokens, caption_dim) values of *dtype (bf16 or f32); NULL
// and 0 tokens when the clip has none. The caption block is checked against the index
// (tokens, width, checksum recorded); with `verify` its embedding is hashed once per
// process, as the tokens are. Errors name the clip, shard and offset.
tsr_status data_clip_caption(data_store *d, int64_t i, int verify, const void **emb,
                             int *tokens, store_dtype *dtype);
// Both checks of the clip at position i with `verify` (data_clip_tokens, and
// data_clip_caption when it has a caption): what a batch's draw runs on every clip.
tsr_status data_clip_verify(data_store *d, int64_t i);
// Clips with a caption, and the widest and longest caption (0 when none has one).
int64_t data_num_captions(const data_store *d);
int data_caption_dim(const data_store *d);
int data_caption_max_tokens(const data_store *d);
// Mean caption tokens a clip (clips without a caption count 0): the cost model's Lt.
double data_caption_mean_tokens(const data_store *d);

// ---- validation split (model/train/data_split.c) ----------------------------------------
// Length buckets: the store's clips ordered by (tokens, id); the first third (rounded
// down) are "short", the next third "medium", the rest "long". Ranks, not fixed token
// thresholds, so every bucket of a store of >= 3 clips has clips, whatever its lengths.
// Held-out clips: n_val of them, taken in turn from the short, medium and long buckets
// (a bucket that runs out is passed over), within a bucket in the order of an FNV-1a
// hash of the clip id (core/hash.h). So the split is a pure function of the store's
// (id, tokens) table and n_val: the same clips on every rank, for every seed, run and
// precision, and validation numbers are comparable between runs on one store.
// A mix: each store split alone on its share of n_val (mix_val_counts), a clip's bucket
// its own store's; the held-out list by bucket, then table position.
enum { DATA_BUCKETS = 3 };
extern const char *const data_bucket_names[DATA_BUCKETS];  // "short", "medium", "long"

typedef struct {
  int64_t n_train, n_val;
  int64_t *train;           // (n_train) table positions of the training clips, ascending
  int64_t *val;             // (n_val) table positions of the held-out clips, by bucket
  int8_t *bucket;           // (store clips) length bucket of every clip
  int64_t bucket_val[DATA_BUCKETS];         // held-out clips per bucket
  int64_t bucket_tokens[DATA_BUCKETS][2];   // fewest and most tokens of a clip of each bucket
} data_split;

// Splits d's clips. TSR_EINVAL naming the store when n_val leaves no clip to train on.
// n_val == 0: every clip trains (train = 0..n-1), nothing is held out.
tsr_status data_split_make(const data_store *d, int64_t n_val, data_split *out);
void data_split_free(data_split *s);

// ---- epoch sampler -------------------------------------------------------------------

typedef struct {
  uint64_t seed;
  int64_t n;        // clips (a mix: draws an epoch)
  int64_t epoch;    // current epoch (0-based)
  int64_t pos;      // clips of the current epoch already handed out (0..n)
  int64_t *perm;    // (n) permutation of the current epoch (a mix: its draws, entries of
                    // the training list, data_sampler_init_mix)
  int n_parts;      // a mix's stores; 0: the plain sampler
  int64_t *part_lo; // (n_parts + 1) store p's training clips are entries part_lo[p]..[p+1]-1
  int64_t *quota;   // (n_parts) draws of each store an epoch (mix_quotas)
  int64_t *scratch; // (n + the largest store's training clips) to build a mix's epoch
} data_sampler;

// Starts at (epoch 0, pos 0). n >= 1.
tsr_status data_sampler_init(data_sampler *s, int64_t n, uint64_t seed);
void data_sampler_free(data_sampler *s);
// The sampler of d's training clips (sp): data_sampler_init over sp->n_train for a plain
// store; for a mix, data_sampler_init_mix by the mix's quotas of each store's training
// clips (TSR_EINVAL naming the store from mix_quotas, or a store left without a training
// clip).
tsr_status data_sampler_init_split(data_sampler *s, const data_store *d, const data_split *sp,
                                   uint64_t seed);
// The mix sampler over n_parts stores: store p's clips are entries lo[p]..lo[p+1]-1 (lo:
// (n_parts + 1)) of what it draws, quota[p] of them an epoch (quota: (n_parts)); every
// store needs a clip and a draw (TSR_EINVAL naming the store's number). An epoch, a pure
// function of (seed, epoch): store p gives quota / m full passes over its m clips plus
// the first quota % m of them in the order of data_shuffle(seed, epoch, lane p + 1); that
// list is put in the order of data_epoch_permutation(seed, epoch, its length). So a
// one-store mix of quota m draws exactly the plain sampler's batches.
tsr_status data_sampler_init_mix(data_sampler *s, int n_parts, const int64_t *lo,
                                 const int64_t *quota, uint64_t seed);
// Moves to a saved position (epoch >= 0, 0 <= pos <= n).
tsr_status data_sampler_seek(data_sampler *s, int64_t epoch, int64_t pos);
// The permutation of epoch `epoch` (n) for seed `seed`: a pure function.
void data_epoch_permutation(uint64_t seed, int64_t epoch, int64_t n, int64_t *perm);
// A permutation of 0..n-1 (perm: (n)) that is a pure function of (seed, epoch, lane): lane 0
// is data_epoch_permutation's; other lanes are independent shuffles of the same epoch.
void data_shuffle(uint64_t seed, int64_t epoch, uint64_t lane, int64_t n, int64_t *perm);
// Next global batch of at most B clips: *count positions into out (B), advancing the
// position (a finished epoch rolls over to the next first).
tsr_status data_sampler_next(data_sampler *s, int64_t B, int64_t *out, int64_t *count);

#endif
