#!/usr/bin/env bash
# Masked attention over blockwise placements at CP sizes 1, 2 and 4 (test_placed_attention
# under mpirun).
set -uo pipefail
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # one thread per rank: no oversubscription
BIN=${TEST_PLACED:?set by ctest}
fail=0
for n in 2 4; do
  echo "== mpirun -np $n"
  mpirun --oversubscribe -np "$n" "$BIN" || { echo "FAIL: $n ranks"; fail=$((fail + 1)); }
done
echo "placed attention: $((2 - fail)) passed, $fail failed"
[ $fail -eq 0 ]
