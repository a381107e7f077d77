// store/patchify.h — frames <-> tubelet tokens.
//
// A tubelet covers pt consecutive frames and a ph x pw pixel square. For a group of pt
// frames of size (h, w) with h % ph == 0 and w % pw == 0 there are H*W = (h/ph)*(w/pw)
// tokens, in row-major (y, x) order; each token holds pt*ph*pw*C values in (t, y, x, c)
// order. The tokens of a clip are the tubelet rows of its T groups in time order, so a
// clip is a (T, H, W, pt, ph, pw, C) array.
#ifndef TESSERA_STORE_PATCHIFY_H
#define TESSERA_STORE_PATCHIFY_H

#include <stdint.h>

// frames: pt frames, each (h, w, C) uint8, frame t at frames[t].
// tokens: (H*W, pt*ph*pw*C) uint8 output.
void patchify_u8(const uint8_t *const *frames, int pt, int h, int w, int C, int ph, int pw,
                 uint8_t *tokens);

// Inverse of patchify_u8: tokens (H*W, pt*ph*pw*C) -> pt frames (h, w, C).
void unpatchify_u8(const uint8_t *tokens, int pt, int h, int w, int C, int ph, int pw,
                   uint8_t *const *frames);

#endif
