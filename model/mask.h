// model/mask.h — the DiT's self-attention under model.attn_mask (kernels.h kernels_mask) on
// one rank's whole clips: the backend's masked entries with the batch's RoPE positions,
// which are each token's (t, y, x) in its clip's grid (a CP chunk's true positions).
// Cross-attention to captions is never masked.
#ifndef TESSERA_MODEL_MASK_H
#define TESSERA_MODEL_MASK_H

#include "core/err.h"
#include "kernels/kernels.h"
#include "model/config.h"
#include "model/dit.h"

// TSR_OK when kb can run c's attention (always for full); else TSR_EINVAL naming the
// mask, the backend and its missing entry.
tsr_status dit_mask_check_backend(const dit_config *c, const kernels_backend *kb);
// The batch's self-attention under c's mask, as kernels.h attention_forward/backward
// (out, lse overwritten; dq, dk, dv overwritten): out, q, k, v, dq, dk, dv, dout: (L, H, Dh)
// [act], lse: (L, H) [f32].
tsr_status dit_mask_forward(const dit_config *c, const kernels_backend *kb, const dit_batch *b,
                            void *out, float *lse, const void *q, const void *k, const void *v,
                            int H, int Dh, float scale);
tsr_status dit_mask_backward(const dit_config *c, const kernels_backend *kb, const dit_batch *b,
                             void *dq, void *dk, void *dv, const void *dout, const void *q,
                             const void *k, const void *v, const void *out, const float *lse,
                             int H, int Dh, float scale);

#endif
