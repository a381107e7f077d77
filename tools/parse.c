// tools/parse.c — command-line values through core/num.h (one rule for NaN, infinities,
// overflow and ranges), with messages that name the option.
#include "tools/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/num.h"
#include "model/config.h"

tsr_status parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out) {
  if (num_parse_i64(s, lo, hi, out))
    return err_set(TSR_EINVAL, "%s: '%s' is not an integer in [%lld, %lld]", opt, s,
                   (long long)lo, (long long)hi);
  return TSR_OK;
}

tsr_status parse_int(const char *opt, const char *s, int lo, int hi, int *out) {
  int64_t v;
  tsr_status st = parse_i64(opt, s, lo, hi, &v);
  if (!st) *out = (int)v;
  return st;
}

tsr_status parse_double(const char *opt, const char *s, double lo, double hi, double *out) {
  if (num_parse_double(s, lo, hi, out))
    return err_set(TSR_EINVAL, "%s: '%s' is not a number in [%g, %g]", opt, s, lo, hi);
  return TSR_OK;
}

int parse_dims(const char *s, const char *sep, int n, const int *hi, int *v) {
  const char *p = s;
  for (int i = 0; i < n; i++) {
    size_t len = i < n - 1 ? strcspn(p, sep) : strlen(p);
    if (i < n - 1 && !p[len]) return -1;
    char part[32];
    int64_t x;
    if (len == 0 || len >= sizeof part) return -1;
    memcpy(part, p, len);
    part[len] = '\0';
    if (num_parse_i64(part, 1, hi[i], &x)) return -1;
    v[i] = (int)x;
    p += len + (i < n - 1);
  }
  return 0;
}

tsr_status parse_rational(const char *opt, const char *s, int *num, int *den) {
  static const int hi[2] = {1000000, 1000000};
  int v[2] = {0, 1};
  if (!parse_dims(s, "/", strchr(s, '/') ? 2 : 1, hi, v)) {
    *num = v[0];
    *den = v[1];
    return TSR_OK;
  }
  return err_set(TSR_EINVAL, "%s: '%s' is not a positive rate like 8 or 30000/1001", opt, s);
}

tsr_status parse_patch(const char *opt, const char *s, int *pt, int *ph, int *pw) {
  static const int hi[3] = {64, 512, 512};
  int v[3];
  if (!parse_dims(s, "x", 3, hi, v)) {
    *pt = v[0];
    *ph = v[1];
    *pw = v[2];
    return TSR_OK;
  }
  return err_set(TSR_EINVAL, "%s: '%s' is not a tubelet size like 2x16x16 (frames x height x width, pt <= 64)", opt, s);
}

tsr_status parse_dtype(const char *opt, const char *s, kernels_dtype *out) {
  int old = 0;
  if (!kernels_dtype_parse(s, out, &old))
    return err_set(TSR_EINVAL, "%s %s: use fp32 or bf16 (or float32, bfloat16)", opt, s);
  if (old) log_warn("%s %s: deprecated spelling, accepted for one release: use fp32", opt, s);
  return TSR_OK;
}

tsr_status parse_config_set(opt_parser *p, char **sets, int cap, int *n) {
  const opt_def *d = p->row;
  if (*n == cap) return err_set(TSR_EINVAL, "--%s: at most %d overrides", d->name, cap);
  if (!d->key) {  // --set KEY=VALUE
    sets[(*n)++] = p->val;
    return TSR_OK;
  }
  const char *v = p->val;
  if (!strcmp(d->key, "train.precision")) {
    char flag[64];
    kernels_dtype dt;
    snprintf(flag, sizeof flag, "--%s", d->name);
    TSR_TRY(parse_dtype(flag, v, &dt));
    v = config_precision_name(dt);
  }
  char *kv = opt_key_set(p, v);
  if (!kv) return TSR_EINVAL;  // opt_key_set said why
  sets[(*n)++] = kv;
  return TSR_OK;
}
