// kernels/cuda/emu/cuemu.h — the emulated device: the CUDA backend's own kernels run on
// the CPU, for tests on machines without a GPU (configure with -DTESSERA_CUDA=EMU;
// docs/gpu.md "The emulated device").
//
// What it is: kernels/cuda/*.cu compiled as C++ by the host compiler (translate.py
// rewrites the launches, nothing else), with this header included first, and linked with
// kernels/cuda/emu/*.cpp in place of the CUDA runtime, cuBLASLt and cuDNN:
//   - every thread of a block is a fiber (ucontext) on one OS thread; __syncthreads,
//     __syncwarp and the warp shuffles are barriers of those fibers, so a kernel runs with
//     the CUDA semantics of its block and warp exchanges (a barrier that not every live
//     thread of its block or warp reaches is reported as a deadlock, naming the kernel);
//   - blocks run one after another; launches run in stream order at the launch (a
//     stream capture records them instead, and a graph launch replays them);
//   - launch checks as the hardware does them: block size <= 1024 and <= the kernel's
//     __launch_bounds__, grid limits, dynamic shared memory <= 48 KiB unless the kernel's
//     attribute allows more (up to the H100's 227 KiB), an error from cudaGetLastError;
//   - device memory is host memory; dynamic shared memory is filled with 0xff bytes (NaN
//     as float and bf16) before each block, so a read before a write shows;
//   - one device, index 0 of CUDA_VISIBLE_DEVICES (read once, at the first call, as CUDA
//     reads it at initialisation): an empty value, -1 or a list that does not start with 0
//     hides it, and then cudaGetDeviceCount and every call that needs a device (cudaMalloc,
//     cudaMemGetInfo, stream and event creation, device attributes) fail with
//     cudaErrorNoDevice, as CUDA's do — the way to test a CUDA build whose GPU cannot be
//     opened;
//   - cuBLASLt: the documented matmul (column-major, transposes, the BIAS, GELU_AUX(_BIAS)
//     and DGELU epilogues) in fp32 (emu/cublaslt.cpp); cuDNN: cudnnCreate fails, so the
//     backend's own attention kernels run, unless TESSERA_EMU_CUDNN=1: then a stand-in for
//     the backend's fused-attention graphs (emu/cudnn.cpp).
// What it is not: a timing model, a race detector between blocks (they never overlap), or
// a check of registers (nvcc's -Xptxas -v is). Floating point: the host's, without FMA
// contraction (nvcc contracts a * b + c): results agree with a GPU's to rounding.
#ifndef TESSERA_KERNELS_CUDA_EMU_CUEMU_H
#define TESSERA_KERNELS_CUDA_EMU_CUEMU_H

#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- the language ------------------------------------------------------------------------
// Without __CUDACC__ the toolkit's headers define __global__, __device__ and __shared__ as
// nothing; a block's shared array is one object for all its threads: a function-local
// static (blocks run one at a time, so each block has it to itself).
#undef __shared__
#define __shared__ static
#undef __launch_bounds__
#define __launch_bounds__(...)
#ifndef __restrict__
#define __restrict__ __restrict
#endif

extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
static const int warpSize = 32;

// ---- the launch ----------------------------------------------------------------------------
struct cuemu_kernel_info {
  const void *fn;
  const char *name;
  int max_threads;  // __launch_bounds__, 0 for none
};
int cuemu_register_kernels(const cuemu_kernel_info *k, int n);
// Checks the configuration (an error for cudaGetLastError when it fails) and runs or
// records body for every thread of the grid.
void cuemu_submit(const void *fn, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                  std::function<void()> body);
void *cuemu_dyn_smem(void);

template <typename... P>
struct cuemu_launcher {
  void (*fn)(P...);
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  template <typename... A>
  void operator()(A &&...a) const {
    // The arguments are converted to the parameters' types and kept by value, as a launch
    // copies them: a recorded launch replays with the values of its recording.
    std::tuple<typename std::decay<P>::type...> args(std::forward<A>(a)...);
    void (*f)(P...) = fn;
    cuemu_submit((const void *)f, grid, block, smem, stream, [f, args]() { std::apply(f, args); });
  }
};
template <typename... P>
cuemu_launcher<P...> cuemu_launch(void (*fn)(P...), dim3 grid, dim3 block, size_t smem = 0,
                                  cudaStream_t stream = 0) {
  return cuemu_launcher<P...>{fn, grid, block, smem, stream};
}

// The runtime's C++ overload for a kernel (cuda_runtime.h has it for nvcc only).
template <typename T>
cudaError_t cudaFuncSetAttribute(T *kernel, enum cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute((const void *)kernel, attr, value);
}

// ---- barriers and warp exchanges (emu/device.cpp) ------------------------------------------
void cuemu_barrier_block(void);
void cuemu_barrier_warp(unsigned mask);
// out = the value `bytes` long that lane src_lane of this warp passed as v (all lanes of
// mask call it together).
void cuemu_warp_exchange(unsigned mask, const void *v, void *out, size_t bytes, int src_lane);
int cuemu_lane(void);

static inline void __syncthreads(void) { cuemu_barrier_block(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { cuemu_barrier_warp(mask); }

template <typename T>
T cuemu_shfl(unsigned mask, T v, int from) {
  T out;
  cuemu_warp_exchange(mask, &v, &out, sizeof(T), from);
  return out;
}
// The source lane of each shuffle, within the caller's segment of `width` lanes (a source
// outside it gives the caller's own value, as CUDA's xor and down shuffles do).
template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  int lane = cuemu_lane();
  return cuemu_shfl(mask, v, (lane & ~(width - 1)) + (src & (width - 1)));
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  int lane = cuemu_lane(), from = lane ^ lane_mask;
  return cuemu_shfl(mask, v, (from & ~(width - 1)) == (lane & ~(width - 1)) ? from : lane);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  int lane = cuemu_lane(), from = lane + (int)delta;
  return cuemu_shfl(mask, v, (from & ~(width - 1)) == (lane & ~(width - 1)) ? from : lane);
}

// ---- atomics: the fibers of a launch share one OS thread, so a plain update is atomic ----
static inline int atomicCAS(int *p, int cmp, int val) {
  int old = *p;
  if (old == cmp) *p = val;
  return old;
}
static inline unsigned atomicCAS(unsigned *p, unsigned cmp, unsigned val) {
  unsigned old = *p;
  if (old == cmp) *p = val;
  return old;
}
template <typename T>
T atomicAdd(T *p, T v) {
  T old = *p;
  *p = old + v;
  return old;
}
template <typename T>
T atomicMax(T *p, T v) {
  T old = *p;
  if (v > old) *p = v;
  return old;
}

// ---- intrinsics: the IEEE-rounded ones are the plain operations (no contraction) --------
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
// (glibc's math.h declares functions of these two names: macros, defined after it)
#define __expf(x) expf(x)
#define __logf(x) logf(x)
static inline float __fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline unsigned __umulhi(unsigned a, unsigned b) {
  return (unsigned)(((unsigned long long)a * b) >> 32);
}
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
template <typename To, typename From>
static inline To cuemu_bits(From v) {
  static_assert(sizeof(To) == sizeof(From), "a reinterpretation keeps the size");
  To t;
  memcpy(&t, &v, sizeof t);
  return t;
}
static inline float __uint_as_float(unsigned u) { return cuemu_bits<float>(u); }
static inline unsigned __float_as_uint(float f) { return cuemu_bits<unsigned>(f); }
static inline int __float_as_int(float f) { return cuemu_bits<int>(f); }
static inline float __int_as_float(int u) { return cuemu_bits<float>(u); }
// CUDA's min/max overloads (device code calls them unqualified), one pair per type.
#define CUEMU_MINMAX(T)                                              \
  static inline T min(T a, T b) { return a < b ? a : b; }            \
  static inline T max(T a, T b) { return a > b ? a : b; }
CUEMU_MINMAX(int)
CUEMU_MINMAX(unsigned)
CUEMU_MINMAX(long long)
CUEMU_MINMAX(unsigned long long)
CUEMU_MINMAX(unsigned long)
#undef CUEMU_MINMAX
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
template <typename T>
T __ldg(const T *p) {
  return *p;
}

#endif
