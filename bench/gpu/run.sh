#!/usr/bin/env bash
# bench/gpu/run.sh — tessera's CUDA training step against the PyTorch reference on the same
# GPU, model, weights and packed batch, in the same run (issue 11; not a test).
#
#   bench/gpu/run.sh                      (on the GPU machine; tools/gpu_lease.py runs it
#                                          with BUILD_DIR and OUT=$OUT/STEP, docs/gpu.md)
#   CASES=b-16x4096,1b-4x4096 WARMUP=3 STEPS=10 OUT=bench/gpu BUILD_DIR=build-gpu bench/gpu/run.sh
#
# Cases (name: config, clips as bench_train_step --clips):
#   b-16x4096   dit-b   16 x 4,096 tokens
#   b-64x1024   dit-b   64 x 1,024
#   b-1x65536   dit-b   one 65,536-token clip
#   b-mixed     dit-b   32768,16384,8192,4096,2048,1024,2x512 (65,536 tokens)
#   1b-4x4096   dit-1b  4 x 4,096
#   1b-1x16384  dit-1b  one 16,384-token clip
#   1b-1x65536  dit-1b  one 65,536-token clip, recomputation on (RECOMPUTE_1B_LONG)
# dit-1b.conf has model.recompute = 1; RECOMPUTE_1B (default 0, as the earlier PyTorch figures
# in docs/gpu.md) overrides it with --set on the tessera side for 1b-4x4096 and
# 1b-1x16384, RECOMPUTE_1B_LONG (default 1) for 1b-1x65536, and the PyTorch side follows the
# dumped config: torch.utils.checkpoint per block when 1 (both re-run whole blocks); when 2
# (tessera recomputes only its cheap token-local layers) no checkpoint, since torch.compile's
# partitioner already recomputes such pointwise ops in its backward by itself.
#
# Per case:
# 1. tessera: $BUILD_DIR/bench/bench_train_step --backend cuda --set train.precision=bf16
#    --clips SPEC --dump FILE --json FILE: dumps the config, its initial weights and the
#    packed batch before its first step, then WARMUP untimed and STEPS timed steps (median).
# 2. PyTorch: tools/reference/bench_gpu.py FILE (bf16 autocast over fp32 weights, SDPA with
#    cuDNN first, runs of equal-length clips batched, fused AdamW, torch.compile per block;
#    its docstring says why), WARMUP + STEPS steps on the same weights and batch.
# 3. Peak memory: nvidia-smi memory.used sampled every 100 ms during each side's process,
#    minus the value before it (both sides: context, workspace and caching included), and
#    PyTorch's torch.cuda.max_memory_allocated / max_memory_reserved.
# Once per run: the bf16 GEMM peak (torch.matmul 8192^3 bf16, best of 5 x 50), MFU against it.
# Model FLOPs per step (issue 13): 6 x token-wise linear weights per token (x_embed, q, k, v,
# proj, fc1, fc2, final linear; adaLN is per clip) + 12 x n^2 x D per layer per clip
# (GPU.md; recompute not counted). Same-computation check: the step-1 losses of both sides
# (same weights, same batch, both bf16) — their relative difference is reported.
# 4. Memory per option (MEM=1, the default; tessera only, WARMUP 0 + 1 step each): dit-1b at
#    16,384 and 65,536 tokens with model.recompute 0 (none), 1 (whole blocks) and 2 (cheap
#    layers only): the backend's peak (kernels.h memory_stats: the arena's high-water mark,
#    bench_train_step's backend_peak_bytes), and bytes per token beyond the weights, their
#    bf16 copy, gradients and Adam state (18 bytes a parameter): train.act_bytes_token, which the
#    planner's memory model (model/train/memory.h) then uses instead of its layout count. A
#    run that does not fit is reported as such (its error), not as a failure of the bench.
# Targets (issue 13), each held or not in results.json "targets": tokens/s ratio >= 1.2 on
# every case; MFU >= 0.60 for 1b-1x16384 and >= 0.50 for b-16x4096; b-64x1024's model
# TFLOP/s >= 0.8 of b-16x4096's; 1b-1x65536 trains (tessera ran with finite losses).
#
# Output in $OUT (default bench/gpu/): results.json (bench/gpu/summary.py: device, driver,
# CUDA/cuDNN versions, commit, GEMM peak, per case both sides and the ratio tessera /
# PyTorch, the targets held or not, the memory report) and bench.log
# (everything printed); one summary line per case. Dumps go to TMPDIR and are removed.
# Exit: 0 every case ran on both sides; 1 a case failed (the others still run, results.json
# is written); 2 bad input; 3 no GPU visible (after the inputs were checked: a dry run).
# results.json is rewritten after every case and memory run, so a run cut short (a lease's
# time box) keeps what finished.
# Env: BUILD_DIR (build-gpu), OUT, CASES (all; none: only the memory runs), TORCH (1; 0: the
# tessera side only: no dump, no PyTorch, no GEMM peak, so no MFU; the step times and the
# GEMM/attention paths of every case in seconds), WARMUP (3), STEPS (10), RECOMPUTE_1B (0),
# RECOMPUTE_1B_LONG (1), MEM (1: the memory runs; MEM_CASES picks them, e.g. 16384:0,65536:2),
# CASE_TIMEOUT (420 s per side), TESSERA_NVIDIA_PIP, PY (python3 with torch), TESSERA_COMMIT
# and TESSERA_DIRTY (results.json's commit and dirty where there is no .git); the tessera
# side's TESSERA_CUDA_* switches pass through (docs/gpu.md; results.json "env" records
# them): TESSERA_CUDA_GRAPHS (default 0: the eager step, which is what `tessera train` runs
# today, since the trainer does not record graphs yet; =1 shows what recorded graphs give on
# a fixed batch) and TESSERA_CUDA_ATTENTION_DETERMINISTIC (default 0, the backend's own
# default, set explicitly so that "env" records it).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD_DIR=${BUILD_DIR:-build-gpu}
BIN=$BUILD_DIR/bench/bench_train_step
OUT=${OUT:-$ROOT/bench/gpu}
WARMUP=${WARMUP:-3}
STEPS=${STEPS:-10}
RECOMPUTE_1B=${RECOMPUTE_1B:-0}
RECOMPUTE_1B_LONG=${RECOMPUTE_1B_LONG:-1}
MEM=${MEM:-1}
MEM_CASES=${MEM_CASES:-16384:0,16384:1,16384:2,65536:1,65536:2,65536:0}
CASE_TIMEOUT=${CASE_TIMEOUT:-420}
ALL=b-16x4096,b-64x1024,b-1x65536,b-mixed,1b-4x4096,1b-1x16384,1b-1x65536
CASES=${CASES:-$ALL}
TORCH=${TORCH:-1}
PIP=${TESSERA_NVIDIA_PIP:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia}
die() { echo "bench/gpu/run.sh: $2" >&2; exit "$1"; }

case_def() {  # name -> "config clips recompute" (recompute -: the config's)
  case $1 in
    b-16x4096) echo "dit-b 16x4096 -" ;;
    b-64x1024) echo "dit-b 64x1024 -" ;;
    b-1x65536) echo "dit-b 65536 -" ;;
    b-mixed) echo "dit-b 32768,16384,8192,4096,2048,1024,2x512 -" ;;
    1b-4x4096) echo "dit-1b 4x4096 $RECOMPUTE_1B" ;;
    1b-1x16384) echo "dit-1b 16384 $RECOMPUTE_1B" ;;
    1b-1x65536) echo "dit-1b 65536 $RECOMPUTE_1B_LONG" ;;
    *) return 1 ;;
  esac
}

# 1. Inputs (all checked before the GPU is, so that a dry run without one checks them).
PY=${PY:-}
[ "$TORCH" = 0 ] || [ "$TORCH" = 1 ] || die 2 "TORCH must be 1 (both sides) or 0 (tessera only)"
if [ -z "$PY" ]; then
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import torch, numpy' 2>/dev/null; then PY=$p; break; fi
  done
fi
# TORCH=0 needs a python3 for summary.py only.
[ -n "$PY" ] || { [ "$TORCH" = 0 ] && command -v python3 >/dev/null && PY=python3; } ||
  die 2 "no python3 with torch and numpy"
for f in tools/reference/bench_gpu.py tools/reference/dit.py tools/reference/safetensors_io.py \
         tools/fs_atomic.py bench/gpu/summary.py; do
  [ -f "$f" ] || die 2 "missing $f"
done
IFS=, read -r -a case_list <<<"$CASES"
[ ${#case_list[@]} -gt 0 ] || die 2 "CASES is empty (CASES=none: only the memory runs)"
[ "$CASES" = none ] && case_list=()
for c in "${case_list[@]+"${case_list[@]}"}"; do
  def=$(case_def "$c") || die 2 "unknown case $c (known: $ALL)"
  [ -f "configs/model/${def%% *}.conf" ] || die 2 "missing configs/model/${def%% *}.conf"
done
for v in WARMUP STEPS RECOMPUTE_1B RECOMPUTE_1B_LONG MEM CASE_TIMEOUT; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die 2 "$v must be a number"
done
for v in RECOMPUTE_1B RECOMPUTE_1B_LONG; do
  [ "${!v}" -le 2 ] || die 2 "$v must be 0 (none), 1 (whole blocks) or 2 (cheap layers)"
done
IFS=, read -r -a mem_list <<<"$MEM_CASES"
[ "$MEM" = 0 ] || for mc in "${mem_list[@]}"; do
  [[ $mc =~ ^[0-9]+:[0-2]$ ]] || die 2 "MEM_CASES: '$mc' is not TOKENS:RECOMPUTE (recompute 0, 1 or 2)"
done
[ "$STEPS" -ge 1 ] || die 2 "STEPS must be >= 1"
mkdir -p "$OUT" || die 2 "cannot create $OUT"

# 2. A GPU.
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1 ||
   { [ "$TORCH" = 1 ] &&
     ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; }; then
  echo "bench/gpu/run.sh: inputs checked (cases $CASES, $PY); no GPU visible" >&2
  exit 3
fi
[ -x "$BIN" ] || die 2 "no $BIN: build with CUDA first (tools/gpu_prepare.sh here or tools/gpu_build.sh there, docs/gpu.md)"
[ -d "$PIP" ] && export LD_LIBRARY_PATH=$PIP/cudnn/lib:$PIP/nccl/lib:$PIP/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The tessera side's speed switches (docs/gpu.md), unless given: recorded graphs of the
# forward and backward, and cuDNN's fp32-atomic attention backward (the backend's default;
# the deterministic one needs a dense b x H x sq x skv workspace, so long clips take the own
# kernels; PyTorch's cuDNN SDPA backward is not deterministic either).
export TESSERA_CUDA_GRAPHS=${TESSERA_CUDA_GRAPHS:-0}
export TESSERA_CUDA_ATTENTION_DETERMINISTIC=${TESSERA_CUDA_ATTENTION_DETERMINISTIC:-0}

LOG=$OUT/bench.log
: >"$LOG"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench-gpu.XXXXXX")
SMI_PID=
trap '[ -n "$SMI_PID" ] && kill "$SMI_PID" 2>/dev/null; rm -rf "$TMP"' EXIT
say() { echo "bench/gpu/run.sh: $*" | tee -a "$LOG" >&2; }

smi_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | head -1; }
smi_start() {  # samples memory.used into $1
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 100 >"$1" 2>/dev/null &
  SMI_PID=$!
}
smi_stop() { kill "$SMI_PID" 2>/dev/null; wait "$SMI_PID" 2>/dev/null; SMI_PID=; }

say "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
say "tessera: TESSERA_CUDA_GRAPHS=$TESSERA_CUDA_GRAPHS TESSERA_CUDA_ATTENTION_DETERMINISTIC=$TESSERA_CUDA_ATTENTION_DETERMINISTIC"
# results.json from what has run so far (bench/gpu/summary.py; rewritten atomically).
summary() {
  local commit dirty
  # The GPU machine has no .git: tools/gpu_lease.py passes the packed tree's commit and state.
  commit=${TESSERA_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
  dirty=${TESSERA_DIRTY:-$(git status --porcelain 2>/dev/null | grep -q . && echo true || echo false)}
  "$PY" bench/gpu/summary.py "$TMP" "$OUT/results.json" --cases "$CASES" \
    --mem-cases "$([ "$MEM" != 0 ] && echo "$MEM_CASES")" --meta "commit=$commit" \
    --meta "dirty=$dirty" --meta "warmup=$WARMUP" --meta "steps=$STEPS" --meta "torch_side=$TORCH" \
    --meta "recompute_dit_1b=$RECOMPUTE_1B" --meta "recompute_dit_1b_long=$RECOMPUTE_1B_LONG" \
    --meta "build_dir=$BUILD_DIR" "$@"
}
if [ "$TORCH" = 1 ]; then
  say "bf16 GEMM peak"
  "$PY" tools/reference/bench_gpu.py --peak --json "$TMP/peak.json" 2>&1 | tee -a "$LOG" >&2
fi

fail=0
for c in "${case_list[@]+"${case_list[@]}"}"; do
  read -r cfg spec rec <<<"$(case_def "$c")"
  sets=(--set train.precision=bf16)
  [ "$rec" != - ] && sets+=(--set "model.recompute=$rec")
  dump=$TMP/$c.safetensors
  dumparg=(--dump "$dump"); [ "$TORCH" = 1 ] || dumparg=()
  say "case $c: $cfg, clips $spec: tessera"
  base=$(smi_used); echo "$base" >"$TMP/$c.base_t"
  smi_start "$TMP/$c.smi_t"
  timeout "$CASE_TIMEOUT" "$BIN" --backend cuda --config "configs/model/$cfg.conf" "${sets[@]}" \
    --clips "$spec" --warmup "$WARMUP" --steps "$STEPS" "${dumparg[@]}" --json "$TMP/$c.t.json" \
    2>&1 | tee -a "$LOG" >&2
  rc=${PIPESTATUS[0]}
  smi_stop
  [ $rc -eq 0 ] || { say "case $c: tessera failed (exit $rc)"; fail=1; rm -f "$TMP/$c.t.json"; }
  if [ -f "$dump" ]; then
    say "case $c: PyTorch"
    base=$(smi_used); echo "$base" >"$TMP/$c.base_p"
    smi_start "$TMP/$c.smi_p"
    timeout "$CASE_TIMEOUT" "$PY" tools/reference/bench_gpu.py "$dump" --device cuda \
      --warmup "$WARMUP" --steps "$STEPS" --json "$TMP/$c.p.json" 2>&1 | tee -a "$LOG" >&2
    rc=${PIPESTATUS[0]}
    smi_stop
    [ $rc -eq 0 ] || { say "case $c: PyTorch failed (exit $rc)"; fail=1; rm -f "$TMP/$c.p.json"; }
  elif [ "$TORCH" = 1 ]; then
    say "case $c: no dump, PyTorch not run"; fail=1
  fi
  rm -f "$dump"
  summary >/dev/null 2>&1
done

# Memory per option (tessera only): one step each, the backend's peak from memory_stats.
if [ "$MEM" != 0 ]; then
  for mc in "${mem_list[@]}"; do
    tok=${mc%%:*} rec=${mc##*:}
    say "memory: dit-1b, one $tok-token clip, model.recompute=$rec"
    timeout "$CASE_TIMEOUT" "$BIN" --backend cuda --config configs/model/dit-1b.conf \
      --set train.precision=bf16 --set "model.recompute=$rec" --clips "$tok" --warmup 0 \
      --steps 1 --json "$TMP/mem-$tok-$rec.json" >"$TMP/mem-$tok-$rec.log" 2>&1
    rc=$?
    tee -a "$LOG" <"$TMP/mem-$tok-$rec.log" >&2
    [ $rc -eq 0 ] || say "memory: $tok tokens, recompute $rec: did not run (exit $rc; its error is kept)"
    summary >/dev/null 2>&1
  done
fi

# 3. results.json and the summary lines.
summary 2>&1 | tee -a "$LOG"
exit $fail
