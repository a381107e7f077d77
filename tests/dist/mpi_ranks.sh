#!/usr/bin/env bash
# A multi-rank C test under mpirun with 2 and 4 ranks: TEST_BIN (its groups cover CP sizes
# 1, 2 and 4), named TEST_WHAT in the summary (tests/dist/CMakeLists.txt: ring and Ulysses
# attention, masked attention over blockwise placements).
set -uo pipefail
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # one thread per rank: no oversubscription
BIN=${TEST_BIN:?set by ctest}
WHAT=${TEST_WHAT:?set by ctest}
fail=0
for n in 2 4; do
  echo "== mpirun -np $n"
  mpirun --oversubscribe -np "$n" "$BIN" || { echo "FAIL: $n ranks"; fail=$((fail + 1)); }
done
echo "$WHAT: $((2 - fail)) passed, $fail failed"
[ $fail -eq 0 ]
