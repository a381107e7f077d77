// tests/kernels/test_cuda_semantics.cu (gpu_cuda_semantics) — the CUDA behaviour that the
// emulated device (kernels/cuda/emu/cuemu.h) claims to reproduce, checked against closed
// forms: on a GPU it shows the claims hold on the hardware, on the emulated device (label
// emu) that the emulation keeps them.
//   - a block sum through shared memory, __syncthreads and warp shuffles (xor and indexed);
//   - launches the hardware refuses: more than 1024 threads, more than the kernel's
//     __launch_bounds__, over 48 KiB of dynamic shared memory without the kernel's
//     attribute (and accepted with it);
//   - a stream capture replayed twice does its work twice, with the arguments of the
//     recording; a wait inside a capture fails and invalidates it;
//   - with --no-device: CUDA_VISIBLE_DEVICES="" hides every device (cudaErrorNoDevice).
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

__global__ void k_block_sum(long long *out, int n) {
  __shared__ long long part[32];
  int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  long long v = 0;
  for (int i = t; i < n; i += blockDim.x) v += i;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    long long w = lane < (int)(blockDim.x >> 5) ? part[lane] : 0;
    for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
    long long first = __shfl_sync(0xffffffffu, w, 0);  // every lane has the same sum
    if (lane == 31) out[blockIdx.x] = first;
  }
}

__global__ void __launch_bounds__(64) k_bounded(int *x) { x[threadIdx.x] = 1; }

__global__ void k_dyn_smem(int *x, int n) {
  extern __shared__ int sm[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) sm[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) {
    int s = 0;
    for (int i = 0; i < n; i++) s += sm[i];
    *x = s;
  }
}

__global__ void k_add(int *x, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}

// --no-device (gpu_cuda_no_device): CUDA_VISIBLE_DEVICES empty, set before the runtime's
// first call (it reads the variable when it initialises), hides every device: counting
// and allocating fail with cudaErrorNoDevice (the emulated device: cuemu.h).
static int no_device(void) {
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  int n = -1;
  cudaError_t e = cudaGetDeviceCount(&n);
  CHECK(e == cudaErrorNoDevice, "cudaGetDeviceCount: %s, want cudaErrorNoDevice", cudaGetErrorName(e));
  void *p = NULL;
  e = cudaMalloc(&p, 256);
  CHECK(e == cudaErrorNoDevice, "cudaMalloc: %s, want cudaErrorNoDevice", cudaGetErrorName(e));
  return check_done();
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--no-device")) return no_device();
  long long *sums;
  CHECK(cudaMalloc((void **)&sums, 4 * sizeof(long long)) == cudaSuccess, "cudaMalloc");
  const int n = 100000;
  k_block_sum<<<4, 256>>>(sums, n);
  CHECK(cudaGetLastError() == cudaSuccess, "k_block_sum launch");
  long long h[4] = {0};
  CHECK(cudaMemcpy(h, sums, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess, "copy back");
  for (int b = 0; b < 4; b++)
    CHECK(h[b] == (long long)n * (n - 1) / 2, "block %d sum %lld, want %lld", b, h[b],
          (long long)n * (n - 1) / 2);

  int *x;
  CHECK(cudaMalloc((void **)&x, 4096 * sizeof(int)) == cudaSuccess, "cudaMalloc");
  // More threads than the device (1024) or the kernel's __launch_bounds__ allow: an invalid
  // value, as an H200 answers with CUDA 13.0 (older runtimes said invalid configuration and
  // out of resources); an empty grid: an invalid configuration.
  k_bounded<<<1, 2048>>>(x);
  cudaError_t le = cudaGetLastError();
  CHECK(le == cudaErrorInvalidValue, "2048 threads over __launch_bounds__(64): %s, want "
        "cudaErrorInvalidValue", cudaGetErrorName(le));
  k_bounded<<<1, 128>>>(x);
  le = cudaGetLastError();
  CHECK(le == cudaErrorInvalidValue, "128 threads over __launch_bounds__(64): %s, want "
        "cudaErrorInvalidValue", cudaGetErrorName(le));
  k_block_sum<<<1, 2048>>>(sums, n);
  le = cudaGetLastError();
  CHECK(le == cudaErrorInvalidValue, "2048 threads: %s, want cudaErrorInvalidValue",
        cudaGetErrorName(le));
  k_block_sum<<<0, 256>>>(sums, n);
  le = cudaGetLastError();
  CHECK(le == cudaErrorInvalidConfiguration, "an empty grid: %s, want cudaErrorInvalidConfiguration",
        cudaGetErrorName(le));
  k_bounded<<<1, 64>>>(x);
  CHECK(cudaGetLastError() == cudaSuccess, "64 threads within the bound");

  const int ns = 16384;  // 64 KiB of int
  k_dyn_smem<<<1, 256, ns * sizeof(int)>>>(x, ns);
  CHECK(cudaGetLastError() != cudaSuccess, "64 KiB of dynamic shared memory without the attribute");
  CHECK(cudaFuncSetAttribute(k_dyn_smem, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)(ns * sizeof(int))) == cudaSuccess, "attribute");
  k_dyn_smem<<<1, 256, ns * sizeof(int)>>>(x, ns);
  CHECK(cudaGetLastError() == cudaSuccess, "64 KiB with the attribute");
  int got = 0;
  CHECK(cudaMemcpy(&got, x, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess, "copy back");
  CHECK(got == ns * (ns - 1) / 2, "dynamic shared memory sum %d, want %d", got, ns * (ns - 1) / 2);

  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
  // On s itself: a plain cudaMemset runs on the legacy stream, which does not order
  // against the non-blocking s (and returns before it is done for device memory).
  CHECK(cudaMemsetAsync(x, 0, 4096 * sizeof(int), s) == cudaSuccess, "memset");
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
  int v = 3;
  k_add<<<16, 256, 0, s>>>(x, v, 4096);
  v = 100;  // the recording keeps 3
  CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
  CHECK(cudaGraphInstantiateWithFlags(&ge, g, 0) == cudaSuccess, "instantiate");
  CHECK(cudaGraphLaunch(ge, s) == cudaSuccess, "launch 1");
  CHECK(cudaGraphLaunch(ge, s) == cudaSuccess, "launch 2");
  CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
  static int hx[4096];
  CHECK(cudaMemcpy(hx, x, sizeof hx, cudaMemcpyDeviceToHost) == cudaSuccess, "copy back");
  int bad = 0;
  for (int i = 0; i < 4096; i++) bad += hx[i] != 6;
  CHECK(bad == 0, "%d of 4096 elements are not 3 + 3 after two replays", bad);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);

  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
  CHECK(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported, "a wait while recording");
  g = NULL;
  CHECK(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated, "the capture is invalidated");
  if (g) cudaGraphDestroy(g);
  cudaGetLastError();
  (void)v;

  cudaStreamDestroy(s);
  cudaFree(x);
  cudaFree(sums);
  return check_done();
}
