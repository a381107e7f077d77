// kernels/check_need.h — the tests that kernels/check.c and kernels/check_attention.c share
// (private to them): "op: name is NULL" and "op: name = v is negative", named after the
// entry's argument, each returning TSR_EINVAL from the check that uses it, and the
// host-side half of every packed-clips check.
#ifndef TESSERA_KERNELS_CHECK_NEED_H
#define TESSERA_KERNELS_CHECK_NEED_H

#include <stdint.h>

#include "core/err.h"

#define NEED(op, p) \
  do { if (!(p)) return err_set(TSR_EINVAL, "%s: %s is NULL", (op), #p); } while (0)
#define DIM(op, x) \
  do { if ((x) < 0) return err_set(TSR_EINVAL, "%s: %s = %lld is negative", (op), #x, (long long)(x)); } while (0)

// n_clips >= 0 and the offsets (their argument's name: cu_seqlens, cu_q, cu_k) given. Their
// values live in backend memory: each backend checks them its own way.
static inline tsr_status check_offsets(const char *op, const char *name, const int32_t *cu,
                                       int n_clips) {
  if (n_clips < 0) return err_set(TSR_EINVAL, "%s: n_clips = %d is negative", op, n_clips);
  if (!cu) return err_set(TSR_EINVAL, "%s: %s is NULL", op, name);
  return TSR_OK;
}

#endif
