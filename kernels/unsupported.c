// kernels/unsupported.c — the stubs of unsupported entries and kernels_fill_unsupported
// (kernels/kernels.h "unsupported entries"), one per row of kernels/entries.h.
#include "kernels/kernels.h"

static tsr_status unsupported(const kernels_backend *kb, const char *entry) {
  return err_set(TSR_EINVAL, "%s: not supported by backend %s (the backend leaves this entry "
                 "out, kernels/entries.h): run it on a backend that implements it",
                 entry, kb && kb->name ? kb->name : "?");
}

#define STUB_tsr_status(NAME, PARAMS) \
  tsr_status kernels_unsupported_##NAME PARAMS { return unsupported(kb, #NAME); }
#define STUB_void(NAME, PARAMS)
#define KERNELS_ENTRY(RET, NAME, CLASS, ACT, PARAMS, ARGS, BYTES, FLOPS) STUB_##RET(NAME, PARAMS)
#include "kernels/entries.h"
#undef KERNELS_ENTRY

// Only the entries with a class: the NONE ones (graph_*, path_stats) are optional by
// contract, tested for NULL by their callers, and free has no status to report with.
#define FILL_tsr_status(NAME) \
  if (!t->NAME) t->NAME = kernels_unsupported_##NAME;
#define FILL_void(NAME)
#define FILL_NONE(RET, NAME)
#define FILL_GEMM(RET, NAME) FILL_##RET(NAME)
#define FILL_ATTENTION(RET, NAME) FILL_##RET(NAME)
#define FILL_ELEMENTWISE(RET, NAME) FILL_##RET(NAME)
#define FILL_OPTIMIZER(RET, NAME) FILL_##RET(NAME)
#define FILL_OBJECTIVE(RET, NAME) FILL_##RET(NAME)
#define FILL_MEMORY(RET, NAME) FILL_##RET(NAME)
#define FILL_OTHER(RET, NAME) FILL_##RET(NAME)
void kernels_fill_unsupported(kernels_backend *t) {
  if (!t) return;
#define KERNELS_ENTRY(RET, NAME, CLASS, ACT, PARAMS, ARGS, BYTES, FLOPS) FILL_##CLASS(RET, NAME)
#include "kernels/entries.h"
#undef KERNELS_ENTRY
}
