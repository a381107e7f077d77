#!/usr/bin/env bash
# bench/dist/ring.sh — the ring's exposed communication (not a test): bench_ring at CP-2
# and CP-4 (one group of all ranks), a microbatch with the exchanges against the same
# compute without them, per communication backend.
#   bench/dist/ring.sh                       CPU: tiny model (patch 1x4x4), 4096 tokens, mpi
#   BACKEND=cuda CONFIG=configs/model/dit-b.conf TOKENS=16384 bench/dist/ring.sh
#                                            GPU: --comm mpi (staged: every rank on the one
#                                            GPU when there is one) and nccl where K GPUs
#                                            are visible
# Env: BACKEND (cpu), COMMS (cpu: mpi; cuda: mpi nccl), CONFIG, SETS (extra --set
# arguments), TOKENS, CLIPS (1), REPS (5), RANKS ("2 4"), BUILD_DIR (build), OUT_JSON
# (bench/dist/ring.json), NOTE (a remark stored in the JSON). Baseline: the same run with a communication table that moves
# nothing (bench/dist/bench_ring.c). Output: one line per run, and OUT_JSON with the device,
# the commit and every run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${BUILD_DIR:-$ROOT/build}
BIN=$B/bench/bench_ring
BACKEND=${BACKEND:-cpu}
CONFIG=${CONFIG:-$ROOT/configs/model/tiny.conf}
if [ "$BACKEND" = cpu ]; then
  COMMS=${COMMS:-mpi}; TOKENS=${TOKENS:-4096}
  SETS=${SETS:---set model.pt=1 --set model.ph=4 --set model.pw=4}
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
else
  COMMS=${COMMS:-mpi nccl}; TOKENS=${TOKENS:-16384}; SETS=${SETS:---set train.precision=bf16}
fi
OUT_JSON=${OUT_JSON:-$ROOT/bench/dist/ring.json}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
[ -x "$BIN" ] || { echo "bench: no $BIN (build first)" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench-ring.XXXXXX")
trap 'rm -rf "$W"' EXIT
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
runs=()
for k in ${RANKS:-2 4}; do
  for c in $COMMS; do
    if [ "$c" = nccl ] && [ "$ngpu" -lt "$k" ]; then
      echo "bench: nccl at CP-$k skipped: $ngpu GPU(s) visible (NCCL needs one per rank)"; continue
    fi
    # shellcheck disable=SC2086
    mpirun --oversubscribe --bind-to none -np "$k" "$BIN" --config "$CONFIG" $SETS --tokens "$TOKENS" \
      --clips "${CLIPS:-1}" --reps "${REPS:-5}" --backend "$BACKEND" --comm "$c" --json "$W/r$k-$c.json" \
      2>"$W/r$k-$c.log" | grep '^bench_ring' || { tail -5 "$W/r$k-$c.log" >&2; exit 1; }
    runs+=("$W/r$k-$c.json")
  done
done
DEVICE=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
[ -n "$DEVICE" ] && [ "$BACKEND" != cpu ] || DEVICE="$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), $(getconf _NPROCESSORS_ONLN) cores"
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || cat "$ROOT/.carry/commit" 2>/dev/null || echo unknown)
jq -s --arg device "$DEVICE" --arg commit "$COMMIT" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
  --arg note "${NOTE:-}" \
  '{benchmark: "ring exposure", device: $device, commit: $commit, load_average: $load,
    baseline: "the same microbatch with a communication table that moves nothing",
    note: $note, runs: (map(.config |= sub(".*/"; "")))}' \
  "${runs[@]}" >"$OUT_JSON"
echo "ring bench -> $OUT_JSON"
