// kernels/cuda/emu/emu_internal.h — shared by the emulated device's runtime (runtime.cpp)
// and its executor (device.cpp); see cuemu.h.
#ifndef TESSERA_KERNELS_CUDA_EMU_INTERNAL_H
#define TESSERA_KERNELS_CUDA_EMU_INTERNAL_H

#include <cuda_runtime.h>

#include <functional>

// Runs every block of a launch, now (device.cpp). Returns cudaSuccess, or the error a
// failed kernel leaves (after printing what failed: a deadlocked barrier aborts).
void cuemu_run_grid(const void *fn, dim3 grid, dim3 block, size_t smem,
                    const std::function<void()> &body);
// The registered kernel of fn: its name ("?" if unknown) and __launch_bounds__ (0: none).
const char *cuemu_kernel_name(const void *fn, int *max_threads);
// Dynamic shared memory a kernel may use (cudaFuncSetAttribute), 48 KiB by default.
size_t cuemu_kernel_smem_limit(const void *fn);

// The stream model (runtime.cpp): work submitted to a stream runs at once, unless the
// stream is capturing, in which case it is appended to the capture.
void cuemu_stream_work(cudaStream_t s, std::function<void()> work);
// Records a launch error for the next cudaGetLastError (the first one sticks until read).
void cuemu_set_launch_error(cudaError_t e);
// The largest dynamic shared memory per block the emulated device offers (H100: 227 KiB).
enum { CUEMU_SMEM_DEFAULT = 48 * 1024, CUEMU_SMEM_OPTIN = 232448 };

#endif
