#!/usr/bin/env bash
# bench/dist/placed.sh — masked CP attention at 2 ranks on the CPU, contiguous chunks
# (ring attention) against a blockwise placement (placed attention), measured beside the
# model's prediction (not a test; bench/dist/placed.c says how). One clip of 6,144 tokens
# in frames of 8 x 16, block-causal by chunks of 2 frames (all chunks back), and a window
# mask (tiles of 2 frames x 4 x 4 tokens, radius 1 each way); blockwise also with its
# exchanges (K/V both ways, the gradient shares' return) waited for as soon as posted (no
# overlap with the own keys' attention), the reps interleaved, and the ratio. Writes
# bench/dist/placed.json.
# The CPU ranks share the machine's cores with whatever else runs: take several runs.
# Env: RANKS (2), REPS (3), BUILD_DIR (build), OUT_JSON.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${BUILD_DIR:-$ROOT/build}
BIN=$B/bench/bench_placed
OUT_JSON=${OUT_JSON:-$ROOT/bench/dist/placed.json}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
[ -x "$BIN" ] || { echo "bench: no $BIN (build first)" >&2; exit 1; }
command -v jq >/dev/null || { echo "placed.sh: needs jq" >&2; exit 1; }
TMP=$(mktemp)
trap 'rm -f "$TMP"' EXIT
for mask in block_causal window; do
  mpirun --oversubscribe -np "${RANKS:-2}" "$BIN" --mask "$mask" --reps "${REPS:-3}" | tee -a "$TMP" |
    jq -r '"\(.mask) at \(.ranks) ranks, \(.tokens) tokens: contiguous \(.contiguous.measured_s) s " +
      "(model \(.contiguous.model_s)), blockwise (\(.blockwise.kind)) \(.blockwise.measured_s) s " +
      "(model \(.blockwise.model_s)): x\(.x_measured) measured, x\(.x_model) model; " +
      "blockwise with the exchange waited for at once \(.blockwise.serial_s) s: overlap x\(.x_overlap)"'
done
jq -s --arg commit "$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)" \
  --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" '{
  benchmark: "masked CP attention: contiguous chunks vs blockwise placement (bench/dist/placed.c)",
  commit: $commit, device: $cpu, runs: .}' "$TMP" >"$OUT_JSON"
echo "wrote $OUT_JSON"
