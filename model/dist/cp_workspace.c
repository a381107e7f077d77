#include "model/dist/cp_workspace.h"

#include <stdlib.h>

struct cp_workspace {
  const kernels_backend *kb;
  void *base[CP_WS_REGIONS];
  size_t cap[CP_WS_REGIONS];
};

tsr_status cp_workspace_create(cp_workspace **out, const kernels_backend *kb) {
  *out = calloc(1, sizeof **out);
  if (!*out) return err_set(TSR_ENOMEM, "CP workspace: out of memory");
  (*out)->kb = kb;
  return TSR_OK;
}

void cp_workspace_free(cp_workspace **pws) {
  cp_workspace *ws = *pws;
  if (!ws) return;
  for (int r = 0; r < CP_WS_REGIONS; r++) ws->kb->free(ws->kb, ws->base[r]);
  free(ws);
  *pws = NULL;
}

tsr_status cp_workspace_get(cp_workspace *ws, int region, size_t bytes, void **ptr) {
  *ptr = NULL;
  if (region < 0 || region >= CP_WS_REGIONS)
    return err_set(TSR_EINVAL, "CP workspace: no region %d", region);
  if (bytes > ws->cap[region] || !ws->base[region]) {
    ws->kb->free(ws->kb, ws->base[region]);  // first: the old and the new need not both fit
    ws->base[region] = NULL, ws->cap[region] = 0;
    tsr_status st = ws->kb->alloc(ws->kb, &ws->base[region], bytes);
    if (st) return err_wrap(st, "CP attention's work buffers: ");
    ws->cap[region] = bytes;
  }
  *ptr = ws->base[region];
  return TSR_OK;
}
