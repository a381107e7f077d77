// kernels/cpu/blas.c — OpenBLAS opened at the first GEMM (kernels/cpu/blas.h).
#define _GNU_SOURCE
#include "kernels/cpu/blas.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/lazylib.h"
#include "core/log.h"

// OpenBLAS's GEMM buffer per thread (its BUFFER_SIZE of 128 MiB and a page, as this build's
// allocation shows) plus the thread's stack, and room for everything else the process maps
// while it runs (the kernels' own buffers are the caller's: their failures are reported).
#define BLAS_THREAD_BYTES ((int64_t)(128 + 8 + 1) << 20)
#define BLAS_SPARE_BYTES ((int64_t)64 << 20)

static lazylib lib = LAZYLIB_INIT(TSR_OPENBLAS_PATH, "libopenblas.so.0");
typedef void (*sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE,
                         const enum CBLAS_TRANSPOSE, const blasint, const blasint, const blasint,
                         const float, const float *, const blasint, const float *, const blasint,
                         const float, float *, const blasint);
typedef void (*threads_fn)(int);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static sgemm_fn sgemm;            // set once, by open_blas
static threads_fn set_threads;
static int cap;                   // the most threads the address space holds (0: no limit)
static _Atomic int wanted;        // kcpu_blas_set_threads' n (0: OpenBLAS's own choice)
static tsr_status open_status = TSR_OK;
static char open_why[700];

// Bytes of address space the process maps now (/proc/self/statm), or -1.
static int64_t mapped_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long long pages = -1;
  if (f && fscanf(f, "%lld", &pages) != 1) pages = -1;
  if (f) fclose(f);
  return pages < 0 ? -1 : pages * (int64_t)sysconf(_SC_PAGESIZE);
}

// The threads OpenBLAS starts by itself: OPENBLAS_NUM_THREADS, else the CPUs this process
// may run on.
static int default_threads(void) {
  const char *e = getenv("OPENBLAS_NUM_THREADS");
  if (e && atoi(e) > 0) return atoi(e);
  cpu_set_t s;
  return sched_getaffinity(0, sizeof s, &s) == 0 && CPU_COUNT(&s) > 0 ? CPU_COUNT(&s) : 1;
}

// Sizes the threads to the address-space limit (RLIMIT_AS): OPENBLAS_NUM_THREADS set before
// the library starts, as it reads it then. TSR_ENOMEM when not even one thread's buffer fits.
static tsr_status fit_threads(void) {
  struct rlimit rl;
  int threads = atomic_load(&wanted) > 0 ? atomic_load(&wanted) : default_threads();
  int64_t used = mapped_bytes();
  if (getrlimit(RLIMIT_AS, &rl) || rl.rlim_cur == RLIM_INFINITY || used < 0) return TSR_OK;
  int64_t room = (int64_t)rl.rlim_cur - used - BLAS_SPARE_BYTES;
  int64_t fit = room > 0 ? room / BLAS_THREAD_BYTES : 0;
  if (fit < 1)
    return err_set(TSR_ENOMEM, "out of memory: OpenBLAS's GEMM buffer (%lld MiB) does not fit "
                   "the address-space limit (ulimit -v: %lld MiB, %lld MiB mapped already); "
                   "raise the limit", (long long)(BLAS_THREAD_BYTES >> 20),
                   (long long)(rl.rlim_cur >> 20), (long long)(used >> 20));
  if (fit < threads) {
    threads = (int)fit;
    log_warn("OpenBLAS: %d thread%s: the address-space limit (ulimit -v %lld MiB) holds the "
             "GEMM buffers (%lld MiB each) of no more", threads, threads == 1 ? "" : "s",
             (long long)(rl.rlim_cur >> 20), (long long)(BLAS_THREAD_BYTES >> 20));
  }
  cap = threads;
  char v[16];
  snprintf(v, sizeof v, "%d", threads);
  setenv("OPENBLAS_NUM_THREADS", v, 1);
  return TSR_OK;
}

static void open_blas(void) {
  tsr_status st = fit_threads();
  if (st) {
    open_status = st;
    snprintf(open_why, sizeof open_why, "%s", err_msg());
    return;
  }
  sgemm = (sgemm_fn)lazylib_sym(&lib, "cblas_sgemm");
  set_threads = (threads_fn)lazylib_sym(&lib, "openblas_set_num_threads");
  if (!sgemm || !set_threads) {
    open_status = TSR_EIO;
    snprintf(open_why, sizeof open_why, "OpenBLAS could not be opened (%s)", lazylib_why(&lib));
    sgemm = NULL;
    return;
  }
  int n = atomic_load(&wanted);
  if (n > 0) set_threads(cap && n > cap ? cap : n);
  // the calling thread's buffer now, while the limit's room was measured: OpenBLAS would
  // retry a failing allocation for ever at a later first call
  float one = 1.0f, out = 0.0f;
  sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0f, &one, 1, &one, 1, 0.0f, &out, 1);
}

tsr_status kcpu_blas_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha,
                           const float *a, int lda, const float *b, int ldb, float beta, float *c,
                           int ldc) {
  pthread_once(&once, open_blas);
  if (!sgemm) return err_set(open_status, "%s", open_why);
  sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
        m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  return TSR_OK;
}

void kcpu_blas_set_threads(int n) {
  if (n <= 0) return;
  atomic_store(&wanted, n);
  if (set_threads) set_threads(cap && n > cap ? cap : n);
}
