// model/train/lr.h — the learning-rate schedule and the EMA decay of a step.
#ifndef TESSERA_MODEL_TRAIN_LR_H
#define TESSERA_MODEL_TRAIN_LR_H

#include <stdint.h>

#include "model/config.h"

// Linear warmup then cosine decay to min_lr at S = lr_schedule_length, for 0-based step s:
//   s < warmup:            lr * (s + 1) / warmup
//   else, p = (s - warmup) / max(1, S - warmup) clamped to [0, 1]:
//                          min_lr + (lr - min_lr) * (1 + cos(pi p)) / 2
// Steps past S stay at min_lr. Computed in double.
double lr_schedule(const train_config *t, int64_t s);
// The steps the schedule spans: train.lr_schedule_steps, or train.steps when it is 0.
int64_t lr_schedule_length(const train_config *t);
// EMA decay used at 0-based step s, with warm-up: min(ema_decay, (1 + s) / (10 + s)).
// Without it the EMA of a short run is mostly the initial weights (0.999^200 = 0.82),
// whose zero-initialised output layer predicts nothing: samples would stay noise.
double ema_decay_at(const train_config *t, int64_t s);

#endif
