#!/usr/bin/env bash
# tests/cli/backend.sh — `--backend cuda` when it cannot be had says which of two things is
# wrong (tools/backend.c): a build without the CUDA backend says it was built without it
# and how to rebuild; a build with it whose GPU cannot be opened says the backend is there,
# gives the backend's reason and what to check (nvidia-smi, CUDA_VISIBLE_DEVICES, the
# driver, or --backend cpu), and never "built without". CUDA_VISIBLE_DEVICES="" hides every
# GPU from a CUDA build (on the emulated device too: kernels/cuda/emu/cuemu.h), so the
# second case runs on any machine; a bad TESSERA_CUDA_GRAPHS makes the backend refuse
# itself with its own reason. `tessera --version` names a backend that is built but not
# usable. Every refusal happens before the config or the store is read.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"  # T, SRC, scratch, ok/bad/same/tally
scratch backend

# refused PATTERN... -- ENV... : `env ENV... tessera train ... --backend cuda` exits 1 and its
# first stderr line matches every PATTERN (grep -E); "built without" only where expected.
refused() {
  local pats=() rc=0
  while [ "$1" != -- ]; do pats+=("$1"); shift; done
  shift
  env "$@" "$T" train --config c --data d --out o --backend cuda >"$W/out" 2>"$W/err" </dev/null || rc=$?
  local first; first=$(sed -n 1p "$W/err")
  [ $rc -eq 1 ] || { bad "$*: exit $rc, want 1 ($(head -c 300 "$W/err"))"; return; }
  for p in "${pats[@]}"; do
    grep -Eq -- "$p" <<<"$first" || { bad "$*: message lacks /$p/: $first"; return; }
  done
  if [ "$BUILT" = 1 ] && grep -q "built without" <<<"$first"; then
    bad "$*: a build with the CUDA backend says it was built without it: $first"; return
  fi
  echo "ok: $* -> $first"
  ok
}

"$T" --version >"$W/version" || bad "--version failed"
BUILT=0
grep -q '^backends:.*cuda' "$W/version" && BUILT=1
if [ $BUILT = 0 ]; then
  refused "^error: tessera train: --backend cuda: this tessera was built without the CUDA backend \(built: cpu\)" \
          "cmake -DTESSERA_CUDA=ON" "--backend cpu" -- CUDA_VISIBLE_DEVICES=
else
  refused "^error: tessera train: --backend cuda: this tessera has the CUDA backend, but it could not be set up here: " \
          "cudaGetDeviceCount" "nvidia-smi" "CUDA_VISIBLE_DEVICES" "driver" "--backend cpu" -- CUDA_VISIBLE_DEVICES=
  refused "has the CUDA backend" "no CUDA-capable device|cudaGetDeviceCount" -- CUDA_VISIBLE_DEVICES=-1
  # the backend's own refusal, checked before it touches a device: the same on any machine
  refused "has the CUDA backend, but it could not be set up here: TESSERA_CUDA_GRAPHS=2: use 1" \
          -- TESSERA_CUDA_GRAPHS=2
  env CUDA_VISIBLE_DEVICES= "$T" --version >"$W/version" 2>&1
  grep -Eq '^backends: cpu, cpu-bf16, cuda \(not usable here: .*cudaGetDeviceCount' "$W/version" && ok ||
    bad "--version with no GPU visible does not name the unusable cuda backend: $(cat "$W/version")"
fi

tally "backend"
