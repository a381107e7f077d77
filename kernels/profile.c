// kernels/profile.c — the profiling wrapper of a backend table (kernels/profile.h).
//
// One forwarder per entry of kernels_backend: it times the inner entry and counts it. The
// forwarders, the names, the classes and the bytes each call moves all come from the rows
// of kernels/entries.h, so a new entry needs nothing here (tests/kernels/test_profile.c
// checks that no entry of the profiled table is NULL).
#include "kernels/profile.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"  // time_now

typedef const kernels_backend kb_t;

enum { PROF_MAGIC = 0x70726f66 };  // "prof"

typedef struct prof prof;

// ---- the entries, in the order of kernels_backend's fields, and their classes ----
// Every row of kernels/entries.h with a class is timed; the NONE rows (graph_*,
// path_stats) are not (kernels_profiled says what becomes of them).
#define TIMED_NONE(...)
#define TIMED_GEMM(...) __VA_ARGS__
#define TIMED_ATTENTION(...) __VA_ARGS__
#define TIMED_ELEMENTWISE(...) __VA_ARGS__
#define TIMED_OPTIMIZER(...) __VA_ARGS__
#define TIMED_OBJECTIVE(...) __VA_ARGS__
#define TIMED_MEMORY(...) __VA_ARGS__
#define TIMED_OTHER(...) __VA_ARGS__
enum {
#define KERNELS_ENTRY(RET, NAME, CLASS, ACT, PARAMS, ARGS, BYTES, FLOPS) TIMED_##CLASS(E_##NAME, )
#include "kernels/entries.h"
#undef KERNELS_ENTRY
  N_ENTRIES
};
static const struct {
  const char *name;
  kernels_profile_class cls;
} ENTRY[N_ENTRIES] = {
#define KERNELS_ENTRY(RET, NAME, CLASS, ACT, PARAMS, ARGS, BYTES, FLOPS) \
  TIMED_##CLASS([E_##NAME] = {#NAME, KERNELS_PROFILE_##CLASS}, )
#include "kernels/entries.h"
#undef KERNELS_ENTRY
};

// The state behind a profiled table (its ctx).
struct prof {
  int magic;  // PROF_MAGIC: kernels_is_profiled
  int sync;   // sync the inner backend around each call (profile.h)
  const kernels_backend *inner;
  uint64_t calls[N_ENTRIES];
  double seconds[N_ENTRIES];
  double bytes[N_ENTRIES];  // summed bytes the calls must move (entries.h BYTES)
  double flops[N_ENTRIES];  // summed floating-point operations (entries.h FLOPS)
  double pending;           // the bytes of the call being timed, added when it succeeds
  double pending_flops;     // and its operations
};

// Start of a timed call: with sync, the device has finished everything queued before it.
// A failed sync (an earlier entry's error, reported late by the device) is returned by the
// forwarder instead of calling the entry, so the timers never swallow an error.
static tsr_status prof_begin(prof *p, double *t0) {
  tsr_status st = p->sync ? p->inner->sync(p->inner) : TSR_OK;
  *t0 = time_now();
  return st;
}

// End of a timed call: with sync, after the entry's own work; its error is returned.
static tsr_status prof_end(prof *p, int e, double t0, tsr_status call) {
  tsr_status st = p->sync ? p->inner->sync(p->inner) : TSR_OK;
  p->seconds[e] += time_now() - t0;
  p->calls[e]++;
  if (!call) {
    p->bytes[e] += p->pending;
    p->flops[e] += p->pending_flops;
  }
  p->pending = 0.0;
  p->pending_flops = 0.0;
  return st;
}

// The units of the rows' BYTES (kernels/entries.h): A(n) bytes of n [act] elements, F(n) of
// n fp32 (4 bytes). A call that fails adds none.
#define A(n) ((double)(n) * (double)kernels_dtype_size(kb->act_dtype))
#define F(n) ((double)(n) * 4.0)

// ---- one forwarder per timed entry ----
// It counts the call's bytes and operations from its arguments, then calls the inner
// backend's entry with the same arguments: `kb` inside the inner block is the inner backend,
// the name the row's ARGS pass first.
#define FWD_tsr_status(NAME, PARAMS, ARGS, BYTES, FLOPS) \
  static tsr_status p_##NAME PARAMS {                    \
    prof *p_ = kb->ctx;                                  \
    p_->pending = (BYTES);                               \
    p_->pending_flops = (FLOPS);                         \
    double t0;                                           \
    tsr_status st = prof_begin(p_, &t0);                 \
    if (st) return st;                                   \
    {                                                    \
      const kernels_backend *kb = p_->inner;             \
      st = kb->NAME ARGS;                                \
    }                                                    \
    tsr_status st_end = prof_end(p_, E_##NAME, t0, st);  \
    return st ? st : st_end;                             \
  }
// free has no status to report a sync error with: it is timed without one.
#define FWD_void(NAME, PARAMS, ARGS, BYTES, FLOPS) \
  static void p_##NAME PARAMS {                    \
    prof *p_ = kb->ctx;                            \
    double t0;                                     \
    (void)prof_begin(p_, &t0);                     \
    {                                              \
      const kernels_backend *kb = p_->inner;       \
      kb->NAME ARGS;                               \
    }                                              \
    (void)prof_end(p_, E_##NAME, t0, TSR_OK);      \
  }
#define KERNELS_ENTRY(RET, NAME, CLASS, ACT, PARAMS, ARGS, BYTES, FLOPS) \
  TIMED_##CLASS(FWD_##RET(NAME, PARAMS, ARGS, BYTES, FLOPS))
#include "kernels/entries.h"
#undef KERNELS_ENTRY

// Not timed (a count read, no device work); set only when the inner backend has it.
static tsr_status p_path_stats(kb_t *kb, kernels_path_stats *out_host) {
  const kernels_backend *in = ((prof *)kb->ctx)->inner;
  return in->path_stats(in, out_host);
}

// Every timed entry of the table: its forwarder, except where the inner backend leaves the
// entry out (NULL or its unsupported stub, kernels.h): that stays as the inner has it, so
// kernels_has answers through a profiled table as it does for the inner one.
#define KEEP_tsr_status(NAME)                                                  \
  if (!inner->NAME || inner->NAME == kernels_unsupported_##NAME) t->NAME = inner->NAME;
#define KEEP_void(NAME)
static void fill_entries(kernels_backend *t, const kernels_backend *inner) {
#define KERNELS_ENTRY(RET, NAME, CLASS, ACT, PARAMS, ARGS, BYTES, FLOPS) \
  TIMED_##CLASS(t->NAME = p_##NAME; KEEP_##RET(NAME))
#include "kernels/entries.h"
#undef KERNELS_ENTRY
}

static const char *const CLASS_NAME[KERNELS_PROFILE_N_CLASSES] = {
    "gemm", "attention", "elementwise", "optimizer", "objective", "memory", "other"};

const char *kernels_profile_class_name(kernels_profile_class c) {
  return (unsigned)c < KERNELS_PROFILE_N_CLASSES ? CLASS_NAME[c] : "?";
}

// The table and its state in one allocation, so that kernels_profiled_free frees both.
typedef struct {
  kernels_backend table;
  prof state;
} profiled;

tsr_status kernels_profiled(const kernels_backend *inner, int sync, kernels_backend **out) {
  if (!inner || !out)
    return err_set(TSR_EINVAL, "kernels_profiled: %s is NULL", inner ? "out" : "inner");
  profiled *pb = calloc(1, sizeof *pb);
  if (!pb) return err_set(TSR_ENOMEM, "kernels_profiled: no memory");
  pb->state = (prof){.magic = PROF_MAGIC, .sync = sync != 0, .inner = inner};
  pb->table = *inner;  // name, act_dtype, device_memory, stream
  pb->table.ctx = &pb->state;
  fill_entries(&pb->table, inner);
  // No recorded graphs through a profiled table: a replayed graph runs many entries in one
  // launch, so their time could not be told apart, and the sync around each entry is refused
  // while recording. The model then runs every phase eagerly (kernels.h: graph_* optional).
  pb->table.graph_begin = NULL;
  pb->table.graph_end = NULL;
  pb->table.graph_launch = NULL;
  pb->table.graph_free = NULL;
  pb->table.path_stats = inner->path_stats ? p_path_stats : NULL;
  *out = &pb->table;
  return TSR_OK;
}

static prof *state_of(const kernels_backend *kb) {
  prof *p = kb ? kb->ctx : NULL;
  // Only a profiled table's ctx is a prof; the CPU's is NULL, CUDA's is its own state, so
  // the forwarder check comes first and the magic second.
  return p && kb->alloc == p_alloc && p->magic == PROF_MAGIC ? p : NULL;
}

void kernels_profiled_free(kernels_backend **kb) {
  if (!kb || !*kb || !state_of(*kb)) return;
  free((profiled *)*kb);  // the table is the first member
  *kb = NULL;
}

int kernels_is_profiled(const kernels_backend *kb) { return state_of(kb) != NULL; }

const kernels_backend *kernels_profiled_inner(const kernels_backend *kb) {
  prof *p = state_of(kb);
  return p ? p->inner : NULL;
}

void kernels_profile_reset(const kernels_backend *kb) {
  prof *p = state_of(kb);
  if (!p) return;
  memset(p->calls, 0, sizeof p->calls);
  memset(p->seconds, 0, sizeof p->seconds);
  memset(p->bytes, 0, sizeof p->bytes);
  memset(p->flops, 0, sizeof p->flops);
}

int kernels_profile_read(const kernels_backend *kb, kernels_profile_entry *out, int max) {
  prof *p = state_of(kb);
  if (!p) return 0;
  for (int e = 0; e < N_ENTRIES && e < max; e++)
    out[e] = (kernels_profile_entry){ENTRY[e].name, ENTRY[e].cls, p->calls[e], p->seconds[e],
                                     p->bytes[e], p->flops[e]};
  return N_ENTRIES;
}

void kernels_profile_by_class(const kernels_profile_entry *e, int n, uint64_t *calls,
                              double *seconds) {
  for (int c = 0; c < KERNELS_PROFILE_N_CLASSES; c++) {
    if (calls) calls[c] = 0;
    if (seconds) seconds[c] = 0.0;
  }
  for (int i = 0; i < n; i++) {
    if ((unsigned)e[i].cls >= KERNELS_PROFILE_N_CLASSES) continue;
    if (calls) calls[e[i].cls] += e[i].calls;
    if (seconds) seconds[e[i].cls] += e[i].seconds;
  }
}

double kernels_profile_total(const kernels_backend *kb) {
  prof *p = state_of(kb);
  double s = 0.0;
  for (int e = 0; p && e < N_ENTRIES; e++) s += p->seconds[e];
  return s;
}
