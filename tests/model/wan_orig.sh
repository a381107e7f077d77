#!/usr/bin/env bash
# tests/model/wan_orig.sh — `tessera convert` of the original Wan checkpoint format against
# diffusers' single-file converter (tests/model/wan_orig.py: random original-format state
# dicts, one file bf16 with the model.diffusion_model. prefix and a sharded folder f32; every
# tensor bitwise, the config from the shapes; refusals). Needs the venv of
# tools/setup_venv.sh (TESSERA_PYTHON, default /opt/tessera/venv): skipped (exit 77) without.
set -euo pipefail
. "$(dirname "$0")/../venv.sh"
need_venv torch diffusers safetensors
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-wanorig.XXXXXX")
trap 'rm -rf "$work"' EXIT
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$PY" "$TESSERA_SRC/tests/model/wan_orig.py" "$work" \
  "$TESSERA_BIN"
