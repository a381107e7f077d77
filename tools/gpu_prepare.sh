#!/usr/bin/env bash
# tools/gpu_prepare.sh — run HERE (no GPU needed), in the checkout the session was started
# in (the device tool sends that one), before a GPU lease; fills the git-ignored .carry/ with
# everything the lease needs, so that its minutes are spent running (docs/gpu.md, "The GPU
# lease"), or stops with the reason:
#   .carry/gpu/     the GPU configuration built here (CUDA on, media off, portable x86-64,
#                   SQLite/jansson/inih/xxhash static, no build RPATH), its GPU tests'
#                   executables stripped of debug sections, tests.json and manifest.json
#                   (tools/gpu_lease.py pack: the commit, the tracked sources' hash); jq and
#                   its libraries in bin/ and lib/
#   .carry/debs/    the -dev .debs of those four libraries, for a build there if the
#                   carried binaries cannot run (tools/gpu_build.sh)
#   .carry/gpu-store, .carry/dist-store   the stores of tests/gpu/train.sh (gpu_train,
#                   gpu_memory, bench/gpu/cp_modes.sh) and bench/dist (the GPU build cannot
#                   ingest: made with a media build of tessera here, built when missing)
# A tree with uncommitted changes is refused before anything is built (figures count only
# with the clean commit they ran on); DIRTY=1 records the diff and a commit carrying it.
# Env: BUILD_DIR (build-gpu-carry), TESSERA_BIN (a media build's tessera; default
# build/tools/tessera when that has media, else build-media/tools/tessera, built here with
# CUDA off), DIRTY. ccache is used when installed. Prints the size of what travels and the
# device tool's calls.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build-gpu-carry}
say() { echo "gpu_prepare: $*"; }
die() { say "$*"; exit 1; }
start=$SECONDS
dirty=(); [ "${DIRTY:-0}" = 1 ] && dirty=(--dirty)
python3 tools/gpu_lease.py tree "${dirty[@]}" || die "stopped: commit first, or DIRTY=1"
launch=()
command -v ccache >/dev/null && launch=(-DCMAKE_C_COMPILER_LAUNCHER=ccache
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)

# 1. The binaries. RPATH off: on the GPU machine the libraries come from the pip tree
#    through LD_LIBRARY_PATH (tools/gpu_lease.py), and ldd there tells the truth.
mkdir -p "$B"
say "building $B (CUDA on, media off; log $B/prepare.log)"
{ cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_CUDA=ON -DTESSERA_MEDIA=OFF \
    -DTESSERA_STATIC_SMALL_LIBS=ON -DTESSERA_NATIVE=OFF -DCMAKE_SKIP_BUILD_RPATH=ON "${launch[@]}" &&
  cmake --build "$B" -j"$(nproc)" --target tessera bench_train_step make_latents gpu_probe gpu_backend_ops \
    gpu_arena gpu_graphs gpu_mask gpu_cuda_semantics test_comm_gpu; } >"$B/prepare.log" 2>&1 ||
  { tail -20 "$B/prepare.log"; die "build failed (log $B/prepare.log)"; }
say "built in $((SECONDS - start)) s"
mkdir -p .carry/gpu
python3 tools/gpu_lease.py pack "$B" .carry/gpu "${dirty[@]}"

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
  [ "$(ls .carry/debs/*.deb 2>/dev/null | wc -l)" -ge ${#PKGS[@]} ] ||
  die "apt-get download ${PKGS[*]} failed (apt-get update?): without them no build there"

# 4. The stores, with a media build of tessera here (the GPU build has no ingest).
has_media() { [ -x "$1" ] && "$1" --version 2>/dev/null | grep -q '^media: FFmpeg'; }
TB=${TESSERA_BIN:-}
if [ -z "$TB" ]; then
  if has_media build/tools/tessera; then TB=build/tools/tessera
  else
    TB=build-media/tools/tessera
    say "building build-media (media on, CUDA off) for the stores"
    { cmake -S . -B build-media -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_CUDA=OFF \
        -DTESSERA_MEDIA=ON "${launch[@]}" && cmake --build build-media -j"$(nproc)" --target tessera; } \
      >build-media.log 2>&1 || { tail -20 build-media.log; die "the media build failed (log build-media.log)"; }
    rm -f build-media.log
  fi
fi
has_media "$TB" || die "$TB is not a media build (tessera --version names no FFmpeg): the stores need one"
TB=$(realpath "$TB")
out=$(TESSERA_BIN=$TB TESSERA_SRC=$PWD bash tests/gpu/train.sh --make-store .carry/gpu-store 2>&1) ||
  die "the store .carry/gpu-store could not be made: $out"
[ -f .carry/gpu-store/index.sqlite ] || die "no .carry/gpu-store/index.sqlite after making it"
out=$(TESSERA_BIN=$TB bench/dist/run.sh --make-store .carry/dist-store 2>&1) ||
  die "the store .carry/dist-store could not be made: $out"
[ -f .carry/dist-store/index.sqlite ] || die "no .carry/dist-store/index.sqlite after making it"
say "stores .carry/gpu-store ($(du -sh .carry/gpu-store | cut -f1)), .carry/dist-store ($(du -sh .carry/dist-store | cut -f1))"

# 5. What travels: the tracked and untracked-not-ignored files, and .carry (64 MiB at most).
tree=$(git ls-files -z --cached --others --exclude-standard | python3 -c '
import os, sys
print(sum(os.path.getsize(p) for p in sys.stdin.read().split("\0") if os.path.isfile(p)))')
carry=$(du -sb .carry | cut -f1)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
say "travels: .carry $(mib "$carry") MiB + the tree $(mib "$tree") MiB = $(mib $((carry + tree))) MiB" \
  "(the device tool's limit: 64 MiB); $((SECONDS - start)) s in all"
[ $((carry + tree)) -lt $((64 << 20)) ] || die "too large for the device tool"
cat <<'RUN'

The calls (docs/gpu.md, "The GPU lease"), from this checkout, back to back:
  run(command="python3 tools/gpu_lease.py first", carry=[".carry"], timeout_s=360)
  run(command="python3 tools/gpu_lease.py second", carry=[".carry"], timeout_s=270)
Each leaves $OUT/lease.json and $OUT/bundle.tar.gz; merge them here with
  python3 tools/gpu_lease.py merge bench/gpu/results-DATE.json FILES_AT_1 FILES_AT_2
RUN
