// model/io/wan_source.h — what `tessera convert` reads a Wan transformer from
// (model/io/wan_convert.h): its safetensors files, mapped, and a diffusers config.json text.
//
// Two namings, told apart by the tensors (a "head.modulation" tensor, optionally under
// "model.diffusion_model.", is the original one):
//  - diffusers' WanTransformer3DModel folder: config.json and diffusion_pytorch_model.safetensors,
//    or its shards with diffusion_pytorch_model.safetensors.index.json; the config is the
//    folder's config.json.
//  - the original Wan checkpoint (Wan-AI's Wan2.1/Wan2.2 repositories, wan/modules/model.py's
//    WanModel, and single files repackaged from them): one .safetensors file, or a folder of
//    the same file names as above (the original repositories shard the 14B models with the
//    same index); names patch_embedding, text_embedding.{0,2}, time_embedding.{0,2},
//    time_projection.1, blocks.{i}.{self_attn,cross_attn}.{q,k,v,o,norm_q,norm_k},
//    blocks.{i}.norm3 (the cross-attention's affine LayerNorm), blocks.{i}.ffn.{0,2},
//    blocks.{i}.modulation, head.head, head.modulation, in the same shapes as diffusers'. The
//    config is made from the shapes (wan_source_open) as a diffusers config.json text, so the
//    conversion and the way back treat both alike.
// A .pth (PyTorch pickle) is refused with the command that rewrites it as safetensors.
#ifndef TESSERA_MODEL_IO_WAN_SOURCE_H
#define TESSERA_MODEL_IO_WAN_SOURCE_H

#include "core/err.h"
#include "core/safetensors.h"

#define WAN_MAX_SHARDS 256

typedef struct {
  st_reader *files[WAN_MAX_SHARDS];
  int n_files;
  char *config;      // a diffusers config.json text (malloc'ed): the folder's, or made from
                     // an original checkpoint's shapes
  int orig;          // 1: the original naming
  char prefix[32];   // what precedes the original names: "" or "model.diffusion_model."
  char heads_from[64];  // original naming: where model.heads came from (for the log)
} wan_source;

// Opens src (a folder, or an original checkpoint's .safetensors file). Original naming: the
// config from the tensors' shapes: hidden D, channels C and patch from patch_embedding (D, C,
// pt, ph, pw); text_dim from text_embedding.0 (D, T); freq_dim from time_embedding.0 (D, F);
// ffn_dim from blocks.0.ffn.0 (F, D); depth from the blocks.{i}.modulation present; eps 1e-6
// (every Wan model's); the heads are no shape: num_heads of a config.json beside the tensors,
// else a model.heads among `overrides`, else hidden / 128 (every Wan model's head dimension
// is 128). Image-to-video checkpoints (img_emb, k_img, head.head's outputs other than the
// input's) are refused naming the tensor.
tsr_status wan_source_open(const char *src, char *const *overrides, int n_overrides,
                           wan_source *s);
void wan_source_close(wan_source *s);
// Tensor `name` (the source's own naming, prefix included) and its file, or NULL.
const st_tensor *wan_source_find(const wan_source *s, const char *name, const st_reader **f);

#endif
