#!/usr/bin/env bash
# tests/model/wan_golden.sh — the Wan family (model.family = wan) against diffusers'
# WanTransformer3DModel, and `tessera convert` both ways (tests/model/wan_golden.py: tiny
# random models made with diffusers, nothing downloaded; forward and backward of packed clips
# and captions of different lengths within 1e-4 relative, bitwise round trips, refusals).
# Needs the venv of tools/setup_venv.sh (TESSERA_PYTHON, default /opt/tessera/venv): without
# it the test is skipped (exit 77).
set -euo pipefail
PY=${TESSERA_PYTHON:-${TESSERA_VENV:-/opt/tessera/venv}/bin/python}
# find_spec: present without importing them (the imports alone take seconds)
FIND="import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('torch', 'diffusers', 'safetensors')))"
if ! [ -x "$PY" ] || ! "$PY" -c "$FIND" 2>/dev/null; then
  echo "SKIP: no Python venv with torch, diffusers and safetensors at $PY (tools/setup_venv.sh" \
    "creates it; TESSERA_PYTHON names its python)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$PY" "$TESSERA_SRC/tests/model/wan_golden.py" "$work" \
  "$TESSERA_BIN" "$WAN_GOLDEN_RUN"
