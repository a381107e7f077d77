#include "core/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { ERR_MSG_MAX = 2048 };
static _Thread_local char err_buf[ERR_MSG_MAX];

tsr_status err_set(tsr_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err_buf, sizeof err_buf, fmt, ap);
  va_end(ap);
  return code;
}

tsr_status err_wrap(tsr_status code, const char *fmt, ...) {
  char prev[ERR_MSG_MAX], ctx[ERR_MSG_MAX];
  memcpy(prev, err_buf, sizeof prev);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx, sizeof ctx, fmt, ap);
  va_end(ap);
  // context first, then as much of the previous message as fits
  size_t n = strnlen(ctx, sizeof err_buf - 1);
  memcpy(err_buf, ctx, n);
  size_t m = strnlen(prev, sizeof err_buf - 1 - n);
  memcpy(err_buf + n, prev, m);
  err_buf[n + m] = '\0';
  return code;
}

const char *err_msg(void) { return err_buf; }

void err_clear(void) { err_buf[0] = '\0'; }

const char *err_name(tsr_status code) {
  switch (code) {
  case TSR_OK: return "ok";
  case TSR_EINVAL: return "invalid argument";
  case TSR_EIO: return "i/o error";
  case TSR_EFORMAT: return "invalid file format";
  case TSR_ENOMEM: return "out of memory";
  case TSR_EDECODE: return "decode error";
  case TSR_EMISMATCH: return "settings mismatch";
  case TSR_ECOMM: return "communication error";
  case TSR_EDB: return "index database error";
  }
  return "unknown error";
}
