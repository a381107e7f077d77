// tools/backend.h — `--backend cpu|cuda|auto`: the compute device of `tessera train`,
// `sample` and `calibrate` (and of bench_train_step), chosen here, at the top, and handed
// down (README.md "Layout": nothing below tools/ picks a backend).
//
// A device is a family of the backends built into the binary (kernels_backends()): the
// tables whose kb->name is the device's name or starts with it and a '-' ("cpu" and
// "cpu-bf16" are the CPU's fp32 and bf16 tables; a CUDA backend adds "cuda" and the like),
// at most one per activation dtype. The choice keeps every table of the device; the
// run's precision (train.precision, or a checkpoint's) then picks one of them
// (backend_for_precision, model/config.h).
//   cpu, cuda   that device; an error naming the devices that are built if it is not one
//               of them, or if it cannot allocate memory (no GPU visible)
//   auto        the first device other than the CPU, in kernels_backends() order, that can
//               allocate memory (a GPU backend built in with a GPU visible); else cpu
#ifndef TESSERA_TOOLS_BACKEND_H
#define TESSERA_TOOLS_BACKEND_H

#include "comm/comm.h"
#include "core/err.h"
#include "model/config.h"

// Before it looks at the devices it binds this rank to its GPU (comm_bind_device: local
// rank modulo the visible GPUs), so the CUDA backend is created on that GPU.
tsr_status backend_choose(const char *name, backend_choice *out);

// `--comm mpi|nccl|auto`: the communication backend for the device of c (comm/comm.h
// comm_open: its memory space and stream). Collective; makes the group set first, and the
// stride groups of hybrid CP for `ranks_per_node` ranks a node (comm_stride_groups_init; 0:
// none), and bounds every later wait to 600 s (comm_bound_waits; TESSERA_COMM_TIMEOUT
// overrides). Release it with comm_close.
tsr_status backend_comm_open(const char *name, const backend_choice *c, int ranks_per_node,
                             const comm_backend **out);

// The options' help texts (tools/opt.h rows), shared by the commands that take them.
#define BACKEND_OPTION_TEXT                                          \
  "compute device: cpu, cuda or auto (default: auto = cuda when\n"   \
  "built and a GPU is visible, else cpu); train.precision picks\n"   \
  "its fp32 or bf16 kernels\n"
#define COMM_OPTION_TEXT                                                  \
  "communication between ranks: mpi, nccl or auto (default: auto =\n"    \
  "nccl on GPUs when built and every rank has a GPU of its own,\n"       \
  "else mpi; mpi with --backend cuda stages device buffers through\n"    \
  "pinned host memory, and lets several ranks share a GPU)\n"

#endif
