#!/usr/bin/env bash
# Plan sharing under mpirun (test_share.c): 4 processes with 1, 2 and 4 planners, and 3
# processes (the sharing itself needs no power of two) with 2; each process checks the
# plans it receives against its own, bitwise.
set -uo pipefail
TEST=${TEST_SHARE:?set by ctest}
. "$(dirname "$0")/../shared.sh"
need_shared lengths
MPI=(mpirun --oversubscribe --bind-to none)
fail=0
for run in "4 1" "4 2" "4 4" "3 2"; do
  set -- $run
  if ! OMP_NUM_THREADS=1 "${MPI[@]}" -np "$1" "$TEST" "$2"; then
    echo "FAIL: $1 processes, $2 planners" >&2
    fail=1
  fi
done
exit $fail
