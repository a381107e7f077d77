// model/io/dit_io.h — the DiT's tensors and a training batch as safetensors entries, by
// name: the bridge between the model (model/dit.h, model/objective.h) and the file format
// (core/safetensors.h), used by checkpoints, the golden test and the benchmark.
#ifndef TESSERA_MODEL_IO_DIT_IO_H
#define TESSERA_MODEL_IO_DIT_IO_H

#include "core/err.h"
#include "model/dit.h"
#include "core/safetensors.h"
#include "model/objective.h"

// flat_host: (dit_num_params) host floats in the parameter layout (a host copy of params,
// grads, EMA or an optimizer moment). Every tensor is written as F32 "<prefix><name>" with
// its shape (the data must live until st_writer_commit), or read back with name, dtype
// and shape checked (padding floats are left untouched).
tsr_status dit_write_tensors(const dit_model *m, st_writer *w, const char *prefix,
                             const float *flat_host);
tsr_status dit_read_tensors(const dit_model *m, const st_reader *r, const char *prefix,
                            float *flat_host);
// dit_write_tensors over m's LoRA adapters (model/lora.h): flat_host is
// (dit_lora_num_params) host floats in the adapters' layout, the tensors those of
// dit_lora_tensor_info. (They are read by model/io/lora_io.c in any of its layouts.)
tsr_status dit_lora_write_tensors(const dit_model *m, st_writer *w, const char *prefix,
                                  const float *flat_host);

// Adds the batch's L tokens and C clips to w as "<prefix>x" (L, P) F32, "<prefix>target"
// (L, P) F32, "<prefix>t" (C) F32, "<prefix>labels" (C) I32, "<prefix>loss_weight" (C) F32,
// "<prefix>pos" (L, 3) I32 and "<prefix>cu_seqlens" (C + 1) I32: the batch of the PyTorch
// reference (tools/reference/). ob must stay valid until st_writer_commit.
tsr_status objective_write_tensors(const objective_batch *ob, st_writer *w, const char *prefix);

#endif
