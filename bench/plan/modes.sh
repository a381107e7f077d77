#!/usr/bin/env bash
# bench/plan/modes.sh — how CP groups split attention (not a test): the simulator's step time
# of Dynamic-CP plans whose groups all run ring attention, all Ulysses, all hybrid (Ulysses
# inside a node, ring across nodes), and the planner's per-group choice (auto), against the
# lower bound, on real length mixes at 64, 512 and 4,096 ranks with 8 per node.
#
# Baseline: ring-only plans (what tessera planned before CP modes), in the same run on the
# same batches; every mode's step time is printed over it. Cost models: h100-dit1b (16
# heads: dit-1b's; InfiniBand between nodes, 45 GB/s a GPU) and the same with 12.5 GB/s
# between nodes (100 Gb/s Ethernet), tokens = duration x 1800, clips capped at 300 s,
# M = 65536 tokens, 4 clips a rank per batch, STEPS batches (default 2); Ulysses' all-to-all
# pipelined over 2 head chunks (train.ulysses_chunks' default; sched/cost.h). Results:
# bench/plan/results-modes.json and bench/plan/modes.md (the table of docs/plan.md "CP
# modes").
#
#   bench/plan/modes.sh        (after tools/setup.sh; about a minute)
#   STEPS=4 RANKS="64 512" OUT=... bench/plan/modes.sh
# Needs jq.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${TESSERA_BIN:-$ROOT/build/tools/tessera}
SHARED=${TESSERA_SHARED:-$ROOT/../shared}
OUT=${OUT:-$ROOT/bench/plan/results-modes.json}
TABLE=${TABLE:-$ROOT/bench/plan/modes.md}
STEPS=${STEPS:-2}
RANKS=${RANKS:-64 512 4096}
LEN=$SHARED/lengths
command -v jq >/dev/null || { echo "modes.sh: needs jq (apt-get install jq)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "modes.sh: no $BIN; build first (tools/setup.sh)" >&2; exit 1; }
[ -d "$LEN" ] || { echo "modes.sh: no $LEN; set TESSERA_SHARED" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
H100=$ROOT/configs/cost/h100-dit1b.conf
sed 's/^bw_inter = .*/bw_inter = 1.25e10/' "$H100" >"$TMP/h100-dit1b-ethernet.conf"
COSTS=("$H100" "$TMP/h100-dit1b-ethernet.conf")

. "$(dirname "$0")/mixes.sh"  # full_spec; three of its MIXES:
MIXES=(
  "ucf101+3%youcook2|ucf101_clips.csv:0.97,youcook2_videos.csv:0.03"
  "webvid+4%anet-videos|webvid10m_val.csv:0.96,activitynet_captions_videos.csv:0.04"
  "anet-events+5%youcook2|activitynet_captions_events.csv:0.95,youcook2_videos.csv:0.05"
)
MODES=(ring ulysses hybrid auto)

# run COST MIX_NAME SPEC RANKS MODE: one `tessera plan`; prints one JSON entry.
run() {
  local cost=$1 name=$2 spec=$3 ranks=$4 mode=$5 tag
  tag=$(echo "$(basename "$cost" .conf)-$name-$ranks-$mode" | tr -c 'a-zA-Z0-9-' _)
  "$BIN" plan --lengths "$(full_spec "$spec")" --tokens-per-second 1800 --max-seconds 300 \
    --gpus-per-node 8 --mem-tokens 65536 --cost "$cost" --heads 16 --seed 1 --ranks "$ranks" \
    --global-batch $((4 * ranks)) --steps "$STEPS" --cp-mode "$mode" --out "$TMP/$tag.json" \
    >"$TMP/$tag.out" 2>"$TMP/$tag.err" || { cat "$TMP/$tag.err" >&2; exit 1; }
  jq -c --arg name "$name" --arg mode "$mode" --argjson ranks "$ranks" \
    --arg cost "$(basename "$cost" .conf)" '{cost: $cost, mix: $name, ranks: $ranks, mode: $mode, steps: .total.steps,
      predicted_s: .total.predicted_s, lower_bound_s: .total.lower_bound_s,
      efficiency: (.total.lower_bound_s / .total.predicted_s), mode_clips: .total.mode_clips}' \
    "$TMP/$tag.json"
}

entries=()
for c in "${COSTS[@]}"; do
  cn=$(basename "$c" .conf)
  for m in "${MIXES[@]}"; do
    name=${m%%|*} spec=${m#*|}
    for n in $RANKS; do
      for mode in "${MODES[@]}"; do
        run "$c" "$name" "$spec" "$n" "$mode" >"$TMP/e.$cn.$name.$n.$mode"
        entries+=("$TMP/e.$cn.$name.$n.$mode")
      done
      jq -r -s '(map(select(.mode == "ring"))[0].predicted_s) as $ring |
        .[] | "\(.cost) \(.mix) N=\(.ranks) \(.mode): \(.predicted_s / .steps * 1000 | round / 1000) s/step, ring-only / this \($ring / .predicted_s * 1000 | round / 1000)x, efficiency \(.efficiency * 1000 | round / 1000); clips in CP > 1 groups \(.mode_clips)"' \
        "$TMP"/e."$cn"."$name"."$n".*
    done
  done
done

jq -n --arg commit "$(git -C "$ROOT" rev-parse --short HEAD)" \
  --arg host "$(uname -n)" --argjson steps "$STEPS" \
  --slurpfile e <(cat "${entries[@]}") \
  '{what: "CP modes: step time of Dynamic-CP plans in ring, Ulysses, hybrid and auto mode (bench/plan/modes.sh)",
    baseline: "ring-only plans, same batches", commit: $commit,
    costs: ["h100-dit1b", "h100-dit1b with bw_inter = 1.25e10"], heads: 16,
    gpus_per_node: 8, mem_tokens: 65536, steps: $steps, machine: $host, entries: $e}' >"$OUT"

{
  echo "Step time (s per step, simulated) of Dynamic-CP plans with every CP group in one mode and with the planner's choice per group, on $STEPS batches of 4 clips per rank; the ratio is ring-only over the mode (above 1: faster than ring). Cost models h100-dit1b and the same with 12.5 GB/s between nodes (ethernet), 16 heads, Ulysses' all-to-all pipelined over 2 head chunks, 8 ranks per node, M = 65536 (bench/plan/modes.sh)."
  echo
  echo "| cost | mix | ranks | ring | Ulysses | hybrid | auto | auto: bound / plan | auto's clips in CP > 1 groups |"
  echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
  jq -r '.entries | group_by([.cost, .mix, .ranks]) | .[] |
    (map({(.mode): .}) | add) as $m | ($m.ring.predicted_s) as $r |
    "| \($m.ring.cost | sub("h100-dit1b-"; "")) | \($m.ring.mix) | \($m.ring.ranks) | \($r / $m.ring.steps * 1000 | round / 1000) | \($m.ulysses.predicted_s / $m.ring.steps * 1000 | round / 1000) (\($r / $m.ulysses.predicted_s * 1000 | round / 1000)x) | \($m.hybrid.predicted_s / $m.ring.steps * 1000 | round / 1000) (\($r / $m.hybrid.predicted_s * 1000 | round / 1000)x) | \($m.auto.predicted_s / $m.ring.steps * 1000 | round / 1000) (\($r / $m.auto.predicted_s * 1000 | round / 1000)x) | \($m.auto.efficiency * 1000 | round / 1000) | ring \($m.auto.mode_clips.ring), Ulysses \($m.auto.mode_clips.ulysses), hybrid \($m.auto.mode_clips.hybrid) |"' "$OUT"
} >"$TABLE"
echo "wrote $OUT and $TABLE"
