#!/usr/bin/env bash
# tests/comm/comm.sh — the group set and collectives (test_comm) without a launcher and
# under mpirun with 2, 4, 3 and 6 ranks (a world that is not a power of two: the whole
# blocks of each size, and the world's own group).
set -uo pipefail
BIN=${TEST_COMM:?set by ctest}
fail=0
run() { echo "== $*"; "$@" || { echo "FAIL: $*"; fail=$((fail + 1)); }; }
run "$BIN"
for n in 2 4 3 6; do
  run mpirun --oversubscribe -np "$n" "$BIN"
done
echo "comm: $((5 - fail)) passed, $fail failed"
[ $fail -eq 0 ]
