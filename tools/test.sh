#!/usr/bin/env bash
# tools/test.sh — the whole test suite (what CI runs): installs and builds, then runs
# every test with ctest in the release build, and the ingest tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, and a short run of every libFuzzer target
# (tools/fuzz.sh: 2000 executions each from real seed files). Tests labelled `slow` (the
# memorisation check, minutes) are left out: `cd build && ctest -L slow` runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
J=$(nproc)

tools/setup.sh
BUILD_DIR=build-asan BUILD_TYPE=Debug CMAKE_ARGS="-DTESSERA_SANITIZE=ON" tools/setup.sh

status=0
echo "== fuzz targets, short run (clang, ASan + UBSan)"
tools/fuzz.sh --runs "${TESSERA_FUZZ_RUNS:-2000}" || status=1
echo "== tests (release build)"
(cd build && ctest --output-on-failure -j"$J" --timeout 900 -LE slow) || status=1
echo "== ingest tests under AddressSanitizer + UndefinedBehaviorSanitizer"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
(cd build-asan && ctest --output-on-failure -j"$J" -L sanitize --timeout 900) || status=1
exit $status
