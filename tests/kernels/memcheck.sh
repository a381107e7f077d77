#!/usr/bin/env bash
# tests/kernels/memcheck.sh PROBE TEST [ARGS...]: TEST under compute-sanitizer's memcheck
# (any access error fails), when PROBE sees a GPU and compute-sanitizer can run here; else
# exit 77 (skipped) saying why.
# - TESSERA_CUDA_ARENA=none: the CUDA backend allocates each tensor by itself instead of
#   from its one arena, so memcheck sees an overrun at the tensor's edge (inside the arena
#   it would be an access to valid memory).
# - No --leak-check: the backend keeps its context (stream, cuBLASLt and cuDNN handles,
#   the error word, plan caches) for the life of the process by design (kernels/cuda/cuda.h:
#   "never freed"), which a leak check reports as leaks on every run.
# - Whether the sanitizer can attach at all is asked first, with PROBE (which has no
#   memory errors) under it: a sandbox that refuses it (ptrace, a driver without the
#   debugger interface) is a skip with the sanitizer's own words, not a failure of TEST.
probe=$1 test=$2
shift 2
"$probe" >/dev/null || { rc=$?; [ "$rc" -eq 77 ] && echo "SKIP: memcheck needs a GPU"; exit "$rc"; }
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
[ -n "$cs" ] || { echo "SKIP: compute-sanitizer is not installed"; exit 77; }
if ! out=$("$cs" --tool memcheck --error-exitcode 1 "$probe" 2>&1); then
  echo "SKIP: compute-sanitizer cannot run here (it fails on gpu_probe, which has no memory errors):"
  tail -5 <<<"$out"
  exit 77
fi
TESSERA_CUDA_ARENA=none exec "$cs" --tool memcheck --error-exitcode 1 "$test" "$@"
