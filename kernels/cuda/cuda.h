// kernels/cuda/cuda.h — the CUDA backend (kernels.h): bf16 activations, fp32 accumulation,
// fp32 parameters/gradients/optimizer state, device memory, one stream.
//
// Built only when the CUDA toolkit is found (TESSERA_HAVE_CUDA); kernels_backends() lists
// "cuda" only when kernels_cuda_available() says a device is usable.
#ifndef TESSERA_KERNELS_CUDA_CUDA_H
#define TESSERA_KERNELS_CUDA_CUDA_H

#include <stddef.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

// 1 when a CUDA device is visible and the backend can be created (its stream, cuBLASLt
// handle and workspace); 0 otherwise, with the reason in why[0 .. n) (may be NULL). Prints
// nothing. Safe to call repeatedly (the answer is computed once).
int kernels_cuda_available(char *why, size_t n);

// The CUDA backend on the current device (created on the first call, never freed), or NULL
// when kernels_cuda_available() is 0.
const kernels_backend *kernels_cuda(void);

#ifdef __cplusplus
}
#endif

#endif
