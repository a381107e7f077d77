#!/usr/bin/env bash
# tests/model/wan_golden.sh — the Wan family (model.family = wan) against diffusers'
# WanTransformer3DModel, and `tessera convert` both ways (tests/model/wan_golden.py: tiny
# random models made with diffusers, nothing downloaded; forward and backward of packed clips
# and captions of different lengths within 1e-4 relative, bitwise round trips, refusals).
# Needs the venv of tools/setup_venv.sh (TESSERA_PYTHON, default /opt/tessera/venv): without
# it the test is skipped (exit 77).
set -euo pipefail
. "$(dirname "$0")/../venv.sh"
need_venv torch diffusers safetensors
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$PY" "$TESSERA_SRC/tests/model/wan_golden.py" "$work" \
  "$TESSERA_BIN" "$WAN_GOLDEN_RUN"
