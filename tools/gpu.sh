#!/usr/bin/env bash
# tools/gpu.sh — one command on the GPU machine (docs/gpu.md), from a fresh checkout:
#   1. headers of SQLite/jansson/xxhash/inih from the carried .debs (tools/gpu_prepare.sh)
#      unpacked into BUILD/deps when pkg-config lacks them;
#   2. configure and build: CUDA on (cuDNN, NCCL from the pip nvidia/ tree), media off;
#   3. ctest -L gpu (skipped, with the reason, when no GPU is visible);
#   4. bench/gpu/run.sh if it exists (output folder $OUT/bench);
#   5. summary.json: device, driver, CUDA/cuDNN/NCCL versions, commit, test results.
# Writes under $OUT (default bench/gpu/out): build.log ctest.log ctest.xml bench.log
# summary.json (5 files; the device tool returns 8 at most: bench/gpu/run.sh gets 3).
# Exit: 0 all ran and passed; 1 build or a test failed; 3 built, but no GPU visible.
# Env: BUILD_DIR (build-gpu), TESSERA_NVIDIA_PIP, TESSERA_DEBS (.carry/debs), CMAKE_ARGS,
# CTEST_ARGS (added to `ctest -L gpu`, e.g. "-R gpu_dist"), BENCH (1; 0: no bench/gpu/run.sh,
# for a lease split into calls: tests first, the benchmark's cases in later calls).
set -uo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
OUT=${OUT:-$SRC/bench/gpu/out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build-gpu}
PIP=${TESSERA_NVIDIA_PIP:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia}
DEBS=${TESSERA_DEBS:-.carry/debs}
stage=start; gpu=unknown
say() { echo "gpu.sh: $*"; }

summary() {  # writes $OUT/summary.json from what is known now
  python3 - "$OUT" "$B" "$stage" "$gpu" "$PIP" <<'PY'
import json, os, re, subprocess, sys, xml.etree.ElementTree as ET
out, b, stage, gpu, pip = sys.argv[1:6]
def run(*c):
    try: return subprocess.run(c, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception: return ""
def cache(k):
    try:
        for l in open(os.path.join(b, "CMakeCache.txt")):
            if l.startswith(k + ":"): return l.split("=", 1)[1].strip()
    except OSError: pass
    return ""
def hver(path, p):
    try: t = open(path).read()
    except OSError: return ""
    v = [re.search(r"#define\s+%s_%s\s+(\d+)" % (p, k), t) for k in ("MAJOR", "MINOR", "PATCHLEVEL")]
    if not v[2]: v[2] = re.search(r"#define\s+%s_PATCH\s+(\d+)" % p, t)
    return ".".join(m.group(1) for m in v if m)
commit = run("git", "rev-parse", "HEAD")
if not commit and os.path.exists(".carry/commit"): commit = open(".carry/commit").read().strip()
tests = []
try:
    for tc in ET.parse(os.path.join(out, "ctest.xml")).getroot().iter("testcase"):
        st = tc.get("status") or ("failed" if tc.find("failure") is not None else
                                  "skipped" if tc.find("skipped") is not None else "passed")
        so = tc.find("system-out")
        tests.append({"name": tc.get("name"), "status": st, "time_s": float(tc.get("time") or 0),
                      "output_tail": (so.text or "")[-400:] if so is not None else ""})
except (OSError, ET.ParseError): pass
count = lambda s: sum(1 for t in tests if t["status"] in s)
smi = run("nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader")
nv = re.search(r"release ([\d.]+), V([\d.]+)", run(cache("CMAKE_CUDA_COMPILER") or "nvcc", "--version"))
s = {"stage": stage, "gpu_visible": {"true": True, "false": False}.get(gpu), "commit": commit,
     "device": smi.splitlines()[0].split(", ")[0] if smi else "",
     "driver": smi.splitlines()[0].split(", ")[1] if smi and ", " in smi else "",
     "nvidia_smi": smi,
     "cuda": nv.group(2) if nv else "",
     "cudnn": hver(os.path.join(cache("TESSERA_CUDNN_INCLUDE_DIR"), "cudnn_version.h"), "CUDNN"),
     "cudnn_library": cache("TESSERA_CUDNN_LIBRARY"),
     "nccl": hver(os.path.join(cache("TESSERA_NCCL_INCLUDE_DIR"), "nccl.h"), "NCCL"),
     "nccl_library": cache("TESSERA_NCCL_LIBRARY"),
     "cuda_architectures": cache("CMAKE_CUDA_ARCHITECTURES"),
     "tests": {"passed": count({"passed", "run"}), "failed": count({"failed", "fail"}),
               "skipped": count({"skipped", "notrun", "disabled"}), "list": tests},
     "bench": os.path.exists(os.path.join(out, "bench.log"))}
json.dump(s, open(os.path.join(out, "summary.json"), "w"), indent=2)
print("gpu.sh: %s: stage %s, GPU %s (%s), tests %d passed, %d failed, %d skipped" % (
    os.path.join(out, "summary.json"), stage, gpu, s["device"] or "none",
    s["tests"]["passed"], s["tests"]["failed"], s["tests"]["skipped"]))
PY
}

# 1. Headers the machine lacks: unpack the carried .debs into a prefix (never into /).
if ! pkg-config --exists sqlite3 jansson inih libxxhash 2>/dev/null; then
  P=$SRC/$B/deps
  ls "$DEBS"/*.deb >/dev/null 2>&1 || { say "pkg-config lacks sqlite3/jansson/inih/libxxhash" \
    "and $DEBS has no .debs: run tools/gpu_prepare.sh here and carry .carry"; stage=deps; summary; exit 1; }
  mkdir -p "$P"
  for d in "$DEBS"/*.deb; do dpkg -x "$d" "$P"; done
  L=$P/usr/lib/x86_64-linux-gnu
  sed -i "s|^prefix=/usr\$|prefix=$P/usr|" "$L"/pkgconfig/*.pc
  # The -dev packages' libX.so links name a runtime file they do not hold: point each
  # dangling one at the system's libX.so.N (the runtime libraries are installed there).
  for l in "$L"/lib*.so; do
    [ -e "$l" ] && continue
    sys=$(ls /usr/lib/x86_64-linux-gnu/"$(basename "$l")".* 2>/dev/null | head -1)
    [ -n "$sys" ] && ln -sf "$sys" "$l" || say "warning: no system library for $(basename "$l")"
  done
  export PKG_CONFIG_PATH=$L/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  say "headers from $DEBS unpacked into $P"
fi

# 2. Configure and build. cuDNN loads its engine libraries by name at run time.
pipargs=()
if [ -d "$PIP" ]; then
  pipargs=(-DTESSERA_NVIDIA_PIP="$PIP")
  export LD_LIBRARY_PATH=$PIP/cudnn/lib:$PIP/nccl/lib:$PIP/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
gen=(); command -v ninja >/dev/null && [ ! -f "$B/Makefile" ] && gen=(-G Ninja)
stage=build
say "building $B (log: $OUT/build.log)"
start=$SECONDS
if ! { cmake -S . -B "$B" "${gen[@]}" -DTESSERA_CUDA=ON -DTESSERA_MEDIA=OFF "${pipargs[@]}" \
         ${CMAKE_ARGS:-} && cmake --build "$B" -j"$(nproc)"; } >"$OUT/build.log" 2>&1; then
  tail -20 "$OUT/build.log"; say "build failed"; summary; exit 1
fi
say "built in $((SECONDS - start)) s"

# 3. GPU tests. gpu_probe says whether a GPU is visible, and why not.
stage=test
probe=$("$B/tests/gpu_probe" 2>&1); prc=$?
echo "$probe"
if [ $prc -eq 0 ]; then gpu=true; else gpu=false; fi
# CTEST_ARGS narrows the run (e.g. "-R gpu_dist" when a lease is short).
(cd "$B" && ctest -L gpu ${CTEST_ARGS:-} --output-on-failure --output-junit "$OUT/ctest.xml" --timeout 600) \
  >"$OUT/ctest.log" 2>&1
trc=$?
tail -15 "$OUT/ctest.log"

# 4. The GPU benchmark, when there is one and a GPU to run it on.
if [ "${BENCH:-1}" = 0 ]; then
  say "bench/gpu/run.sh not run: BENCH=0"
elif [ "$gpu" = true ] && [ -x bench/gpu/run.sh ]; then
  stage=bench
  mkdir -p "$OUT/bench"
  OUT="$OUT/bench" BUILD_DIR="$B" bench/gpu/run.sh >"$OUT/bench.log" 2>&1 || say "bench/gpu/run.sh failed"
  tail -15 "$OUT/bench.log"
elif [ -e bench/gpu/run.sh ]; then
  say "bench/gpu/run.sh not run: no GPU visible or not executable"
fi
stage=done
summary
if [ "$gpu" != true ]; then say "no GPU visible: built, GPU tests skipped ($probe)"; exit 3; fi
[ $trc -eq 0 ] || { say "GPU tests failed (see $OUT/ctest.log)"; exit 1; }
