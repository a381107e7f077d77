#!/usr/bin/env bash
# tools/gpu_prepare.sh — run HERE (no GPU needed) before a GPU lease; fills the git-ignored
# .carry/ that the device tool carries (64 MiB at most) with everything the lease needs, so
# that its minutes are spent running (docs/gpu.md, "The GPU lease"):
#   .carry/gpu/     the GPU configuration built here (CUDA on, media off, portable x86-64,
#                   SQLite/jansson/inih/xxhash static, no build RPATH), its GPU tests'
#                   executables stripped of debug sections, tests.json and manifest.json
#                   (tools/gpu_lease.py pack); jq and its libraries in bin/ and lib/
#   .carry/debs/    the -dev .debs of those four libraries, for a build there if the
#                   carried binaries cannot run (tools/gpu_build.sh)
#   .carry/gpu-store, .carry/dist-store   the stores of tests/gpu/train.sh and bench/dist
#                   (the GPU build cannot ingest: made with this machine's media build)
# Env: BUILD_DIR (build-gpu-carry), TESSERA_BIN (build/tools/tessera: a media build).
# Prints the size of .carry and the device tool's calls.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build-gpu-carry}
TB=${TESSERA_BIN:-build/tools/tessera}
say() { echo "gpu_prepare: $*"; }

# 1. The binaries. RPATH off: on the GPU machine the libraries come from the pip tree
#    through LD_LIBRARY_PATH (tools/gpu_lease.py), and ldd there tells the truth.
mkdir -p "$B"
say "building $B (CUDA on, media off; log $B/prepare.log)"
start=$SECONDS
{ cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_CUDA=ON -DTESSERA_MEDIA=OFF \
    -DTESSERA_STATIC_SMALL_LIBS=ON -DTESSERA_NATIVE=OFF -DCMAKE_SKIP_BUILD_RPATH=ON &&
  cmake --build "$B" -j"$(nproc)" --target tessera bench_train_step make_latents gpu_probe gpu_backend_ops \
    gpu_arena gpu_graphs gpu_cuda_semantics test_comm_gpu; } >"$B/prepare.log" 2>&1 ||
  { tail -20 "$B/prepare.log"; say "build failed (log $B/prepare.log)"; exit 1; }
say "built in $((SECONDS - start)) s"
mkdir -p .carry/gpu
python3 tools/gpu_lease.py pack "$B" .carry/gpu

# 2. jq for the scripts that still use it (bench/dist): the GPU machine may lack it.
mkdir -p .carry/gpu/bin .carry/gpu/lib
if command -v jq >/dev/null; then
  cp "$(command -v jq)" .carry/gpu/bin/
  ldd "$(command -v jq)" | awk '/lib(jq|onig)/ { print $3 }' | xargs -r -I{} cp {} .carry/gpu/lib/
fi

# 3. The .debs for a build there.
PKGS=(libsqlite3-dev libjansson-dev libxxhash-dev libinih-dev libinih1)
mkdir -p .carry/debs
(cd .carry/debs && apt-get download "${PKGS[@]}" >/dev/null 2>&1) ||
  say "apt-get download failed (try apt-get update): no fallback build there"

# 4. The stores (a media build of tessera here).
if [ -x "$TB" ] && TESSERA_BIN=$TB TESSERA_SRC=$PWD bash tests/gpu/train.sh --make-store .carry/gpu-store >/dev/null; then
  say "store .carry/gpu-store"
else say "no .carry/gpu-store ($TB with media needed): gpu_train will skip (a)-(c)"; fi
TESSERA_BIN=$TB bench/dist/run.sh --make-store .carry/dist-store >/dev/null 2>&1 ||
  say "no .carry/dist-store (needs ffmpeg and a media build): bench/dist on the GPU needs it"

size=$(du -sm .carry | cut -f1)
say "size of .carry: ${size} MiB (the device tool carries 64 MiB at most)"
[ "$size" -lt 64 ] || { say "too large for the device tool"; exit 1; }
cat <<'RUN'

The calls (docs/gpu.md, "The GPU lease"), from this checkout, back to back:
  run(command="python3 tools/gpu_lease.py first", carry=[".carry"], timeout_s=600)
  run(command="python3 tools/gpu_lease.py second", carry=[".carry"], timeout_s=240)
Each writes lease.json, lease.log and its benchmarks' results under $OUT.
RUN
