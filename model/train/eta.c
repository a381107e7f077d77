// model/train/eta.c — the time left of a training run (model/train/eta.h).
#include "model/train/eta.h"

int64_t train_eta_due(int64_t step, int64_t stop, int64_t every) {
  if (every <= 0 || stop <= step) return 0;
  int64_t n = stop / every - step / every;
  return n + (stop % every != 0);
}

double train_eta_left(const train_eta *e, const train_config *t, int64_t step, int64_t stop,
                      int validate) {
  if (!e->steps || stop <= step) return e->steps ? 0 : -1;
  double per_step = e->step_s / (double)e->steps;
  double fwd = per_step / 3;  // a forward pass over a batch: about a third of a step
  double val = e->vals ? e->val_s / (double)e->vals
             : 5 * fwd * (double)t->val_clips / (double)(t->global_batch > 0 ? t->global_batch : 1);
  double sample = e->samples ? e->sample_s / (double)e->samples
                : (double)t->sample_steps * fwd * (t->sample_cfg != 1.0f ? 2 : 1);
  double ckpt = e->ckpts ? e->ckpt_s / (double)e->ckpts : 0;
  double left = per_step * (double)(stop - step);
  // step's validation is done; its samples and checkpoint are still to come
  if (validate) left += val * (double)train_eta_due(step, stop, t->val_every);
  left += sample * (double)train_eta_due(step - 1, stop, t->sample_every);
  left += ckpt * (double)train_eta_due(step - 1, stop, t->ckpt_every);
  return left;
}
