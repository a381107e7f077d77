// model/objective.h — the rectified-flow training objective: builds a microbatch's inputs
// (dit_batch) from stored tubelet tokens, uint8 pixels or bf16/f32 VAE latents, and the
// clips' caption embeddings (docs/model.md "Objective").
//
// For a clip with id `clip_id` of N = T*H*W tokens, P values per token, at training `step`
// with seed = train.seed (keys: core/rng.h rng_key {seed, step, clip_id, stream}):
//   x0 = u8 * (2/255) - 1 (pixels), or the latent value itself (bf16/f32) (float arithmetic)
//   z  = rng_normal({seed, step, clip_id, TIMESTEP}, 0)
//   t  = sigmoid(t_logit_mean + t_logit_std z)
//   s  = max(1, sqrt(N / t_shift_tokens))  (s = 1 when t_shift_tokens == 0)
//   t' = s t / (1 + (s - 1) t), clamped to [1e-5, 1 - 1e-5]  (longer clips: more noise)
//   t' <- t_min + (t_max - t_min) t'  (train.t_min, t_max: one expert's range; 0, 1: t')
//   e[j, v] = rng_normal({seed, step, clip_id, NOISE}, j * P + v)  j = token index IN THE CLIP
//   x_t = (1 - t') x0 + t' e;  target v = e - x0
//   label = the clip's label (or num_classes = "no label" if it has none), replaced by
//           num_classes when rng_uniform({seed, step, clip_id, LABEL_DROP}, 0) < class_dropout
//   caption (model.text_dim > 0): the clip's caption embedding (n, text_dim), kept unless
//           the clip has none or u = rng_uniform({seed, step, clip_id, LABEL_DROP}, 0) <
//           train.caption_dropout (the SAME draw as the label's: with equal rates, label
//           and caption are dropped together, the unconditional input of guidance); a
//           dropped caption has no tokens, so the clip attends only to the model's learned
//           null token (docs/model.md); with model.text_pad every clip has text_len rows,
//           its kept caption's then zero rows (a dropped or absent caption: all zeros)
//   null caption (objective_set_null_caption, train.null_caption): a clip without a
//           caption, or whose caption is dropped, gets these rows instead of none (or
//           text_pad's zero rows), exactly as if they were its caption: e.g. the empty
//           prompt's embedding, the unconditional input of Wan's pipeline
//   pos[j] = (j / (H W), (j / W) mod H, j mod W)
//   loss_weight = kernels_mse_weight(n_batch_clips, N, P)
// Diffusion forcing (train.noise_per_chunk = 1, block_causal only): token j of a clip is in
// mask chunk k = j / (model.mask_chunk H W), and every chunk draws its own level: z above
// becomes rng_normal({seed, step, clip_id, TIMESTEP}, k) (chunk 0's is the clip's usual
// one), shifted for the whole clip's N; x_t of chunk k's tokens uses its t'. The model gets
// the chunks as conditioning clips (SEGMENTS: t, label, caption rows, modulation, loss
// weight each, the label and caption the clip's) and the clips as attention's (dit_batch
// attn_cu), so that a chunk attends to its clip's earlier chunks as the mask allows.
// Everything is a function of (seed, step, clip id, token index) only: a CP chunk that
// starts at token j0 of its clip gets exactly the rows j0.. of the whole clip's arrays,
// whichever rank builds it and however the clips are packed.
#ifndef TESSERA_MODEL_OBJECTIVE_H
#define TESSERA_MODEL_OBJECTIVE_H

#include <stdint.h>

#include "core/err.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/dit.h"

// One clip (or CP chunk of a clip) of a microbatch.
typedef struct {
  int64_t clip_id;          // the store's clip id (RNG key)
  int64_t total_tokens;     // N = T*H*W of the whole clip
  int64_t first_token;      // index in the clip of this chunk's first token (0: whole clip)
  int len;                  // tokens in this chunk
  int T, H, W;              // the clip's token grid
  int label;                // class id in [0, num_classes), or -1: no label
  const void *tokens;       // (len, P) host memory, the chunk's tokens in tokens_dtype
  kernels_tokens tokens_dtype;  // the store's dtype (0: uint8 pixels)
  const void *text;         // (text_tokens, model.text_dim) host memory in text_dtype: the
                            // WHOLE clip's caption embedding (every CP chunk gets all of it);
                            // NULL: no caption
  int text_tokens;          // 0 .. model.text_len
  kernels_tokens text_dtype;    // bf16 or f32
  int64_t t_index;          // the counter of its noise level's draw: leave 0 (the objective
                            // sets a segment's mask chunk under train.noise_per_chunk)
} objective_clip;

// A microbatch's inputs in HOST memory (capacities fixed at objective_alloc).
typedef struct {
  int max_tokens, max_clips, P;
  int text_dim, max_text;   // caption width and capacity (tokens); 0 without text
  int n_clips, L, Lt;       // clips, tokens, caption tokens
  int max_len;              // tokens of the longest clip (dit_batch.max_len)
  int32_t *cu_text;         // (max_clips + 1) caption rows of each clip in text
  float *text;              // (max_text, text_dim) the kept captions' embeddings
  int32_t *cu_seqlens;      // (max_clips + 1)
  int32_t *pos;             // (max_tokens, 3)
  float *t;                 // (max_clips) shifted t' per clip
  int32_t *labels;          // (max_clips) after dropout; num_classes = no label
  float *x;                 // (max_tokens, P) x_t
  float *target;            // (max_tokens, P) v = e - x0
  float *loss_weight;       // (max_clips)
  const float *null_text;   // (null_tokens, text_dim) host, caller's: the null caption, or NULL
  int null_tokens;
  // train.noise_per_chunk: n_clips counts segments (max_clips of them: objective_max_segments),
  // attn_cu (attn_clips + 1) the clips' offsets; attn_clips 0 without it
  int32_t *attn_cu;         // (max_clips + 1)
  int attn_clips;
  objective_clip *seg;      // (max_clips) scratch: the segments
} objective_batch;

// max_clips: conditioning clips, the segments under train.noise_per_chunk (a bound:
// objective_max_segments). Captions need text_dim > 0 and max_text >= 1 (both 0: a model
// without text).
tsr_status objective_alloc(objective_batch *ob, int max_tokens, int max_clips, int P);
tsr_status objective_alloc_text(objective_batch *ob, int text_dim, int max_text);
void objective_free(objective_batch *ob);
// The null caption of the batches built from now on (train.null_caption): emb (tokens,
// text_dim) fp32 host memory, the caller's, alive while ob is used; NULL: none (dropped and
// absent captions give no rows, or with text_pad zero rows). tokens in 1..model.text_len
// (checked by objective_build).
void objective_set_null_caption(objective_batch *ob, const float *emb, int tokens);

// Fills ob for `clips` at training step `step`; n_batch_clips = clips in the GLOBAL batch
// (B, for the loss weight). P = model's pt*ph*pw*channels. Errors name the clip id.
tsr_status objective_build(objective_batch *ob, const dit_config *mc, const train_config *tc,
                           int64_t step, int n_batch_clips, const objective_clip *clips,
                           int n_clips);

// train_config's distribution of t (kernels.h kernels_t_dist).
kernels_t_dist objective_t_dist(const train_config *tc);
// The shifted t' of a clip (as objective_build draws it).
double objective_timestep(const train_config *tc, int64_t step, int64_t clip_id,
                          int64_t total_tokens);
// The t' of mask chunk `chunk` of a clip under train.noise_per_chunk (chunk 0: the clip's).
double objective_chunk_timestep(const train_config *tc, int64_t step, int64_t clip_id,
                                int64_t chunk, int64_t total_tokens);
// The most conditioning clips a microbatch of max_tokens tokens in max_clips clips (or CP
// chunks) makes: max_clips, or under train.noise_per_chunk its segments' bound
// min(max(max_tokens, max_clips), max_clips + max_tokens / model.mask_chunk): the max_clips
// of dit_create and objective_*alloc.
int objective_max_segments(const dit_config *mc, const train_config *tc, int max_tokens,
                           int max_clips);
// The label after dropout (label < 0: none). num_classes == 0 gives 0.
int objective_label(const dit_config *mc, const train_config *tc, int64_t step, int64_t clip_id,
                    int label);
// 1 if a clip with a caption keeps it at this step (caption dropout above), else 0.
int objective_caption_kept(const train_config *tc, int64_t step, int64_t clip_id);

// A microbatch's inputs in BACKEND memory, and the dit_batch pointing at them: x and
// target in the backend's act dtype, t and loss weights fp32, the integer arrays int32.
typedef struct {
  const kernels_backend *kb;
  void *mem;
  int max_tokens, max_clips, P;
  // host staging of what objective_device_build makes on the host (capacities as above)
  int32_t *cu_h, *pos_h, *labels_h;  // (C + 1), (L, 3), (C)
  float *lw_h;                       // (C) loss weights
  kernels_clip_key *keys_h;          // (C) the clips' random-number keys
  int32_t *cu_text_h;                // (C + 1) caption rows of each clip
  int32_t *attn_cu_h;                // (C + 1) the clips' offsets (train.noise_per_chunk)
  objective_clip *seg;               // (C) scratch: the segments
  // grown on first use, so a store's dtype and the captions cost memory only when used
  void *tok;                // (max_tokens, P) tokens as stored (uint8, bf16 or f32)
  size_t tok_cap;           // its bytes
  void *text_raw, *text;    // (Lt, text_dim) captions as stored; the same in the act dtype
  int32_t *cu_text;         // (max_clips + 1)
  size_t text_cap;          // caption tokens text_raw and text hold
  const float *null_text;   // (null_tokens, text_dim) host, caller's: the null caption, or NULL
  int null_tokens;
  dit_batch batch;          // valid after objective_device_build or objective_upload
} objective_device;

tsr_status objective_device_alloc(objective_device *d, const kernels_backend *kb, int max_tokens,
                                  int max_clips, int P);
// Backend bytes objective_device_alloc takes for activations of dtype act (the memory
// model, model/train/memory.h).
size_t objective_device_bytes(kernels_dtype act, int max_tokens, int max_clips, int P);
// The trainer's path: the inputs of `clips` (as objective_build defines them) made ON THE
// BACKEND. The chunks' uint8 tokens are uploaded as stored and kb->objective_inputs draws
// t, the noise, x_t and target there from the clips' keys: no (L, P) float array is made
// on the host or crosses to the device. Only small per-clip and per-token integers are
// built on the host and uploaded: cu_seqlens, positions (L, 3), labels after dropout,
// loss weights and the keys (C). On the CPU fp32 backend the batch is bitwise the one of
// objective_build + objective_upload (kernels.h, objective_inputs). Every clip of a
// microbatch must have the same tokens_dtype. Kept captions are uploaded as stored and
// cast to the act dtype (cu_text built on the host).
tsr_status objective_device_build(objective_device *d, const dit_config *mc,
                                  const train_config *tc, int64_t step, int n_batch_clips,
                                  const objective_clip *clips, int n_clips);
// As objective_device_build, for a clip held in several runs of its tokens (a CP placement's
// segments, sched/placement.h): runs (n_runs) each a chunk as above, clip_of[r] (n_runs,
// host) the batch clip run r belongs to: 0 for the first run, then the same as the run
// before (the same clip_id, a later first_token) or one more. Every token's inputs are the
// clip's at that token index, made per run; the batch then has one clip per clip_of value,
// whose tokens are its runs' in order (cu_seqlens, t', labels, loss weight and caption once
// a clip, its first run's). Under train.noise_per_chunk the batch's conditioning clips are
// the runs' segments instead (each run cut at its mask chunks' starts, a level each, as for a
// chunk) and its clips of attention (attn_cu) one per clip_of value. d's max_clips bounds
// the runs and their segments.
tsr_status objective_device_build_runs(objective_device *d, const dit_config *mc,
                                       const train_config *tc, int64_t step, int n_batch_clips,
                                       const objective_clip *runs, const int *clip_of,
                                       int n_runs);
// Copies a host batch (objective_build) to the backend, for tests and the PyTorch
// comparisons that need the batch on the host too. Backends with fp32 activations only
// (TSR_EINVAL otherwise: use objective_device_build). d->batch.labels is NULL when
// num_classes == 0; the captions (ob->text) go along when ob has text.
tsr_status objective_upload(objective_device *d, const objective_batch *ob, int num_classes);
void objective_device_free(objective_device *d);
// As objective_set_null_caption, for objective_device_build.
void objective_device_set_null_caption(objective_device *d, const float *emb, int tokens);

#endif
