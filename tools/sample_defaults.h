// tools/sample_defaults.h — what `tessera sample` takes when --frames or --size is not
// given: the frames and size of the checkpoint's store (docs/train.md "tessera sample").
#ifndef TESSERA_TOOLS_SAMPLE_DEFAULTS_H
#define TESSERA_TOOLS_SAMPLE_DEFAULTS_H

#include "core/err.h"
#include "model/sample/sample.h"

// o->frames == 0: 2 s at the store's frame rate, a multiple of the model's pt (at least
// pt). o->height == 0: the store's short side as the height and the 16:9 width, each
// rounded to a multiple of ph and pw. From the checkpoint o->ckpt's metadata (its store
// settings and model); a latent store records no pixel size, so there --size is required
// (TSR_EINVAL saying so). Says what it took on the log.
tsr_status sample_fill_defaults(sample_options *o);

#endif
