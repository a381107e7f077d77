// core/err.h — error codes and messages for every tessera library.
//
// Contract: library functions return a tsr_status (TSR_OK == 0 on success). On
// failure they record a human-readable message with err_set() saying what failed,
// which file/clip/key, and what to do. The message is thread-local, so worker
// threads report their own errors. Only main() and tools print and exit.
#ifndef TESSERA_CORE_ERR_H
#define TESSERA_CORE_ERR_H

typedef enum {
  TSR_OK = 0,
  TSR_EINVAL,    // bad argument or configuration value
  TSR_EIO,       // file system error (open, read, write, fsync, rename)
  TSR_EFORMAT,   // a file's contents are invalid (header, checksum, schema)
  TSR_ENOMEM,    // allocation failed
  TSR_EDECODE,   // a media file cannot be demuxed/decoded
  TSR_EMISMATCH, // settings differ from an existing store/checkpoint
  TSR_ECOMM,     // communication (MPI/NCCL) failed
  TSR_EDB,       // SQLite error
} tsr_status;

// Records a printf-style message for the calling thread and returns `code`,
// so callers can write `return err_set(TSR_EIO, "open %s: %s", path, strerror(errno));`.
tsr_status err_set(tsr_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Prepends context ("while reading shard X: ") to the current message; returns `code`.
tsr_status err_wrap(tsr_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// The calling thread's last message ("" if none). Valid until the next err_* call.
const char *err_msg(void);

// Returns `call`'s status from the enclosing function (itself returning tsr_status) when
// it is not TSR_OK: the tree's one early-return macro, `TSR_TRY(st_open(&f, path));`. The
// callee has set the message; a caller that adds context uses err_wrap instead.
#define TSR_TRY(call)                              \
  do {                                             \
    tsr_status tsr_try_st_ = (call);               \
    if (tsr_try_st_ != TSR_OK) return tsr_try_st_; \
  } while (0)

// Short name of a status code ("io error", ...).
const char *err_name(tsr_status code);

// Clears the calling thread's message.
void err_clear(void);

#endif
