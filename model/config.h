// model/config.h — model and training configuration (INI files in configs/model/).
//
// A config file has sections [model] and [train] of `key = value` lines (core/ini.h);
// `--set section.key=value` overrides a key from the command line. Errors name the file,
// line and key: a line that is not `key = value` (quoted), a key outside a section, an
// unknown key, a key given twice in the file (both lines named; several --set of one key
// are fine: the last wins, as later options override earlier ones), a
// value that is not a number of the key's type (NaN, inf and overflow included) or out of
// its range, inconsistent settings (hidden not divisible by heads, head_dim not even...).
// Required in a file (or by --set): model.hidden, depth, heads, pt, ph, pw, channels (the
// model's shape and tubelet: a default would silently train another model). Every other
// key has its default in the key table (config.c, listed in docs/config.md), and
// config_load says which ones kept it.
// Presets: configs/model/tiny.conf (CPU demo, tests), dit-s.conf, dit-b.conf, dit-1b.conf;
// the Wan family: wan2.1-t2v-1.3b.conf, wan2.1-t2v-14b.conf, wan2.2-ti2v-5b.conf, wan-tiny.conf.
#ifndef TESSERA_MODEL_CONFIG_H
#define TESSERA_MODEL_CONFIG_H

#include <stdint.h>
#include "core/err.h"
#include "kernels/kernels.h"
#include "sched/cost.h"

typedef struct {
  int hidden;        // D
  int depth;         // number of DiT blocks
  int heads;         // H; head_dim = D / H, even
  int mlp_ratio;     // MLP hidden = mlp_ratio * D
  int pt, ph, pw;    // tubelet size; must equal the store's
  int channels;      // values per pixel (3 = RGB); P = pt*ph*pw*channels values per token
  int freq_dim;      // sinusoidal timestep embedding size (256)
  int num_classes;   // 0: unconditional; else labels 0..num_classes-1, id num_classes = "no label"
  float rope_theta;  // RoPE base (10000)
  float ln_eps;      // LayerNorm epsilon (1e-6)
  float rms_eps;     // QK RMSNorm epsilon (1e-6)
  int recompute;     // DIT_RECOMPUTE_*: which activations the backward recomputes (memory)
  int text_dim;      // caption embedding width (the text encoder's, e.g. 4096 for umT5-XXL);
                     // 0: no captions, no cross-attention (the model is exactly the one
                     // before captions existed)
  int text_len;      // most caption tokens of one clip (buffer sizes; longer captions are
                     // refused with the clip named); >= 1 when text_dim > 0
  int family;        // DIT_FAMILY_*: which network these sizes build (docs/model.md "Families")
  int ffn_dim;       // MLP hidden width; 0: mlp_ratio * hidden (Wan's widths are no multiple)
  int text_pad;      // 1: every clip's caption is padded with zero rows to text_len, and a
                     // clip without one (or with it dropped) gets text_len zero rows, as
                     // Wan's pipeline pads umT5's output (the pad rows pass through the text
                     // projection and are attended to); 0: a clip attends to its rows alone
  // attention mask (docs/model.md "Attention masks"; kernels.h kernels_mask):
  int attn_mask;     // KERNELS_MASK_*: full (every token of a clip attends to every other),
                     // block_causal or window
  int mask_chunk;    // block_causal: latent frames (tubelet time steps) per chunk, >= 1
  int mask_window;   // block_causal: chunks back a chunk attends to besides itself (0: all)
  int mask_wt, mask_wh, mask_ww;  // window: radii in tiles (time, rows, columns)
  int mask_tile_t, mask_tile_h, mask_tile_w;  // window: a tile's extent in tokens
  int shard_ranks;   // not a config key (set by the trainer for train.zero >= 1: the world
                     // size): > 1 pads every gradient bucket of the flat buffer to a multiple
                     // of 16 * shard_ranks floats, so ZeRO's collectives take equal slices
                     // of it (model/train/zero.h); 0 or 1: the layout of every other tool
} dit_config;

// model.family: the tessera DiT, or the transformer of Wan 2.1/2.2 (diffusers'
// WanTransformer3DModel), whose differences are switches of the same model code
// (dit_internal.h dit_switches, docs/model.md "The Wan family").
enum { DIT_FAMILY_TESSERA = 0, DIT_FAMILY_WAN = 1 };
// "tessera" or "wan": the config's spelling of a family.
const char *config_family_name(int family);

// model.recompute: what a block keeps for its backward and what the backward recomputes.
// The numbers are the config's values (0 and 1 are the older off/on).
enum {
  DIT_RECOMPUTE_NONE = 0,   // every activation of every block kept
  DIT_RECOMPUTE_BLOCK = 1,  // only the block inputs kept; each block's forward re-run in
                            // backward (one block's buffers shared by all)
  DIT_RECOMPUTE_CHEAP = 2,  // the GEMM and attention outputs kept per block; the token-local
                            // layers' outputs (LN + modulation, QK-norm + RoPE, gate +
                            // residual, GELU) recomputed from them in backward (one shared set)
};

// lora.targets' field, terminator included: its line `targets = ...` must stay within
// core/ini's 200-byte lines for a checkpoint's config to read back (model/lora.h takes 512).
#define CONFIG_LORA_TARGETS_MAX 176
// train.null_caption's field, terminator included (the same 200-byte line bound).
#define CONFIG_NULL_CAPTION_MAX 176
// train.sample_prompts' field, terminator included (the same 200-byte line bound).
#define CONFIG_SAMPLE_PROMPTS_MAX 176
// lora.rank's and lora.alpha's ranges (an adapters file's metadata is held to them too).
#define CONFIG_LORA_RANK_MAX 4096
#define CONFIG_LORA_ALPHA_MIN 1e-6
#define CONFIG_LORA_ALPHA_MAX 1e6

typedef struct {
  int64_t global_batch;   // clips per step (B)
  int64_t steps;          // default stop of a run, and the schedule's length unless:
  int64_t lr_schedule_steps;  // > 0: the steps the schedule spans (cosine ends here); 0:
                          //   train.steps (a fresh run's --steps sets it, run_config.h)
  int64_t warmup;         // linear warmup steps
  float lr, min_lr;       // peak and final learning rate
  float beta1, beta2, adam_eps, weight_decay;
  float grad_clip;        // max global gradient norm (<= 0: off)
  float ema_decay;        // EMA of weights
  float class_dropout;    // probability a clip's label is replaced by "no label"
  float caption_dropout;  // probability a clip's caption is dropped (the learned null token
                          // only); the same draw as the label's (model/objective.h)
  char null_caption[CONFIG_NULL_CAPTION_MAX];  // a caption file (store/latent_file.h) whose
                          // embedding a dropped or absent caption is replaced by, e.g. the
                          // empty prompt's (Wan); "": none (no rows, or text_pad's zero rows)
  float t_logit_mean, t_logit_std;  // t = sigmoid(N(mean, std))
  int64_t t_shift_tokens; // length shift: s = max(1, sqrt(tokens / t_shift_tokens)), 0: off
  float t_min, t_max;     // the noise levels drawn are mapped into [t_min, t_max] (flow time:
                          // x_t = (1 - t) x0 + t e): one expert of Wan 2.2 A14B fine-tuned on
                          // its range (docs/train.md "Two experts"); 0, 1: all of [0, 1]
  int noise_per_chunk;    // 1: every chunk of model.mask_chunk latent frames of a clip draws
                          // its own noise level (diffusion forcing; block_causal only)
  int64_t mem_tokens;     // most tokens one rank holds in a microbatch
  int64_t act_bytes_token;  // device bytes a microbatch token costs beyond the parameter
                          // state, measured (bench/gpu/run.sh's memory report); 0: the
                          // memory model counts activations, inputs and attention
                          // workspace from the code's layout (model/train/memory.h)
  int64_t seed;
  int zero;               // ZeRO stage (docs/dist.md "ZeRO"): 0 every rank holds the whole
                          // optimizer state; 1 AdamW moments, fp32 master weights and EMA
                          // sharded over the world; 2 also the gradients reduce-scattered
  int ckpt_every;         // steps between checkpoints
  int ckpt_keep;          // checkpoints kept
  int log_every;          // steps between metric lines
  int tensorboard;        // 1: metrics also as TensorBoard events (model/train/tensorboard.h)
  kernels_dtype precision;  // activations: KERNELS_F32 ("fp32") or KERNELS_BF16 ("bf16");
                          // weights, gradients, optimizer and EMA are fp32 either way
  int64_t val_clips;      // clips held out of training for validation (0: none)
  int val_every;          // steps between validations
  int sample_every;       // steps between sample videos written during training (0: none)
  int sample_steps;       // Euler steps of those samples
  float sample_cfg;       // their classifier-free guidance scale (1: none)
  char sample_prompts[CONFIG_SAMPLE_PROMPTS_MAX];  // a text file of validation prompts, one
                          // a line (model/train/samples.h); "": the labels' or seeds' row
  int cp_mode;            // TRAIN_CP_*: how CP groups split attention (docs/dist.md)
  int ulysses_chunks;     // head chunks a Ulysses group pipelines its all-to-alls over (1:
                          // blocking; model/dist/ulysses_attention.h)
  int placement;          // TRAIN_PLACE_*: how a masked clip's tokens lie over a ring group
  // [lora]: train low-rank adapters (model/lora.h) on a frozen base instead of the whole
  // model (docs/train.md "LoRA"). Checkpoints from before these keys have them off.
  int lora_rank;          // lora.rank: r (0: off, full training)
  float lora_alpha;       // lora.alpha: the adapters' scale is alpha / r (PEFT's lora_alpha)
  int lora_format;        // lora.format: the key layout of the run's adapter files, in
                          // model/io/lora_layout.h's order (0 diffusers, 1 wan, 2 kohya)
  char lora_targets[CONFIG_LORA_TARGETS_MAX];  // lora.targets: PEFT module names, comma-separated
} train_config;

// The compute device a tool chose (`--backend`, tools/backend.h) as its kernel tables by
// activation dtype: train.precision (or a checkpoint's) then picks one, so below tools/
// nothing chooses a backend. NULL where the device has no table of that dtype.
typedef struct {
  char device[16];                    // "cpu", "cuda"
  const kernels_backend *table[2];    // [KERNELS_F32], [KERNELS_BF16]
} backend_choice;

// *kb = c's table for `precision`; TSR_EINVAL naming the device and the precision when it
// has none (or when c is NULL: the caller gave no backend).
tsr_status backend_for_precision(const backend_choice *c, kernels_dtype precision,
                                 const kernels_backend **kb);
// "fp32" or "bf16": the config's spelling of a precision.
const char *config_precision_name(kernels_dtype precision);
// train.cp_mode: the planner picks ring, Ulysses or hybrid attention per CP group (auto), or
// one is forced (sched/cost.h cost_model.cp_modes; hybrid: Ulysses inside a node).
enum { TRAIN_CP_AUTO = 0, TRAIN_CP_RING = 1, TRAIN_CP_ULYSSES = 2, TRAIN_CP_HYBRID = 3 };
// train.placement: under a mask, a ring group of k > 1 ranks holds each clip in contiguous
// chunks (the ring, priced as the mask's area split evenly), or as sched/placement.h's
// blockwise placement (model/dist/placed_attention.h, priced by its most loaded rank):
// placement_for's choice per clip (blockwise), or one kind pinned for every clip (zigzag,
// balanced, greedy, metis: metis only in builds with libmetis, refused by config_validate
// otherwise; a clip the kind would overfill a rank with is placed contiguous).
enum { TRAIN_PLACE_CONTIGUOUS = 0, TRAIN_PLACE_BLOCKWISE = 1, TRAIN_PLACE_ZIGZAG = 2,
       TRAIN_PLACE_BALANCED = 3, TRAIN_PLACE_GREEDY = 4, TRAIN_PLACE_METIS = 5 };
// "contiguous", "blockwise", "zigzag", "balanced", "greedy" or "metis".
const char *config_placement_name(int place);
// The planner's cost_mask.place (COST_PLACE_* of sched/cost.h) and cost_mask.pin (0, or 1
// + the pinned sched/placement.h place_kind) for train.placement.
int config_cost_place(int place);
int config_cost_pin(int place);
// "full", "block_causal" or "window": the config's spelling of a KERNELS_MASK_* kind.
const char *config_mask_name(int kind);
// The kernels' mask of m's attention (model.attn_mask and its sizes).
kernels_mask config_mask(const dit_config *m);
// The planner's cost_mask (sched/cost.h) of m's attention, for clips whose latent frames
// are rows x cols tokens.
cost_mask config_cost_mask(const dit_config *m, int64_t rows, int64_t cols);
// "auto", "ring", "ulysses" or "hybrid".
const char *config_cp_mode_name(int mode);
// The planner's cost_model.cp_modes (COST_MODES_* of sched/cost.h) for train.cp_mode.
int config_cost_modes(int cp_mode);

// Defaults for both structs: each key's default of the key table in config.c (the tiny
// preset's values; a preset gives only the keys it changes). docs/config.md lists them.
void config_defaults(dit_config *m, train_config *t);
// One row of the key table, for documentation: section ("model", "train", "lora"), name,
// the default as a file writes it, a line of help (static strings).
typedef struct {
  const char *section, *name, *def, *help;
} config_key_doc;
// *out = key i in the table's order (config_to_ini's); 0 past the last key.
int config_key_doc_at(int i, config_key_doc *out);
// Loads `path` over the defaults, then applies overrides ("model.hidden=64", ...), then
// checks the required keys and config_validate. path may be NULL (config built in code:
// defaults + overrides, nothing required). defaults_used (may be NULL): set to a malloc'd
// list "model.freq_dim, train.warmup" of the keys that kept their default (neither file
// nor override gave them), or NULL if there is none; the caller prints it and frees it.
tsr_status config_load(const char *path, char *const *overrides, int n_overrides, dit_config *m,
                       train_config *t, char **defaults_used);
// The number of keys in a defaults_used list (0 for NULL): a preset gives only what differs
// from the defaults, so tools print the count, not the list.
int config_list_count(const char *defaults_used);
// Checks consistency (divisibility, ranges); message names the key.
tsr_status config_validate(const dit_config *m, const train_config *t);
// The config as INI text (stored in checkpoints' metadata). Caller frees.
char *config_to_ini(const dit_config *m, const train_config *t);
// Parses config_to_ini's text (checkpoint metadata): same rules as a file, and every key
// is required (config_to_ini writes them all), so a checkpoint never uses defaults.
tsr_status config_from_ini(const char *text, dit_config *m, train_config *t);

#endif
