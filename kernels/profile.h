// kernels/profile.h — the project's own timers: a profiling wrapper of any backend table.
//
// kernels_profiled(inner) makes a kernels_backend whose every entry forwards to the same
// entry of `inner` (same arguments, same results, bitwise) and adds one call and the
// call's wall time to that entry's counters. The model and the trainer use it exactly as
// they use `inner` (it is chosen in tools/ or bench/, like any backend); read the counters
// with kernels_profile_read and turn them into a table in the caller (tools/profile.h
// prints and writes JSON; nothing here prints).
//
// Timing: monotonic wall time around the call. With sync = 1 the wrapper calls
// inner->sync before taking the start time and again before the stop time, so on an
// asynchronous backend (CUDA) an entry's time is the device time of its own kernels, not
// the time to queue them — at the cost of serialising host and device (the profiled step
// is slower than an unprofiled one; use it to split time between kernel classes, not to
// measure the step); a failed sync is returned by the entry being timed, as the next sync
// would have returned it. sync = 0 times only the calls themselves: exact on the CPU (whose
// sync is a no-op), the host-side launch cost on CUDA. Overhead on the CPU: two
// clock_gettime calls per entry (~50 ns), far below any kernel of a training step.
//
// Recorded graphs (kernels.h graph_*) are off through a profiled table: its graph_*
// entries are NULL, so the model runs every phase eagerly and each entry is timed alone.
// On CUDA the profile is therefore of the eager step (TESSERA_CUDA_GRAPHS has no effect).
//
// An entry that inner leaves out (kernels.h "unsupported entries") stays out: the profiled
// table has inner's stub there, so kernels_has answers through it as for inner.
//
// Framework overhead (what the model, the trainer and the allocator do between entries)
// is not seen by the wrapper: it is the step's wall time minus kernels_profile_total.
//
// Not thread-safe beyond the contract of kernels.h (an entry is not called concurrently on
// one backend): the counters are plain.
#ifndef TESSERA_KERNELS_PROFILE_H
#define TESSERA_KERNELS_PROFILE_H

#include <stdint.h>

#include "kernels/kernels.h"

// Kernel classes: every entry belongs to one.
typedef enum {
  KERNELS_PROFILE_GEMM,         // gemm, linear_* (with their fused bias/GELU epilogues)
  KERNELS_PROFILE_ATTENTION,    // attention_* (forward, backward, partial, merge, delta)
  KERNELS_PROFILE_ELEMENTWISE,  // norms, modulation, gates, RoPE, activations, embeddings,
                                // add/axpy/scale/fill/cast and their fused forms
  KERNELS_PROFILE_OPTIMIZER,    // adamw_update(_multi), ema_update, sumsq
  KERNELS_PROFILE_OBJECTIVE,    // objective_inputs, mse_*, euler_update
  KERNELS_PROFILE_MEMORY,       // alloc, free, to_device, to_host, copy, memset_zero
  KERNELS_PROFILE_OTHER,        // sync, reserve, memory_stats, mem_info
  KERNELS_PROFILE_N_CLASSES
} kernels_profile_class;

// "gemm", "attention", ... (the enum above, lower case).
const char *kernels_profile_class_name(kernels_profile_class c);

// The counters of one entry of the table.
typedef struct {
  const char *name;           // the entry's field name in kernels_backend, e.g. "linear_forward"
  kernels_profile_class cls;
  uint64_t calls;
  double seconds;             // summed wall time of its calls
  double bytes;               // summed bytes its calls must move at least, counted from the
                              // shapes (inputs read once, outputs written once, accumulated
                              // ones both; kernels/entries.h BYTES); 0 for entries not counted
  double flops;               // summed floating-point operations (entries.h FLOPS: the GEMMs'
                              // 2 m n k); 0 for entries not counted
} kernels_profile_entry;

// *out = a new backend forwarding to inner and timing every entry (see the top); name
// "<inner name>" (so tools/backend.h's device and precision rules see the same table),
// act_dtype, device_memory and stream are inner's. Free with kernels_profiled_free.
// TSR_EINVAL for NULL arguments, TSR_ENOMEM.
tsr_status kernels_profiled(const kernels_backend *inner, int sync, kernels_backend **out);
// Frees a backend from kernels_profiled (not its inner backend); *kb = NULL. NULL is ignored.
void kernels_profiled_free(kernels_backend **kb);
// 1 if kb was made by kernels_profiled, else 0.
int kernels_is_profiled(const kernels_backend *kb);
// The backend it forwards to (NULL if kb is not a profiled backend).
const kernels_backend *kernels_profiled_inner(const kernels_backend *kb);

// Zeroes every counter (e.g. after warm-up steps).
void kernels_profile_reset(const kernels_backend *kb);
// Copies the counters of every entry, in the order of kernels_backend's fields, into
// out[0 .. min(n, max)) and returns n, the number of entries (0 if kb is not profiled).
int kernels_profile_read(const kernels_backend *kb, kernels_profile_entry *out, int max);
// Sums of calls and seconds per class over entries e[0 .. n): calls[c], seconds[c] for
// c < KERNELS_PROFILE_N_CLASSES (either may be NULL).
void kernels_profile_by_class(const kernels_profile_entry *e, int n, uint64_t *calls,
                              double *seconds);
// Seconds spent in all entries (the sum of every entry's seconds).
double kernels_profile_total(const kernels_backend *kb);

#endif
