// tests/train/test_memory_model.c — the trainer's memory model (model/train/memory.h) on
// its two sources of activation bytes, without running a step (tests/train/memory.sh holds
// the layout count to measured runs):
// - train.act_bytes_token = 0: activations are dit_memory_bytes' layout count, for each
//   model.recompute (0 > 2 > 1 in bytes, per token and block too);
// - train.act_bytes_token = X (measured on a device): activations = X * L exactly, inputs
//   and attention workspace 0, the total the sum of its parts; and train_memory_tokens
//   derives the largest L that fits from X: a capacity of (fixed part + X * L0) gives L0,
//   one byte less gives L0 - 1;
// - the config key parses (train.act_bytes_token), and a negative value is refused naming it;
// - samples of a LoRA run (train.sample_every with lora.rank): the sampling model's count
//   grows by its adapters exactly (dit_lora_memory's parameters, once: forward only, no
//   gradient buffer; their act-dtype working copy under bf16 and their activation buffer),
//   fp32 and bf16.
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "model/config.h"
#include "model/dit.h"
#include "model/lora.h"
#include "model/train/memory.h"
#include "model/train/step.h"

static void layout_source(void) {
  dit_config mc;
  train_config tc;
  config_defaults(&mc, &tc);
  tc.precision = KERNELS_BF16;
  train_memory m[3];
  for (int r = 0; r < 3; r++) {
    mc.recompute = r;
    CHECK_OK(train_memory_model(&mc, &tc, 1, 1, 4096, 1, &m[r]));
    dit_memory dm;
    CHECK_OK(dit_memory_bytes(&mc, KERNELS_BF16, 4096, m[r].clips, &dm));
    CHECK(m[r].activations == dm.activations && !m[r].measured,
          "recompute %d: activations %zu, the layout %zu", r, m[r].activations, dm.activations);
    CHECK(m[r].inputs > 0 && m[r].attention > 0, "recompute %d: inputs/attention not counted", r);
  }
  CHECK(m[1].activations < m[2].activations && m[2].activations < m[0].activations,
        "activations: none %zu, block %zu, cheap %zu", m[0].activations, m[1].activations,
        m[2].activations);
  CHECK(m[0].act_token_block_recompute < m[0].act_token_block_cheap &&
            m[0].act_token_block_cheap < m[0].act_token_block,
        "bytes per token and block: none %.0f, block %.0f, cheap %.0f", m[0].act_token_block,
        m[0].act_token_block_recompute, m[0].act_token_block_cheap);
}

static void measured_source(void) {
  dit_config mc;
  train_config tc;
  config_defaults(&mc, &tc);
  tc.precision = KERNELS_BF16;
  const int64_t X = 123457, L0 = 5000;  // bytes per token: not a multiple of anything
  tc.act_bytes_token = X;
  train_memory m;
  CHECK_OK(train_memory_model(&mc, &tc, 1, 1, L0, 1, &m));
  CHECK(m.measured && m.activations == (size_t)(X * L0) && m.inputs == 0 && m.attention == 0,
        "measured: activations %zu (want %lld), inputs %zu, attention %zu", m.activations,
        (long long)(X * L0), m.inputs, m.attention);
  CHECK(m.total == m.weights + m.grads + m.optimizer + m.activations + m.ring + m.reserve,
        "total %zu is not the sum of its parts", m.total);
  // the same model without the measurement differs only in the per-token terms
  train_config t0 = tc;
  t0.act_bytes_token = 0;
  train_memory m0;
  CHECK_OK(train_memory_model(&mc, &t0, 1, 1, L0, 1, &m0));
  CHECK(m0.weights == m.weights && m0.optimizer == m.optimizer && m0.ring == m.ring,
        "the parameter state changed with the measurement");
  // the planner's limit from the measured slope: capacity = fixed + X * L0
  size_t fixed = m.total - (size_t)(X * L0);
  int64_t L = 0;
  train_memory at;
  CHECK_OK(train_memory_tokens(&mc, &tc, 1, 1, 1, fixed + (size_t)(X * L0), 1 << 20, &L, &at));
  CHECK(L == L0, "capacity fixed + X * %lld gives %lld tokens", (long long)L0, (long long)L);
  CHECK_OK(train_memory_tokens(&mc, &tc, 1, 1, 1, fixed + (size_t)(X * L0) - 1, 1 << 20, &L, &at));
  CHECK(L == L0 - 1, "one byte less gives %lld tokens, want %lld", (long long)L,
        (long long)(L0 - 1));
  char buf[1024];
  train_memory_format(&m, buf, sizeof buf);
  CHECK(strstr(buf, "measured") != NULL, "the report does not say the value was measured: %s",
        buf);
}

static void config_key(void) {
  dit_config mc;
  train_config tc;
  char *ok[] = {"model.hidden=64", "model.depth=2", "model.heads=4", "model.pt=2",
                "model.ph=16",     "model.pw=16",   "model.channels=3",
                "train.act_bytes_token=98765"};
  CHECK_OK(config_load(NULL, ok, 8, &mc, &tc, NULL));
  CHECK(tc.act_bytes_token == 98765, "train.act_bytes_token = %lld", (long long)tc.act_bytes_token);
  char *bad[] = {"model.hidden=64", "model.depth=2", "model.heads=4", "model.pt=2",
                 "model.ph=16",     "model.pw=16",   "model.channels=3",
                 "train.act_bytes_token=-1"};
  CHECK(config_load(NULL, bad, 8, &mc, &tc, NULL) == TSR_EINVAL &&
            strstr(err_msg(), "act_bytes_token") != NULL,
        "a negative train.act_bytes_token: %s", err_msg());
}

static void lora_samples(kernels_dtype act) {
  dit_config mc;
  train_config tc;
  config_defaults(&mc, &tc);
  tc.precision = act;
  tc.sample_every = 1;
  const int64_t L = 2048;
  train_memory full, lora;
  CHECK_OK(train_memory_model(&mc, &tc, 1, 1, L, 1, &full));
  tc.lora_rank = 4;
  snprintf(tc.lora_targets, sizeof tc.lora_targets, "%s", "to_q,to_v,ffn.net.2");
  CHECK_OK(train_memory_model(&mc, &tc, 1, 1, L, 1, &lora));
  dit_config smc = mc;  // the sampling model: forward only, whole-block recompute, 2 clips
  smc.recompute = DIT_RECOMPUTE_BLOCK;
  lora_config lc = train_lora_config(&tc);
  size_t np = 0, ab = 0;
  CHECK_OK(dit_lora_memory(&smc, &lc, act, (int)L, 2, 1, &np, &ab));
  size_t copy = act != KERNELS_F32 ? np * kernels_dtype_size(act) : 0;
  size_t want = np * sizeof(float) + copy + ab;
  // its base as the training model's: fp32 masters of what the kernels read in fp32 only
  // with bf16 (dit_create_frozen_base), all of them with fp32
  dit_memory sm;
  CHECK_OK(dit_memory_bytes(&smc, act, L, 2, &sm));
  size_t base = sm.params - sm.frozen_params;
  CHECK(act == KERNELS_F32 ? base == 0 : base > sm.params / 2, "act %d: fp32 masters %zu of %zu",
        (int)act, sm.frozen_params, sm.params);
  CHECK(np > 0 && lora.samples + base == full.samples + want,
        "act %d: LoRA samples %zu, full %zu - the base's linear masters %zu + the sampler's "
        "adapters %zu (%zu parameters)", (int)act, lora.samples, full.samples, base, want, np);
}

int main(void) {
  layout_source();
  measured_source();
  config_key();
  lora_samples(KERNELS_F32);
  lora_samples(KERNELS_BF16);
  return check_done();
}
