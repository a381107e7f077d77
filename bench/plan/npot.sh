#!/usr/bin/env bash
# bench/plan/npot.sh — groups of any size vs power-of-two groups in the simulator (not a
# test; bench/plan/npot.c says how). For the six mixes of bench/plan/run.sh: 20 batches of
# 256 clips on 64 ranks, 5 of 1,024 on 256, 1 of 4,096 on 1,024 (the any-size scan is
# O(ranks^2) per clip: about a minute of one core per batch there), and on 4,096 to 16,384
# ranks the bound only. Writes bench/plan/npot.json and prints one line per run: the gain
# of the any-size heuristic over the power-of-two one on the same batches, and the most
# that any group shape could gain over the planner's plans (against the any-shape lower
# bound).
#   bench/plan/npot.sh      (after tools/setup.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BENCH_BIN:-$ROOT/build/bench/bench_plan_npot}
LEN=${TESSERA_SHARED:-$ROOT/../shared}/lengths
OUT=${OUT:-$ROOT/bench/plan/npot.json}
SIZES=${SIZES:-"64:256:20:0 256:1024:5:0 1024:4096:1:0 4096:16384:1:1 8192:32768:1:1 16384:65536:1:1"}
[ -x "$BIN" ] || { echo "npot.sh: no $BIN; build first" >&2; exit 1; }
command -v jq >/dev/null || { echo "npot.sh: needs jq" >&2; exit 1; }
PIN=()
command -v taskset >/dev/null && PIN=(taskset -c "${CORE:-0}")
. "$(dirname "$0")/mixes.sh"  # MIXES, full_spec
TMP=$(mktemp)
trap 'rm -f "$TMP"' EXIT
cd "$ROOT"
for size in $SIZES; do
  IFS=: read -r ranks clips batches bound_only <<<"$size"
  for m in "${MIXES[@]}"; do
    name=${m%%|*}
    spec=$(full_spec "${m#*|}")
    "${PIN[@]}" "$BIN" --mix "$spec" --ranks "$ranks" --clips "$clips" --batches "$batches" \
      --bound-only "$bound_only" |
      jq -c --arg name "$name" '. + {name: $name} | del(.mix)' | tee -a "$TMP" |
      jq -r '"\(.name | . + " " * (24 - length)) N=\(.ranks) B=\(.clips) x\(.batches): " +
        (if .gain_any_over_pow2 == null then "" else "any-size heuristic vs power-of-two \(.gain_any_over_pow2 * 1000 | round / 10)% (batches \(.worst_batch_gain * 1000 | round / 10)..\(.best_batch_gain * 1000 | round / 10)%); " end) +
        "any shape can gain at most \(.max_gain_any_shape_over_planner * 1000 | round / 10)% over the planner"'
  done
done
jq -s --arg commit "$(git rev-parse HEAD 2>/dev/null || echo unknown)" '{
  benchmark: "groups of any size vs power-of-two groups (bench/plan/npot.c)", commit: $commit,
  setup: {tokens_per_second: 1800, max_seconds: 300, gpus_per_node: 8, mem_tokens: 65536,
          cost: "configs/cost/h100-dit1b.conf", seed: 1},
  runs: .}' "$TMP" >"$OUT"
echo "wrote $OUT"
