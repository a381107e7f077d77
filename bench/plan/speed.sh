#!/usr/bin/env bash
# bench/plan/speed.sh — planner time per batch in auto CP mode (not a test; issue 39): one
# batch of 32,768 clips (Charades videos with 5% ActivityNet videos: tokens = duration x
# 1800, clips capped at 300 s, M = 65,536 tokens, 8 GPUs a node, the h100-dit1b cost model)
# on 8,192 and 12,288 ranks, planned in the same run by
#   auto   this build, --cp-mode auto (the default: ring, Ulysses or hybrid per group)
#   ring   this build, --cp-mode ring (the ring-only planner)
#   old    9274c7d (the planner before CP modes; it refuses 12,288 ranks, not a power of two)
# each pinned to the cores CORES (taskset; default 0,1: auto mode plans its ring-only
# candidate on a second thread), ROUNDS rounds (default 2) in turn. Prints per build the
# planner's wall and CPU ms per batch (tessera plan --json: plan_ms, plan_cpu_ms) and the
# predicted step, and the ratios auto / ring and auto / old.
#   bench/plan/speed.sh                (builds 9274c7d in a temp worktree with ccache)
#   OLD_BIN=... ROUNDS=3 RANKS="8192" bench/plan/speed.sh
# Needs jq.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${TESSERA_BIN:-$ROOT/build/tools/tessera}
SHARED=${TESSERA_SHARED:-$ROOT/../shared}
ROUNDS=${ROUNDS:-2}
RANKS=${RANKS:-8192 12288}
OLD_REV=9274c7d
OLD_DIR=${OLD_DIR:-/tmp/old9274}
command -v jq >/dev/null || { echo "speed.sh: needs jq" >&2; exit 1; }
[ -x "$BIN" ] || { echo "speed.sh: no $BIN; build first" >&2; exit 1; }
OLD=${OLD_BIN:-$OLD_DIR/build/tools/tessera}
if [ ! -x "$OLD" ]; then
  echo "building $OLD_REV's planner in $OLD_DIR ..."
  [ -d "$OLD_DIR" ] || git -C "$ROOT" worktree add "$OLD_DIR" "$OLD_REV" >/dev/null
  cmake -S "$OLD_DIR" -B "$OLD_DIR/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_CUDA=OFF \
    -DTESSERA_MEDIA=OFF -DCMAKE_C_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build "$OLD_DIR/build" -j2 --target tessera >/dev/null
fi
PIN=()
command -v taskset >/dev/null && PIN=(taskset -c "${CORES:-0,1}")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
LEN=$SHARED/lengths
ARGS=(--lengths "$LEN/charades_videos.csv:0.95,$LEN/activitynet_captions_videos.csv:0.05"
      --tokens-per-second 1800 --max-seconds 300 --gpus-per-node 8 --mem-tokens 65536
      --cost "$ROOT/configs/cost/h100-dit1b.conf" --global-batch 32768 --seed 1)
# run BUILD RANKS: one batch; prints "wall_ms cpu_ms predicted_s" (or "- - -" if refused)
run() {
  local bin=$BIN extra=()
  case $1 in auto) extra=(--cp-mode auto) ;; ring) extra=(--cp-mode ring) ;; old) bin=$OLD ;; esac
  if "${PIN[@]}" "$bin" plan "${ARGS[@]}" "${extra[@]}" --ranks "$2" --json "$TMP/p.json" \
       >"$TMP/out" 2>"$TMP/err"; then
    jq -r '"\(.total.plan_ms_mean) \(.total.plan_cpu_ms_mean) \(.total.predicted_s)"' "$TMP/p.json"
  else
    echo "- - -"
  fi
}
printf "%-6s %-5s %-6s %12s %12s %12s\n" ranks round build plan_ms cpu_ms step_s
for n in $RANKS; do
  for r in $(seq "$ROUNDS"); do
    for b in auto ring old; do
      read -r ms cpu step < <(run "$b" "$n")
      printf "%-6s %-5s %-6s %12s %12s %12s\n" "$n" "$r" "$b" "$ms" "$cpu" "$step" | tee -a "$TMP/rows"
    done
  done
done
echo "means over the rounds, and ratios (auto over each):"
awk '$3 != "build" && $4 != "-" { k = $1 " " $3; w[k] += $4; c[k] += $5; s[k] = $6; m[k]++ }
  END {
    split("'"$RANKS"'", ns, " ")
    for (i in ns) { n = ns[i]; a = n " auto"; if (!m[a]) continue
      line = sprintf("%6d ranks: auto %.0f ms (CPU %.0f), predicted %s s", n, w[a] / m[a], c[a] / m[a], s[a])
      split("ring old", bs, " ")
      for (j = 1; j <= 2; j++) { k = n " " bs[j]
        if (m[k]) line = line sprintf("; %s %.0f ms (CPU %.0f), auto/%s %.2fx wall %.2fx CPU, predicted %s s",
                                       bs[j], w[k] / m[k], c[k] / m[k], bs[j], (w[a] / m[a]) / (w[k] / m[k]),
                                       (c[a] / m[a]) / (c[k] / m[k]), s[k])
        else line = line sprintf("; %s: refused (not a power of two)", bs[j]) }
      print line } }' "$TMP/rows"
