// kernels/backends.c — the one list of the backends built into this binary (kernels.h).
// Tests and tools that want "every backend" ask here; a new backend adds itself below,
// under its build flag (the CUDA backend: #ifdef TESSERA_HAVE_CUDA).
#include "kernels/kernels.h"

#include <string.h>

#ifdef TESSERA_HAVE_CUDA
#include "kernels/cuda/cuda.h"
#endif

int kernels_backends(const kernels_backend **out, int max) {
  const kernels_backend *all[3] = {kernels_cpu(), kernels_cpu_bf16(), NULL};
  int n = 2;
#ifdef TESSERA_HAVE_CUDA
  // Listed only when a device is visible: CPU-only machines (and builds) are unaffected.
  if (kernels_cuda_available(NULL, 0)) all[n++] = kernels_cuda();
#endif
  for (int i = 0; i < n && i < max; i++) out[i] = all[i];
  return n;
}

int kernels_backend_unusable(const char *device, char *why, size_t n) {
  if (why && n) why[0] = '\0';
#ifdef TESSERA_HAVE_CUDA
  if (device && !strcmp(device, "cuda")) return !kernels_cuda_available(why, n);
#endif
  (void)device;
  return 0;
}
