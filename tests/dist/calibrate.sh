#!/usr/bin/env bash
# tessera calibrate: one rank (compute fit; comm keys from the base file) and two and three ranks
# under mpirun (ring latency/bandwidth, the all-to-all, ZeRO's all-gather and reduce-scatter
# and the all-reduce measured); the cost
# files load in `tessera plan`, and their kv equals the closed form 24 * hidden * depth; bad --comm values
# are refused with what to use.
set -uo pipefail
BIN=${TESSERA_BIN:?set by ctest}
SRC=${TESSERA_SRC:?set by ctest}
T=$(mktemp -d /tmp/tsr_calib.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
key() { awk -F' = ' -v k="$1" '$1 == k { print $2 }' "$2"; }
ARGS=(--config "$SRC/configs/model/tiny.conf" --set model.hidden=32 --set model.depth=2
      --min-tokens 16 --max-tokens 256 --points 3 --reps 1 --base "$SRC/configs/cost/h100-dit1b.conf")

if "$BIN" calibrate "${ARGS[@]}" --out "$T/one.conf" >"$T/one.log" 2>&1; then ok; else bad "calibrate 1 rank: $(cat "$T/one.log")"; fi
[ "$(key kv "$T/one.conf")" = 1536 ] && ok || bad "kv $(key kv "$T/one.conf") != 24*32*2"
awk -v a="$(key allreduce "$T/one.conf")" 'BEGIN { exit !(a > 0 && a < 1) }' && ok || bad "one rank: allreduce = the optimizer step, got $(key allreduce "$T/one.conf")"
awk -v a="$(key lat "$T/one.conf")" -v b="$(key lat "$SRC/configs/cost/h100-dit1b.conf")" 'BEGIN { exit !(a == b) }' \
  && ok || bad "one rank: lat from base"
awk -v a="$(key a "$T/one.conf")" -v b="$(key b "$T/one.conf")" 'BEGIN { exit !(a > 0 || b > 0) }' && ok || bad "no compute cost fitted"

if mpirun --oversubscribe -np 2 "$BIN" calibrate "${ARGS[@]}" --out "$T/two.conf" >"$T/two.log" 2>&1; then ok; else bad "calibrate 2 ranks: $(cat "$T/two.log")"; fi
awk -v l="$(key lat "$T/two.conf")" -v ar="$(key allreduce "$T/two.conf")" -v bw="$(key bw_intra "$T/two.conf")" \
  'BEGIN { exit !(l > 0 && l < 0.1 && ar > 0 && bw > 1e6 && bw < 1e12) }' && ok || bad "two ranks: measured comm keys implausible: $(cat "$T/two.conf")"
# the all-to-all of Ulysses: measured at two ranks, absent (0: the ring's keys) at one
awk -v l="$(key a2a_lat "$T/two.conf")" -v bw="$(key a2a_bw_intra "$T/two.conf")" \
  'BEGIN { exit !(l > 0 && l < 0.1 && bw > 1e6 && bw < 1e12) }' && ok || bad "two ranks: all-to-all keys implausible: $(cat "$T/two.conf")"
[ "$(key a2a_lat "$T/one.conf")" = 0 ] && [ "$(key a2a_bw_intra "$T/one.conf")" = 0 ] && ok \
  || bad "one rank: a2a keys should be 0 (nothing to measure)"
# ZeRO's world all-gather and reduce-scatter: measured at two ranks, 0 (the ring's) at one
awk -v l="$(key coll_lat "$T/two.conf")" -v ag="$(key ag_bw "$T/two.conf")" -v rs="$(key rs_bw "$T/two.conf")" \
  'BEGIN { exit !(l > 0 && l < 0.1 && ag > 1e6 && ag < 1e12 && rs > 1e6 && rs < 1e12) }' && ok \
  || bad "two ranks: all-gather/reduce-scatter keys implausible: $(cat "$T/two.conf")"
[ "$(key coll_lat "$T/one.conf")" = 0 ] && [ "$(key ag_bw "$T/one.conf")" = 0 ] && \
  [ "$(key rs_bw "$T/one.conf")" = 0 ] && ok || bad "one rank: ZeRO keys should be 0 (nothing to measure)"
# three ranks (a world that is not a power of two: the exchanges run over the world's group)
if mpirun --oversubscribe -np 3 "$BIN" calibrate "${ARGS[@]}" --out "$T/three.conf" >"$T/three.log" 2>&1; then ok; else bad "calibrate 3 ranks: $(cat "$T/three.log")"; fi
awk -v l="$(key lat "$T/three.conf")" -v bw="$(key bw_intra "$T/three.conf")" -v a="$(key a2a_bw_intra "$T/three.conf")" \
  -v ag="$(key ag_bw "$T/three.conf")" 'BEGIN { exit !(l > 0 && l < 0.1 && bw > 1e6 && bw < 1e12 && a > 1e6 && ag > 1e6) }' \
  && ok || bad "three ranks: measured comm keys implausible: $(cat "$T/three.conf")"

for f in one two three; do
  "$BIN" plan --lengths <(printf 'tokens\n100\n300\n900\n') --ranks 3 --mem-tokens 1000 --cost "$T/$f.conf" \
    >"$T/plan.log" 2>&1 && ok || bad "plan with the $f-rank cost file: $(cat "$T/plan.log")"
done
"$BIN" calibrate --config "$SRC/configs/model/tiny.conf" >"$T/err.log" 2>&1
[ $? -eq 1 ] && grep -q -- "--out" "$T/err.log" && ok || bad "missing --out: $(cat "$T/err.log")"
# --comm: the CPU computes in host memory, NCCL moves device memory: refused, saying what to use
"$BIN" calibrate "${ARGS[@]}" --backend cpu --comm nccl --out "$T/x.conf" >"$T/err.log" 2>&1
[ $? -eq 1 ] && grep -q "comm nccl.*host memory.*--comm mpi" "$T/err.log" && ok || bad "--comm nccl on the CPU: $(cat "$T/err.log")"
"$BIN" calibrate "${ARGS[@]}" --comm carrier-pigeon --out "$T/x.conf" >"$T/err.log" 2>&1
[ $? -eq 1 ] && grep -q "carrier-pigeon.*built: mpi" "$T/err.log" && ok || bad "--comm unknown: $(cat "$T/err.log")"
echo "calibrate: $pass passed, $fail failed"
[ $fail -eq 0 ]
