#!/usr/bin/env bash
# bench/train/lora.sh — a LoRA training step against full fine-tuning of the same model on
# the same batch, same backend and threads, in the same run (issue 28's figure; not a test).
#
#   bench/train/lora.sh          (after tools/setup.sh; builds bench_train_step if needed)
#   THREADS=2 WARMUP=1 STEPS=5 REPEAT=3 CONFIG=configs/model/dit-s.conf RANK=16 \
#   TARGETS=to_q,to_k,to_v,to_out.0,ffn.net.0.proj,ffn.net.2 PRECISION=fp32 BACKEND=cpu \
#   OUT=bench/train/results-lora.json bench/train/lora.sh
#
# The sides are bench_train_step (bench/train/bench_step.c) on its default batch (8 clips
# of mixed grids): full fine-tuning (every weight: gradients, AdamW), LoRA (lora.rank = RANK
# on TARGETS: the base frozen, no base gradient computed, AdamW over the adapters) and the
# same LoRA on the per-adapter path (TESSERA_LORA_PER_ADAPTER=1: four GEMMs an adapter,
# without model/lora.c's groups and merged weights; PER_ADAPTER=0 leaves it out).
# REPEAT rounds, interleaved (full, LoRA, per-adapter, full, ...), each side's best median
# counts. cpu_s_min: the least CPU seconds (user + system, /usr/bin/time) of a side's runs,
# the whole process (setup, warm-up and timed steps): on a machine that other work shares,
# steadier than the wall-clock medians (what other processes take is not in it). Memory:
# the backend's allocation peak of each (bench_train_step's backend_peak_bytes; on the CPU
# the allocations through kb->alloc, on CUDA the arena's use) and the process's peak RSS.
# Output: one summary line and OUT (machine, commit, both sides, the ratios full / LoRA).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BIN=$BUILD/bench/bench_train_step
CONFIG=${CONFIG:-$ROOT/configs/model/dit-s.conf}
THREADS=${THREADS:-$(nproc)}
WARMUP=${WARMUP:-1}
STEPS=${STEPS:-5}
REPEAT=${REPEAT:-3}
RANK=${RANK:-16}
TARGETS=${TARGETS:-to_q,to_k,to_v,to_out.0,ffn.net.0.proj,ffn.net.2}
PRECISION=${PRECISION:-fp32}
BACKEND=${BACKEND:-cpu}
OUT=${OUT:-$ROOT/bench/train/results-lora.json}
PER_ADAPTER=${PER_ADAPTER:-1}
command -v jq >/dev/null || { echo "lora.sh: needs jq (tools/setup.sh)" >&2; exit 1; }
[ -x "$BIN" ] || cmake --build "$BUILD" --target bench_train_step -j"$(nproc)" >/dev/null

export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench-lora.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
A=(--config "$CONFIG" --backend "$BACKEND" --set train.precision="$PRECISION" --warmup "$WARMUP"
   --steps "$STEPS")
L=(--set lora.rank="$RANK" --set lora.targets="$TARGETS")
rate() { grep 'tokens/s' "$1" | tail -n1 | sed 's/.*: //'; }
rss() { awk -F: '/Maximum resident set size/ { gsub(/ /, "", $2); print $2 }' "$1"; }
cpu() { awk -F: '/(User|System) time \(seconds\)/ { s += $2 } END { print s }' "$1"; }
for i in $(seq "$REPEAT"); do
  /usr/bin/time -v "$BIN" "${A[@]}" --json "$TMP/f$i.json" >"$TMP/f$i.log" 2>&1
  /usr/bin/time -v "$BIN" "${A[@]}" "${L[@]}" --json "$TMP/l$i.json" >"$TMP/l$i.log" 2>&1
  sides="f l"
  if [ "$PER_ADAPTER" = 1 ]; then
    TESSERA_LORA_PER_ADAPTER=1 /usr/bin/time -v "$BIN" "${A[@]}" "${L[@]}" --json "$TMP/p$i.json" \
      >"$TMP/p$i.log" 2>&1
    sides="f l p"
  fi
  for s in $sides; do
    jq --argjson rss "$(rss "$TMP/$s$i.log")" --argjson cpu "$(cpu "$TMP/$s$i.log")" \
      '. + {peak_rss_kb: $rss, cpu_s: $cpu}' "$TMP/$s$i.json" >"$TMP/$s$i.j"
  done
  echo "lora.sh: round $i/$REPEAT: full $(rate "$TMP/f$i.log"), LoRA $(rate "$TMP/l$i.log")$(
    [ "$PER_ADAPTER" = 1 ] && echo ", per-adapter $(rate "$TMP/p$i.log")")" >&2
done
best() { jq -s 'min_by(.median_s) + {cpu_s_min: (map(.cpu_s) | min)}' "$@"; }
best "$TMP"/f[0-9]*.j >"$TMP/f.json"
best "$TMP"/l[0-9]*.j >"$TMP/l.json"
if [ "$PER_ADAPTER" = 1 ]; then best "$TMP"/p[0-9]*.j >"$TMP/p.json"; else echo null >"$TMP/p.json"; fi

commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo true || echo false)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || echo unknown)
jq -n --slurpfile f "$TMP/f.json" --slurpfile l "$TMP/l.json" --slurpfile p "$TMP/p.json" \
  --arg commit "$commit" \
  --argjson dirty "$dirty" --arg cpu "$cpu" --argjson cores "$(nproc)" \
  --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg config "${CONFIG#"$ROOT"/}" \
  --argjson threads "$THREADS" --argjson repeat "$REPEAT" --arg load_start "$LOAD_START" \
  --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" '{
    benchmark: "training step: LoRA (frozen base, adapters trained) vs full fine-tuning, same model and batch",
    commit: $commit, dirty: $dirty, date: $date,
    machine: {cpu: $cpu, nproc: $cores, loadavg_at_start: $load_start, loadavg_at_end: $load},
    config: $config, threads: $threads, repeat: $repeat, backend: $f[0].backend,
    precision: $f[0].precision, batch: {clips: $f[0].clips, tokens: $f[0].tokens},
    full: ($f[0] | {params, median_s, min_s, tokens_per_s, backend_peak_bytes, peak_rss_kb,
                    cpu_s_min}),
    lora: ($l[0] | {lora_rank, lora_targets, trained_params, median_s, min_s, tokens_per_s,
                    backend_peak_bytes, peak_rss_kb, cpu_s_min}),
    lora_per_adapter: (if $p[0] == null then null else ($p[0] | {median_s, min_s, tokens_per_s,
                       backend_peak_bytes, peak_rss_kb, cpu_s_min}) end),
    speedup_lora_over_full: ($f[0].median_s / $l[0].median_s),
    speedup_lora_over_per_adapter: (if $p[0] == null then null
                                    else ($p[0].median_s / $l[0].median_s) end),
    backend_peak_ratio_lora_over_full: ($l[0].backend_peak_bytes / $f[0].backend_peak_bytes)}' >"$OUT"
jq -r '"LoRA vs full fine-tuning (\(.config), \(.backend) \(.precision), \(.batch.tokens) tokens, \(.threads) threads): full \(.full.median_s * 1000 | round) ms, LoRA r=\(.lora.lora_rank) \(.lora.median_s * 1000 | round) ms: \(.speedup_lora_over_full * 100 | round / 100)x; trained parameters \(.full.params) -> \(.lora.trained_params); backend peak \(.full.backend_peak_bytes / 1048576 | round) -> \(.lora.backend_peak_bytes / 1048576 | round) MiB\(if .lora_per_adapter == null then "" else "; per-adapter path \(.lora_per_adapter.median_s * 1000 | round) ms (LoRA \(.speedup_lora_over_per_adapter * 100 | round / 100)x faster)" end); CPU seconds of the best run: full \(.full.cpu_s_min), LoRA \(.lora.cpu_s_min)\(if .lora_per_adapter == null then "" else ", per-adapter \(.lora_per_adapter.cpu_s_min)" end)"' "$OUT"
echo "wrote $OUT (commit ${commit:0:12}$([ "$dirty" = true ] && echo ', uncommitted changes'))"
