// tests/kernels/test_lazylib.c — the CUDA backend's lazily opened libraries (core/lazylib.h)
// on any machine of a CUDA build, GPU or not: cuBLASLt and NCCL are not mapped until a
// function of theirs is called, and then the shims reach the real libraries (their own
// status texts, which need no GPU); a library that cannot be opened is named with why.
#include <cublasLt.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/lazylib.h"

// 1 when a file whose name holds `lib` is mapped into this process.
static int mapped(const char *lib) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096];
  int found = 0;
  while (f && fgets(line, sizeof line, f)) found |= strstr(line, lib) != NULL;
  if (f) fclose(f);
  return found;
}

int main(void) {
  CHECK(!mapped("libcublasLt"), "at this line");
  CHECK(!mapped("libnccl"), "at this line");
  const char *s = cublasLtGetStatusString(CUBLAS_STATUS_SUCCESS);
  CHECK(s && (!strcmp(s, "success") || !strcmp(s, "CUBLAS_STATUS_SUCCESS")), "cuBLASLt said %s",
        s ? s : "(null)");  // the text of CUDA 13, of 12
  CHECK(mapped("libcublasLt"), "at this line");
  CHECK(!mapped("libnccl"), "at this line");
  s = ncclGetErrorString(ncclSuccess);
  CHECK(s && !strcmp(s, "no error"), "NCCL said %s", s ? s : "(null)");
  CHECK(mapped("libnccl"), "at this line");
  lazylib none = LAZYLIB_INIT("/nonexistent/libx.so.1", "libtessera-no-such-library.so.1");
  CHECK(lazylib_sym(&none, "f") == NULL, "at this line");
  CHECK(strstr(lazylib_why(&none), "libtessera-no-such-library.so.1") != NULL, "at this line");
  CHECK(strstr(lazylib_why(&none), "/nonexistent/libx.so.1") != NULL, "at this line");
  return check_done();
}
