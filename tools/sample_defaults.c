// tools/sample_defaults.c — `tessera sample`'s defaults from the checkpoint's store
// (tools/sample_defaults.h).
#include "tools/sample_defaults.h"

#include <math.h>

#include "core/log.h"
#include "model/io/checkpoint.h"

// v rounded to the nearest multiple of unit, at least unit.
static int round_to(double v, int unit) {
  long k = lround(v / unit);
  return (int)(k < 1 ? unit : k * unit);
}

tsr_status sample_fill_defaults(sample_options *o) {
  if (o->frames && o->height) return TSR_OK;
  ckpt_meta cm = {0};
  tsr_status st = ckpt_read_meta(o->ckpt, &cm);
  if (st) return st;
  const store_settings *s = &cm.store;
  const dit_config *m = &cm.mc;
  if (!o->height && (store_is_latent(s) || s->short_side <= 0))
    st = err_set(TSR_EINVAL, "missing --size HxW: checkpoint %s was trained on a store of "
                 "latents, which records no frame size; give the latent grid's size (multiples "
                 "of %dx%d)", o->ckpt, m->ph, m->pw);
  if (!st && !o->frames && s->fps_num > 0 && s->fps_den > 0)
    o->frames = round_to(2.0 * s->fps_num / s->fps_den, m->pt);
  if (!st && !o->height) {
    o->height = round_to(s->short_side, m->ph);
    o->width = round_to(s->short_side * 16.0 / 9.0, m->pw);
  }
  if (!st)
    log_info("sample: --frames %d --size %dx%d from checkpoint %s's store (%d/%d fps, short "
             "side %d, patch %dx%dx%d: 2 s, 16:9; give --frames or --size for others)",
             o->frames, o->height, o->width, o->ckpt, s->fps_num, s->fps_den, s->short_side,
             m->pt, m->ph, m->pw);
  ckpt_meta_free(&cm);
  return st;
}
