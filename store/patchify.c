#include "store/patchify.h"

#include <string.h>

// Both directions copy one row of pw*C bytes at a time: the same index arithmetic
// serves patchify (frames -> tokens) and its inverse, chosen by `to_tokens`.
static void tubelet_copy(uint8_t *tokens, uint8_t *const *frames, int pt, int h, int w, int C,
                         int ph, int pw, int to_tokens) {
  const int H = h / ph, W = w / pw;
  const size_t row = (size_t)pw * C;
  const size_t token_bytes = (size_t)pt * ph * pw * C;
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      uint8_t *tok = tokens + ((size_t)y * W + x) * token_bytes;
      for (int t = 0; t < pt; t++)
        for (int dy = 0; dy < ph; dy++) {
          uint8_t *pix = frames[t] + (((size_t)y * ph + dy) * w + (size_t)x * pw) * C;
          uint8_t *val = tok + ((size_t)t * ph + dy) * row;
          if (to_tokens) memcpy(val, pix, row);
          else memcpy(pix, val, row);
        }
    }
}

void patchify_u8(const uint8_t *const *frames, int pt, int h, int w, int C, int ph, int pw,
                 uint8_t *tokens) {
  tubelet_copy(tokens, (uint8_t *const *)frames, pt, h, w, C, ph, pw, 1);
}

void unpatchify_u8(const uint8_t *tokens, int pt, int h, int w, int C, int ph, int pw,
                   uint8_t *const *frames) {
  tubelet_copy((uint8_t *)tokens, frames, pt, h, w, C, ph, pw, 0);
}
