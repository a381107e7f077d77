#!/usr/bin/env bash
# bench/plan/anyworld.sh — plan quality at world sizes that are not powers of two beside the
# neighbouring powers of two (not a test; issue 39). For the six mixes of bench/plan/run.sh
# (tokens = duration x 1800, clips capped at 300 s, M = 65,536, 8 GPUs a node, h100-dit1b,
# auto CP mode), CLIPS_PER_RANK clips a rank per batch, STEPS batches: on 16, 24, 32 ranks,
# 64, 96, 128 and (two mixes, 1 batch, 2 clips a rank) 8,192, 12,288 and 16,384, the plan's
# efficiency against the lower bound (bound / step time) and Dynamic-CP's speedup over
# packing only, side by side. Prints one line per mix and world size.
#   bench/plan/anyworld.sh        (a few minutes on one core)
#   STEPS=4 BIG=0 bench/plan/anyworld.sh
# Needs jq.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${TESSERA_BIN:-$ROOT/build/tools/tessera}
LEN=${TESSERA_SHARED:-$ROOT/../shared}/lengths
STEPS=${STEPS:-2}
CPR=${CLIPS_PER_RANK:-4}
BIG=${BIG:-1}
command -v jq >/dev/null || { echo "anyworld.sh: needs jq" >&2; exit 1; }
[ -x "$BIN" ] || { echo "anyworld.sh: no $BIN; build first" >&2; exit 1; }
PIN=()
command -v taskset >/dev/null && PIN=(taskset -c "${CORE:-0}")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/mixes.sh"  # MIXES, full_spec
# one MIX RANKS CLIPS STEPS: "efficiency speedup_over_packing"
one() {
  local spec
  spec=$(full_spec "${1#*|}")
  "${PIN[@]}" "$BIN" plan --lengths "$spec" --tokens-per-second 1800 --max-seconds 300 \
    --gpus-per-node 8 --mem-tokens 65536 --cost "$ROOT/configs/cost/h100-dit1b.conf" --seed 1 \
    --ranks "$2" --global-batch "$3" --steps "$4" --out "$TMP/p.json" >/dev/null 2>"$TMP/err" ||
    { cat "$TMP/err" >&2; exit 1; }
  jq -r '.total | "\(.lower_bound_s / .predicted_s) \(.packing_only_s / .predicted_s)"' "$TMP/p.json"
}
row() {  # row MIX CLIPS_PER_RANK STEPS N1 N2 N3
  local m=$1 cpr=$2 steps=$3 line e x
  line=$(printf "%-24s" "${m%%|*}")
  shift 3
  for n in "$@"; do
    read -r e x < <(one "$m" "$n" $((n * cpr)) "$steps")
    line+=$(printf "  N=%-5d eff %.3f x_pack %.3f" "$n" "$e" "$x")
  done
  echo "$line"
}
echo "efficiency against the lower bound and speedup over packing only ($STEPS batches of $CPR clips a rank)"
for m in "${MIXES[@]}"; do row "$m" "$CPR" "$STEPS" 16 24 32; done
for m in "${MIXES[@]}"; do row "$m" "$CPR" "$STEPS" 64 96 128; done
if [ "$BIG" = 1 ]; then
  echo "1 batch of 2 clips a rank:"
  for m in "${MIXES[0]}" "${MIXES[5]}"; do row "$m" 2 1 8192 12288 16384; done
fi
