#!/usr/bin/env bash
# One writer per run directory (issue 24, item 3): while a `tessera train --out RUN` runs
# (frozen with SIGSTOP after its first step, so the others start while it holds RUN), a
# second `train --out RUN` and a `--resume` of RUN are refused naming the first (pid, host,
# command, since when) and change nothing; the first then finishes as if alone: its
# metrics.jsonl holds its steps once each, in order, and its checkpoints are all there.
# A holder killed with -9 does not block the next run. (Before RUN/lock, the second run
# also exited 0, the two interleaved metrics.jsonl and pruned each other's checkpoints.)
source "$(dirname "$0")/lib.sh"
need_store
RUN=(--config "$CONF" --data "$STORE" "${SMALL[@]}" --set train.ckpt_every=3)
$T train "${RUN[@]}" --out "$W/r" --steps 9 >"$W/first.log" 2>&1 </dev/null &
first=$!
trap 'kill -9 $first 2>/dev/null || true; rm -rf "$W"' EXIT
for _ in $(seq 2400); do [ -s "$W/r/metrics.jsonl" ] && break; sleep 0.05; done
kill -STOP "$first"
[ -s "$W/r/metrics.jsonl" ] || fail "the first run wrote no step"
grep -q "pid $first on host" "$W/r/lock" || fail "RUN/lock does not name the first run: $(cat "$W/r/lock" 2>&1)"
ls "$W/r" >"$W/before"
expect_fail "run directory $W/r is in use by another tessera train \(pid $first on host [^,]*, command '.*train.*', since .*\).*Nothing was changed" \
  $T train "${RUN[@]}" --out "$W/r" --steps 9
expect_fail "run directory $W/r is in use by another tessera train \(pid $first on host" \
  $T train "${RUN[@]}" --out "$W/r" --steps 9 --resume
ls "$W/r" | cmp -s - "$W/before" || fail "a refused run changed RUN: $(ls "$W/r")"
kill -0 "$first" 2>/dev/null || fail "the first run died while frozen"
kill -CONT "$first"
rc=0; wait "$first" || rc=$?
[ $rc -eq 0 ] || { tail -n 5 "$W/first.log" >&2; fail "the first run ended with $rc"; }
[ "$(jq -r .step "$W/r/metrics.jsonl" | tr '\n' ' ')" = "1 2 3 4 5 6 7 8 9 " ] ||
  fail "metrics.jsonl is not one run's steps 1-9: $(jq -r .step "$W/r/metrics.jsonl" | tr '\n' ' ')"
[ "$(ls "$W/r" | grep ckpt | tr '\n' ' ')" = "ckpt-6.safetensors ckpt-9.safetensors " ] ||
  fail "checkpoints: $(ls "$W/r")"
ok "a second run and a resume of a busy RUN were refused; the first ran as if alone"
# the lock dies with its holder: a run killed with -9 leaves RUN free for --resume
$T train "${RUN[@]}" --out "$W/k" --steps 40 >/dev/null 2>&1 </dev/null &
k=$!
for _ in $(seq 2400); do [ -f "$W/k/ckpt-3.safetensors" ] && break; sleep 0.05; done
kill -9 "$k"; wait "$k" 2>/dev/null || true
$T train "${RUN[@]}" --out "$W/k" --steps 6 --resume 2>"$W/k.log" ||
  { cat "$W/k.log" >&2; fail "--resume after a run was killed with -9"; }
ok "--resume after the holder was killed with -9"
echo "run_lock: $passed passed, 0 failed"
