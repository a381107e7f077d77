#!/usr/bin/env bash
# tests/kernels/memcheck.sh PROBE TEST [ARGS...]: TEST under compute-sanitizer's memcheck
# (any error fails), when PROBE sees a GPU and compute-sanitizer is installed; else exit 77
# (skipped) saying which is missing.
probe=$1 test=$2
shift 2
"$probe" || { rc=$?; [ "$rc" -eq 77 ] && echo "SKIP: memcheck needs a GPU"; exit "$rc"; }
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
[ -n "$cs" ] || { echo "SKIP: compute-sanitizer is not installed"; exit 77; }
exec "$cs" --tool memcheck --error-exitcode 1 --leak-check full "$test" "$@"
