#!/usr/bin/env bash
# tests/comm/comm_gpu.sh — the device communication backends (test_comm_gpu, label gpu;
# tests/gpu/run.sh skips it with the reason when no GPU is visible), every check of
# test_comm on device memory:
#   NCCL at world size 1: communicator creation, all-reduce, self send/recv (ring);
#   MPI staged through pinned host memory at 1, 2 and 4 ranks (several ranks share a GPU);
#   NCCL at 2 and 4 ranks where that many GPUs are visible (else said and skipped: NCCL
#   refuses two ranks on one GPU), and --comm nccl refused, naming the ranks, when they
#   would have to share one.
# A build without NCCL (TEST_COMM_NCCL=0, e.g. the emulated device) checks the MPI staging
# only and says so.
set -uo pipefail
BIN=${TEST_COMM_GPU:?set by ctest}
NCCL=${TEST_COMM_NCCL:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI=(mpirun --oversubscribe --bind-to none)
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
pass=0 fail=0 skipped=""
run() { echo "== $*"; if "$@"; then pass=$((pass + 1)); else echo "FAIL: $*"; fail=$((fail + 1)); fi; }
[ "$NCCL" = 1 ] && run "$BIN" nccl || skipped="$skipped nccl(built without NCCL)"
run "$BIN" mpi
for n in 2 4; do
  run "${MPI[@]}" -np $n "$BIN" mpi
  if [ "$NCCL" != 1 ]; then
    :
  elif [ "$ngpu" -ge $n ]; then
    run "${MPI[@]}" -np $n "$BIN" nccl
  else
    skipped="$skipped nccl-at-$n-ranks($ngpu GPU visible)"
  fi
done
if [ "$NCCL" = 1 ] && [ "$ngpu" -lt 2 ]; then  # two ranks on one GPU: nccl is refused with the reason
  out=$("${MPI[@]}" -np 2 "$BIN" nccl 2>&1)
  if echo "$out" | grep -q "share a GPU"; then pass=$((pass + 1)); echo "ok: nccl refused on a shared GPU"
  else fail=$((fail + 1)); echo "FAIL: nccl on a shared GPU: $out"; fi
fi
echo "comm gpu: $pass passed, $fail failed${skipped:+; skipped:$skipped}"
[ $fail -eq 0 ]
