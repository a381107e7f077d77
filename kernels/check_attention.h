// kernels/check_attention.h — kernels/check.h's contract for the attention entries of
// kernels/entries.h (private to kernels/: the backends include it, nothing above kernels/
// does): each kernels_check_<entry> takes the entry's arguments (without kb), checks what
// the host can without reading backend memory and returns TSR_OK or TSR_EINVAL with the
// entry's "op: what" message; tests/header_lists.py holds it to the code as check.h.
#ifndef TESSERA_KERNELS_CHECK_ATTENTION_H
#define TESSERA_KERNELS_CHECK_ATTENTION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "core/err.h"
#include "kernels/kernels.h"

// L, H, Dh >= 0; for L, H > 0: out_a, lse_a, out_b and lse_b given.
tsr_status kernels_check_attention_merge(const void *out_a, const float *lse_a,
                                         const void *out_b, const float *lse_b, int L, int H,
                                         int Dh);
// L, H, Dh >= 0; for L, H > 0: delta, dout and out given.
tsr_status kernels_check_attention_delta(const float *delta, const void *dout, const void *out,
                                         int L, int H, int Dh);
// The attention entries (kernels/entries.h). Sizes: Lq, Lk (L), H >= 0, Dh > 0, scale
// finite, max_q, max_k (max_len) >= 0, n_clips >= 0 with the offsets cu_q, cu_k
// (cu_seqlens) given, and no tokens without a clip. The offsets' values and the clips'
// lengths against max_q, max_k are the backend's to check (the CPU reads them at the call,
// CUDA on the device by the next sync), as are its own limits (CUDA's head dimension).
// Tensors: the forward's out, lse, q for Lq, H > 0, and k, v for Lk > 0 too; the
// backward's dk and dv both given or both NULL in every case, and for L (Lq and Lk) and H
// > 0 with a gradient asked, dout, q, k, v, out, lse (and the partial backward's delta).
tsr_status kernels_check_attention_forward(const void *out, const float *lse, const void *q,
                                           const void *k, const void *v,
                                           const int32_t *cu_seqlens, int n_clips, int max_len,
                                           int L, int H, int Dh, float scale);
tsr_status kernels_check_attention_backward(const void *dq, const void *dk, const void *dv,
                                            const void *dout, const void *q, const void *k,
                                            const void *v, const void *out, const float *lse,
                                            const int32_t *cu_seqlens, int n_clips,
                                            int max_len, int L, int H, int Dh, float scale);
tsr_status kernels_check_attention_partial_forward(const void *out, const float *lse,
                                                   const void *q, const void *k, const void *v,
                                                   const int32_t *cu_q, const int32_t *cu_k,
                                                   int n_clips, int max_q, int max_k, int Lq,
                                                   int Lk, int H, int Dh, float scale);
tsr_status kernels_check_attention_partial_backward(
    const void *dq, const void *dk, const void *dv, const void *dout, const void *q,
    const void *k, const void *v, const void *out, const float *lse, const float *delta,
    const int32_t *cu_q, const int32_t *cu_k, int n_clips, int max_q, int max_k, int Lq, int Lk,
    int H, int Dh, float scale);
// The masked entries: their unmasked entry's checks (under their own name), then the
// mask's kind known and its sizes in range (kernels.h kernels_mask) and, unless it is
// FULL, the positions given (pos_q: (Lq, 3), pos_k: (Lk, 3); pos: (L, 3)); the positions'
// values are the backend's (the CPU refuses negative ones, CUDA takes them as they are).
tsr_status kernels_check_attention_masked_forward(const void *out, const float *lse,
                                                  const void *q, const void *k, const void *v,
                                                  const int32_t *cu_q, const int32_t *cu_k,
                                                  const int32_t *pos_q, const int32_t *pos_k,
                                                  const kernels_mask *mask, int n_clips,
                                                  int max_q, int max_k, int Lq, int Lk, int H,
                                                  int Dh, float scale);
tsr_status kernels_check_attention_masked_backward(
    const void *dq, const void *dk, const void *dv, const void *dout, const void *q,
    const void *k, const void *v, const void *out, const float *lse, const int32_t *cu_seqlens,
    const int32_t *pos, const kernels_mask *mask, int n_clips, int max_len, int L, int H, int Dh,
    float scale);
tsr_status kernels_check_attention_masked_partial_backward(
    const void *dq, const void *dk, const void *dv, const void *dout, const void *q,
    const void *k, const void *v, const void *out, const float *lse, const float *delta,
    const int32_t *cu_q, const int32_t *cu_k, const int32_t *pos_q, const int32_t *pos_k,
    const kernels_mask *mask, int n_clips, int max_q, int max_k, int Lq, int Lk, int H, int Dh,
    float scale);

#ifdef __cplusplus
}
#endif

#endif
