#!/usr/bin/env bash
# bench/gpu/run.sh — tessera's CUDA training step against the PyTorch reference on the same
# GPU, model, weights and packed batch, in the same run (issue 11; not a test).
#
#   bench/gpu/run.sh                      (on the GPU machine, after tools/gpu.sh built build-gpu;
#                                          tools/gpu.sh runs it itself with OUT=$OUT/bench)
#   CASES=b-16x4096,1b-4x4096 WARMUP=3 STEPS=10 OUT=bench/gpu BUILD_DIR=build-gpu bench/gpu/run.sh
#
# Cases (name: config, clips as bench_train_step --clips):
#   b-16x4096   dit-b   16 x 4,096 tokens
#   b-64x1024   dit-b   64 x 1,024
#   b-1x65536   dit-b   one 65,536-token clip
#   b-mixed     dit-b   32768,16384,8192,4096,2048,1024,2x512 (65,536 tokens)
#   1b-4x4096   dit-1b  4 x 4,096
#   1b-1x16384  dit-1b  one 16,384-token clip
# dit-1b.conf has model.recompute = 1; RECOMPUTE_1B (default 0, as the earlier PyTorch figures
# of /work/shared/GPU.md) overrides it with --set on the tessera side, and the PyTorch side
# follows the dumped config (torch.utils.checkpoint per block when 1): both do the same work.
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
# Model FLOPs per step: 6 x token-wise linear weights per token + 12 x n^2 x D per layer per
# clip (GPU.md; recompute not counted). Same-computation check: the step-1 losses of both
# sides (same weights, same batch, both bf16) — their relative difference is reported.
#
# Output in $OUT (default bench/gpu/): results.json (device, driver, CUDA/cuDNN versions,
# commit, GEMM peak, per case both sides and the ratio tessera / PyTorch) and bench.log
# (everything printed); one summary line per case. Dumps go to TMPDIR and are removed.
# Exit: 0 every case ran on both sides; 1 a case failed (the others still run, results.json
# is written); 2 bad input; 3 no GPU visible (after the inputs were checked: a dry run).
# Env: BUILD_DIR (build-gpu), OUT, CASES (all), WARMUP (3), STEPS (10), RECOMPUTE_1B (0),
# CASE_TIMEOUT (420 s per side), TESSERA_NVIDIA_PIP, PY (python3 with torch).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD_DIR=${BUILD_DIR:-build-gpu}
BIN=$BUILD_DIR/bench/bench_train_step
OUT=${OUT:-$ROOT/bench/gpu}
WARMUP=${WARMUP:-3}
STEPS=${STEPS:-10}
RECOMPUTE_1B=${RECOMPUTE_1B:-0}
CASE_TIMEOUT=${CASE_TIMEOUT:-420}
ALL=b-16x4096,b-64x1024,b-1x65536,b-mixed,1b-4x4096,1b-1x16384
CASES=${CASES:-$ALL}
PIP=${TESSERA_NVIDIA_PIP:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia}
die() { echo "bench/gpu/run.sh: $2" >&2; exit "$1"; }

case_def() {  # name -> "config clips"
  case $1 in
    b-16x4096) echo "dit-b 16x4096" ;;
    b-64x1024) echo "dit-b 64x1024" ;;
    b-1x65536) echo "dit-b 65536" ;;
    b-mixed) echo "dit-b 32768,16384,8192,4096,2048,1024,2x512" ;;
    1b-4x4096) echo "dit-1b 4x4096" ;;
    1b-1x16384) echo "dit-1b 16384" ;;
    *) return 1 ;;
  esac
}

# 1. Inputs (all checked before the GPU is, so that a dry run without one checks them).
PY=${PY:-}
if [ -z "$PY" ]; then
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import torch, numpy' 2>/dev/null; then PY=$p; break; fi
  done
fi
[ -n "$PY" ] || die 2 "no python3 with torch and numpy"
for f in tools/reference/bench_gpu.py tools/reference/dit.py tools/reference/safetensors_io.py; do
  [ -f "$f" ] || die 2 "missing $f"
done
IFS=, read -r -a case_list <<<"$CASES"
[ ${#case_list[@]} -gt 0 ] || die 2 "CASES is empty"
for c in "${case_list[@]}"; do
  def=$(case_def "$c") || die 2 "unknown case $c (known: $ALL)"
  [ -f "configs/model/${def%% *}.conf" ] || die 2 "missing configs/model/${def%% *}.conf"
done
for v in WARMUP STEPS RECOMPUTE_1B CASE_TIMEOUT; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die 2 "$v must be a number"
done
[ "$STEPS" -ge 1 ] || die 2 "STEPS must be >= 1"
mkdir -p "$OUT" || die 2 "cannot create $OUT"

# 2. A GPU.
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1 ||
   ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "bench/gpu/run.sh: inputs checked (cases $CASES, $PY); no GPU visible" >&2
  exit 3
fi
[ -x "$BIN" ] || die 2 "no $BIN: build with CUDA first (tools/gpu.sh, docs/gpu.md)"
[ -d "$PIP" ] && export LD_LIBRARY_PATH=$PIP/cudnn/lib:$PIP/nccl/lib:$PIP/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

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
say "bf16 GEMM peak"
"$PY" tools/reference/bench_gpu.py --peak --json "$TMP/peak.json" 2>&1 | tee -a "$LOG" >&2

fail=0
for c in "${case_list[@]}"; do
  read -r cfg spec <<<"$(case_def "$c")"
  sets=(--set train.precision=bf16)
  [ "$cfg" = dit-1b ] && sets+=(--set "model.recompute=$RECOMPUTE_1B")
  dump=$TMP/$c.safetensors
  say "case $c: $cfg, clips $spec: tessera"
  base=$(smi_used); echo "$base" >"$TMP/$c.base_t"
  smi_start "$TMP/$c.smi_t"
  timeout "$CASE_TIMEOUT" "$BIN" --backend cuda --config "configs/model/$cfg.conf" "${sets[@]}" \
    --clips "$spec" --warmup "$WARMUP" --steps "$STEPS" --dump "$dump" --json "$TMP/$c.t.json" \
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
  else
    say "case $c: no dump, PyTorch not run"; fail=1
  fi
  rm -f "$dump"
done

# 3. results.json and the summary lines.
commit=$(git rev-parse HEAD 2>/dev/null || cat .carry/commit 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo true || echo false)
"$PY" - "$TMP" "$OUT/results.json" "$CASES" "$commit" "$dirty" "$WARMUP" "$STEPS" \
  "$RECOMPUTE_1B" "$BUILD_DIR" 2>&1 <<'PY' | tee -a "$LOG"
import json, os, re, subprocess, sys, time
tmp, out, cases, commit, dirty, warmup, steps, rec1b, build = sys.argv[1:10]
def load(p):
    try: return json.load(open(p))
    except (OSError, ValueError): return None
def run(*c):
    try: return subprocess.run(c, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception: return ""
def smi_peak(c, side):
    try:
        vals = [int(l) for l in open(os.path.join(tmp, f"{c}.smi_{side}")) if l.strip().isdigit()]
        base = int(open(os.path.join(tmp, f"{c}.base_{side}")).read())
    except (OSError, ValueError): return None
    return (max(vals) - base) * 2**20 if vals else None
smi = run("nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader")
f = smi.splitlines()[0].split(", ") if smi else ["", "", ""]
nv = re.search(r"release ([\d.]+), V([\d.]+)", run("nvcc", "--version"))
peak = load(os.path.join(tmp, "peak.json")) or {}
pk = peak.get("tflops")
res = {"benchmark": "training step: tessera CUDA backend (bf16) vs PyTorch reference "
                    "(bf16 autocast, SDPA, fused AdamW, torch.compile per block)",
       "commit": commit, "dirty": dirty == "true", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
       "device": f[0], "driver": f[1] if len(f) > 1 else "", "memory_total": f[2] if len(f) > 2 else "",
       "cuda_nvcc": nv.group(2) if nv else "", "cuda_torch": peak.get("cuda"),
       "cudnn_torch": peak.get("cudnn"), "torch": peak.get("torch"), "build_dir": build,
       "warmup": int(warmup), "steps": int(steps), "recompute_dit_1b": int(rec1b),
       "gemm_peak": peak, "flops": "6 x token-wise linear weights per token + 12 n^2 D per layer "
       "per clip (fwd+bwd, recompute not counted)", "cases": {}}
for c in cases.split(","):
    t, p = load(os.path.join(tmp, f"{c}.t.json")), load(os.path.join(tmp, f"{c}.p.json"))
    e = {"tessera": None, "pytorch": None}
    flops = p and p.get("model_flops_per_step")
    if t:
        e["tessera"] = {k: t.get(k) for k in ("backend", "precision", "recompute", "params", "tokens",
                        "clips", "clips_spec", "median_s", "mean_s", "min_s", "step_s", "tokens_per_s",
                        "losses", "activation_bytes")}
        e["tessera"]["nvidia_smi_peak_bytes"] = smi_peak(c, "t")
    if p:
        e["pytorch"] = {k: p.get(k) for k in ("torch", "tokens", "clips", "median_s", "mean_s", "min_s",
                        "step_s", "tokens_per_s", "losses", "attention_backends", "attention_runs",
                        "compile", "recompute", "fused_adamw", "max_memory_allocated",
                        "max_memory_reserved")}
        e["pytorch"]["nvidia_smi_peak_bytes"] = smi_peak(c, "p")
    e["model_flops_per_step"] = flops
    for side in ("tessera", "pytorch"):
        s = e[side]
        if s and flops:
            s["model_tflops"] = flops / s["median_s"] / 1e12
            s["mfu"] = s["model_tflops"] / pk if pk else None
    if t and p:
        e["ratio_tessera_over_pytorch"] = t["tokens_per_s"] / p["tokens_per_s"]
        l0, l1 = t["losses"][0], p["losses"][0]
        e["step1_loss_rel_diff"] = abs(l0 - l1) / abs(l1) if l1 else None
    res["cases"][c] = e
    def fmt(s):
        if not s: return "failed"
        m = s.get("nvidia_smi_peak_bytes")
        return (f"{s['tokens_per_s'] / 1e3:.1f}k tok/s, {s.get('model_tflops', 0):.0f} TFLOP/s, "
                f"MFU {s.get('mfu') or 0:.2f}, " + (f"{m / 2**30:.1f} GiB" if m else "? GiB"))
    extra = ""
    if p and p.get("max_memory_allocated"):
        extra += f" (alloc {p['max_memory_allocated'] / 2**30:.1f} GiB)"
    if "ratio_tessera_over_pytorch" in e:
        extra += f"; ratio {e['ratio_tessera_over_pytorch']:.2f}, step-1 loss diff {e['step1_loss_rel_diff']:.1e}"
    print(f"{c}: tessera {fmt(e['tessera'])}; PyTorch {fmt(e['pytorch'])}{extra}")
json.dump(res, open(out, "w"), indent=2)
print(f"GEMM peak {pk or 0:.0f} TFLOP/s ({res['device']}); wrote {out} (commit {commit[:12]})")
PY
exit $fail
