#!/usr/bin/env bash
# bench/train/zero.sh — what ZeRO costs on the CPU (issue 29's figure; not a test): the step
# time and the per-rank memory of every train.zero stage against stage 0 (the baseline) at
# each world size, in the same run.
#
#   bench/train/zero.sh          (after tools/setup.sh; needs ffmpeg, mpirun and jq)
#   RANKS="2 4" STAGES="0 1 2 3" STEPS=12 REPEAT=3 MEM_TOKENS=700 HIDDEN=64 DEPTH=2 \
#   OUT=bench/train/results-zero.json bench/train/zero.sh
#
# The runs: `mpirun -np N tessera train` of the tiny model (patch 1x4x4, HIDDEN wide, DEPTH
# blocks, 2 heads) on tests/dist/ranks_store.sh's four clips (320 to 1280 tokens, all four a step),
# one thread a rank, MEM_TOKENS a rank (700: the longer clips split across CP groups).
# Step time: the median `step_s` of steps 3 .. STEPS (metrics.jsonl), the least of REPEAT
# rounds (rounds interleave the stages, so that other work on the machine spreads over all
# of them). Memory: the backend's allocation peak per rank the trainer logs ("backend
# allocations peaked at"), with the memory model's count beside it. Output: one line per
# world size and stage, with the ratios to stage 0 at that world size, and OUT (machine,
# commit, every figure).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
T=$BUILD/tools/tessera
RANKS=${RANKS:-2 4}
STAGES=${STAGES:-0 1 2 3}
STEPS=${STEPS:-12}
REPEAT=${REPEAT:-3}
MEM_TOKENS=${MEM_TOKENS:-700}
HIDDEN=${HIDDEN:-64}
DEPTH=${DEPTH:-2}
OUT=${OUT:-$ROOT/bench/train/results-zero.json}
for c in ffmpeg mpirun jq; do
  command -v $c >/dev/null || { echo "zero.sh: needs $c (tools/setup.sh)" >&2; exit 1; }
done
[ -x "$T" ] || cmake --build "$BUILD" --target tessera -j"$(nproc)" >/dev/null
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench-zero.XXXXXX")
trap 'rm -rf "$W"' EXIT

SRC=$ROOT
. "$ROOT/tests/dist/ranks_store.sh"
ranks_store "$W"
CONF=("${RANKS_MODEL[@]}" --set model.hidden="$HIDDEN" --set model.depth="$DEPTH" --set train.warmup=2 --set train.lr=1e-3
      --set train.log_every=1 --set train.steps="$STEPS" --set train.ckpt_every=100000
      --set train.mem_tokens="$MEM_TOKENS")

# run N Z ROUND: one training run; prints "median_step_s peak_bytes model_bytes"
run() {
  local dir=$W/n$1-z$2-r$3
  mpirun --oversubscribe -np "$1" "$T" train "${CONF[@]}" --set train.zero="$2" --out "$dir" \
    >"$dir.log" 2>&1 || { tail -5 "$dir.log" >&2; echo "zero.sh: run n=$1 zero=$2 failed" >&2; exit 1; }
  local med peak model
  med=$(jq -r "select(.step >= 3) | .step_s" "$dir/metrics.jsonl" | sort -g |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  peak=$(sed -n 's/.*allocations peaked at [0-9.]* GiB (\([0-9]*\) bytes).*/\1/p' "$dir.log" | head -1)
  model=$(sed -n 's/.*the model counts [0-9.]* GiB (\([0-9]*\) bytes,.*/\1/p' "$dir.log" | head -1)
  echo "$med $peak $model"
}

declare -A best peak model
for r in $(seq "$REPEAT"); do
  for n in $RANKS; do
    for z in $STAGES; do
      read -r s p m < <(run "$n" "$z" "$r")
      k=$n-$z
      if [ -z "${best[$k]:-}" ] || awk -v a="$s" -v b="${best[$k]}" 'BEGIN { exit !(a < b) }'; then
        best[$k]=$s
      fi
      peak[$k]=$p model[$k]=$m
    done
  done
done

rows=()
for n in $RANKS; do
  for z in $STAGES; do
    k=$n-$z b=$n-${STAGES%% *}
    line=$(awk -v n="$n" -v z="$z" -v s="${best[$k]}" -v s0="${best[$b]}" -v p="${peak[$k]}" \
             -v p0="${peak[$b]}" -v m="${model[$k]}" 'BEGIN {
      printf "%d ranks, zero %d: step %.4f s (%.3fx of zero 0), peak %d bytes a rank (%.3fx; model %d)\n",
             n, z, s, s / s0, p, p / p0, m }')
    echo "$line"
    rows+=("$(jq -cn --argjson n "$n" --argjson z "$z" --argjson s "${best[$k]}" --argjson s0 "${best[$b]}" \
                   --argjson p "${peak[$k]}" --argjson p0 "${peak[$b]}" --argjson m "${model[$k]}" \
                   '{ranks: $n, zero: $z, step_s: $s, step_vs_zero0: ($s / $s0), peak_bytes: $p,
                     peak_vs_zero0: ($p / $p0), model_bytes: $m}')")
  done
done
printf '%s\n' "${rows[@]}" | jq -s --arg commit "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
  --argjson cores "$(nproc)" --argjson steps "$STEPS" --argjson repeat "$REPEAT" \
  --argjson mem "$MEM_TOKENS" --argjson hidden "$HIDDEN" --argjson depth "$DEPTH" \
  '{bench: "zero", baseline: "train.zero = 0 at the same world size", commit: $commit,
    cpu: $cpu, cores: $cores, steps: $steps, repeat: $repeat, mem_tokens: $mem,
    hidden: $hidden, depth: $depth, runs: .}' >"$OUT"
echo "zero.sh: wrote $OUT"
