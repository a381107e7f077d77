// tools/profile.h — the profile of a run on a profiled backend (kernels/profile.h) as a
// table: time per kernel class and per entry, per step, and the framework overhead (the
// wall time that no entry accounts for). Collected as data (profile_collect), then
// printed (profile_print) or written as JSON (profile_json) by bench_train_step
// --profile and by `tessera train` under TESSERA_PROFILE=1.
#ifndef TESSERA_TOOLS_PROFILE_H
#define TESSERA_TOOLS_PROFILE_H

#include <jansson.h>
#include <stdio.h>

#include "core/err.h"
#include "kernels/profile.h"

enum { PROFILE_MAX_ENTRIES = 128 };

typedef struct {
  const char *backend;  // the profiled table's name
  int steps;            // steps the counters cover (>= 1): the table shows per-step figures
  double wall_s;        // wall time of those steps, measured by the caller
  int n_entries;
  kernels_profile_entry entry[PROFILE_MAX_ENTRIES];
  uint64_t class_calls[KERNELS_PROFILE_N_CLASSES];
  double class_s[KERNELS_PROFILE_N_CLASSES];
  double kernels_s;     // sum over entries
  double overhead_s;    // wall_s - kernels_s: the model, trainer, allocator between entries
  double hbm_gbs;       // the device's memory bandwidth, GB/s, for each entry's floor (its
                        // bytes at this rate): TESSERA_HBM_GBS, else 4800 (an H200's HBM3e)
} profile_report;

// r = the counters of kb (a kernels_profiled backend) over `steps` steps that took wall_s.
// TSR_EINVAL when kb is not profiled or steps < 1.
tsr_status profile_collect(const kernels_backend *kb, int steps, double wall_s,
                           profile_report *r);
// The table: one line per class (ms per step, % of the step, calls per step), the
// framework overhead, the step; then the entries that were called, slowest first, with
// the bytes they must move per step (kernels_profile_entry.bytes), the time those take at
// hbm_gbs (the floor) and the entry's time over it ("x floor"; blank where not counted).
void profile_print(FILE *f, const profile_report *r);
// {backend, steps, wall_s, step_ms, kernels_ms, overhead_ms, hbm_gbs, classes: {gemm:
// {ms, calls}, ...}, entries: [{name, class, ms, calls, mbytes, floor_ms, x_floor}, ...]}
// with per-step ms, calls and MB (10^6 bytes); x_floor null where no bytes are counted.
json_t *profile_json(const profile_report *r);

#endif
