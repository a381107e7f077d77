#!/usr/bin/env bash
# bench/plan/run.sh — Dynamic-CP planner benchmark (not a test): this build's planner
# against a named baseline build of the same command on the same batches.
#
# Baseline: `tessera plan` built from BASE_REV (default 9ea6d33, main before issue 15:
# the planner that scanned every block, O(clips x ranks) per run), unless BASE_BIN names
# a binary. Both plan the same seeded batches (the sampler did not change) pinned to one
# core (taskset), so quality is compared batch for batch and time in the same run.
#
# Part 1, mixes: for six mixes of real clip-length distributions (seconds-long clips with
# a few percent of minutes-long videos; tokens = duration x 1800, clips capped at 300 s),
# B = 256 clips, N = 64 ranks, G = 8, M = 65536 tokens, h100-dit1b cost model, STEPS
# batches: efficiency against the lower bound, speedup over both static-CP baselines,
# planner time per batch (wall and CPU), new and baseline.
# Part 2, scaling: ranks 64 ... 16,384 x clips per batch 256 ... 65,536 on the first mix
# (plus 32,768 clips on 8,192 ranks, the issue's target): planner time and quality, new
# and baseline on the same batches (3, or 1 where the baseline takes many seconds).
# Results: bench/plan/results.json (machine, commit, both builds' numbers, the ratios) and
# bench/plan/scaling.md (the table of docs/plan.md).
#
#   bench/plan/run.sh                  (after tools/setup.sh; builds the baseline, ~2 min)
#   BASE_BIN=... STEPS=50 SCALING=0 TESSERA_BIN=... TESSERA_SHARED=... OUT=... bench/plan/run.sh
#   TABLE_ONLY=1 bench/plan/run.sh     (rewrite scaling.md from results.json)
# Needs jq.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${TESSERA_BIN:-$ROOT/build/tools/tessera}
SHARED=${TESSERA_SHARED:-$ROOT/../shared}
OUT=${OUT:-$ROOT/bench/plan/results.json}
TABLE=${TABLE:-$ROOT/bench/plan/scaling.md}
STEPS=${STEPS:-20}
SCALING=${SCALING:-1}
BASE_REV=${BASE_REV:-9ea6d33}
COST=$ROOT/configs/cost/h100-dit1b.conf
LEN=$SHARED/lengths
command -v jq >/dev/null || { echo "run.sh: needs jq (apt-get install jq)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "run.sh: no $BIN; build first (tools/setup.sh)" >&2; exit 1; }
[ -d "$LEN" ] || { echo "run.sh: no $LEN; set TESSERA_SHARED" >&2; exit 1; }
PIN=()
command -v taskset >/dev/null && PIN=(taskset -c "${CORE:-0}")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The baseline binary: the planner of BASE_REV, built without media and CUDA (plan needs
# neither).
BASE=${BASE_BIN:-}
if [ -z "$BASE" ] && [ "${TABLE_ONLY:-0}" != 1 ]; then
  echo "building the baseline planner from $BASE_REV ..."
  mkdir -p "$TMP/base-src"
  git -C "$ROOT" archive "$BASE_REV" | tar -x -C "$TMP/base-src"
  cmake -S "$TMP/base-src" -B "$TMP/base-build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTESSERA_MEDIA=OFF -DTESSERA_CUDA=OFF >/dev/null
  cmake --build "$TMP/base-build" -j"$(nproc)" --target tessera >/dev/null
  BASE=$TMP/base-build/tools/tessera
fi
base_rev=$(git -C "$ROOT" rev-parse --short "$BASE_REV" 2>/dev/null || echo "$BASE_REV")

. "$(dirname "$0")/mixes.sh"  # MIXES, full_spec
COMMON=(--tokens-per-second 1800 --max-seconds 300 --gpus-per-node 8 --mem-tokens 65536
        --cost "$COST" --seed 1)
# the baseline planner knows ring attention only: this build plans in ring mode too (the
# CP modes' own benchmark is bench/plan/modes.sh)
NEW_ARGS=(--cp-mode ring)

# cpu_s BIN SPEC RANKS BATCH STEPS TAG [JSON]: runs `tessera plan` under /usr/bin/time and
# prints the process's CPU seconds (user + system, every thread).
cpu_s() {
  local bin=$1 spec=$2 ranks=$3 batch=$4 steps=$5 tag=$6 json=${7:-/dev/null} extra=()
  [ "$bin" = "$BIN" ] && extra=("${NEW_ARGS[@]}")
  "${PIN[@]}" /usr/bin/time -f "%U %S" -o "$TMP/$tag.time" "$bin" plan --lengths "$(full_spec "$spec")" \
    "${COMMON[@]}" "${extra[@]}" --ranks "$ranks" --global-batch "$batch" --steps "$steps" --json "$json" \
    >"$TMP/$tag.out" 2>"$TMP/$tag.err" || { cat "$TMP/$tag.err" >&2; exit 1; }
  awk '{ print $1 + $2 }' "$TMP/$tag.time"
}

# plan_totals BIN SPEC RANKS BATCH STEPS TAG: one `tessera plan` run; prints its totals
# (plus the least per-step efficiency, and the planner's CPU ms per batch measured from
# outside: the process's CPU time less that of a 1-clip, 16-rank run of the same binary
# and mix, i.e. loading the lengths) as one JSON object.
plan_totals() {
  local bin=$1 spec=$2 ranks=$3 batch=$4 steps=$5 tag=$6 cpu startup
  cpu=$(cpu_s "$bin" "$spec" "$ranks" "$batch" "$steps" "$tag" "$TMP/$tag.json")
  startup=$(cpu_s "$bin" "$spec" 16 1 1 "$tag-startup")
  jq -c --argjson cpu "$cpu" --argjson startup "$startup" '.total + {
      min_step_efficiency: ([.steps[].efficiency] | min), per_step_s: [.steps[].predicted_s],
      process_cpu_ms_per_batch: ((($cpu - $startup) * 1000 / .total.steps) | if . < 0 then 0 else . end)}' \
    "$TMP/$tag.json"
  rm -f "$TMP/$tag.json"
}

# compare NAME SPEC RANKS BATCH STEPS: both builds on the same batches; one JSON entry.
compare() {
  local name=$1 spec=$2 ranks=$3 batch=$4 steps=$5 tag
  tag=$(echo "$name-$ranks-$batch-$steps" | tr -c 'a-zA-Z0-9-' _)
  plan_totals "$BIN" "$spec" "$ranks" "$batch" "$steps" "$tag-new" >"$TMP/$tag.new"
  plan_totals "$BASE" "$spec" "$ranks" "$batch" "$steps" "$tag-base" >"$TMP/$tag.base"
  jq -n -c --arg name "$name" --arg spec "$spec" --argjson ranks "$ranks" --argjson batch "$batch" \
    --slurpfile n "$TMP/$tag.new" --slurpfile b "$TMP/$tag.base" '
    ($n[0]) as $n | ($b[0]) as $b |
    {name: $name, mix: $spec, ranks: $ranks, clips_per_batch: $batch, new: $n, base: $b,
     same_batches: {steps: $n.steps,
       new_predicted_s: $n.predicted_s, base_predicted_s: $b.predicted_s,
       new_over_base_step_time: ($n.predicted_s / $b.predicted_s),
       batches_new_slower: ([range($n.steps) | select($n.per_step_s[.] > $b.per_step_s[.])] | length)},
     planner_speedup_wall: ($b.plan_ms_mean / $n.plan_ms_mean),
     planner_speedup_cpu: ($b.process_cpu_ms_per_batch / ([$n.process_cpu_ms_per_batch, 0.1] | max))}' >"$TMP/$tag.entry"
  echo "$TMP/$tag.entry"
}

line() {  # one printed line of an entry
  jq -r '"\(.name | .[0:24] | . + " " * (24 - length)) N=\(.ranks) B=\(.clips_per_batch) eff \(.new.efficiency*1000|round/1000) (base \(.base.efficiency*1000|round/1000))  x\(.new.speedup_packing_only*1000|round/1000) vs packing-only (base x\(.base.speedup_packing_only*1000|round/1000))  step time new/base on the same \(.same_batches.steps) batches \(.same_batches.new_over_base_step_time*10000|round/10000) (new slower on \(.same_batches.batches_new_slower))  planner \(.new.plan_ms_mean*10|round/10) ms, CPU \(.new.process_cpu_ms_per_batch|round) (base \(.base.plan_ms_mean*10|round/10) ms, CPU \(.base.process_cpu_ms_per_batch|round))"' "$1"
}

# write_table: bench/plan/scaling.md from $OUT's scaling entries.
write_table() {
  {
    echo "Planner time per batch on one pinned core, ms: the new planner's own CPU time (its thread, \`plan_cpu_ms\`), and for both builds the process's CPU time less its start-up (drawing the batches and writing the JSON included) and, in brackets, the wall time, stretched by the machine's load ($(jq -r .machine.load_average_at_end "$OUT") at the end); the speedup is process CPU over process CPU. Plan quality: efficiency against the lower bound and speedup over packing only, new / base, and the new step time over the base step time on the same batches (and on how many of them the new plan is slower). Baseline $(jq -r .baseline_rev "$OUT"), mix ucf101+3%youcook2, M = 65536, G = 8, h100-dit1b."
    echo
    echo "| ranks | clips | new planner CPU | new process CPU (wall) | base process CPU (wall) | speedup | efficiency new / base | x_pack new / base | step time new / base | slower |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    jq -r '.scaling[] | "| \(.ranks) | \(.clips_per_batch) | \(.new.plan_cpu_ms_mean|round) | \(.new.process_cpu_ms_per_batch|round) (\(.new.plan_ms_mean|round)) | \(.base.process_cpu_ms_per_batch|round) (\(.base.plan_ms_mean|round)) | \(.planner_speedup_cpu*10|round/10)x | \(.new.efficiency*1000|round/1000) / \(.base.efficiency*1000|round/1000) | \(.new.speedup_packing_only*1000|round/1000) / \(.base.speedup_packing_only*1000|round/1000) | \(.same_batches.new_over_base_step_time*100000|round/100000) | \(.same_batches.batches_new_slower)/\(.same_batches.steps) |"' "$OUT"
  } >"$TABLE"
}
if [ "${TABLE_ONLY:-0}" = 1 ]; then  # rewrite scaling.md from an existing results.json
  write_table
  echo "wrote $TABLE"
  exit 0
fi

echo "== mixes: $STEPS batches of 256 clips on 64 ranks; new vs base ($base_rev)"
: >"$TMP/mixes.list"
for m in "${MIXES[@]}"; do
  e=$(compare "${m%%|*}" "${m#*|}" 64 256 "$STEPS")
  line "$e"
  echo "$e" >>"$TMP/mixes.list"
done

: >"$TMP/scaling.list"
if [ "$SCALING" = 1 ]; then
  echo "== scaling on ${MIXES[0]%%|*}: ranks x clips per batch; new vs base ($base_rev)"
  for ranks in 64 256 1024 4096 8192 16384; do
    for batch in 256 1024 4096 16384 32768 65536; do
      [ "$batch" = 32768 ] && [ "$ranks" != 8192 ] && continue
      # the baseline costs about 1 s per 2^26 clip-ranks: 1 batch where that is long
      steps=3
      [ $((ranks * batch)) -gt $((1 << 26)) ] && steps=1
      e=$(compare "${MIXES[0]%%|*}" "${MIXES[0]#*|}" "$ranks" "$batch" "$steps")
      line "$e"
      echo "$e" >>"$TMP/scaling.list"
    done
  done
fi

commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo true || echo false)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || echo unknown)
cat $(cat "$TMP/mixes.list") /dev/null | jq -s -c . >"$TMP/mixes.json"
cat $(cat "$TMP/scaling.list") /dev/null | jq -s -c . >"$TMP/scaling.json"
jq -n --arg commit "$commit" --argjson dirty "$dirty" --arg cpu "$cpu" --arg cores "$(nproc)" \
  --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" --arg base "$BASE_REV" \
  --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg steps "$STEPS" \
  --slurpfile mixes "$TMP/mixes.json" --slurpfile scaling "$TMP/scaling.json" '{
    benchmark: "tessera plan: Dynamic-CP planner vs static CP, this build vs a baseline build",
    commit: $commit, dirty: $dirty, date: $date, baseline_rev: $base,
    machine: {cpu: $cpu, cores: ($cores | tonumber), pinned_to_one_core: true,
              load_average_at_end: $load},
    setup: {tokens_per_second: 1800, max_seconds: 300, gpus_per_node: 8, mem_tokens: 65536,
            cost: "configs/cost/h100-dit1b.conf", seed: 1, steps_per_mix: ($steps | tonumber)},
    targets: {efficiency_min: 0.90, plan_ms_256_clips_64_ranks: 50,
              plan_ms_4096_clips_1024_ranks: 1000, plan_ms_32768_clips_8192_ranks: 1000,
              quality: "new step time <= base step time on the same batches"},
    mixes: $mixes[0], scaling: $scaling[0]}' >"$OUT"

if [ "$SCALING" = 1 ]; then
  write_table
  echo "wrote $TABLE"
fi
echo "wrote $OUT (commit ${commit:0:12}$([ "$dirty" = true ] && echo ', uncommitted changes'))"
