// model/io/lora_io.h — LoRA adapters (model/lora.h) as their own safetensors file, in the
// layout diffusers' `load_lora_weights` / `load_lora_adapter` and PEFT accept for
// WanTransformer3DModel: one F32 tensor per adapter matrix, named
//   transformer.blocks.{i}.<module>.lora_A.weight (r, in), ....lora_B.weight (out, r)
// and the metadata diffusers reads back the LoraConfig from:
//   lora_adapter_metadata: JSON {"transformer.r": r, "transformer.lora_alpha": alpha,
//                                "transformer.target_modules": [...]}
// plus tessera's own keys: tessera.lora.rank, tessera.lora.alpha, tessera.lora.targets (the
// config's list as written), tessera.base_model (the caller's name of the base: what the
// adapters were trained on), tessera.base_weights (XXH3 of the base's flat weights, %016llx:
// the weights-set checksum a checkpoint of them records) and tessera.base_config (its INI).
#ifndef TESSERA_MODEL_IO_LORA_IO_H
#define TESSERA_MODEL_IO_LORA_IO_H

#include <stdint.h>

#include "core/err.h"
#include "model/dit.h"
#include "model/io/lora_layout.h"
#include "model/lora.h"

// Writes m's adapters to path (atomic; every tensor's checksum recorded). base_model: a
// string naming the base (a checkpoint's path and step, a diffusers folder). base_weights:
// the base's weights checksum when the caller has it (ckpt_base_sums' weights_sum: a
// training run makes it once), else NULL: computed here, reading the whole base. TSR_EINVAL
// when m has no adapters.
tsr_status lora_save(dit_model *m, const char *path, const char *base_model,
                     const uint64_t *base_weights);

// lora_save in another key layout (model/io/lora_layout.h): wan and kohya put a scalar alpha
// tensor beside each module's matrices and no lora_adapter_metadata (kohya: ss_network_dim
// and ss_network_alpha); TSR_EINVAL when a module has no name in the layout.
// caption_encoder: the record of the text encoder whose caption embeddings the adapters
// trained on (store/caption_encoder.h), kept as metadata tessera.caption_encoder (NULL or
// "": unknown, not written).
tsr_status lora_save_as(dit_model *m, const char *path, const char *base_model,
                        const uint64_t *base_weights, lora_layout layout,
                        const char *caption_encoder);

// An adapter file of any layout (told by its keys) -> the same adapters in layout l at dst
// (atomic): the same tensors (dtype and bytes), renamed; the base's identity kept.
tsr_status lora_convert_file(const char *src, const char *dst, lora_layout l);

// The LoraConfig of the file at path (from tessera's keys, else diffusers' metadata), and
// its base identity into base (cap bytes; "" when the file names none).
tsr_status lora_read_config(const char *path, lora_config *lc, char *base, size_t cap);

// Loads the adapters of path (any layout, told by its keys; F32 or BF16) into m: attaches them with the file's config first when m has
// none. Every adapter tensor of m must be in the file with its shape (TSR_EMISMATCH naming
// the tensor and the file), and the file may hold no other tensor (one is named), nor an
// alpha tensor other than the adapters' alpha. A wan or kohya file without tessera's keys
// gives its config from its tensors: the rank of its down matrices, its one alpha (else the
// rank), its modules as targets. A file
// with tessera.base_weights other than m's weights' is refused (TSR_EMISMATCH, both named).
tsr_status lora_load(dit_model *m, const char *path);

// `tessera convert --merge-lora`: checkpoint src (weights; not the EMA) with the adapters of
// adapters folded in (dit_lora_merge) -> a weights-only checkpoint dst (ckpt_weights_begin) of
// the same config and metadata, which --init, `sample --raw` and `convert --to diffusers` take.
// kb: the backend it runs on (fp32 activations: the CPU's); memory: the model once, and a
// host copy of its weights.
tsr_status lora_merge_checkpoint(const kernels_backend *kb, const char *src, const char *adapters,
                                 const char *dst);

#endif
