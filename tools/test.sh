#!/usr/bin/env bash
# tools/test.sh — the whole test suite (what CI runs): installs and builds, then runs
# every test with ctest in the release build, and the ingest tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, and a short run of every libFuzzer target
# (tools/fuzz.sh: 2000 executions each from real seed files), and the GPU tests that run on
# the emulated device (label emu in build-emu/, -DTESSERA_CUDA=EMU: the CUDA backend's own
# code on the CPU, kernels/cuda/emu/cuemu.h) where the CUDA toolkit's headers are installed.
# Tests labelled `slow` (the memorisation check, minutes) are left out: `cd build && ctest
# -L slow` runs them. The Python venv of the reference tools (tools/setup_venv.sh: torch 2,
# transformers, the caption encoders) is created when missing and its python handed to the
# tests as TESSERA_PYTHON; with TESSERA_NO_VENV=1 it is not created (those tests then take
# /opt/tessera/venv if it is there, else skip).
# Tests that need what this machine lacks (the real clips and lengths of ../shared, a GPU,
# the venv) are skipped with the reason (exit 77); each ctest run ends with "N passed,
# M skipped" and the skipped tests, each with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
J=$(nproc)

# skipped_summary BUILD_DIR: "N passed, M skipped" of the last ctest run in BUILD_DIR (its
# output in BUILD_DIR/ctest.out) and each skipped test with the first "SKIP" line of its
# output (ctest's LastTest.log, which records a skipped test's output as passed).
skipped_summary() {
  local out=$1/ctest.out log=$1/Testing/Temporary/LastTest.log
  [ -f "$out" ] && [ -f "$log" ] || return 0
  awk '
    FNR == NR {
      if ($0 ~ /^[0-9]+\/[0-9]+ Test: /) name = $3
      else if ($0 ~ /^SKIP/ && name != "" && !(name in why)) why[name] = $0
      next
    }
    / Test +#[0-9]+: / {
      n = $0; sub(/.* Test +#[0-9]+: /, "", n); sub(/ .*/, "", n)
      if ($0 ~ /\*\*\*Skipped/) skipped[++ns] = n
      else if ($0 ~ / Passed /) np++
      else nf++
    }
    END {
      printf "== %d passed, %d skipped, %d failed\n", np, ns, nf
      for (i = 1; i <= ns; i++)
        printf "   skipped %s: %s\n", skipped[i], (skipped[i] in why) ? why[skipped[i]] : "(no SKIP line)"
    }' "$log" "$out"
}

tools/setup.sh
status=0
# The fuzz stage runs beside the ASan build and the release tests (its targets run one at a
# time: a core of their own); its output is printed whole when it is done.
tools/fuzz.sh --runs "${TESSERA_FUZZ_RUNS:-2000}" >build/fuzz.out 2>&1 &
fuzz_pid=$!
trap '[ -z "$fuzz_pid" ] || kill "$fuzz_pid" 2>/dev/null || true' EXIT  # a stage above failed
BUILD_DIR=build-asan BUILD_TYPE=Debug CMAKE_ARGS="-DTESSERA_SANITIZE=ON" tools/setup.sh

if [ "${TESSERA_NO_VENV:-0}" = 1 ]; then
  echo "== the Python venv is not created (TESSERA_NO_VENV=1)"
elif py=$(tools/setup_venv.sh); then
  export TESSERA_PYTHON=$py
else
  echo "FAIL: tools/setup_venv.sh could not create the venv (TESSERA_NO_VENV=1 runs without it)"
  status=1
fi
echo "== tests (release build)"
(cd build && ctest --output-on-failure -j"$J" --timeout 900 -LE slow) 2>&1 | tee build/ctest.out || status=1
skipped_summary build
echo "== fuzz targets, short run (clang, ASan + UBSan)"
fuzz_rc=0
wait "$fuzz_pid" || fuzz_rc=$?
fuzz_pid=""
cat build/fuzz.out
[ $fuzz_rc -eq 0 ] || status=1
echo "== ingest tests under AddressSanitizer + UndefinedBehaviorSanitizer"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
(cd build-asan && ctest --output-on-failure -j"$J" -L sanitize --timeout 900) 2>&1 | tee build-asan/ctest.out || status=1
skipped_summary build-asan
echo "== GPU tests on the emulated device (build-emu, ctest -L emu)"
CUDA_INC=${CUDA_HOME:-/usr/local/cuda}/include
if [ -f "$CUDA_INC/cuda_runtime.h" ] && [ -f "$CUDA_INC/cublasLt.h" ]; then
  { cmake -S . -B build-emu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_CUDA=EMU >/dev/null &&
    cmake --build build-emu -j"$J" --target emu_tests >/dev/null &&
    (cd build-emu && ctest --output-on-failure -j"$J" -L emu --timeout 900) 2>&1 | tee build-emu/ctest.out; } || status=1
  skipped_summary build-emu
else
  echo "SKIP: the emulated device needs the CUDA toolkit's headers ($CUDA_INC/cuda_runtime.h)"
fi
exit $status
