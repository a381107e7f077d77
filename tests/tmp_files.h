// tests/tmp_files.h — for C tests of atomic writes: whether a writer's temporary file of a
// path (core/fs.h fs_atomic: PATH.tmp.PID.RAND) is there.
#ifndef TESSERA_TESTS_TMP_FILES_H
#define TESSERA_TESTS_TMP_FILES_H

#include <glob.h>
#include <stdio.h>

// 1 if a temporary file of PATH exists.
static int tmp_exists(const char *path) {
  char pat[1100];
  glob_t g;
  snprintf(pat, sizeof pat, "%s.tmp*", path);
  int n = glob(pat, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
  if (n) globfree(&g);
  return n > 0;
}

#endif
