#!/usr/bin/env bash
# tests/train/preempt.sh — stopping on a signal (docs/train.md "Stopping and preemption"):
#  1. SIGTERM in the middle of a 30-step run: the step in flight finishes, its checkpoint
#     is written, exit 75; `tessera train --resume RUN` alone continues to step 30 with
#     every loss, lr and norm bitwise those of the run never stopped, the final checkpoint
#     byte for byte, and metrics.jsonl holding each step once;
#  2. at 2 ranks (mpirun): SIGTERM to rank 1 alone stops both after the same step (exit
#     75, rank 0's checkpoint), SIGUSR1 to mpirun (which forwards it to the ranks) stops the
#     resume, and a second resume ends bitwise the 2-rank run never stopped;
#  3. a second SIGINT aborts at once (killed by SIGINT, no checkpoint of its step).
source "$(dirname "$0")/lib.sh"
need_store
export OMP_NUM_THREADS=1
N=30
MPI=(mpirun --oversubscribe -np 2)
RUN=(--config "$CONF" --data "$STORE" "${SMALL[@]}")
# wait_lines RUN K: until RUN/metrics.jsonl has K lines (at most 60 s)
wait_lines() {
  for _ in $(seq 1 1200); do
    [ -f "$1/metrics.jsonl" ] && [ "$(wc -l <"$1/metrics.jsonl")" -ge "$2" ] && return 0
    sleep 0.05
  done
  fail "$1: no $2 metrics lines after 60 s"
}
# newest RUN: the step of RUN's newest checkpoint
newest() { ls "$1" | sed -n 's/^ckpt-\([0-9]*\)\.safetensors$/\1/p' | sort -n | tail -1; }
# same A B: B's metrics and final checkpoint are A's, each step once
same() {
  [ "$(jq -r .step "$2/metrics.jsonl" | tr '\n' ' ')" = "$(seq -s ' ' 1 $N) " ] ||
    fail "$2: metrics steps $(jq -r .step "$2/metrics.jsonl" | tr '\n' ' ')"
  diff <(jq -r '[.loss,.lr,.grad_norm,.clips,.tokens]|@tsv' "$1/metrics.jsonl") \
       <(jq -r '[.loss,.lr,.grad_norm,.clips,.tokens]|@tsv' "$2/metrics.jsonl") ||
    fail "$2: losses differ from the run never stopped ($1)"
  cmp "$1/ckpt-$N.safetensors" "$2/ckpt-$N.safetensors" || fail "$2: ckpt-$N differs"
}

# 1. one rank, SIGTERM
$T train "${RUN[@]}" --out "$W/a" --steps $N 2>>"$W/log"
$T train "${RUN[@]}" --out "$W/b" --steps $N 2>"$W/b.err" &
p=$!
wait_lines "$W/b" 3
kill -TERM $p
rc=0; wait $p || rc=$?
[ $rc -eq 75 ] || { tail -5 "$W/b.err"; fail "SIGTERM: exit $rc, expected 75"; }
S=$(newest "$W/b")
[ "$S" -lt $N ] || fail "SIGTERM: the run went on to its end (newest checkpoint $S)"
grep -q "stopped by signal 15 (Terminated) after step $S of $N: checkpoint $W/b/ckpt-$S.safetensors written" \
  "$W/b.err" || { tail -3 "$W/b.err"; fail "SIGTERM: no stop line for step $S"; }
[ "$(jq -r .step "$W/b/metrics.jsonl" | tail -1)" = "$S" ] || fail "SIGTERM: metrics after step $S"
$T train --resume "$W/b" 2>>"$W/log" || fail "resume after SIGTERM"
same "$W/a" "$W/b"
echo "ok: SIGTERM stopped 1 rank after step $S; resumed bitwise"

# 2. two ranks: one rank's signal stops both; SIGUSR1 through mpirun
"${MPI[@]}" $T train "${RUN[@]}" --out "$W/m" --steps $N 2>>"$W/log" || fail "2 ranks"
"${MPI[@]}" $T train "${RUN[@]}" --out "$W/c" --steps $N 2>"$W/c.err" &
p=$!
wait_lines "$W/c" 3
pid0=$(sed -n 's/^pid \([0-9]*\) .*/\1/p' "$W/c/lock")
pid1=$(pgrep -P $p -x tessera | grep -vx "$pid0" | head -1)
[ -n "$pid1" ] || fail "2 ranks: rank 1's process not found (rank 0: $pid0)"
kill -TERM "$pid1"
rc=0; wait $p || rc=$?
[ $rc -eq 75 ] || { tail -5 "$W/c.err"; fail "2 ranks, SIGTERM to rank 1: exit $rc, expected 75"; }
S2=$(newest "$W/c")
[ "$S2" -lt $N ] || fail "2 ranks: the run went on to its end"
grep -q "stopped by signal 15 (Terminated) after step $S2 of $N" "$W/c.err" ||
  fail "2 ranks: rank 0 did not stop after step $S2 on rank 1's signal"
"${MPI[@]}" $T train --resume "$W/c" 2>"$W/c2.err" &
p=$!
wait_lines "$W/c" $((S2 + 2))
kill -USR1 $p
rc=0; wait $p || rc=$?
[ $rc -eq 75 ] || { tail -5 "$W/c2.err"; fail "2 ranks, SIGUSR1 to mpirun: exit $rc, expected 75"; }
S3=$(newest "$W/c")
[ "$S3" -gt "$S2" ] && [ "$S3" -lt $N ] || fail "2 ranks, SIGUSR1: newest checkpoint $S3 (stopped at $S2 before)"
"${MPI[@]}" $T train --resume "$W/c" 2>>"$W/log" || fail "2 ranks: the last resume"
same "$W/m" "$W/c"
echo "ok: 2 ranks stopped after step $S2 (SIGTERM to rank 1) and $S3 (SIGUSR1 to mpirun); resumed bitwise"

# 3. a second SIGINT aborts: steps of a few hundred ms, so that it comes before the end
$T train "${RUN[@]}" --set train.global_batch=32 --set train.mem_tokens=4096 \
  --set train.ckpt_every=1000 --out "$W/i" --steps $N 2>"$W/i.err" &
p=$!
wait_lines "$W/i" 1
kill -INT $p
# (the first one handled before the second is sent: up to 30 s on a loaded machine)
for _ in $(seq 1 3000); do grep -q "signal received" "$W/i.err" && break; sleep 0.01; done
kill -INT $p
rc=0; wait $p || rc=$?
[ $rc -eq 130 ] || { tail -3 "$W/i.err"; fail "a second SIGINT: exit $rc, expected 130 (killed by SIGINT)"; }
[ -z "$(newest "$W/i")" ] || fail "a second SIGINT: a checkpoint was written ($(newest "$W/i"))"
echo "ok: a second SIGINT aborted at once"
