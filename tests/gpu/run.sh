#!/usr/bin/env bash
# tests/gpu/run.sh PROBE TEST [ARGS...]: runs a GPU test (tessera_gpu_test in
# tests/CMakeLists.txt) when PROBE sees a GPU; otherwise prints PROBE's reason and exits 77,
# which ctest reports as skipped.
probe=$1 test=$2
shift 2
"$probe" || { rc=$?; [ "$rc" -eq 77 ] && echo "SKIP: $(basename "$test") needs a GPU"; exit "$rc"; }
exec "$test" "$@"
