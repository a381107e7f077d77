#!/usr/bin/env bash
# tests/kernels/memcheck.sh PROBE TEST [ARGS...]: TEST under compute-sanitizer's memcheck
# (any error fails), when PROBE sees a GPU and compute-sanitizer is installed; else exit 77
# (skipped) saying which is missing. TESSERA_CUDA_ARENA=none: the CUDA backend allocates
# each tensor by itself instead of from its one arena, so memcheck sees an overrun at the
# tensor's edge (inside the arena it would be an access to valid memory).
probe=$1 test=$2
shift 2
"$probe" || { rc=$?; [ "$rc" -eq 77 ] && echo "SKIP: memcheck needs a GPU"; exit "$rc"; }
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
[ -n "$cs" ] || { echo "SKIP: compute-sanitizer is not installed"; exit 77; }
TESSERA_CUDA_ARENA=none exec "$cs" --tool memcheck --error-exitcode 1 --leak-check full "$test" "$@"
