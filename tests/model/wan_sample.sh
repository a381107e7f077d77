#!/usr/bin/env bash
# tests/model/wan_sample.sh — `tessera sample --schedule wan` against diffusers' WanPipeline
# (tests/model/wan_sample.py: a tiny random WanTransformer3DModel converted, the same noise
# and padded embeddings, guidance with a negative caption; final latents within 1e-4
# relative; tessera's own schedule and unpadded captions shown to fail the comparison).
# Needs the venv of tools/setup_venv.sh (TESSERA_PYTHON, default /opt/tessera/venv): without
# it the test is skipped (exit 77).
set -euo pipefail
. "$(dirname "$0")/../venv.sh"
need_venv torch diffusers safetensors
venv_check wan_sample "$TESSERA_BIN"
