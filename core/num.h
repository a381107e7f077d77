// core/num.h — the one parser of numbers that come from files and command lines (config
// and cost files, length CSVs, CLI options), so that every entry point refuses the same
// things: text that is not wholly a number, NaN and infinities, values that overflow the
// type (strtod/strtoll's ERANGE, also underflow to a denormal or 0), and values outside
// the caller's [lo, hi]. Leading and trailing spaces and tabs are allowed.
// Callers build their own message (they know the file, line, key or option).
#ifndef TESSERA_CORE_NUM_H
#define TESSERA_CORE_NUM_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  NUM_OK = 0,
  NUM_SYNTAX,  // not a number (empty, trailing text, NaN, inf, a fraction for an integer)
  NUM_RANGE,   // a number, but it overflows the type or lies outside [lo, hi]
} num_result;

// A finite double in [lo, hi] (decimal or C hex float notation).
num_result num_parse_double(const char *s, double lo, double hi, double *out);
// A base-10 integer in [lo, hi]: digits with an optional sign, no fraction or exponent.
num_result num_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);

// The index of the first NaN or infinity of v (n floats), or n when every value is finite:
// the check of weights that enter from a file (a converted model, adapters, a checkpoint).
size_t num_first_nonfinite(const float *v, size_t n);

#endif
