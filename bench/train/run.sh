#!/usr/bin/env bash
# bench/train/run.sh — training-step throughput of the C CPU backend against the PyTorch
# reference, on the same model, batch and threads in the same run (not a test).
#
#   bench/train/run.sh                 (after tools/setup.sh; builds bench_train_step if needed)
#   THREADS=2 WARMUP=2 STEPS=10 REPEAT=3 CONFIG=configs/model/tiny.conf \
#   ONE_CLIP_TOKENS=65536 OUT=bench/train/results.json TARGET=1.0 bench/train/run.sh
#   THREADS=2 WARMUP=1 STEPS=3 REPEAT=3 ONE_CLIP_TOKENS=0 CONFIG=configs/model/dit-s.conf \
#   OUT=bench/train/results-dit-s.json TARGET=1.2 bench/train/run.sh       (issue 17's dit-s)
#
# 1. build/bench/bench_train_step builds the config's model (dit_init) and a packed batch of
#    8 clips of mixed grids (4092 tokens with the tiny model's 2x16x16 patch) and dumps
#    both (--dump); tools/reference/bench.py loads the dump, so PyTorch trains the very
#    same weights on the very same batch (its losses, printed step by step, match the C
#    ones to ~1e-7: the check that both run the same computation).
# 2. A step = zero grad, forward with the loss, backward, AdamW (config lr, betas, eps,
#    weight decay); C: kernels adamw_update, PyTorch: torch.optim.AdamW, float32. WARMUP
#    untimed steps, then STEPS timed; the median step gives tokens/s. Both programs run
#    REPEAT times, interleaved (C, PyTorch, C, ...), and each side's best median counts:
#    on a shared machine the least disturbed run is the measurement.
# 3. Threads, the same on both sides: OMP_NUM_THREADS=THREADS (the C kernels' OpenMP,
#    torch's intra-op pool, torch.set_num_threads(THREADS) too), OPENBLAS_NUM_THREADS=
#    THREADS (both sides' GEMMs are OpenBLAS, Debian's pthread build), and
#    OMP_WAIT_POLICY=passive: OpenBLAS's pthreads and libgomp's workers are two pools on
#    the same cores, and libgomp's default spin-wait after every parallel region steals
#    the cores from the GEMM that follows (measured on 2 cores: PyTorch 0.6 s per step
#    with the default policy, 0.28-0.48 s with passive; the C side within the noise;
#    docs/train.md "Benchmark").
# 4. Peak memory: one step of a single clip of ONE_CLIP_TOKENS tokens (16x64x64 for
#    65536) under /usr/bin/time -v (maximum resident set size), and the model's
#    activation bytes (dit_activation_bytes). Only the C side: the reference's per-clip
#    attention would materialise a 64k x 64k score matrix per head (64 GiB).
#    ONE_CLIP_TOKENS=0 skips it.
# 5. The C step again with bf16 activations (--set train.precision=bf16: the cpu-bf16
#    kernels, fp32 weights and AdamW), REPEAT times beside the fp32 runs, reported as its
#    tokens/s and its ratio to C fp32 (issue 10: the reference a GPU bf16 backend is held
#    against; on the CPU it converts every [act] tensor, so it is not expected to be faster).
# 6. PROFILE=1: after the rounds, one more C fp32 run with --profile (kernels/profile.h:
#    time per kernel class and entry) is written beside OUT as *-profile.json (and printed);
#    it is not one of the timed runs (the timers sync around every entry).
# Output: one summary line; bench/train/results.json (machine, commit, config, both sides'
# timings, ratio, peak memory, C bf16). Target: ratio C / PyTorch >= TARGET (issue 17:
# 1.0 for tiny, 1.2 for dit-s; recorded as target_ratio_min).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BIN=$BUILD/bench/bench_train_step
CONFIG=${CONFIG:-$ROOT/configs/model/tiny.conf}
THREADS=${THREADS:-$(nproc)}
WARMUP=${WARMUP:-2}
STEPS=${STEPS:-10}
REPEAT=${REPEAT:-3}
ONE_CLIP_TOKENS=${ONE_CLIP_TOKENS:-65536}
OUT=${OUT:-$ROOT/bench/train/results.json}
TARGET=${TARGET:-1.0}
PROFILE=${PROFILE:-0}
for c in jq /usr/bin/time; do
  command -v "$c" >/dev/null || { echo "run.sh: needs $c (tools/setup.sh)" >&2; exit 1; }
done
# Debian's python3-torch is /usr/bin/python3's; a python3 earlier on PATH may lack it.
PY=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import torch' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "run.sh: no python3 with torch (tools/setup.sh installs python3-torch)" >&2; exit 1; }
if [ ! -d "$BUILD" ]; then "$ROOT/tools/setup.sh"; fi
cmake --build "$BUILD" --target bench_train_step -j"$(nproc)" >/dev/null

export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench-train.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
COMMON=(--warmup "$WARMUP" --steps "$STEPS")

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
"$BIN" --config "$CONFIG" --warmup 0 --steps 1 --dump "$TMP/batch.safetensors" >/dev/null
for i in $(seq "$REPEAT"); do
  "$BIN" --config "$CONFIG" "${COMMON[@]}" --json "$TMP/c$i.json" >"$TMP/c$i.log"
  "$BIN" --config "$CONFIG" "${COMMON[@]}" --set train.precision=bf16 --json "$TMP/b$i.json" >"$TMP/b$i.log"
  "$PY" "$ROOT/tools/reference/bench.py" "$TMP/batch.safetensors" --threads "$THREADS" \
    "${COMMON[@]}" --json "$TMP/py$i.json" >"$TMP/py$i.log"
  rate() { grep 'tokens/s' "$1" | tail -n1 | sed 's/.*: //'; }
  echo "run.sh: round $i/$REPEAT: C $(rate "$TMP/c$i.log"), C bf16 $(rate "$TMP/b$i.log"), PyTorch $(rate "$TMP/py$i.log")" >&2
done
best() { jq -s 'min_by(.median_s)' "$@"; }
best "$TMP"/c[0-9]*.json >"$TMP/c.json"
best "$TMP"/py[0-9]*.json >"$TMP/py.json"
best "$TMP"/b[0-9]*.json >"$TMP/b.json"

# Same computation on both sides: the largest relative difference of the step losses.
LOSS_DIFF=$(jq -s '[.[0].losses, .[1].losses] | transpose
  | map(((.[0] - .[1]) | fabs) / (.[1] | fabs)) | max' "$TMP/c.json" "$TMP/py.json")

echo '{}' >"$TMP/one.json"
RSS_KB=null
if [ "$ONE_CLIP_TOKENS" -gt 0 ]; then
  echo "run.sh: one step of one $ONE_CLIP_TOKENS-token clip (peak memory; minutes on 2 cores)" >&2
  /usr/bin/time -v "$BIN" --config "$CONFIG" --one-clip-tokens "$ONE_CLIP_TOKENS" --warmup 0 \
    --steps 1 --json "$TMP/one.json" >"$TMP/one.log" 2>&1 || { cat "$TMP/one.log" >&2; exit 1; }
  RSS_KB=$(awk -F: '/Maximum resident set size/ { gsub(/ /, "", $2); print $2 }' "$TMP/one.log")
fi

commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo true || echo false)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || echo unknown)
jq -n --slurpfile c "$TMP/c.json" --slurpfile py "$TMP/py.json" --slurpfile one "$TMP/one.json" \
  --slurpfile b "$TMP/b.json" \
  --arg commit "$commit" --argjson dirty "$dirty" --arg cpu "$cpu" --argjson cores "$(nproc)" \
  --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg config "${CONFIG#"$ROOT"/}" \
  --argjson threads "$THREADS" --argjson repeat "$REPEAT" --argjson rss "$RSS_KB" \
  --argjson loss_diff "$LOSS_DIFF" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
  --arg load_start "$LOAD_START" --argjson target "$TARGET" '{
    benchmark: "training step: tessera C CPU backend vs PyTorch reference (float32)",
    commit: $commit, dirty: $dirty, date: $date,
    machine: {cpu: $cpu, nproc: $cores, loadavg_at_start: $load_start, loadavg_at_end: $load},
    config: $config, threads: $threads,
    env: {OMP_NUM_THREADS: $threads, OPENBLAS_NUM_THREADS: $threads, OMP_WAIT_POLICY: "passive"},
    step: "zero grad + forward + loss + backward + AdamW; no clipping, EMA or schedule",
    batch: {clips: $c[0].clips, tokens: $c[0].tokens},
    repeat: $repeat, warmup: $c[0].warmup, steps: $c[0].steps,
    c: ($c[0] | {tokens_per_s, median_s, mean_s, min_s, step_s}),
    pytorch: ($py[0] | {torch, tokens_per_s, median_s, mean_s, min_s, step_s,
                        attention: "per-clip matmul + softmax + matmul (torch 1.13 has no SDPA)"}),
    ratio_c_over_pytorch: ($c[0].tokens_per_s / $py[0].tokens_per_s),
    c_bf16: ($b[0] | {backend, tokens_per_s, median_s, mean_s, min_s, step_s}),
    ratio_c_bf16_over_c_fp32: ($b[0].tokens_per_s / $c[0].tokens_per_s),
    max_loss_rel_diff: $loss_diff,
    one_clip: (if $rss == null then null else ($one[0] | {tokens, grid, recompute, step_s: .median_s,
               activation_bytes, peak_rss_kb: $rss}) end),
    target_ratio_min: $target}' >"$OUT"
jq -r '"train step (\(.config), \(.batch.clips) clips, \(.batch.tokens) tokens, \(.threads) threads): C \(.c.tokens_per_s | round) tokens/s, PyTorch \(.pytorch.tokens_per_s | round) tokens/s, ratio C/PyTorch \(.ratio_c_over_pytorch * 100 | round / 100); C bf16 \(.c_bf16.tokens_per_s | round) tokens/s (\(.ratio_c_bf16_over_c_fp32 * 100 | round / 100) x C fp32)" + (if .one_clip then "; \(.one_clip.tokens)-token clip step: peak RSS \(.one_clip.peak_rss_kb / 1024 | round) MiB (activations \(.one_clip.activation_bytes / 1048576 | round) MiB), \(.one_clip.step_s | round) s" else "" end)' "$OUT"
if [ "$PROFILE" = 1 ]; then
  "$BIN" --config "$CONFIG" "${COMMON[@]}" --profile --json "$TMP/prof.json" >"$TMP/prof.log"
  sed -n '/^profile/,/^bench_train_step: backend memory/p' "$TMP/prof.log" | sed '$d'
  jq '{config, threads, tokens, clips, median_s, tokens_per_s, profile}' "$TMP/prof.json" \
    >"${OUT%.json}-profile.json"
  echo "wrote ${OUT%.json}-profile.json"
fi
echo "wrote $OUT (commit ${commit:0:12}$([ "$dirty" = true ] && echo ', uncommitted changes'))"
