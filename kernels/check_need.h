// kernels/check_need.h — the two tests of kernels/check.c and kernels/check_attention.c
// (private to them): "op: name is NULL" and "op: name = v is negative", named after the
// entry's argument, each returning TSR_EINVAL from the check that uses it.
#ifndef TESSERA_KERNELS_CHECK_NEED_H
#define TESSERA_KERNELS_CHECK_NEED_H

#include "core/err.h"

#define NEED(op, p) \
  do { if (!(p)) return err_set(TSR_EINVAL, "%s: %s is NULL", (op), #p); } while (0)
#define DIM(op, x) \
  do { if ((x) < 0) return err_set(TSR_EINVAL, "%s: %s = %lld is negative", (op), #x, (long long)(x)); } while (0)

#endif
