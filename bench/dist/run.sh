#!/usr/bin/env bash
# bench/dist/run.sh — does the planner predict multi-rank step times? (not a test)
#
# 1. `tessera calibrate` fits the cost model to this machine (one rank: compute and the
#    optimizer step; two ranks under mpirun: also ring latency/bandwidth and all-reduce);
# 2. `tessera train` runs a few steps on 1 and 2 ranks with Dynamic-CP plans and with
#    static-CP plans (--plan dynamic|static) on a store of clips of 1 to 8 s
#    (320 to 2560 tokens; at 2 ranks mem_tokens = 2048, so the longest clips must be
#    split across both ranks);
# 3. per run: measured step time (metrics step_s, mean over the steps after the first)
#    beside the planner's prediction for the same plans (metrics predicted_s).
# Target: prediction within 15% of measurement. Every rank runs one thread
# (OMP_NUM_THREADS=1), so 2 ranks use the machine's 2 cores without oversubscription.
# Output: one line per run and bench/dist/results.json.
#   bench/dist/run.sh        (after tools/setup.sh)
#   bench/dist/run.sh --make-store DIR    only make the store (for a machine without
#                                         ffmpeg: tools/gpu_prepare.sh carries it)
# On a GPU machine (one rank per GPU: with fewer GPUs than ranks the ranks would share one
# and the planner's per-rank costs do not hold, so RANKS lists what fits):
#   STORE=.carry/dist-store BACKEND=cuda RANKS="1 2" CONFIG=configs/model/dit-b.conf \
#     SETS="--set train.precision=bf16" OUT_JSON=... bench/dist/run.sh
# Env: STORE (skip making one), BACKEND (cpu), COMM (auto), CONFIG (tiny), SETS (extra
# --set arguments for train and calibrate), RANKS ("1 2"), STEPS (7), OUT_JSON.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=${TESSERA_BIN:-$ROOT/build/tools/tessera}
OUT_JSON=${OUT_JSON:-$ROOT/bench/dist/results.json}
STEPS=${STEPS:-7}
BACKEND=${BACKEND:-cpu}
COMM=${COMM:-auto}
CONFIG=${CONFIG:-$ROOT/configs/model/tiny.conf}
RANKS=${RANKS:-1 2}
read -r -a XSETS <<<"${SETS:-}"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
for c in jq mpirun; do command -v $c >/dev/null || { echo "bench: needs $c (tools/setup.sh)" >&2; exit 1; }; done
[ -x "$T" ] || { echo "bench: no $T; run tools/setup.sh" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench-dist.XXXXXX")
trap 'rm -rf "$W"' EXIT
MPI=(mpirun --oversubscribe --bind-to none)

make_store() {  # the store: 8 clips of 1..8 s, 320..2560 tokens (patch 1x4x4)
  command -v ffmpeg >/dev/null || { echo "bench: needs ffmpeg to make the store (or set STORE)" >&2; exit 1; }
  echo "bench: making and ingesting 8 clips of 1..8 s" >&2
  for s in 1 2 3 4 5 6 7 8; do
    ffmpeg -nostdin -v error -y -f lavfi -i "testsrc2=s=160x128:r=12:d=$s" "$W/c$s.mp4"
  done
  rm -rf "$1"
  "$T" ingest "$W"/c*.mp4 --out "$1" --fps 4 --short-side 32 --patch 1x4x4 --quiet
}
if [ "${1:-}" = --make-store ]; then make_store "${2:?--make-store DIR}"; echo "store: $2"; exit 0; fi
if [ -n "${STORE:-}" ]; then cp -r "$STORE" "$W/store"; else make_store "$W/store"; fi
CONF=(--config "$CONFIG" --set model.pt=1 --set model.ph=4 --set model.pw=4
      --set train.global_batch=8 --set train.warmup=2 --set train.ckpt_every=1000 --set train.log_every=1
      "${XSETS[@]}" --backend "$BACKEND" --comm "$COMM")
CAL=(--min-tokens 64 --max-tokens 4096 --points 6 --reps 3 --base "$ROOT/configs/cost/h100-dit1b.conf")

for n in $RANKS; do
  echo "bench: calibrating on $n rank(s)" >&2
  launch=("$T"); [ "$n" -gt 1 ] && launch=("${MPI[@]}" -np "$n" "$T")
  "${launch[@]}" calibrate "${CONF[@]}" "${CAL[@]}" --out "$W/cost$n.conf" >"$W/cal$n.log" 2>&1 \
    || { echo "bench: calibrate on $n rank(s) failed:" >&2; tail -5 "$W/cal$n.log" >&2; exit 1; }
  grep -E "^calibrate: a" "$W/cal$n.log" >&2 || true
done

runs=()
train() {  # ranks plan mem
  local n=$1 kind=$2 mem=$3 dir="$W/run-$1-$2"
  local launch=("$T")
  [ "$n" -gt 1 ] && launch=("${MPI[@]}" -np "$n" "$T")
  "${launch[@]}" train "${CONF[@]}" --data "$W/store" --out "$dir" --steps "$STEPS" --plan "$kind" \
    --cost "$W/cost$n.conf" --gpus-per-node "$n" --set train.mem_tokens="$mem" >"$dir.log" 2>&1 \
    || { echo "bench: training on $n ranks ($kind) failed:" >&2; tail -5 "$dir.log" >&2; exit 1; }
  jq -s --arg kind "$kind" --argjson n "$n" --argjson mem "$mem" '
    (.[1:]) as $s | {ranks: $n, plan: $kind, mem_tokens: $mem, steps: ($s | length),
     measured_s: ($s | map(.step_s) | add / length), predicted_s: ($s | map(.predicted_s) | add / length),
     plans_used: ($s | map(.plan) | unique)}
    | .error = ((.predicted_s - .measured_s) / .measured_s)' "$dir/metrics.jsonl" >"$dir.json"
  runs+=("$dir.json")
  jq -r '"\(.ranks) rank(s), \(.plan) plans (\(.plans_used | join(","))): measured \(.measured_s * 1000 | floor) ms/step, predicted \(.predicted_s * 1000 | floor) ms/step, error \(.error * 100 | . * 10 | round / 10)%"' "$dir.json"
}
for n in $RANKS; do  # one rank holds whole clips; more must split the longest (mem 2048)
  mem=4096; [ "$n" -gt 1 ] && mem=2048
  train "$n" dynamic $mem
  train "$n" static $mem
done

CPU=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || cat "$ROOT/.carry/commit" 2>/dev/null || echo unknown)
costs=$(for n in $RANKS; do jq -Rs --arg n "$n" '{($n + "_ranks"): .}' "$W/cost$n.conf"; done | jq -s add)
jq -s --arg cpu "$CPU" --arg gpu "$GPU" --arg backend "$BACKEND" --arg commit "$COMMIT" \
  --argjson nproc "$(nproc)" --arg config "$(basename "$CONFIG") ${SETS:-}" --argjson costs "$costs" '
  {benchmark: "dist", machine: {nproc: $nproc, cpu: $cpu, gpu: $gpu}, backend: $backend,
   commit: $commit, threads_per_rank: 1, store: "8 clips of 1..8 s, 320..2560 tokens (patch 1x4x4)",
   model: ($config + " (patch 1x4x4)"), global_batch: 8, cost_files: $costs,
   runs: ., worst_abs_error: (map(.error | fabs) | max), target_abs_error: 0.15}' "${runs[@]}" >"$OUT_JSON"
jq -r '"dist bench: worst |prediction error| \(.worst_abs_error * 100 | . * 10 | round / 10)% (target 15%) -> '"$OUT_JSON"'"' "$OUT_JSON"
