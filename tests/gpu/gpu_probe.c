// tests/gpu/gpu_probe.c — is a CUDA GPU visible? Exit 0 and print the devices if so,
// else print why and exit 77 (ctest's skip code for the "gpu" label: tests/CMakeLists.txt).
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void) {
  int n = 0, drv = 0, rt = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n < 1) {
    printf("SKIP: no GPU visible: %s\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0 devices");
    return 77;
  }
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  for (int i = 0; i < n; i++) {
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    printf("GPU %d: %s, compute capability %d.%d, %d SMs, %.1f GiB; driver API %d, runtime %d\n",
           i, p.name, p.major, p.minor, p.multiProcessorCount,
           p.totalGlobalMem / (1024.0 * 1024 * 1024), drv, rt);
  }
  return 0;
}
