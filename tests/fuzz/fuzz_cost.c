// fuzz_cost: the cost file reader, then the planner on a small batch with whatever cost
// model loaded (a = 1e308 once crashed sched/dynamic.c). The first 4 input bytes pick
// the cluster (ranks 1..16, gpus per node) and the batch; the rest is the cost file.
#include <math.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "sched/sched.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  const char *path = fuzz_scratch_path(".cost");
  fuzz_write_file(path, data + 4, size - 4);
  sched_config cfg = {.cluster = {1 << (data[0] % 5), 1 + data[1] % 8, 1000}};
  if (cost_model_load(path, &cfg.cost) == TSR_OK) {
    if (cost_model_check(&cfg.cost) != TSR_OK) abort();  // loader and check agree
    int64_t tokens[12];
    int n = 1 + data[2] % 12;
    for (int i = 0; i < n; i++)  // 1 .. ranks * M tokens, some near the limit
      tokens[i] = 1 + (int64_t)((data[3] * 2654435761u + 977u * i) %
                                (uint64_t)(cfg.cluster.ranks * cfg.cluster.mem_tokens));
    sched_result r;
    if (sched_plan_batch(&cfg, tokens, n, &r) == TSR_OK) {
      // Within the accepted ranges every time is finite and the plan never loses to
      // the baselines or beats the lower bound.
      if (!isfinite(r.predicted_s) || r.predicted_s > r.packing_only_s ||
          r.predicted_s > r.static_balanced_s || r.predicted_s < r.lower_bound_s * (1 - 1e-9))
        abort();
    } else {
      abort();  // a valid cost model and batch must plan
    }
    sched_result_free(&r);
  }
  unlink(path);
  return 0;
}
