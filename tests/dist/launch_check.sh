#!/usr/bin/env bash
# tests/dist/launch_check.sh — every option that shapes a run is in the launch check (issue
# 40, 7): two ranks (mpirun's MPMD form, one command line each) given different --init
# (one rank only, or two checkpoints of the same shapes), --steps, --resume, --plan,
# --planners, --cost, --skip-bad-clips, LoRA or ZeRO settings stop at once (well within
# 60 s; --steps differing ran into the 600 s comm timeout) with exit 1 and the launch
# check's message naming what differs; the same options on both ranks train.
set -euo pipefail
. "$(dirname "$0")/ranks_store.sh"
ranks_begin launch-check
BASE=("${RANKS_MODEL[@]}" --set train.steps=4 --set train.warmup=1 --set train.mem_tokens=700
      --set train.ckpt_every=2 --set train.log_every=1)
# two checkpoints of the same model (same shapes and size), for --init
"$T" train "${BASE[@]}" --out "$W/src" --steps 4 --set train.ckpt_keep=2 --set train.mem_tokens=2048 2>"$W/src.log" ||
  { tail -3 "$W/src.log"; fail "the --init checkpoints' run"; }
C2=$W/src/ckpt-2.safetensors C4=$W/src/ckpt-4.safetensors
cost=$(ls "$SRC"/configs/cost/*.conf | head -1)
sed 's/^\(a *= *\)\(.*\)/\1 1e-9/' "$cost" >"$W/other-cost.conf"
cmp -s "$cost" "$W/other-cost.conf" && fail "the second cost file is not different"
n=0
# differ WHAT OPTS_RANK0 -- OPTS_RANK1: the launch stops in time naming WHAT
differ() {
  local what=$1 a=() b=() rc=0 t0 took
  shift
  while [ "$1" != "--" ]; do a+=("$1"); shift; done
  shift
  b=("$@")
  n=$((n + 1))
  t0=$(date +%s)
  timeout 120 "${MPI[@]}" -np 1 "$T" train "${BASE[@]}" --out "$W/d$n" "${a[@]}" : \
    -np 1 "$T" train "${BASE[@]}" --out "$W/d$n" "${b[@]}" >"$W/d$n.log" 2>&1 || rc=$?
  took=$(($(date +%s) - t0))
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -le 60 ] &&
     grep -q "were given different $what.*launch every rank with the same" "$W/d$n.log" &&
     ! ls "$W/d$n"/ckpt-* >/dev/null 2>&1; then
    echo "ok: different $what stopped in ${took}s: $(grep -m1 -o 'the ranks of this launch.*' "$W/d$n.log" | head -c 200)"
  else
    tail -5 "$W/d$n.log" >&2
    fail "different $what: exit $rc after ${took}s"
  fi
}
differ "--init checkpoints" --init "$C2" --
differ "--init checkpoints" --init "$C2" -- --init "$C4"
differ "--steps or --resume" --steps 2 -- --steps 3
differ "planner options" --plan static --
differ "planner options" --planners 0 --
differ "planner options" --cost "$cost" -- --cost "$W/other-cost.conf"
differ "planner options" --gpus-per-node 1 --
differ "--skip-bad-clips" --skip-bad-clips --
differ "configs or stores" --set train.zero=1 --
# shellcheck disable=SC2054  # lora.targets is a comma-separated list, one element
differ "configs or stores" --init "$C4" --set lora.rank=2 --set lora.targets=to_q,to_v -- \
  --init "$C4" --set lora.rank=4 --set lora.targets=to_q,to_v
# one rank told --resume, the other not
differ "--steps or --resume" --resume --steps 3 -- --steps 3
# the same options on both ranks: the check passes and the run trains
"${MPI[@]}" -np 1 "$T" train "${BASE[@]}" --out "$W/same" --init "$C2" --steps 2 --cost "$cost" : \
  -np 1 "$T" train "${BASE[@]}" --out "$W/same" --init "$C2" --steps 2 --cost "$cost" \
  >"$W/same.log" 2>&1 || { tail -5 "$W/same.log"; fail "the same options on both ranks"; }
[ -f "$W/same/ckpt-2.safetensors" ] || fail "the agreeing launch wrote no checkpoint"
echo "ok: the same --init, --steps and --cost on both ranks train"
echo "launch check: all passed"
