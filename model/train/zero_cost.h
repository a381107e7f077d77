// model/train/zero_cost.h — what the scheduler's cost model needs to price ZeRO's
// communication (sched/cost.h cost_zero): the sizes of the state a run shards.
#ifndef TESSERA_MODEL_TRAIN_ZERO_COST_H
#define TESSERA_MODEL_TRAIN_ZERO_COST_H

#include "core/err.h"
#include "model/config.h"
#include "sched/cost.h"

// *out for a run of config mc, tc (train.zero, lora.rank) on `ranks` ranks: stage 0 gives all
// zeros. The model's flat buffer as the trainer makes it for train.zero (every bucket padded
// to 16 x ranks floats, model/train/zero.h): P its floats, nb = depth + 2 buckets (the final
// layer, every block, the embeddings), Pb the largest bucket (a block's in every family
// here), D = depth. With adapters (lora.rank > 0) ZeRO shards the adapters' state only, and
// their gradient is reduced once a step at either stage (step.c): P is the adapters' buffer,
// one bucket, priced as stage 1 (the all-gather after the optimizer; no per-wave collective).
tsr_status train_zero_cost(const dit_config *mc, const train_config *tc, int ranks,
                           cost_zero *out);

#endif
