#!/usr/bin/env bash
# bench/plan/share.sh — planning once per job vs once per process, under mpirun (not a
# test). NP processes run the trainer's loop shape with plans for a virtual cluster
# (RANKS ranks, CLIPS clips per batch) and a fixed CPU "training" step of TRAIN_MS
# (bench_share.c); baseline: every process plans every batch (--planners 0), against 1
# and 2 planners taking turns and broadcasting. Prints one JSON line per setting and the
# ratios; writes bench/plan/share.json.
#   bench/plan/share.sh           (after tools/setup.sh; OpenMPI)
#   NP=4 RANKS=8192 CLIPS=32768 STEPS=6 TRAIN_MS=500 OUT=... bench/plan/share.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BENCH_BIN:-$ROOT/build/bench/bench_plan_share}
export TESSERA_SHARED=${TESSERA_SHARED:-$ROOT/../shared}
OUT=${OUT:-$ROOT/bench/plan/share.json}
NP=${NP:-4}; RANKS=${RANKS:-8192}; CLIPS=${CLIPS:-32768}; STEPS=${STEPS:-6}; TRAIN_MS=${TRAIN_MS:-500}
command -v jq >/dev/null || { echo "share.sh: needs jq" >&2; exit 1; }
[ -x "$BIN" ] || { echo "share.sh: no $BIN; build first" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$ROOT"
for p in 0 1 2; do
  mpirun --oversubscribe --bind-to none -np "$NP" "$BIN" --ranks "$RANKS" --clips "$CLIPS" \
    --steps "$STEPS" --planners "$p" --train-ms "$TRAIN_MS" | tail -1 | tee "$TMP/p$p.json"
done
jq -s --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" --arg cores "$(nproc)" \
  --arg commit "$(git rev-parse HEAD 2>/dev/null || echo unknown)" '{
  benchmark: "plan once per job (sched_share) vs every process planning, under mpirun",
  commit: $commit, cores: ($cores | tonumber), load_average_at_end: $load,
  baseline: "planners 0: every process plans every batch", runs: .,
  planner_cpu_ratio_1_vs_every: (.[1].planner_cpu_s_all_processes / .[0].planner_cpu_s_all_processes),
  wall_per_step_ratio_1_vs_every: (.[1].wall_per_step_s / .[0].wall_per_step_s),
  wall_per_step_ratio_2_vs_every: (.[2].wall_per_step_s / .[0].wall_per_step_s)}' \
  "$TMP/p0.json" "$TMP/p1.json" "$TMP/p2.json" >"$OUT"
jq -r '"planner CPU over all processes: 1 planner / every process = \(.planner_cpu_ratio_1_vs_every*1000|round/1000); wall per step: 1 planner / every = \(.wall_per_step_ratio_1_vs_every*1000|round/1000), 2 planners / every = \(.wall_per_step_ratio_2_vs_every*1000|round/1000)"' "$OUT"
echo "wrote $OUT"
