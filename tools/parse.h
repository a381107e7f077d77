// tools/parse.h — parsing of command-line values with errors that name the option.
// Numbers go through core/num.h: the whole text, no NaN or infinity, no overflow, and
// within [lo, hi].
#ifndef TESSERA_TOOLS_PARSE_H
#define TESSERA_TOOLS_PARSE_H

#include <stdint.h>
#include "core/err.h"
#include "kernels/dtype.h"
#include "tools/opt.h"

tsr_status parse_int(const char *opt, const char *s, int lo, int hi, int *out);
tsr_status parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
tsr_status parse_double(const char *opt, const char *s, double lo, double hi, double *out);
// "AxBxC..." with n parts separated by any character of `sep`, each an integer in
// [1, hi[i]]; returns 0 and fills v (n), or -1.
int parse_dims(const char *s, const char *sep, int n, const int *hi, int *v);
// "N" or "N/D" (positive integers, at most 1e6).
tsr_status parse_rational(const char *opt, const char *s, int *num, int *den);
// "PTxPHxPW" (positive integers, PT <= 64, PH and PW <= 512).
tsr_status parse_patch(const char *opt, const char *s, int *pt, int *ph, int *pw);

// A dtype (kernels_dtype_parse): fp32 or bf16, float32 and bfloat16 alike; f32, the old
// spelling, with a deprecation note on stderr.
tsr_status parse_dtype(const char *opt, const char *s, kernels_dtype *out);

// ---- config overrides from flags (tools/opt.h rows) ----------------------------------
// The row of --precision P: activations, train.precision, the same as --set
// train.precision=P (calibrate, train).
#define OPT_PRECISION_ROW(id)                     \
  OPT("precision", "P", (id), "train.precision", \
      "fp32 or bf16 activations: --set train.precision=P")

// Appends the override of p's current option to sets (room for cap, *n of them filled):
// the value of --set KEY=VALUE (a row without a key) as it is; for a row with a config key,
// "KEY=value" (owned by p, tools/opt.h opt_key_set), a train.precision value in its canonical
// spelling (parse_dtype's: fp32 or bf16). TSR_EINVAL naming the flag: a bad value, or cap
// overrides already.
tsr_status parse_config_set(opt_parser *p, char **sets, int cap, int *n);

#endif
