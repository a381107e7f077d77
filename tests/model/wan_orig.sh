#!/usr/bin/env bash
# tests/model/wan_orig.sh — `tessera convert` of the original Wan checkpoint format against
# diffusers' single-file converter (tests/model/wan_orig.py: random original-format state
# dicts, one file bf16 with the model.diffusion_model. prefix and a sharded folder f32; every
# tensor bitwise, the config from the shapes; refusals). Needs the venv of
# tools/setup_venv.sh (TESSERA_PYTHON, default /opt/tessera/venv): skipped (exit 77) without.
set -euo pipefail
. "$(dirname "$0")/../venv.sh"
need_venv torch diffusers safetensors
venv_check wan_orig "$TESSERA_BIN"
