// tools/backend.c — the compute device behind `--backend` (tools/backend.h).
#include "tools/backend.h"

#include <stdio.h>
#include <string.h>

#include "comm/comm.h"
#include "kernels/kernels.h"

enum { MAX_BACKENDS = 16 };

// The device of a table: its name up to the first '-'.
static void device_of(const kernels_backend *kb, char *dev, size_t n) {
  size_t len = strcspn(kb->name, "-");
  snprintf(dev, n, "%.*s", (int)(len < n ? len : n - 1), kb->name);
}

// Every table of device `dev`, by act dtype; 0 if the binary has none.
static int collect(const char *dev, const kernels_backend *const *all, int n, backend_choice *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->device, sizeof out->device, "%s", dev);
  int found = 0;
  for (int i = 0; i < n; i++) {
    char d[sizeof out->device];
    device_of(all[i], d, sizeof d);
    kernels_dtype t = all[i]->act_dtype;
    if (strcmp(d, dev) || (t != KERNELS_F32 && t != KERNELS_BF16) || out->table[t]) continue;
    out->table[t] = all[i];
    found = 1;
  }
  return found;
}

// A device is usable when one of its tables can report its memory (or, without mem_info,
// allocate): a GPU backend that is built but sees no GPU fails here. Asking, not
// allocating: a CUDA backend's first alloc sizes its arena from the free memory, which is
// the trainer's to size from its memory model (kernels.h reserve).
static tsr_status probe(const backend_choice *c) {
  const kernels_backend *kb = c->table[KERNELS_F32] ? c->table[KERNELS_F32] : c->table[KERNELS_BF16];
  size_t free_b = 0, total_b = 0;
  void *p = NULL;
  tsr_status st = kb->mem_info ? kb->mem_info(kb, &free_b, &total_b) : kb->alloc(kb, &p, 64);
  if (st) return err_wrap(st, "--backend %s: the device cannot be used: ", c->device);
  kb->free(kb, p);
  return TSR_OK;
}

// --backend cuda without a usable CUDA table: either the backend is built in but could not
// open its GPU (kernels_backends() leaves it out; the fix is on the machine, and the
// backend's own reason says what failed), or this binary really lacks it (the fix is a
// rebuild). `built` lists the devices that are usable.
static tsr_status cuda_missing(const char *built) {
  char why[256];
  if (kernels_backend_unusable("cuda", why, sizeof why))
    return err_set(TSR_EIO, "--backend cuda: this tessera has the CUDA backend, but it could not "
                   "be set up here: %s; fix what that names (no GPU found: check nvidia-smi, "
                   "CUDA_VISIBLE_DEVICES, which hides every GPU when empty or -1, and that the "
                   "NVIDIA driver is loaded), or use --backend cpu", why);
  return err_set(TSR_EINVAL, "--backend cuda: this tessera was built without the CUDA backend "
                 "(built: %s); rebuild with the CUDA toolkit installed (cmake -DTESSERA_CUDA=ON), "
                 "or use --backend cpu", built);
}

tsr_status backend_choose(const char *name, backend_choice *out) {
  int gpu;
  tsr_status bst = comm_bind_device(&gpu);  // before any CUDA backend exists
  if (bst) return bst;
  const kernels_backend *all[MAX_BACKENDS];
  int n = kernels_backends(all, MAX_BACKENDS);
  if (n > MAX_BACKENDS) n = MAX_BACKENDS;
  if (!strcmp(name, "auto")) {
    for (int i = 0; i < n; i++) {
      char d[sizeof out->device];
      device_of(all[i], d, sizeof d);
      if (!strcmp(d, "cpu") || !collect(d, all, n, out)) continue;
      if (!probe(out)) return TSR_OK;
    }
    collect("cpu", all, n, out);
    return TSR_OK;
  }
  if (collect(name, all, n, out)) return probe(out);
  char built[128] = "";
  for (int i = 0; i < n; i++) {
    char d[32];
    device_of(all[i], d, sizeof d);
    if (!strstr(built, d)) snprintf(built + strlen(built), sizeof built - strlen(built), "%s%s",
                                    built[0] ? ", " : "", d);
  }
  if (!strcmp(name, "cuda")) return cuda_missing(built);
  return err_set(TSR_EINVAL, "--backend %s: not a backend of this tessera (built: %s; or auto)",
                 name, built);
}

tsr_status backend_comm_open(const char *name, const backend_choice *c, int ranks_per_node,
                             const comm_backend **out) {
  *out = NULL;
  const kernels_backend *kb = c->table[KERNELS_F32] ? c->table[KERNELS_F32] : c->table[KERNELS_BF16];
  // A rank of a training job waits at most a wave for another: a wait ten minutes long
  // means a dead or hung rank (TESSERA_COMM_TIMEOUT overrides).
  comm_bound_waits(600);
  tsr_status st = comm_groups_init();
  // hybrid CP's rings across nodes need their communicators before the backend opens (NCCL)
  if (!st && ranks_per_node > 0 && !(ranks_per_node & (ranks_per_node - 1)))
    st = comm_stride_groups_init(ranks_per_node);
  if (!st) st = comm_open(name, kb->device_memory ? COMM_MEM_DEVICE : COMM_MEM_HOST, kb->stream, out);
  return st;
}
