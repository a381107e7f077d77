// core/png.h — an RGB image as a PNG file in memory, stored without compression (deflate's
// stored blocks: no zlib needed), for TensorBoard's image summaries (model/train/tensorboard.h).
#ifndef TESSERA_CORE_PNG_H
#define TESSERA_CORE_PNG_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

// rgb: (h, w, 3) uint8, rows top to bottom. *out: malloc'ed PNG bytes (*n of them): IHDR
// (8-bit RGB), one IDAT of a zlib stream of stored blocks (filter 0 on every row), IEND.
// TSR_EINVAL for a size outside 1..65535, TSR_ENOMEM.
tsr_status png_encode_rgb(const uint8_t *rgb, int w, int h, uint8_t **out, size_t *n);

#endif
