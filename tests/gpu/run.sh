#!/usr/bin/env bash
# tests/gpu/run.sh PROBE TEST [ARGS...]: runs a GPU test (tessera_gpu_test or
# tessera_gpu_sh_test, whose TEST is bash and first ARG the script, in
# tests/CMakeLists.txt) when PROBE sees a GPU; otherwise prints PROBE's reason and exits 77,
# which ctest reports as skipped.
probe=$1 test=$2
shift 2
name=$(basename "$test"); [ "$name" = bash ] && name=$(basename "${1:-bash}")  # bash SCRIPT
"$probe" || { rc=$?; [ "$rc" -eq 77 ] && echo "SKIP: $name needs a GPU"; exit "$rc"; }
exec "$test" "$@"
