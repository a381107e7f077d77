#!/usr/bin/env bash
# tools/gpu_prepare.sh — run HERE (no GPU needed) before a GPU lease: downloads the Debian
# packages whose headers the GPU machine lacks (SQLite, jansson, xxhash, inih) into the
# git-ignored .carry/debs, makes the small store of tests/gpu/train.sh in .carry/gpu-store,
# records the commit, and prints the device tool's `run` call that builds and tests there
# (tools/gpu.sh; docs/gpu.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(libsqlite3-dev libjansson-dev libxxhash-dev libinih-dev libinih1)
mkdir -p .carry/debs
(cd .carry/debs && apt-get download "${PKGS[@]}" >/dev/null) || {
  echo "gpu_prepare: apt-get download failed (try: apt-get update)" >&2; exit 1; }
# The training store of tests/gpu/train.sh (the GPU build has no media, so cannot ingest):
# made here with a media build's tessera, a few hundred KB.
TB=${TESSERA_BIN:-build/tools/tessera}
if [ -x "$TB" ] && TESSERA_BIN=$TB TESSERA_SRC=$PWD bash tests/gpu/train.sh --make-store .carry/gpu-store; then :
else echo "gpu_prepare: no .carry/gpu-store ($TB with media needed): tests/gpu/train.sh will skip (a)-(c)" >&2; fi
# The store of bench/dist/run.sh (8 clips of 320..2560 tokens), for STORE=.carry/dist-store there.
TESSERA_BIN=$TB bench/dist/run.sh --make-store .carry/dist-store >/dev/null 2>&1 \
  || echo "gpu_prepare: no .carry/dist-store (needs ffmpeg and a media build): bench/dist on the GPU needs it" >&2
dirty=$(git status --porcelain --untracked-files=no | wc -l)
echo "$(git rev-parse HEAD)$([ "$dirty" -gt 0 ] && echo "+dirty")" > .carry/commit
ls .carry/debs
echo "size of .carry: $(du -sh .carry | cut -f1) (the working tree and carry travel together, 64 MiB at most)"
cat <<'RUN'

Call the device tool (from the checkout the session was started in) with:
  run(command="bash tools/gpu.sh", carry=[".carry"], timeout_s=600)
tools/gpu.sh writes build.log, ctest.log, ctest.xml, bench.log and summary.json under $OUT.
A 30-minute lease split into calls (tests first, then the benchmark's cases, then memory):
docs/gpu.md, "Speed", "The next GPU session".
RUN
