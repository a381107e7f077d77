// tests/fuzz/fuzz_util.h — helpers for libFuzzer targets whose parser reads a file:
// the input bytes are written to one scratch file per process, reused for every input.
#ifndef TESSERA_TESTS_FUZZ_UTIL_H
#define TESSERA_TESTS_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

// Path of this process's scratch file (under $TMPDIR or /tmp), with `suffix` appended.
static inline const char *fuzz_scratch_path(const char *suffix) {
  static char path[512];
  const char *tmp = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/tessera-fuzz-%d%s", tmp && tmp[0] ? tmp : "/tmp", (int)getpid(),
           suffix);
  return path;
}

// Writes data to `path` (replacing it). Aborts on failure: a broken harness is a finding.
static inline void fuzz_write_file(const char *path, const uint8_t *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
    perror(path);
    abort();
  }
}

#endif
