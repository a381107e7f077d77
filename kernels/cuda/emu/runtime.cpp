// kernels/cuda/emu/runtime.cpp — the emulated device's CUDA runtime (cuemu.h): the part of
// the runtime API that tessera calls, over host memory.
//
// The device: one GPU reported as an H100 (compute capability 9.0, 132 SMs, 227 KiB of
// opt-in shared memory) with CUEMU_MEMORY bytes (default 4G; K/M/G suffixes). It is device
// 0 of CUDA_VISIBLE_DEVICES: hidden by an empty value, -1 or any list not starting with 0,
// and then every call that needs a device fails with cudaErrorNoDevice, as CUDA's do.
//
// Streams: work is queued in submission order (one queue for all streams, an order that
// keeps every stream's order and every event wait) and runs at the next point where the
// host waits: cudaStreamSynchronize, cudaEventSynchronize/Query, cudaDeviceSynchronize,
// the synchronous cudaMemcpy/cudaMemset, cudaFree, and a cudaMemcpyAsync to or from
// pageable host memory (which the real runtime also does synchronously). So a host that
// reads a result before waiting for it reads what was there before, as on a GPU.
//
// Stream capture: the stream's work is recorded into the graph; a graph launch queues the
// recording. As in CUDA, while a stream records, calls that wait for the device or
// allocate fail with cudaErrorStreamCaptureUnsupported and invalidate the capture
// (cudaStreamEndCapture then fails with cudaErrorStreamCaptureInvalidated), and an
// asynchronous copy between the device and pageable host memory cannot be recorded.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <map>
#include <mutex>
#include <vector>

#include "kernels/cuda/emu/cuemu.h"
#include "kernels/cuda/emu/emu_internal.h"

namespace {

typedef std::function<void()> work_t;

struct stream_rec {
  int capturing = 0;    // recording into graph
  int invalidated = 0;  // a call the capture cannot hold was made
  std::vector<work_t> graph;
};
struct graph_rec {
  std::vector<work_t> items;
};
struct event_rec {
  int unused = 0;
};

struct state {
  std::recursive_mutex mu;
  std::vector<work_t> queue;
  stream_rec null_stream;
  std::vector<stream_rec *> streams;        // made by cudaStreamCreate*
  std::map<const void *, size_t> device;  // device allocations
  std::map<const void *, size_t> pinned;  // cudaHostAlloc / cudaMallocHost
  size_t used = 0, total = 0;
  cudaError_t last = cudaSuccess;
};
state &S() {
  static state s;
  return s;
}

size_t parse_bytes(const char *v, size_t dflt) {
  if (!v || !*v) return dflt;
  char *end;
  double x = strtod(v, &end);
  size_t m = 1;
  switch (*end) {
    case 'k': case 'K': m = (size_t)1 << 10; break;
    case 'm': case 'M': m = (size_t)1 << 20; break;
    case 'g': case 'G': m = (size_t)1 << 30; break;
    default: break;
  }
  return x > 0 ? (size_t)(x * (double)m) : dflt;
}

size_t total_bytes() {
  state &s = S();
  if (!s.total) s.total = parse_bytes(getenv("CUEMU_MEMORY"), (size_t)4 << 30);
  return s.total;
}

stream_rec *rec(cudaStream_t st) {
  // cudaStreamLegacy / cudaStreamPerThread are small integers: the null stream here.
  return (uintptr_t)st < 16 ? &S().null_stream : (stream_rec *)st;
}

stream_rec *capturing_any() {
  state &s = S();
  if (s.null_stream.capturing) return &s.null_stream;
  for (stream_rec *r : s.streams)
    if (r->capturing) return r;
  return NULL;
}

// Runs everything queued (the host waits for the device).
void drain() {
  state &s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  while (!s.queue.empty()) {
    std::vector<work_t> q;
    q.swap(s.queue);
    for (work_t &w : q) w();
  }
}

// A call that waits for the device or allocates, made while a capture records: it fails
// and the capture is invalidated.
cudaError_t refuse_if_capturing() {
  stream_rec *r = capturing_any();
  if (!r) return cudaSuccess;
  r->invalidated = 1;
  return cudaErrorStreamCaptureUnsupported;
}

cudaError_t ret(cudaError_t e) {
  if (e != cudaSuccess && S().last == cudaSuccess) S().last = e;
  return e;
}

// The host waits for the device: refused while a capture records, else everything queued runs.
cudaError_t wait_for_device() {
  cudaError_t e = refuse_if_capturing();
  if (e) return ret(e);
  drain();
  return cudaSuccess;
}

// CUDA_VISIBLE_DEVICES, read once as the CUDA runtime reads it when it initialises: a
// comma-separated list of device indices that ends at its first invalid entry. The one
// emulated device is index 0, so it is visible when the variable is unset or its first
// entry is 0; an empty value, -1, another index or a UUID hides it.
int device_visible() {
  static const int visible = [] {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (!v) return 1;
    char *end;
    long i = strtol(v, &end, 10);
    return end != v && i == 0 && (*end == '\0' || *end == ',') ? 1 : 0;
  }();
  return visible;
}

// With no visible device every call that needs one fails as CUDA's do: cudaErrorNoDevice.
#define CUEMU_NEED_DEVICE() \
  do {                      \
    if (!device_visible()) return ret(cudaErrorNoDevice); \
  } while (0)

// 1 if p lies inside one of the allocations (start -> bytes) of m.
int in_allocation(const std::map<const void *, size_t> &m, const void *p) {
  auto it = m.upper_bound(p);
  if (it == m.begin()) return 0;
  --it;
  return (const char *)p < (const char *)it->first + it->second;
}
int is_device(const void *p) { return in_allocation(S().device, p); }
int is_pinned(const void *p) { return in_allocation(S().pinned, p); }

}  // namespace

void cuemu_stream_work(cudaStream_t st, std::function<void()> work) {
  std::lock_guard<std::recursive_mutex> lock(S().mu);
  stream_rec *r = rec(st);
  if (r->capturing) r->graph.push_back(std::move(work));
  else S().queue.push_back(std::move(work));
}

void cuemu_set_launch_error(cudaError_t e) {
  stream_rec *r = capturing_any();
  if (r) r->invalidated = 1;
  ret(e);
}

extern "C" {

// ---- errors and versions --------------------------------------------------------------------
cudaError_t cudaGetLastError(void) {
  cudaError_t e = S().last;
  S().last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) { return S().last; }

const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    default: return "cudaErrorUnknown";
  }
}
const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    default: return "unknown error";
  }
}
cudaError_t cudaDriverGetVersion(int *v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) {
  *v = 13000;
  return cudaSuccess;
}

// ---- the device ---------------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int *n) {
  *n = device_visible();
  CUEMU_NEED_DEVICE();
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d) {
  CUEMU_NEED_DEVICE();
  *d = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
  CUEMU_NEED_DEVICE();
  return d == 0 ? cudaSuccess : ret(cudaErrorInvalidDevice);
}
cudaError_t cudaDeviceSynchronize(void) {
  CUEMU_NEED_DEVICE();
  return wait_for_device();
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) {
  CUEMU_NEED_DEVICE();
  if (d != 0) return ret(cudaErrorInvalidDevice);
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "tessera emulated device (H100-like, runs on the CPU)");
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = 132;
  p->totalGlobalMem = total_bytes();
  p->sharedMemPerBlock = CUEMU_SMEM_DEFAULT;
  p->sharedMemPerBlockOptin = CUEMU_SMEM_OPTIN;
  p->maxThreadsPerBlock = 1024;
  p->warpSize = 32;
  p->regsPerBlock = 65536;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d) {
  CUEMU_NEED_DEVICE();
  if (d != 0) return ret(cudaErrorInvalidDevice);
  switch (a) {
    case cudaDevAttrMultiProcessorCount: *v = 132; break;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = CUEMU_SMEM_OPTIN; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = CUEMU_SMEM_DEFAULT; break;
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; break;
    case cudaDevAttrWarpSize: *v = 32; break;
    default: return ret(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int d) {
  CUEMU_NEED_DEVICE();
  if (d != 0) return ret(cudaErrorInvalidDevice);
  snprintf(bus, (size_t)len, "0000:00:00.0");
  return cudaSuccess;
}
cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b) {
  CUEMU_NEED_DEVICE();
  size_t t = total_bytes();
  *total_b = t;
  *free_b = S().used < t ? t - S().used : 0;
  return cudaSuccess;
}

// ---- memory ---------------------------------------------------------------------------------
cudaError_t cudaMalloc(void **p, size_t bytes) {
  *p = NULL;
  CUEMU_NEED_DEVICE();
  cudaError_t e = refuse_if_capturing();
  if (e) return ret(e);
  state &s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  size_t r = bytes ? (bytes + 4095) / 4096 * 4096 : 4096;
  if (s.used + r > total_bytes()) return ret(cudaErrorMemoryAllocation);
  // Untouched pages cost nothing: an arena of gigabytes is fine on a small machine.
  void *m = mmap(NULL, r, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return ret(cudaErrorMemoryAllocation);
  s.device[m] = r;
  s.used += r;
  *p = m;
  return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
  if (!p) return cudaSuccess;
  cudaError_t e = refuse_if_capturing();
  if (e) return ret(e);
  drain();  // cudaFree waits for the device
  state &s = S();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  auto it = s.device.find(p);
  if (it == s.device.end()) return ret(cudaErrorInvalidValue);
  munmap(p, it->second);
  s.used -= it->second;
  s.device.erase(it);
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags) {
  (void)flags;
  *p = NULL;
  CUEMU_NEED_DEVICE();
  cudaError_t e = refuse_if_capturing();
  if (e) return ret(e);
  *p = malloc(bytes ? bytes : 1);
  if (!*p) return ret(cudaErrorMemoryAllocation);
  S().pinned[*p] = bytes ? bytes : 1;
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaHostAlloc(p, bytes, 0); }
cudaError_t cudaFreeHost(void *p) {
  if (!p) return cudaSuccess;
  drain();
  auto it = S().pinned.find(p);
  if (it == S().pinned.end()) return ret(cudaErrorInvalidValue);
  S().pinned.erase(it);
  free(p);
  return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
  memset(a, 0, sizeof *a);
  a->device = 0;
  if (is_device(p)) {
    a->type = cudaMemoryTypeDevice;
    a->devicePointer = (void *)p;
  } else if (is_pinned(p)) {
    a->type = cudaMemoryTypeHost;
    a->hostPointer = (void *)p;
    a->devicePointer = (void *)p;
  } else {
    a->type = cudaMemoryTypeUnregistered;
    a->device = -2;
    a->hostPointer = (void *)p;
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t st) {
  (void)kind;
  if (n == 0) return cudaSuccess;
  stream_rec *r = rec(st);
  int pageable = (!is_device(src) && !is_pinned(src)) || (!is_device(dst) && !is_pinned(dst));
  if (r->capturing && pageable) {
    r->invalidated = 1;
    return ret(cudaErrorStreamCaptureUnsupported);
  }
  if (pageable && !is_device(src) && !is_pinned(src)) {
    // From pageable memory the runtime stages the bytes before returning: src may be reused.
    std::vector<unsigned char> copy((const unsigned char *)src, (const unsigned char *)src + n);
    cuemu_stream_work(st, [dst, copy]() { memcpy(dst, copy.data(), copy.size()); });
  } else {
    cuemu_stream_work(st, [dst, src, n]() { memmove(dst, src, n); });
  }
  if (pageable) drain();  // a copy with pageable memory returns when it is done
  return cudaSuccess;
}
// Device-to-device only (what the backend uses it for).
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t st) {
  (void)kind;
  if (width == 0 || height == 0) return cudaSuccess;
  if (dpitch < width || spitch < width || !is_device(dst) || !is_device(src))
    return ret(cudaErrorInvalidValue);
  cuemu_stream_work(st, [dst, dpitch, src, spitch, width, height]() {
    for (size_t i = 0; i < height; i++)
      memmove((char *)dst + i * dpitch, (const char *)src + i * spitch, width);
  });
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  cudaError_t e = refuse_if_capturing();
  if (e) return ret(e);
  cuemu_stream_work(0, [dst, src, n]() { memmove(dst, src, n); });
  drain();
  (void)kind;
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st) {
  cuemu_stream_work(st, [p, v, n]() { memset(p, v, n); });
  return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int v, size_t n) {
  cudaError_t e = refuse_if_capturing();
  if (e) return ret(e);
  cuemu_stream_work(0, [p, v, n]() { memset(p, v, n); });
  drain();
  return cudaSuccess;
}

// ---- streams and events ---------------------------------------------------------------------
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned int flags) {
  (void)flags;
  CUEMU_NEED_DEVICE();
  stream_rec *r = new stream_rec();
  S().streams.push_back(r);
  *st = (cudaStream_t)r;
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *st) { return cudaStreamCreateWithFlags(st, 0); }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *st, unsigned int flags, int prio) {
  (void)prio;
  return cudaStreamCreateWithFlags(st, flags);
}
cudaError_t cudaStreamDestroy(cudaStream_t st) {
  drain();
  stream_rec *r = rec(st);
  auto &v = S().streams;
  for (size_t i = 0; i < v.size(); i++)
    if (v[i] == r) {
      v.erase(v.begin() + (long)i);
      delete r;
      return cudaSuccess;
    }
  return ret(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaStreamSynchronize(cudaStream_t st) {
  stream_rec *r = rec(st);
  if (r->capturing || capturing_any()) {
    (capturing_any())->invalidated = 1;
    return ret(cudaErrorStreamCaptureUnsupported);
  }
  drain();
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t ev, unsigned int flags) {
  (void)st, (void)ev, (void)flags;  // the one queue already orders it
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags) {
  (void)flags;
  CUEMU_NEED_DEVICE();
  *ev = (cudaEvent_t) new event_rec();
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *ev) { return cudaEventCreateWithFlags(ev, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t ev) {
  delete (event_rec *)ev;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st) {
  // Nothing to queue: the one queue orders every wait, and a waiting call drains it all. (An
  // event may be destroyed while its record is pending: CUDA allows that.)
  (void)ev, (void)st;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
  (void)ev;
  return wait_for_device();
}
cudaError_t cudaEventQuery(cudaEvent_t ev) {
  (void)ev;
  return wait_for_device();
}

// ---- capture and graphs ------------------------------------------------------------------
cudaError_t cudaStreamBeginCapture(cudaStream_t st, enum cudaStreamCaptureMode mode) {
  (void)mode;
  stream_rec *r = rec(st);
  if (r == &S().null_stream) return ret(cudaErrorStreamCaptureUnsupported);  // as CUDA: no legacy stream
  if (r->capturing) return ret(cudaErrorIllegalState);
  r->capturing = 1;
  r->invalidated = 0;
  r->graph.clear();
  return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t st, enum cudaStreamCaptureStatus *status) {
  stream_rec *r = rec(st);
  *status = !r->capturing ? cudaStreamCaptureStatusNone
            : r->invalidated ? cudaStreamCaptureStatusInvalidated
                             : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g) {
  stream_rec *r = rec(st);
  *g = NULL;
  if (!r->capturing) return ret(cudaErrorIllegalState);
  r->capturing = 0;
  if (r->invalidated) {
    r->graph.clear();
    return ret(cudaErrorStreamCaptureInvalidated);
  }
  graph_rec *gr = new graph_rec();
  gr->items.swap(r->graph);
  *g = (cudaGraph_t)gr;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *ex, cudaGraph_t g, unsigned long long flags) {
  (void)flags;
  if (!g) return ret(cudaErrorInvalidValue);
  graph_rec *x = new graph_rec(*(graph_rec *)g);
  *ex = (cudaGraphExec_t)x;
  return cudaSuccess;
}
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t ex, cudaGraph_t g, cudaGraphExecUpdateResultInfo *info) {
  if (info) memset(info, 0, sizeof *info);
  ((graph_rec *)ex)->items = ((graph_rec *)g)->items;
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t ex, cudaStream_t st) {
  for (const work_t &w : ((graph_rec *)ex)->items) cuemu_stream_work(st, w);
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  delete (graph_rec *)g;
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t ex) {
  delete (graph_rec *)ex;
  return cudaSuccess;
}

}  // extern "C"
