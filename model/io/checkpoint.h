// model/io/checkpoint.h — training checkpoints: RUN/ckpt-STEP.safetensors.
//
// One safetensors file (core/safetensors.h) per checkpoint, all tensors fp32:
//   <name>           the weights, under the model's tensor names (dit_tensor_info), so
//                    the PyTorch reference and `tessera sample` read them directly
//   ema.<name>       EMA of the weights
//   adam_m.<name>    AdamW first moment
//   adam_v.<name>    AdamW second moment
// and string metadata (safetensors "__metadata__"):
//   format = "tessera-ckpt", version = "2", step (steps done), backend (kb->name of the
//   kernels that trained it, informative), config (config_to_ini, train.precision included;
//   the tensors are fp32 masters whatever the precision, so checkpoints cross precisions),
//   sampler_epoch, sampler_pos (the next batch's position), rng ("philox4x32-10 seed=S":
//   the objective's randomness is keyed by (seed, step, clip), so seed and step are the
//   whole RNG state), store settings (fps, short_side, patch, channels, dtype), clips
//   (store clip count, for the sampler), labels (JSON array of class names, id order),
//   store_fingerprint (16 hex digits: model/train/data.h data_fingerprint of the clip table
//   trained on; absent in older files), plan_settings (what shapes the plans: mem_tokens,
//   ranks, ranks per node, --plan, cost model; a resume with others is not bitwise),
//   caption_encoder (the store's record of the text encoder that made its caption
//   embeddings, store/caption_encoder.h; absent: unknown),
//   sample_due ("1": the run's samples of this step were due and tried before this file
//   was written; a resume writes them if they are missing).
//
// A LoRA run's checkpoint (lora.rank > 0 in its config; model/lora.h) has the same four
// sets over the ADAPTERS instead of the weights: <adapter> (blocks.{i}.<module>.lora_A.weight,
// ...lora_B.weight), ema.<adapter>, adam_m.<adapter>, adam_v.<adapter>, and the same metadata
// plus the identity of the frozen base it trained on (the base's weights are not in it):
//   base_model (the base checkpoint's path, as --init gave it), base_weights (XXH3-64 of the
//   base's flat weights: the xxh3_weights its own checkpoint records), base_xxh3:<tensor>
//   (each base tensor's XXH3-64: the xxh3:<tensor> of its checkpoint), so that a resume on
//   another base names the tensor that differs (ckpt_check_base).
// --init and `tessera sample` refuse it (it holds no model), a LoRA resume refuses any other.
//
// Durability: written to PATH.tmp, fsync'ed, renamed to PATH, directory fsync'ed
// (core/safetensors.h), so a crash never leaves a half-written file under a
// checkpoint's name; ckpt_clean_tmp removes the leftovers of such a crash.
//
//   xxh3_weights, xxh3_ema, xxh3_adam_m, xxh3_adam_v: XXH3-64 of each set's flat buffer;
//   xxh3:<tensor> (version 2): each tensor's XXH3-64, recorded by the safetensors writer.
//
// Validation on load: format and version, every tensor present with the shape the
// config gives, no unknown tensor, metadata values parse; errors (TSR_EFORMAT or
// TSR_EMISMATCH) name the file and the tensor or key. ckpt_load and ckpt_load_model check
// EVERY checksum the file records, not only those of the sets they load (a damaged EMA or
// Adam moment fails --init and sample too, damaged weights fail sample --ema): the file's
// exact size and layout (safetensors.h), each tensor's checksum (a damaged one is named),
// each set's checksum. A damaged file fails with TSR_EFORMAT naming the file and tensor
// (or set) and saying to use an older checkpoint.
//
// A damaged newest checkpoint is NOT skipped by --resume (ckpt_latest returns it and the
// load fails): falling back silently would hide a failing disk, ranks with different
// copies of RUN could pick different checkpoints, and the damaged file would stay the
// "newest" that ckpt_keep retention counts. The message says to move it aside; the next
// --resume then uses the newest remaining checkpoint.
#ifndef TESSERA_MODEL_CHECKPOINT_H
#define TESSERA_MODEL_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "store/settings.h"
#include "model/config.h"
#include "model/dit.h"

#define CKPT_FORMAT "tessera-ckpt"
// 2: every tensor's own XXH3-64 in the metadata (safetensors.h ST_SUM_PREFIX), required;
// 1: tensor-set checksums only (still read).
#define CKPT_VERSION 2
enum { CKPT_MAX_LABELS = 4096 };
// The metadata keys of a LoRA run's base (above).
#define CKPT_BASE_MODEL "base_model"
#define CKPT_BASE_WEIGHTS "base_weights"
#define CKPT_BASE_SUM_PREFIX "base_xxh3:"
// Limits of the metadata numbers (checked on read): steps within train.steps' own limit
// (1e15 < 2^50), sampler epochs below 2^62 (the sampler counts them up in int64).
#define CKPT_MAX_STEP (INT64_C(1) << 50)
#define CKPT_MAX_EPOCH (INT64_C(1) << 62)

typedef struct {
  int version;
  int64_t step;
  int64_t sampler_epoch, sampler_pos;
  dit_config mc;
  train_config tc;
  store_settings store;
  int64_t clips;
  int n_labels;
  char **labels;  // (n_labels) class names
  int has_fingerprint;         // 0: a file from before store_fingerprint was recorded
  uint64_t store_fingerprint;
  char plan_settings[512];     // "" when the file records none
  char caption_encoder[STORE_MAX_CAPTION_ENCODER_BYTES];  // (store/caption_encoder.h); "": unknown
  int sample_due;              // samples of this step were due (train.sample_every)
  int adapters;                // a LoRA run's checkpoint: its sets are the adapters'
  char base_model[4096];       // adapters: the base checkpoint it names (base_model)
} ckpt_meta;

void ckpt_meta_free(ckpt_meta *m);

// What a checkpoint holds, as the training loop has it: the checkpoint takes this state,
// not the trainer, so file formats stay below training (model/train/ builds it).
typedef struct {
  dit_model *model;                // weights: dit_params (the fp32 masters), on its backend
  float *ema, *adam_m, *adam_v;    // (n_params) backend memory each (NULL: not loaded)
  const dit_config *mc;
  const train_config *tc;
  int64_t step;                    // steps done
  int64_t sampler_epoch, sampler_pos;  // the sampler's position after the last step
  const store_settings *store;     // the store trained on
  int64_t store_clips;             // its clips
  const char *const *labels;       // (n_labels) class names in class-id order
  int n_labels;
  uint64_t store_fingerprint;      // data_fingerprint of the store trained on
  const char *plan_settings;       // what shaped the plans (NULL: not recorded)
  const char *caption_encoder;     // the store's caption encoder record (NULL, "": unknown)
  int sample_due;                  // 1: samples of this step were due and tried before
  int adapters;                    // 1: the state is the model's LoRA adapters (a LoRA run):
                                   // ema and the moments are adapter-sized, the sets of the
                                   // file are the adapters', the base is recorded (above)
  const char *base_path;           // adapters: the base checkpoint, for saves (base_model)
  // A sharded optimizer (train.zero >= 1, model/train/zero.h): ema, adam_m and adam_v hold
  // this rank's shard only, flat elements [shard->lo[i], + shard->len[i]) at shard->at[i].
  // NULL: they hold the whole flat buffer. Loads read the shard's elements only.
  const struct ckpt_shard *shard;
  // train.zero = 3: the weights are this rank's shard of the masters too (backend memory, the
  // layout of ema's), loaded and saved as the sets above; NULL: dit_params, whole.
  float *weights;
  // Saves of a sharded state: gather(ctx, set_shard, i, &data) makes model tensor i of one
  // of those sets whole from the ranks' shards (set_shard: this rank's, data: its numel
  // floats, backend memory, valid until the next call). ckpt_save calls it for every tensor
  // of the weights (with `weights` only), ema, adam_m and adam_v in that order (table order
  // within a set). It may be
  // collective: the ranks that do not write call ckpt_save_follow, which makes the same calls.
  tsr_status (*gather)(void *ctx, const float *set_shard, int tensor, const float **data);
  void *gather_ctx;
  const uint64_t *base_sums;       // adapters: ckpt_base_sums of the model's weights, made
  uint64_t base_weights;           // once a run (NULL: ckpt_save makes them, reading the base)
} ckpt_state;

typedef struct ckpt_shard {
  int n;
  const int64_t *lo, *len, *at;  // (n)
} ckpt_shard;

// What a rank that does not write a sharded checkpoint does while another saves it: the
// same cs->gather calls, in the same order (nothing without cs->gather).
tsr_status ckpt_save_follow(const ckpt_state *cs);

// Writes the state (weights, EMA, moments, step, sampler, config, store settings and
// labels) to `path` atomically, streamed tensor by tensor (memory: the largest tensor on the
// host). A set's checksum is that of its flat buffer in the canonical layout (every tensor
// padded with zeros to 16 floats, dit_config.shard_ranks 0), whatever the layout it is held
// in, so files of every ZeRO stage and world size are alike.
tsr_status ckpt_save(const char *path, const ckpt_state *cs);

// Reads and validates the metadata only (and the file's structure: st_open).
tsr_status ckpt_read_meta(const char *path, ckpt_meta *m);

typedef enum {
  CKPT_LOAD_WEIGHTS = 1,  // weights into dit_params
  CKPT_LOAD_EMA = 2,      // ema.* into cs->ema
  CKPT_LOAD_OPTIM = 4,    // adam_m.*, adam_v.* into cs->adam_m, cs->adam_v
} ckpt_load_what;

// Loads tensors of `path` into the state's buffers (tensor by tensor; with cs->shard the
// shard's elements of the EMA and moments only), checking every tensor's presence and
// shape against the state's model (a checkpoint of another model config fails with
// TSR_EMISMATCH naming the tensor and both shapes) and every checksum of the file (above).
// Loading weights refreshes the model's act-dtype working copy.
tsr_status ckpt_load(const char *path, const ckpt_state *cs, int what);
// Loads weights (ema != 0: the EMA weights) into a model (tessera sample).
tsr_status ckpt_load_model(const char *path, dit_model *m, int ema);

// XXH3-64 of m's weights (dit_params): of each tensor into tensor_sums (dit_num_tensors of
// them; NULL: not wanted) and of the whole flat buffer, padding included, into *weights_sum
// (what a checkpoint of these weights records as xxh3_weights). Memory: the largest tensor.
tsr_status ckpt_base_sums(dit_model *m, uint64_t *tensor_sums, uint64_t *weights_sum);
// m's weights must be the base LoRA checkpoint `path` was trained on: TSR_EMISMATCH naming
// the first tensor whose checksum differs from the one recorded (base_xxh3:<tensor>), the
// file and the base it names.
tsr_status ckpt_check_base(const char *path, dit_model *m);

// A checkpoint of weights only, written tensor by tensor (`tessera convert`: a model larger
// than memory): ckpt_save's metadata for cs (cs->model may be NULL: backend "none"; its ema
// and moments unused) and the weights' checksums, without the EMA and optimizer sets, so
// that --init and `sample --raw` take it and --resume refuses it. extra: (key, value) pairs
// of more metadata, n_extra of them. Tensors of table t go in table order, one
// ckpt_weights_tensor call each (t->t[i].numel fp32 values, host memory); commit checks that
// all came and renames atomically (core/safetensors.h streaming). Memory: the header.
typedef struct ckpt_weights_writer ckpt_weights_writer;
tsr_status ckpt_weights_begin(ckpt_weights_writer **ww, const char *path, const dit_table *t,
                              const ckpt_state *cs, const char *const (*extra)[2], int n_extra);
tsr_status ckpt_weights_tensor(ckpt_weights_writer *ww, const float *data);
tsr_status ckpt_weights_commit(ckpt_weights_writer *ww);
void ckpt_weights_free(ckpt_weights_writer **ww);

#endif
