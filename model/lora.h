// model/lora.h — low-rank adapters (LoRA, as PEFT's `LoraConfig`) on the linears of a DiT:
// y = x W + b + (alpha / r) (x A^T) B^T for every targeted linear, W and b frozen.
//
// Adapters are named by the module names of diffusers' WanTransformer3DModel, so that a
// target list and an adapter file map 1:1 onto PEFT's: block i's linears are
//   blocks.{i}.attn1.to_q, to_k, to_v, to_out.0   (tessera q, k, v, proj)
//   blocks.{i}.attn2.to_q, to_k, to_v, to_out.0   (cross.q, k, v, proj; text models)
//   blocks.{i}.ffn.net.0.proj, ffn.net.2          (fc1, fc2)
// and the modulation's:
//   condition_embedder.time_embedder.linear_1, linear_2   (t_embed.fc1, fc2)
//   condition_embedder.time_proj                  (time_proj: Wan's shared modulation)
//   blocks.{i}.adaln                              (the tessera family's per-block adaLN, which
//                                                  diffusers' Wan has not: its tensor name)
// A target matches a module as PEFT's target_modules does: the name itself, or a suffix of
// it after a dot ("attn1.to_q" matches every block's; "blocks.0.attn1.to_q" only block 0's).
// Each adapter has two tensors, in PEFT's layout (torch's nn.Linear weight, (out, in)):
//   blocks.{i}.<module>.lora_A.weight (r, in), blocks.{i}.<module>.lora_B.weight (out, r)
// in one flat fp32 buffer of their own (16-float aligned starts, as dit_params; the A's of
// adapters that share an input are contiguous, so a tensor's offset is not in table order),
// with a gradient buffer of the same layout. Initialised as PEFT's default
// (init_lora_weights=True): A Kaiming-uniform with a = sqrt(5), i.e. U(-1/sqrt(in),
// 1/sqrt(in)), B zero, so that a model with fresh adapters computes exactly what it computed
// without them.
//
// The forward adds the adapter's product (kernels.h gemm and gemm_strided, on the act-dtype
// working copy of the adapters: the fp32 buffer itself with fp32 activations, a copy
// refreshed by dit_lora_refresh otherwise) to the base linear's output; the backward
// accumulates the adapters' fp32 gradients and adds their input gradient to the base
// linear's. Adapters that read one input share their GEMMs, and with fp32 activations a
// linear of many rows runs on its merged weight (lora.c, docs/model.md "LoRA adapters").
// A model made with dit_create_frozen computes no gradient of the base; with dit_create the
// base's gradients are computed too (and a trainer that updates only the adapters ignores
// them). TESSERA_LORA_PER_ADAPTER=1 when adapters are attached: every adapter alone with
// its four GEMMs (the same math, another order of the sums; for comparisons).
#ifndef TESSERA_MODEL_LORA_H
#define TESSERA_MODEL_LORA_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "model/dit.h"

#define LORA_TARGETS_MAX 512

typedef struct {
  int rank;                         // r >= 1
  float alpha;                      // scale = alpha / r (PEFT's default, not rsLoRA)
  char targets[LORA_TARGETS_MAX];   // comma-separated module names or suffixes
  int shard_ranks;                  // > 1 (a ZeRO run, model/train/zero.h): the flat buffers'
                                    // length padded to a multiple of 16 x shard_ranks floats
                                    // (the tensors' offsets unchanged); 0 otherwise
} lora_config;

// Adds adapters to m on every block linear matched by lc->targets, A initialised from seed
// (counter-based, per tensor name as dit_init), B zero. TSR_EINVAL naming the target when a
// target matches nothing and when the model already has adapters. The cross-attention's
// to_k/to_v of a model with the null token run on the captions and on the null token's rows:
// their adapters keep a product for each.
tsr_status dit_lora_attach(dit_model *m, const lora_config *lc, uint64_t seed);
// The same for a model that only runs forward (sampling): no gradient buffer
// (dit_lora_grads NULL), none of the backward's scratch, and a linear that runs merged
// (lora.c) computes nothing of its adapter but the merged weight. dit_backward of such a
// model fails (TSR_EINVAL).
tsr_status dit_lora_attach_frozen(dit_model *m, const lora_config *lc, uint64_t seed);
// What dit_lora_attach (frozen: dit_lora_attach_frozen) would add to a model of config c for
// microbatches of max_tokens tokens and max_clips clips with activations of dtype act,
// without making one (the trainer's memory model): n_params, the floats of the adapters'
// buffer (held twice, parameters and gradients, unless frozen: once), and act_bytes, their
// activation buffer. Errors as dit_lora_attach's targets.
tsr_status dit_lora_memory(const dit_config *c, const lora_config *lc, kernels_dtype act,
                           int max_tokens, int max_clips, int frozen, size_t *n_params,
                           size_t *act_bytes);
// Number of adapter TENSORS (two per adapted linear); 0 without adapters.
int dit_lora_num_tensors(const dit_model *m);
// Tensor i (name, shape (r, in) or (out, r), offset into dit_lora_params).
const dit_tensor *dit_lora_tensor_info(const dit_model *m, int i);
size_t dit_lora_num_params(const dit_model *m);  // the flat buffers' length, in floats
float *dit_lora_params(dit_model *m);  // (dit_lora_num_params) [f32] backend memory
float *dit_lora_grads(dit_model *m);   // (dit_lora_num_params) [f32] backend memory; NULL
                                       // without adapters or with frozen ones
tsr_status dit_lora_zero_grad(dit_model *m);
// Rounds the adapters into their act-dtype working copy: call after writing
// dit_lora_params (an optimizer step, a load); a no-op with fp32 activations.
tsr_status dit_lora_refresh(dit_model *m);
// (dit_lora_num_params) [act] backend memory: the adapters' working copy dit_lora_refresh
// writes (for adamw_update_multi's work); NULL when there is none to refresh (no adapters,
// fp32 activations).
void *dit_lora_work(dit_model *m);
// Folds every adapter into its base weight, W (in, out) += (alpha / r) A^T B^T (the masters,
// then the working copy), and removes the adapters: the model then computes what it computed
// with them, up to the rounding of the merged weights. fp32 activations only (TSR_EINVAL).
tsr_status dit_lora_merge(dit_model *m);
// The config the adapters were made with (NULL without adapters).
const lora_config *dit_lora_get_config(const dit_model *m);

#endif
