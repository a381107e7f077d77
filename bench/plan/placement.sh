#!/usr/bin/env bash
# bench/plan/placement.sh — contiguous chunks vs blockwise placement of masked clips, and
# Dynamic-CP vs static CP, in the planner's model (not a test; bench/plan/placement.c says
# how). A mix with minutes-long clips (half YouCook2 videos, up to 300 s, half UCF101
# clips) in Wan's 480p latent geometry (30 x 52 tokens a latent frame, 4 latent frames a
# second: 6,240 tokens/s), 200,000 tokens a rank, the 1.3B H100 cost file: 4 batches of 64
# clips on 64 ranks, and one batch of 8,192 clips on 8,192 ranks for the planner's time.
# First, every placement kind side by side (bench_plan_placement --kinds) on KINDS_CLIPS
# clips of the mix (default 64) per mask and group size 2, 4, 8, 16: work imbalance, K/V
# tokens received, CPU ms to make them, and metis over greedy (SIZES= skips the plans).
# Writes bench/plan/placement.json and prints one line per mask and size.
#   bench/plan/placement.sh      (after tools/setup.sh and a build)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BENCH_BIN:-$ROOT/build/bench/bench_plan_placement}
LEN=${TESSERA_SHARED:-$ROOT/../shared}/lengths
OUT=${OUT:-$ROOT/bench/plan/placement.json}
SIZES=${SIZES-"64:64:4 8192:8192:1"}
KINDS_CLIPS=${KINDS_CLIPS:-64}
[ -x "$BIN" ] || { echo "placement.sh: no $BIN; build first" >&2; exit 1; }
command -v jq >/dev/null || { echo "placement.sh: needs jq" >&2; exit 1; }
MIX="$LEN/youcook2_videos.csv:0.5,$LEN/ucf101_clips.csv:0.5"
TMP=$(mktemp) KTMP=$(mktemp)
trap 'rm -f "$TMP" "$KTMP"' EXIT
cd "$ROOT"
"$BIN" --mix "$MIX" --clips "$KINDS_CLIPS" --cost configs/cost/h100-dit1b.conf --kinds 1 |
  tee "$KTMP" | jq -r '
    def f(x; d): (x * d | round) / d | tostring;
    "\(.mask | . + " " * (16 - length)) k=\(.k | tostring | . + " " * (3 - length))" +
    ([.kinds | to_entries[] | " \(.key) \(f(.value.imbalance; 1000)) \(.value.kv_recv_tokens / 1e6 |
      f(.; 10))M \(.value.make_ms | round)ms"] | join(";")) +
    (if .metis_over_greedy then "; metis/greedy imbalance x\(f(.metis_over_greedy.imbalance; 1000))" +
      " recv x\(f(.metis_over_greedy.kv_recv_tokens; 1000)) time x\(.metis_over_greedy.make_ms | round)"
     else "" end)'
for size in $SIZES; do
  IFS=: read -r ranks clips batches <<<"$size"
  "$BIN" --mix "$MIX" --ranks "$ranks" --clips "$clips" --batches "$batches" \
    --cost configs/cost/h100-dit1b.conf | tee -a "$TMP" |
    jq -r '"\(.mask | . + " " * (16 - length)) N=\(.ranks) B=\(.clips) x\(.batches): " +
      "blockwise \(.blockwise.step_s | round) s vs contiguous \(.contiguous.step_s | round) s " +
      "(x\(.x_blockwise_over_contiguous * 100 | round / 100)), imbalance " +
      "\(.blockwise.imbalance * 1000 | round / 1000) vs \(.contiguous.imbalance * 1000 | round / 1000); " +
      "blockwise exchange \(.blockwise.exchange_s * 100 | round / 100) s (ring form " +
      "\(.blockwise.ring_form_exchange_s * 100 | round / 100) s); " +
      "Dynamic-CP over static x\(.x_dynamic_over_static_blockwise * 100 | round / 100) " +
      "(contiguous x\(.x_dynamic_over_static_contiguous * 100 | round / 100)); plan CPU ms " +
      "even \(.even.plan_ms | round), contiguous \(.contiguous.plan_ms | round), blockwise \(.blockwise.plan_ms | round)"'
done
jq -s --arg commit "$(git rev-parse HEAD 2>/dev/null || echo unknown)" '{
  benchmark: "contiguous chunks vs blockwise placement of masked clips (bench/plan/placement.c)",
  commit: $commit,
  setup: {mix: "youcook2_videos.csv:0.5,ucf101_clips.csv:0.5", tokens_per_second: 6240,
          max_seconds: 300, frame: "30x52", gpus_per_node: 8, mem_tokens: 200000,
          cost: "configs/cost/h100-dit1b.conf", seed: 1,
          masks: {block_causal: "chunk 3", block_causal_w4: "chunk 3, window 4",
                  window: "tiles 4x6x8, wt 3, wh 1, ww 1"}},
  runs: .[0], kinds: .[1]}' <(jq -s . "$TMP") <(jq -s . "$KTMP") >"$OUT"
echo "wrote $OUT"
