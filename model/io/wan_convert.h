// model/io/wan_convert.h — Wan 2.1/2.2 transformer checkpoints between diffusers' folder
// (WanTransformer3DModel.save_pretrained: config.json and diffusion_pytorch_model.safetensors,
// or shards diffusion_pytorch_model-0000K-of-0000N.safetensors with
// diffusion_pytorch_model.safetensors.index.json; F32 or BF16 tensors) and a tessera
// checkpoint of model.family = wan (model/io/checkpoint.h, weights only); the original Wan
// checkpoint's naming is read too (model/io/wan_source.h). docs/model.md "The Wan family"
// lists every tensor's name and layout on every side.
//
// One tensor at a time: the source files are mapped (st_open), each tensor converted into one
// buffer of its size and streamed into the output (core/safetensors.h streaming), so memory
// is bounded by the largest tensor (time_proj of the 14B model: 0.6 GB in fp32), whatever the
// model's size. Every name, shape and dtype is checked before anything is written: a missing,
// unknown or misshapen tensor, or a dtype other than F32/BF16, fails with TSR_EMISMATCH or
// TSR_EFORMAT naming the file and the tensor; the output is untouched on any error.
//
// Layouts: diffusers' nn.Linear weights are (out, in), tessera's (in, out); the patch
// embedding is a Conv3d weight (D, C, pt, ph, pw) whose input order (c, t, y, x) differs from
// a tessera token's values (t, y, x, c) (docs/store-format.md); the modulation tables
// scale_shift_table (1, 6, D) and (1, 2, D) are tessera's rows (6D) and (2D). fp32 values are
// copied exactly and bf16 ones widened exactly, so diffusers -> tessera -> diffusers (of the
// same dtype) gives back every tensor bit for bit.
#ifndef TESSERA_MODEL_IO_WAN_CONVERT_H
#define TESSERA_MODEL_IO_WAN_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "model/config.h"

// What a conversion did, for its report.
typedef struct {
  int tensors;
  int64_t params;       // values converted
  int64_t bytes_in;     // tensor bytes read
  int64_t bytes_out;    // tensor bytes written
  int files_in;         // safetensors files read
} wan_convert_stats;

// The tessera config (family wan) of a diffusers config.json's text: hidden = heads x
// attention_head_dim, depth = num_layers, tubelet = patch_size, channels = in_channels,
// ffn_dim, freq_dim, text_dim, ln_eps = rms_eps = eps, text_len 512 (the pipeline's caption
// length) and text_pad 1 (captions padded to it with zero rows, as the pipeline pads them),
// recompute 1; then `overrides` ("model.text_len=226", config.h). Configurations
// tessera does not run are refused naming the key: image-to-video (image_dim,
// added_kv_proj_dim, pos_embed_seq_len), out_channels != in_channels, qk_norm other than
// rms_norm_across_heads, cross_attn_norm false.
tsr_status wan_config_from_json(const char *json_text, const char *where,
                                char *const *overrides, int n_overrides, dit_config *mc,
                                train_config *tc);

// diffusers folder, or original Wan checkpoint (a file or folder), src_dir -> tessera
// checkpoint dst (atomic). The diffusers config.json text (an original checkpoint's made from
// its shapes, wan_source.h) is kept in the checkpoint's metadata (diffusers_config), so the
// way back writes it again.
tsr_status wan_from_diffusers(const char *src_dir, const char *dst, char *const *overrides,
                              int n_overrides, wan_convert_stats *stats);

// tessera checkpoint src (family wan; its weights, or with ema its EMA weights) -> diffusers
// folder dst_dir (created if absent): config.json and one diffusion_pytorch_model.safetensors
// of F32 or (bf16) BF16 tensors, rounded to nearest even; each tensor's recorded checksum
// is verified as it is read. The folder is written whole (core/fs.h fs_atomic_dir): an
// earlier model's files there (shards and index of the sharded layout included) are gone.
tsr_status wan_to_diffusers(const char *src, const char *dst_dir, int bf16, int ema,
                            wan_convert_stats *stats);

// A module's name (without ".weight", e.g. "blocks.0.attn1.to_q") in diffusers' naming ->
// the original Wan checkpoint's ("blocks.0.self_attn.q"), into out (cap bytes); TSR_EINVAL
// naming a module that has none (the tessera family's adaln). The LoRA file layouts of
// model/io/lora_layout.h name their keys so.
tsr_status wan_module_to_original(const char *module, char *out, size_t cap);
// The way back; flat: `module` has '_' for every '.' of the original's name (kohya's keys,
// "blocks_0_self_attn_q"). TSR_EINVAL naming what is no module.
tsr_status wan_module_from_original(const char *module, int flat, char *out, size_t cap);

#endif
