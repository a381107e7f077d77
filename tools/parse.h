// tools/parse.h — parsing of command-line values with errors that name the option.
#ifndef TESSERA_TOOLS_PARSE_H
#define TESSERA_TOOLS_PARSE_H

#include <stdint.h>
#include "core/err.h"

tsr_status parse_int(const char *opt, const char *s, int lo, int hi, int *out);
tsr_status parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
tsr_status parse_double(const char *opt, const char *s, double lo, double hi, double *out);
// "N" or "N/D" (positive integers).
tsr_status parse_rational(const char *opt, const char *s, int *num, int *den);
// "PTxPHxPW" (positive integers).
tsr_status parse_patch(const char *opt, const char *s, int *pt, int *ph, int *pw);

#endif
