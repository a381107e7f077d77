// model/train/calibrate.h — fit the scheduler's cost model (sched/cost.h) to measured times of
// the configured model on this machine's backend (`tessera calibrate`).
//
// Compute: one clip of L tokens for L on a geometric grid; one microbatch as the trainer
// runs it (objective, upload, forward, backward) is timed (median of `reps` runs after a
// warm-up) and
//   t(L) = ovh + a L + b L^2
// is fitted by least squares on relative error (times span decades), with negative
// coefficients dropped and the rest refitted.
// Communication: kv = bytes per token per ring step, forward and backward together, from
// the model (per block: K and V forward, K, V, dK, dV backward: 6 D values of the act
// dtype, 24 D bytes in fp32, 12 D in bf16).
// With more than one rank, lat and bw_intra are measured by ring exchanges in the world
// group (small and large messages), a2a_lat and a2a_bw_intra by all-to-alls, ag_bw, rs_bw
// and coll_lat (ZeRO's world collectives, sched/cost.h) by all-gathers and reduce-scatters
// of 16 bytes and of 64 MiB whole, and the all-reduce of the gradient size joins
// `allreduce`, all through the communication backend on buffers of the compute backend
// (NCCL or staged MPI on device memory, MPI on host memory), the model's per-step cost outside the microbatches, which also holds the
// optimizer step (zero grad, norm, AdamW, EMA: always measured). With one rank lat,
// bw_intra and the keys above come from a base cost file.
// bw_inter is always taken from the base file (one node cannot measure it).
#ifndef TESSERA_MODEL_CALIBRATE_H
#define TESSERA_MODEL_CALIBRATE_H

#include <stdint.h>
#include "comm/comm.h"
#include "core/err.h"
#include "model/config.h"
#include "sched/cost.h"

typedef struct {
  int64_t min_tokens, max_tokens;  // range of clip lengths timed
  int points;                      // lengths on the geometric grid (>= 3)
  int reps;                        // timed runs per length (median)
  const comm_backend *comm;        // ring and all-reduce timings under mpirun, in the
                                   // compute backend's memory (as training runs them)
  const backend_choice *backend;   // compute device, chosen by the caller (tools/backend.h);
                                   // train.precision picks its table
} calibrate_opts;

typedef struct {
  int64_t tokens;
  double measured_s, fitted_s;
} calibrate_point;

typedef struct {
  cost_model cost;                 // the fitted model
  int measured_comm;               // lat, bw_intra, allreduce were measured (world > 1)
  double max_rel_err;              // of the compute fit over the points
  double optimizer_s;              // measured optimizer step (part of cost.allreduce)
} calibrate_result;

// Collective over the world. pts: (opts->points) filled with the measurements.
tsr_status calibrate_run(const dit_config *mc, const train_config *tc, const calibrate_opts *o,
                         const cost_model *base, calibrate_point *pts, calibrate_result *res);

// Writes a cost file (key = value, with a comment header) atomically.
tsr_status calibrate_write(const char *path, const calibrate_result *res, const char *comment);

#endif
