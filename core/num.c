// core/num.c — number parsing with overflow and range checks (core/num.h).
#include "core/num.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

static const char *skip_blanks(const char *s) {
  while (*s == ' ' || *s == '\t') s++;
  return s;
}

num_result num_parse_double(const char *s, double lo, double hi, double *out) {
  s = skip_blanks(s);
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *skip_blanks(end)) return NUM_SYNTAX;
  if (isnan(v)) return NUM_SYNTAX;  // "nan" parses but is no value
  // "inf" parses without ERANGE; "1e999" gives ERANGE and HUGE_VAL; both are overflow.
  if (isinf(v) || errno == ERANGE || !(v >= lo && v <= hi)) return NUM_RANGE;
  *out = v;
  return NUM_OK;
}

num_result num_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  s = skip_blanks(s);
  const char *d = s + (*s == '-' || *s == '+');
  if (*d < '0' || *d > '9') return NUM_SYNTAX;  // a digit right after the sign
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (*skip_blanks(end)) return NUM_SYNTAX;
  if (errno == ERANGE || v < lo || v > hi) return NUM_RANGE;
  *out = v;
  return NUM_OK;
}

size_t num_first_nonfinite(const float *v, size_t n) {
  size_t i = 0;
  while (i < n && isfinite(v[i])) i++;
  return i;
}
