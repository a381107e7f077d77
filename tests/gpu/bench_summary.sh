#!/usr/bin/env bash
# tests/gpu/bench_summary.sh — bench/gpu/ without a GPU (runs in CI; label "bench"):
#   (a) bench/gpu/run.sh parses (bash -n); bad input exits 2 naming it (an unknown case, a
#       bad MEM_CASES entry, RECOMPUTE_1B=3); with no GPU visible a dry run checks its
#       inputs and exits 3 (skipped where a GPU is visible);
#   (b) bench/gpu/summary.py on made-up runs whose figures are known in closed form:
#       MFU = model FLOPs / median step / GEMM peak, the ratio tessera / PyTorch, the short-
#       clip ratio, each target held or not at its threshold (not measured when a side
#       failed), and the memory report's bytes
#       per token = (backend peak - 18 x params) / tokens; a memory run that did not fit is
#       reported with its error line.
# usage: bench_summary.sh [SRC_DIR] (default $TESSERA_SRC); needs a python3 with torch and
# numpy (as run.sh: /usr/bin/python3's Debian torch here), else skipped (77).
set -uo pipefail
SRC=${1:-${TESSERA_SRC:?}}
PY=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import torch, numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with torch and numpy (tools/setup.sh installs them)"; exit 77; }
W=$(mktemp -d "${TMPDIR:-/tmp}/tessera-bench-summary.XXXXXX")
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$SRC" || fail "no $SRC"

# (a)
bash -n bench/gpu/run.sh || fail "bench/gpu/run.sh does not parse"
out=$(CASES=b-16x4096,nope OUT="$W/o" PY=$PY bash bench/gpu/run.sh 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "unknown case nope" <<<"$out" || fail "unknown case: exit $rc: $out"
out=$(MEM_CASES=16384:7 OUT="$W/o" PY=$PY bash bench/gpu/run.sh 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "MEM_CASES: '16384:7'" <<<"$out" || fail "bad MEM_CASES: exit $rc: $out"
out=$(RECOMPUTE_1B=3 OUT="$W/o" PY=$PY bash bench/gpu/run.sh 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "RECOMPUTE_1B must be" <<<"$out" || fail "RECOMPUTE_1B=3: exit $rc: $out"
echo "ok: (a) bad CASES, MEM_CASES, RECOMPUTE_1B exit 2 naming them"
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "ok: (a) a GPU is visible: the dry run is not checked here"
else
  out=$(OUT="$W/o" PY=$PY bash bench/gpu/run.sh 2>&1); rc=$?
  [ $rc -eq 3 ] && grep -q "inputs checked (cases b-16x4096,.*1b-1x65536" <<<"$out" \
    || fail "dry run: exit $rc: $out"
  echo "ok: (a) dry run without a GPU: every case's inputs checked, exit 3"
fi

# (b) made-up runs: GEMM peak 800 TFLOP/s; flops chosen so the figures are round.
T=$W/tmp
mkdir -p "$T"
echo '{"tflops": 800.0, "torch": "x", "cuda": "13.0", "cudnn": 91900}' >"$T/peak.json"
side() {  # FILE MEDIAN_S TOKENS_PER_S [FLOPS]
  printf '{"median_s": %s, "tokens_per_s": %s, "losses": [1.0, 0.9], "tokens": 65536, "params": 100%s}\n' \
    "$2" "$3" "${4:+, \"model_flops_per_step\": $4}" >"$1"
}
# b-16x4096: 4.8e14 FLOPs; tessera 1.0 s -> 480 TFLOP/s, MFU 0.60; PyTorch 1.5 s: ratio 1.5
side "$T/b-16x4096.t.json" 1.0 65536
side "$T/b-16x4096.p.json" 1.5 43690.666666666664 4.8e14
# b-64x1024: 3.6e14 FLOPs; tessera 1.0 s -> 360 TFLOP/s: short-clip ratio 0.75 (not held);
# PyTorch 1.1 s: ratio 1.1 (not held)
side "$T/b-64x1024.t.json" 1.0 65536
side "$T/b-64x1024.p.json" 1.1 59578.18181818182 3.6e14
# 1b-1x16384: 4.0e14 FLOPs, tessera 1.0 s -> MFU 0.50 (not held)
side "$T/1b-1x16384.t.json" 1.0 16384
side "$T/1b-1x16384.p.json" 1.0 16384 4.0e14
# 1b-1x65536: tessera only (PyTorch failed): trains, ratio not held
side "$T/1b-1x65536.t.json" 6.0 10922
# memory: 16384:1 ran (peak 18 x 100 + 16384 x 1000 bytes); 65536:0 did not fit
echo '{"tokens": 16384, "params": 100, "recompute": 1, "backend_peak_bytes": 16385800, "activation_bytes": 327880, "median_s": 0.5}' >"$T/mem-16384-1.json"
printf 'bench_train_step: starting\nbench_train_step: dit_create: activations: alloc: ENOMEM: 95 GiB asked\n' >"$T/mem-65536-0.log"
"$PY" bench/gpu/summary.py "$T" "$W/results.json" --cases b-16x4096,b-64x1024,1b-1x16384,1b-1x65536 \
  --mem-cases 16384:1,65536:0 --meta commit=abc --meta steps=10 >"$W/summary.log" 2>&1 \
  || { cat "$W/summary.log"; fail "summary.py failed"; }
"$PY" - "$W/results.json" <<'PY' || fail "results.json"
import json, sys
r = json.load(open(sys.argv[1]))
def near(a, b): return a is not None and abs(a - b) <= 1e-9 * max(1, abs(b))
c = r["cases"]
assert near(c["b-16x4096"]["tessera"]["model_tflops"], 480), c["b-16x4096"]
assert near(c["b-16x4096"]["tessera"]["mfu"], 0.6)
assert near(c["b-16x4096"]["pytorch"]["mfu"], 0.4)
assert near(c["b-16x4096"]["ratio_tessera_over_pytorch"], 1.5)
assert near(c["b-64x1024"]["ratio_tessera_over_pytorch"], 1.1)
assert c["1b-1x65536"]["pytorch"] is None and "ratio_tessera_over_pytorch" not in c["1b-1x65536"]
assert r["steps"] == 10 and r["commit"] == "abc"
t = {x["target"]: x for x in r["targets"]}
want = {"ratio b-16x4096": True, "ratio b-64x1024": False, "ratio 1b-1x16384": False,
        "ratio 1b-1x65536": None, "mfu b-16x4096": True, "mfu 1b-1x16384": False,
        "short clips b-64x1024 / b-16x4096": False, "1b-1x65536 trains": True}
for k, v in want.items():
    assert t[k]["held"] is v, (k, t[k])
assert near(t["short clips b-64x1024 / b-16x4096"]["value"], 0.75)
assert near(t["mfu 1b-1x16384"]["value"], 0.5)
m = {(x["tokens"], x["recompute"]): x for x in r["memory"]}
assert m[(16384, 1)]["ran"] and near(m[(16384, 1)]["bytes_per_token"], 1000), m[(16384, 1)]
assert near(m[(16384, 1)]["layout_bytes_per_token"], (327880 - 200) / 16384)
assert near(m[(16384, 1)]["bytes_per_token_per_block"], 1000 / 18)  # dit-1b.conf: depth 18
assert not m[(65536, 0)]["ran"] and "ENOMEM" in m[(65536, 0)]["error"], m[(65536, 0)]
print("ok: (b) MFU, ratios, targets, memory report as computed by hand")
PY
grep -q "target short clips b-64x1024 / b-16x4096: 0.750 vs >= 0.8: NOT held" "$W/summary.log" \
  || { cat "$W/summary.log"; fail "summary lines"; }
grep -q "train.act_bytes_token=1000" "$W/summary.log" || fail "memory line"
grep -q "target ratio 1b-1x65536: n/a vs >= 1.2: not measured" "$W/summary.log" || fail "not measured line"
echo "ok: (b) summary lines"
