// kernels/cpu/blas.h — OpenBLAS, opened at the CPU backend's first GEMM (not at program
// start), with its buffers sized to the address space the process may use. Private to the
// CPU backend.
//
// Why: OpenBLAS's worker threads each allocate a GEMM buffer (128 MiB) when the library
// starts, and a worker whose allocation fails retries for ever: under a tight `ulimit -v`
// every command (`tessera --version` included) hung at exit. Opened lazily, the commands
// without a GEMM never start it; a GEMM under a limit gets as many threads as the limit
// leaves room for, or TSR_ENOMEM saying so ("out of memory: ..."), never a hang.
#ifndef TESSERA_KERNELS_CPU_BLAS_H
#define TESSERA_KERNELS_CPU_BLAS_H

#include <cblas.h>

#include "core/err.h"

// cblas_sgemm (row-major) through the opened library; TSR_ENOMEM (or TSR_EIO when the library
// cannot be opened) naming why, with nothing computed.
tsr_status kcpu_blas_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha,
                           const float *a, int lda, const float *b, int ldb, float beta, float *c,
                           int ldc);
// The threads OpenBLAS should run (n > 0); applied now if it is open, else when it opens
// (at most as many as the address-space limit leaves room for).
void kcpu_blas_set_threads(int n);

#endif
