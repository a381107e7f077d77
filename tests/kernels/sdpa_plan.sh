#!/usr/bin/env bash
# tests/kernels/sdpa_plan.sh TEST STUB: runs TEST (test_cuda_sdpa_plan) with the machine's
# CUDA driver library or, where none is installed (this development machine), with the
# toolkit's stub STUB (lib64/stubs/libcuda.so) as libcuda.so.1: cuDNN's runtime-fusion
# engines need the driver library to be loadable to pass their support checks and compile;
# only loading the compiled module then fails, which the test accepts (see the test).
# Exit 77 (skipped) with the reason when neither is there.
test=$1 stub=$2
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  if [ ! -f "$stub" ]; then
    echo "SKIP: no CUDA driver library (libcuda.so.1) and no stub at $stub"
    exit 77
  fi
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  ln -s "$stub" "$dir/libcuda.so.1"
  export LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "no CUDA driver: using the stub $stub"
fi
"$test"
