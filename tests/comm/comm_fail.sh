#!/usr/bin/env bash
# tests/comm/comm_fail.sh — a rank that dies, hangs or fails ends the whole job within 60 s,
# with a message naming it (comm/comm.h "Failure"):
#   1. kill -9 of rank 1 of a 2-rank job that communicates (test_comm_fail): mpirun ends
#      the others and names the rank;
#   2. SIGSTOP of rank 1 of a 4-rank job (a hung rank: the launcher sees nothing): the
#      watchdog of a rank waiting on it (TESSERA_COMM_TIMEOUT=2) prints what it waited for,
#      naming rank 1, and MPI_Abort ends every rank, the stopped one included;
#   3. a rank that fails (`tessera calibrate` with a missing config on rank 1 only, while
#      rank 0 goes on into the collectives): it names itself and aborts the job;
#   4. TESSERA_COMM_TIMEOUT that is not a number of seconds >= 0 is refused, naming it.
# GPU variant: tests/dist/gpu_dist.sh (a rank of `tessera train --backend cuda` killed or
# stopped, with --comm mpi and nccl).
set -uo pipefail
BIN=${TEST_COMM_FAIL:?set by ctest}
T=${TESSERA_BIN:?set by ctest}
SRC=${TESSERA_SRC:?set by ctest}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-comm-fail.XXXXXX")
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
jobs_left=()
trap 'for p in "${jobs_left[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$W"' EXIT

# The pid of world rank $2 of the job whose command line holds $1.
rank_pid() {
  local p
  for p in $(pgrep -f "$1" || true); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return; }
  done
}

# fault NAME NP SIGNAL: run NP ranks, send SIGNAL to rank 1 once they communicate, then
# expect the job to end within 60 s (exit != 0) with "rank 1" in its output.
fault() {
  local name=$1 np=$2 sig=$3 log="$W/$1.log"
  mpirun --oversubscribe --bind-to none -np "$np" "$BIN" 300 >"$log" 2>&1 &
  local job=$!
  jobs_left+=("$job")
  # (up to 120 s: mpirun's start of 4 ranks takes tens of seconds on a loaded machine)
  for _ in $(seq 1200); do grep -q '^ready' "$log" && break; sleep 0.1; done
  local victim
  victim=$(rank_pid "$BIN 300" 1)
  if [ -z "$victim" ] || ! grep -q '^ready' "$log"; then
    bad "$name: the job did not start communicating: $(tail -3 "$log")"
    kill "$job" 2>/dev/null
    return
  fi
  local start=$SECONDS rc=0
  kill -"$sig" "$victim"
  timeout 90 tail --pid="$job" -f /dev/null
  wait "$job" || rc=$?
  local took=$((SECONDS - start))
  kill -CONT "$victim" 2>/dev/null
  if [ $rc -ne 0 ] && [ $took -le 60 ]; then ok "$name: job ended (exit $rc) ${took} s after SIG$sig of rank 1"
  else bad "$name: exit $rc after ${took} s"; fi
  if grep -Eq "rank 1([^0-9]|$)" "$log"; then ok "$name: named: $(grep -Em1 "rank 1([^0-9]|$)" "$log")"
  else bad "$name: no message naming rank 1: $(tail -5 "$log")"; fi
  for _ in $(seq 50); do pgrep -f "$BIN 300" >/dev/null || break; sleep 0.1; done  # reaped
  if pgrep -f "$BIN 300" >/dev/null; then
    bad "$name: ranks left running 5 s after the job ended: $(pgrep -af "$BIN 300")"
    for p in $(pgrep -f "$BIN 300"); do kill -9 "$p"; done
  fi
}

fault killed 2 KILL
TESSERA_COMM_TIMEOUT=2 fault hung 4 STOP
grep -q "has waited" "$W/hung.log" && ok "hung: the watchdog fired: $(grep -m1 'has waited' "$W/hung.log")" \
  || bad "hung: no watchdog message: $(tail -5 "$W/hung.log")"

# 3. rank 1 fails before a collective that rank 0 waits in
rc=0
start=$SECONDS
CAL=(--out "$W/cost.conf" --min-tokens 16 --max-tokens 64 --points 3 --reps 1
     --base "$SRC/configs/cost/h100-dit1b.conf" --backend cpu)
timeout 120 mpirun --oversubscribe -np 1 "$T" calibrate --config "$SRC/configs/model/tiny.conf" "${CAL[@]}" : \
  -np 1 "$T" calibrate --config "$W/missing.conf" "${CAL[@]}" >"$W/error.log" 2>&1 || rc=$?
took=$((SECONDS - start))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -le 60 ] && grep -q "rank 1 stopped with an error" "$W/error.log" \
   && grep -q "missing.conf" "$W/error.log"; then
  ok "failing rank: job ended (exit $rc, ${took} s): $(grep -m1 'rank 1 stopped' "$W/error.log")"
else
  bad "failing rank: exit $rc after ${took} s: $(tail -5 "$W/error.log")"
fi

# 4. a bad timeout is refused
out=$(TESSERA_COMM_TIMEOUT=soon "$T" calibrate --config x 2>&1)
echo "$out" | grep -q "TESSERA_COMM_TIMEOUT='soon'" && ok "bad TESSERA_COMM_TIMEOUT refused" \
  || bad "bad TESSERA_COMM_TIMEOUT: $out"

echo "comm fail: $pass passed, $fail failed"
[ $fail -eq 0 ]
