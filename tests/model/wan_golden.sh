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
venv_check wan_golden "$TESSERA_BIN" "$WAN_GOLDEN_RUN"
