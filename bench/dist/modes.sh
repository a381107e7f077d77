#!/usr/bin/env bash
# bench/dist/modes.sh — CP modes measured against the cost model (not a test): one
# microbatch of a CP group of all K ranks in ring, Ulysses and (at 4 ranks) hybrid mode
# (Ulysses over pairs of ranks, ring across them), timed with bench_ring (with the real
# exchange and with a communication table that moves nothing, the baseline), beside the
# time the cost model predicts for it from a cost file that `tessera calibrate` measured on
# this machine at the same K.
#   bench/dist/modes.sh                      CPU: tiny model (patch 1x4x4), 4096 tokens, mpi
# Env: RANKS ("2 4"), TOKENS (4096), REPS (3), BUILD_DIR (build), OUT_JSON
# (bench/dist/modes.json). Output: one line per run, OUT_JSON with every run and the cost
# files beside it (modes-costK.conf; bw_inter and a2a_bw_inter set to the measured
# bw_intra and a2a_bw_intra: one machine).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${BUILD_DIR:-$ROOT/build}
BIN=$B/bench/bench_ring
T=$B/tools/tessera
TOKENS=${TOKENS:-4096}
REPS=${REPS:-3}
OUT_JSON=${OUT_JSON:-$ROOT/bench/dist/modes.json}
SETS=(--config "$ROOT/configs/model/tiny.conf" --set model.pt=1 --set model.ph=4 --set model.pw=4)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
[ -x "$BIN" ] && [ -x "$T" ] || { echo "bench: no $BIN or $T (build first)" >&2; exit 1; }
command -v jq >/dev/null || { echo "bench: needs jq" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench-modes.XXXXXX")
trap 'rm -rf "$W"' EXIT
runs=()
for k in ${RANKS:-2 4}; do
  mpirun --oversubscribe -np "$k" "$T" calibrate "${SETS[@]}" --out "$W/cost$k.conf" >"$W/cal$k.log" 2>&1 ||
    { cat "$W/cal$k.log" >&2; exit 1; }
  # one machine: the "nodes" of a hybrid group talk at the measured bandwidth too
  bw=$(awk -F' = ' '$1 == "bw_intra" { print $2 }' "$W/cost$k.conf")
  a2a=$(awk -F' = ' '$1 == "a2a_bw_intra" { print $2 }' "$W/cost$k.conf")
  sed -i -e "s/^bw_inter = .*/bw_inter = $bw/" -e "s/^a2a_bw_inter = .*/a2a_bw_inter = $a2a/" "$W/cost$k.conf"
  cp "$W/cost$k.conf" "${OUT_JSON%.json}-cost$k.conf"
  modes="ring ulysses"
  [ "$k" -ge 4 ] && modes+=" hybrid"
  for m in $modes; do
    mpirun --oversubscribe -np "$k" "$BIN" "${SETS[@]}" --tokens "$TOKENS" --reps "$REPS" --comm mpi \
      --mode "$m" --gpus-per-node 2 --cost "$W/cost$k.conf" --json "$W/$k-$m.json" | tail -1
    runs+=("$W/$k-$m.json")
  done
done
jq -s --arg commit "$(git -C "$ROOT" rev-parse --short HEAD)" --arg host "$(uname -n)" \
  --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
  --argjson cores "$(nproc)" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
  '{what: "bench/dist/modes.sh: CP modes, one microbatch measured (with and without the exchange) against the calibrated cost model",
    commit: $commit, machine: {host: $host, cpu: $cpu, cores: $cores, load_average_at_end: $load}, runs: .}' \
  "${runs[@]}" >"$OUT_JSON"
echo "wrote $OUT_JSON"
