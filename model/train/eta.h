// model/train/eta.h — a training run's time left: the steps to go at the mean step time,
// plus the validations, samples and checkpoints still due, each at its own measured mean
// (a sample takes as long as tens of steps: a linear extrapolation of the steps done,
// which the progress line used, left them out until they happened and overshot after).
#ifndef TESSERA_MODEL_TRAIN_ETA_H
#define TESSERA_MODEL_TRAIN_ETA_H

#include <stdint.h>

#include "model/config.h"

typedef struct {
  double step_s, val_s, sample_s, ckpt_s;  // seconds summed over the events measured
  int64_t steps, vals, samples, ckpts;     // how many
} train_eta;

// How many multiples of every lie in (step, stop], plus one for stop itself when it is not
// one (the run's last step validates, samples and saves); 0 for every <= 0.
int64_t train_eta_due(int64_t step, int64_t stop, int64_t every);

// Seconds left at `step` of a run to `stop` (validate: it holds validation clips), when the
// step has trained and validated and its samples and checkpoint are still to come. A
// kind not measured yet is estimated from the mean step: a validation as 5 noise levels of
// forward passes over val_clips (a forward a third of a step), a sample as sample_steps
// forward passes of a batch, each a third of a step; 0 before any step is measured.
double train_eta_left(const train_eta *e, const train_config *t, int64_t step, int64_t stop,
                      int validate);

#endif
