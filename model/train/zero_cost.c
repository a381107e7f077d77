// model/train/zero_cost.c — the cost model's ZeRO sizes of a model (model/train/zero_cost.h).
#include "model/train/zero_cost.h"

#include <string.h>

#include "model/dit.h"
#include "model/lora.h"
#include "model/train/step.h"

tsr_status train_zero_cost(const dit_config *mc, const train_config *tc, int ranks,
                           cost_zero *out) {
  memset(out, 0, sizeof *out);
  if (tc->zero <= 0) return TSR_OK;
  if (tc->lora_rank > 0) {  // the adapters, padded as lora_setup makes them
    lora_config lc = train_lora_config(tc);
    lc.shard_ranks = ranks;
    size_t np = 0, ab = 0;
    tsr_status st = dit_lora_memory(mc, &lc, KERNELS_F32, 1, 1, 0, &np, &ab);
    if (st) return err_wrap(st, "train.zero = %d: the adapters' sizes: ", tc->zero);
    *out = (cost_zero){.stage = 1, .params = (double)np, .block = (double)np, .buckets = 1,
                       .blocks = 1};
    return TSR_OK;
  }
  dit_config c = *mc;
  c.shard_ranks = ranks;  // the padded buffer the trainer makes (trainer_setup)
  dit_memory dm;
  tsr_status st = dit_memory_bytes(&c, KERNELS_F32, 1, 1, &dm);  // sizes only: 1 token
  if (st) return err_wrap(st, "train.zero = %d: the model's sizes: ", tc->zero);
  *out = (cost_zero){.stage = tc->zero, .params = (double)dm.n_params,
                     .block = (double)dm.largest_bucket, .buckets = mc->depth + 2,
                     .blocks = mc->depth};
  return TSR_OK;
}
