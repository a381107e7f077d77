#!/usr/bin/env bash
# tests/dist/rank_kill.sh — a rank killed mid-step (issue 40, 8): `kill -9` of rank 1 of a
# 2-rank `tessera train` half a step after a step's metrics line (the next step is in its
# forward/backward or the gradient all-reduce, no checkpoint being written): the job ends
# within 60 s, non-zero, with a message naming rank 1; a 2-rank --resume from the newest
# checkpoint left (its checksums verified by the load) trains on, and one from the one
# before it gives every loss the killed run had logged past that (within 1e-5 relative:
# the run is deterministic at a fixed world size).
set -euo pipefail
. "$(dirname "$0")/ranks_store.sh"
ranks_begin rank-kill
RUN=("${RANKS_MODEL[@]}" --set train.steps=100000 --set train.warmup=2 --set train.mem_tokens=700
     --set train.ckpt_every=4 --set train.ckpt_keep=3 --set train.log_every=1)
lines() { [ -f "$W/run/metrics.jsonl" ] && wc -l <"$W/run/metrics.jsonl" || echo 0; }
"${MPI[@]}" -np 2 "$T" train "${RUN[@]}" --out "$W/run" >"$W/run.log" 2>&1 &
job=$!
for _ in $(seq 600); do [ "$(lines)" -ge 9 ] && break; sleep 0.1; done
[ "$(lines)" -ge 9 ] || { kill "$job" 2>/dev/null; tail -5 "$W/run.log"; fail "the run did not reach step 9"; }
victim=$(rank1_pid "$W/run")
[ -n "$victim" ] || { kill "$job" 2>/dev/null; fail "could not find rank 1's process"; }
# half a step after a metrics line whose step writes no checkpoint next
step_s=$(tail -1 "$W/run/metrics.jsonl" | jq -r .step_s)
n=$(lines)
while :; do
  m=$(lines)
  if [ "$m" -gt "$n" ] && [ $(((m + 1) % 4)) -ne 0 ]; then break; fi
  n=$m
  sleep 0.02
done
sleep "$(awk -v s="$step_s" 'BEGIN { printf "%.3f", s / 2 }')"
in_flight=$(($(tail -1 "$W/run/metrics.jsonl" | jq -r .step) + 1))
ranks_kill "$victim" "$job"
[ $RC -ne 0 ] && [ $TOOK -le 60 ] && echo "ok: rank 1 killed in step $in_flight (steps of ${step_s} s): the job ended (exit $RC) ${TOOK} s later" ||
  fail "after the kill: exit $RC after ${TOOK} s"
grep -Eqi "rank 1" "$W/run.log" && echo "ok: the message names rank 1: $(grep -Ei -m1 'rank 1' "$W/run.log" | head -c 200)" ||
  fail "no message naming rank 1: $(tail -5 "$W/run.log")"
cp "$W/run/metrics.jsonl" "$W/killed.jsonl"
for f in "$W/run"/ckpt-*.safetensors; do cp "$f" "$W/killed-$(basename "$f")"; done
# checkpoint steps in numeric order (the scratch folder's name holds dashes too)
ckpt_steps() { ls "$@" | sed 's/.*ckpt-\([0-9]*\)\.safetensors$/\1/' | sort -n; }
k=$(ckpt_steps "$W/run"/ckpt-*.safetensors | tail -1)
# the newest checkpoint resumes at the same world size
"${MPI[@]}" -np 2 "$T" train "${RUN[@]}" --out "$W/run" --resume --steps $((k + 2)) >"$W/resume.log" 2>&1 ||
  fail "the resume from ckpt-$k: $(tail -3 "$W/resume.log")"
[ -n "$(jq -r "select(.step == $((k + 2))) | .loss" "$W/run/metrics.jsonl")" ] || fail "no step $((k + 2)) after the resume"
echo "ok: resumed from the newest checkpoint left, ckpt-$k, to step $((k + 2))"
# the one before it resumes to the last step logged, with the killed run's losses
j=$(ckpt_steps "$W"/killed-ckpt-*.safetensors | tail -2 | head -1)
last=$((in_flight - 1))
[ "$j" -lt "$k" ] && [ "$last" -gt "$j" ] ||
  fail "checkpoints $(ckpt_steps "$W"/killed-ckpt-*.safetensors | tr '\n' ' ')left by a kill in step $in_flight"
mkdir "$W/older"
cp "$W/killed-ckpt-$j.safetensors" "$W/older/ckpt-$j.safetensors"
head -n "$j" "$W/killed.jsonl" >"$W/older/metrics.jsonl"
"${MPI[@]}" -np 2 "$T" train "${RUN[@]}" --out "$W/older" --resume --steps "$last" >"$W/older.log" 2>&1 ||
  fail "the resume from ckpt-$j: $(tail -3 "$W/older.log")"
d=$(paste <(jq -r "select(.step > $j) | .loss" "$W/older/metrics.jsonl") \
          <(jq -r "select(.step > $j and .step <= $last) | .loss" "$W/killed.jsonl") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2); if (r > m) m = r; n++ }
         END { printf "%d steps, worst relative difference %.3g", n, m; exit !(n > 0 && m <= 1e-5) }') ||
  fail "the losses after the resume from ckpt-$j: $d"
echo "ok: steps $((j + 1))-$last resumed from ckpt-$j as the killed run logged them: $d"
echo "rank kill: all passed"
