// kernels/cuda/cublaslt_lazy.c — cuBLASLt opened at the backend's first GEMM set-up, not at
// program start (core/lazylib.h): the functions of cublasLt.h the backend calls, each
// forwarding to the library's own. The build links this file instead of libcublasLt
// (kernels/cuda/CMakeLists.txt: TSR_CUBLASLT_PATH, TSR_CUBLASLT_SONAME).
#include <cublasLt.h>
#include <stdio.h>

#include "core/lazylib.h"

static lazylib lib = LAZYLIB_INIT(TSR_CUBLASLT_PATH, TSR_CUBLASLT_SONAME);

// A forwarding definition of cuBLASLt function NAME (PARAMS, called with ARGS).
#define FORWARD(NAME, PARAMS, ARGS) \
  LAZYLIB_FORWARD(lib, cublasStatus_t, CUBLAS_STATUS_NOT_INITIALIZED, NAME, PARAMS, ARGS)

FORWARD(cublasLtCreate, (cublasLtHandle_t *h), (h))
FORWARD(cublasLtMatmul,
        (cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha, const void *A,
         cublasLtMatrixLayout_t Ad, const void *B, cublasLtMatrixLayout_t Bd, const void *beta,
         const void *C, cublasLtMatrixLayout_t Cd, void *D, cublasLtMatrixLayout_t Dd,
         const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes, cudaStream_t stream),
        (h, op, alpha, A, Ad, B, Bd, beta, C, Cd, D, Dd, algo, ws, ws_bytes, stream))
FORWARD(cublasLtMatmulAlgoGetHeuristic,
        (cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t Ad,
         cublasLtMatrixLayout_t Bd, cublasLtMatrixLayout_t Cd, cublasLtMatrixLayout_t Dd,
         cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t res[],
         int *returned),
        (h, op, Ad, Bd, Cd, Dd, pref, requested, res, returned))
FORWARD(cublasLtMatmulDescCreate,
        (cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t scale),
        (d, compute, scale))
FORWARD(cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t d), (d))
FORWARD(cublasLtMatmulDescSetAttribute,
        (cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const void *buf,
         size_t bytes),
        (d, attr, buf, bytes))
FORWARD(cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t *p), (p))
FORWARD(cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t p), (p))
FORWARD(cublasLtMatmulPreferenceSetAttribute,
        (cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr,
         const void *buf, size_t bytes),
        (p, attr, buf, bytes))
FORWARD(cublasLtMatrixLayoutCreate,
        (cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
        (l, type, rows, cols, ld))
FORWARD(cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t l), (l))
FORWARD(cublasLtMatrixLayoutSetAttribute,
        (cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, const void *buf,
         size_t bytes),
        (l, attr, buf, bytes))

// The status's text; when the library could not be opened, why (every caller's message
// goes through here).
const char *cublasLtGetStatusString(cublasStatus_t status) {
  static _Atomic(void *) cache;
  const char *(*f)(cublasStatus_t) = (const char *(*)(cublasStatus_t))lazylib_sym_cached(
      &lib, &cache, "cublasLtGetStatusString");
  if (f) return f(status);
  static __thread char why[600];
  snprintf(why, sizeof why, "cuBLASLt could not be opened (%s)", lazylib_why(&lib));
  return why;
}
