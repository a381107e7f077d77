// model/train/lr.c — learning-rate schedule: linear warmup, cosine decay (model/train/lr.h).
#include "model/train/lr.h"

#include <math.h>

double lr_schedule(const train_config *t, int64_t s) {
  if (s < 0) s = 0;
  if (s < t->warmup) return (double)t->lr * (double)(s + 1) / (double)t->warmup;
  int64_t span = lr_schedule_length(t) - t->warmup;
  double p = (double)(s - t->warmup) / (double)(span > 1 ? span : 1);
  if (p > 1) p = 1;
  return (double)t->min_lr + ((double)t->lr - (double)t->min_lr) * 0.5 * (1 + cos(M_PI * p));
}

int64_t lr_schedule_length(const train_config *t) {
  return t->lr_schedule_steps > 0 ? t->lr_schedule_steps : t->steps;
}

double ema_decay_at(const train_config *t, int64_t s) {
  double warm = (1.0 + (double)s) / (10.0 + (double)s);
  return warm < t->ema_decay ? warm : t->ema_decay;
}
