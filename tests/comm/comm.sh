#!/usr/bin/env bash
# tests/comm/comm.sh — the group set and collectives (test_comm) without a launcher and
# under mpirun with 2 and 4 ranks; 3 ranks must be refused with a clear message (test_comm
# checks that).
set -uo pipefail
BIN=${TEST_COMM:?set by ctest}
fail=0
run() { echo "== $*"; "$@" || { echo "FAIL: $*"; fail=$((fail + 1)); }; }
run "$BIN"
for n in 2 4 3; do
  run mpirun --oversubscribe -np "$n" "$BIN"
done
echo "comm: $((4 - fail)) passed, $fail failed"
[ $fail -eq 0 ]
