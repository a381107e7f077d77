#!/usr/bin/env bash
# tests/model/wan_sample.sh — `tessera sample --schedule wan` against diffusers' WanPipeline
# (tests/model/wan_sample.py: a tiny random WanTransformer3DModel converted, the same noise
# and padded embeddings, guidance with a negative caption; final latents within 1e-4
# relative; tessera's own schedule and unpadded captions shown to fail the comparison).
# Needs the venv of tools/setup_venv.sh (TESSERA_PYTHON, default /opt/tessera/venv): without
# it the test is skipped (exit 77).
set -euo pipefail
PY=${TESSERA_PYTHON:-${TESSERA_VENV:-/opt/tessera/venv}/bin/python}
FIND="import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('torch', 'diffusers', 'safetensors')))"
if ! [ -x "$PY" ] || ! "$PY" -c "$FIND" 2>/dev/null; then
  echo "SKIP: no Python venv with torch, diffusers and safetensors at $PY (tools/setup_venv.sh" \
    "creates it; TESSERA_PYTHON names its python)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-wansample.XXXXXX")
trap 'rm -rf "$work"' EXIT
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$PY" "$TESSERA_SRC/tests/model/wan_sample.py" "$work" \
  "$TESSERA_BIN"
