// model/io/lora_layout.h — the key layouts of a LoRA adapter file (docs/model.md "LoRA
// adapters"). Every layout holds, per adapted module, the down matrix A (r, in) and the up
// matrix B (out, r) of W' = W + (alpha / r) B A (PyTorch's (out, in) weights); they differ in
// the names and in where alpha lives:
//   diffusers  transformer.<module>.lora_A.weight / .lora_B.weight, diffusers' module names
//              (blocks.0.attn1.to_q); alpha in the metadata (lora_adapter_metadata): what
//              diffusers' load_lora_weights and PEFT read, and tessera's default.
//   wan        diffusion_model.<original>.lora_A.weight / .lora_B.weight and
//              diffusion_model.<original>.alpha (a scalar), the original Wan checkpoint's
//              module names (blocks.0.self_attn.q): ComfyUI's own keys for a Wan model.
//   kohya      lora_unet_<original, '.' -> '_'>.lora_down.weight / .lora_up.weight / .alpha
//              (lora_unet_blocks_0_self_attn_q): kohya's sd-scripts and musubi-tuner's
//              layout, which ComfyUI maps onto the same weights.
// A file's layout is told by its keys (lora_layout_of). wan and kohya exist for the Wan
// family only: the tessera family's modules have no original Wan name.
#ifndef TESSERA_MODEL_IO_LORA_LAYOUT_H
#define TESSERA_MODEL_IO_LORA_LAYOUT_H

#include <stddef.h>

#include "core/err.h"
#include "core/safetensors.h"

typedef enum { LORA_LAYOUT_DIFFUSERS, LORA_LAYOUT_WAN, LORA_LAYOUT_KOHYA } lora_layout;
typedef enum { LORA_PART_DOWN, LORA_PART_UP, LORA_PART_ALPHA } lora_part;

// "diffusers", "wan" or "kohya" -> *l; TSR_EINVAL naming the three otherwise.
tsr_status lora_layout_parse(const char *name, lora_layout *l);
const char *lora_layout_name(lora_layout l);

// The layout of an open adapter file, from its first tensor's key: lora_unet_* is kohya,
// diffusion_model.* wan, anything else diffusers (whose own check names a stranger).
lora_layout lora_layout_of(const st_reader *r);

// The key of `part` of the adapter on `module` (diffusers' name, e.g. "blocks.0.attn1.to_q")
// in layout l, into out (cap bytes). TSR_EINVAL for a module without an original Wan name
// in wan or kohya, and for LORA_PART_ALPHA in diffusers (its alpha is metadata).
tsr_status lora_layout_key(lora_layout l, const char *module, lora_part part, char *out,
                           size_t cap);

// The way back: key of layout l -> the module's diffusers name (cap bytes) and the part.
// TSR_EINVAL (naming the key) for a key that is no adapter tensor of the layout.
tsr_status lora_layout_parse_key(lora_layout l, const char *key, char *module, size_t cap,
                                 lora_part *part);

// The tessera adapter tensor name (model/lora.h: "<module>.lora_A.weight" / ".lora_B.weight")
// -> its module (cap bytes) and part; TSR_EINVAL otherwise.
tsr_status lora_layout_split_tensor(const char *name, char *module, size_t cap, lora_part *part);

#endif
