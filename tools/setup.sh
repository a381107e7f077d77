#!/usr/bin/env bash
# tools/setup.sh — install every system dependency from Debian's packages and build.
# Safe to rerun: packages already present are not reinstalled; the build is incremental.
#   tools/setup.sh            release build in build/
#   BUILD_DIR=... CMAKE_ARGS=... tools/setup.sh   other build trees (tests use build-asan/)
#   tools/setup.sh --prefix DIR   then installs into DIR: DIR/bin/tessera, its man page,
#                                 bash completion, presets and scripts (cmake --install)
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) [ $# -ge 2 ] || { echo "setup: --prefix needs a folder" >&2; exit 1; }; PREFIX=$2; shift 2 ;;
    --prefix=*) PREFIX=${1#--prefix=}; shift ;;
    *) echo "setup: unknown argument '$1' (usage: tools/setup.sh [--prefix DIR])" >&2; exit 1 ;;
  esac
done

PACKAGES=(
  build-essential cmake pkg-config git
  ccache                                                       # compiler cache (cmake/TesseraCcache.cmake)
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev  # FFmpeg: demux/decode/scale/encode
  ffmpeg                                                       # CLI: test references, benchmark baseline
  libopenmpi-dev openmpi-bin                                   # multi-rank ingest/training
  libsqlite3-dev sqlite3                                       # store index (+ CLI for tests)
  libopenblas-dev                                              # CPU GEMMs
  libjansson-dev                                               # JSON (plans, metrics, benchmarks)
  libinih-dev                                                  # INI configs (core/ini.c: model presets, cost model)
  libxxhash-dev                                                # shard checksums
  libmetis-dev                                                 # the metis placement kind (sched/placement.h)
  python3-torch python3-numpy                                  # PyTorch reference model (tools/reference/)
  time                                                         # /usr/bin/time: peak memory in benchmarks
  jq                                                           # JSON in tests and benchmark scripts
  python3-matplotlib                                           # tessera report, plan --timeline (tools/report.py)
  chromium-headless-shell                                      # tests: a browser opens a report (tests/train/report_browser.sh)
  clang libclang-rt-14-dev libomp-dev                          # libFuzzer targets (tools/fuzz.sh)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
echo "setup: built $BUILD_DIR/tools/tessera"
if [ -n "$PREFIX" ]; then
  cmake --install "$BUILD_DIR" --prefix "$PREFIX" >/dev/null
  echo "setup: installed $PREFIX/bin/tessera (man tessera; bash completion in $PREFIX/share/bash-completion)"
  case ":$PATH:" in *":$PREFIX/bin:"*) ;; *) echo "setup: $PREFIX/bin is not on PATH: export PATH=\"$PREFIX/bin:\$PATH\"" ;; esac
fi
