// kernels/cuda/emu/device.cpp — the emulated device's executor (cuemu.h): the threads of a
// block as fibers on one OS thread, barriers and warp exchanges between them, blocks one
// after another.
//
// A fiber switch is six callee-saved registers and the stack pointer (ctx_switch below):
// ucontext's swapcontext also saves the signal mask with a system call each time, which
// made it 90% of an emulated training step.
#include <stdio.h>
#include <stdlib.h>

#include <map>
#include <mutex>
#include <vector>

#include "kernels/cuda/emu/cuemu.h"
#include "kernels/cuda/emu/emu_internal.h"

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

#if !defined(__x86_64__)
#error "the emulated device switches fibers with x86-64 code (device.cpp ctx_switch)"
#endif
// Saves the callee-saved registers on the current stack and its pointer in *save, then
// continues on the stack `load` (saved by an earlier switch, or made by fiber_stack).
extern "C" void cuemu_ctx_switch(void **save, void *load);
asm(".text\n"
    ".globl cuemu_ctx_switch\n"
    ".type cuemu_ctx_switch,@function\n"
    "cuemu_ctx_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size cuemu_ctx_switch,.-cuemu_ctx_switch\n");

namespace {

enum { READY, WAIT_BLOCK, WAIT_WARP, DONE };
enum { STACK_BYTES = 256 * 1024, XCHG_BYTES = 16 };

struct fiber {
  void *sp = NULL;  // its saved stack pointer while it does not run
  char *stack = NULL;
  int state = READY;
  unsigned mask = 0;  // of the warp barrier it waits at
};

// The block in progress (one at a time: launches run on the calling thread, in order).
struct block_run {
  std::vector<fiber> f;
  int n = 0, cur = -1;
  void *sched = NULL;  // the scheduler's saved stack pointer while a fiber runs
  const std::function<void()> *body = NULL;
  const char *kernel = "?";
  std::vector<double> dyn;  // dynamic shared memory (doubles: 8-byte aligned)
  std::vector<unsigned char> xchg;  // warp exchange slots, XCHG_BYTES per thread
};
block_run *run_now = NULL;
std::mutex launch_mutex;  // one launch at a time, whichever host thread queues it

struct kinfo {
  const char *name;
  int max_threads;
  size_t smem_limit;
};
std::map<const void *, kinfo> &kernels() {
  static std::map<const void *, kinfo> k;
  return k;
}

[[noreturn]] void die(const char *what) {
  block_run *r = run_now;
  fprintf(stderr, "cuemu: %s: kernel %s, block (%u, %u, %u), thread (%u, %u, %u)\n", what,
          r ? r->kernel : "(none)", blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y,
          threadIdx.z);
  abort();
}

void set_thread_index(int t) {
  threadIdx.x = (unsigned)t % blockDim.x;
  threadIdx.y = ((unsigned)t / blockDim.x) % blockDim.y;
  threadIdx.z = (unsigned)t / (blockDim.x * blockDim.y);
}

[[noreturn]] void fiber_entry(void) {
  block_run *r = run_now;
  (*r->body)();
  fiber &f = r->f[r->cur];
  f.state = DONE;
  cuemu_ctx_switch(&f.sp, r->sched);  // never resumed
  abort();
}

// A fresh stack whose first switch enters fiber_entry: six zero registers, then
// fiber_entry as the return address, then a zero return address for fiber_entry itself
// (which never returns), leaving the stack pointer 8 mod 16 at its entry as after a call.
void *fiber_stack(char *stack) {
  uintptr_t top = ((uintptr_t)stack + STACK_BYTES) & ~(uintptr_t)15;
  void **sp = (void **)top;
  *--sp = NULL;
  *--sp = (void *)&fiber_entry;
  for (int i = 0; i < 6; i++) *--sp = NULL;
  return sp;
}

// Releases the barriers every participant has reached; 0 when none could be released.
int release_barriers(block_run *r) {
  int released = 0, live = 0, at_block = 0;
  for (int t = 0; t < r->n; t++) {
    if (r->f[t].state != DONE) live++;
    if (r->f[t].state == WAIT_BLOCK) at_block++;
  }
  for (int w = 0; w * 32 < r->n; w++) {
    int lo = w * 32, hi = lo + 32 < r->n ? lo + 32 : r->n;
    unsigned mask = 0;
    int first = -1;
    for (int t = lo; t < hi; t++)
      if (r->f[t].state == WAIT_WARP) {
        first = t;
        mask = r->f[t].mask;
        break;
      }
    if (first < 0) continue;
    int ok = 1;
    for (int t = lo; t < hi && ok; t++) {
      if (!(mask >> (t - lo) & 1u)) continue;
      if (r->f[t].state == DONE) {
        set_thread_index(first);
        die("a warp barrier or shuffle names a lane that has exited");
      }
      if (r->f[t].state != WAIT_WARP) ok = 0;
      else if (r->f[t].mask != mask) {
        set_thread_index(t);
        die("lanes of one warp wait at barriers with different masks");
      }
    }
    if (!ok) continue;
    for (int t = lo; t < hi; t++)
      if (mask >> (t - lo) & 1u) r->f[t].state = READY;
    released = 1;
  }
  if (!released && live > 0 && at_block == live) {
    for (int t = 0; t < r->n; t++)
      if (r->f[t].state == WAIT_BLOCK) r->f[t].state = READY;
    released = 1;
  }
  return released;
}

void run_block(block_run *r) {
  for (int t = 0; t < r->n; t++) {
    fiber &f = r->f[t];
    if (!f.stack) f.stack = (char *)malloc(STACK_BYTES);
    if (!f.stack) die("out of memory for thread stacks");
    f.sp = fiber_stack(f.stack);
    f.state = READY;
  }
  if (!r->dyn.empty()) memset(r->dyn.data(), 0xff, r->dyn.size() * sizeof(double));
  for (;;) {
    int live = 0;
    for (int t = 0; t < r->n; t++) {
      if (r->f[t].state != READY) continue;
      r->cur = t;
      set_thread_index(t);
      cuemu_ctx_switch(&r->sched, r->f[t].sp);
    }
    for (int t = 0; t < r->n; t++) live += r->f[t].state != DONE;
    if (!live) break;
    if (!release_barriers(r)) {
      int t = 0;
      while (r->f[t].state == DONE) t++;
      set_thread_index(t);
      die("deadlock: not every live thread of the block (or of a warp) reached the same "
          "barrier (__syncthreads, __syncwarp or a shuffle)");
    }
  }
  r->cur = -1;
}

}  // namespace

int cuemu_register_kernels(const cuemu_kernel_info *k, int n) {
  for (int i = 0; i < n; i++)
    kernels()[k[i].fn] = kinfo{k[i].name, k[i].max_threads, (size_t)CUEMU_SMEM_DEFAULT};
  return n;
}

const char *cuemu_kernel_name(const void *fn, int *max_threads) {
  auto it = kernels().find(fn);
  if (max_threads) *max_threads = it == kernels().end() ? 0 : it->second.max_threads;
  return it == kernels().end() ? "?" : it->second.name;
}

size_t cuemu_kernel_smem_limit(const void *fn) {
  auto it = kernels().find(fn);
  return it == kernels().end() ? (size_t)CUEMU_SMEM_DEFAULT : it->second.smem_limit;
}

extern "C" cudaError_t cudaFuncSetAttribute(const void *fn, enum cudaFuncAttribute attr, int value) {
  auto it = kernels().find(fn);
  if (it == kernels().end()) return cudaErrorInvalidDeviceFunction;
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > CUEMU_SMEM_OPTIN) return cudaErrorInvalidValue;
    it->second.smem_limit = (size_t)value;
  }
  return cudaSuccess;
}

void cuemu_submit(const void *fn, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                  std::function<void()> body) {
  int bound = 0;
  const char *name = cuemu_kernel_name(fn, &bound);
  unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
  cudaError_t e = cudaSuccess;
  // A block of more threads than the device or the kernel's __launch_bounds__ allow is
  // refused as an invalid value (CUDA 13.0 on an H200, driver 580: 2048 threads, and 128
  // for a kernel bounded at 64); other impossible shapes as an invalid configuration.
  if (threads > 1024 || (bound > 0 && threads > (unsigned long long)bound))
    e = cudaErrorInvalidValue;
  else if (threads == 0 || block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x == 0 ||
           grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
    e = cudaErrorInvalidConfiguration;
  else if (smem > cuemu_kernel_smem_limit(fn))
    e = cudaErrorInvalidValue;
  if (e != cudaSuccess) {
    fprintf(stderr, "cuemu: launch of %s refused (%s): grid (%u, %u, %u), block (%u, %u, %u), "
            "%zu bytes of dynamic shared memory (limit %zu), __launch_bounds__ %d\n", name,
            cudaGetErrorString(e), grid.x, grid.y, grid.z, block.x, block.y, block.z, smem,
            cuemu_kernel_smem_limit(fn), bound);
    cuemu_set_launch_error(e);
    return;
  }
  cuemu_stream_work(stream, [fn, grid, block, smem, body]() {
    cuemu_run_grid(fn, grid, block, smem, body);
  });
}

void cuemu_run_grid(const void *fn, dim3 grid, dim3 block, size_t smem,
                    const std::function<void()> &body) {
  std::lock_guard<std::mutex> lock(launch_mutex);
  static block_run r;  // kept: its stacks are reused by the next launch
  if (run_now) die("a launch from inside a kernel");
  r.n = (int)(block.x * block.y * block.z);
  if ((int)r.f.size() < r.n) r.f.resize(r.n);
  r.body = &body;
  r.kernel = cuemu_kernel_name(fn, NULL);
  r.dyn.assign((smem + sizeof(double) - 1) / sizeof(double), 0.0);
  r.xchg.assign((size_t)r.n * XCHG_BYTES, 0);
  blockDim = block;
  gridDim = grid;
  run_now = &r;
  for (unsigned z = 0; z < grid.z; z++)
    for (unsigned y = 0; y < grid.y; y++)
      for (unsigned x = 0; x < grid.x; x++) {
        blockIdx.x = x;
        blockIdx.y = y;
        blockIdx.z = z;
        run_block(&r);
      }
  run_now = NULL;
}

void *cuemu_dyn_smem(void) {
  if (!run_now) die("dynamic shared memory outside a kernel");
  return run_now->dyn.empty() ? NULL : (void *)run_now->dyn.data();
}

static fiber &me(void) {
  if (!run_now || run_now->cur < 0) die("a barrier outside a kernel");
  return run_now->f[run_now->cur];
}

void cuemu_barrier_block(void) {
  fiber &f = me();
  f.state = WAIT_BLOCK;
  cuemu_ctx_switch(&f.sp, run_now->sched);
}

void cuemu_barrier_warp(unsigned mask) {
  fiber &f = me();
  int lane = run_now->cur % 32;
  if (!(mask >> lane & 1u)) die("a warp barrier or shuffle whose mask leaves out the calling lane");
  f.state = WAIT_WARP;
  f.mask = mask;
  cuemu_ctx_switch(&f.sp, run_now->sched);
}

int cuemu_lane(void) {
  me();
  return run_now->cur % 32;
}

void cuemu_warp_exchange(unsigned mask, const void *v, void *out, size_t bytes, int src_lane) {
  me();
  if (bytes > XCHG_BYTES) die("a shuffle of more than 16 bytes");
  block_run *r = run_now;
  int t = r->cur, base = t - t % 32;
  memcpy(&r->xchg[(size_t)t * XCHG_BYTES], v, bytes);
  cuemu_barrier_warp(mask);  // every lane of mask has written its value
  if (src_lane < 0 || src_lane > 31 || !(mask >> src_lane & 1u) || base + src_lane >= r->n)
    die("a shuffle reads a lane outside its mask");
  memcpy(out, &r->xchg[(size_t)(base + src_lane) * XCHG_BYTES], bytes);
  cuemu_barrier_warp(mask);  // every lane has read before any writes again
}
