#!/usr/bin/env bash
# bench/plan/run.sh — Dynamic-CP planner benchmark (not a test).
#
# For several mixes of real clip-length distributions (seconds-long clips with a few
# percent of minutes-long videos; tokens = duration x 1800, clips capped at 300 s),
# B = 256 clips, N = 64 ranks, G = 8, M = 65536 tokens, the h100-dit1b cost model, plans
# STEPS seeded global batches with `tessera plan` and prints one line per mix: the
# dynamic plan's efficiency against the lower bound, its speedup over both static-CP
# baselines (measured in the same run) and the planner time per batch. A last line does
# the same for 4096 clips on 1024 ranks. The planner runs pinned to one core.
# Results: bench/plan/results.json (machine and commit included).
#
#   bench/plan/run.sh                  (after tools/setup.sh)
#   STEPS=50 TESSERA_BIN=... TESSERA_SHARED=... OUT=... bench/plan/run.sh
# Needs jq to assemble the JSON.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${TESSERA_BIN:-$ROOT/build/tools/tessera}
SHARED=${TESSERA_SHARED:-$ROOT/../shared}
OUT=${OUT:-$ROOT/bench/plan/results.json}
STEPS=${STEPS:-20}
COST=$ROOT/configs/cost/h100-dit1b.conf
LEN=$SHARED/lengths
command -v jq >/dev/null || { echo "run.sh: needs jq (apt-get install jq)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "run.sh: no $BIN; build first (tools/setup.sh)" >&2; exit 1; }
[ -d "$LEN" ] || { echo "run.sh: no $LEN; set TESSERA_SHARED" >&2; exit 1; }
PIN=()
command -v taskset >/dev/null && PIN=(taskset -c 0)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

MIXES=(
  "ucf101+3%youcook2|ucf101_clips.csv:0.97,youcook2_videos.csv:0.03"
  "ucf101+5%anet-videos|ucf101_clips.csv:0.95,activitynet_captions_videos.csv:0.05"
  "webvid+4%anet-videos|webvid10m_val.csv:0.96,activitynet_captions_videos.csv:0.04"
  "webvid+3%youcook2|webvid10m_val.csv:0.97,youcook2_videos.csv:0.03"
  "anet-events+5%youcook2|activitynet_captions_events.csv:0.95,youcook2_videos.csv:0.05"
  "charades+2%anet-videos|charades_videos.csv:0.98,activitynet_captions_videos.csv:0.02"
)
COMMON=(--tokens-per-second 1800 --max-seconds 300 --gpus-per-node 8 --mem-tokens 65536
        --cost "$COST" --seed 1)

# run NAME SPEC RANKS BATCH STEPS: one `tessera plan` run, a line, a JSON entry
run() {
  local name=$1 spec=$2 ranks=$3 batch=$4 steps=$5 full=""
  IFS=, read -ra parts <<<"$spec"
  for p in "${parts[@]}"; do full+="${full:+,}$LEN/$p"; done
  "${PIN[@]}" "$BIN" plan --lengths "$full" "${COMMON[@]}" --ranks "$ranks" \
    --global-batch "$batch" --steps "$steps" --json "$TMP/$name.json" >"$TMP/$name.out" 2>"$TMP/$name.err" \
    || { cat "$TMP/$name.err" >&2; exit 1; }
  jq -c --arg name "$name" --arg spec "$spec" '.total + {name: $name, mix: $spec, ranks: .ranks,
      global_batch: (.steps[0].clips | length), min_step_efficiency: ([.steps[].efficiency] | min)}' \
    "$TMP/$name.json" >"$TMP/$name.entry"
  jq -r '"\(.name | .[0:26] | . + " " * (26 - length)) N=\(.ranks) B=\(.global_batch) eff \(.efficiency*1000|round/1000) (min step \(.min_step_efficiency*1000|round/1000))  x\(.speedup_packing_only*1000|round/1000) vs packing-only  x\(.speedup_static_balanced*1000|round/1000) vs static-balanced  planner \(.plan_ms_mean*100|round/100) ms (max \(.plan_ms_max*100|round/100))"' \
    "$TMP/$name.entry"
}

for m in "${MIXES[@]}"; do run "${m%%|*}" "${m#*|}" 64 256 "$STEPS"; done
run "large:ucf101+3%youcook2" "ucf101_clips.csv:0.97,youcook2_videos.csv:0.03" 1024 4096 3

commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo true || echo false)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || echo unknown)
jq -s --arg commit "$commit" --argjson dirty "$dirty" --arg cpu "$cpu" --arg cores "$(nproc)" \
  --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg steps "$STEPS" '{
    benchmark: "tessera plan: Dynamic-CP planner vs static CP",
    commit: $commit, dirty: $dirty, date: $date,
    machine: {cpu: $cpu, cores: ($cores | tonumber), pinned_to_one_core: true},
    setup: {tokens_per_second: 1800, max_seconds: 300, gpus_per_node: 8, mem_tokens: 65536,
            cost: "configs/cost/h100-dit1b.conf", seed: 1, steps_per_mix: ($steps | tonumber)},
    targets: {efficiency_min: 0.90, plan_ms_256_clips_64_ranks: 50, plan_ms_4096_clips_1024_ranks: 1000},
    results: .}' "$TMP"/*.entry >"$OUT"
echo "wrote $OUT (commit ${commit:0:12}$([ "$dirty" = true ] && echo ', uncommitted changes'))"
