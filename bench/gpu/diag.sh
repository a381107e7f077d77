#!/usr/bin/env bash
# bench/gpu/diag.sh — where a CUDA training step's time goes, for the GPU lease's `script
# diag` step (tools/gpu_lease.py; BUILD_DIR and OUT set by it):
#   1. one step with TESSERA_CUDA_LT_LOG=1: every cuBLASLt plan the step builds, counted by
#      shape, in OUT/plans.txt; the plans without an algorithm are the GEMMs that run on
#      the plain kernel (kernels/cuda/gemm.cu)
#   2. --profile over two steps: the device time per entry and class (tools/profile.h) in
#      OUT/prof.json and OUT/prof.log
# Exit: 0 when both runs exited 0 and wrote what they must (a plan log with plans, the
# profile's JSON); else 1, naming the run and its exit status (the status is the
# program's own, not that of a pipe that shows its output).
# Env: CONFIG (configs/model/dit-b.conf), CLIPS (16x4096).
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BUILD_DIR:?}/bench/bench_train_step
OUT=${OUT:?}
CONFIG=${CONFIG:-configs/model/dit-b.conf}
CLIPS=${CLIPS:-16x4096}
mkdir -p "$OUT"
A=(--backend cuda --config "$CONFIG" --set train.precision=bf16 --clips "$CLIPS")
fail=0

TESSERA_CUDA_LT_LOG=1 timeout 90 "$BIN" "${A[@]}" --warmup 0 --steps 1 >"$OUT/lt.log" 2>&1
rc=$?
echo "diag: one step: rc $rc, $(grep -m1 'calls so far' "$OUT/lt.log")"
grep "cuBLASLt plan" "$OUT/lt.log" | sed 's/.*cuBLASLt plan [0-9]* for //' | sort | uniq -c |
  sort -rn >"$OUT/plans.txt"
echo "diag: cuBLASLt plans: $(grep -c 'cuBLASLt algorithm' "$OUT/plans.txt") with an algorithm," \
  "$(grep -c 'no algorithm' "$OUT/plans.txt") without:"
grep "no algorithm" "$OUT/plans.txt" | head -30
if [ $rc -ne 0 ] || [ ! -s "$OUT/plans.txt" ]; then
  echo "FAIL diag: the plan-logging step exited $rc and logged $(wc -l <"$OUT/plans.txt") plans"
  tail -5 "$OUT/lt.log"
  fail=1
fi

timeout 150 "$BIN" "${A[@]}" --warmup 1 --steps 2 --profile --json "$OUT/prof.json" >"$OUT/prof.log" 2>&1
rc=$?
echo "diag: profile: rc $rc"
tail -40 "$OUT/prof.log"
if [ $rc -ne 0 ] || ! python3 tests/json_get.py "$OUT/prof.json" profile.step_ms >/dev/null 2>&1; then
  echo "FAIL diag: the profiled run exited $rc, $OUT/prof.json has no profile"
  fail=1
fi
exit $fail
