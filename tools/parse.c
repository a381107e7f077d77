#include "tools/parse.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

tsr_status parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    return err_set(TSR_EINVAL, "%s: '%s' is not an integer in [%lld, %lld]", opt, s,
                   (long long)lo, (long long)hi);
  *out = v;
  return TSR_OK;
}

tsr_status parse_int(const char *opt, const char *s, int lo, int hi, int *out) {
  int64_t v;
  tsr_status st = parse_i64(opt, s, lo, hi, &v);
  if (!st) *out = (int)v;
  return st;
}

tsr_status parse_double(const char *opt, const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
    return err_set(TSR_EINVAL, "%s: '%s' is not a number in [%g, %g]", opt, s, lo, hi);
  *out = v;
  return TSR_OK;
}

tsr_status parse_rational(const char *opt, const char *s, int *num, int *den) {
  int n = 0, d = 1, used = 0;
  if ((sscanf(s, "%d/%d%n", &n, &d, &used) == 2 && !s[used]) ||
      (sscanf(s, "%d%n", &n, &used) == 1 && !s[used] && (d = 1))) {
    if (n > 0 && d > 0 && n <= 1000000 && d <= 1000000) {
      *num = n;
      *den = d;
      return TSR_OK;
    }
  }
  return err_set(TSR_EINVAL, "%s: '%s' is not a positive rate like 8 or 30000/1001", opt, s);
}

tsr_status parse_patch(const char *opt, const char *s, int *pt, int *ph, int *pw) {
  int a, b, c, used = 0;
  if (sscanf(s, "%dx%dx%d%n", &a, &b, &c, &used) == 3 && !s[used] && a > 0 && b > 0 && c > 0 &&
      a <= 64 && b <= 512 && c <= 512) {
    *pt = a;
    *ph = b;
    *pw = c;
    return TSR_OK;
  }
  return err_set(TSR_EINVAL, "%s: '%s' is not a tubelet size like 2x16x16 (frames x height x width, pt <= 64)", opt, s);
}
