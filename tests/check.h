// tests/check.h — minimal assertions for C tests: count failures, print each with its
// location, and end with "N passed, N failed" (exit status 1 if any failed; 77, ctest's
// SKIP_RETURN_CODE, if none failed but a part that needs the shared data was left out).
#ifndef TESSERA_TESTS_CHECK_H
#define TESSERA_TESTS_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>

static int check_passed, check_failed;
static const char *check_skipped;  // the shared folder a part of the test went without

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (cond) {                                                            \
      check_passed++;                                                      \
    } else {                                                               \
      check_failed++;                                                      \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
      fprintf(stderr, __VA_ARGS__);                                        \
      fputc('\n', stderr);                                                 \
    }                                                                      \
  } while (0)

// Checks that a tsr_status call returned TSR_OK; prints err_msg() otherwise.
#define CHECK_OK(call)                                                     \
  do {                                                                     \
    tsr_status check_st_ = (call);                                         \
    CHECK(check_st_ == TSR_OK, "%s -> %s: %s", #call, err_name(check_st_), err_msg()); \
  } while (0)

#define CHECK_NEAR(a, b, tol) \
  CHECK(fabs((double)(a) - (double)(b)) <= (tol), "%s=%.9g %s=%.9g tol %.3g", #a, (double)(a), #b, (double)(b), (double)(tol))

// The shared data's folder (TESSERA_SHARED, which ctest sets to ../shared) when its
// subfolder SUB ("videos": the real clips, "lengths": the length distributions) is there;
// else NULL, and check_done reports the test skipped (77) naming SUB, after the checks
// that need no shared data ran: a plain clone has no ../shared.
static inline const char *check_shared(const char *sub) {
  const char *shared = getenv("TESSERA_SHARED");
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", shared ? shared : "", sub);
  DIR *d = shared && *shared ? opendir(p) : NULL;
  if (d) {
    closedir(d);
    return shared;
  }
  printf("SKIP (part): no %s at %s (set TESSERA_SHARED to the shared/ folder)\n", sub,
         shared && *shared ? p : "$TESSERA_SHARED");
  check_skipped = sub;
  return NULL;
}

static inline int check_done(void) {
  printf("%d passed, %d failed\n", check_passed, check_failed);
  if (check_failed) return 1;
  if (check_skipped) {
    printf("SKIP: the checks on shared/%s were left out (no such folder)\n", check_skipped);
    return 77;
  }
  return 0;
}

#endif
