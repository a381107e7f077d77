// kernels/backends.c — the one list of the backends built into this binary (kernels.h).
// Tests and tools that want "every backend" ask here; a new backend adds itself below,
// under its build flag (the CUDA backend: #ifdef TESSERA_HAVE_CUDA).
#include "kernels/kernels.h"

int kernels_backends(const kernels_backend **out, int max) {
  const kernels_backend *all[] = {kernels_cpu(), kernels_cpu_bf16()};
  int n = (int)(sizeof all / sizeof all[0]);
  for (int i = 0; i < n && i < max; i++) out[i] = all[i];
  return n;
}
