// tests/check.h — minimal assertions for C tests: count failures, print each with its
// location, and end with "N passed, N failed" (exit status 1 if any failed).
#ifndef TESSERA_TESTS_CHECK_H
#define TESSERA_TESTS_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int check_passed, check_failed;

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

static inline int check_done(void) {
  printf("%d passed, %d failed\n", check_passed, check_failed);
  return check_failed ? 1 : 0;
}

#endif
