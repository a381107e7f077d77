#!/usr/bin/env bash
# tools/gpu_build.sh BUILD_DIR [CMAKE_ARGS...] — configures and builds tessera's GPU
# configuration (CUDA on, media off) on a machine that may lack the headers of SQLite,
# jansson, xxhash and inih (the GPU machine, docs/gpu.md "The GPU lease"):
#   1. when pkg-config lacks them, the .debs carried in $TESSERA_DEBS (.carry/debs, put there
#      by tools/gpu_prepare.sh) are unpacked into BUILD_DIR/deps (never into /), their .pc
#      files pointed at it and their dangling libX.so links at the system's libX.so.N;
#   2. cmake with -DTESSERA_CUDA=ON -DTESSERA_MEDIA=OFF and TESSERA_NVIDIA_PIP when the pip
#      nvidia/ tree exists, then the build of every target, with all cores.
# Used by tools/gpu_lease.py when the binaries built here (tools/gpu_prepare.sh) cannot run
# there. Env: TESSERA_NVIDIA_PIP (default PyTorch's tree on the GPU machine), TESSERA_DEBS.
# Exit 0 built; 1 failed (the reason on stderr).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:?usage: tools/gpu_build.sh BUILD_DIR [CMAKE_ARGS...]}
shift
PIP=${TESSERA_NVIDIA_PIP:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia}
DEBS=${TESSERA_DEBS:-.carry/debs}
say() { echo "gpu_build: $*" >&2; }

if ! pkg-config --exists sqlite3 jansson inih libxxhash 2>/dev/null; then
  P=$PWD/$B/deps
  ls "$DEBS"/*.deb >/dev/null 2>&1 || { say "pkg-config lacks sqlite3/jansson/inih/libxxhash" \
    "and $DEBS has no .debs: run tools/gpu_prepare.sh on the development machine and carry .carry"; exit 1; }
  mkdir -p "$P"
  for d in "$DEBS"/*.deb; do dpkg -x "$d" "$P" || { say "dpkg -x $d failed"; exit 1; }; done
  L=$P/usr/lib/x86_64-linux-gnu
  sed -i "s|^prefix=/usr\$|prefix=$P/usr|" "$L"/pkgconfig/*.pc
  for l in "$L"/lib*.so; do
    [ -e "$l" ] && continue
    sys=$(ls /usr/lib/x86_64-linux-gnu/"$(basename "$l")".* 2>/dev/null | head -1)
    if [ -n "$sys" ]; then ln -sf "$sys" "$l"; else say "warning: no system library for $(basename "$l")"; fi
  done
  export PKG_CONFIG_PATH=$L/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  say "headers from $DEBS unpacked into $P"
fi
pipargs=()
[ -d "$PIP" ] && pipargs=(-DTESSERA_NVIDIA_PIP="$PIP")
gen=()
command -v ninja >/dev/null && [ ! -f "$B/Makefile" ] && gen=(-G Ninja)
cmake -S . -B "$B" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_CUDA=ON \
  -DTESSERA_MEDIA=OFF "${pipargs[@]}" "$@" || { say "cmake configure failed"; exit 1; }
cmake --build "$B" -j"$(nproc)" || { say "build failed"; exit 1; }
